// Package clock is the time base of the benchmark loops: a monotonic
// nanosecond counter cheap enough to read once per work request, as
// perftest reads the CPU's cycle counter.
//
// On amd64 machines whose kernel keeps time with the time-stamp counter,
// [Calibrate] switches [Now] from the runtime's clock (a vDSO call, 20 to
// 50 ns) to RDTSC scaled to nanoseconds (about half that in a VM, less on
// bare metal). It does so too where the kernel's clock is a system call
// (3 to 4 µs a reading in a QEMU guest without KVM, whose clocksource is
// hpet), as perftest always does. Callers calibrate once before a
// measurement; Now is correct before and after, but a difference must not
// span the switch.
//
// Now and Calibrate are safe for concurrent use; values from different
// processes are not comparable.
package clock
