//go:build linux

package emu

import (
	"encoding/binary"
	"net/netip"
	"sync/atomic"

	"github.com/pvperf/pvperf/emu/roce"
	"github.com/pvperf/pvperf/verbs"
	"github.com/pvperf/pvperf/verbs/pvrdma"
)

// This file is the responder of a QP on a network transport, as rdma_rxe's
// rxe_resp.c behaves: PSN checks (one sequence NAK per gap, duplicates
// re-acknowledged, READs executed again, atomics replayed from the saved
// result), opcode sequence and length checks, R_Key and bounds checks
// (NAK remote access), RNR NAK when no receive is posted, and an ACK when
// the requester asks for one. It runs in the port's receive goroutine
// under wq.rmu; everything it touches in memory is checked first, so no
// packet can write outside a registered region.

// wireInput handles a packet for q from src.
func (q *qp) wireInput(src netip.Addr, p *roce.Packet) {
	wq := q.wq
	hd := p.Opcode.Hdrs()
	if q.typ == verbs.UD {
		if p.Opcode != roce.UDSendOnly && p.Opcode != roce.UDSendOnlyImm {
			wq.port.drop(dropOpcode)
			return
		}
		q.udInput(src, p)
		return
	}
	if p.Opcode >= 0x40 || (q.typ == verbs.UC) != (p.Opcode >= 0x20) {
		wq.port.drop(dropOpcode)
		return
	}
	if hd&roce.HdrResponse != 0 {
		if q.typ != verbs.RC {
			wq.port.drop(dropOpcode)
			return
		}
		q.wireResponse(src, p)
		return
	}
	if !q.receives() {
		wq.port.drop(dropState)
		return
	}
	wq.rmu.Lock()
	// Checked again under rmu: a QP closed or reset meanwhile has passed
	// its barrier (wq.barrier) and must not be touched.
	if !q.receives() {
		wq.port.drop(dropState)
	} else if src == wq.peer && q.wrc {
		q.request(p, hd)
		wq.port.flush(&wq.rb)
	} else {
		wq.port.drop(dropSource)
	}
	wq.rmu.Unlock()
}

// receives reports whether q's state lets it take requests.
func (q *qp) receives() bool {
	switch q.state() {
	case verbs.StateRTR, verbs.StateRTS, verbs.StateSQD, verbs.StateSQE:
		return true
	}
	return false
}

// request handles a request packet on an RC or UC QP.
func (q *qp) request(p *roce.Packet, hd roce.Hdr) {
	wq := q.wq
	rc := q.typ == verbs.RC
	d := psnDiff(p.PSN, wq.ePSN)
	switch {
	case d > 0:
		wq.port.drop(dropSequence)
		if !rc {
			// UC: a lost packet spoils the message; wait for the
			// next first or only packet.
			q.abandonMsg()
			if hd&(roce.HdrFirst|roce.HdrOnly) == 0 {
				return
			}
			wq.ePSN = p.PSN
			break
		}
		if !wq.nakSent {
			wq.nakSent = true
			q.sendAck(roce.SynNAKSeq, wq.ePSN)
		}
		return
	case d < 0:
		if rc {
			q.duplicate(p)
		}
		return
	}
	wq.nakSent = false
	op := p.Opcode
	if !rc {
		op -= 0x20
	}
	mtu := verbs.MTU(load(&q.sh.mtu)).Bytes()
	pay := len(p.Payload)
	if (hd&(roce.HdrFirst|roce.HdrMiddle) != 0 && pay != mtu) || pay > mtu || (hd&roce.HdrLast != 0 && pay == 0) {
		q.nakInvalid(p)
		return
	}
	switch op {
	case roce.RCSendFirst, roce.RCSendMiddle, roce.RCSendLast, roce.RCSendLastImm, roce.RCSendOnly, roce.RCSendOnlyImm:
		q.recvSend(p, hd)
	case roce.RCWriteFirst, roce.RCWriteMiddle, roce.RCWriteLast, roce.RCWriteLastImm, roce.RCWriteOnly, roce.RCWriteOnlyImm:
		q.recvWrite(p, hd)
	case roce.RCReadRequest:
		if !rc || wq.inMsg {
			q.nakInvalid(p)
			return
		}
		if q.readResponse(p) {
			wq.ePSN = psnAdd(wq.ePSN, npkts(uint64(p.DMALen), verbs.MTU(load(&q.sh.mtu))))
			wq.msn++
		}
	case roce.RCCompareSwap, roce.RCFetchAdd:
		if !rc || wq.inMsg {
			q.nakInvalid(p)
			return
		}
		q.recvAtomic(p)
	default:
		q.nakInvalid(p)
	}
}

