//go:build unix

package unix

import (
	"time"

	"golang.org/x/sys/unix"
)

// ProcessCPU returns the CPU time this process has used, user and system,
// all threads: the clock CLOCK_PROCESS_CPUTIME_ID, in nanoseconds, which
// includes the calling thread's time up to the call. (getrusage(2) gives
// microseconds, and splits the same total into user and system time by
// sampling, adjusted to stay monotonic, which makes short windows jump.)
func ProcessCPU() time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_PROCESS_CPUTIME_ID, &ts); err != nil {
		return 0
	}
	return time.Duration(ts.Nano())
}
