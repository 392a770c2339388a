package bench

import (
	"context"
	"fmt"
	"math"
	"sync/atomic"
	"time"

	"github.com/pvperf/pvperf/internal/clock"
	"github.com/pvperf/pvperf/internal/unix"
	"github.com/pvperf/pvperf/reports"
	"github.com/pvperf/pvperf/reports/hdr"
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
	// window is the process's CPU over a duration run's sample window
	// (set with the window, in duration mode only).
	window    reports.CPUSpan
	hasWindow bool
	// cpu0 is the process's CPU when an iteration run's measurement
	// began (startCPU), so that its CPU is over the same window as its
	// bandwidth.
	cpu0       cpuMark
	cpuStarted bool
	// hist is a latency loop's histogram of the times between posts (nil
	// without one).
	hist *hdr.Histogram
	// free gives back the memory of the timestamps (nil: nothing to
	// give back): they are not used after.
	free func()
}

// release frees the timestamps' memory, once they have been turned into
// results (or the run failed).
func (sm *samples) release() {
	if sm.free != nil {
		sm.free()
		sm.free, sm.tposted, sm.tcompleted = nil, nil, nil
	}
}

// stamps allocates n timestamps; for many, outside the Go heap (see
// unix.Int64s): zeroed pages as the loop first writes them, instead of a
// heap block cleared whole before the loop, which for perftest's largest
// -n took long enough that an interrupt went unseen past its grace.
func stamps(n uint64) ([]int64, func(), error) {
	// perftest's ALLOCATE prints " Cannot Allocate" and exits with 1.
	if n > math.MaxInt/8 {
		return nil, nil, &failure{msg: fmt.Sprintf(" Cannot Allocate (%d timestamps)\n", n), err: unix.ENOMEM, setup: true}
	}
	t, free, err := unix.Int64s(int(n))
	if err != nil {
		return nil, nil, &failure{msg: fmt.Sprintf(" Cannot Allocate (%d timestamps: %v)\n", n, err), err: err, setup: true}
	}
	return t, free, nil
}

// newSamples allocates a bandwidth loop's timestamps for tot messages: one
// per message with perMessage (the peak is measured), else the start and
// the end.
func newSamples(perMessage bool, tot uint64) (samples, error) {
	n := uint64(1)
	if perMessage {
		n = tot
	}
	posted, freeP, err := stamps(n)
	if err != nil {
		return samples{}, err
	}
	completed, freeC, err := stamps(n)
	if err != nil {
		freeP()
		return samples{}, err
	}
	return samples{tposted: posted, tcompleted: completed, free: func() { freeP(); freeC() }}, nil
}

// startCPU marks the process's CPU at the start of an iteration run's
// measurement (its first post, or first completion on a receiving server).
func (sm *samples) startCPU() { sm.cpu0, sm.cpuStarted = markCPU(), true }

// endCPU closes the CPU window startCPU opened, for msgs messages: the
// run's CPU then covers what its bandwidth does, not the loop's setup.
func (sm *samples) endCPU(msgs uint64) {
	if sm.cpuStarted {
		sm.window, sm.hasWindow = sm.cpu0.spanTo(markCPU(), msgs), true
	}
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
		sm.setWindow(dc)
		return
	}
	sm.iters = tot
	if !peak {
		sm.tcompleted[0] = clock.Now()
	}
	sm.endCPU(tot)
}

// durationClock drives perftest's SIGALRM state machine from a goroutine:
// START -> (margin) SAMPLE -> (duration - 2*margin) STOP_SAMPLE -> (margin) END.
// With a tick function it also wakes each second of the run (each
// period of a --run_infinitely one, every) and hands it the messages
// counted in that second (the loops store their running count in count).
type durationClock struct {
	state atomic.Uint32
	start atomic.Int64
	stop  atomic.Int64
	// count is the loop's running count of completed messages (or
	// iterations), stored as it goes when there is a tick function.
	count atomic.Uint64
	// cpu0 and cpu1 are /proc/stat's times at the start and the end of
	// the sample window, mark0 and mark1 the process's CPU time then
	// (read before done is closed).
	cpu0, cpu1   cpuTimes
	mark0, mark1 cpuMark
	done         chan struct{}
	cancel       context.CancelFunc
	// every is the period of the ticks (0: a second); whole, that the
	// last part of a period is not reported when the run ends.
	every time.Duration
	whole bool
	// With a tick function: t0 is when the clock started, the origin of
	// the intervals; switches carries the switches to SAMPLE and to
	// STOP_SAMPLE to the ticks, which end an interval at each; firstDue
	// is when the first is planned (since t0).
	t0       time.Time
	switches chan phaseSwitch
	firstDue time.Duration
	// endAt is when the run ended (since t0; 0: not yet), for the last
	// interval, which the ticks may reach late.
	endAt atomic.Int64
}

// phaseSwitch is a switch of a duration run's state: when (since the
// clock started), the loop's count then, whether the new state is
// SAMPLE, and when the next switch is planned (0: none).
type phaseSwitch struct {
	at, next time.Duration
	count    uint64
	sampled  bool
}

// switched tells the ticks of a switch to the state just stored, the next
// one planned after next.
func (d *durationClock) switched(sampled bool, next time.Duration) {
	if d.switches != nil {
		at := time.Since(d.t0)
		var due time.Duration
		if next > 0 {
			due = at + next
		}
		d.switches <- phaseSwitch{at: at, next: due, count: d.count.Load(), sampled: sampled}
	}
}

// endlessLoop is a --run_infinitely loop's: stop ends it, and its rows
// come every period.
type endlessLoop struct {
	stop   <-chan struct{}
	period time.Duration
}