// duplicate answers a request the responder has already executed.
func (q *qp) duplicate(p *roce.Packet) {
	wq := q.wq
	wq.port.drop(dropDuplicate)
	switch p.Opcode {
	case roce.RCReadRequest:
		q.readResponse(p) // executed again: reads have no side effect
	case roce.RCCompareSwap, roce.RCFetchAdd:
		for i := range wq.atoms {
			if a := &wq.atoms[i]; a.ok && a.psn == p.PSN {
				q.sendAtomicAck(p.PSN, a.orig)
				break
			}
		}
	default:
		// SEND and WRITE: acknowledged again, asked or not (C9-105).
		q.sendAck(roce.SynACK, psnAdd(wq.ePSN, 0xFFFFFF))
	}
}

// advance accepts a packet that needs nothing more: next PSN, and the ACK
// the requester asked for.
func (q *qp) advance(p *roce.Packet, last bool) {
	wq := q.wq
	if last {
		wq.msn++
	}
	wq.ePSN = psnAdd(p.PSN, 1)
	if p.AckReq && q.typ == verbs.RC {
		q.sendAck(roce.SynACK, p.PSN)
	}
}

// selfView makes sure wq.self describes this QP's receive side.
func (q *qp) selfView() bool {
	wq := q.wq
	if wq.self.live() {
		return true
	}
	return q.c.h.resolve(&wq.self, q.qpn)
}

// takeRecvWire takes a receive WQE for an arriving message into wq.inSC;
// false means none is posted (or the QP's view is gone).
func (q *qp) takeRecvWire() (bool, bool) {
	wq := q.wq
	if !q.selfView() {
		return false, false
	}
	r := &wq.self
	rw, nsge, okw, limitHit := takeRecvInto(q.c.h, r, false, wq.rwqe[:])
	if rw == nil {
		return false, false
	}
	if limitHit {
		q.c.h.raiseEvent(r.p, r.srq.ctx, verbs.EventSRQLimitReached, objSRQ, r.srq.handle-1, load(&r.srq.gen))
	}
	wq.inSC = scatter{p: r.p, pd: r.ctx.pd, rw: rw, nsge: nsge, mr: &r.rmr}
	setRecv(&wq.inCQE, rw.WRID(), q.handle, q.sh.destQPN)
	return true, okw
}

func (q *qp) recvSend(p *roce.Packet, hd roce.Hdr) {
	wq := q.wq
	first := hd&(roce.HdrFirst|roce.HdrOnly) != 0
	last := hd&(roce.HdrLast|roce.HdrOnly) != 0
	if first == wq.inMsg || (wq.inMsg && wq.inOp != pvrdma.OpSend) {
		q.nakInvalid(p)
		return
	}
	if first {
		got, okw := q.recvWQE()
		if !got {
			q.rnrNak(p)
			return
		}
		wq.inMsg, wq.inOp, wq.inLen, wq.inRecv = true, pvrdma.OpSend, 0, true
		if !okw {
			q.recvFatal(p, verbs.WCLocQPOpErr, roce.SynNAKRemOp)
			return
		}
	}
	if !wq.inSC.write(p.Payload) {
		st := verbs.WCLocLenErr
		if q.recvRoom() >= wq.inLen+uint64(len(p.Payload)) {
			st = verbs.WCLocProtErr
		}
		syn := uint8(roce.SynNAKInvReq)
		if st == verbs.WCLocProtErr {
			syn = roce.SynNAKRemOp
		}
		q.recvFatal(p, st, syn)
		return
	}
	wq.inLen += uint64(len(p.Payload))
	if last {
		e := &wq.inCQE
		e.ByteLen = uint32(wq.inLen)
		if p.Opcode&0x1F == roce.RCSendLastImm || p.Opcode&0x1F == roce.RCSendOnlyImm {
			e.Imm = p.Imm
			e.Flags |= pvrdma.WCFlagWithImm
		}
		wq.inMsg, wq.inRecv = false, false
		if q.c.h.postRecvCQE(&wq.self, e, p.SE) {
			q.recvCQFullWire()
			return
		}
	}
	q.advance(p, last)
}

