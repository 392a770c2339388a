package oob

import (
	"errors"
	"strings"
	"testing"

	"github.com/pvperf/pvperf/perftest"
)

// The client key of perftest-6.29/write_bw.txt.
var captureKey = perftest.Dest{
	LID: 0, OutReads: 1, QPN: 0x11, PSN: 0x86e396, RKey: 0x3b4, VAddr: 0x7f69fd0f2000,
	GID: [16]byte{10: 0xff, 11: 0xff, 12: 10, 13: 77, 14: 0, 15: 1},
}

func TestKeyMarshal(t *testing.T) {
	full := perftest.Dest{
		LID: 0x1234, OutReads: 0x80, QPN: 0xabcdef, PSN: 0x123456, RKey: 0xdeadbeef,
		VAddr: 0x00007f760c947000, GID: [16]byte{0xfe, 0x80, 15: 0x0a}, SRQN: 0x42,
		TailMarkersVAddr: 0x00007f760c948040,
	}
	tests := []struct {
		name string
		k    perftest.Dest
		f    KeyFormat
		want string
	}{
		{"capture gid", captureKey, KeyGID,
			"0000:0001:000011:86e396:000003b4:00007f69fd0f2000:00:00:00:00:00:00:00:00:00:00:ff:ff:0a:4d:00:01:00000000:\x00"},
		{"plain", full, KeyPlain,
			"1234:0080:abcdef:123456:deadbeef:00007f760c947000:00000042\x00"},
		{"gid", full, KeyGID,
			"1234:0080:abcdef:123456:deadbeef:00007f760c947000:fe:80:00:00:00:00:00:00:00:00:00:00:00:00:00:0a:00000042:\x00"},
		{"plain dv", full, KeyPlainDV,
			"1234:0080:abcdef:123456:deadbeef:00007f760c947000:00007f760c948040:00000042\x00"},
		{"gid dv", full, KeyGIDDV,
			"1234:0080:abcdef:123456:deadbeef:00007f760c947000:00007f760c948040:fe:80:00:00:00:00:00:00:00:00:00:00:00:00:00:0a:00000042:\x00"},
		{"max", perftest.Dest{LID: 0xffff, OutReads: 0xffff, QPN: 0xffffff, PSN: 0xffffff, RKey: 0xffffffff, VAddr: ^uint64(0), SRQN: 0xffffffff}, KeyPlain,
			"ffff:ffff:ffffff:ffffff:ffffffff:ffffffffffffffff:ffffffff\x00"},
	}
	for _, tt := range tests {
		got, err := MarshalKey(&tt.k, tt.f)
		if err != nil {
			t.Errorf("%s: %v", tt.name, err)
			continue
		}
		if string(got) != tt.want {
			t.Errorf("%s:\n got %q\nwant %q", tt.name, got, tt.want)
		}
		if len(got) != tt.f.Size() {
			t.Errorf("%s: %d bytes, want %d", tt.name, len(got), tt.f.Size())
		}
		back, err := parseKey(got, tt.f)
		if err != nil {
			t.Errorf("%s: parse: %v", tt.name, err)
			continue
		}
		if want := maskKey(tt.k, tt.f); back != want {
			t.Errorf("%s: round trip %+v, want %+v", tt.name, back, want)
		}
	}
}

func TestKeyFormat(t *testing.T) {
	tests := []struct {
		gid, dv bool
		want    KeyFormat
		size    int
	}{
		{false, false, KeyPlain, 59},
		{true, false, KeyGID, 108},
		{false, true, KeyPlainDV, 76},
		{true, true, KeyGIDDV, 125},
	}
	for _, tt := range tests {
		f := KeyFormatFor(tt.gid, tt.dv)
		if f != tt.want || f.Size() != tt.size || f.HasGID() != tt.gid || f.DataValidation() != tt.dv {
			t.Errorf("KeyFormatFor(%v, %v) = %v (size %d)", tt.gid, tt.dv, f, f.Size())
		}
	}
	if KeyFormat(9).Size() != 0 || KeyFormat(9).String() != "KeyFormat(9)" {
		t.Error("unknown format")
	}
}

func TestKeyMarshalErrors(t *testing.T) {
	for _, k := range []perftest.Dest{{QPN: 0x1000000}, {PSN: 0x1000000}} {
		if _, err := MarshalKey(&k, KeyGID); !errors.Is(err, ErrMalformed) {
			t.Errorf("%+v: %v, want ErrMalformed", k, err)
		}
	}
	if _, err := MarshalKey(&perftest.Dest{}, KeyFormat(7)); !errors.Is(err, ErrMalformed) {
		t.Errorf("bad format: %v", err)
	}
}

func TestParseKey(t *testing.T) {
	good := "0000:0001:000011:86e396:000003b4:00007f69fd0f2000:00:00:00:00:00:00:00:00:00:00:ff:ff:0a:4d:00:01:00000000:\x00"
	if k, err := parseKey([]byte(good), KeyGID); err != nil || k != captureKey {
		t.Fatalf("capture key: %+v, %v", k, err)
	}
	upper := strings.ToUpper(good[:len(good)-1]) + "\x00"
	if k, err := parseKey([]byte(upper), KeyGID); err != nil || k != captureKey {
		t.Errorf("upper case: %+v, %v", k, err)
	}
	// The terminator is not checked (perftest does not look at it).
	if _, err := parseKey([]byte(good[:len(good)-1]+"x"), KeyGID); err != nil {
		t.Errorf("no NUL: %v", err)
	}
	plain := "1234:0080:abcdef:123456:deadbeef:00007f760c947000:00000042\x00"
	bad := []struct {
		name string
		in   string
		f    KeyFormat
	}{
		{"short", good[:107], KeyGID},
		{"long", good + "\x00", KeyGID},
		{"empty", "", KeyPlain},
		{"plain as gid", plain, KeyGID},
		{"gid as plain", good, KeyPlain},
		{"non-hex", strings.Replace(good, "86e396", "86e39g", 1), KeyGID},
		{"space", strings.Replace(good, "86e396", " 6e396", 1), KeyGID},
		{"sign", strings.Replace(plain, "123456", "-23456", 1), KeyPlain},
		{"colon moved", strings.Replace(plain, "0080:abcdef", "080:0abcdef", 1), KeyPlain},
		{"missing trailing colon", good[:106] + "0\x00", KeyGID},
		{"colon in last field", plain[:57] + ":\x00", KeyPlain},
		{"nul inside", strings.Replace(plain, "dead", "de\x00d", 1), KeyPlain},
		{"unknown format", plain, KeyFormat(5)},
	}
	for _, tt := range bad {
		k, err := parseKey([]byte(tt.in), tt.f)
		if !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: %v, want ErrMalformed", tt.name, err)
		}
		if k != (perftest.Dest{}) {
			t.Errorf("%s: non-zero key %+v on error", tt.name, k)
		}
	}
}

// maskKey clears the fields format f does not carry.
func maskKey(k perftest.Dest, f KeyFormat) perftest.Dest {
	if !f.HasGID() {
		k.GID = [16]byte{}
	}
	if !f.DataValidation() {
		k.TailMarkersVAddr = 0
	}
	return k
}
