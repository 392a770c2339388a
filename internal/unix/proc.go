//go:build unix

package unix

import (
	"time"

	"golang.org/x/sys/unix"
)

// ProcessCPU returns the CPU time this process has used, user and system,
// from getrusage(2).
func ProcessCPU() (user, sys time.Duration) {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		return 0, 0
	}
	return time.Duration(ru.Utime.Nano()), time.Duration(ru.Stime.Nano())
}
