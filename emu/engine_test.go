package emu

import (
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pvperf/pvperf/verbs"
)

// TestTimerHeap: timers come out in time order, and scheduling one (the
// poster's thread does it) allocates nothing once the heap has room.
func TestTimerHeap(t *testing.T) {
	var h timerHeap
	base := time.Now()
	r := rand.New(rand.NewPCG(1, 2))
	for range 500 {
		h.push(timer{at: base.Add(time.Duration(r.IntN(1000)) * time.Microsecond), seq: uint64(len(h))})
	}
	prev := base
	for len(h) > 0 {
		x := h.pop()
		if x.at.Before(prev) {
			t.Fatalf("timer at %v after one at %v", x.at.Sub(base), prev.Sub(base))
		}
		prev = x.at
	}
	if n := testing.AllocsPerRun(100, func() {
		h.push(timer{at: base.Add(time.Duration(r.IntN(1000))), seq: 1})
		h.push(timer{at: base, seq: 2})
		if x := h.pop(); x.seq != 2 {
			t.Errorf("popped timer %d first, want 2", x.seq)
		}
		h.pop()
	}); n != 0 {
		t.Errorf("push and pop: %v allocations, want 0", n)
	}
}

// TestHousekeepingDuringReset: a QP that a peer flagged for flushing and
// that its owner is resetting is left to the reset. Housekeeping used to
// set its state to RESET while holding its send lock, which that takes
// too, and hung.
func TestHousekeepingDuringReset(t *testing.T) {
	ctx := openBench(t)
	t.Cleanup(func() { ctx.Close() })
	e := newEndpoint(t, ctx, 1<<16)
	t.Cleanup(e.close)
	q := e.qp.(*qp)
	h := q.c.h
	// The moment inside reset: the state is RESET, the flag not yet
	// cleared.
	store(&q.sh.state, uint32(verbs.StateReset))
	store(&q.sh.flush, 1)
	atomic.AddUint32(&h.tab.hdr.attention, 1)
	// Housekeeping runs here, or in the engine if it gets there first;
	// either way the QP's send lock must be free afterwards.
	within := func(what string, f func()) {
		done := make(chan struct{})
		go func() { f(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			// A panic in another goroutine ends the process at once,
			// with every goroutine's stack. t.Fatal, or a panic here,
			// would run the cleanups, which close the QP and wait for
			// the same lock for ever.
			go func() { panic(what + " hangs: housekeeping holds the send lock of a QP being reset") }()
			select {}
		}
	}
	within("housekeeping", h.housekeeping)
	within("taking the send lock", func() { q.LockSend(); q.UnlockSend() })
	if load(&q.sh.flush) != 0 {
		t.Error("the flush flag is still set")
	}
}
