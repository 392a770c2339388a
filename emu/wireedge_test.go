//go:build linux

package emu

import (
	"bytes"
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/pvperf/pvperf/emu/roce"
	"github.com/pvperf/pvperf/verbs"
)

// pollFor collects the completions cq gives within d.
func pollFor(t *testing.T, cq verbs.CQ, d time.Duration) []verbs.WC {
	t.Helper()
	var out []verbs.WC
	wc := make([]verbs.WC, 8)
	for deadline := time.Now().Add(d); time.Now().Before(deadline); {
		n, err := cq.Poll(wc)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, wc[:n]...)
		time.Sleep(time.Millisecond)
	}
	return out
}

// TestWireWriteDeregistered: a region deregistered (and its memory freed)
// in the middle of a multi-packet WRITE takes none of the packets that
// follow: the responder looks the R_Key up for every packet, as rxe does,
// and NAKs the rest with a remote access error.
func TestWireWriteDeregistered(t *testing.T) {
	for i, free := range []bool{false, true} {
		f := newWireFixture(t, byte(140+2*i))
		qpn := f.a.qp.Num()
		first := f.packet(&roce.Packet{Opcode: roce.RCWriteFirst, PKey: roce.DefaultPKey, DestQPN: qpn, PSN: benchPSN,
			VA: f.a.mr.Addr(), RKey: f.a.mr.RKey(), DMALen: 4096}, bytes.Repeat([]byte{0x11}, 1024))
		middle := f.packet(&roce.Packet{Opcode: roce.RCWriteMiddle, PKey: roce.DefaultPKey, DestQPN: qpn, PSN: benchPSN + 1},
			bytes.Repeat([]byte{0x22}, 1024))
		f.port.input(f.addrB, roce.Port, first, 0, &flowCache{})
		mem := f.a.mem.Bytes()
		if mem[f.mrOff] != 0x11 {
			t.Fatalf("the first packet did not land")
		}
		if err := f.a.mr.Close(); err != nil {
			t.Fatal(err)
		}
		if free {
			if err := f.a.mem.Close(); err != nil {
				t.Fatal(err)
			}
		}
		naks := f.drops()["drop_naked"]
		f.port.input(f.addrB, roce.Port, middle, 0, &flowCache{}) // would fault on freed memory
		if got := f.drops()["drop_naked"]; got != naks+1 {
			t.Errorf("the packet after the deregistration was not NAKed (drops %v)", f.drops())
		}
		if !free && mem[f.mrOff+1024] == 0x22 {
			t.Errorf("the packet after the deregistration wrote into the region")
		}
	}
}

// TestWireLocalErrorBehindSend: a WQE with a local error posted behind
// one whose packets are in flight waits for it: the first is sent and
// completes, then the second completes with its error.
func TestWireLocalErrorBehindSend(t *testing.T) {
	f := newWireFixture(t, 144)
	if _, err := f.a.qp.PostRecv([]verbs.RecvWR{{ID: 1, SGL: []verbs.SGE{{Addr: f.a.mr.Addr(), Length: 4096, LKey: f.a.mr.LKey()}}}}); err != nil {
		t.Fatal(err)
	}
	wrs := []verbs.SendWR{
		{ID: 10, Opcode: verbs.OpSend, Flags: verbs.SendSignaled, SGL: []verbs.SGE{{Addr: f.b.mr.Addr(), Length: 64, LKey: f.b.mr.LKey()}}},
		{ID: 11, Opcode: verbs.OpSend, Flags: verbs.SendSignaled, SGL: []verbs.SGE{{Addr: f.b.mr.Addr(), Length: 64, LKey: f.b.mr.LKey() + 0x100}}},
	}
	if _, err := f.b.qp.PostSend(wrs); err != nil {
		t.Fatal(err)
	}
	wcs := []verbs.WC{pollWC(t, f.b.scq), pollWC(t, f.b.scq)}
	if wcs[0].ID != 10 || wcs[0].Status != verbs.WCSuccess || wcs[1].ID != 11 || wcs[1].Status != verbs.WCLocProtErr {
		t.Errorf("completions %d %v, %d %v; want 10 success, 11 local protection error", wcs[0].ID, wcs[0].Status, wcs[1].ID, wcs[1].Status)
	}
	if got := pollWC(t, f.a.rcq); got.ID != 1 || got.Status != verbs.WCSuccess {
		t.Errorf("receive: %d %v", got.ID, got.Status)
	}
}

