//go:build linux

package emu

import (
	"encoding/binary"
	"sync/atomic"
	"time"

	"github.com/pvperf/pvperf/internal/mmio"
	"github.com/pvperf/pvperf/verbs"
	"github.com/pvperf/pvperf/verbs/pvrdma"
)

// This file is the device: it executes the send queue of a QP, moving data
// between the requester's and the responder's memory with copy, doing
// atomics with atomic instructions on the responder's memory, and writing
// pvrdma CQEs. It runs in the thread that rang the send doorbell, or in the
// engine when a stalled request is retried, always under the QP's send lock.

// outcome is the result of executing one WQE.
type outcome uint8

const (
	done   outcome = iota // completed (successfully or not: see status)
	lost                  // no answer: retry after the ACK timeout
	rnrNak                // receiver not ready: retry after the RNR timer
)

type result struct {
	out     outcome
	status  verbs.WCStatus
	byteLen uint32
	rnrWait time.Duration
}

func ok(n uint32) result               { return result{status: verbs.WCSuccess, byteLen: n} }
func failed(s verbs.WCStatus) result   { return result{status: s} }
func resultLost() result               { return result{out: lost} }
func resultRNR(d time.Duration) result { return result{out: rnrNak, rnrWait: d} }

// remote caches what the requester knows about a destination QP. It is
// valid while the peer lives and the QP's generation is unchanged.
type remote struct {
	valid  bool
	qpn    uint32
	p      *peer
	owner  *uint32 // the peer's liveness word (see tableHeader.owner)
	ctx    *qpCtx
	idx    uint32
	gen    uint32
	dev    *devInfo
	rq     pvrdma.Queue
	rqLock spinLock
	mr     mrCache // last memory region accessed at the destination
	rmr    mrCache // last receive buffer region at the destination

	// For an RC destination without SRQ this requester is the only
	// consumer of the receive queue, so it may remember how far the
	// owner had posted (rqSeen) and read the next WQE ahead of time (pre),
	// off the critical path: posted WQEs do not change until consumed.
	rqSeen uint32
	preIdx uint32
	preOK  bool
	preLen int
	pre    [pvrdma.RecvHdrSize + 64*pvrdma.SGESize]byte
	srq    *srqCtx
	srqQ   pvrdma.Queue
	cq     cqView
}

func (r *remote) live() bool {
	return r.valid && load(&r.ctx.gen) == r.gen && !r.p.dead.Load() && alive(r.p.tab)
}

// resolve fills r for destination QP number qpn, or reports false when no
// such QP is reachable.
func (h *host) resolve(r *remote, qpn uint32) bool {
	*r = remote{}
	p, err := h.peer(qpn >> 12)
	if err != nil {
		return false
	}
	idx := qpn & (maxQPs - 1)
	ctx := &p.tab.qps[idx]
	gen := load(&ctx.gen)
	if gen%2 == 0 || ctx.dev >= maxEmuDevs {
		return false
	}
	r.p, r.ctx, r.idx, r.gen, r.qpn = p, ctx, idx, gen, qpn
	r.owner = &p.tab.hdr.owner
	r.dev = &p.tab.devs[ctx.dev]
	if load(&r.dev.live) == 0 {
		return false
	}
	if ctx.srq == 0 {
		n, stride := int(ctx.rqN), int(ctx.rqStride)
		if !validQueue(n, stride) {
			return false
		}
		ring := p.bytes(ctx.rqSeg, ctx.rqRing, pageSize)
		wqes := p.bytes(ctx.rqWQESeg, ctx.rqWQE, n*stride)
		if ring == nil || wqes == nil {
			return false
		}
		r.rq = pvrdma.NewQueue(ring, pvrdma.RxRingOffset, wqes, n, stride)
		r.rqLock = spinLock{&ctx.rqLock}
	} else {
		if ctx.srq > maxSRQs {
			return false
		}
		s := &p.tab.srqs[ctx.srq-1]
		n, stride := int(s.n), int(s.stride)
		if load(&s.gen)%2 == 0 || !validQueue(n, stride) {
			return false
		}
		buf := p.bytes(s.seg, s.off, pvrdma.SRQBufLen(n, stride))
		if buf == nil {
			return false
		}
		r.srq = s
		r.srqQ = pvrdma.NewQueue(buf, pvrdma.RxRingOffset, buf[pvrdma.PageSize:], n, stride)
		r.rqLock = spinLock{&s.lock}
	}
	if ctx.recvCQ >= maxCQs {
		return false
	}
	cqc := &p.tab.cqs[ctx.recvCQ]
	n := int(cqc.n)
	if load(&cqc.gen)%2 == 0 || n <= 0 || n&(n-1) != 0 {
		return false
	}
	cbuf := p.bytes(cqc.seg, cqc.off, pvrdma.CQBufLen(n))
	if cbuf == nil {
		return false
	}
	r.cq = cqView{p: p, ctx: cqc, idx: ctx.recvCQ, ring: pvrdma.NewRing(cbuf, pvrdma.RxRingOffset, n), cqes: cbuf[pvrdma.PageSize:]}
	r.valid = true
	return true
}

