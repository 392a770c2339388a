package oob

import (
	"bytes"
	"errors"
	"io"
	"math"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pvperf/pvperf/perftest"
)

func FuzzParseKey(f *testing.F) {
	for _, k := range []perftest.Dest{captureKey, {LID: 0xffff, OutReads: 0x80, QPN: 0xffffff, PSN: 1, RKey: 2, VAddr: 3, SRQN: 4, TailMarkersVAddr: 5}} {
		for format := KeyPlain; format <= KeyGIDDV; format++ {
			b, err := MarshalKey(&k, format)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(b, uint8(format))
		}
	}
	f.Add([]byte("0000:0001:000011:86e396:000003b4:00007f69fd0f2000:00:00"), uint8(KeyGID))
	f.Add(bytes.Repeat([]byte{':'}, 108), uint8(KeyGID))
	f.Fuzz(func(t *testing.T, data []byte, format uint8) {
		kf := KeyFormat(format % 5) // 4 is unknown
		k, err := parseKey(data, kf)
		if err != nil {
			return
		}
		enc, err := MarshalKey(&k, kf)
		if err != nil {
			t.Fatalf("decoded %+v does not encode: %v", k, err)
		}
		// Same text up to case; the terminator is not checked.
		if len(enc) != len(data) || !bytes.EqualFold(enc[:len(enc)-1], data[:len(data)-1]) {
			t.Fatalf("re-encoded %q from %q", enc, data)
		}
		back, err := parseKey(enc, kf)
		if err != nil || back != k {
			t.Fatalf("round trip %+v -> %q -> %+v, %v", k, enc, back, err)
		}
	})
}

func FuzzKeyRoundTrip(f *testing.F) {
	f.Add(uint16(0), uint16(1), uint32(0x11), uint32(0x86e396), uint32(0x3b4), uint64(0x7f69fd0f2000), []byte{10: 0xff, 11: 0xff, 12: 10, 13: 77, 15: 1}, uint32(0), uint64(0), uint8(KeyGID))
	f.Fuzz(func(t *testing.T, lid, outReads uint16, qpn, psn, rkey uint32, vaddr uint64, gid []byte, srqn uint32, tail uint64, format uint8) {
		kf := KeyFormat(format % 4)
		k := perftest.Dest{LID: lid, OutReads: outReads, QPN: qpn & 0xffffff, PSN: psn & 0xffffff, RKey: rkey, VAddr: vaddr, SRQN: srqn, TailMarkersVAddr: tail}
		copy(k.GID[:], gid)
		enc, err := MarshalKey(&k, kf)
		if err != nil {
			t.Fatal(err)
		}
		if len(enc) != kf.Size() || enc[len(enc)-1] != 0 {
			t.Fatalf("%q: size %d, want %d", enc, len(enc), kf.Size())
		}
		back, err := parseKey(enc, kf)
		if err != nil {
			t.Fatal(err)
		}
		if want := maskKey(k, kf); back != want {
			t.Fatalf("decode(encode(%+v)) = %+v", want, back)
		}
		if qpn > 0xffffff {
			k.QPN = qpn
			if _, err := MarshalKey(&k, kf); err == nil {
				t.Fatal("25-bit QPN encoded")
			}
		}
	})
}

func FuzzParseParams(f *testing.F) {
	c := loadCapture(f, "perftest-6.29/write_bw.txt")
	f.Add(c.side(true).params)
	f.Add(c.side(true).params[:ParamsSizeNoMLX5DV])
	f.Add(make([]byte, 10))
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := ParseParams(data)
		if err != nil {
			if len(data) == ParamsSize || len(data) == ParamsSizeNoMLX5DV {
				t.Fatalf("%d bytes refused: %v", len(data), err)
			}
			return
		}
		enc, err := p.Marshal(len(data))
		if err != nil {
			t.Fatalf("decoded struct does not encode: %v", err)
		}
		back, err := ParseParams(enc)
		if err != nil || back != p {
			t.Fatalf("round trip:\n%+v\n%+v, %v", p, back, err)
		}
		// Everything but the padding and the bytes after fw_ver's NUL is kept.
		for i := range data {
			pad := (i >= 28 && i < 32) || (i >= 308 && i < 312)
			fw := i >= deviceAttrOffset+len(p.Attr.FWVer) && i < deviceAttrOffset+64
			if !pad && !fw && enc[i] != data[i] {
				t.Fatalf("byte %d: %#x, want %#x", i, enc[i], data[i])
			}
		}
		_ = Compare(&p, &back) // must not panic on any value
		if err := Compare(&p, &back); err != nil {
			t.Fatalf("Compare of equal structs: %v", err)
		}
		var zero Params
		_ = PerftestMessage(Compare(&p, &zero))
	})
}

