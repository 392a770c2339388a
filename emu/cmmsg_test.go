//go:build linux

package emu

import (
	"bytes"
	"errors"
	"io"
	"reflect"
	"testing"

	"github.com/pvperf/pvperf/verbs"
)

// cmSamples are valid messages of every type.
func cmSamples() []*cmMsg {
	gid := verbs.GIDFromAddr(loopback)
	return []*cmMsg{
		{typ: msgREQ, ps: verbs.PortSpaceTCP, mtu: verbs.MTU1024, qpn: 0x1234, psn: 0xabcdef, gid: gid,
			respRes: 16, initDepth: 16, retry: 7, rnrRetry: 7, pdata: []byte("hello")},
		{typ: msgREP, ps: verbs.PortSpaceTCP, mtu: verbs.MTU4096, qpn: 0xffffff, psn: 1, gid: gid, srq: true,
			flowCtl: 1, rnrRetry: 3, pdata: bytes.Repeat([]byte{1}, repPrivateData)},
		{typ: msgRTU},
		{typ: msgREJ, reason: rejConsumer, pdata: []byte("busy")},
		{typ: msgDREQ},
		{typ: msgDREP},
		{typ: msgSIDRREQ, ps: verbs.PortSpaceUDP, mtu: verbs.MTU256, gid: gid, pdata: bytes.Repeat([]byte{2}, sidrReqPrivateData)},
		{typ: msgSIDRREP, ps: verbs.PortSpaceUDP, mtu: verbs.MTU2048, qpn: 7, qkey: CMUDPQKey, gid: gid},
		{typ: msgSIDRREP, ps: verbs.PortSpaceUDP, mtu: verbs.MTU256, status: sidrReject, pdata: []byte("no")},
	}
}

// TestCMMessageRoundTrip: every message decodes to what was encoded, from
// a byte slice and from a stream.
func TestCMMessageRoundTrip(t *testing.T) {
	var stream bytes.Buffer
	for _, m := range cmSamples() {
		b, err := m.encode()
		if err != nil {
			t.Fatalf("%v: %v", m.typ, err)
		}
		stream.Write(b)
		got, err := decodeMsg(b)
		if err != nil {
			t.Fatalf("%v: %v", m.typ, err)
		}
		if !reflect.DeepEqual(got, m) {
			t.Errorf("%v: decoded %+v, want %+v", m.typ, got, m)
		}
	}
	for _, m := range cmSamples() {
		got, err := readMsg(&stream)
		if err != nil || !reflect.DeepEqual(got, m) {
			t.Errorf("%v: read %+v, %v", m.typ, got, err)
		}
	}
	if _, err := readMsg(&stream); !errors.Is(err, io.EOF) {
		t.Errorf("read at the end: %v", err)
	}
}

// TestCMMessageMalformed: the decoder rejects what does not follow the
// format.
func TestCMMessageMalformed(t *testing.T) {
	req, err := cmSamples()[0].encode()
	if err != nil {
		t.Fatal(err)
	}
	set := func(off int, v byte) []byte {
		b := bytes.Clone(req)
		b[off] = v
		return b
	}
	for name, b := range map[string][]byte{
		"empty":          nil,
		"short header":   req[:5],
		"magic":          set(0, 'X'),
		"version":        set(4, 2),
		"type 0":         set(5, 0),
		"type 9":         set(5, 9),
		"long body":      append(bytes.Clone(req), 0),
		"short body":     req[:len(req)-1],
		"port space":     set(msgHdrLen+1, 0x07),
		"flags":          set(msgHdrLen+2, 2),
		"mtu":            set(msgHdrLen+3, 6),
		"qpn":            set(msgHdrLen+4, 1),
		"psn":            set(msgHdrLen+8, 1),
		"flow control":   set(msgHdrLen+34, 2),
		"retry":          set(msgHdrLen+35, 8),
		"rnr retry":      set(msgHdrLen+36, 8),
		"status":         set(msgHdrLen+37, 1),
		"reserved":       set(msgHdrLen+38, 1),
		"private length": set(msgHdrLen+39, 6),
		"rtu body":       {'P', 'V', 'C', 'M', 1, 3, 0, 1, 0},
		"rej reason":     {'P', 'V', 'C', 'M', 1, 4, 0, 4, 0, 0, 0, 0},
		"huge":           {'P', 'V', 'C', 'M', 1, 1, 0xff, 0xff},
	} {
		if m, err := decodeMsg(b); !errors.Is(err, errBadMsg) {
			t.Errorf("%s: decoded %+v, %v", name, m, err)
		}
	}
	big := &cmMsg{typ: msgREQ, ps: verbs.PortSpaceTCP, mtu: verbs.MTU1024, pdata: make([]byte, reqPrivateData+1)}
	if _, err := big.encode(); !errors.Is(err, errBadMsg) {
		t.Errorf("encode with too much private data: %v", err)
	}
	if _, err := readMsg(bytes.NewReader(req[:20])); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("truncated stream: %v", err)
	}
}

// FuzzCMMessage: the decoder never panics, and what it accepts encodes
// back to the same bytes.
func FuzzCMMessage(f *testing.F) {
	for _, m := range cmSamples() {
		b, err := m.encode()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte("PVCM\x01\x01\x00\x00"))
	f.Add([]byte("GET / HTTP/1.0\r\n\r\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := decodeMsg(b)
		s, serr := readMsg(bytes.NewReader(b))
		if err != nil {
			if !errors.Is(err, errBadMsg) {
				t.Fatalf("error %v does not wrap errBadMsg", err)
			}
			return
		}
		if serr != nil || !reflect.DeepEqual(s, m) {
			t.Fatalf("stream decoding %+v, %v; slice %+v", s, serr, m)
		}
		out, err := m.encode()
		if err != nil {
			t.Fatalf("re-encode %+v: %v", m, err)
		}
		if !bytes.Equal(out, b) {
			t.Fatalf("re-encoded % x, want % x", out, b)
		}
	})
}