func validQueue(n, stride int) bool {
	return n > 0 && n&(n-1) == 0 && stride >= pvrdma.RecvHdrSize+pvrdma.SGESize && stride&(stride-1) == 0 && n*stride <= 1<<30
}

// route reports whether a packet from GID index sgid of device src reaches
// GID dgid on device dst: same RoCE version, dgid is one of dst's GIDs, and
// for RoCE v2 both addresses are of the same IP version.
func route(src *devInfo, sgid uint8, dst *devInfo, dgid verbs.GID) bool {
	if uint32(sgid) >= src.ngid || src.roce != dst.roce {
		return false
	}
	found := false
	for i := uint32(0); i < dst.ngid && i < maxGIDs; i++ {
		if dst.gids[i] == dgid {
			found = true
			break
		}
	}
	if !found {
		return false
	}
	if src.roce == 2 && verbs.GID(src.gids[sgid]).IsV4Mapped() != dgid.IsV4Mapped() {
		return false
	}
	return true
}

func (q *qp) dev() *devInfo { return &q.c.h.tab.devs[q.c.idx] }

// execute runs the send queue until it is empty, stalls or fails.
func (q *qp) execute() {
	if q.wrc {
		q.wireExecute()
		return
	}
	if q.stalled {
		return
	}
	if load(&q.sh.state) == uint32(verbs.StateRTS) {
		// The fast path: run WQEs while fastExec takes them.
		tail := q.dsq.Producer()
		if !q.dsq.Valid(tail) {
			return
		}
		head := q.sqHead
		for head != tail {
			w := q.dsq.WQE(head)
			n, done := q.fastExec(w)
			if !done {
				break
			}
			head = q.dsq.Next(head)
			if q.sigAll || binary.LittleEndian.Uint32(w[20:])&pvrdma.FlagSignaled != 0 {
				q.sqHead = head
				q.dsq.SetConsumer(head)
				if !q.complete(pvrdma.SendWQE(w), ok(n)) {
					q.sendError()
					return
				}
			}
		}
		q.sqHead = head
		if head == tail {
			q.dsq.SetConsumer(head)
			return
		}
	}
	q.executeSlow()
}

// msgLen is the length of w's message: its inline bytes, or the sum of
// its SGEs (checked by the execution that succeeded).
func msgLen(w pvrdma.SendWQE) uint32 {
	if w.Flags()&pvrdma.FlagInline != 0 {
		return w.TotalLen()
	}
	var n uint32
	for i := range w.NumSGE() {
		n += w.SGE(i).Length
	}
	return n
}

// executeSlow is the general path: every opcode, QP type and error.
func (q *qp) executeSlow() {
	switch q.state() {
	case verbs.StateRTS:
	case verbs.StateErr, verbs.StateSQE:
		q.flushSQ()
		return
	default:
		return // SQD holds new work; earlier states never reach here
	}
	tail := q.dsq.Producer()
	if !q.dsq.Valid(tail) {
		return
	}
	for q.sqHead != tail {
		w := pvrdma.SendWQE(q.dsq.WQE(q.sqHead))
		var r result
		if q.retryDone {
			// The last transmission's ACK timeout expired too.
			q.retryDone = false
			r = failed(verbs.WCRetryExcErr)
		} else {
			r = q.exec1(w)
		}
		switch r.out {
		case lost:
			if q.typ != verbs.RC {
				r = ok(0) // unreliable: the message is simply gone
				break
			}
			// Wait for the ACK timeout; retry_cnt retransmissions follow
			// the first transmission, then the request fails.
			if q.retryLeft == 0 {
				q.retryDone = true
			} else {
				q.retryLeft--
			}
			q.retriesUsed = true
			q.stall(ackTimeout(q.attr.Timeout))
			q.dsq.SetConsumer(q.sqHead)
			return
		case rnrNak:
			if q.attr.RNRRetry != 7 {
				if q.rnrLeft == 0 {
					r = failed(verbs.WCRNRRetryExcErr)
					break
				}
				q.rnrLeft--
			}
			q.retriesUsed = true
			q.stall(r.rnrWait)
			q.dsq.SetConsumer(q.sqHead)
			return
		}
		q.sqHead = q.dsq.Next(q.sqHead)
		if r.status != verbs.WCSuccess {
			// The QP is in its error state by the time the error
			// completion can be seen, as on hardware.
			q.dsq.SetConsumer(q.sqHead)
			next := q.errorState()
			q.complete(w, r)
			q.flushAfterError(next)
			return
		}
		q.retriesUsed = false
		q.retryLeft, q.rnrLeft = int(q.attr.RetryCnt), int(q.attr.RNRRetry)
		if q.typ != verbs.RC {
			// An unreliable send completes with its length whatever
			// became of it (rxe: the WQE's length), on every transport.
			r.byteLen = msgLen(w)
		}
		if q.sigAll || w.Flags()&pvrdma.FlagSignaled != 0 {
			q.dsq.SetConsumer(q.sqHead)
			if !q.complete(w, r) {
				q.sendError()
				return
			}
		}
		if q.sqHead == tail {
			tail = q.dsq.Producer()
			if !q.dsq.Valid(tail) {
				break
			}
		}
	}
	q.dsq.SetConsumer(q.sqHead)
}

