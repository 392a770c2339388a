//go:build linux

package emu

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pvperf/pvperf/emu/roce"
	"github.com/pvperf/pvperf/verbs"
	"github.com/pvperf/pvperf/verbs/pvrdma"
)

// This file is the requester of a QP on a network transport: it segments
// the send queue's messages into packets of the path MTU, keeps up to a
// window of PSNs in flight, completes work requests in order as ACKs, read
// responses and atomic ACKs arrive, and retransmits (go-back-N) after a
// sequence NAK, an RNR NAK's timer, or the local ACK timeout, as rdma_rxe's
// requester and completer do. It runs under the QP's send lock: in the
// thread that rings the doorbell, in the engine when a timer fires, and in
// the port's receive goroutine for responses.

// The window of PSNs in flight starts where rxe's stays (its
// RXE_MAX_UNACKED_PSNS) and adapts as TCP's congestion window does: it grows
// with every PSN acknowledged (doubling each round trip) up to the slow-start
// threshold, then by maxNoAck per window acknowledged, up to maxWindow; a
// loss (a sequence NAK, a missing read response, the ACK timeout) halves it,
// down to minWindow, and sets the threshold there. On a path that loses
// nothing the window opens wide and a thread need not wait for the peer's
// ACKs; on a lossy path it stays small, and go-back-N resends little.
const (
	initWindow = 128  // PSNs in flight at first, as rxe (RXE_MAX_UNACKED_PSNS)
	minWindow  = 32   // the smallest window after losses
	maxWindow  = 4096 // the largest window
	readChunk  = 128  // response packets a read request asks for at most
	maxNoAck   = 64   // packets between two AckReq (rxe's RXE_MAX_PKT_PER_ACK)
)

// wireQP is the network state of a QP.
type wireQP struct {
	port *wirePort
	peer netip.Addr // RC/UC: the destination's address

	// ACKs handed over by the receive goroutine to the thread that holds
	// the send lock (handOverACK): the newest one's PSN|ackValid, or 0;
	// inTx is set while that thread transmits and will look at ackPend
	// before it returns.
	ackPend atomic.Uint32
	inTx    atomic.Bool
	// deadlineNs is deadline (below) for the engine, which reads it
	// without the send lock, in monoNs; 0 while an RNR NAK's wait runs
	// (or no timer is armed), when the timer must fire when scheduled.
	deadlineNs atomic.Int64

	// Requester, under the send lock.
	txHead   uint32 // SQ index of the WQE being (re)transmitted or next
	txOff    uint64 // bytes of the current record already sent
	txCur    bool   // the last record of out is being transmitted
	txPSN    uint32 // PSN of the next packet
	una      uint32 // oldest unacknowledged PSN
	out      []outWQE
	outHead  int
	outN     int
	reads    int // READ and atomic records awaiting their response
	noAck    int
	armed    bool // a timer is scheduled
	deadline time.Time
	rnrPSN   uint32
	rnrWait  bool
	// SQD: the send queue up to drainTail (the WQEs begun before the
	// transition) still goes out; drainNotify asks for SQ_DRAINED once
	// it has all completed.
	drainTail   uint32
	drainNotify bool
	nakPSN      uint32 // last PSN retransmitted for a sequence NAK
	nakValid    bool
	cwnd        int     // the window: PSNs allowed in flight
	ssthresh    int     // the window's slow-start threshold
	caAcked     int     // PSNs acknowledged towards the next additive increase
	tb          txBatch // packets not yet sent

	// Responder, under rmu (the port's receive goroutine).
	rmu     sync.Mutex
	self    remote // this QP, as a requester sees it
	ePSN    uint32
	msn     uint32
	nakSent bool
	inMsg   bool          // a multi-packet SEND or WRITE is in progress
	inOp    pvrdma.Opcode // its kind: OpSend or OpRDMAWrite
	inLen   uint64        // bytes received so far
	inRKey  uint32        // WRITE: the target's R_Key and address,
	inVA    uint64        // looked up again for every packet
	inWrLen uint32        // WRITE: its DMA length
	inRecv  bool          // a receive WQE is taken
	inSC    scatter
	inCQE   pvrdma.CQE
	// The results of the last atomics executed, replayed to their
	// duplicates (as many as max_dest_rd_atomic may be in flight).
	atoms    [maxAtomSaved]savedAtomic
	atomNext int
	udSrc    netip.Addr // UD: the last sender, its QP and next PSN
	udSrcQPN uint32
	udNext   uint32
	udSeen   uint64  // the PSNs seen of the 64 before udNext
	wmr      mrCache // last region written or read remotely
	rb       txBatch // responses not yet sent
	rwqe     [pvrdma.RecvHdrSize + 64*pvrdma.SGESize]byte
	grh      [40]byte
}

// outWQE is a work request sent and not yet complete.
type outWQE struct {
	idx    uint32 // its SQ index
	psn    uint32 // first PSN
	npsn   uint32
	op     pvrdma.Opcode
	length uint64
	got    uint64 // READ: response bytes received
	asked  uint64 // READ: response bytes asked for so far
	acked  bool   // SEND/WRITE: acknowledged
}

