//go:build linux

package emu

import (
	"encoding/binary"
	"sync/atomic"

	"github.com/pvperf/pvperf/internal/mmio"
	"github.com/pvperf/pvperf/internal/unix"
	"github.com/pvperf/pvperf/verbs"
	"github.com/pvperf/pvperf/verbs/pvrdma"
)

// The fast path of the device: the work requests benchmarks post by the
// million (RDMA WRITE and SEND of one SGE or inline payload on a connected
// QP whose destination is known and healthy), executed with the fewest
// loads and calls. Each fast function first checks everything, changing
// nothing; when anything is unusual (an error to report, a stall, a cold
// cache) it returns false and the general path in exec.go executes the same
// WQE with the same result.

// hit returns the bytes of [addr, addr+n) when the cache holds the region
// of key, still registered, with the access need.
func (c *mrCache) hit(key uint32, addr, n uint64, need verbs.Access) ([]byte, bool) {
	if key != c.key || c.e == nil { // an empty cache has key 0
		return nil, false
	}
	if c.access&need != need {
		return nil, false
	}
	if atomic.LoadUint64(&c.e.keySerial) != c.ks {
		return nil, false
	}
	off := addr - c.addr
	if off >= uint64(len(c.b)) || n > uint64(len(c.b))-off {
		return nil, false
	}
	return c.b[off : off+n : off+n], true
}

// fastExec executes w on the fast path and returns the message length, or
// false, having changed nothing, to leave w to the general path. It takes
// RDMA WRITE without immediate and SEND with or without immediate, of one
// SGE or inline, on RC and UC.
func (q *qp) fastExec(w []byte) (uint32, bool) {
	if len(w) < pvrdma.SendHdrSize+pvrdma.SGESize || q.typ == verbs.UD || q.retriesUsed {
		return 0, false
	}
	op := pvrdma.Opcode(binary.LittleEndian.Uint32(w[16:]))
	if op != pvrdma.OpRDMAWrite && op != pvrdma.OpSend && op != pvrdma.OpSendWithImm {
		return 0, false
	}
	flags := binary.LittleEndian.Uint32(w[20:])
	// The payload.
	var src []byte
	if flags&pvrdma.FlagInline != 0 {
		n := int(binary.LittleEndian.Uint32(w[12:]))
		if n > q.cap.MaxInlineData || pvrdma.SendHdrSize+n > len(w) {
			return 0, false
		}
		src = w[pvrdma.SendHdrSize : pvrdma.SendHdrSize+n]
	} else {
		if binary.LittleEndian.Uint32(w[8:]) != 1 {
			return 0, false
		}
		s := w[pvrdma.SendHdrSize : pvrdma.SendHdrSize+pvrdma.SGESize]
		n := uint64(binary.LittleEndian.Uint32(s[8:]))
		if n == 0 || n > 1<<31 { // the general path fails a message over 2 GiB
			return 0, false
		}
		var ok bool
		if src, ok = q.lmr.hit(binary.LittleEndian.Uint32(s[12:]), binary.LittleEndian.Uint64(s[0:]), n, 0); !ok {
			return 0, false
		}
	}
	if len(src) == 0 {
		return 0, false
	}
	// The destination: cached, alive, receiving, in sequence.
	r := &q.rem
	if !r.valid || load(&r.ctx.gen) != r.gen || load(r.owner)&unix.FutexOwnerDied != 0 {
		return 0, false
	}
	if st := load(&r.ctx.state); st < uint32(verbs.StateRTR) || st > uint32(verbs.StateSQE) {
		return 0, false
	}
	rc := q.typ == verbs.RC
	if rc && mmio.Load32(&r.ctx.rqPSN) != q.sqPSN {
		return 0, false
	}
	if op == pvrdma.OpRDMAWrite {
		if load(&r.ctx.access)&uint32(verbs.AccessRemoteWrite) == 0 {
			return 0, false
		}
		dst, ok := r.mr.hit(binary.LittleEndian.Uint32(w[40:]), binary.LittleEndian.Uint64(w[32:]), uint64(len(src)), verbs.AccessRemoteWrite)
		if !ok {
			return 0, false
		}
		copy(dst, src)
	} else if !q.fastDeliver(r, w, op, flags, src) {
		return 0, false
	}
	if rc {
		pkts := uint32(1)
		if len(src) > q.attr.PathMTU.Bytes() {
			pkts = npkts(uint64(len(src)), q.attr.PathMTU)
		}
		q.sqPSN = (q.sqPSN + pkts) & 0xFFFFFF
		mmio.Store32(&r.ctx.rqPSN, q.sqPSN)
	}
	return uint32(len(src)), true
}

// fastDeliver delivers a SEND into the next receive WQE of a destination
// without SRQ, when that WQE has one SGE that holds the message, and posts
// the receive completion. It returns false, having changed nothing, in any
// other case; or, when the completion found the CQ full after all, having
// put the destination in error, which the general path then sees.
func (q *qp) fastDeliver(r *remote, w []byte, op pvrdma.Opcode, flags uint32, src []byte) bool {
	if r.srq != nil || r.cq.full() {
		return false
	}
	h := q.c.h
	r.rqLock.lock(h)
	head := r.rq.Consumer()
	if head == r.rqSeen || q.typ != verbs.RC {
		// Only an RC requester is its destination's one consumer and may
		// trust how far it last saw the owner post (see remote); UC
		// QPs may share a destination.
		r.rqSeen = r.rq.Producer()
	}
	if head == r.rqSeen || !r.rq.Valid(head) || !r.rq.Valid(r.rqSeen) {
		r.rqLock.unlock()
		return false
	}
	var wqe []byte
	if r.preOK && r.preIdx == head {
		wqe = r.pre[:r.preLen]
	} else {
		wqe = r.rq.WQE(head)
	}
	if len(wqe) < pvrdma.RecvHdrSize+pvrdma.SGESize || binary.LittleEndian.Uint32(wqe[8:]) != 1 {
		r.rqLock.unlock()
		return false
	}
	wrid := binary.LittleEndian.Uint64(wqe[0:])
	s := wqe[pvrdma.RecvHdrSize : pvrdma.RecvHdrSize+pvrdma.SGESize]
	if uint64(binary.LittleEndian.Uint32(s[8:])) < uint64(len(src)) {
		r.rqLock.unlock()
		return false
	}
	dst, ok := r.rmr.hit(binary.LittleEndian.Uint32(s[12:]), binary.LittleEndian.Uint64(s[0:]), uint64(len(src)), verbs.AccessLocalWrite)
	if !ok {
		r.rqLock.unlock()
		return false
	}
	r.preOK = false
	r.rq.SetConsumer(r.rq.Next(head))
	r.rqLock.unlock()
	copy(dst, src)
	var e pvrdma.CQE // field by field: see complete
	e.WRID, e.QP, e.Opcode, e.SrcQP, e.Port, e.ByteLen = wrid, uint64(r.ctx.handle), pvrdma.WCOpRecv, q.qpn, 1, uint32(len(src))
	if op == pvrdma.OpSendWithImm {
		e.Imm = binary.BigEndian.Uint32(w[24:])
		e.Flags = pvrdma.WCFlagWithImm
	}
	if h.postRecvCQE(r, &e, flags&pvrdma.FlagSolicited != 0) {
		// Another QP's completion filled the CQ since the check above:
		// the responder fails as in recvCQFull. The general path then
		// runs this WQE again, finds the destination in error and
		// treats the request as lost (retries, then RETRY_EXC_ERR), as
		// if the fast path had not begun.
		failDest(r)
		return false
	}
	q.prefetchRecv(r)
	return true
}
