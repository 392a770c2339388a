package emu

import (
	"math/rand/v2"
	"testing"
	"time"
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