// recvCQFullWire handles a receive CQ without room for the completion of
// the message just received, as rdma_rxe does (class G): the QP fails with
// no event of its own (the CQ raised CQ_ERR) and the packet is not
// acknowledged; the requester retries into a QP in error and gives up.
func (q *qp) recvCQFullWire() {
	if q.selfView() {
		failDest(&q.wq.self)
	}
}

// setRecv makes e the successful receive completion of WQE wrid on QP
// handle from QP srcQP, every other field zero; field by field (see
// complete).
func setRecv(e *pvrdma.CQE, wrid uint64, handle, srcQP uint32) {
	*e = pvrdma.CQE{}
	e.WRID, e.QP, e.Opcode, e.SrcQP, e.Port = wrid, uint64(handle), pvrdma.WCOpRecv, srcQP, 1
}

// recvWQE gives the receive WQE for a message that begins: the one a UC
// message lost on the way had taken, used again (rxe's class D1), or the
// next posted.
func (q *qp) recvWQE() (got, okw bool) {
	wq := q.wq
	if !wq.inRecv {
		return q.takeRecvWire()
	}
	sc := &wq.inSC
	*sc = scatter{p: sc.p, pd: sc.pd, rw: sc.rw, nsge: sc.nsge, mr: sc.mr}
	setRecv(&wq.inCQE, sc.rw.WRID(), q.handle, q.sh.destQPN)
	return true, true
}

// abandonMsg gives up the message in progress. A receive WQE it had taken
// from an SRQ completes in error (class E); one of the QP's own queue is
// kept for the next message.
func (q *qp) abandonMsg() {
	wq := q.wq
	wq.inMsg = false
	if wq.inRecv && wq.self.srq != nil {
		q.endRecv(verbs.WCRemInvReqErr)
	}
}

// endRecv completes the receive WQE taken for the message in progress
// with status st.
func (q *qp) endRecv(st verbs.WCStatus) {
	wq := q.wq
	e := &wq.inCQE
	e.Status, e.Flags, e.ByteLen = uint32(st), 0, 0
	q.c.h.postRecvCQE(&wq.self, e, true)
	wq.inRecv = false
}

// recvRoom is the total length of the taken receive WQE's SGEs.
func (q *qp) recvRoom() uint64 {
	sc := &q.wq.inSC
	var n uint64
	for i := range sc.nsge {
		n += uint64(sc.rw.SGE(i).Length)
	}
	return n
}

func (q *qp) recvWrite(p *roce.Packet, hd roce.Hdr) {
	wq := q.wq
	first := hd&(roce.HdrFirst|roce.HdrOnly) != 0
	last := hd&(roce.HdrLast|roce.HdrOnly) != 0
	if first == wq.inMsg || (wq.inMsg && wq.inOp != pvrdma.OpRDMAWrite) {
		q.nakInvalid(p)
		return
	}
	imm := p.Opcode&0x1F == roce.RCWriteLastImm || p.Opcode&0x1F == roce.RCWriteOnlyImm
	if first {
		if verbs.Access(load(&q.sh.access))&verbs.AccessRemoteWrite == 0 {
			q.nakFatal(p, roce.SynNAKInvReq, verbs.EventQPReqErr)
			return
		}
		if p.DMALen > 0 {
			if _, okm := wq.wmr.get(q.c.h.self, p.RKey, q.pd.id, p.VA, uint64(p.DMALen), verbs.AccessRemoteWrite); !okm {
				q.nakFatal(p, roce.SynNAKRemAccess, verbs.EventQPAccessErr)
				return
			}
		}
		wq.inMsg, wq.inOp, wq.inLen, wq.inWrLen = true, pvrdma.OpRDMAWrite, 0, p.DMALen
		wq.inRKey, wq.inVA = p.RKey, p.VA
	}
	n := uint64(len(p.Payload))
	if rest := uint64(wq.inWrLen) - wq.inLen; n > rest || (last && n != rest) {
		wq.inMsg = false
		q.nakFatal(p, roce.SynNAKInvReq, verbs.EventQPReqErr)
		return
	}
	// The region is looked up for every packet, as rxe does: one
	// deregistered in the middle of a message takes no more of it.
	var dst []byte
	if n > 0 {
		var okm bool
		dst, okm = wq.wmr.get(q.c.h.self, wq.inRKey, q.pd.id, wq.inVA+wq.inLen, n, verbs.AccessRemoteWrite)
		if !okm {
			wq.inMsg = false
			q.nakFatal(p, roce.SynNAKRemAccess, verbs.EventQPAccessErr)
			return
		}
	}
	if imm && last {
		// The data lands only with a receive to report it.
		got, okw := q.recvWQE()
		if !got {
			if first {
				wq.inMsg = false
			}
			q.rnrNak(p)
			return
		}
		if !okw {
			q.recvFatal(p, verbs.WCLocQPOpErr, roce.SynNAKRemOp)
			return
		}
	}
	copy(dst, p.Payload)
	wq.inLen += n
	if last {
		wq.inMsg = false
		if imm {
			e := &wq.inCQE
			e.Opcode = pvrdma.WCOpRecvRDMAWithImm
			e.ByteLen = wq.inWrLen
			e.Imm = p.Imm
			e.Flags |= pvrdma.WCFlagWithImm
			wq.inRecv = false
			if q.c.h.postRecvCQE(&wq.self, e, p.SE) {
				q.recvCQFullWire()
				return
			}
		}
	}
	q.advance(p, last)
}