// ucPair is two UC endpoints connected over RoCE, a receiving at addr.
func ucPair(t *testing.T, addr netip.Addr) (a, b *endpoint, port *wirePort) {
	t.Helper()
	ca, cb := openWireDevice(t, addr, TransportRoCE), openWireDevice(t, addr.Next(), TransportRoCE)
	a, b = newEndpointOf(t, ca, 1<<16, verbs.UC, 4), newEndpointOf(t, cb, 1<<16, verbs.UC, 4)
	t.Cleanup(b.close)
	t.Cleanup(a.close)
	a.connectUC(t, b.info())
	b.connectUC(t, a.info())
	return a, b, ca.(*devContext).wire
}

// TestWireUCLostPacket: a UC message of which a packet is lost is
// dropped, and the receive WQE it had taken takes the next message (rxe's
// class D1); the second receive stays posted until the QP is flushed.
func TestWireUCLostPacket(t *testing.T) {
	addrA := netip.AddrFrom4([4]byte{127, 0, 5, 146})
	a, _, port := ucPair(t, addrA)
	for id := uint64(1); id <= 2; id++ {
		if _, err := a.qp.PostRecv([]verbs.RecvWR{{ID: id, SGL: []verbs.SGE{{Addr: a.mr.Addr() + 8192*id, Length: 8192, LKey: a.mr.LKey()}}}}); err != nil {
			t.Fatal(err)
		}
	}
	inj := func(op roce.Opcode, psn uint32, n int) {
		p := &roce.Packet{Opcode: op, PKey: roce.DefaultPKey, DestQPN: a.qp.Num(), PSN: psn}
		buf := make([]byte, roce.Len(p.Opcode, n))
		hl := roce.Encode(buf, p, n)
		copy(buf[hl:], bytes.Repeat([]byte{0x5A}, n))
		roce.Seal(roce.Flow{Src: addrA.Next(), Dst: addrA, SrcPort: roce.Port}, buf)
		port.input(addrA.Next(), roce.Port, buf, 0, &flowCache{})
	}
	inj(roce.UCSendFirst, benchPSN, 1024)
	// benchPSN+1, the middle packet, is lost.
	inj(roce.UCSendLast, benchPSN+2, 100)
	inj(roce.UCSendOnly, benchPSN+3, 10)
	wcs := pollFor(t, a.rcq, 200*time.Millisecond)
	if len(wcs) != 1 || wcs[0].ID != 1 || wcs[0].Status != verbs.WCSuccess || wcs[0].ByteLen != 10 {
		t.Fatalf("completions %+v, want receive 1 with the 10-byte message", wcs)
	}
	if err := a.qp.Modify(&verbs.QPAttr{State: verbs.StateErr}, verbs.AttrState); err != nil {
		t.Fatal(err)
	}
	if wc := pollWC(t, a.rcq); wc.ID != 2 || wc.Status != verbs.WCWRFlushErr {
		t.Errorf("after ERR: %d %v, want receive 2 flushed", wc.ID, wc.Status)
	}
}

