//go:build linux

package emu

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/pvperf/pvperf/internal/unix"
	"github.com/pvperf/pvperf/verbs"
)

// Waits of the test connection managers: short, so that failures show
// quickly.
const (
	testResp = 2 * time.Second
	testReq  = 300 * time.Millisecond
)

var loopback = netip.MustParseAddr("127.0.0.1")

// testCM returns a connection manager of one default emulated device.
func testCM(t *testing.T, resp time.Duration) *cm {
	t.Helper()
	d, err := NewDevice("emu0", DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	m := newCM([]*Device{d}, resp, testReq)
	t.Cleanup(func() { _ = m.Close() })
	return m
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// cmListen returns a listener of m bound to 127.0.0.1, port 0, and the
// address it got.
func cmListen(t *testing.T, m *cm, ps verbs.PortSpace, backlog int) (verbs.CMID, netip.AddrPort) {
	t.Helper()
	id, err := m.CreateID(ps)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = id.Close() })
	if err := id.Bind(netip.AddrPortFrom(loopback, 0)); err != nil {
		t.Fatal(err)
	}
	if err := id.Listen(backlog); err != nil {
		t.Fatal(err)
	}
	a, err := id.Bound()
	if err != nil {
		t.Fatal(err)
	}
	if a.Src.Addr() != loopback || a.Src.Port() == 0 {
		t.Fatalf("listener bound to %v", a.Src)
	}
	return id, a.Src
}

// cmResolve returns an id of m resolved to dst.
func cmResolve(t *testing.T, m *cm, ps verbs.PortSpace, dst netip.AddrPort) verbs.CMID {
	t.Helper()
	id, err := m.CreateID(ps)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = id.Close() })
	ctx := testCtx(t)
	if err := id.ResolveAddr(ctx, netip.Addr{}, dst, time.Second); err != nil {
		t.Fatal(err)
	}
	if err := id.ResolveRoute(ctx, time.Second); err != nil {
		t.Fatal(err)
	}
	return id
}

// freePort returns a loopback TCP port nobody listens on.
func freePort(t *testing.T) netip.AddrPort {
	t.Helper()
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	a := addrPortOf(ln.Addr())
	ln.Close()
	return a
}

// cmEnd is a QP with its memory on an emulated device.
type cmEnd struct {
	pd  verbs.PD
	scq verbs.CQ
	rcq verbs.CQ
	qp  verbs.QP
	mr  verbs.MR
}

func newCMEnd(t *testing.T, ctx verbs.Context, typ verbs.QPType) *cmEnd {
	t.Helper()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	e := &cmEnd{}
	var err error
	e.pd, err = ctx.AllocPD()
	must(err)
	mem, err := ctx.AllocMemory(1 << 16)
	must(err)
	e.mr, err = e.pd.RegMR(mem.Bytes(), verbs.AccessLocalWrite|verbs.AccessRemoteWrite|verbs.AccessRemoteRead)
	must(err)
	e.scq, err = ctx.CreateCQ(verbs.CQInit{Entries: 16})
	must(err)
	e.rcq, err = ctx.CreateCQ(verbs.CQInit{Entries: 16})
	must(err)
	e.qp, err = e.pd.CreateQP(verbs.QPInit{Type: typ, SendCQ: e.scq, RecvCQ: e.rcq,
		Cap: verbs.QPCap{MaxSendWR: 8, MaxRecvWR: 8, MaxSendSGE: 1, MaxRecvSGE: 1}})
	must(err)
	t.Cleanup(func() {
		for _, c := range []interface{ Close() error }{e.qp, e.scq, e.rcq, e.mr, mem, e.pd} {
			if err := c.Close(); err != nil {
				t.Error(err)
			}
		}
	})
	return e
}

func (e *cmEnd) recv(off uint64, n uint32) error {
	_, err := e.qp.PostRecv([]verbs.RecvWR{{ID: off, SGL: []verbs.SGE{{Addr: e.mr.Addr() + off, Length: n, LKey: e.mr.LKey()}}}})
	return err
}

func (e *cmEnd) post(t *testing.T, wr verbs.SendWR) {
	t.Helper()
	if _, err := e.qp.PostSend([]verbs.SendWR{wr}); err != nil {
		t.Fatal(err)
	}
}

func pollOne(t *testing.T, cq verbs.CQ) verbs.WC {
	t.Helper()
	wc := make([]verbs.WC, 1)
	for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); pause() {
		n, err := cq.Poll(wc)
		if err != nil {
			t.Fatal(err)
		}
		if n == 1 {
			if err := wc[0].Err(); err != nil {
				t.Fatal(err)
			}
			return wc[0]
		}
	}
	t.Fatal("no completion in 3 s")
	return verbs.WC{}
}

