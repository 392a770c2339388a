package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"os"

	"github.com/pvperf/pvperf/perftest"
	"github.com/pvperf/pvperf/reports"
)

// intervalHead is what every JSON line of --interval_json starts with.
type intervalHead struct {
	Test string  `json:"test"`
	Size int     `json:"msg_size_bytes"`
	From float64 `json:"from_s"`
	To   float64 `json:"to_s"`
	// Sampled tells the interval lies in the measured window, not in
	// the margins (-f).
	Sampled bool `json:"sampled"`
	// Run is the run of a repeated test (--repeat), from 1.
	Run int `json:"run,omitempty"`
}

// bwInterval is a second of a bandwidth test.
type bwInterval struct {
	intervalHead
	Messages uint64      `json:"messages"`
	MiBps    reports.Num `json:"MiB_per_s"`
	Gbps     reports.Num `json:"Gb_per_s"`
	Mpps     reports.Num `json:"msg_rate_Mpps"`
}

// latInterval is a second of a latency test.
type latInterval struct {
	intervalHead
	Iterations uint64      `json:"iterations"`
	MeanUs     reports.Num `json:"mean_us"`
	TPS        reports.Num `json:"tps"`
}

// openIntervals opens --interval_json's file; the returned function
// closes it.
func (s *session) openIntervals() (func() error, error) {
	cfg := &s.cfg
	switch cfg.IntervalJSON {
	case "":
		return func() error { return nil }, nil
	case "-":
		w := s.out
		if s.ivOut != nil {
			w = s.ivOut
		}
		s.ivJSON = json.NewEncoder(w)
		return func() error { return nil }, nil
	}
	flags := os.O_CREATE | os.O_WRONLY | os.O_TRUNC
	if s.runNo > 1 {
		flags = os.O_CREATE | os.O_WRONLY | os.O_APPEND // after the first run's lines
	}
	f, err := os.OpenFile(cfg.IntervalJSON, flags, 0o644)
	if err != nil {
		return nil, fail(err, fmt.Sprintf(" Couldn't open interval output file %s: %v\n", cfg.IntervalJSON, err))
	}
	s.ivJSON = json.NewEncoder(f)
	return f.Close, nil
}

// startSize is called before each size's loop: the progress line of a
// sweep on a terminal, and the intervals of a duration run.
func (s *session) startSize(size int) {
	if s.prog != nil {
		s.sizeIndex++
		s.prog.set(s.sizeIndex, fmt.Sprintf("sizes: %d bytes", size))
	}
	s.watchIntervals(size)
}

// watchIntervals has the next loop, for messages of size bytes, report
// each second of a duration run: a text line (pvperf's additions to the
// text) and, with --interval_json, a JSON line.
func (s *session) watchIntervals(size int) {
	cfg := &s.cfg
	s.ep.tick = nil
	text := cfg.Extras && cfg.IntervalJSON != "-"
	if cfg.Duration == 0 || (!text && s.ivJSON == nil) {
		return
	}
	s.ep.tick = func(iv interval) {
		if text {
			_, _ = io.WriteString(s.out, s.intervalText(size, iv))
		}
		if s.ivJSON != nil {
			_ = s.ivJSON.Encode(s.intervalJSON(size, iv))
		}
	}
}

// intervalText is an interval's line of text, in the units of the
// result row.
func (s *session) intervalText(size int, iv interval) string {
	cfg := &s.cfg
	secs := (iv.To - iv.From).Seconds()
	tail := "\n"
	if !iv.Sampled {
		tail = "  (margin, not measured)\n"
	}
	head := fmt.Sprintf(" %6.2f-%6.2f sec  %-9d", iv.From.Seconds(), iv.To.Seconds(), size)
	if cfg.Test == perftest.Latency {
		avg := fmt.Sprintf("%9s", "-") // no round trip: no average (null in JSON)
		if iv.Count > 0 {
			avg = fmt.Sprintf("%9.2f", secs*1e6/float64(iv.Count)/float64(max(cfg.Verb.RTTFactor(), 1)))
		}
		return head + fmt.Sprintf(" %12d iterations  t_avg %s usec  %12.0f tps", iv.Count, avg, float64(iv.Count)/secs) + tail
	}
	bytes := float64(iv.Count) * float64(size)
	bw := fmt.Sprintf("%12.2f MiB/sec", bytes/secs/reports.MiBFactor)
	if cfg.ReportGbits {
		bw = fmt.Sprintf("%12.2f Gb/sec", bytes/secs/reports.GbitFactor)
	}
	return head + fmt.Sprintf(" %12d messages  %s  %10.6f Mpps", iv.Count, bw, float64(iv.Count)/secs/1e6) + tail
}

func (s *session) intervalJSON(size int, iv interval) any {
	cfg := &s.cfg
	secs := (iv.To - iv.From).Seconds()
	h := intervalHead{Test: cfg.TestName(), Size: size, From: iv.From.Seconds(), To: iv.To.Seconds(), Sampled: iv.Sampled, Run: s.runNo}
	n := iv.Count
	if cfg.Test == perftest.Latency {
		l := latInterval{intervalHead: h, Iterations: n, MeanUs: reports.NaN, TPS: reports.Num(float64(n) / secs)}
		if n > 0 {
			l.MeanUs = reports.Num(secs * 1e6 / float64(n) / float64(max(cfg.Verb.RTTFactor(), 1)))
		}
		return l
	}
	bytes := float64(n) * float64(size)
	return bwInterval{intervalHead: h, Messages: n, MiBps: reports.Num(bytes / secs / reports.MiBFactor),
		Gbps: reports.Num(bytes / secs / reports.GbitFactor), Mpps: reports.Num(float64(n) / secs / 1e6)}
}