// readResponse sends the responses of a READ request at p.PSN; false
// means it was refused (NAKed).
func (q *qp) readResponse(p *roce.Packet) bool {
	wq := q.wq
	access := verbs.Access(load(&q.sh.access))
	if access&verbs.AccessRemoteRead == 0 || load(&q.sh.maxDestRd) == 0 || p.DMALen > 1<<31 {
		q.nakFatal(p, roce.SynNAKInvReq, verbs.EventQPReqErr)
		return false
	}
	var src []byte
	if p.DMALen > 0 {
		var okm bool
		src, okm = wq.wmr.get(q.c.h.self, p.RKey, q.pd.id, p.VA, uint64(p.DMALen), verbs.AccessRemoteRead)
		if !okm {
			q.nakFatal(p, roce.SynNAKRemAccess, verbs.EventQPAccessErr)
			return false
		}
	}
	mtu := verbs.MTU(load(&q.sh.mtu)).Bytes()
	psn := p.PSN
	var r roce.Packet
	r.PKey = roce.DefaultPKey
	r.DestQPN = q.sh.destQPN
	r.Syndrome = roce.SynACK
	first := true
	for {
		n := min(mtu, len(src))
		last := n == len(src)
		switch {
		case first && last:
			r.Opcode = roce.RCReadRespOnly
		case first:
			r.Opcode = roce.RCReadRespFirst
		case last:
			r.Opcode = roce.RCReadRespLast
		default:
			r.Opcode = roce.RCReadRespMiddle
		}
		r.PSN = psn
		r.MSN = wq.msn + 1
		q.respond(&r, src[:n])
		src = src[n:]
		psn = psnAdd(psn, 1)
		first = false
		if last {
			return true
		}
	}
}

func (q *qp) recvAtomic(p *roce.Packet) {
	wq := q.wq
	access := verbs.Access(load(&q.sh.access))
	if access&verbs.AccessRemoteAtomic == 0 || load(&q.sh.maxDestRd) == 0 || p.VA%8 != 0 {
		q.nakFatal(p, roce.SynNAKInvReq, verbs.EventQPReqErr)
		return
	}
	dst, okm := wq.wmr.get(q.c.h.self, p.RKey, q.pd.id, p.VA, 8, verbs.AccessRemoteAtomic)
	if !okm {
		q.nakFatal(p, roce.SynNAKRemAccess, verbs.EventQPAccessErr)
		return
	}
	ptr := u64At(dst)
	var old uint64
	if p.Opcode == roce.RCFetchAdd {
		old = atomic.AddUint64(ptr, p.SwapAdd) - p.SwapAdd
	} else {
		for {
			old = atomic.LoadUint64(ptr)
			if old != p.Compare || atomic.CompareAndSwapUint64(ptr, p.Compare, p.SwapAdd) {
				break
			}
		}
	}
	wq.atoms[wq.atomNext] = savedAtomic{ok: true, psn: p.PSN, orig: old}
	wq.atomNext = (wq.atomNext + 1) % maxAtomSaved
	wq.ePSN = psnAdd(p.PSN, 1)
	wq.msn++
	q.sendAtomicAck(p.PSN, old)
}