// moveQP applies the id's attributes for each state to qp and returns
// them.
func moveQP(id verbs.CMID, qp verbs.QP, states ...verbs.QPState) (map[verbs.QPState]verbs.QPAttr, error) {
	out := map[verbs.QPState]verbs.QPAttr{}
	for _, s := range states {
		a, m, err := id.InitQPAttr(s)
		if err != nil {
			return nil, err
		}
		if err := qp.Modify(&a, m); err != nil {
			return nil, fmt.Errorf("modify to %v with mask %#x: %w", s, uint32(m), err)
		}
		out[s] = a
	}
	return out, nil
}

func move(t *testing.T, id verbs.CMID, qp verbs.QP, states ...verbs.QPState) map[verbs.QPState]verbs.QPAttr {
	t.Helper()
	out, err := moveQP(id, qp, states...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func openEmu(t *testing.T) verbs.Context {
	t.Helper()
	d, err := NewDevice("emu0", DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	ctx, err := d.Open()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := ctx.Close(); err != nil {
			t.Error(err)
		}
	})
	return ctx
}

// checkCMGoroutines fails unless the connection manager's goroutines
// are gone. The goroutines that run context.AfterFunc callbacks may take
// a moment to end after their callback: wait a little for them.
func checkCMGoroutines(t *testing.T) {
	t.Helper()
	var left []string
	for deadline := time.Now().Add(time.Second); ; time.Sleep(5 * time.Millisecond) {
		buf := make([]byte, 1<<20)
		buf = buf[:runtime.Stack(buf, true)]
		left = left[:0]
		for _, g := range strings.Split(string(buf), "\n\n") {
			if strings.Contains(g, "emu.(*cmID).") {
				left = append(left, g)
			}
		}
		if len(left) == 0 || time.Now().After(deadline) {
			break
		}
	}
	if len(left) > 0 {
		t.Errorf("%d goroutines of the connection manager left:\n%s", len(left), strings.Join(left, "\n\n"))
	}
}

// TestCMRC connects two RC QPs as a program does with the kernel's
// rdma_cm, then sends and writes over the connection and disconnects it.
func TestCMRC(t *testing.T) {
	srvM, cliM := testCM(t, testResp), testCM(t, testResp)
	ctx := testCtx(t)
	dev := openEmu(t)
	attr, err := dev.QueryDevice()
	if err != nil {
		t.Fatal(err)
	}
	a, b := newCMEnd(t, dev, verbs.RC), newCMEnd(t, dev, verbs.RC)
	lis, addr := cmListen(t, srvM, verbs.PortSpaceTCP, 1)
	cli := cmResolve(t, cliM, verbs.PortSpaceTCP, addr)
	bound, err := cli.Bound()
	if err != nil {
		t.Fatal(err)
	}
	if bound.NodeGUID != attr.NodeGUID || bound.Port != 1 || bound.Dst != addr || bound.Src.Addr() != loopback {
		t.Errorf("bound %+v, node GUID %#x", bound, attr.NodeGUID)
	}
	if _, _, err := cli.InitQPAttr(verbs.StateRTR); !errors.Is(err, unix.EINVAL) {
		t.Errorf("RTR attributes before Connect: %v", err)
	}
	if init := move(t, cli, a.qp, verbs.StateInit)[verbs.StateInit]; init.Access != 0 || init.Port != 1 {
		t.Errorf("INIT before Connect: %+v", init)
	}
	if err := cli.SetAckTimeout(16); err != nil {
		t.Fatal(err)
	}

	type accepted struct {
		id    verbs.CMID
		req   verbs.ConnParam
		attrs map[verbs.QPState]verbs.QPAttr
		err   error
	}
	done := make(chan accepted, 1)
	go func() {
		var r accepted
		r.id, r.req, r.err = lis.GetRequest(ctx)
		if r.err == nil {
			r.attrs, r.err = moveQP(r.id, b.qp, verbs.StateInit, verbs.StateRTR, verbs.StateRTS)
		}
		if r.err == nil {
			r.err = b.recv(0, 64)
		}
		if r.err == nil {
			r.err = r.id.Accept(ctx, verbs.ConnParam{QPNum: b.qp.Num(), ResponderResources: 3, InitiatorDepth: 4, RNRRetryCount: 6})
		}
		done <- r
	}()
	rep, err := cli.Connect(ctx, verbs.ConnParam{QPNum: a.qp.Num(), ResponderResources: 1, InitiatorDepth: 3,
		RetryCount: 5, RNRRetryCount: 7, PrivateData: []byte("hello")})
	if err != nil {
		t.Fatal(err)
	}
	// The REP's resources, from the active side's point of view.
	if rep.QPNum != b.qp.Num() || rep.ResponderResources != 4 || rep.InitiatorDepth != 3 || rep.RNRRetryCount != 6 || len(rep.PrivateData) != repPrivateData {
		t.Errorf("reply %+v", rep)
	}
	ca := move(t, cli, a.qp, verbs.StateInit, verbs.StateRTR, verbs.StateRTS)
	if err := cli.Establish(); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil {
		t.Fatal(r.err)
	}
	srv := r.id
	t.Cleanup(func() { _ = srv.Close() })
	checkRC(t, r.req, r.attrs, ca, a, b)
	if cpsn, spsn := cli.(*cmID).psn, srv.(*cmID).psn; ca[verbs.StateRTR].RQPSN != cpsn || r.attrs[verbs.StateRTR].RQPSN != spsn {
		t.Errorf("RQ PSNs %#x and %#x, the ids' PSNs %#x and %#x", ca[verbs.StateRTR].RQPSN, r.attrs[verbs.StateRTR].RQPSN, cpsn, spsn)
	}
	if sb, err := srv.Bound(); err != nil || sb.NodeGUID != attr.NodeGUID || sb.Src != addr || sb.Dst.Port() == 0 {
		t.Errorf("passive id bound %+v, %v", sb, err)
	}

	// A SEND, then an RDMA WRITE, from the active side to the passive.
	buf := a.mr.Bytes()
	copy(buf, "over the emulated rdma_cm")
	sge := []verbs.SGE{{Addr: a.mr.Addr(), Length: 25, LKey: a.mr.LKey()}}
	a.post(t, verbs.SendWR{ID: 1, Opcode: verbs.OpSend, Flags: verbs.SendSignaled, SGL: sge})
	pollOne(t, a.scq)
	if wc := pollOne(t, b.rcq); wc.ByteLen != 25 || string(b.mr.Bytes()[:25]) != "over the emulated rdma_cm" {
		t.Errorf("received %d bytes: %q", wc.ByteLen, b.mr.Bytes()[:25])
	}
	a.post(t, verbs.SendWR{ID: 2, Opcode: verbs.OpRDMAWrite, Flags: verbs.SendSignaled, SGL: sge,
		RemoteAddr: b.mr.Addr() + 4096, RKey: b.mr.RKey()})
	pollOne(t, a.scq)
	if got := string(b.mr.Bytes()[4096 : 4096+25]); got != "over the emulated rdma_cm" {
		t.Errorf("written %q", got)
	}

	// The active side disconnects; the passive side sees it and answers.
	if err := cli.Disconnect(); err != nil {
		t.Fatal(err)
	}
	if err := srv.WaitDisconnected(ctx); err != nil {
		t.Fatal(err)
	}
	if err := srv.Disconnect(); err != nil {
		t.Fatal(err)
	}
	if err := cli.WaitDisconnected(ctx); err != nil {
		t.Fatal(err)
	}
	for _, id := range []verbs.CMID{cli, srv, lis} {
		if err := id.Close(); err != nil {
			t.Error(err)
		}
	}
	checkCMGoroutines(t)
}

// checkRC compares the request the passive side saw and both sides' QP
// attributes with what the kernel's connection manager gives.
func checkRC(t *testing.T, req verbs.ConnParam, sa, ca map[verbs.QPState]verbs.QPAttr, a, b *cmEnd) {
	t.Helper()
	// The REQ's resources, from the passive side's point of view.
	if req.QPNum != a.qp.Num() || req.ResponderResources != 3 || req.InitiatorDepth != 1 || req.RetryCount != 5 ||
		req.RNRRetryCount != 7 || len(req.PrivateData) != reqPrivateData-cmaHdrLen || !bytes.HasPrefix(req.PrivateData, []byte("hello")) {
		t.Errorf("request %+v", req)
	}
	all := verbs.AccessRemoteWrite | verbs.AccessRemoteRead | verbs.AccessRemoteAtomic
	if sa[verbs.StateInit].Access != all || ca[verbs.StateInit].Access != all {
		t.Errorf("INIT access: passive %v, active %v", sa[verbs.StateInit].Access, ca[verbs.StateInit].Access)
	}
	srtr, crtr, srts, crts := sa[verbs.StateRTR], ca[verbs.StateRTR], sa[verbs.StateRTS], ca[verbs.StateRTS]
	if srtr.DestQPN != a.qp.Num() || crtr.DestQPN != b.qp.Num() || srtr.RQPSN != crts.SQPSN || crtr.RQPSN != srts.SQPSN {
		t.Errorf("QPNs and PSNs: passive RTR %+v RTS %+v, active RTR %+v RTS %+v", srtr, srts, crtr, crts)
	}
	if srtr.PathMTU != DefaultConfig().MTU || srtr.MinRNRTimer != 0 || !srtr.AH.IsGlobal || srtr.AH.Port != 1 ||
		srtr.AH.GRH.HopLimit != CMHopLimit || srtr.AH.GRH.DGID != crtr.AH.GRH.DGID {
		t.Errorf("passive RTR %+v", srtr)
	}
	// Passive (before its Accept): responder resources from the
	// requester's initiator depth (3), initiator depth from its responder
	// resources (1); active: from the REP's initiator depth (4) and
	// responder resources (3).
	if srtr.MaxDestRdAtomic != 3 || srts.MaxRdAtomic != 1 || crtr.MaxDestRdAtomic != 4 || crts.MaxRdAtomic != 3 {
		t.Errorf("read depths: passive %d/%d, active %d/%d", srtr.MaxDestRdAtomic, srts.MaxRdAtomic, crtr.MaxDestRdAtomic, crts.MaxRdAtomic)
	}
	// Retry counts: the requester's retry count on both sides; RNR retry
	// from the REQ (passive) and from the REP (active). The ACK timeout:
	// the active side set 16.
	if srts.RetryCnt != 5 || crts.RetryCnt != 5 || srts.RNRRetry != 7 || crts.RNRRetry != 6 ||
		crts.Timeout != 16 || srts.Timeout != CMDefaultAckTimeout {
		t.Errorf("RTS: passive %+v, active %+v", srts, crts)
	}
}

// TestCMUD resolves a datagram service (SIDR) and sends a datagram to the
// QP it names.
func TestCMUD(t *testing.T) {
	srvM, cliM := testCM(t, testResp), testCM(t, testResp)
	ctx := testCtx(t)
	dev := openEmu(t)
	a, b := newCMEnd(t, dev, verbs.UD), newCMEnd(t, dev, verbs.UD)
	lis, addr := cmListen(t, srvM, verbs.PortSpaceUDP, 1)
	cli := cmResolve(t, cliM, verbs.PortSpaceUDP, addr)
	init := move(t, cli, a.qp, verbs.StateInit, verbs.StateRTR, verbs.StateRTS)[verbs.StateInit]
	if init.QKey != CMUDPQKey || init.Port != 1 {
		t.Errorf("UD INIT %+v", init)
	}
	if err := cli.SetAckTimeout(14); !errors.Is(err, unix.EINVAL) {
		t.Errorf("ACK timeout of a UD id: %v", err)
	}
	done := make(chan error, 1)
	var srvGID verbs.GID
	go func() {
		srv, req, err := lis.GetRequest(ctx)
		if err == nil {
			t.Cleanup(func() { _ = srv.Close() })
			if req.QPNum != 0 || len(req.PrivateData) != sidrReqPrivateData-cmaHdrLen || req.PrivateData[0] != 'u' {
				t.Errorf("SIDR request %+v", req)
			}
			if _, err = moveQP(srv, b.qp, verbs.StateInit, verbs.StateRTR, verbs.StateRTS); err == nil {
				err = b.recv(0, 40+64)
			}
			srv.(*cmID).mu.Lock()
			srvGID = srv.(*cmID).gid()
			srv.(*cmID).mu.Unlock()
			if err == nil {
				err = srv.Accept(ctx, verbs.ConnParam{QPNum: b.qp.Num(), QKey: CMUDPQKey})
			}
		}
		done <- err
	}()
	rep, err := cli.Connect(ctx, verbs.ConnParam{QPNum: a.qp.Num(), PrivateData: []byte("ud")})
	if err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	cgid := cli.(*cmID).dev.gids[cli.(*cmID).gidIdx]
	if rep.QPNum != b.qp.Num() || rep.QKey != CMUDPQKey || !rep.AH.IsGlobal || rep.AH.Port != 1 ||
		rep.AH.GRH.DGID != srvGID || int(rep.AH.GRH.SGIDIndex) != cgid.Index || rep.AH.GRH.HopLimit != CMHopLimit {
		t.Errorf("SIDR reply %+v (server GID %v)", rep, srvGID)
	}
	ah, err := a.pd.CreateAH(rep.AH)
	if err != nil {
		t.Fatal(err)
	}
	defer ah.Close()
	copy(a.mr.Bytes(), "a datagram")
	a.post(t, verbs.SendWR{ID: 1, Opcode: verbs.OpSend, Flags: verbs.SendSignaled,
		SGL: []verbs.SGE{{Addr: a.mr.Addr(), Length: 10, LKey: a.mr.LKey()}}, AH: ah, RemoteQPN: rep.QPNum, RemoteQKey: rep.QKey})
	pollOne(t, a.scq)
	if wc := pollOne(t, b.rcq); wc.ByteLen != 40+10 || wc.SrcQP != a.qp.Num() || string(b.mr.Bytes()[40:50]) != "a datagram" {
		t.Errorf("received %+v: %q", wc, b.mr.Bytes()[40:50])
	}
	if err := cli.Disconnect(); err != nil {
		t.Errorf("disconnect of a datagram id: %v", err)
	}
}

// TestCMNoListener: a request to a port nobody listens on, or to a
// listener of the other port space, is rejected as the IB CM does (no
// listener for the service ID).
func TestCMNoListener(t *testing.T) {
	m := testCM(t, testResp)
	ctx := testCtx(t)
	tcpLis, tcpAddr := cmListen(t, m, verbs.PortSpaceTCP, 1)
	udpLis, udpAddr := cmListen(t, m, verbs.PortSpaceUDP, 1)
	free := freePort(t)
	for _, c := range []struct {
		name string
		ps   verbs.PortSpace
		dst  netip.AddrPort
		sidr bool
		code int
	}{
		{"rc-closed-port", verbs.PortSpaceTCP, free, false, rejInvalidService},
		{"ud-closed-port", verbs.PortSpaceUDP, free, true, sidrUnsupported},
		{"rc-to-udp-listener", verbs.PortSpaceTCP, udpAddr, false, rejInvalidService},
		{"ud-to-tcp-listener", verbs.PortSpaceUDP, tcpAddr, true, sidrUnsupported},
	} {
		t.Run(c.name, func(t *testing.T) {
			id := cmResolve(t, m, c.ps, c.dst)
			_, err := id.Connect(ctx, verbs.ConnParam{QPNum: 1})
			var rej *CMRejectError
			if !errors.Is(err, verbs.ErrRejected) || !errors.As(err, &rej) || rej.SIDR != c.sidr || rej.Reason != c.code ||
				!strings.Contains(err.Error(), "no listener") || !strings.HasPrefix(err.Error(), "emu cm: connect "+c.dst.String()+": ") {
				t.Errorf("connect: %v", err)
			}
			if _, err := id.Connect(ctx, verbs.ConnParam{QPNum: 1}); !errors.Is(err, unix.EINVAL) {
				t.Errorf("second connect: %v", err)
			}
			if err := id.Disconnect(); !errors.Is(err, unix.EINVAL) {
				t.Errorf("disconnect of an id never connected: %v", err)
			}
		})
	}
	// The listeners got nothing.
	short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	for _, l := range []verbs.CMID{tcpLis, udpLis} {
		if _, _, err := l.GetRequest(short); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("get request: %v", err)
		}
	}
}