// TestWireRCErrorMidMessage: a request out of sequence in the middle of a
// SEND ends the receive it had taken in error, before the others are
// flushed; a receive taken by a message in progress is flushed first when
// the owner moves the QP to ERR.
func TestWireRCErrorMidMessage(t *testing.T) {
	for i, byOwner := range []bool{false, true} {
		f := newWireFixture(t, byte(148+2*i))
		for id := uint64(1); id <= 2; id++ {
			if _, err := f.a.qp.PostRecv([]verbs.RecvWR{{ID: id, SGL: []verbs.SGE{{Addr: f.a.mr.Addr(), Length: 4096, LKey: f.a.mr.LKey()}}}}); err != nil {
				t.Fatal(err)
			}
		}
		inj := func(op roce.Opcode, psn uint32) {
			p := &roce.Packet{Opcode: op, PKey: roce.DefaultPKey, DestQPN: f.a.qp.Num(), PSN: psn}
			f.port.input(f.addrB, roce.Port, f.packet(p, make([]byte, 1024)), 0, &flowCache{})
		}
		inj(roce.RCSendFirst, benchPSN)
		want := verbs.WCRemInvReqErr
		if byOwner {
			if err := f.a.qp.Modify(&verbs.QPAttr{State: verbs.StateErr}, verbs.AttrState); err != nil {
				t.Fatal(err)
			}
			want = verbs.WCWRFlushErr
		} else {
			inj(roce.RCWriteMiddle, benchPSN+1)
		}
		w1, w2 := pollWC(t, f.a.rcq), pollWC(t, f.a.rcq)
		if w1.ID != 1 || w1.Status != want || w2.ID != 2 || w2.Status != verbs.WCWRFlushErr {
			t.Errorf("owner %v: completions %d %v, %d %v; want 1 %v, 2 WR_FLUSH_ERR", byOwner, w1.ID, w1.Status, w2.ID, w2.Status, want)
		}
	}
}

// TestWireUCErrorStateReceives: a UC QP whose send queue failed (SQE)
// still receives.
func TestWireUCErrorStateReceives(t *testing.T) {
	a, b, _ := ucPair(t, netip.AddrFrom4([4]byte{127, 0, 5, 152}))
	if _, err := a.qp.PostSend([]verbs.SendWR{{ID: 5, Opcode: verbs.OpSend, Flags: verbs.SendSignaled,
		SGL: []verbs.SGE{{Addr: a.mr.Addr(), Length: 8, LKey: a.mr.LKey() + 0x100}}}}); err != nil {
		t.Fatal(err)
	}
	if wc := pollWC(t, a.scq); wc.Status != verbs.WCLocProtErr {
		t.Fatalf("send with a bad key: %v", wc.Status)
	}
	if st, err := a.qp.Query(); err != nil || st.State != verbs.StateSQE {
		t.Fatalf("state %v, %v; want SQE", st.State, err)
	}
	if _, err := a.qp.PostRecv([]verbs.RecvWR{{ID: 1, SGL: []verbs.SGE{{Addr: a.mr.Addr(), Length: 64, LKey: a.mr.LKey()}}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.qp.PostSend([]verbs.SendWR{{ID: 6, Opcode: verbs.OpSend, Flags: verbs.SendSignaled,
		SGL: []verbs.SGE{{Addr: b.mr.Addr(), Length: 8, LKey: b.mr.LKey()}}}}); err != nil {
		t.Fatal(err)
	}
	if wc := pollWC(t, a.rcq); wc.ID != 1 || wc.Status != verbs.WCSuccess {
		t.Errorf("receive in SQE: %d %v", wc.ID, wc.Status)
	}
}

// TestWireDuplicateAcked: a duplicate SEND is acknowledged again whether
// or not it asks for an ACK (C9-105), so a requester whose ACK was lost
// hears of it from any retransmission.
func TestWireDuplicateAcked(t *testing.T) {
	f := newWireFixture(t, 154)
	if _, err := f.a.qp.PostRecv([]verbs.RecvWR{{ID: 1, SGL: []verbs.SGE{{Addr: f.a.mr.Addr(), Length: 4096, LKey: f.a.mr.LKey()}}}}); err != nil {
		t.Fatal(err)
	}
	bport := f.b.ctx.(*devContext).wire
	inj := func(ack bool) {
		p := &roce.Packet{Opcode: roce.RCSendOnly, PKey: roce.DefaultPKey, DestQPN: f.a.qp.Num(), PSN: benchPSN, AckReq: ack}
		f.port.input(f.addrB, roce.Port, f.packet(p, make([]byte, 8)), 0, &flowCache{})
	}
	inj(true)
	waitCount(t, "the first ACK", func() uint64 { return bport.rxPkts.Load() }, 1)
	inj(false)
	waitCount(t, "the duplicate's ACK", func() uint64 { return bport.rxPkts.Load() }, 2)
}

// waitCount waits up to 5 s for get to reach n.
func waitCount(t *testing.T, what string, get func() uint64, n uint64) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); get() < n; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: count %d, want %d", what, get(), n)
		}
	}
}

