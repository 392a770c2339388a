package bench

import (
	"runtime"

	"github.com/pvperf/pvperf/internal/clock"
)

// turns keeps a polling loop that runs on the process's only processor
// (GOMAXPROCS=1, as the commands run on a kernel device) from being
// preempted by Go's runtime. The runtime preempts a goroutine that has run
// for 10 ms without passing through the scheduler, by a signal; a
// goroutine locked to its thread (runtime.LockOSThread) is then parked and
// woken again through another thread. A loop that hands the processor
// back itself (runtime.Gosched) every turnEvery is seldom preempted (a
// pass of the loop that outlasts the 10 ms still is); with one
// processor no other thread can take the goroutine meanwhile, so the loop
// stays on its thread without a lock (with one, each Gosched would be such
// a hand-over).
//
// In an rdma_rxe guest under QEMU's emulation, a 2-byte write_bw of 20000
// messages received 2 to 12 preemption signals and made 74 to 104 futex
// calls this way, against 33 to 44 and 304 to 380 with two processors and
// a locked thread (perf stat, 3 runs each), and its message rate was 3 to
// 14 % higher (medians of the rounds' ratios, 10 to 20 interleaved rounds
// in each of three comparisons; on that noisy emulated CPU none of the
// intervals excluded 1 on its own).
//
// A nil *turns does nothing: the loops of a process with more processors
// run locked to their threads.
type turns struct {
	last int64
	// n counts idle polls between two readings of the clock.
	n uint32
}

// turnEvery is well under the runtime's 10 ms, so that its monitor, which
// sleeps up to 10 ms between checks, never sees a loop run that long
// without a pass through the scheduler, even when a pass of a bandwidth
// loop (a queue of posts) takes milliseconds, as under emulation.
const turnEvery = 4_000_000 // ns

// turnsNow and turnsYield are variables for tests.
var (
	turnsNow   = clock.Now
	turnsYield = runtime.Gosched
)

// newTurns returns the loops' turns for a process with procs processors:
// nil unless procs is 1.
func newTurns(procs int) *turns {
	if procs != 1 {
		return nil
	}
	return &turns{last: turnsNow()}
}

// busy is called after a poll that found work: the clock is read each
// time, since one pass of a bandwidth loop may post a whole queue.
func (t *turns) busy() {
	if t != nil {
		t.check()
	}
}

// idle is called after an empty poll: the clock is read every 64th (a
// latency loop spends most of its time in empty polls; the clock costs
// more than a counter under emulation).
func (t *turns) idle() {
	if t != nil {
		if t.n++; t.n&63 == 0 {
			t.check()
		}
	}
}

func (t *turns) check() {
	if now := turnsNow(); now-t.last >= turnEvery {
		turnsYield()
		t.last = turnsNow()
	}
}