// TestCMReject: the peer's Reject reaches Connect with its private data.
func TestCMReject(t *testing.T) {
	for _, ps := range []verbs.PortSpace{verbs.PortSpaceTCP, verbs.PortSpaceUDP} {
		t.Run(ps.String(), func(t *testing.T) {
			m := testCM(t, testResp)
			ctx := testCtx(t)
			lis, addr := cmListen(t, m, ps, 1)
			go func() {
				id, _, err := lis.GetRequest(ctx)
				if err != nil {
					t.Error(err)
					return
				}
				defer id.Close()
				if err := id.Reject(make([]byte, rejPrivateData+1)); !errors.Is(err, unix.EINVAL) {
					t.Errorf("reject with too much private data: %v", err)
				}
				if err := id.Reject([]byte("busy")); err != nil {
					t.Error(err)
				}
			}()
			_, err := cmResolve(t, m, ps, addr).Connect(ctx, verbs.ConnParam{QPNum: 7})
			var rej *CMRejectError
			if !errors.Is(err, verbs.ErrRejected) || !errors.As(err, &rej) || !bytes.HasPrefix(rej.PrivateData, []byte("busy")) {
				t.Fatalf("connect: %v", err)
			}
			want, n := rejConsumer, rejPrivateData
			if ps == verbs.PortSpaceUDP {
				want, n = sidrReject, sidrRepPrivateData
			}
			if rej.Reason != want || len(rej.PrivateData) != n {
				t.Errorf("reason %d, %d bytes of private data", rej.Reason, len(rej.PrivateData))
			}
		})
	}
}

