package clock

const haveTicks = true

// ticks reads the time-stamp counter (RDTSC), as perftest's get_cycles
// does on x86.
//
//go:noescape
func ticks() uint64