// stall parks the send queue; the engine runs it again after d (never, for
// an infinite timeout).
func (q *qp) stall(d time.Duration) {
	q.stalled = true
	q.timerSeq++
	if d > 0 {
		q.c.h.eng.schedule(q, time.Now().Add(d), q.timerSeq)
	}
}

// sendError moves the QP to the error state after a failed send WQE (to
// SQE for UD and UC, whose receive side keeps working) and flushes.
func (q *qp) sendError() { q.flushAfterError(q.errorState()) }

// errorState moves the QP to the state a send error leads to and returns it.
func (q *qp) errorState() verbs.QPState {
	next := verbs.StateErr
	if q.typ != verbs.RC {
		next = verbs.StateSQE
	}
	store(&q.sh.state, uint32(next))
	return next
}

// flushAfterError flushes what a send error in state next flushes.
func (q *qp) flushAfterError(next verbs.QPState) {
	if next == verbs.StateErr {
		q.flushAll()
	} else {
		q.unstall()
		q.flushSQ()
	}
}

// flushAll completes everything queued with WR_FLUSH_ERR.
func (q *qp) flushAll() {
	q.unstall()
	store(&q.sh.flush, 0)
	q.flushSQ()
	q.flushRQ()
}

// unstall forgets a stalled request and its pending retry.
func (q *qp) unstall() {
	q.stalled = false
	q.retryDone = false
	q.timerSeq++
}

func (q *qp) flushSQ() {
	tail := q.dsq.Producer()
	if !q.dsq.Valid(tail) {
		return
	}
	for q.sqHead != tail {
		w := pvrdma.SendWQE(q.dsq.WQE(q.sqHead))
		q.sqHead = q.dsq.Next(q.sqHead)
		q.dsq.SetConsumer(q.sqHead)
		q.complete(w, failed(verbs.WCWRFlushErr))
	}
	q.dsq.SetConsumer(q.sqHead)
}

// flushRQ completes every posted receive with WR_FLUSH_ERR. A QP attached
// to an SRQ has nothing of its own to flush: it reports its last WQE.
func (q *qp) flushRQ() {
	h := q.c.h
	if wq := q.wq; wq != nil {
		// The WQE a message in progress over the network had taken
		// comes first.
		wq.rmu.Lock()
		if wq.inRecv {
			e := wq.inCQE
			e.Status, e.Flags, e.ByteLen = uint32(verbs.WCWRFlushErr), 0, 0
			h.postCQE(&q.rcq.view, &e, false)
			wq.inRecv, wq.inMsg = false, false
		}
		wq.rmu.Unlock()
	}
	if q.srq != nil {
		h.raiseEvent(h.self, q.c.idx, verbs.EventQPLastWQEReached, objQP, q.idx, q.gen.Load())
		return
	}
	l := spinLock{&q.sh.rqLock}
	l.lock(h)
	head := q.drq.Consumer()
	tail := q.drq.Producer()
	if q.drq.Valid(head) && q.drq.Valid(tail) {
		for head != tail {
			w := pvrdma.RecvWQE(q.drq.WQE(head))
			e := pvrdma.CQE{WRID: w.WRID(), QP: uint64(q.handle), Opcode: pvrdma.WCOpRecv, Status: uint32(verbs.WCWRFlushErr)}
			head = q.drq.Next(head)
			q.drq.SetConsumer(head)
			h.postCQE(&q.rcq.view, &e, false)
		}
	}
	l.unlock()
}

var wcOpcode = [...]uint32{
	pvrdma.OpRDMAWrite:         pvrdma.WCOpRDMAWrite,
	pvrdma.OpRDMAWriteWithImm:  pvrdma.WCOpRDMAWrite,
	pvrdma.OpSend:              pvrdma.WCOpSend,
	pvrdma.OpSendWithImm:       pvrdma.WCOpSend,
	pvrdma.OpRDMARead:          pvrdma.WCOpRDMARead,
	pvrdma.OpAtomicCmpAndSwp:   pvrdma.WCOpCompSwap,
	pvrdma.OpAtomicFetchAndAdd: pvrdma.WCOpFetchAdd,
}

