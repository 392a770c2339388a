//go:build linux

package rdmacm

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/pvperf/pvperf/internal/ibabi"
	"github.com/pvperf/pvperf/internal/unix"
	"github.com/pvperf/pvperf/verbs"
)

// scripted is a kernel that records every command and answers each with
// the bytes of the next response (written where the command says) and
// GET_EVENT with the next event.
type scripted struct {
	cmds   [][]byte
	resps  map[uint32][]byte // by command number
	events [][]byte
	errno  error
}

func (k *scripted) write(b []byte) (int, error) {
	k.cmds = append(k.cmds, bytes.Clone(b))
	if k.errno != nil {
		return 0, k.errno
	}
	cmd := binary.LittleEndian.Uint32(b)
	if r, ok := k.resps[cmd]; ok {
		at := 0
		if cmd == cmdCreateID {
			at = 8
		}
		addr := binary.LittleEndian.Uint64(b[cmdHdrSize+at:])
		copy(unix.Bytes(addr, len(r)), r)
	}
	return len(b), nil
}

func (k *scripted) getEvent(ctx context.Context, b []byte) (int, error) {
	if len(k.events) == 0 {
		<-ctx.Done()
		return 0, ctx.Err()
	}
	addr := binary.LittleEndian.Uint64(b[cmdHdrSize:])
	copy(unix.Bytes(addr, eventRespSize), k.events[0])
	k.events = k.events[1:]
	return len(b), nil
}

func (k *scripted) close() error { return nil }