// TestWireUDLossCount: gaps in one sender's PSNs count as lost datagrams;
// a datagram arriving late fills its gap and a duplicate counts nothing.
func TestWireUDLossCount(t *testing.T) {
	addrA := netip.AddrFrom4([4]byte{127, 0, 5, 156})
	ca := openWireDevice(t, addrA, TransportRoCE)
	a := newEndpointOf(t, ca, 1<<16, verbs.UD, 16)
	t.Cleanup(a.close)
	const qkey = 0x11111111
	for _, m := range []struct {
		attr verbs.QPAttr
		mask verbs.QPAttrMask
	}{
		{verbs.QPAttr{State: verbs.StateInit, Port: 1, QKey: qkey}, verbs.AttrState | verbs.AttrPKeyIndex | verbs.AttrPort | verbs.AttrQKey},
		{verbs.QPAttr{State: verbs.StateRTR}, verbs.AttrState},
		{verbs.QPAttr{State: verbs.StateRTS, SQPSN: 1}, verbs.AttrState | verbs.AttrSQPSN},
	} {
		if err := a.qp.Modify(&m.attr, m.mask); err != nil {
			t.Fatal(err)
		}
	}
	for id := uint64(1); id <= 12; id++ {
		if _, err := a.qp.PostRecv([]verbs.RecvWR{{ID: id, SGL: []verbs.SGE{{Addr: a.mr.Addr() + 4096*id, Length: 256, LKey: a.mr.LKey()}}}}); err != nil {
			t.Fatal(err)
		}
	}
	port := ca.(*devContext).wire
	src := addrA.Next()
	for _, c := range []struct {
		psn  uint32
		lost uint64
	}{{10, 0}, {11, 0}, {13, 1}, {12, 0}, {12, 0}, {14, 0}, {17, 2}, {15, 1}, {15, 1}, {18, 1}} {
		p := &roce.Packet{Opcode: roce.UDSendOnly, PKey: roce.DefaultPKey, DestQPN: a.qp.Num(), PSN: c.psn, QKey: qkey, SrcQPN: 0x77}
		buf := make([]byte, roce.Len(p.Opcode, 8))
		roce.Encode(buf, p, 8)
		roce.Seal(roce.Flow{Src: src, Dst: addrA, SrcPort: roce.Port}, buf)
		port.input(src, roce.Port, buf, 0, &flowCache{})
		if got := port.udLost.Load(); got != c.lost {
			t.Errorf("after PSN %d: %d lost, want %d", c.psn, got, c.lost)
		}
	}
}

// TestWireEmptyLastPacket: a LAST packet without payload is an invalid
// request, as rxe's check_length has it.
func TestWireEmptyLastPacket(t *testing.T) {
	f := newWireFixture(t, 158)
	if _, err := f.a.qp.PostRecv([]verbs.RecvWR{{ID: 1, SGL: []verbs.SGE{{Addr: f.a.mr.Addr(), Length: 4096, LKey: f.a.mr.LKey()}}}}); err != nil {
		t.Fatal(err)
	}
	f.port.input(f.addrB, roce.Port, f.packet(&roce.Packet{Opcode: roce.RCSendFirst, PKey: roce.DefaultPKey, DestQPN: f.a.qp.Num(), PSN: benchPSN}, make([]byte, 1024)), 0, &flowCache{})
	naks := f.drops()["drop_naked"]
	f.port.input(f.addrB, roce.Port, f.packet(&roce.Packet{Opcode: roce.RCSendLast, PKey: roce.DefaultPKey, DestQPN: f.a.qp.Num(), PSN: benchPSN + 1}, nil), 0, &flowCache{})
	if f.drops()["drop_naked"] != naks+1 {
		t.Errorf("an empty SEND_LAST was not NAKed (drops %v)", f.drops())
	}
	if wc := pollWC(t, f.a.rcq); wc.ID != 1 || wc.Status != verbs.WCRemInvReqErr {
		t.Errorf("receive: %d %v, want REM_INV_REQ_ERR", wc.ID, wc.Status)
	}
}

