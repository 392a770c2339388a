package unix

import (
	"os"
	"strconv"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"
)

// CPUNode returns the NUMA node of the CPU the calling thread runs on, as
// perftest finds it: getcpu(2), then the nodeN entry of
// /sys/devices/system/cpu/cpuM (none without NUMA support: false).
func CPUNode() (int, bool) {
	var cpu uint32
	if _, _, e := unix.Syscall(unix.SYS_GETCPU, uintptr(unsafe.Pointer(&cpu)), 0, 0); e != 0 {
		return 0, false
	}
	entries, err := os.ReadDir("/sys/devices/system/cpu/cpu" + strconv.FormatUint(uint64(cpu), 10))
	if err != nil {
		return 0, false
	}
	for _, e := range entries {
		if n, ok := strings.CutPrefix(e.Name(), "node"); ok {
			if v, err := strconv.Atoi(n); err == nil && v >= 0 {
				return v, true
			}
		}
	}
	return 0, false
}