// startEndless starts the clock of a --run_infinitely run: it samples
// from the start until l.stop is closed or ctx ends, and calls tick every
// l.period with the messages of the period (perftest's print thread, which
// prints a row every -D seconds and nothing for the last part).
func startEndless(ctx context.Context, l *endlessLoop, tick func(interval)) *durationClock {
	ctx, cancel := context.WithCancel(ctx)
	d := &durationClock{done: make(chan struct{}), cancel: cancel, every: l.period, whole: true, t0: time.Now()}
	phases := make(chan struct{})
	d.start.Store(clock.Now())
	d.state.Store(stateSample)
	go d.ticks(phases, tick)
	go func() {
		defer close(phases)
		select {
		case <-l.stop:
		case <-ctx.Done():
		}
		d.stop.Store(clock.Now())
		d.state.Store(stateEnd)
	}()
	return d
}

// end stops the clock, if it still runs (the loop failed), and waits for
// it: an error is reported at once, not after the rest of the duration.
func (d *durationClock) end() {
	d.cancel()
	<-d.done
}

// interval is one second (or the last part of one) of a duration run, or
// one period of a --run_infinitely run.
type interval struct {
	// From and To are the interval's bounds since the run started.
	From, To time.Duration
	// Count is the messages (or iterations) completed in it.
	Count uint64
	// Sampled tells the interval lies in the measured window (not in a
	// margin).
	Sampled bool
}

// setWindow keeps the process's CPU over dc's sample window, for the
// messages counted in it; call it after dc is done.
func (sm *samples) setWindow(dc *durationClock) {
	if dc.mark0.at == 0 || dc.mark1.at == 0 {
		return
	}
	sm.window, sm.hasWindow = dc.mark0.spanTo(dc.mark1, sm.iters), true
}

// cpuUtil is the CPU use in the sample window; call it after done.
func (d *durationClock) cpuUtil() float32 { return cpuUtil(d.cpu0, d.cpu1) }

// startDuration starts the clock of a duration run; tick, if not nil, is
// called from a goroutine of the clock after each second of the run and
// once at its end, before done is closed.
func startDuration(ctx context.Context, duration, margin int, tick func(interval)) *durationClock {
	ctx, cancel := context.WithCancel(ctx)
	d := &durationClock{done: make(chan struct{}), cancel: cancel, t0: time.Now()}
	phases := d.done
	if tick != nil {
		phases = make(chan struct{})
		d.switches = make(chan phaseSwitch, 2)
		d.firstDue = time.Duration(margin) * time.Second
		go d.ticks(phases, tick)
	}
	go func() {
		defer close(phases)
		defer func() { d.endAt.Store(int64(time.Since(d.t0))) }()
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
		d.mark0 = markCPU()
		d.start.Store(clock.Now())
		d.state.Store(stateSample)
		d.switched(true, time.Duration(duration-2*margin)*time.Second)
		if !sleep(duration - 2*margin) {
			return
		}
		d.stop.Store(clock.Now())
		d.cpu1 = readCPUTimes()
		d.mark1 = markCPU()
		d.state.Store(stateStopSample)
		d.switched(false, 0)
		if !sleep(margin) {
			return
		}
		d.state.Store(stateEnd)
	}()
	return d
}

// ticks calls tick each second (or d.every) with the count of the period
// past, and a last time when phases is closed (unless the last period was
// just reported, or d.whole), then closes done.
//
// A duration run's switches to SAMPLE and to STOP_SAMPLE end an interval
// where they happened, with the loop's count then, so that no interval
// straddles the sample window's bounds: the sampled intervals add up to
// the window, and their counts to its. A tick due within a little slack
// of a planned switch is left to the switch, which then restarts the
// seconds.
func (d *durationClock) ticks(phases <-chan struct{}, tick func(interval)) {
	defer close(d.done)
	const slack = 50 * time.Millisecond
	var last time.Duration
	var lastCount uint64
	// A duration run starts in its margin (its switch to SAMPLE may have
	// happened already: it is in switches); --run_infinitely samples from
	// the start.
	sampled := d.switches == nil && d.state.Load() == stateSample
	due := d.firstDue // the next switch planned (0: none)
	if d.switches == nil {
		due = 0
	}
	report := func(at time.Duration, c uint64) {
		c = max(c, lastCount)
		tick(interval{From: last, To: at, Count: c - lastCount, Sampled: sampled})
		last, lastCount = at, c
	}
	every := d.every
	if every == 0 {
		every = time.Second
	}
	tk := time.NewTicker(every)
	defer tk.Stop()
	switched := func(sw phaseSwitch) {
		if sw.at-last >= slack/5 || sw.count != lastCount {
			report(sw.at, sw.count)
		}
		// else (a margin of 0) nothing happened before the switch: the
		// next interval starts where this one did.
		sampled, due = sw.sampled, sw.next
		tk.Reset(every)
	}
	for {
		select {
		case <-tk.C:
			at := time.Since(d.t0)
			if d.switches != nil && (due > 0 && at >= due-slack || len(d.switches) > 0) {
				// The switch, planned or made, ends this second.
				continue
			}
			report(at, d.count.Load())
		case sw := <-d.switches:
			switched(sw)
		case <-phases:
			for len(d.switches) > 0 {
				switched(<-d.switches)
			}
			end := time.Duration(d.endAt.Load())
			if end == 0 {
				end = time.Since(d.t0)
			}
			if !d.whole && end-last > 2*slack {
				report(end, d.count.Load())
			}
			return
		}
	}
}