// dropFirst is a port's fault hook that loses the first packet it sends.
func dropFirst() func() int {
	n := 0
	return func() int {
		if n++; n == 1 {
			return 1
		}
		return 0
	}
}

// reconnectAtomics connects e to p again with atomics allowed and up to
// rd of them in flight.
func reconnectAtomics(t *testing.T, e *endpoint, p peerInfo, rd uint8) {
	t.Helper()
	acc := verbs.AccessLocalWrite | verbs.AccessRemoteWrite | verbs.AccessRemoteRead | verbs.AccessRemoteAtomic
	for _, m := range []struct {
		attr verbs.QPAttr
		mask verbs.QPAttrMask
	}{
		{verbs.QPAttr{State: verbs.StateReset}, verbs.AttrState},
		{verbs.QPAttr{State: verbs.StateInit, Port: 1, Access: acc}, verbs.AttrState | verbs.AttrPKeyIndex | verbs.AttrPort | verbs.AttrAccessFlags},
		{verbs.QPAttr{State: verbs.StateRTR, PathMTU: verbs.MTU1024, DestQPN: p.QPN, RQPSN: p.PSN, MaxDestRdAtomic: rd, MinRNRTimer: 12,
			AH: verbs.AHAttr{IsGlobal: true, Port: 1, GRH: verbs.GRH{DGID: p.GID, HopLimit: 64}}},
			verbs.AttrState | verbs.AttrAV | verbs.AttrPathMTU | verbs.AttrDestQPN | verbs.AttrRQPSN | verbs.AttrMaxDestRdAtomic | verbs.AttrMinRNRTimer},
		{verbs.QPAttr{State: verbs.StateRTS, SQPSN: benchPSN, Timeout: 14, RetryCnt: 7, RNRRetry: 7, MaxRdAtomic: rd},
			verbs.AttrState | verbs.AttrTimeout | verbs.AttrRetryCnt | verbs.AttrRNRRetry | verbs.AttrSQPSN | verbs.AttrMaxQPRdAtomic},
	} {
		if err := e.qp.Modify(&m.attr, m.mask); err != nil {
			t.Fatal(err)
		}
	}
}

// TestWireAtomicLostAck: of two fetch-and-adds in flight, the first's
// ATOMIC ACK is lost; the responder answers its retransmission from the
// saved result, without adding again, and both complete.
func TestWireAtomicLostAck(t *testing.T) {
	f := newWireFixture(t, 160)
	reconnectAtomics(t, f.a, f.b.info(), 4)
	reconnectAtomics(t, f.b, f.a.info(), 4)
	lose := dropFirst() // a's first packet: the first ATOMIC ACK
	f.port.faults.Store(&lose)
	var wrs []verbs.SendWR
	for i := range 2 {
		wrs = append(wrs, verbs.SendWR{ID: uint64(i + 1), Opcode: verbs.OpAtomicFetchAdd, Flags: verbs.SendSignaled,
			SGL:        []verbs.SGE{{Addr: f.b.mr.Addr() + uint64(8*i), Length: 8, LKey: f.b.mr.LKey()}},
			RemoteAddr: f.a.mr.Addr(), RKey: f.a.mr.RKey(), CompareAdd: 1})
	}
	target := f.a.mem.Bytes()[f.mrOff : f.mrOff+8]
	clear(target)
	if _, err := f.b.qp.PostSend(wrs); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if wc := pollWC(t, f.b.scq); wc.ID != uint64(i+1) || wc.Status != verbs.WCSuccess {
			t.Errorf("completion %d: %d %v", i, wc.ID, wc.Status)
		}
	}
	got := f.b.mem.Bytes()
	if got[0] != 0 || got[8] != 1 || target[0] != 2 {
		t.Errorf("values read %d and %d, target %d; want 0, 1 and 2", got[0], got[8], target[0])
	}
}

