package bench

import (
	"regexp"
	"runtime"
	"sync/atomic"
	"testing"

	"github.com/pvperf/pvperf/perftest"
)

// TestTurns: a loop's turns yield once turnEvery has passed since the
// last yield, reading the clock at each busy poll and every 64th idle
// one; nil turns (more than one processor) never do.
func TestTurns(t *testing.T) {
	var now int64
	reads, yields := 0, 0
	oldNow, oldYield := turnsNow, turnsYield
	defer func() { turnsNow, turnsYield = oldNow, oldYield }()
	turnsNow = func() int64 { reads++; return now }
	turnsYield = func() { yields++ }

	if newTurns(2) != nil || newTurns(8) != nil {
		t.Fatal("turns with more than one processor")
	}
	var none *turns
	none.busy()
	none.idle()

	tr := newTurns(1)
	reads = 0
	now += turnEvery - 1
	tr.busy()
	if yields != 0 || reads != 1 {
		t.Fatalf("before turnEvery: %d yields, %d clock readings; want 0, 1", yields, reads)
	}
	now++
	tr.busy()
	if yields != 1 {
		t.Fatalf("at turnEvery: %d yields, want 1", yields)
	}
	reads = 0
	now += 3 * turnEvery
	for range 63 {
		tr.idle()
	}
	if yields != 1 || reads != 0 {
		t.Fatalf("63 idle polls: %d yields, %d clock readings; want 1, 0", yields, reads)
	}
	tr.idle()
	if yields != 2 || reads != 2 {
		t.Fatalf("64th idle poll: %d yields, %d clock readings; want 2, 2 (one after the yield)", yields, reads)
	}
}

// TestTurnsOneProcessor: with one processor, a test's polling loop hands
// it to the scheduler every turnEvery (a 64 KiB write_bw of 10000 messages
// takes longer than that); with more, it runs locked to its thread and
// never yields.
func TestTurnsOneProcessor(t *testing.T) {
	var yields atomic.Int64
	old := turnsYield
	defer func() { turnsYield = old }()
	turnsYield = func() { yields.Add(1); runtime.Gosched() }
	dev := device(t, "unrestricted", 2)
	c := testConfig(perftest.Bandwidth, perftest.Write)
	c.Size, c.Iters = 65536, 10000
	for _, procs := range []int{1, 2} {
		yields.Store(0)
		prev := runtime.GOMAXPROCS(procs)
		out := runLoop(t, dev, c)
		runtime.GOMAXPROCS(prev)
		if !regexp.MustCompile(`(?m)^\s*65536\s+10000\s`).MatchString(out) {
			t.Fatalf("%d processors: no result row:\n%s", procs, out)
		}
		n := yields.Load()
		t.Logf("%d processors: %d yields", procs, n)
		if procs == 1 && n == 0 {
			t.Errorf("one processor: the loop never yielded")
		}
		if procs > 1 && n != 0 {
			t.Errorf("%d processors: the loop yielded %d times", procs, n)
		}
	}
}
