package bench

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/pvperf/pvperf/internal/clock"
)

// cycleMHz is the CPU cycles per microsecond that -C reports in: the
// cycle counter's rate where the loops time with it, else the "cpu MHz" of
// /proc/cpuinfo (perftest's get_cpu_mhz()). Where neither is known it
// says so once and reports nanoseconds (1000).
func (s *session) cycleMHz() float64 {
	if s.cyclesMHz > 0 {
		return s.cyclesMHz
	}
	mhz := clock.TicksMHz()
	if mhz <= 0 {
		b, _ := os.ReadFile("/proc/cpuinfo")
		mhz = cpuinfoMHz(b)
	}
	if mhz <= 0 {
		fmt.Fprintf(s.errOut, " -C: the CPU's cycle rate is unknown here: the latencies are in nanoseconds\n")
		mhz = 1000
	}
	s.cyclesMHz = mhz
	return mhz
}

// cpuinfoMHz is the first "cpu MHz" of /proc/cpuinfo's text b, or 0.
func cpuinfoMHz(b []byte) float64 {
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok || strings.TrimSpace(k) != "cpu MHz" {
			continue
		}
		if f, err := strconv.ParseFloat(strings.TrimSpace(v), 64); err == nil && f > 0 {
			return f
		}
	}
	return 0
}
