package bench

import (
	"encoding/json"
	"fmt"
	"math"
	"time"

	"github.com/pvperf/pvperf/bench/oob"
	"github.com/pvperf/pvperf/internal/clock"
	"github.com/pvperf/pvperf/internal/unix"
	"github.com/pvperf/pvperf/reports"
)

// cpuMark is a point of the process's CPU time (user and system, all its
// threads) on the loops' clock.
type cpuMark struct {
	at  int64 // clock.Now
	cpu time.Duration
}

func markCPU() cpuMark {
	return cpuMark{at: clock.Now(), cpu: unix.ProcessCPU()}
}

// spanSince is the CPU time used since m, over the time passed, for msgs
// messages.
func (m cpuMark) spanTo(e cpuMark, msgs uint64) reports.CPUSpan {
	return reports.CPUSpan{CPUSeconds: (e.cpu - m.cpu).Seconds(), WallSeconds: float64(e.at-m.at) / 1e9, Messages: msgs}
}

// recordCPU keeps the CPU this side used measuring messages of size bytes.
func (s *session) recordCPU(size int, span reports.CPUSpan) {
	span.Size = uint64(size)
	s.cpu = append(s.cpu, span)
}

// keepCPU records the CPU of a loop started at m0 that returned sm: over
// its measurement window (a duration run's sample window, or a bandwidth
// loop's from its first post to its last completion), else over the whole
// loop (latency loops), for iters messages (the loop's count in a
// duration run).
func (s *session) keepCPU(size int, m0 cpuMark, sm samples, iters uint64) {
	span := m0.spanTo(markCPU(), iters)
	if sm.hasWindow {
		span = sm.window
	}
	s.recordCPU(size, span)
}

// extraWait bounds the wait for a pvperf peer's message at the end of a
// test: a perftest peer closes the connection, a pvperf one answers at
// once.
const extraWait = 2 * time.Second

// cpuMessage is the payload of pvperf's message with --cpu_util.
type cpuMessage struct {
	CPU []reports.CPUSpan `json:"cpu"`
}

// exchangeCPU trades this side's CPU spans with a pvperf peer's; a peer
// that sends none (perftest, or a pvperf side without --cpu_util) leaves
// the remote columns empty.
func (s *session) exchangeCPU() {
	out, err := json.Marshal(cpuMessage{CPU: s.cpu})
	if err != nil {
		return
	}
	in, err := s.conn.ExchangeExtra(out, true, extraWait)
	if err != nil {
		return
	}
	peer, err := parseCPUMessage(in)
	if err != nil {
		_, _ = s.errOut.Write([]byte(" Ignoring the peer's CPU figures: " + err.Error() + "\n"))
		return
	}
	s.peerCPU = peer
}

// parseCPUMessage reads a peer's CPU spans, refusing values no
// measurement gives.
func parseCPUMessage(b []byte) ([]reports.CPUSpan, error) {
	var m cpuMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("cpu message: %w: %w", oob.ErrMalformed, err)
	}
	for _, c := range m.CPU {
		if !(c.CPUSeconds >= 0 && c.WallSeconds >= 0) || math.IsInf(c.CPUSeconds, 0) || math.IsInf(c.WallSeconds, 0) {
			return nil, fmt.Errorf("cpu message: size %d: cpu %v s over %v s: %w", c.Size, c.CPUSeconds, c.WallSeconds, oob.ErrMalformed)
		}
	}
	return m.CPU, nil
}