func (o *outWQE) last() uint32 { return psnAdd(o.psn, o.npsn-1) }

// startWire sets up the QP's network state at RTR, when its destination
// is reached over the network.
func (q *qp) startWire(dgid verbs.GID) {
	n := 1
	for n < q.cap.MaxSendWR+1 {
		n <<= 1
	}
	wq := q.wq
	if len(wq.out) != n {
		wq.out = make([]outWQE, n)
	}
	wq.resetReq(q)
	wq.rmu.Lock()
	wq.peer = wireAddr(dgid)
	wq.resetResp()
	wq.ePSN = load(&q.sh.rqPSN)
	wq.rmu.Unlock()
}

// resetReq forgets everything in flight; the SQ restarts at sqHead.
func (wq *wireQP) resetReq(q *qp) {
	wq.txHead, wq.txOff, wq.txCur = q.sqHead, 0, false
	wq.txPSN, wq.una = q.sqPSN, q.sqPSN
	wq.outHead, wq.outN, wq.reads, wq.noAck = 0, 0, 0, 0
	wq.rnrWait, wq.nakValid, wq.drainNotify = false, false, false
	wq.cwnd, wq.ssthresh, wq.caAcked = initWindow, maxWindow, 0
	wq.ackPend.Store(0)
	wq.deadlineNs.Store(0)
	wq.tb.n, wq.tb.nseg, wq.tb.short = 0, 0, false // packets not sent are dropped
	if wq.armed {
		wq.armed = false
		q.timerSeq++
		q.stalled = false
	}
}

func (wq *wireQP) resetResp() {
	wq.self = remote{}
	wq.udSrc, wq.udSrcQPN, wq.udNext, wq.udSeen = netip.Addr{}, 0, 0, 0
	wq.msn, wq.nakSent, wq.inMsg, wq.inRecv = 0, false, false, false
	wq.atoms, wq.atomNext = [maxAtomSaved]savedAtomic{}, 0
	wq.wmr = mrCache{}
}

// nakStatus is the completion status of a NAK's syndrome syn: invalid
// request, remote access error, or else remote operational error.
func nakStatus(syn uint8) verbs.WCStatus {
	switch syn {
	case roce.SynNAKInvReq:
		return verbs.WCRemInvReqErr
	case roce.SynNAKRemAccess:
		return verbs.WCRemAccessErr
	}
	return verbs.WCRemOpErr
}

// maxAtomSaved is how many atomic results a responder keeps: the device's
// max_qp_rd_atom.
const maxAtomSaved = 16

// savedAtomic is an executed atomic: its PSN and the value it read.
type savedAtomic struct {
	ok   bool
	psn  uint32
	orig uint64
}

// drain starts the send queue drain of SQD: the WQE being sent, if any,
// is the last to go. It reports whether the queue is drained already, when
// notify asks for the SQ_DRAINED event; else the event comes once the
// WQEs in flight have completed (drained).
func (q *qp) drain(notify bool) bool {
	wq := q.wq
	wq.drainTail = wq.txHead
	if wq.txCur {
		wq.drainTail = q.dsq.Next(wq.rec(wq.outN - 1).idx)
	}
	if wq.outN == 0 {
		return notify
	}
	wq.drainNotify = notify
	return false
}

// drained raises SQ_DRAINED, when asked for, once every WQE begun before
// the SQD transition has completed.
func (q *qp) drained() {
	wq := q.wq
	if wq.drainNotify && wq.outN == 0 && !wq.txCur && q.state() == verbs.StateSQD {
		wq.drainNotify = false
		c := q.c
		c.h.raiseEvent(c.h.self, c.idx, verbs.EventSQDrained, objQP, q.idx, q.gen.Load())
	}
}

func (wq *wireQP) rec(i int) *outWQE { return &wq.out[(wq.outHead+i)&(len(wq.out)-1)] }

// wireExecute transmits what the send queue holds, as far as the window
// allows, and handles an expired timer.
func (q *qp) wireExecute() {
	wq := q.wq
	switch q.state() {
	case verbs.StateRTS, verbs.StateSQD:
	case verbs.StateErr, verbs.StateSQE:
		wq.resetReq(q)
		q.flushSQ()
		return
	default:
		return
	}
	if wq.armed && !q.stalled {
		// The engine ran us: the timer fired.
		wq.armed = false
		if !q.wireTimer() {
			return
		}
	}
	if wq.rnrWait {
		return
	}
	wq.inTx.Store(true)
	q.wireTransmit()
	for {
		wq.inTx.Store(false)
		if wq.ackPend.Load() == 0 {
			return
		}
		wq.inTx.Store(true)
		q.takeACK()
		// The ACK handed over may complete the last WQE begun before
		// SQD: its SQ_DRAINED is raised here, as wireResponse raises
		// that of an ACK it handles itself.
		q.drained()
		if s := q.state(); s != verbs.StateRTS && s != verbs.StateSQD || wq.rnrWait {
			wq.inTx.Store(false)
			return
		}
		q.wireTransmit()
	}
}

