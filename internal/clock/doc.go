// Package clock is the time base of the benchmark loops: a monotonic
// nanosecond counter cheap enough to read once per work request, as
// perftest reads the CPU's cycle counter.
//
// Now is safe for concurrent use; values from different processes are not
// comparable.
package clock
