package clock

import (
	"testing"
	"time"
)

func TestNowIsMonotonicNanoseconds(t *testing.T) {
	a := Now()
	start := time.Now()
	time.Sleep(20 * time.Millisecond)
	b := Now()
	el := time.Since(start)
	if b <= a {
		t.Fatalf("clock went backwards: %d then %d", a, b)
	}
	if d := time.Duration(b - a); d < el/2 || d > 2*el+50*time.Millisecond {
		t.Fatalf("Now advanced %v while time.Since saw %v", d, el)
	}
}

func BenchmarkNow(b *testing.B) {
	for b.Loop() {
		_ = Now()
	}
}