// ackValid marks ackPend as holding a PSN.
const ackValid = 1 << 31

// handOverACK leaves a positive ACK from src for psn to the thread that
// holds the send lock, if it is transmitting: it handles the ACK (and
// sends what the window then lets through) before it releases the lock,
// and the receive goroutine need not wait for the lock, held across
// system calls, nor hold it across its own. It reports false when the ACK
// must be handled with the lock taken; the receiver then takes it and
// calls takeACK. Positive ACKs are cumulative: the newest one handed over
// stands for those before it.
func (q *qp) handOverACK(src netip.Addr, psn uint32) bool {
	wq := q.wq
	wq.rmu.Lock()
	ok := q.wrc && src == wq.peer
	wq.rmu.Unlock()
	if !ok {
		return false
	}
	for {
		old := wq.ackPend.Load()
		if old != 0 && psnDiff(psn, old&0xFFFFFF) <= 0 {
			break
		}
		if wq.ackPend.CompareAndSwap(old, ackValid|psn) {
			break
		}
	}
	// The holder clears inTx before it looks at ackPend, and this
	// thread set ackPend before it looks at inTx: one of the two sees
	// the other's store.
	return wq.inTx.Load()
}

// takeACK handles the ACK handed over, if any, under the send lock, and
// reports whether there was one.
func (q *qp) takeACK() bool {
	wq := q.wq
	v := wq.ackPend.Swap(0)
	if v == 0 {
		return false
	}
	if q.state() != verbs.StateRTS && q.state() != verbs.StateSQD || wq.outN == 0 {
		wq.port.drop(dropDuplicate)
		return true
	}
	q.ackUpTo(v &^ ackValid)
	return true
}

// wireTimer handles a fired timer; false means the QP failed.
func (q *qp) wireTimer() bool {
	wq := q.wq
	if wq.outN == 0 {
		wq.rnrWait = false
		return true
	}
	if wq.rnrWait {
		wq.rnrWait = false
		q.goBack(wq.rnrPSN)
		return true
	}
	now := time.Now()
	if now.Before(wq.deadline) {
		q.arm(wq.deadline)
		return true
	}
	if q.retryLeft == 0 {
		q.wireFail(verbs.WCRetryExcErr)
		return false
	}
	q.retryLeft--
	wq.lost()
	q.goBack(wq.una)
	return true
}

// arm schedules the timer for at, unless one is scheduled already (it
// then finds the later deadline when it fires).
func (q *qp) arm(at time.Time) {
	wq := q.wq
	wq.deadline = at
	if wq.rnrWait {
		// The RNR timer, armed when the NAK came, fires when it was
		// scheduled: the ACK deadline moving on does not delay it.
		wq.deadlineNs.Store(0)
	} else {
		wq.deadlineNs.Store(monoNs(at))
	}
	if wq.armed {
		return
	}
	d := ackTimeout(q.attr.Timeout)
	if d == 0 && !wq.rnrWait {
		return // an infinite timeout: wait for the responder forever
	}
	wq.armed = true
	q.stalled = true
	q.timerSeq++
	q.c.h.eng.schedule(q, at, q.timerSeq)
}

// rearm restarts the ACK timer after progress.
func (q *qp) rearm() {
	if d := ackTimeout(q.attr.Timeout); d > 0 && q.wq.outN > 0 {
		q.arm(time.Now().Add(d))
	}
}

// goBack retransmits from PSN psn: the record holding it and all after it.
func (q *qp) goBack(psn uint32) {
	wq := q.wq
	for i := 0; i < wq.outN; i++ {
		o := wq.rec(i)
		if psnDiff(psn, o.psn) < 0 || psnDiff(psn, o.last()) > 0 {
			continue
		}
		for j := i + 1; j < wq.outN; j++ {
			if r := wq.rec(j); r.op == pvrdma.OpRDMARead || r.op >= pvrdma.OpAtomicCmpAndSwp {
				wq.reads--
			}
		}
		wq.outN = i + 1
		wq.txHead = o.idx
		wq.txCur = true
		off := uint64(psnDiff(psn, o.psn)) * uint64(q.attr.PathMTU.Bytes())
		if o.op == pvrdma.OpRDMARead {
			off = o.got
			o.asked = o.got
			psn = psnAdd(o.psn, uint32(o.got/uint64(q.attr.PathMTU.Bytes())))
		}
		wq.txOff = off
		wq.txPSN = psn
		o.acked = false
		wq.noAck = 0
		q.wireTransmit()
		q.rearm()
		return
	}
}

// retryFrom goes back to psn once: a NAK, a gap in a read's responses
// or an implied NAK for the same PSN, repeated while the retransmission is
// on its way, does not send it again (the ACK timeout covers its loss).
func (q *qp) retryFrom(psn uint32) {
	wq := q.wq
	if wq.nakValid && wq.nakPSN == psn {
		return
	}
	wq.nakValid, wq.nakPSN = true, psn
	wq.lost()
	q.goBack(psn)
}