// complete writes the send completion of w; false means the CQ overflowed,
// which puts the QP in error.
func (q *qp) complete(w pvrdma.SendWQE, r result) bool {
	op := w.Opcode()
	var wcop uint32
	if int(op) < len(wcOpcode) {
		wcop = wcOpcode[op]
	}
	// Field by field: a composite literal is built in a temporary and
	// copied with wide loads that cannot take their data from the narrow
	// stores just made (a store-forwarding stall on every completion).
	var e pvrdma.CQE
	e.WRID, e.QP, e.Opcode, e.Status, e.ByteLen = w.WRID(), uint64(q.handle), wcop, uint32(r.status), r.byteLen
	return q.c.h.postCQE(&q.scq.view, &e, false)
}

// local returns the bytes of a local SGE, checked against this QP's PD and
// the access the operation needs.
func (q *qp) local(s verbs.SGE, need verbs.Access) ([]byte, bool) {
	if s.Length == 0 {
		return nil, true
	}
	return q.lmr.get(q.c.h.self, s.LKey, q.pd.id, s.Addr, uint64(s.Length), need)
}

// mrCache remembers the last memory region a QP used on one side, so that
// the common case (the same region again) costs one load: the entry's key
// and serial number still match, and the region is still mapped since
// memory cannot be freed while registered.
type mrCache struct {
	key    uint32
	access verbs.Access
	ks     uint64 // the entry's keySerial when cached
	pd     uint32
	e      *mrEntry
	addr   uint64
	b      []byte
}

func (c *mrCache) get(p *peer, key, pdID uint32, addr, n uint64, need verbs.Access) ([]byte, bool) {
	if b, ok := c.hit(key, addr, n, need); ok && pdID == c.pd {
		return b, true
	}
	return c.fill(p, key, pdID, addr, n, need)
}

// fill looks a key up in p's memory-region table and caches the region.
func (c *mrCache) fill(p *peer, key, pdID uint32, addr, n uint64, need verbs.Access) ([]byte, bool) {
	if key>>20 != p.slot || key == 0 {
		return nil, false
	}
	e := &p.tab.mrs[(key>>8)&(maxMRs-1)]
	ks := atomic.LoadUint64(&e.keySerial)
	if uint32(ks) != key || e.pd != pdID {
		return nil, false
	}
	all := p.bytes(e.seg, e.segOff, int(e.length))
	if all == nil || atomic.LoadUint64(&e.keySerial) != ks {
		return nil, false
	}
	*c = mrCache{key: key, ks: ks, pd: pdID, access: verbs.Access(e.access), e: e, addr: e.addr, b: all}
	return c.hit(key, addr, n, need)
}

// gather checks the local SGEs of w and stores their bytes in q.srcs; it
// returns the total length.
func (q *qp) gather(w pvrdma.SendWQE, need verbs.Access) (uint64, verbs.WCStatus) {
	n := w.NumSGE()
	if n > q.cap.MaxSendSGE || n > len(q.srcs) {
		return 0, verbs.WCLocQPOpErr
	}
	var total uint64
	for i := range n {
		b, ok := q.local(w.SGE(i), need)
		if !ok {
			return 0, verbs.WCLocProtErr
		}
		q.srcs[i] = b
		total += uint64(len(b))
	}
	return total, verbs.WCSuccess
}

// npkts is the number of packets (PSNs) of an n-byte message.
func npkts(n uint64, mtu verbs.MTU) uint32 {
	if n == 0 || mtu < verbs.MTU256 || mtu > verbs.MTU4096 {
		return 1
	}
	shift := 7 + uint(mtu) // MTU bytes = 128 << mtu
	return uint32((n + 1<<shift - 1) >> shift)
}

// exec1 executes one send WQE.
func (q *qp) exec1(w pvrdma.SendWQE) result {
	op := w.Opcode()
	if op > pvrdma.OpAtomicFetchAndAdd || !opAllowed(q.typ, op) {
		return failed(verbs.WCLocQPOpErr)
	}
	inline := w.Flags()&pvrdma.FlagInline != 0
	var length uint64
	var data []byte // inline payload
	switch {
	case inline:
		if q.cap.MaxInlineData == 0 || int(w.TotalLen()) > q.cap.MaxInlineData || op >= pvrdma.OpRDMARead {
			return failed(verbs.WCLocQPOpErr)
		}
		length = uint64(w.TotalLen())
		data = w.Inline(int(length))
	case op == pvrdma.OpRDMARead || op >= pvrdma.OpAtomicCmpAndSwp:
		var st verbs.WCStatus
		if length, st = q.gather(w, verbs.AccessLocalWrite); st != verbs.WCSuccess {
			return failed(st)
		}
	default:
		var st verbs.WCStatus
		if length, st = q.gather(w, 0); st != verbs.WCSuccess {
			return failed(st)
		}
	}
	if length > 1<<31 {
		return failed(verbs.WCLocLenErr)
	}
	if q.typ == verbs.UD {
		return q.execUD(w, op, length, data)
	}
	return q.execConnected(w, op, length, data)
}

