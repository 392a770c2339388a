package bench

import "testing"

func TestCPUInfoMHz(t *testing.T) {
	for _, c := range []struct {
		text string
		want float64
	}{
		{"processor\t: 0\nmodel name\t: AMD EPYC\ncpu MHz\t\t: 2596.132\n\nprocessor\t: 1\ncpu MHz\t\t: 2000.000\n", 2596.132},
		{"processor\t: 0\nBogoMIPS\t: 50.00\n", 0},
		{"cpu MHz\t: unknown\n", 0},
		{"", 0},
	} {
		if got := cpuinfoMHz([]byte(c.text)); got != c.want {
			t.Errorf("cpuinfoMHz(%q) = %v, want %v", c.text, got, c.want)
		}
	}
}