// windowFull tells that the window allows no more packets in flight. A UC
// QP has none: nothing acknowledges its packets, and its messages complete
// once sent.
func (q *qp) windowFull() bool {
	return q.typ != verbs.UC && int(psnDiff(q.wq.txPSN, q.wq.una)) >= q.wq.cwnd
}

// lost shrinks the window after a loss.
func (wq *wireQP) lost() {
	wq.cwnd = max(wq.cwnd/2, minWindow)
	wq.ssthresh, wq.caAcked = wq.cwnd, 0
}

// acked grows the window by n PSNs acknowledged.
func (wq *wireQP) acked(n int) {
	if wq.cwnd >= maxWindow {
		return
	}
	if wq.cwnd < wq.ssthresh {
		wq.cwnd = min(wq.cwnd+n, maxWindow)
		return
	}
	wq.caAcked += n
	if wq.caAcked >= wq.cwnd {
		wq.caAcked -= wq.cwnd
		wq.cwnd = min(wq.cwnd+maxNoAck, maxWindow)
	}
}

// wireTransmit sends packets while the window and the send queue allow.
func (q *qp) wireTransmit() {
	wq := q.wq
	tail := q.dsq.Producer()
	if !q.dsq.Valid(tail) {
		return
	}
	if q.state() == verbs.StateSQD {
		tail = wq.drainTail // nothing new begins
	}
	sent, idle := false, wq.outN == 0
	for {
		if !wq.txCur {
			if wq.txHead == tail || wq.outN == len(wq.out) || q.windowFull() {
				break
			}
			w := pvrdma.SendWQE(q.dsq.WQE(wq.txHead))
			op := w.Opcode()
			if op > pvrdma.OpAtomicFetchAndAdd || !opAllowed(q.typ, op) {
				if !q.failLocal(verbs.WCLocQPOpErr) {
					if wq.outN > 0 {
						break // the WQEs in flight complete first
					}
					return
				}
				continue
			}
			isRead := op == pvrdma.OpRDMARead || op >= pvrdma.OpAtomicCmpAndSwp
			if isRead && wq.reads >= max(int(q.attr.MaxRdAtomic), 1) {
				break
			}
			length, st := q.wireGather(w)
			if st == verbs.WCSuccess && op >= pvrdma.OpAtomicCmpAndSwp && (w.NumSGE() != 1 || length != 8) {
				st = verbs.WCLocLenErr
			}
			if st != verbs.WCSuccess {
				if !q.failLocal(st) {
					if wq.outN > 0 {
						break // the WQEs in flight complete first
					}
					return
				}
				continue
			}
			n := npkts(length, q.attr.PathMTU)
			if op >= pvrdma.OpAtomicCmpAndSwp {
				n = 1
			}
			o := wq.rec(wq.outN)
			*o = outWQE{idx: wq.txHead, psn: wq.txPSN, npsn: n, op: op, length: length}
			wq.outN++
			if isRead {
				wq.reads++
			}
			wq.txOff, wq.txCur = 0, true
		}
		o := wq.rec(wq.outN - 1)
		w := pvrdma.SendWQE(q.dsq.WQE(o.idx))
		if !q.sendRecord(o, w) {
			if !wq.txCur {
				return // the WQE failed: the QP is in error
			}
			break // window full in the middle of a message, or a WQE waiting to fail
		}
		sent = true
		wq.txCur = false
		wq.txHead = q.dsq.Next(o.idx)
		if q.typ == verbs.UC && !q.completeHead(verbs.WCSuccess, uint32(o.length)) {
			return // unreliable: complete once sent
		}
	}
	wq.port.flush(&wq.tb)
	// The ACK timer runs from the oldest packet in flight: after an idle
	// time, from now, not from a deadline set for packets acknowledged
	// long ago (which would retransmit what was just sent).
	if sent && (!wq.armed || idle) {
		q.rearm()
	}
}

// failLocal completes the WQE at txHead with a local error once everything
// before it is complete; false means the QP is now in error.
func (q *qp) failLocal(st verbs.WCStatus) bool {
	wq := q.wq
	if wq.outN > 0 {
		return false // wait: the error completes after the earlier WQEs
	}
	// UC messages before it completed as they joined the batch: they
	// leave before the QP stops.
	wq.port.flush(&wq.tb)
	w := pvrdma.SendWQE(q.dsq.WQE(q.sqHead))
	q.sqHead = q.dsq.Next(q.sqHead)
	q.dsq.SetConsumer(q.sqHead)
	next := q.errorState()
	q.complete(w, failed(st))
	wq.resetReq(q)
	q.flushAfterError(next)
	return false
}