func opAllowed(t verbs.QPType, op pvrdma.Opcode) bool {
	switch t {
	case verbs.UD:
		return op == pvrdma.OpSend || op == pvrdma.OpSendWithImm
	case verbs.UC:
		return op <= pvrdma.OpSendWithImm
	}
	return true
}

func (q *qp) execConnected(w pvrdma.SendWQE, op pvrdma.Opcode, length uint64, data []byte) result {
	h := q.c.h
	r := &q.rem
	if !r.live() {
		if !h.resolve(r, q.attr.DestQPN) {
			return resultLost()
		}
		if r.ctx.typ != uint32(q.typ) || !route(q.dev(), q.attr.AH.GRH.SGIDIndex, r.dev, q.attr.AH.GRH.DGID) {
			r.valid = false
			return resultLost()
		}
	}
	switch verbs.QPState(load(&r.ctx.state)) {
	case verbs.StateRTR, verbs.StateRTS, verbs.StateSQD, verbs.StateSQE:
		// SQE (UC only) stops the send queue; the receive queue goes on.
	default:
		return resultLost()
	}
	rc := q.typ == verbs.RC
	pkts := npkts(length, q.attr.PathMTU)
	if rc {
		if mmio.Load32(&r.ctx.rqPSN) != q.sqPSN {
			return resultLost() // sequence error: the responder drops it
		}
	}
	access := verbs.Access(load(&r.ctx.access))
	var res result
	switch op {
	case pvrdma.OpRDMAWrite, pvrdma.OpRDMAWriteWithImm:
		res = q.doWrite(r, w, op, length, data, access)
	case pvrdma.OpSend, pvrdma.OpSendWithImm:
		res = q.deliver(r, w, op, length, data, nil)
	case pvrdma.OpRDMARead:
		res = q.doRead(r, w, length, access)
	default:
		pkts = 1
		res = q.doAtomic(r, w, op, length, access)
	}
	if res.out == done && rc {
		// The connected requester is the only writer of its responder's
		// expected PSN while the connection works.
		q.sqPSN = (q.sqPSN + pkts) & 0xFFFFFF
		mmio.Store32(&r.ctx.rqPSN, q.sqPSN)
	}
	return res
}

// responderError puts the destination QP in the error state, as a
// responder does after a fatal request error, and tells its owner.
func (q *qp) responderError(r *remote, ev verbs.EventType) {
	if failDest(r) {
		q.c.h.raiseEvent(r.p, r.ctx.ctx, ev, objQP, r.idx, r.gen)
	}
}

// failDest puts the destination QP in the error state and has its owner
// flush it; false if it was in the error or reset state already.
func failDest(r *remote) bool {
	for {
		s := load(&r.ctx.state)
		if s == uint32(verbs.StateErr) || s == uint32(verbs.StateReset) {
			return false
		}
		if atomic.CompareAndSwapUint32(&r.ctx.state, s, uint32(verbs.StateErr)) {
			break
		}
	}
	store(&r.ctx.flush, 1)
	atomic.AddUint32(&r.p.tab.hdr.attention, 1)
	return true
}

// recvCQFull handles a destination whose receive CQ had no room for the
// completion of a message it took (rdma_rxe's class G): the responder QP
// fails, with no event of its own (the CQ raised CQ_ERR), and the message
// is lost. An RC requester hears nothing, retries, and fails with
// RETRY_EXC_ERR once its retries are spent.
func (q *qp) recvCQFull(r *remote) result {
	failDest(r)
	if q.typ == verbs.RC {
		return resultLost()
	}
	return ok(0)
}

// reqError is the requester's view of a responder error on RC (the
// responder NAKs and goes to error); UC responders drop silently.
func (q *qp) reqError(r *remote, st verbs.WCStatus, ev verbs.EventType) result {
	if q.typ != verbs.RC {
		return ok(0)
	}
	q.responderError(r, ev)
	return failed(st)
}

func (q *qp) doWrite(r *remote, w pvrdma.SendWQE, op pvrdma.Opcode, length uint64, data []byte, access verbs.Access) result {
	if access&verbs.AccessRemoteWrite == 0 {
		return q.reqError(r, verbs.WCRemInvReqErr, verbs.EventQPReqErr)
	}
	var dst []byte
	if length > 0 {
		var okm bool
		dst, okm = r.mr.get(r.p, w.RKey(), r.ctx.pd, w.RemoteAddr(), length, verbs.AccessRemoteWrite)
		if !okm {
			return q.reqError(r, verbs.WCRemAccessErr, verbs.EventQPAccessErr)
		}
	}
	if op == pvrdma.OpRDMAWriteWithImm {
		// The data lands only if a receive is there to report it.
		return q.deliver(r, w, op, length, data, dst)
	}
	q.copyOut(dst, data, w.NumSGE())
	return ok(uint32(length))
}

// copyOut copies the message (inline payload, or the gathered SGEs) to dst.
func (q *qp) copyOut(dst, data []byte, nsge int) {
	if data != nil {
		copy(dst, data)
		return
	}
	for i := range nsge {
		dst = dst[copy(dst, q.srcs[i]):]
	}
}