// TestWireRNRMultiPacket: a multi-packet SEND refused for lack of a
// receive draws an RNR NAK for its first packet and sequence NAKs for the
// others; only the RNR timer sends it again, so rnr_retry 3 means four
// tries and three waits of the RNR timer before RNR_RETRY_EXC_ERR.
func TestWireRNRMultiPacket(t *testing.T) {
	f := newWireFixture(t, 162)
	if err := f.b.qp.Modify(&verbs.QPAttr{State: verbs.StateReset}, verbs.AttrState); err != nil {
		t.Fatal(err)
	}
	if err := f.b.connectWith(f.a.info(), 14, 3); err != nil {
		t.Fatal(err)
	}
	if err := f.a.qp.Modify(&verbs.QPAttr{MinRNRTimer: 20}, verbs.AttrMinRNRTimer); err != nil { // 10.24 ms
		t.Fatal(err)
	}
	start := time.Now()
	if _, err := f.b.qp.PostSend([]verbs.SendWR{{ID: 9, Opcode: verbs.OpSend, Flags: verbs.SendSignaled,
		SGL: []verbs.SGE{{Addr: f.b.mr.Addr(), Length: 4096, LKey: f.b.mr.LKey()}}}}); err != nil {
		t.Fatal(err)
	}
	wc := pollWC(t, f.b.scq)
	took := time.Since(start)
	if wc.Status != verbs.WCRNRRetryExcErr {
		t.Fatalf("status %v", wc.Status)
	}
	firsts := f.drops()["drop_no_recv"]
	if firsts != 4 || took < 3*10240*time.Microsecond {
		t.Errorf("%d tries in %v; want 4 tries and at least 3 RNR waits of 10.24 ms", firsts, took)
	}
}

// TestWireSQD: two WRITEs whose packets are lost when the QP enters SQD
// are sent again in SQD and complete; SQ_DRAINED comes after both, not
// after the first, and a WRITE posted in SQD waits for RTS.
func TestWireSQD(t *testing.T) {
	f := newWireFixture(t, 164)
	// The first sends of WRITEs 1 and 3 are lost, and the second of
	// WRITE 3: its ACK comes an ACK timeout after WRITE 1's.
	n := 0
	lose := func() int {
		if n++; n == 1 || n == 2 || n == 4 {
			return 1
		}
		return 0
	}
	f.b.ctx.(*devContext).wire.faults.Store(&lose)
	wr := func(id uint64) verbs.SendWR {
		return verbs.SendWR{ID: id, Opcode: verbs.OpRDMAWrite, Flags: verbs.SendSignaled,
			SGL:        []verbs.SGE{{Addr: f.b.mr.Addr(), Length: 64, LKey: f.b.mr.LKey()}},
			RemoteAddr: f.a.mr.Addr(), RKey: f.a.mr.RKey()}
	}
	if _, err := f.b.qp.PostSend([]verbs.SendWR{wr(1), wr(3)}); err != nil {
		t.Fatal(err)
	}
	if err := f.b.qp.Modify(&verbs.QPAttr{State: verbs.StateSQD, SQDrainNotify: true}, verbs.AttrState|verbs.AttrEnSQDAsyncNotify); err != nil {
		t.Fatal(err)
	}
	if _, err := f.b.qp.PostSend([]verbs.SendWR{wr(2)}); err != nil {
		t.Fatal(err)
	}
	// Nothing polls the CQ until SQ_DRAINED: both completions must be
	// there when it comes.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for {
		ev, err := f.b.ctx.AsyncEvent(ctx)
		if err != nil {
			t.Fatalf("no SQ_DRAINED event: %v", err)
		}
		if ev.Type == verbs.EventSQDrained {
			break
		}
	}
	wc := make([]verbs.WC, 4)
	k, err := f.b.scq.Poll(wc)
	if err != nil || k != 2 || wc[0].ID != 1 || wc[1].ID != 3 || wc[0].Status != verbs.WCSuccess || wc[1].Status != verbs.WCSuccess {
		t.Fatalf("at SQ_DRAINED: %d completions %+v (%v), want WRITEs 1 and 3 complete", k, wc[:max(k, 0)], err)
	}
	if wcs := pollFor(t, f.b.scq, 100*time.Millisecond); len(wcs) != 0 {
		t.Errorf("in SQD, WRITE 2 completed: %+v", wcs)
	}
	if err := f.b.qp.Modify(&verbs.QPAttr{State: verbs.StateRTS}, verbs.AttrState); err != nil {
		t.Fatal(err)
	}
	if wc := pollWC(t, f.b.scq); wc.ID != 2 || wc.Status != verbs.WCSuccess {
		t.Errorf("after RTS: %d %v, want WRITE 2 complete", wc.ID, wc.Status)
	}
}

