package reports

import (
	"fmt"
	"io"
	"strings"
)

// CPUSpan is the CPU time a side's process used (user and system, every
// thread) over the measurement of one message size, with the wall time
// it lasted and the messages it measured (perftest's iterations over all
// queue pairs: the messages sent, or received, or the round trips).
type CPUSpan struct {
	Size        uint64  `json:"msg_size_bytes"`
	CPUSeconds  float64 `json:"cpu_s"`
	WallSeconds float64 `json:"wall_s"`
	Messages    uint64  `json:"messages"`
}

// CPUStats is a row's CPU use: the share of one CPU the process used over
// the measurement (100 = one CPU busy all along) and its service demand,
// the CPU time per message; local is this side's, remote the peer's (NaN
// when the peer did not send it: perftest does not).
type CPUStats struct {
	LocalPercent   Num `json:"local_percent"`
	LocalUsPerMsg  Num `json:"local_us_per_msg"`
	RemotePercent  Num `json:"remote_percent"`
	RemoteUsPerMsg Num `json:"remote_us_per_msg"`
}

func (c CPUSpan) percent() Num {
	if c.WallSeconds <= 0 {
		return NaN
	}
	return Num(100 * c.CPUSeconds / c.WallSeconds)
}

func (c CPUSpan) usPerMsg() Num {
	if c.Messages == 0 {
		return NaN
	}
	return Num(c.CPUSeconds * 1e6 / float64(c.Messages))
}

// over is the span c of a side that counted no messages, carried over
// the window and messages of w, the other side's: its CPU use is kept.
func (c CPUSpan) over(w CPUSpan) CPUSpan {
	if c.WallSeconds > 0 && w.WallSeconds > 0 {
		c.CPUSeconds *= w.WallSeconds / c.WallSeconds
		c.WallSeconds = w.WallSeconds
	}
	c.Messages = w.Messages
	return c
}

// AttachCPU sets the CPU statistics of the run's rows from this side's
// spans and the peer's (either may lack a size), by message size. A
// span's messages count for both sides: the peer's CPU per message is per
// message this side measured when the peer counted none (a WRITE or READ
// server). Such a side measured over its whole wait, which is longer than
// the window of the messages (the margins of -D, the setup): its CPU use
// is taken as steady over its wait, and its CPU per message is that use
// over the other side's window, per message of it.
func (r *Run) AttachCPU(local, remote []CPUSpan) {
	find := func(spans []CPUSpan, size uint64) (CPUSpan, bool) {
		for _, s := range spans {
			if s.Size == size {
				return s, true
			}
		}
		return CPUSpan{}, false
	}
	for i := range r.Results {
		res := &r.Results[i]
		l, lok := find(local, res.Size)
		m, mok := find(remote, res.Size)
		if !lok && !mok {
			continue
		}
		st := &CPUStats{LocalPercent: NaN, LocalUsPerMsg: NaN, RemotePercent: NaN, RemoteUsPerMsg: NaN}
		if lok && l.Messages == 0 && mok {
			l = l.over(m)
		}
		if mok && m.Messages == 0 && lok {
			m = m.over(l)
		}
		if lok {
			st.LocalPercent, st.LocalUsPerMsg = l.percent(), l.usPerMsg()
		}
		if mok {
			st.RemotePercent, st.RemoteUsPerMsg = m.percent(), m.usPerMsg()
		}
		res.CPU = st
	}
}

// WriteCPU prints, after perftest's text, each size's CPU use and service
// demand, local and remote; nothing when no row has them.
func WriteCPU(w io.Writer, rows []Result) error {
	var b strings.Builder
	seen := map[uint64]bool{}
	for _, r := range rows {
		c := r.CPU
		if c == nil || seen[r.Size] {
			continue
		}
		seen[r.Size] = true
		if b.Len() == 0 {
			b.WriteString(" CPU use over the measurement (100% = one CPU) and CPU time per message (service demand)\n")
			fmt.Fprintf(&b, " %-10s %12s %12s %18s %18s\n", "#bytes", "local[%]", "remote[%]", "local[usec/msg]", "remote[usec/msg]")
		}
		f := func(v Num, prec int) string {
			if !v.Valid() {
				return "-"
			}
			return fmt.Sprintf("%.*f", prec, float64(v))
		}
		fmt.Fprintf(&b, " %-10d %12s %12s %18s %18s\n", r.Size, f(c.LocalPercent, 2), f(c.RemotePercent, 2),
			f(c.LocalUsPerMsg, 4), f(c.RemoteUsPerMsg, 4))
	}
	if b.Len() == 0 {
		return nil
	}
	b.WriteString(ResultLine)
	return writeString(w, b.String())
}