func (q *qp) doRead(r *remote, w pvrdma.SendWQE, length uint64, access verbs.Access) result {
	if access&verbs.AccessRemoteRead == 0 || r.ctx.maxDestRd == 0 {
		return q.reqError(r, verbs.WCRemInvReqErr, verbs.EventQPReqErr)
	}
	if length == 0 {
		return ok(0)
	}
	src, okm := r.mr.get(r.p, w.RKey(), r.ctx.pd, w.RemoteAddr(), length, verbs.AccessRemoteRead)
	if !okm {
		return q.reqError(r, verbs.WCRemAccessErr, verbs.EventQPAccessErr)
	}
	for i := range w.NumSGE() {
		src = src[copy(q.srcs[i], src):]
	}
	return ok(uint32(length))
}

func (q *qp) doAtomic(r *remote, w pvrdma.SendWQE, op pvrdma.Opcode, length uint64, access verbs.Access) result {
	if w.NumSGE() != 1 || length != 8 {
		return failed(verbs.WCLocLenErr)
	}
	addr := w.AtomicAddr()
	if access&verbs.AccessRemoteAtomic == 0 || r.ctx.maxDestRd == 0 || addr%8 != 0 {
		return q.reqError(r, verbs.WCRemInvReqErr, verbs.EventQPReqErr)
	}
	dst, okm := r.mr.get(r.p, w.AtomicRKey(), r.ctx.pd, addr, 8, verbs.AccessRemoteAtomic)
	if !okm {
		return q.reqError(r, verbs.WCRemAccessErr, verbs.EventQPAccessErr)
	}
	p := u64At(dst)
	var old uint64
	if op == pvrdma.OpAtomicFetchAndAdd {
		add := w.CompareAdd()
		old = atomic.AddUint64(p, add) - add
	} else {
		cmp, swap := w.CompareAdd(), w.Swap()
		for {
			old = atomic.LoadUint64(p)
			if old != cmp || atomic.CompareAndSwapUint64(p, cmp, swap) {
				break
			}
		}
	}
	binary.LittleEndian.PutUint64(q.srcs[0], old)
	return ok(8)
}

// deliver consumes a receive WQE of the destination and scatters the
// message into it (SEND), or, for an RDMA write with immediate, copies the
// data to written and reports it in the receive completion.
func (q *qp) deliver(r *remote, w pvrdma.SendWQE, op pvrdma.Opcode, length uint64, data, written []byte) result {
	h := q.c.h
	rc := q.typ == verbs.RC
	ud := q.typ == verbs.UD
	rw, nsge, okw, limitHit := q.takeRecv(r)
	if rw == nil {
		if rc {
			return resultRNR(rnrTimer[load(&r.ctx.minRNR)&31])
		}
		return ok(0) // UC and UD drop the message
	}
	if limitHit {
		h.raiseEvent(r.p, r.srq.ctx, verbs.EventSRQLimitReached, objSRQ, r.srq.handle-1, load(&r.srq.gen))
	}
	var e pvrdma.CQE // field by field: see complete
	e.WRID, e.QP, e.Opcode, e.SrcQP, e.Port = rw.WRID(), uint64(r.ctx.handle), pvrdma.WCOpRecv, q.qpn, 1
	if op == pvrdma.OpSendWithImm || op == pvrdma.OpRDMAWriteWithImm {
		e.Imm = w.Imm()
		e.Flags |= pvrdma.WCFlagWithImm
	}
	solicited := w.Flags()&pvrdma.FlagSolicited != 0
	if op == pvrdma.OpRDMAWriteWithImm {
		q.copyOut(written, data, w.NumSGE())
		e.Opcode = pvrdma.WCOpRecvRDMAWithImm
		e.ByteLen = uint32(length)
		if h.postRecvCQE(r, &e, solicited) {
			return q.recvCQFull(r)
		}
		q.prefetchRecv(r)
		return ok(uint32(length))
	}
	fail := func(recv, req verbs.WCStatus) result {
		e.Status = uint32(recv)
		e.Flags = 0
		h.postRecvCQE(r, &e, true)
		q.responderError(r, verbs.EventQPFatal)
		if rc {
			return failed(req)
		}
		return ok(0)
	}
	if !okw {
		return fail(verbs.WCLocQPOpErr, verbs.WCRemOpErr)
	}
	need := length
	if ud {
		need += grhSize
	}
	var room uint64
	for i := range nsge {
		room += uint64(rw.SGE(i).Length)
	}
	if room < need {
		return fail(verbs.WCLocLenErr, verbs.WCRemInvReqErr)
	}
	sc := scatter{p: r.p, pd: r.ctx.pd, rw: rw, nsge: nsge, mr: &r.rmr}
	okc := true
	if ud {
		q.buildGRH(w.AV(), length)
		okc = sc.write(q.grh[:])
	}
	if data != nil {
		okc = okc && sc.write(data)
	} else {
		for i := 0; okc && i < w.NumSGE(); i++ {
			okc = sc.write(q.srcs[i])
		}
	}
	if !okc {
		return fail(verbs.WCLocProtErr, verbs.WCRemOpErr)
	}
	e.ByteLen = uint32(need)
	if ud {
		e.Flags |= pvrdma.WCFlagGRH
		e.NetworkHdrType = q.netType(w.AV().GIDIndex)
	}
	if h.postRecvCQE(r, &e, solicited) {
		return q.recvCQFull(r)
	}
	q.prefetchRecv(r)
	return ok(uint32(length))
}