// silentServer accepts TCP connections and reads them without answering;
// with hangUp, it closes each connection after its first bytes.
func silentServer(t *testing.T, hangUp bool) netip.AddrPort {
	t.Helper()
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				buf := make([]byte, 512)
				for {
					if _, err := c.Read(buf); err != nil || hangUp {
						return
					}
				}
			}()
		}
	}()
	return addrPortOf(ln.Addr())
}

// TestCMTimeout: a peer that never answers makes Connect fail with
// ErrCMTimeout after the response timeout, or with ctx's error first; one
// that hangs up mid-handshake, with io.ErrUnexpectedEOF.
func TestCMTimeout(t *testing.T) {
	t.Parallel()
	addr := silentServer(t, false)
	m := testCM(t, 200*time.Millisecond)
	start := time.Now()
	_, err := cmResolve(t, m, verbs.PortSpaceTCP, addr).Connect(testCtx(t), verbs.ConnParam{QPNum: 1})
	if !errors.Is(err, verbs.ErrCMTimeout) || time.Since(start) > 10*time.Second {
		t.Errorf("connect after %v: %v", time.Since(start), err)
	}

	m = testCM(t, testResp)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if _, err := cmResolve(t, m, verbs.PortSpaceUDP, addr).Connect(ctx, verbs.ConnParam{}); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("connect with a deadline: %v", err)
	}

	addr = silentServer(t, true)
	if _, err := cmResolve(t, m, verbs.PortSpaceTCP, addr).Connect(testCtx(t), verbs.ConnParam{}); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("connect to a server that hangs up: %v", err)
	}
}

