package reports

import (
	"math"
	"testing"
)

// The expected strings were printed by glibc's printf (gcc, x86-64, Debian)
// for the same format and C argument.
func TestCSprintfMatchesGlibc(t *testing.T) {
	negNaN := math.Copysign(math.NaN(), -1)
	cases := []struct {
		format string
		arg    any
		want   string
	}{
		// '#' with x: no 0x for zero, the width counts the prefix.
		{"%#x", 0, "0"},
		{"%#x", 1, "0x1"},
		{"%#04x", 0, "0000"},
		{"%#04x", 1, "0x01"},
		{"%#04x", 0x80, "0x80"},
		{"%#06x", 0x108, "0x0108"},
		{"%#06x", 0, "000000"},
		{"%#06x", 0x8e796, "0x8e796"},
		{"%#08x", 0x2a1, "0x0002a1"},
		{"%#08x", 0x740e600, "0x740e600"},
		{"%#016llx", uint64(0x7f9bbf3c1000), "0x007f9bbf3c1000"},
		{"%#016llx", uint64(0), "0000000000000000"},
		{"%#016llx", uint64(math.MaxUint64), "0xffffffffffffffff"},
		{"%#.3x", 1, "0x001"},
		{"%#010x", 255, "0x000000ff"},
		{"%x", 255, "ff"},
		{"%X", 255, "FF"},
		{"%#X", 255, "0XFF"},
		{"%o", 8, "10"},
		{"%#o", 8, "010"},
		{"%#o", 0, "0"},
		// Floats.
		{"%-7.2lf", 11034.234, "11034.23"},
		{"%-7.2lf", 0.1, "0.10   "},
		{"%-7.2lf", 33.45, "33.45  "},
		{"%lf", 0.1, "0.100000"},
		{"%-7.6lf", 0.000459, "0.000459"},
		{"%-7.6lf", 1234.5, "1234.500000"},
		{"%.2f", 0.125, "0.12"}, // exact tie: round half to even
		{"%.2f", 0.375, "0.38"},
		{"%.2f", 2.675, "2.67"}, // 2.67499999...
		{"%.0f", 2.5, "2"},
		{"%.0f", 3.5, "4"},
		{"%.2f", -0.001, "-0.00"},
		{"%.2f", 1e20, "100000000000000000000.00"},
		{"%-7.2f", math.Inf(1), "inf    "},
		{"%-7.2f", math.Inf(-1), "-inf   "},
		{"%-7.2f", math.NaN(), "nan    "},
		{"%-7.2f", negNaN, "-nan   "},
		{"%07.2f", -1.5, "-001.50"},
		{"%+.3f", 2.0, "+2.000"},
		{"% .3f", 2.0, " 2.000"},
		{"%-3.2f", 12.345, "12.35"},
		{"%-3.2f", float32(12.5), "12.50"},
		{"%g", 0.1, "0.1"},
		{"%g", 100000.0, "100000"},
		{"%g", 1000000.0, "1e+06"},
		{"%g", 1e-5, "1e-05"},
		{"%g", 0.0001, "0.0001"},
		{"%g", 123456789.0, "1.23457e+08"},
		{"%g", 20.505, "20.505"},
		{"%g", 0.0, "0"},
		{"%g", 1.5e-7, "1.5e-07"},
		{"%g", 999999.5, "1e+06"},
		{"%g", 9.9999995, "10"},
		{"%#g", 1.0, "1.00000"},
		{"%.3g", 1234.0, "1.23e+03"},
		{"%g", math.Inf(1), "inf"},
		{"%g", math.Copysign(0, -1), "-0"},
		{"%.0g", 0.5, "0.5"},
		{"%g", 159.05, "159.05"},
		{"%e", 12345.678, "1.234568e+04"},
		{"%.2e", 0.0, "0.00e+00"},
		{"%E", 1e-300, "1.000000E-300"},
		{"%e", 1e100, "1.000000e+100"},
		// Integers.
		{"%d", -5, "-5"},
		{"%5d", -5, "   -5"},
		{"%-5d|", 42, "42   |"},
		{"%05d", -42, "-0042"},
		{"%.3d", 7, "007"},
		{"%.0d", 0, ""},
		{"%+d", 5, "+5"},
		{"% d", 5, " 5"},
		{"%02d", 5, "05"},
		{"%02d", 255, "255"},
		{"%u", uint32(4294967295), "4294967295"},
		{"%u", -1, "4294967295"},
		{"%lu", uint64(math.MaxUint64), "18446744073709551615"},
		{"%lu", uint64(20), "20"},
		{"%-10lu|", uint64(20), "20        |"},
		{"%hu", 16, "16"},
		{"%hu", 65537, "1"},
		{"%lld", int64(math.MinInt64), "-9223372036854775808"},
		// Strings and characters.
		{"%s", "abc", "abc"},
		{"%5s", "abc", "  abc"},
		{"%-5s|", "abc", "abc  |"},
		{"%.2s", "abc", "ab"},
		{"%c", 'A', "A"},
		{"%%%d", 1, "%1"},
	}
	for _, c := range cases {
		if got := cSprintf(c.format, c.arg); got != c.want {
			t.Errorf("cSprintf(%q, %v) = %q, want %q", c.format, c.arg, got, c.want)
		}
	}
}