// wireGather checks w's local buffers and fills q.srcs (or nothing for
// inline data); it returns the message length.
func (q *qp) wireGather(w pvrdma.SendWQE) (uint64, verbs.WCStatus) {
	op := w.Opcode()
	if w.Flags()&pvrdma.FlagInline != 0 {
		if q.cap.MaxInlineData == 0 || int(w.TotalLen()) > q.cap.MaxInlineData || op >= pvrdma.OpRDMARead {
			return 0, verbs.WCLocQPOpErr
		}
		return uint64(w.TotalLen()), verbs.WCSuccess
	}
	need := verbs.Access(0)
	if op == pvrdma.OpRDMARead || op >= pvrdma.OpAtomicCmpAndSwp {
		need = verbs.AccessLocalWrite
	}
	n, st := q.gather(w, need)
	if st == verbs.WCSuccess && n > 1<<31 {
		st = verbs.WCLocLenErr
	}
	return n, st
}

// payloadAt copies the message bytes [off, off+len(dst)) of w into dst.
func (q *qp) payloadAt(w pvrdma.SendWQE, off uint64, dst []byte) {
	if w.Flags()&pvrdma.FlagInline != 0 {
		copy(dst, w.Inline(int(w.TotalLen()))[off:])
		return
	}
	for i := range w.NumSGE() {
		s := q.srcs[i]
		if off >= uint64(len(s)) {
			off -= uint64(len(s))
			continue
		}
		n := copy(dst, s[off:])
		dst = dst[n:]
		off = 0
		if len(dst) == 0 {
			return
		}
	}
}

// sendRecord sends the packets of o from wq.txOff; false means the window
// filled before its last packet.
func (q *qp) sendRecord(o *outWQE, w pvrdma.SendWQE) bool {
	wq := q.wq
	mtu := uint64(q.attr.PathMTU.Bytes())
	if o.op != pvrdma.OpRDMARead && o.op < pvrdma.OpAtomicCmpAndSwp && w.Flags()&pvrdma.FlagInline == 0 {
		if _, st := q.gather(w, 0); st != verbs.WCSuccess {
			// A retransmission finds the local buffer gone
			// (deregistered since the first send): as rxe's
			// requester, which looks the key up again for every
			// packet it builds, the WQE fails with a local
			// protection error, once the ones before it are done.
			if wq.rec(0) == o {
				q.wireFail(verbs.WCLocProtErr)
			}
			return false
		}
	}
	var p roce.Packet
	p.PKey = roce.DefaultPKey
	p.DestQPN = q.attr.DestQPN
	switch o.op {
	case pvrdma.OpRDMARead:
		// A read longer than the window asks for its responses a
		// window at a time, the next part once the last has arrived:
		// the responder sends a read's responses at once, and a burst
		// larger than the receiving socket can hold would be lost
		// again and again.
		if o.asked > o.got {
			return false
		}
		n := min(o.length-wq.txOff, readChunk*mtu)
		p.Opcode = roce.RCReadRequest
		p.PSN = wq.txPSN
		p.VA = w.RemoteAddr() + wq.txOff
		p.RKey = w.RKey()
		p.DMALen = uint32(n)
		p.AckReq = true
		q.sendPacket(&p, w, 0, 0)
		wq.txOff += n
		o.asked = wq.txOff
		wq.txPSN = psnAdd(wq.txPSN, npkts(n, q.attr.PathMTU))
		wq.noAck = 0
		return wq.txOff == o.length
	case pvrdma.OpAtomicCmpAndSwp, pvrdma.OpAtomicFetchAndAdd:
		p.Opcode = roce.RCCompareSwap
		if o.op == pvrdma.OpAtomicFetchAndAdd {
			p.Opcode = roce.RCFetchAdd
		}
		p.PSN = wq.txPSN
		p.VA, p.RKey = w.AtomicAddr(), w.AtomicRKey()
		p.SwapAdd, p.Compare = w.CompareAdd(), 0
		if o.op == pvrdma.OpAtomicCmpAndSwp {
			p.SwapAdd, p.Compare = w.Swap(), w.CompareAdd()
		}
		p.AckReq = true
		q.sendPacket(&p, w, 0, 0)
		wq.txPSN = psnAdd(o.psn, 1)
		wq.noAck = 0
		return true
	}
	send := o.op == pvrdma.OpSend || o.op == pvrdma.OpSendWithImm
	imm := o.op == pvrdma.OpSendWithImm || o.op == pvrdma.OpRDMAWriteWithImm
	uc := q.typ == verbs.UC
	for {
		if q.windowFull() {
			return false
		}
		n := min(mtu, o.length-wq.txOff)
		first, last := wq.txOff == 0, wq.txOff+n == o.length
		p.Opcode = connOpcode(send, imm, first, last, uc)
		p.PSN = wq.txPSN
		p.SE = last && w.Flags()&pvrdma.FlagSolicited != 0
		if first && !send {
			p.VA, p.RKey, p.DMALen = w.RemoteAddr(), w.RKey(), uint32(o.length)
		}
		if last && imm {
			p.Imm = w.Imm()
		}
		// An ACK is asked for on a message's last packet, and every 64
		// packets, or every half window when the window is smaller
		// (after losses), and on the packet that fills the window:
		// else a window that ends inside a long message would wait
		// for the ACK timeout before it moves on.
		wq.noAck++
		fills := int(psnDiff(psnAdd(wq.txPSN, 1), wq.una)) >= wq.cwnd
		p.AckReq = !uc && (last || fills || wq.noAck >= min(maxNoAck, max(wq.cwnd/2, 1)))
		if p.AckReq {
			wq.noAck = 0
		}
		q.sendPacket(&p, w, wq.txOff, int(n))
		wq.txOff += n
		wq.txPSN = psnAdd(wq.txPSN, 1)
		if last {
			return true
		}
	}
}