// handshake connects an id of cli to listener lis with made-up QP
// numbers and returns both ends.
func handshake(t *testing.T, cli *cm, lis verbs.CMID, addr netip.AddrPort, qpn uint32) (verbs.CMID, verbs.CMID) {
	t.Helper()
	ctx := testCtx(t)
	id := cmResolve(t, cli, verbs.PortSpaceTCP, addr)
	srvc := make(chan verbs.CMID, 1)
	go func() {
		srv, _, err := lis.GetRequest(ctx)
		if err != nil {
			t.Error(err)
			srvc <- nil
			return
		}
		t.Cleanup(func() { _ = srv.Close() })
		if err := srv.Accept(ctx, verbs.ConnParam{QPNum: qpn + 1}); err != nil {
			t.Error(err)
		}
		srvc <- srv
	}()
	if _, err := id.Connect(ctx, verbs.ConnParam{QPNum: qpn}); err != nil {
		t.Fatal(err)
	}
	if err := id.Establish(); err != nil {
		t.Fatal(err)
	}
	srv := <-srvc
	if srv == nil {
		t.FailNow()
	}
	return id, srv
}

// TestCMDisconnect: either side's Disconnect, or Close, ends the
// connection for both.
func TestCMDisconnect(t *testing.T) {
	t.Parallel()
	m := testCM(t, testResp)
	ctx := testCtx(t)
	lis, addr := cmListen(t, m, verbs.PortSpaceTCP, 2)

	cli, srv := handshake(t, m, lis, addr, 10)
	if err := srv.Disconnect(); err != nil {
		t.Fatal(err)
	}
	if err := cli.WaitDisconnected(ctx); err != nil {
		t.Fatal(err)
	}
	if err := cli.Disconnect(); err != nil { // the DREP
		t.Fatal(err)
	}
	if err := srv.WaitDisconnected(ctx); err != nil {
		t.Fatal(err)
	}
	if err := srv.Disconnect(); err != nil {
		t.Errorf("second disconnect: %v", err)
	}

	cli, srv = handshake(t, m, lis, addr, 20)
	short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if err := cli.WaitDisconnected(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("wait while connected: %v", err)
	}
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
	if err := cli.WaitDisconnected(ctx); err != nil {
		t.Fatal(err)
	}
	if err := srv.Disconnect(); !errors.Is(err, verbs.ErrClosed) {
		t.Errorf("disconnect after close: %v", err)
	}

	// A peer that never answers the DREQ: disconnected after the
	// response timeout, as the kernel's DREQ times out.
	quick := testCM(t, 300*time.Millisecond)
	cli, _ = handshake(t, quick, lis, addr, 30)
	if err := cli.Disconnect(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := cli.WaitDisconnected(ctx); err != nil || time.Since(start) > time.Second {
		t.Errorf("wait disconnected without a DREP: %v after %v", err, time.Since(start))
	}
}

// TestCMConcurrent connects four ids to one listener at once;
// GetRequest returns them in the order their requests came.
func TestCMConcurrent(t *testing.T) {
	t.Parallel()
	const n = 4
	srvM, cliM := testCM(t, testResp), testCM(t, testResp)
	ctx := testCtx(t)
	lis, addr := cmListen(t, srvM, verbs.PortSpaceTCP, n)
	queued := lis.(*cmID).reqs
	errc := make(chan error, n)
	for i := range n {
		id := cmResolve(t, cliM, verbs.PortSpaceTCP, addr)
		go func() {
			_, err := id.Connect(ctx, verbs.ConnParam{QPNum: uint32(100 + i)})
			if err == nil {
				err = id.Establish()
			}
			errc <- err
		}()
		for len(queued) < i+1 {
			time.Sleep(time.Millisecond)
		}
	}
	for i := range n {
		srv, req, err := lis.GetRequest(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if req.QPNum != uint32(100+i) {
			t.Errorf("request %d from QP %d", i, req.QPNum)
		}
		if err := srv.Accept(ctx, verbs.ConnParam{QPNum: uint32(200 + i)}); err != nil {
			t.Error(err)
		}
	}
	for range n {
		if err := <-errc; err != nil {
			t.Error(err)
		}
	}
}

// TestCMMalformed: a listener drops connections that send garbage, or
// nothing, and keeps serving.
func TestCMMalformed(t *testing.T) {
	t.Parallel()
	m := testCM(t, testResp)
	lis, addr := cmListen(t, m, verbs.PortSpaceTCP, 1)
	rtu, _ := (&cmMsg{typ: msgRTU}).encode()
	long := append([]byte("PVCM\x01\x01\xff\xff"), make([]byte, 64)...)
	for name, b := range map[string][]byte{
		"http":      []byte("GET / HTTP/1.0\r\n\r\n"),
		"silent":    nil,
		"too long":  long,
		"truncated": []byte("PVCM\x01\x01\x00\x30\x01\x06"),
		"rtu":       rtu,
	} {
		c, err := net.Dial("tcp4", addr.String())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Write(b); err != nil {
			t.Fatal(err)
		}
		if name == "truncated" {
			_ = c.(*net.TCPConn).CloseWrite()
		}
		_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
		// The listener closes the connection: EOF, or a reset when it
		// left bytes unread.
		if n, err := c.Read(make([]byte, 64)); n != 0 || err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
			t.Errorf("%s: the listener answered %d bytes, %v", name, n, err)
		}
		c.Close()
	}
	cli, _ := handshake(t, m, lis, addr, 30)
	if err := cli.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestCMErrors: the calls that the kernel's connection manager refuses.
func TestCMErrors(t *testing.T) {
	t.Parallel()
	m := testCM(t, testResp)
	ctx := testCtx(t)
	if _, err := m.CreateID(0x0113); !errors.Is(err, verbs.ErrNotSupported) {
		t.Errorf("port space IB: %v", err)
	}
	id, err := m.CreateID(verbs.PortSpaceTCP)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := id.InitQPAttr(verbs.StateInit); !errors.Is(err, unix.ENODEV) {
		t.Errorf("attributes of an unbound id: %v", err)
	}
	if _, err := id.Connect(ctx, verbs.ConnParam{}); !errors.Is(err, unix.EINVAL) {
		t.Errorf("connect before resolving: %v", err)
	}
	if err := id.Establish(); !errors.Is(err, unix.EINVAL) {
		t.Errorf("establish before connecting: %v", err)
	}
	if err := id.WaitDisconnected(ctx); !errors.Is(err, unix.EINVAL) {
		t.Errorf("wait disconnected, never connected: %v", err)
	}
	// An unspecified destination is loopback.
	if err := id.ResolveAddr(ctx, netip.Addr{}, netip.MustParseAddrPort("0.0.0.0:1"), time.Second); err != nil {
		t.Fatal(err)
	}
	if err := id.ResolveRoute(ctx, time.Second); err != nil {
		t.Fatal(err)
	}
	if _, err := id.Connect(ctx, verbs.ConnParam{PrivateData: make([]byte, reqPrivateData-cmaHdrLen+1)}); !errors.Is(err, unix.EINVAL) {
		t.Errorf("connect with too much private data: %v", err)
	}
	if err := id.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := id.Bound(); !errors.Is(err, verbs.ErrClosed) {
		t.Errorf("bound after close: %v", err)
	}

	// A listener bound to any address, port 0; GetRequest ends when it
	// closes.
	lis, err := m.CreateID(verbs.PortSpaceTCP)
	if err != nil {
		t.Fatal(err)
	}
	if err := lis.Listen(0); err != nil {
		t.Fatal(err)
	}
	a, err := lis.Bound()
	if err != nil || a.Src.Port() == 0 || !a.Src.Addr().IsUnspecified() || a.NodeGUID != 0 {
		t.Errorf("listener bound to %+v, %v", a, err)
	}
	other, err := m.CreateID(verbs.PortSpaceUDP)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if err := other.Bind(a.Src); !errors.Is(err, unix.EADDRINUSE) {
		t.Errorf("bind to a port in use: %v", err)
	}
	errc := make(chan error, 1)
	go func() {
		_, _, err := lis.GetRequest(ctx)
		errc <- err
	}()
	time.Sleep(10 * time.Millisecond)
	if err := lis.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-errc; !errors.Is(err, verbs.ErrClosed) {
		t.Errorf("get request on a closing listener: %v", err)
	}
	if _, _, err := lis.GetRequest(ctx); !errors.Is(err, verbs.ErrClosed) {
		t.Errorf("get request on a closed listener: %v", err)
	}
}

// TestCMUnreachable: addresses that no emulated device owns.
func TestCMUnreachable(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	none := newCM(nil, testResp, testReq)
	defer none.Close()
	id, err := none.CreateID(verbs.PortSpaceTCP)
	if err != nil {
		t.Fatal(err)
	}
	if err := id.ResolveAddr(ctx, netip.Addr{}, netip.MustParseAddrPort("127.0.0.1:1"), time.Second); !errors.Is(err, verbs.ErrUnreachable) {
		t.Errorf("resolve without devices: %v", err)
	}
	lo, err := NewDevice("emu0", Config{Profile: ProfileUnrestricted, RoCE: 2, MTU: verbs.MTU1024, Netdev: "lo"})
	if err != nil {
		t.Fatal(err)
	}
	m := newCM([]*Device{lo}, testResp, testReq)
	defer m.Close()
	id, err = m.CreateID(verbs.PortSpaceTCP)
	if err != nil {
		t.Fatal(err)
	}
	// A documentation address: reached, if at all, from an address of
	// another interface. Nothing is sent.
	err = id.ResolveAddr(ctx, netip.Addr{}, netip.MustParseAddrPort("192.0.2.77:1"), time.Second)
	if !errors.Is(err, verbs.ErrUnreachable) {
		t.Errorf("resolve: %v", err)
	}
	t.Log(err)
}

// TestCMClose: closing the CM closes its ids and ends their goroutines.
func TestCMClose(t *testing.T) {
	m := newCM(nil, testResp, testReq)
	d, err := NewDevice("emu0", DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	m.devs = []*Device{d}
	lis, addr := cmListen(t, m, verbs.PortSpaceTCP, 4)
	handshake(t, m, lis, addr, 40)
	// A request left in the backlog.
	pending := cmResolve(t, m, verbs.PortSpaceTCP, addr)
	errc := make(chan error, 1)
	go func() {
		_, err := pending.Connect(testCtx(t), verbs.ConnParam{QPNum: 50})
		errc <- err
	}()
	for len(lis.(*cmID).reqs) == 0 {
		time.Sleep(time.Millisecond)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	// Closed, or rejected by the listener closing first.
	if err := <-errc; !errors.Is(err, verbs.ErrClosed) && !errors.Is(err, verbs.ErrRejected) {
		t.Errorf("connect while the CM closes: %v", err)
	}
	if _, err := m.CreateID(verbs.PortSpaceTCP); !errors.Is(err, verbs.ErrClosed) {
		t.Errorf("create id after close: %v", err)
	}
	checkCMGoroutines(t)
}

// TestListenerCloseRace: requests racing the close of their listener end
// promptly, accepted or rejected (a request the listener never read is
// refused as one to a port nobody listens on), never with a raw
// connection error.
func TestListenerCloseRace(t *testing.T) {
	for round := range 20 {
		srv, cli := testCM(t, testResp), testCM(t, testResp)
		lis, addr := cmListen(t, srv, verbs.PortSpaceTCP, 2)
		errs := make(chan error, 8)
		for i := range 8 {
			id := cmResolve(t, cli, verbs.PortSpaceTCP, addr)
			go func() {
				_, err := id.Connect(testCtx(t), verbs.ConnParam{QPNum: uint32(i + 1)})
				errs <- err
			}()
		}
		go func() {
			if p, _, err := lis.GetRequest(testCtx(t)); err == nil {
				_ = p.Accept(testCtx(t), verbs.ConnParam{QPNum: 99})
				p.Close()
			}
		}()
		time.Sleep(time.Duration(round%5) * time.Millisecond)
		lis.Close()
		for range 8 {
			if err := <-errs; err != nil && !errors.Is(err, verbs.ErrRejected) {
				t.Errorf("round %d: connect racing the listener's close: %v", round, err)
			}
		}
	}
}
