package oob

import (
	"errors"
	"math"
	"testing"
)

func TestParseVersion(t *testing.T) {
	tests := []struct {
		in   string
		want float64
	}{
		{"6.29", 6.29},
		{"6.06", 6.06},
		{"5.70", 5.70},
		{"5.7", 5.7},
		{"6.29\x00\x00\x00", 6.29},
		{"6.29\x00garbage", 6.29},
		{"", 0},
		{"garbage", 0},
		{"v6.29", 0},
		{"  \t6.1x", 6.1},
		{"+6.2", 6.2},
		{"-5", -5},
		{"6", 6},
		{"6.", 6},
		{".5", 0.5},
		{".", 0},
		{"-", 0},
		{"1e1", 10},
		{"1E+1x", 10},
		{"5e", 5},
		{"5e+", 5},
		{"6.29.1", 6.29},
		{"0x1p3", 8},
		{"0x1.8", 1.5},
		{"0X.8P1", 1},
		{"0x", 0},
		{"0xg", 0},
		{"1e999", math.Inf(1)},
		{"-1e999", math.Inf(-1)},
		{"1e-999", 0},
		{"inf", math.Inf(1)},
		{"-Infinity", math.Inf(-1)},
	}
	for _, tt := range tests {
		if got := ParseVersion(tt.in); got != tt.want {
			t.Errorf("ParseVersion(%q) = %v, want %v", tt.in, got, tt.want)
		}
	}
	if got := ParseVersion("nan"); !math.IsNaN(got) {
		t.Errorf("ParseVersion(nan) = %v, want NaN", got)
	}
}

func TestFeaturesFor(t *testing.T) {
	all := Features{SysData: true, MTU: true, MTUSize: 2, ReportItersSize: 8, Negotiate: true}
	tests := []struct {
		name          string
		local, remote string
		want          Features
	}{
		{"6.29 both", "6.29", "6.29", all},
		{"6.28 both", "6.28", "6.28", all},
		{"peer 6.06", "6.29", "6.06", Features{SysData: true, MTU: true, MTUSize: 2, ReportItersSize: 8}},
		{"we 6.06", "6.06", "6.29", Features{SysData: true, MTU: true, MTUSize: 2, ReportItersSize: 8, SendDone: true}},
		{"we 6.27", "6.27", "6.29", Features{SysData: true, MTU: true, MTUSize: 2, ReportItersSize: 8}},
		{"we 6.16", "6.16", "6.29", Features{SysData: true, MTU: true, MTUSize: 2, ReportItersSize: 8, SendDone: true}},
		{"we 6.17", "6.17", "6.17", Features{SysData: true, MTU: true, MTUSize: 2, ReportItersSize: 8}},
		{"peer 5.70", "6.29", "5.70", Features{SysData: true, MTU: true, MTUSize: 2, ReportItersSize: 8}},
		// Below 5.70 perftest refuses the peer; the thresholds still apply.
		{"peer 5.34", "6.29", "5.34", Features{SysData: true, MTU: true, MTUSize: 2, ReportItersSize: 8}},
		{"peer 5.33 (float)", "6.29", "5.33", Features{SysData: true, MTU: true, MTUSize: 2, ReportItersSize: 4}},
		{"peer 5.32", "6.29", "5.32", Features{SysData: true, MTU: true, MTUSize: 2, ReportItersSize: 4}},
		{"peer 5.31 (float)", "6.29", "5.31", Features{MTU: true, MTUSize: 4, ReportItersSize: 4}},
		{"peer 5.2", "6.29", "5.2", Features{MTU: true, MTUSize: 4, ReportItersSize: 4}},
		{"peer 5.1 (float)", "6.29", "5.1", Features{MTUSize: 4, ReportItersSize: 4}},
		{"peer 5.11", "6.29", "5.11", Features{MTU: true, MTUSize: 4, ReportItersSize: 4}},
		{"peer nan", "6.29", "nan", Features{MTUSize: 4, ReportItersSize: 4}},
	}
	for _, tt := range tests {
		if got := FeaturesFor(ParseVersion(tt.local), ParseVersion(tt.remote)); got != tt.want {
			t.Errorf("%s: FeaturesFor(%s, %s) = %+v, want %+v", tt.name, tt.local, tt.remote, got, tt.want)
		}
	}
}

func TestEncodeVersion(t *testing.T) {
	b, err := encodeVersion("6.29")
	if err != nil {
		t.Fatal(err)
	}
	if want := "6.29\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00"; string(b[:]) != want {
		t.Errorf("got %q, want %q", b, want)
	}
	for _, bad := range []string{"", "0123456789abcdef", "6.2\x009"} {
		if _, err := encodeVersion(bad); !errors.Is(err, ErrMalformed) {
			t.Errorf("encodeVersion(%q): %v, want ErrMalformed", bad, err)
		}
	}
	if _, err := encodeVersion("0123456789abcde"); err != nil {
		t.Errorf("15 bytes: %v", err)
	}
	if got := versionString([]byte("0123456789abcdef")); got != "0123456789abcdef" {
		t.Errorf("unterminated: %q", got)
	}
}
