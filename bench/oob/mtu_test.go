package oob

import (
	"testing"
)

func TestEncodeMTU(t *testing.T) {
	tests := []struct {
		m    MTU
		size int
		want string
	}{
		{MTU1024, 2, "3\x00"}, // the captures: rxe at 1024
		{MTU4096, 2, "5\x00"},
		{MTU256, 4, "1\x00\x00\x00"},
		{MTU(12), 2, "12"}, // sprintf writes 3 bytes, perftest sends 2
	}
	for _, tt := range tests {
		if got := string(EncodeMTU(tt.m, tt.size)); got != tt.want {
			t.Errorf("EncodeMTU(%d, %d) = %q, want %q", tt.m, tt.size, got, tt.want)
		}
	}
}

func TestParseMTU(t *testing.T) {
	tests := []struct {
		in   string
		want int32
	}{
		{"3\x00", 3},
		{"5\x00\xff\xff", 5},
		{"5", 5},
		{" 4\x00", 4},
		{"+2", 2},
		{"-1", -1},
		{"x\x00", 0},
		{"", 0},
		{"\x00\x00", 0},
		{"4294967297", 1},               // (int) of a long keeps the low 32 bits
		{"99999999999999999999999", -1}, // LONG_MAX, then (int)
		{"-99999999999999999999999", 0}, // LONG_MIN, then (int)
		{"9223372036854775807", -1},     // exactly LONG_MAX
		{"3abc", 3},
	}
	for _, tt := range tests {
		if got := ParseMTU([]byte(tt.in)); got != tt.want {
			t.Errorf("ParseMTU(%q) = %d, want %d", tt.in, got, tt.want)
		}
	}
}

func TestEffectiveMTU(t *testing.T) {
	tests := []struct {
		local  MTU
		remote int32
		want   MTU
	}{
		{MTU1024, 3, MTU1024},
		{MTU4096, 3, MTU1024},
		{MTU1024, 5, MTU1024},
		{MTU4096, 0, MTU4096}, // invalid remote: ignored
		{MTU4096, 6, MTU4096},
		{MTU4096, -1, MTU4096},
	}
	for _, tt := range tests {
		if got := EffectiveMTU(tt.local, tt.remote); got != tt.want {
			t.Errorf("EffectiveMTU(%v, %d) = %v, want %v", tt.local, tt.remote, got, tt.want)
		}
	}
}

func TestMTUBytes(t *testing.T) {
	for m, n := range map[MTU]int{MTU256: 256, MTU512: 512, MTU1024: 1024, MTU2048: 2048, MTU4096: 4096, 0: 0, 6: 0} {
		if got := m.Bytes(); got != n {
			t.Errorf("%d.Bytes() = %d, want %d", m, got, n)
		}
	}
	if MTU1024.String() != "1024" || MTU(9).String() != "MTU(9)" {
		t.Error("String")
	}
}
