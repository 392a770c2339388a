package oob

import (
	"encoding/hex"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/pvperf/pvperf/perftest"
)

// The raw keys' layouts, written out by hand from perftest's struct
// pingpong_dest (6.06: 56 bytes; 6.29: 64), integers big-endian.
func TestRawKeyLayout(t *testing.T) {
	k := perftest.Dest{LID: 0x1234, OutReads: 0x10, QPN: 0xabcdef, PSN: 0x123456, RKey: 0xdeadbeef,
		VAddr: 0x00007f760c947000, TailMarkersVAddr: 0x00007f760c948040, GID: [16]byte{0xfe, 0x80, 15: 0x0a}, SRQN: 0x42}
	old := "00001234" + "00000010" + "00abcdef" + "00123456" + "deadbeef" + "00000000" + "00007f760c947000" +
		"fe80000000000000000000000000000a" + "00000042" + "00000000"
	cur := "00001234" + "00000010" + "00abcdef" + "00123456" + "deadbeef" + "00000000" + "00007f760c947000" + "00007f760c948040" +
		"fe80000000000000000000000000000a" + "00000042" + "00000000"
	for _, tc := range []struct {
		size int
		want string
	}{{RawKeySizeOld, old}, {RawKeySize, cur}} {
		b, err := MarshalRawKey(&k, tc.size)
		if err != nil {
			t.Fatal(err)
		}
		if got := hex.EncodeToString(b); got != tc.want {
			t.Errorf("size %d:\n got %s\nwant %s", tc.size, got, tc.want)
		}
		back, err := parseRawKey(b)
		if err != nil {
			t.Fatal(err)
		}
		want := k
		if tc.size == RawKeySizeOld {
			want.TailMarkersVAddr = 0
		}
		if back != want {
			t.Errorf("size %d: parsed %+v, want %+v", tc.size, back, want)
		}
	}
	if _, err := MarshalRawKey(&k, 60); !errors.Is(err, ErrMalformed) {
		t.Errorf("size 60: %v", err)
	}
	for _, n := range []int{0, 55, 57, 63, 65, 108} {
		if _, err := parseRawKey(make([]byte, n)); !errors.Is(err, ErrMalformed) {
			t.Errorf("parse %d bytes: %v", n, err)
		}
	}
	bad, _ := MarshalRawKey(&k, RawKeySize)
	bad[8] = 1 // a QPN over 24 bits
	if _, err := parseRawKey(bad); !errors.Is(err, ErrMalformed) {
		t.Errorf("QPN over 24 bits: %v", err)
	}
}

// The layout a side sends follows its peer's version.
func TestRawKeySizeFor(t *testing.T) {
	for v, want := range map[float64]int{5.70: 56, 6.06: 56, 6.28: 56, 6.29: 64, 7.0: 64} {
		if got := rawKeySizeFor(v); got != want {
			t.Errorf("version %v: %d, want %d", v, got, want)
		}
	}
}

// msgPipe is a message connection over a net.Pipe: each message is a
// length byte and the bytes.
type msgPipe struct{ net.Conn }

func (m msgPipe) Write(b []byte) (int, error) {
	if _, err := m.Conn.Write(append([]byte{byte(len(b))}, b...)); err != nil {
		return 0, err
	}
	return len(b), nil
}

func (m msgPipe) ReadMessage(b []byte) (int, error) {
	var n [1]byte
	if _, err := m.Conn.Read(n[:]); err != nil {
		return 0, err
	}
	buf := make([]byte, n[0])
	got := 0
	for got < len(buf) {
		k, err := m.Conn.Read(buf[got:])
		if err != nil {
			return 0, err
		}
		got += k
	}
	if len(buf) > len(b) {
		return 0, errors.New("message too long")
	}
	return copy(b, buf), nil
}

func (m msgPipe) Read(b []byte) (int, error) { return m.ReadMessage(b) }

// Two sides of different versions each send the layout the other reads,
// and read the other's.
func TestRawHandshakeAcrossVersions(t *testing.T) {
	a, b := net.Pipe()
	ca, err := NewConn(msgPipe{a}, Client, Config{Version: "6.06", Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	cb, err := NewConn(msgPipe{b}, Server, Config{Version: "6.29", Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer ca.Close()
	defer cb.Close()
	ka := perftest.Dest{QPN: 0x11, PSN: 0x22, RKey: 0x33, VAddr: 0x44, TailMarkersVAddr: 0x55}
	kb := perftest.Dest{QPN: 0x66, PSN: 0x77, RKey: 0x88, VAddr: 0x99, TailMarkersVAddr: 0xaa}
	type res struct {
		k   perftest.Dest
		err error
	}
	done := make(chan res, 1)
	go func() {
		if _, err := cb.ExchangeVersion(); err != nil {
			done <- res{err: err}
			return
		}
		k, err := cb.Handshake(KeyRaw, kb)
		done <- res{k, err}
	}()
	if _, err := ca.ExchangeVersion(); err != nil {
		t.Fatal(err)
	}
	got, err := ca.Handshake(KeyRaw, ka)
	if err != nil {
		t.Fatal(err)
	}
	// The 6.29 side sent the 56-byte layout a 6.06 peer reads (no tail
	// markers); the 6.06 side sent the 64-byte one, tail markers included.
	want := kb
	want.TailMarkersVAddr = 0
	if got != want {
		t.Errorf("6.06 side got %+v, want %+v", got, want)
	}
	r := <-done
	want = ka
	if r.err != nil || r.k != want {
		t.Errorf("6.29 side got %+v, %v; want %+v", r.k, r.err, want)
	}
}

// A message of another size than the exchange's is an error, not a
// misread of the next one.
func TestMessageSizeMismatch(t *testing.T) {
	a, b := net.Pipe()
	ca, _ := NewConn(msgPipe{a}, Client, Config{Timeout: 5 * time.Second})
	defer ca.Close()
	defer b.Close()
	go func() {
		var buf [64]byte
		_, _ = msgPipe{b}.ReadMessage(buf[:])
		_, _ = msgPipe{b}.Write(make([]byte, 15))
	}()
	_, err := ca.ExchangeVersion()
	if !errors.Is(err, ErrMalformed) {
		t.Fatalf("a 15-byte version message: %v", err)
	}
}