// takeRecv takes the next receive WQE of the destination (from its RQ or
// SRQ) and copies it to q.rwqe. It returns nil when none is posted; okw is
// false for a malformed WQE; limitHit tells that the SRQ limit fired.
func (q *qp) takeRecv(r *remote) (rw pvrdma.RecvWQE, nsge int, okw, limitHit bool) {
	return takeRecvInto(q.c.h, r, r.srq == nil && q.typ == verbs.RC, q.rwqe[:])
}

// takeRecvInto takes the next receive WQE of r into buf. single tells that
// the caller is the queue's only consumer, which may use r's read-ahead.
func takeRecvInto(h *host, r *remote, single bool, buf []byte) (rw pvrdma.RecvWQE, nsge int, okw, limitHit bool) {
	r.rqLock.lock(h)
	defer r.rqLock.unlock()
	queue := &r.rq
	maxSGE := int(r.ctx.maxRecvSGE)
	if r.srq != nil {
		queue = &r.srqQ
		maxSGE = int(r.srq.maxSGE)
	}
	head := queue.Consumer()
	tail := r.rqSeen
	if !single || head == tail {
		tail = queue.Producer()
		r.rqSeen = tail
	}
	if !queue.Valid(head) || !queue.Valid(tail) || head == tail {
		return nil, 0, false, false
	}
	var wqe []byte
	if single && r.preOK && r.preIdx == head {
		wqe = r.pre[:r.preLen]
	} else {
		wqe = queue.WQE(head)
	}
	r.preOK = false
	nsge = int(binary.LittleEndian.Uint32(wqe[8:]))
	okw = nsge <= maxSGE && pvrdma.RecvHdrSize+nsge*pvrdma.SGESize <= min(len(wqe), len(buf))
	if !okw {
		nsge = 0
	}
	n := copy(buf, wqe[:pvrdma.RecvHdrSize+nsge*pvrdma.SGESize])
	head = queue.Next(head)
	queue.SetConsumer(head)
	if r.srq != nil {
		if lim := load(&r.srq.limit); lim != 0 && uint32(queue.Count(tail, head)) < lim {
			limitHit = atomic.CompareAndSwapUint32(&r.srq.limit, lim, 0)
		}
	}
	return pvrdma.RecvWQE(buf[:n]), nsge, okw, limitHit
}

// prefetchRecv reads the destination's next receive WQE, if it is posted,
// after a delivery: the owner is busy with the completion meanwhile.
func (q *qp) prefetchRecv(r *remote) {
	if r.srq != nil || q.typ != verbs.RC || !r.valid {
		return
	}
	r.rqLock.lock(q.c.h)
	head := r.rq.Consumer()
	if head == r.rqSeen {
		r.rqSeen = r.rq.Producer()
	}
	if r.rq.Valid(head) && r.rq.Valid(r.rqSeen) && head != r.rqSeen {
		w := r.rq.WQE(head)
		n := min(len(w), len(r.pre))
		if k := int(binary.LittleEndian.Uint32(w[8:])); pvrdma.RecvHdrSize+k*pvrdma.SGESize <= n {
			n = pvrdma.RecvHdrSize + k*pvrdma.SGESize
		}
		r.preLen = copy(r.pre[:], w[:n])
		r.preIdx = head
		r.preOK = true
	}
	r.rqLock.unlock()
}

// scatter writes a message into the SGEs of a receive WQE, in order. Like
// rdma_rxe's copy_data, it checks the local key, access and bounds of the
// bytes it writes, not of whole SGEs: a receive longer than the message may
// reach past its memory region.
type scatter struct {
	mr   *mrCache
	p    *peer
	pd   uint32
	rw   pvrdma.RecvWQE
	nsge int
	i    int
	addr uint64 // next address in the current SGE
	room uint64 // bytes left in the current SGE
	lkey uint32
}

func (s *scatter) write(b []byte) bool {
	for len(b) > 0 {
		if s.room == 0 {
			for s.i < s.nsge && s.rw.SGE(s.i).Length == 0 {
				s.i++
			}
			if s.i == s.nsge {
				return false
			}
			sge := s.rw.SGE(s.i)
			s.i++
			s.addr, s.room, s.lkey = sge.Addr, uint64(sge.Length), sge.LKey
		}
		n := min(uint64(len(b)), s.room)
		dst, ok := s.mr.get(s.p, s.lkey, s.pd, s.addr, n, verbs.AccessLocalWrite)
		if !ok {
			return false
		}
		copy(dst, b[:n])
		s.addr += n
		s.room -= n
		b = b[n:]
	}
	return true
}