// rnrNak refuses p for lack of a receive WQE; the requester retries it.
func (q *qp) rnrNak(p *roce.Packet) {
	q.wq.port.drop(dropNoRecv)
	if q.typ == verbs.RC {
		q.sendAck(roce.SynRNR|uint8(load(&q.sh.minRNR)&31), p.PSN)
	}
}

// nakInvalid refuses a request out of sequence or malformed.
func (q *qp) nakInvalid(p *roce.Packet) {
	q.wq.inMsg = false
	q.nakFatal(p, roce.SynNAKInvReq, verbs.EventQPReqErr)
}

// nakFatal sends a NAK and moves the QP to the error state, as a
// responder does after a request it cannot execute (UC: drops silently).
func (q *qp) nakFatal(p *roce.Packet, syn uint8, ev verbs.EventType) {
	wq := q.wq
	wq.port.drop(dropNAKed)
	if q.typ != verbs.RC {
		q.abandonMsg()
		return
	}
	if wq.inRecv {
		q.endRecv(nakStatus(syn)) // the message in progress ends in error
	}
	wq.inMsg = false
	q.sendAck(syn, p.PSN)
	q.selfError(ev)
}

// recvFatal completes the taken receive WQE with st, NAKs the request and
// moves the QP to the error state.
func (q *qp) recvFatal(p *roce.Packet, st verbs.WCStatus, syn uint8) {
	wq := q.wq
	e := &wq.inCQE
	e.Status = uint32(st)
	e.Flags = 0
	q.c.h.postRecvCQE(&wq.self, e, true)
	wq.inMsg, wq.inRecv = false, false
	wq.port.drop(dropNAKed)
	if q.typ == verbs.RC {
		q.sendAck(syn, p.PSN)
	}
	q.selfError(verbs.EventQPFatal)
}

// selfError puts this QP in the error state from the receive goroutine:
// its owner flushes it (see housekeeping).
func (q *qp) selfError(ev verbs.EventType) {
	if !q.selfView() {
		return
	}
	q.responderError(&q.wq.self, ev)
}

// sendAck sends an ACK or NAK with syndrome syn for psn.
func (q *qp) sendAck(syn uint8, psn uint32) {
	var r roce.Packet
	r.Opcode = roce.RCAck
	r.PKey = roce.DefaultPKey
	r.DestQPN = q.sh.destQPN
	r.PSN = psn
	r.Syndrome = syn
	r.MSN = q.wq.msn
	q.respond(&r, nil)
}

func (q *qp) sendAtomicAck(psn uint32, orig uint64) {
	var r roce.Packet
	r.Opcode = roce.RCAtomicAck
	r.PKey = roce.DefaultPKey
	r.DestQPN = q.sh.destQPN
	r.PSN = psn
	r.Syndrome = roce.SynACK
	r.MSN = q.wq.msn
	r.AtomicOrig = orig
	q.respond(&r, nil)
}

// respond sends a response packet with payload b from the responder's
// buffer.
func (q *qp) respond(r *roce.Packet, b []byte) {
	wq := q.wq
	pkt, payload := wq.port.encode(&wq.rb, wq.peer, r, len(b))
	copy(payload, b)
	wq.port.commit(&wq.rb, pkt)
}

