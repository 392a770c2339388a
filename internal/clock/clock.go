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

// Calibrate makes Now read the time-stamp counter, after measuring its
// rate against the runtime's clock, where that is sound:
//
//   - where the kernel keeps time with the counter (its clocksource is
//     "tsc", which means the counter is invariant and synchronised between
//     CPUs);
//   - where the kernel's clock is a system call (clocksources such as hpet
//     or acpi_pm, as in emulated machines), which costs microseconds a
//     reading and would weigh on every measured operation, and the counter
//     keeps one rate in two measurements. This is what perftest does
//     everywhere: it times with the cycle counter.
//
// Elsewhere Now keeps using the runtime's clock. It reports whether the
// counter is used. Calibrate is safe to call concurrently and more than
// once; only the first call measures.
func Calibrate() bool {
	calOnce.Do(func() {
		if !haveTicks {
			return
		}
		trusted := kernelUsesTSC()
		if !trusted && readCost() < slowClock {
			return
		}
		c, ok := measure()
		if !ok {
			return
		}
		if !trusted {
			c2, ok := measure()
			if !ok || c2.mult > c.mult+c.mult/1000 || c2.mult < c.mult-c.mult/1000 {
				return // the rate changed by more than 0.1 %
			}
			c = c2
		}
		cal.Store(&c)
	})
	return cal.Load() != nil
}

// slowClock is the cost of a reading of the runtime's clock from which the
// kernel's clock is taken to be a system call rather than a vDSO read.
const slowClock = 1000 // ns

// readCost is the average cost of a reading of the runtime's clock.
func readCost() int64 {
	const n = 64
	t0 := nanotime()
	for range n {
		nanotime()
	}
	return (nanotime() - t0) / n
}

// measure compares the counter with the runtime's clock over a window long
// enough for the clock's reading error to be below 0.02 % of it.
func measure() (calibration, bool) {
	t0, n0, gap, ok := pair()
	if !ok {
		return calibration{}, false
	}
	window := max(minWindow, 5000*gap)
	for nanotime()-n0 < window {
	}
	t1, n1, _, ok := pair()
	if !ok || t1 <= t0 {
		return calibration{}, false
	}
	// mult = (n1-n0) * 2^32 / (t1-t0)
	hi, lo := bits.Mul64(uint64(n1-n0), 1<<32)
	if hi >= t1-t0 {
		return calibration{}, false // slower than 1 tick per 2^32 ns: not a usable counter
	}
	mult, _ := bits.Div64(hi, lo, t1-t0)
	return calibration{baseTicks: t1, baseNS: n1, mult: mult}, true
}

const minWindow = 5_000_000 // ns

// pair reads the counter and the runtime clock at (nearly) the same
// instant: the counter between two clock readings, the closest of a few
// tries, so that a preemption between the readings cannot skew the rate.
// It fails when no two readings were less than maxPairGap apart.
func pair() (t uint64, ns, gap int64, ok bool) {
	gap = maxPairGap + 1
	for range 16 {
		a := nanotime()
		tt := ticks()
		b := nanotime()
		if b-a < gap {
			gap, t, ns = b-a, tt, a+(b-a)/2
		}
	}
	return t, ns, gap, gap <= maxPairGap
}

const maxPairGap = 20_000 // ns

func kernelUsesTSC() bool {
	b, err := os.ReadFile("/sys/devices/system/clocksource/clocksource0/current_clocksource")
	return err == nil && strings.TrimSpace(string(b)) == "tsc"
}
