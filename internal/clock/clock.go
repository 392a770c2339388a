package clock

import (
	"math/bits"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	_ "unsafe" // for go:linkname
)

// nanotime is the runtime's monotonic clock (what time.Now uses for its
// monotonic reading), without building a time.Time.
//
//go:linkname nanotime runtime.nanotime
func nanotime() int64

// calibration converts time-stamp counter ticks to nanoseconds:
// ns = baseNS + (ticks - baseTicks) * mult / 2^32.
type calibration struct {
	baseTicks uint64
	baseNS    int64
	mult      uint64
}

var (
	cal     atomic.Pointer[calibration]
	calOnce sync.Once
)

// Now returns monotonic nanoseconds: from the CPU's time-stamp counter once
// [Calibrate] found it usable, from the runtime's clock otherwise.
func Now() int64 {
	c := cal.Load()
	if c == nil {
		return nanotime()
	}
	hi, lo := bits.Mul64(ticks()-c.baseTicks, c.mult)
	return c.baseNS + int64(hi<<32|lo>>32)
}

// calibrationTime is how long Calibrate compares the two clocks: the error
// of the rate is about the runtime clock's resolution divided by it.
const calibrationTime = 5_000_000 // ns

// Calibrate makes Now read the time-stamp counter when this machine's
// kernel keeps time with it (its clocksource is "tsc", which means the
// counter is invariant and synchronised between CPUs), after measuring its
// rate against the runtime's clock for a few milliseconds. Elsewhere Now
// keeps using the runtime's clock. It reports whether the counter is used.
// Calibrate is safe to call concurrently and more than once; only the
// first call measures.
func Calibrate() bool {
	calOnce.Do(func() {
		if !haveTicks || !kernelUsesTSC() {
			return
		}
		t0, n0, ok0 := pair()
		for nanotime()-n0 < calibrationTime {
		}
		t1, n1, ok1 := pair()
		if !ok0 || !ok1 {
			return
		}
		if t1 <= t0 {
			return
		}
		// mult = (n1-n0) * 2^32 / (t1-t0)
		hi, lo := bits.Mul64(uint64(n1-n0), 1<<32)
		if hi >= t1-t0 {
			return // slower than 1 tick per 2^32 ns: not a usable counter
		}
		mult, _ := bits.Div64(hi, lo, t1-t0)
		cal.Store(&calibration{baseTicks: t1, baseNS: n1, mult: mult})
	})
	return cal.Load() != nil
}

// pair reads the counter and the runtime clock at (nearly) the same
// instant: the counter between two clock readings at most maxPairGap apart,
// best of a few tries, so that a preemption between the readings cannot
// skew the rate.
func pair() (t uint64, ns int64, ok bool) {
	best := int64(maxPairGap + 1)
	for range 16 {
		a := nanotime()
		tt := ticks()
		b := nanotime()
		if b-a < best {
			best, t, ns = b-a, tt, a+(b-a)/2
		}
	}
	return t, ns, best <= maxPairGap
}

const maxPairGap = 2000 // ns

func kernelUsesTSC() bool {
	b, err := os.ReadFile("/sys/devices/system/clocksource/clocksource0/current_clocksource")
	return err == nil && strings.TrimSpace(string(b)) == "tsc"
}
