package bench

import "testing"

// FuzzProcFiles: any /proc/stat or /proc/cpuinfo text is read without a
// panic; a rate read is positive.
func FuzzProcFiles(f *testing.F) {
	f.Add([]byte("cpu  10 20 30 40 50 60 70 80 0 0\ncpu0 1 2 3 4\n"))
	f.Add([]byte("cpu 1\n"))
	f.Add([]byte("processor\t: 0\ncpu MHz\t\t: 2596.132\n"))
	f.Add([]byte("cpu MHz: -5\n"))
	f.Add([]byte("cpu 18446744073709551615 18446744073709551615 1 1 1\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		_ = parseCPUTimes(b)
		if mhz := cpuinfoMHz(b); mhz < 0 || mhz != mhz {
			t.Errorf("cpu MHz %v from %q", mhz, b)
		}
	})
}
