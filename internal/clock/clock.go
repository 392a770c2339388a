package clock

import (
	"fmt"
	"math/bits"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"
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
		how := calibrate()
		source.Store(&how)
	})
	return cal.Load() != nil
}

// TicksMHz is the rate of the CPU's cycle counter in ticks per
// microsecond once Calibrate has chosen it for Now, else 0.
func TicksMHz() float64 {
	if c := cal.Load(); c != nil {
		return c.mhz()
	}
	return 0
}

// source says which clock Now reads and why.
var source atomic.Pointer[string]

// Source says which clock Now reads and why ("" before Calibrate): the
// checks in guests print it.
func Source() string {
	if s := source.Load(); s != nil {
		return *s
	}
	return ""
}

// calibrate is Calibrate's measurement; it returns what it decided.
func calibrate() string {
	if !haveTicks {
		return "runtime clock: no time-stamp counter on this architecture"
	}
	if kernelUsesTSC() {
		c, gap, ok := measure(trustedPairGap, trustedWindow)
		if !ok {
			return fmt.Sprintf("runtime clock: the counter could not be measured (clock readings %v apart)", time.Duration(gap))
		}
		cal.Store(&c)
		return fmt.Sprintf("time-stamp counter at %.3f MHz (the kernel's clocksource is tsc)", c.mhz())
	}
	cost := readCost()
	if cost < slowClock {
		return fmt.Sprintf("runtime clock: a reading costs %v and the kernel does not keep time with the counter", time.Duration(cost))
	}
	c, gap, ok := measure(slowPairGap, slowWindow)
	if !ok {
		return fmt.Sprintf("runtime clock (%v a reading): the counter could not be measured (clock readings %v apart)", time.Duration(cost), time.Duration(gap))
	}
	c2, _, ok := measure(slowPairGap, slowWindow)
	if !ok || c2.mult > c.mult+c.mult/slowTolerance || c2.mult < c.mult-c.mult/slowTolerance {
		return fmt.Sprintf("runtime clock (%v a reading): the counter's rate changed between two measurements (%.3f, then %.3f MHz)", time.Duration(cost), c.mhz(), c2.mhz())
	}
	cal.Store(&c2)
	return fmt.Sprintf("time-stamp counter at %.3f MHz (the kernel's clock costs %v a reading; measured twice, clock readings %v apart)", c2.mhz(), time.Duration(cost), time.Duration(gap))
}

// Where the kernel keeps time with the counter, a measurement pairs clock
// readings at most trustedPairGap apart and lasts trustedWindow times the
// pairing's gap (a rate to 0.02 %). Where the kernel's clock is a slow
// system call (an emulated HPET: microseconds in a guest, milliseconds in
// a guest nested in another), readings may be slowPairGap apart and a
// measurement lasts slowWindow times the gap (a rate to 0.2 %); two must
// agree to within 1/slowTolerance (1 %), which a counter tied to executed
// instructions would not.
const (
	trustedPairGap = 20_000 // ns
	trustedWindow  = 5000
	slowPairGap    = 2_000_000 // ns
	slowWindow     = 500
	slowTolerance  = 100
)

// mhz is the counter's rate.
func (c *calibration) mhz() float64 { return float64(uint64(1)<<32) / float64(c.mult) * 1000 }

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

// measure compares the counter with the runtime's clock over a window of
// windowGaps times the gap between the clock readings that bracket a
// counter reading (at least minWindow), so that the reading error is
// 1/windowGaps of the window. It fails when no two readings were less than
// maxGap apart; gap is the smallest seen.
func measure(maxGap, windowGaps int64) (c calibration, gap int64, ok bool) {
	t0, n0, gap, ok := pair(maxGap)
	if !ok {
		return calibration{}, gap, false
	}
	window := max(minWindow, windowGaps*gap)
	for nanotime()-n0 < window {
	}
	t1, n1, _, ok := pair(maxGap)
	if !ok || t1 <= t0 {
		return calibration{}, gap, false
	}
	// mult = (n1-n0) * 2^32 / (t1-t0)
	hi, lo := bits.Mul64(uint64(n1-n0), 1<<32)
	if hi >= t1-t0 {
		return calibration{}, gap, false // slower than 1 tick per 2^32 ns: not a usable counter
	}
	mult, _ := bits.Div64(hi, lo, t1-t0)
	return calibration{baseTicks: t1, baseNS: n1, mult: mult}, gap, true
}

const minWindow = 5_000_000 // ns

// pair reads the counter and the runtime clock at (nearly) the same
// instant: the counter between two clock readings, the closest of a few
// tries, so that a preemption between the readings cannot skew the rate.
// It fails when no two readings were less than maxGap apart.
func pair(maxGap int64) (t uint64, ns, gap int64, ok bool) {
	gap = maxGap + 1
	for range 16 {
		a := nanotime()
		tt := ticks()
		b := nanotime()
		if b-a < gap {
			gap, t, ns = b-a, tt, a+(b-a)/2
		}
	}
	return t, ns, gap, gap <= maxGap
}

func kernelUsesTSC() bool {
	b, err := os.ReadFile("/sys/devices/system/clocksource/clocksource0/current_clocksource")
	return err == nil && strings.TrimSpace(string(b)) == "tsc"
}
