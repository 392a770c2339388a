package main

import (
	"encoding/binary"
	"net"
	"net/netip"
	"reflect"
	"testing"
)

// msg builds a request as QEMU 7.2's rdma_backend.c lays it out.
func msg(t *testing.T, op opCode, gid string, umadLen uint32) []byte {
	t.Helper()
	b := make([]byte, msgSize)
	le := binary.LittleEndian
	le.PutUint32(b[0:], msgTypeReq)
	le.PutUint32(b[4:], uint32(op))
	a := netip.MustParseAddr(gid).As16()
	copy(b[8:24], a[:])
	le.PutUint32(b[32:], umadLen)
	b[100] = 0x07 // a MAD's first byte (base version), kept as is
	return b
}

func TestLayout(t *testing.T) {
	// The offsets of the C struct on x86-64 (shared/reference, measured by
	// compiling contrib/rdmacm-mux/rdmacm-mux.h against rdma-core 44).
	for _, c := range []struct {
		name      string
		got, want int
	}{
		{"sizeof(RdmaCmMuxMsg)", msgSize, 360},
		{"hdr.msg_type", offMsgType, 0},
		{"hdr.op_code", offOpCode, 4},
		{"hdr.sgid", offGID, 8},
		{"hdr.err_code", offErrCode, 24},
		{"umad_len", offUmadLen, 32},
		{"umad.hdr", offUmad, 36},
		{"umad.mad", offMad, 100},
		{"sizeof(umad.mad)", madDataBytes, 256},
	} {
		if c.got != c.want {
			t.Errorf("%s at %d, want %d", c.name, c.got, c.want)
		}
	}
}

type recorder struct{ reqs []request }

func (r *recorder) handle(req request) errCode {
	r.reqs = append(r.reqs, req)
	if req.op == opMAD {
		return errInval
	}
	return errOK
}

func TestServeAnswersEveryRequest(t *testing.T) {
	dev, mux := net.Pipe()
	var rec recorder
	done := make(chan error, 1)
	go func() { done <- serve(mux, &rec) }()

	reqs := [][]byte{
		msg(t, opReg, "fe80::5054:ff:fe77:2", 0),
		msg(t, opReg, "::ffff:10.0.2.15", 0),
		msg(t, opMAD, "fe80::5054:ff:fe77:2", 256),
		msg(t, opUnreg, "::ffff:10.0.2.15", 0),
	}
	wantErr := []errCode{errOK, errOK, errInval, errOK}
	for i, req := range reqs {
		sent := append([]byte(nil), req...)
		if _, err := dev.Write(req); err != nil {
			t.Fatal(err)
		}
		got := make([]byte, msgSize)
		if _, err := readFull(dev, got); err != nil {
			t.Fatal(err)
		}
		le := binary.LittleEndian
		if typ := le.Uint32(got[0:]); typ != msgTypeResp {
			t.Errorf("reply %d: msg_type %d, want %d", i, typ, msgTypeResp)
		}
		if code := errCode(le.Uint32(got[24:])); code != wantErr[i] {
			t.Errorf("reply %d: err_code %d, want %d", i, code, wantErr[i])
		}
		// Everything else is echoed: the device reads the reply as a whole
		// message.
		for _, r := range [][2]int{{4, 24}, {28, msgSize}} {
			if !reflect.DeepEqual(got[r[0]:r[1]], sent[r[0]:r[1]]) {
				t.Errorf("reply %d: bytes %d..%d differ from the request", i, r[0], r[1])
			}
		}
	}
	dev.Close()
	if err := <-done; err != nil {
		t.Fatalf("serve: %v", err)
	}
	want := []request{
		{op: opReg, gid: netip.MustParseAddr("fe80::5054:ff:fe77:2")},
		{op: opReg, gid: netip.AddrFrom16(netip.MustParseAddr("::ffff:10.0.2.15").As16())},
		{op: opMAD, gid: netip.MustParseAddr("fe80::5054:ff:fe77:2"), umadLen: 256},
		{op: opUnreg, gid: netip.AddrFrom16(netip.MustParseAddr("::ffff:10.0.2.15").As16())},
	}
	if !reflect.DeepEqual(rec.reqs, want) {
		t.Errorf("requests\n got %v\nwant %v", rec.reqs, want)
	}
}

func TestServeAnswersBadMessage(t *testing.T) {
	dev, mux := net.Pipe()
	var rec recorder
	go func() { _ = serve(mux, &rec) }()
	defer dev.Close()
	bad := msg(t, opReg, "fe80::1", 0)
	binary.LittleEndian.PutUint32(bad[0:], msgTypeResp) // a response is not a request
	if _, err := dev.Write(bad); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, msgSize)
	if _, err := readFull(dev, got); err != nil {
		t.Fatal(err)
	}
	if code := errCode(binary.LittleEndian.Uint32(got[24:])); code != errInval {
		t.Errorf("err_code %d, want EINVAL (%d)", code, errInval)
	}
	if len(rec.reqs) != 0 {
		t.Errorf("handler saw %v", rec.reqs)
	}
}

func TestServeShortMessage(t *testing.T) {
	dev, mux := net.Pipe()
	done := make(chan error, 1)
	go func() { done <- serve(mux, &recorder{}) }()
	if _, err := dev.Write(make([]byte, 100)); err != nil {
		t.Fatal(err)
	}
	dev.Close()
	if err := <-done; err == nil {
		t.Error("a connection closed mid-message ended without an error")
	}
}

func TestIPArgs(t *testing.T) {
	for _, c := range []struct {
		verb, gid string
		want      []string
	}{
		{"add", "fe80::5054:ff:fe77:2", []string{"-6", "addr", "add", "fe80::5054:ff:fe77:2/64", "dev", "v0", "nodad"}},
		{"del", "fe80::5054:ff:fe77:2", []string{"-6", "addr", "del", "fe80::5054:ff:fe77:2/64", "dev", "v0"}},
		{"add", "::ffff:10.0.2.15", []string{"addr", "add", "10.0.2.15/32", "dev", "v0"}},
	} {
		gid := netip.AddrFrom16(netip.MustParseAddr(c.gid).As16())
		if got := ipArgs(c.verb, gid, "v0"); !reflect.DeepEqual(got, c.want) {
			t.Errorf("ipArgs(%s, %s) = %q, want %q", c.verb, c.gid, got, c.want)
		}
	}
}

func readFull(c net.Conn, b []byte) (int, error) {
	n := 0
	for n < len(b) {
		m, err := c.Read(b[n:])
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, nil
}