// udInput delivers a UD datagram.
func (q *qp) udInput(src netip.Addr, p *roce.Packet) {
	wq := q.wq
	if !q.receives() {
		wq.port.drop(dropState)
		return
	}
	if p.QKey != load(&q.sh.qkey) {
		wq.port.drop(dropQKey)
		q.dev().qkeyViolation()
		return
	}
	wq.rmu.Lock()
	defer wq.rmu.Unlock()
	if !q.receives() { // closed or reset meanwhile (see wireInput)
		wq.port.drop(dropState)
		return
	}
	q.udCount(src, p)
	got, okw := q.takeRecvWire()
	if !got {
		wq.port.drop(dropNoRecv)
		return
	}
	e := &wq.inCQE
	e.SrcQP = p.SrcQPN
	fail := func(st verbs.WCStatus) {
		e.Status = uint32(st)
		q.c.h.postRecvCQE(&wq.self, e, true)
		q.selfError(verbs.EventQPFatal)
	}
	if !okw {
		fail(verbs.WCLocQPOpErr)
		return
	}
	// A receive too small completes with a local length error and the QP
	// fails. rdma_rxe of Linux 6.1 completes it in error too (with
	// LOC_QP_OP_ERR); newer kernels drop the datagram instead.
	need := uint64(len(p.Payload)) + grhSize
	if q.recvRoom() < need {
		fail(verbs.WCLocLenErr)
		return
	}
	if wq.port.kind == wireRoCEv1 {
		copy(wq.grh[:], wq.port.rxGRH) // the frame's own GRH, as on InfiniBand
	} else {
		q.recvGRH(src, wq.port.addr, p)
	}
	if !wq.inSC.write(wq.grh[:]) || !wq.inSC.write(p.Payload) {
		fail(verbs.WCLocProtErr)
		return
	}
	e.ByteLen = uint32(need)
	e.Flags = pvrdma.WCFlagGRH
	if p.Opcode == roce.UDSendOnlyImm {
		e.Imm = p.Imm
		e.Flags |= pvrdma.WCFlagWithImm
	}
	switch {
	case wq.port.kind == wireRoCEv1:
		e.NetworkHdrType = pvrdma.NetworkIB
	case src.Is4():
		e.NetworkHdrType = pvrdma.NetworkIPv4
	default:
		e.NetworkHdrType = pvrdma.NetworkIPv6
	}
	if q.c.h.postRecvCQE(&wq.self, e, p.SE) {
		q.recvCQFullWire()
	}
}

// udCount counts the datagrams lost on the way: gaps in the PSNs of one
// sender. One that arrives late, after later ones, fills its gap again;
// one seen before (duplicated on the way) changes nothing. udSeen holds
// the PSNs seen of the 64 before udNext (bit i: udNext-1-i).
func (q *qp) udCount(src netip.Addr, p *roce.Packet) {
	wq := q.wq
	if src != wq.udSrc || p.SrcQPN != wq.udSrcQPN {
		wq.udSrc, wq.udSrcQPN, wq.udNext, wq.udSeen = src, p.SrcQPN, psnAdd(p.PSN, 1), 1
		return
	}
	gap := psnDiff(p.PSN, wq.udNext)
	if gap >= 0 {
		wq.port.udLost.Add(uint64(gap))
		if gap+1 >= 64 {
			wq.udSeen = 1
		} else {
			wq.udSeen = wq.udSeen<<(gap+1) | 1
		}
		wq.udNext = psnAdd(p.PSN, 1)
		return
	}
	if i := -gap - 1; i < 64 && wq.udSeen&(1<<i) == 0 {
		wq.udSeen |= 1 << i
		for {
			n := wq.port.udLost.Load()
			if n == 0 || wq.port.udLost.CompareAndSwap(n, n-1) {
				break
			}
		}
	}
}

// recvGRH writes the 40 bytes before a UD payload, as rdma_rxe does: for
// IPv4, 20 zero bytes then the IPv4 header; for IPv6, the IPv6 header.
func (q *qp) recvGRH(src, dst netip.Addr, p *roce.Packet) {
	g := q.wq.grh[:]
	clear(g)
	udpLen := uint16(8 + roce.Len(p.Opcode, len(p.Payload)))
	if src.Is4() {
		putIPv4(g[20:40], 0, 64, 20+udpLen, src.As4(), dst.As4())
		return
	}
	binary.BigEndian.PutUint32(g[0:], 6<<28)
	binary.BigEndian.PutUint16(g[4:], udpLen)
	g[6] = 17
	g[7] = 64
	s16, d16 := src.As16(), dst.As16()
	copy(g[8:24], s16[:])
	copy(g[24:40], d16[:])
}

// barrier returns once the responder has finished with any packet it was
// handling when barrier was called.
func (wq *wireQP) barrier() {
	wq.rmu.Lock()
	defer wq.rmu.Unlock()
}