// TestWireAtomicBufferGone: the buffer for an atomic's value deregistered
// before its response arrives fails the request with a local protection
// error, as a READ's does; the value is not silently lost.
func TestWireAtomicBufferGone(t *testing.T) {
	f := newWireFixture(t, 166)
	reconnectAtomics(t, f.a, f.b.info(), 4)
	reconnectAtomics(t, f.b, f.a.info(), 4)
	lose := dropFirst() // the ATOMIC ACK: the request is sent again
	f.port.faults.Store(&lose)
	mr, err := f.b.pd.RegMR(f.b.mem.Bytes()[:4096], verbs.AccessLocalWrite)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.b.qp.PostSend([]verbs.SendWR{{ID: 1, Opcode: verbs.OpAtomicFetchAdd, Flags: verbs.SendSignaled,
		SGL:        []verbs.SGE{{Addr: mr.Addr(), Length: 8, LKey: mr.LKey()}},
		RemoteAddr: f.a.mr.Addr(), RKey: f.a.mr.RKey(), CompareAdd: 1}}); err != nil {
		t.Fatal(err)
	}
	if err := mr.Close(); err != nil {
		t.Fatal(err)
	}
	if wc := pollWC(t, f.b.scq); wc.Status != verbs.WCLocProtErr {
		t.Errorf("status %v, want LOC_PROT_ERR", wc.Status)
	}
}

// TestActiveMTUFitsTheInterface: where RoCE packets leave through an
// interface, the port's active MTU is the largest whose packets fit the
// interface's MTU (as rdma_rxe's); elsewhere it is the configured one.
func TestActiveMTUFitsTheInterface(t *testing.T) {
	addr := netip.MustParseAddr("10.99.1.1")
	for _, c := range []struct {
		cfg   Config
		ifMTU int
		want  verbs.MTU
	}{
		{Config{MTU: verbs.MTU4096, Addr: addr}, 1500, verbs.MTU1024},
		{Config{MTU: verbs.MTU4096, Addr: addr, Transport: TransportRoCE, RoCE: 1}, 1500, verbs.MTU1024},
		{Config{MTU: verbs.MTU4096, Addr: addr}, 9000, verbs.MTU4096},
		{Config{MTU: verbs.MTU2048, Addr: addr}, 65536, verbs.MTU2048},
		{Config{MTU: verbs.MTU512, Addr: addr}, 1500, verbs.MTU512},
		{Config{MTU: verbs.MTU4096, Addr: addr, Transport: TransportTCP}, 1500, verbs.MTU4096},
		{Config{MTU: verbs.MTU4096, Addr: addr, Transport: TransportCopy}, 1500, verbs.MTU4096},
		{Config{MTU: verbs.MTU4096}, 1500, verbs.MTU4096},
		{Config{MTU: verbs.MTU1024, Addr: addr}, 576, verbs.MTU256},
	} {
		if got := activeMTU(c.cfg, c.ifMTU); got != c.want {
			t.Errorf("%+v on an interface of MTU %d: %v, want %v", c.cfg, c.ifMTU, got, c.want)
		}
	}
}
