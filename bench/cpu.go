package bench

import (
	"bytes"
	"os"
	"strconv"

	"github.com/pvperf/pvperf/reports"
)

// cpuTimes is the user and idle time of all CPUs, in clock ticks, from the
// first line of /proc/stat ("cpu  user nice system idle ..."), as
// perftest's get_cpu_stats reads it. ok is false where there is no such
// file.
type cpuTimes struct {
	user, idle int64
	ok         bool
}

func readCPUTimes() cpuTimes {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return cpuTimes{}
	}
	return parseCPUTimes(b)
}

// parseCPUTimes reads the aggregate line of a /proc/stat.
func parseCPUTimes(b []byte) cpuTimes {
	line, _, _ := bytes.Cut(b, []byte("\n"))
	f := bytes.Fields(line)
	if len(f) < 5 || string(f[0]) != "cpu" {
		return cpuTimes{}
	}
	user, err1 := strconv.ParseInt(string(f[1]), 10, 64)
	idle, err2 := strconv.ParseInt(string(f[4]), 10, 64)
	if err1 != nil || err2 != nil {
		return cpuTimes{}
	}
	return cpuTimes{user: user, idle: idle, ok: true}
}

// cpuUtil is perftest's CPU_Util[%] between two readings: user time over
// user plus idle time; 0 when either reading failed.
func cpuUtil(a, b cpuTimes) float32 {
	if !a.ok || !b.ok {
		return 0
	}
	return reports.CPUUtilization(a.user, a.idle, b.user, b.idle)
}

// relaxedOrderingCompliant is perftest's check_pcie_relaxed_ordering_compliant:
// false when the PCI bus has one of the Intel root ports whose relaxed
// ordering is broken (Broadwell-EP/Haswell-EP, device IDs 0x6f01-0x6f0e
// and 0x2f01). It reads sysfs; without it the CPU counts as compliant.
func relaxedOrderingCompliant() bool {
	devs, err := os.ReadDir("/sys/bus/pci/devices")
	if err != nil {
		return true
	}
	for _, d := range devs {
		dir := "/sys/bus/pci/devices/" + d.Name() + "/"
		vendor, err1 := readHex(dir + "vendor")
		device, err2 := readHex(dir + "device")
		if err1 != nil || err2 != nil || vendor != 0x8086 {
			continue
		}
		if (device >= 0x6f01 && device <= 0x6f0e) || device == 0x2f01 {
			return false
		}
	}
	return true
}

func readHex(name string) (uint64, error) {
	b, err := os.ReadFile(name)
	if err != nil {
		return 0, err
	}
	return strconv.ParseUint(string(bytes.TrimPrefix(bytes.TrimSpace(b), []byte("0x"))), 16, 32)
}