// connOpcode is the RC or UC opcode of a SEND or WRITE packet.
func connOpcode(send, imm, first, last, uc bool) roce.Opcode {
	var op roce.Opcode
	switch {
	case send && first && last:
		op = roce.RCSendOnly
		if imm {
			op = roce.RCSendOnlyImm
		}
	case send && first:
		op = roce.RCSendFirst
	case send && last:
		op = roce.RCSendLast
		if imm {
			op = roce.RCSendLastImm
		}
	case send:
		op = roce.RCSendMiddle
	case first && last:
		op = roce.RCWriteOnly
		if imm {
			op = roce.RCWriteOnlyImm
		}
	case first:
		op = roce.RCWriteFirst
	case last:
		op = roce.RCWriteLast
		if imm {
			op = roce.RCWriteLastImm
		}
	default:
		op = roce.RCWriteMiddle
	}
	if uc {
		op += 0x20
	}
	return op
}

// sendPacket encodes p with n payload bytes of w from off and sends it to
// the QP's peer.
func (q *qp) sendPacket(p *roce.Packet, w pvrdma.SendWQE, off uint64, n int) {
	wq := q.wq
	pkt, payload := wq.port.encode(&wq.tb, wq.peer, p, n)
	if n > 0 {
		q.payloadAt(w, off, payload)
	}
	wq.port.commit(&wq.tb, pkt)
}

// completeHead completes the oldest record with status st.
func (q *qp) completeHead(st verbs.WCStatus, byteLen uint32) bool {
	wq := q.wq
	o := wq.rec(0)
	w := pvrdma.SendWQE(q.dsq.WQE(o.idx))
	if o.op == pvrdma.OpRDMARead || o.op >= pvrdma.OpAtomicCmpAndSwp {
		wq.reads--
	}
	wq.outHead = (wq.outHead + 1) & (len(wq.out) - 1)
	wq.outN--
	q.sqHead = q.dsq.Next(o.idx)
	if psnDiff(psnAdd(o.psn, o.npsn), wq.una) > 0 {
		wq.una = psnAdd(o.psn, o.npsn)
	}
	if st != verbs.WCSuccess {
		q.dsq.SetConsumer(q.sqHead)
		next := q.errorState()
		q.complete(w, failed(st))
		wq.resetReq(q)
		q.flushAfterError(next)
		return false
	}
	if q.sigAll || w.Flags()&pvrdma.FlagSignaled != 0 {
		q.dsq.SetConsumer(q.sqHead)
		if !q.complete(w, ok(byteLen)) {
			wq.resetReq(q)
			q.sendError()
			return false
		}
	}
	return true
}

// wireFail completes the oldest record with an error.
func (q *qp) wireFail(st verbs.WCStatus) {
	if q.wq.outN > 0 {
		q.completeHead(st, 0)
	}
}

// ackUpTo completes the SEND and WRITE records whose PSNs are all at or
// before psn; it stops at a READ or atomic still waiting for its response.
// It reports false when the QP failed.
func (q *qp) ackUpTo(psn uint32) bool {
	wq := q.wq
	progress := false
	una := wq.una
	defer func() {
		if d := psnDiff(wq.una, una); d > 0 {
			wq.acked(int(d))
		}
	}()
	for wq.outN > 0 {
		o := wq.rec(0)
		if psnDiff(psn, o.last()) < 0 {
			if psnDiff(psn, wq.una) >= 0 {
				wq.una = psnAdd(psn, 1)
				progress = true
			}
			break
		}
		if o.op == pvrdma.OpRDMARead || o.op >= pvrdma.OpAtomicCmpAndSwp {
			// Acknowledged past a read whose response is missing: the
			// response was lost (an implied NAK); ask again.
			q.retryFrom(psnAdd(o.psn, uint32(o.got/uint64(q.attr.PathMTU.Bytes()))))
			return true
		}
		progress = true
		if !q.completeHead(verbs.WCSuccess, uint32(o.length)) {
			return false
		}
		if wq.outN == 0 && wq.txCur {
			// Acknowledged while being sent again: its first
			// transmission arrived after all.
			wq.txCur, wq.txHead = false, q.sqHead
			if psnDiff(wq.txPSN, wq.una) < 0 {
				wq.txPSN = wq.una
			}
		}
	}
	if progress {
		q.retryLeft = int(q.attr.RetryCnt)
		q.rnrLeft = int(q.attr.RNRRetry)
		wq.nakValid = false
		if wq.outN > 0 {
			q.rearm()
		}
	}
	return true
}