func newScripted(t *testing.T, k *scripted) *Channel {
	t.Helper()
	c, err := newChannel(k)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func le(v any) []byte {
	var b bytes.Buffer
	_ = binary.Write(&b, binary.LittleEndian, v)
	return b.Bytes()
}

// TestCommands: each call writes its command's header and struct as the
// kernel reads them.
func TestCommands(t *testing.T) {
	k := &scripted{resps: map[uint32][]byte{cmdCreateID: le(createIDResp{ID: 7})}}
	c := newScripted(t, k)
	id, err := c.CreateID(PSTCP)
	if err != nil || id.Handle() != 7 {
		t.Fatalf("create id: %v, %v", id, err)
	}
	dst := netip.MustParseAddrPort("10.0.0.2:18515")
	if err := id.ResolveAddr(netip.AddrPort{}, dst, 2*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := id.SetTOS(96); err != nil {
		t.Fatal(err)
	}
	if err := id.Connect(ConnParam{QPNum: 0x42, PrivateData: []byte("pvperf"), ResponderResources: 1, InitiatorDepth: 1, RetryCount: 7, RNRRetryCount: 7}); err != nil {
		t.Fatal(err)
	}
	if len(k.cmds) != 4 {
		t.Fatalf("%d commands", len(k.cmds))
	}
	hdr := func(b []byte) (uint32, uint16, uint16) {
		return binary.LittleEndian.Uint32(b), binary.LittleEndian.Uint16(b[4:]), binary.LittleEndian.Uint16(b[6:])
	}
	for i, want := range []struct {
		cmd     uint32
		in, out uint16
	}{{cmdCreateID, 24, 4}, {cmdResolveAddr, 272, 0}, {cmdSetOption, 24, 0}, {cmdConnect, 288, 0}} {
		cmd, in, out := hdr(k.cmds[i])
		if cmd != want.cmd || in != want.in || out != want.out || len(k.cmds[i]) != cmdHdrSize+int(in) {
			t.Errorf("command %d: header %d/%d/%d and %d bytes, want %d/%d/%d", i, cmd, in, out, len(k.cmds[i]), want.cmd, want.in, want.out)
		}
	}
	create := k.cmds[0][cmdHdrSize:]
	if binary.LittleEndian.Uint64(create) != id.UID || binary.LittleEndian.Uint16(create[16:]) != PSTCP || create[18] != qpTypeRC {
		t.Errorf("create id: % x", create)
	}
	ra := k.cmds[1][cmdHdrSize:]
	if binary.LittleEndian.Uint32(ra) != 7 || binary.LittleEndian.Uint32(ra[4:]) != 2000 ||
		binary.LittleEndian.Uint16(ra[8:]) != 0 || binary.LittleEndian.Uint16(ra[10:]) != 16 ||
		!bytes.Equal(ra[144:152], []byte{2, 0, 0x48, 0x53, 10, 0, 0, 2}) {
		t.Errorf("resolve addr: % x", ra[:152])
	}
	so := k.cmds[2][cmdHdrSize:]
	if binary.LittleEndian.Uint32(so[8:]) != 7 || binary.LittleEndian.Uint32(so[12:]) != optionLevelID ||
		binary.LittleEndian.Uint32(so[16:]) != optionTOS || binary.LittleEndian.Uint32(so[20:]) != 1 ||
		unix.Bytes(binary.LittleEndian.Uint64(so), 1)[0] != 96 {
		t.Errorf("set option: % x", so)
	}
	co := k.cmds[3][cmdHdrSize:]
	if binary.LittleEndian.Uint32(co) != 0x42 || string(co[8:14]) != "pvperf" || co[264] != 6 ||
		co[266] != 1 || co[267] != 1 || co[269] != 7 || co[270] != 7 || co[271] != 1 ||
		binary.LittleEndian.Uint32(co[272:]) != 7 {
		t.Errorf("connect: % x", co)
	}
	if err := id.Connect(ConnParam{PrivateData: make([]byte, 257)}); err == nil {
		t.Error("257 bytes of private data accepted")
	}
}

// TestErrno: a command the kernel refuses returns an error chain that
// names the command and wraps the errno.
func TestErrno(t *testing.T) {
	k := &scripted{errno: unix.EADDRINUSE}
	c := newScripted(t, k)
	id := &ID{c: c, id: 3}
	err := id.Bind(netip.MustParseAddrPort("127.0.0.1:18515"))
	if !errors.Is(err, unix.EADDRINUSE) || err.Error() != "rdmacm: bind: address already in use (address 127.0.0.1:18515)" {
		t.Errorf("bind: %v", err)
	}
	c.Close()
	if err := id.Listen(1); !errors.Is(err, ErrClosed) {
		t.Errorf("after close: %v", err)
	}
}

// TestEvents: events decode by port space; a connect request's param
// carries the peer's QP; a negative status is an errno.
func TestEvents(t *testing.T) {
	req := eventResp{UID: 1, ID: 9, Event: EventConnectRequest}
	cp := connParam{QPNum: 0x51, PrivateDataLen: 3, ResponderResources: 4, InitiatorDepth: 2, RNRRetryCount: 7, Valid: 1}
	copy(cp.PrivateData[:], "abc")
	copy(req.Param[:], le(cp))
	ud := eventResp{UID: 2, ID: 4, Event: EventEstablished}
	copy(ud.Param[:], le(udParam{QPNum: 0x61, QKey: 0x11111111, AH: ibabi.AHAttr{DGID: [16]byte{0xfe, 0x80}, IsGlobal: 1, PortNum: 1, SGIDIndex: 3}}))
	fail := eventResp{UID: 3, ID: 5, Event: EventAddrError, Status: uint32(0xffffffff - 110 + 1)} // -ETIMEDOUT
	k := &scripted{events: [][]byte{le(req), le(ud), le(fail)}}
	c := newScripted(t, k)
	ctx := context.Background()
	e, err := c.GetEvent(ctx, PSTCP)
	if err != nil || e.Type != EventConnectRequest || e.ID != 9 || e.Conn.QPNum != 0x51 || string(e.Conn.PrivateData) != "abc" ||
		e.Conn.ResponderResources != 4 || e.Conn.InitiatorDepth != 2 || e.Conn.RNRRetryCount != 7 || e.Err() != nil {
		t.Errorf("connect request: %+v, %v", e, err)
	}
	if nid := c.NewID(&e, PSTCP); nid.Handle() != 9 || nid.UID == 0 {
		t.Errorf("new id %+v", nid)
	}
	e, err = c.GetEvent(ctx, PSUDP)
	if err != nil || e.UD.QPNum != 0x61 || e.UD.QKey != 0x11111111 || !e.UD.AH.IsGlobal || e.UD.AH.GRH.SGIDIndex != 3 || e.UD.AH.GRH.DGID[0] != 0xfe {
		t.Errorf("UD established: %+v, %v", e, err)
	}
	e, err = c.GetEvent(ctx, PSTCP)
	if err != nil || !errors.Is(e.Err(), unix.ETIMEDOUT) || e.Err().Error() != "rdmacm: ADDR_ERROR: connection timed out" {
		t.Errorf("address error: %+v, %v", e, e.Err())
	}
	tctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if _, err := c.GetEvent(tctx, PSTCP); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("no event: %v", err)
	}
}

// TestInitQPAttr: the kernel's attributes become package verbs' with the
// same mask.
func TestInitQPAttr(t *testing.T) {
	r := ibabi.QPAttr{Mask: uint32(verbs.AttrState | verbs.AttrAV | verbs.AttrPathMTU | verbs.AttrDestQPN | verbs.AttrRQPSN),
		QPState: uint32(verbs.StateRTR), PathMTU: uint32(verbs.MTU1024), DestQPNum: 0x77, RQPSN: 0x123456,
		AH: ibabi.AHAttr{DGID: [16]byte{15: 9}, HopLimit: 64, IsGlobal: 1, PortNum: 1}, MaxDestRdAtomic: 16}
	k := &scripted{resps: map[uint32][]byte{cmdInitQPAttr: le(r)}}
	c := newScripted(t, k)
	id := &ID{c: c, id: 2}
	a, m, err := id.InitQPAttr(verbs.StateRTR)
	if err != nil {
		t.Fatal(err)
	}
	if m != verbs.AttrState|verbs.AttrAV|verbs.AttrPathMTU|verbs.AttrDestQPN|verbs.AttrRQPSN || a.State != verbs.StateRTR ||
		a.PathMTU != verbs.MTU1024 || a.DestQPN != 0x77 || a.RQPSN != 0x123456 || a.AH.GRH.DGID[15] != 9 ||
		a.AH.GRH.HopLimit != 64 || !a.AH.IsGlobal || a.AH.Port != 1 || a.MaxDestRdAtomic != 16 {
		t.Errorf("attributes %+v, mask %#x", a, m)
	}
	if q := k.cmds[0][cmdHdrSize:]; binary.LittleEndian.Uint32(q[8:]) != 2 || binary.LittleEndian.Uint32(q[12:]) != uint32(verbs.StateRTR) {
		t.Errorf("init qp attr: % x", q)
	}
}

// TestOpenWithoutKernel: on a host without the kernel's connection
// manager, Open says so.
func TestOpenWithoutKernel(t *testing.T) {
	c, err := Open()
	if err == nil {
		c.Close()
		t.Skip("this host has an rdma_cm device")
	}
	if !errors.Is(err, os.ErrNotExist) && !errors.Is(err, ErrABI) {
		t.Errorf("open: %v", err)
	}
	t.Log(err)
}

func TestCheckABI(t *testing.T) {
	dir := t.TempDir()
	for v, ok := range map[string]bool{"4\n": true, "3\n": false, "x": false} {
		p := filepath.Join(dir, "abi")
		if err := os.WriteFile(p, []byte(v), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := checkABI(p); (err == nil) != ok || (err != nil && !errors.Is(err, ErrABI)) {
			t.Errorf("version %q: %v", v, err)
		}
	}
}

// TestExpect: the expected event passes; a rejection, an error status or
// another event is an error that says what was awaited.
func TestExpect(t *testing.T) {
	k := &scripted{events: [][]byte{
		le(eventResp{Event: EventAddrResolved}),
		le(eventResp{Event: EventRejected, Status: 28}),
		le(eventResp{Event: EventDisconnected}),
	}}
	c := newScripted(t, k)
	ctx := context.Background()
	if _, err := c.Expect(ctx, PSTCP, EventAddrResolved); err != nil {
		t.Error(err)
	}
	_, err := c.Expect(ctx, PSTCP, EventEstablished)
	if !errors.Is(err, ErrRejected) || err.Error() != "rdmacm: connection rejected (IB CM reason 28: rejected by the peer) (waiting for ESTABLISHED)" {
		t.Errorf("rejected: %v", err)
	}
	if _, err := c.Expect(ctx, PSTCP, EventEstablished); !errors.Is(err, ErrEvent) {
		t.Errorf("disconnected: %v", err)
	}
}
