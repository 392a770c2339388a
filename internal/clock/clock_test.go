package clock

import (
	"testing"
	"time"
)

func checkAdvance(t *testing.T) {
	t.Helper()
	a := Now()
	start := time.Now()
	time.Sleep(20 * time.Millisecond)
	b := Now()
	el := time.Since(start)
	if b <= a {
		t.Fatalf("clock went backwards: %d then %d", a, b)
	}
	if d := time.Duration(b - a); d < el*9/10 || d > el*11/10+5*time.Millisecond {
		t.Fatalf("Now advanced %v while time.Since saw %v", d, el)
	}
}

func TestNowIsMonotonicNanoseconds(t *testing.T) {
	checkAdvance(t)
	used := Calibrate()
	t.Logf("time-stamp counter used: %v", used)
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