// wireResponse handles an ACK, NAK, read response or atomic ACK.
func (q *qp) wireResponse(src netip.Addr, p *roce.Packet) {
	plainACK := p.Opcode == roce.RCAck && roce.IsACK(p.Syndrome)
	if plainACK && q.handOverACK(src, p.PSN) {
		return
	}
	q.LockSend()
	defer q.UnlockSend()
	wq := q.wq
	if !q.wrc || src != wq.peer {
		wq.port.drop(dropSource)
		return
	}
	defer func() {
		if s := q.state(); (s == verbs.StateRTS || s == verbs.StateSQD) && !wq.rnrWait {
			q.wireTransmit()
		}
		q.drained()
	}()
	// An ACK handed over and not taken comes before this packet; this
	// packet, if a plain ACK, is among them.
	if q.takeACK() && plainACK {
		return
	}
	if q.state() != verbs.StateRTS && q.state() != verbs.StateSQD || wq.outN == 0 {
		wq.port.drop(dropDuplicate)
		return
	}
	switch p.Opcode {
	case roce.RCAck:
		syn := p.Syndrome
		switch {
		case roce.IsACK(syn):
			q.ackUpTo(p.PSN)
		case roce.IsRNR(syn):
			if !q.ackUpTo(psnAdd(p.PSN, 0xFFFFFF)) || wq.outN == 0 {
				return
			}
			if q.attr.RNRRetry != 7 {
				if q.rnrLeft == 0 {
					q.wireFail(verbs.WCRNRRetryExcErr)
					return
				}
				q.rnrLeft--
			}
			wq.rnrWait, wq.rnrPSN = true, p.PSN
			wq.armed = false
			q.timerSeq++
			q.stalled = false
			q.arm(time.Now().Add(rnrTimer[syn&31]))
		case syn == roce.SynNAKSeq:
			if !q.ackUpTo(psnAdd(p.PSN, 0xFFFFFF)) || wq.outN == 0 {
				return
			}
			if wq.rnrWait {
				// The packets after one refused for lack of a
				// receive are out of sequence: the RNR timer
				// decides when to send them again, as rxe's.
				return
			}
			q.retryFrom(p.PSN)
		default:
			if !q.ackUpTo(psnAdd(p.PSN, 0xFFFFFF)) || wq.outN == 0 {
				return
			}
			q.wireFail(nakStatus(syn))
		}
	case roce.RCAtomicAck:
		if !q.ackUpTo(psnAdd(p.PSN, 0xFFFFFF)) || wq.outN == 0 {
			return
		}
		o := wq.rec(0)
		if o.op < pvrdma.OpAtomicCmpAndSwp || o.psn != p.PSN {
			wq.port.drop(dropDuplicate)
			return
		}
		w := pvrdma.SendWQE(q.dsq.WQE(o.idx))
		dst, okl := q.local(w.SGE(0), verbs.AccessLocalWrite)
		if !okl || len(dst) != 8 {
			// The buffer for the value read went away (deregistered)
			// while the atomic was in flight: as a READ's response.
			q.wireFail(verbs.WCLocProtErr)
			return
		}
		binary.LittleEndian.PutUint64(dst, p.AtomicOrig)
		q.completeHead(verbs.WCSuccess, 8)
		q.retryLeft = int(q.attr.RetryCnt)
		q.rearm()
	case roce.RCReadRespFirst, roce.RCReadRespMiddle, roce.RCReadRespLast, roce.RCReadRespOnly:
		if !q.ackUpTo(psnAdd(p.PSN, 0xFFFFFF)) || wq.outN == 0 {
			return
		}
		o := wq.rec(0)
		mtu := uint64(q.attr.PathMTU.Bytes())
		want := psnAdd(o.psn, uint32(o.got/mtu))
		if o.op == pvrdma.OpRDMARead && psnDiff(p.PSN, want) > 0 && psnDiff(p.PSN, o.last()) <= 0 {
			// A response of this read is missing: ask for the rest
			// again now rather than after the ACK timeout (once per
			// gap, as a responder's sequence NAK does for requests).
			wq.port.drop(dropSequence)
			q.retryFrom(want)
			return
		}
		if o.op != pvrdma.OpRDMARead || p.PSN != want {
			wq.port.drop(dropDuplicate)
			return
		}
		if p.Opcode.Hdrs()&roce.HdrAETH != 0 && !roce.IsACK(p.Syndrome) {
			q.wireFail(verbs.WCRemOpErr)
			return
		}
		// The last response of each request ends what it asked for.
		lastPkt := p.Opcode == roce.RCReadRespLast || p.Opcode == roce.RCReadRespOnly
		if uint64(len(p.Payload)) > o.asked-o.got || (!lastPkt && uint64(len(p.Payload)) != mtu) ||
			(lastPkt && o.got+uint64(len(p.Payload)) != o.asked) {
			q.wireFail(verbs.WCBadRespErr)
			return
		}
		w := pvrdma.SendWQE(q.dsq.WQE(o.idx))
		if !q.scatterLocal(w, o.got, p.Payload) {
			q.wireFail(verbs.WCLocProtErr)
			return
		}
		o.got += uint64(len(p.Payload))
		wq.una = psnAdd(p.PSN, 1)
		wq.nakValid = false
		q.retryLeft = int(q.attr.RetryCnt)
		if o.got == o.length {
			q.completeHead(verbs.WCSuccess, uint32(o.length))
		}
		q.rearm()
	default:
		wq.port.drop(dropOpcode)
	}
}