const grhSize = 40

func (q *qp) execUD(w pvrdma.SendWQE, op pvrdma.Opcode, length uint64, data []byte) result {
	if length > uint64(q.c.port.ActiveMTU.Bytes()) {
		return failed(verbs.WCLocLenErr)
	}
	h := q.c.h
	av := w.AV()
	dqpn := w.RemoteQPN() & 0xFFFFFF
	qkey := w.RemoteQKey()
	if qkey&0x80000000 != 0 {
		qkey = q.attr.QKey
	}
	r := &q.ud
	if q.wq != nil && q.c.dev.cfg.Transport != TransportCopy {
		if q.c.dev.cfg.Transport != TransportAuto || !h.resolve(r, dqpn) || load(&r.dev.netOnly) != 0 || !route(q.dev(), av.GIDIndex, r.dev, av.DGID) {
			r.valid = false
			q.sendUD(w, op, dqpn, qkey, av, length, data)
			return ok(uint32(length))
		}
	}
	if !r.live() || r.qpn != dqpn {
		if !h.resolve(r, dqpn) {
			return ok(0) // datagrams to nowhere are dropped
		}
	}
	if r.ctx.typ != uint32(verbs.UD) || !route(q.dev(), av.GIDIndex, r.dev, av.DGID) {
		return ok(0)
	}
	switch verbs.QPState(load(&r.ctx.state)) {
	case verbs.StateRTR, verbs.StateRTS, verbs.StateSQD, verbs.StateSQE:
	default:
		return ok(0)
	}
	if load(&r.ctx.qkey) != qkey { // after the state, as from the network
		r.dev.qkeyViolation()
		return ok(0)
	}
	return q.deliver(r, w, op, length, data, nil)
}

// netType is the network header type of a UD receive completion.
func (q *qp) netType(sgid uint8) uint8 {
	d := q.dev()
	if d.roce == 1 {
		return pvrdma.NetworkIB
	}
	if verbs.GID(d.gids[sgid%maxGIDs]).IsV4Mapped() {
		return pvrdma.NetworkIPv4
	}
	return pvrdma.NetworkIPv6
}

// buildGRH writes into q.grh the 40 bytes a UD receiver finds before the
// payload: an IPv6-style global route header for RoCE v1 and RoCE v2 over
// IPv6, and for RoCE v2 over IPv4, 20 zero bytes and the IPv4 header.
func (q *qp) buildGRH(av pvrdma.AV, length uint64) {
	g := q.grh[:]
	clear(g)
	d := q.dev()
	sgid := verbs.GID(d.gids[av.GIDIndex%maxGIDs])
	tclass := uint8(av.SLTClassFlowLabel >> 20)
	flow := av.SLTClassFlowLabel & 0xFFFFF
	const bth, deth, icrc, udp = 12, 8, 4, 8
	if d.roce == 2 && sgid.IsV4Mapped() {
		putIPv4(g[20:40], tclass, av.HopLimit, uint16(20+udp+bth+deth+length+icrc), [4]byte(sgid[12:16]), [4]byte(av.DGID[12:16]))
		return
	}
	binary.BigEndian.PutUint32(g[0:], 6<<28|uint32(tclass)<<20|flow)
	payload := bth + deth + length + icrc
	next := byte(0x1B) // RoCE v1: the IB transport follows the GRH
	if d.roce == 2 {
		payload += udp
		next = 17
	}
	binary.BigEndian.PutUint16(g[4:], uint16(payload))
	g[6] = next
	g[7] = av.HopLimit
	copy(g[8:24], sgid[:])
	copy(g[24:40], av.DGID[:])
}

// putIPv4 writes the 20-byte IPv4 header of a UDP datagram (don't
// fragment, identification 0) with its checksum, as a UD receiver finds
// it in the GRH area.
func putIPv4(ip []byte, tclass, ttl uint8, total uint16, src, dst [4]byte) {
	clear(ip[:20])
	ip[0] = 0x45
	ip[1] = tclass
	binary.BigEndian.PutUint16(ip[2:], total)
	binary.BigEndian.PutUint16(ip[6:], 0x4000) // don't fragment
	ip[8] = ttl
	ip[9] = 17 // UDP
	copy(ip[12:16], src[:])
	copy(ip[16:20], dst[:])
	var sum uint32
	for i := 0; i < 20; i += 2 {
		sum += uint32(binary.BigEndian.Uint16(ip[i:]))
	}
	for sum > 0xFFFF {
		sum = sum&0xFFFF + sum>>16
	}
	binary.BigEndian.PutUint16(ip[10:], ^uint16(sum))
}
