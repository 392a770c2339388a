package clock

import (
	"math/bits"
	"testing"
	"time"
)

func checkAdvance(t *testing.T) {
	t.Helper()
	// Each reading of Now is bracketed by two of the runtime's clock, so
	// that a thread preempted between readings cannot fail the check.
	a0 := time.Now()
	a := Now()
	a1 := time.Now()
	time.Sleep(20 * time.Millisecond)
	b0 := time.Now()
	b := Now()
	b1 := time.Now()
	if b <= a {
		t.Fatalf("clock went backwards: %d then %d", a, b)
	}
	least, most := b0.Sub(a1), b1.Sub(a0)
	if d := time.Duration(b - a); d < least*9/10 || d > most*11/10+time.Millisecond {
		t.Fatalf("Now advanced %v while the runtime's clock saw %v to %v", d, least, most)
	}
}

func TestNowIsMonotonicNanoseconds(t *testing.T) {
	checkAdvance(t)
	used := Calibrate()
	t.Logf("time-stamp counter used: %v: %s", used, Source())
	if Source() == "" {
		t.Error("Calibrate said nothing of its choice")
	}
	checkAdvance(t)
	// Calibrated values continue the runtime clock's.
	if d := Now() - nanotime(); d < -time.Millisecond.Nanoseconds() || d > time.Millisecond.Nanoseconds() {
		t.Errorf("Now is %v away from the runtime clock", time.Duration(d))
	}
	// Successive readings never go backwards.
	prev := Now()
	for range 1_000_000 {
		n := Now()
		if n < prev {
			t.Fatalf("clock went backwards: %d then %d", prev, n)
		}
		prev = n
	}
}

func BenchmarkNow(b *testing.B) {
	b.Run("runtime", func(b *testing.B) {
		for b.Loop() {
			_ = nanotime()
		}
	})
	b.Run("calibrated", func(b *testing.B) {
		Calibrate()
		for b.Loop() {
			_ = Now()
		}
	})
}

// TestMeasure checks a calibration against the runtime's clock: what it
// converts 20 ms of ticks to is 20 ms to within 1 %.
func TestMeasure(t *testing.T) {
	if !haveTicks {
		t.Skip("no time-stamp counter on this architecture")
	}
	c, _, ok := measure(trustedPairGap, trustedWindow)
	if !ok {
		t.Skip("the runtime's clock is too coarse here to calibrate against")
	}
	t0, n0 := ticks(), nanotime()
	time.Sleep(20 * time.Millisecond)
	t1, n1 := ticks(), nanotime()
	hi, lo := bits.Mul64(t1-t0, c.mult)
	got := int64(hi<<32 | lo>>32)
	if want := n1 - n0; got < want*99/100 || got > want*101/100 {
		t.Errorf("%d ticks convert to %d ns; the runtime clock saw %d ns", t1-t0, got, want)
	}
	t.Logf("counter rate %.3f MHz", c.mhz())
	if cost := readCost(); cost <= 0 {
		t.Errorf("read cost %d ns", cost)
	}
}