// scatterLocal writes b at message offset off into the local SGEs of w.
func (q *qp) scatterLocal(w pvrdma.SendWQE, off uint64, b []byte) bool {
	for i := 0; i < w.NumSGE() && len(b) > 0; i++ {
		s := w.SGE(i)
		if off >= uint64(s.Length) {
			off -= uint64(s.Length)
			continue
		}
		dst, okl := q.local(s, verbs.AccessLocalWrite)
		if !okl {
			return false
		}
		n := copy(dst[off:], b)
		b = b[n:]
		off = 0
	}
	return len(b) == 0
}

// chooseTransport picks, at RTR, how the QP reaches its destination: the
// memory copy when the destination QP is on this host (transport auto or
// copy), else the device's network port.
func (q *qp) chooseTransport() {
	q.setWRC(false)
	q.setNetUser(false)
	port := q.c.wire
	if port == nil {
		return
	}
	if q.typ == verbs.UD {
		q.wq.rmu.Lock()
		q.wq.resetResp()
		q.wq.rmu.Unlock()
		q.setNetUser(true)
		return
	}
	switch q.c.dev.cfg.Transport {
	case TransportCopy:
		return
	case TransportAuto:
		var r remote
		if q.c.h.resolve(&r, q.attr.DestQPN) && r.ctx.typ == uint32(q.typ) && load(&r.dev.netOnly) == 0 &&
			route(q.dev(), q.attr.AH.GRH.SGIDIndex, r.dev, q.attr.AH.GRH.DGID) {
			return
		}
	}
	q.startWire(q.attr.AH.GRH.DGID)
	q.setWRC(true)
	q.setNetUser(true)
	port.connect(q.wq.peer)
}

// setNetUser records whether q may use the network port (an RC or UC QP
// on the network, or a UD QP of a device with a port): threads polling a
// CQ read the port's socket only while some QP does.
func (q *qp) setNetUser(v bool) {
	if port := q.c.wire; port != nil && q.netUser.CompareAndSwap(!v, v) {
		if v {
			port.users.Add(1)
		} else {
			port.users.Add(-1)
		}
	}
}

// setWRC sets q.wrc, which the send lock (held) and the responder lock
// guard.
func (q *qp) setWRC(v bool) {
	if q.wq == nil {
		q.wrc = false
		return
	}
	q.wq.rmu.Lock()
	q.wrc = v
	q.wq.rmu.Unlock()
}

// sendUD sends a UD datagram over the network.
func (q *qp) sendUD(w pvrdma.SendWQE, op pvrdma.Opcode, dqpn, qkey uint32, av pvrdma.AV, length uint64, data []byte) {
	wq := q.wq
	var p roce.Packet
	p.Opcode = roce.UDSendOnly
	if op == pvrdma.OpSendWithImm {
		p.Opcode = roce.UDSendOnlyImm
		p.Imm = w.Imm()
	}
	p.PKey = roce.DefaultPKey
	p.DestQPN = dqpn
	p.PSN = q.sqPSN
	q.sqPSN = psnAdd(q.sqPSN, 1)
	p.QKey = qkey
	p.SrcQPN = q.qpn
	p.SE = w.Flags()&pvrdma.FlagSolicited != 0
	pkt, dst := wq.port.encode(&wq.tb, wireAddr(av.DGID), &p, int(length))
	if data != nil {
		copy(dst, data)
	} else {
		for i := range w.NumSGE() {
			dst = dst[copy(dst, q.srcs[i]):]
		}
	}
	wq.port.commit(&wq.tb, pkt)
	wq.port.flush(&wq.tb)
}

// DataPath says how the QP reaches its destination: "memory copy" on this
// host, or the network transport with both addresses. A UD QP names the
// transports it can use.
func (q *qp) DataPath() string {
	q.LockSend()
	defer q.UnlockSend()
	w := q.c.wire
	switch {
	case q.wrc:
		return fmt.Sprintf("%v, %v -> %v (emulated device)", w.kindTo(q.wq.peer), w.addr, q.wq.peer)
	case w != nil && q.typ == verbs.UD:
		via := fmt.Sprintf("%v from %v", w.kind, w.addr)
		if peers := w.tcpPeers(); len(peers) > 0 {
			via += fmt.Sprintf(" (TCP to %v)", strings.Trim(fmt.Sprint(peers), "[]"))
		}
		if q.c.dev.cfg.Transport == TransportAuto {
			return "memory copy on this host, else " + via + " (emulated device)"
		}
		return via + " (emulated device)"
	}
	return "memory copy (emulated device)"
}