func TestCSprintfBadInput(t *testing.T) {
	for _, c := range []struct {
		format string
		args   []any
		want   string
	}{
		{"%d", nil, "%!d(MISSING)"},
		{"%d", []any{"x"}, "%!d(BADTYPE)"},
		{"%f", []any{1}, "%!f(BADTYPE)"},
		{"%s", []any{1}, "%!s(BADTYPE)"},
		{"%y", []any{1}, "%!y(BADVERB)"},
		{"50%", nil, "50%"},
		{"%-5", nil, "%-5"},
	} {
		if got := cSprintf(c.format, c.args...); got != c.want {
			t.Errorf("cSprintf(%q, %v) = %q, want %q", c.format, c.args, got, c.want)
		}
	}
}

// Every format string of the package renders without a marker, with
// arguments of the types the package passes.
func TestFormatStringsRender(t *testing.T) {
	for _, c := range []struct {
		format string
		args   []any
	}{
		{reportFmt, []any{uint64(1), uint64(2), 1.0, 2.0, 3.0}},
		{reportFmt606, []any{uint64(1), uint64(2), 1.0, 2.0, 3.0}},
		{reportFmtExt, []any{uint64(1), uint64(2), 1.0, 2.0, 3.0}},
		{reportFmtPerPort, []any{uint64(1), uint64(2), 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0}},
		{reportExtCPUUtil, []any{float32(1)}},
		{reportFmtLat, []any{uint64(1), uint64(2), 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0}},
		{reportFmtLatDur, []any{uint64(1), uint64(2), 1.0, 2.0}},
		{basicAddrFmt, []any{"local", uint16(1), uint32(2), uint32(3)}},
		{readFmt, []any{uint32(1)}},
		{rdmaFmt, []any{uint32(1), uint64(2)}},
		{srqnFmt, []any{uint32(1)}},
		{samplesHeaderFmt, []any{"usec"}},
		{sampleFmt, []any{1, 2.0}},
		{valueFmt, []any{1.0}},
		{pollBatchIncreased, []any{64}},
		{udSizeClamped, []any{1024}},
		{relaxLockFmt, []any{"ON", "OFF"}},
		{relaxLockUnsupported, []any{"ON", "OFF"}},
		{wrAPIFmt, []any{"ON", "OFF"}},
		{relaxFmt606, []any{"ON"}},
		{wrAPIFmt606, []any{"ON"}},
	} {
		got := cSprintf(c.format, c.args...)
		for i := 0; i+1 < len(got); i++ {
			if got[i] == '%' && got[i+1] == '!' {
				t.Errorf("cSprintf(%q) = %q", c.format, got)
				break
			}
		}
	}
}
