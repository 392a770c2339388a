package bench

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/pvperf/pvperf/internal/clock"
)

// Duration-mode states (perftest's DurationStates).
const (
	stateStart uint32 = iota
	stateSample
	stateStopSample
	stateEnd
)

// samples are the timestamps of one run, in nanoseconds: tposted[i] when
// message i was posted, tcompleted[k] when the completion that brought the
// completed count to k+1 was polled. With the peak disabled only element 0
// of each is used (start and end of the measurement).
type samples struct {
	tposted    []int64
	tcompleted []int64
	iters      uint64  // messages counted (duration mode: in the sample window)
	cpu        float32 // CPU use in the sample window (duration mode)
}

// newSamples allocates a bandwidth loop's timestamps for tot messages: one
// per message with perMessage (the peak is measured), else the start and
// the end.
func newSamples(perMessage bool, tot uint64) samples {
	n := uint64(1)
	if perMessage {
		n = tot
	}
	return samples{tposted: make([]int64, n), tcompleted: make([]int64, n)}
}

// completedAt stamps the completion that brings the count to totC of tot
// (a completion may stand for more messages than are left).
func (sm *samples) completedAt(totC, tot uint64) { sm.tcompleted[min(totC, tot)-1] = clock.Now() }

// end closes a bandwidth loop's measurement: the sample window and CPU use
// of a duration run (dc), or the count and, without the peak, the end time
// of an iteration run.
func (sm *samples) end(dc *durationClock, tot uint64, peak bool) {
	if dc != nil {
		sm.tposted[0], sm.tcompleted[0] = dc.start.Load(), dc.stop.Load()
		sm.cpu = dc.cpuUtil()
		return
	}
	sm.iters = tot
	if !peak {
		sm.tcompleted[0] = clock.Now()
	}
}

// durationClock drives perftest's SIGALRM state machine from a goroutine:
// START -> (margin) SAMPLE -> (duration - 2*margin) STOP_SAMPLE -> (margin) END.
type durationClock struct {
	state atomic.Uint32
	start atomic.Int64
	stop  atomic.Int64
	// cpu0 and cpu1 are /proc/stat's times at the start and the end of
	// the sample window (read before done is closed).
	cpu0, cpu1 cpuTimes
	done       chan struct{}
}

// cpuUtil is the CPU use in the sample window; call it after done.
func (d *durationClock) cpuUtil() float32 { return cpuUtil(d.cpu0, d.cpu1) }

func startDuration(ctx context.Context, duration, margin int) *durationClock {
	d := &durationClock{done: make(chan struct{})}
	go func() {
		defer close(d.done)
		// A cancelled context (the peer vanished, or the caller gave up)
		// ends the test at once: the loops see stateEnd and return.
		sleep := func(s int) bool {
			t := time.NewTimer(time.Duration(s) * time.Second)
			defer t.Stop()
			select {
			case <-t.C:
				return true
			case <-ctx.Done():
				d.state.Store(stateEnd)
				return false
			}
		}
		if !sleep(margin) {
			return
		}
		d.cpu0 = readCPUTimes()
		d.start.Store(clock.Now())
		d.state.Store(stateSample)
		if !sleep(duration - 2*margin) {
			return
		}
		d.stop.Store(clock.Now())
		d.cpu1 = readCPUTimes()
		d.state.Store(stateStopSample)
		if !sleep(margin) {
			return
		}
		d.state.Store(stateEnd)
	}()
	return d
}