func FuzzParseVersion(f *testing.F) {
	for _, s := range []string{"6.29", "6.06", "5.70", "garbage", "", " 6.1", "1e5", "0x1p-2", "nan", "-inf", "6.29\x00x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v := ParseVersion(s)
		_ = FeaturesFor(v, v)
		plain := s != "" && strings.Trim(s, "0123456789.") == "" && strings.Count(s, ".") <= 1 && s != "."
		if plain {
			want, err := strconv.ParseFloat(s, 64)
			if err != nil && !isRangeErr(err) {
				t.Fatalf("ParseFloat(%q): %v", s, err)
			}
			if v != want && !(math.IsInf(v, 1) && math.IsInf(want, 1)) {
				t.Fatalf("ParseVersion(%q) = %v, want %v", s, v, want)
			}
		}
		if b, err := encodeVersion(s); err == nil {
			if got := versionString(b[:]); got != s {
				t.Fatalf("version %q round trip %q", s, got)
			}
			if ParseVersion(versionString(b[:])) != v && !math.IsNaN(v) {
				t.Fatalf("value changed through the wire")
			}
		}
	})
}

func FuzzParseMTU(f *testing.F) {
	f.Add([]byte("3\x00"))
	f.Add([]byte("5\x00\x00\x00"))
	f.Add([]byte("-99999999999999999999"))
	f.Fuzz(func(t *testing.T, b []byte) {
		v := ParseMTU(b)
		_ = EffectiveMTU(MTU4096, v)
		if len(b) > 0 && len(b) <= 9 && strings.Trim(string(b), "0123456789") == "" {
			want, _ := strconv.Atoi(string(b))
			if int(v) != want {
				t.Fatalf("ParseMTU(%q) = %d, want %d", b, v, want)
			}
		}
		for m := MTU(-3); m < 15; m++ {
			if got := ParseMTU(EncodeMTU(m, 4)); got != int32(m) {
				t.Fatalf("MTU %d round trip %d", m, got)
			}
		}
	})
}

// FuzzPeer plays a peer that sends arbitrary bytes and then closes: a
// client and a server go through a whole test's exchanges against it
// (version, system data, MTU, negotiation, key rounds, BW reports, close)
// and must end with an error or success, never a panic or a hang.
func FuzzPeer(f *testing.F) {
	f.Add([]byte("5.70\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00"), false)
	f.Add(append([]byte("6.29\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00"), bytes.Repeat([]byte{0x10}, 400)...), true)
	f.Add([]byte("garbage"), false)
	f.Add([]byte{}, true)
	f.Fuzz(func(t *testing.T, peer []byte, server bool) {
		local, remote := net.Pipe()
		go func() {
			go func() { _, _ = io.Copy(io.Discard, remote) }()
			_, _ = remote.Write(peer)
			remote.Close()
		}()
		role := Client
		if server {
			role = Server
		}
		c, err := NewConn(local, role, Config{Timeout: 200 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		params := &Params{Verb: perftest.Write, Tst: perftest.Bandwidth, Size: 65536, Iters: 5000, NumQPs: 1, Duration: 5}
		steps := []func() error{
			func() error { _, err := c.ExchangeVersion(); return err },
			func() error { _, err := c.ExchangeSysData(SysData{PageSize: 4096, CacheLineSize: 64}); return err },
			func() error { _, err := c.ExchangeMTU(MTU1024); return err },
			func() error { _, err := c.Negotiate(params); return err },
			func() error { _, err := c.Handshake(KeyGID, captureKey); return err },
			func() error { _, err := c.ExchangeReports(BWReport{Size: 65536}, false); return err },
			func() error { _, err := c.CloseHandshake(KeyGID, captureKey); return err },
		}
		for _, step := range steps {
			if err := step(); err != nil {
				if err.Error() == "" {
					t.Error("an error without a message")
				}
				return
			}
		}
	})
}

// FuzzParseRawKey: any input decodes or fails with ErrMalformed, and a
// decoded key encodes back to the same bytes but for the padding and
// gid_index, which perftest's reader ignores.
func FuzzParseRawKey(f *testing.F) {
	k := perftest.Dest{QPN: 0x11, PSN: 0x22, RKey: 0x33, VAddr: 0x44, TailMarkersVAddr: 0x55, GID: [16]byte{15: 1}}
	for _, n := range []int{RawKeySizeOld, RawKeySize} {
		b, _ := MarshalRawKey(&k, n)
		f.Add(b)
	}
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := parseRawKey(b)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error not ErrMalformed: %v", err)
			}
			return
		}
		again, err := MarshalRawKey(&got, len(b))
		if err != nil {
			t.Fatal(err)
		}
		back, err := parseRawKey(again)
		if err != nil || back != got {
			t.Fatalf("round trip: %+v -> %+v, %v", got, back, err)
		}
	})
}
