package pvrdma

import (
	"testing"

	"github.com/pvperf/pvperf/verbs"
)

// The post, poll and doorbell paths must not allocate (doc.go). The fake
// UAR plays a device that consumes everything on each doorbell, so the
// rings never fill.

func checkNoAllocs(t *testing.T, name string, f func()) {
	t.Helper()
	f() // warm up
	if a := testing.AllocsPerRun(1000, f); a != 0 {
		t.Errorf("%s: %v allocations per call, want 0", name, a)
	}
}

func TestNoAllocs(t *testing.T) {
	e := newQPEnv(t, qpOpts{cap: verbs.QPCap{MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 1, MaxRecvSGE: 1}, handle: 5, state: verbs.StateRTS})
	e.uar.hook = func(off, val uint32) {
		if off == 0 && val&UARQPSend != 0 {
			e.consumeSQ()
		}
		if off == 0 && val&UARQPRecv != 0 {
			e.consumeRQ()
		}
	}
	ud := newQPEnv(t, qpOpts{typ: verbs.UD, cap: verbs.QPCap{MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 1, MaxRecvSGE: 1}, handle: 6, state: verbs.StateRTS})
	ud.uar.hook = func(off, val uint32) { ud.consumeSQ() }
	s := newSRQEnv(t, 7, 16, 1)
	s.uar.hook = func(off, val uint32) { s.setHead(s.tail()) }
	c := newCQEnv(t, 8, 16)
	c.qps.Set(1, 1)

	bad := false
	write := []verbs.SendWR{{ID: 1, Opcode: verbs.OpRDMAWrite, Flags: verbs.SendSignaled,
		SGL: []verbs.SGE{tSGE0}, RemoteAddr: tRAddr, RKey: tRKey}}
	checkNoAllocs(t, "QP.PostSend(RDMA_WRITE, 1 SGE)", func() {
		if n, err := e.qp.PostSend(write); n != 1 || err != nil {
			bad = true
		}
	})
	udSend := []verbs.SendWR{{ID: 2, Opcode: verbs.OpSendImm, SGL: []verbs.SGE{tSGE0},
		AH: testAH{NewAH(avAttr, avPDN, avDMAC)}, RemoteQPN: tQPN, RemoteQKey: tQKey, Imm: tImm}}
	checkNoAllocs(t, "QP.PostSend(UD SEND_WITH_IMM)", func() {
		if n, err := ud.qp.PostSend(udSend); n != 1 || err != nil {
			bad = true
		}
	})
	recv := []verbs.RecvWR{{ID: 3, SGL: []verbs.SGE{tSGE0}}}
	checkNoAllocs(t, "QP.PostRecv", func() {
		if n, err := e.qp.PostRecv(recv); n != 1 || err != nil {
			bad = true
		}
	})
	checkNoAllocs(t, "SRQ.PostRecv", func() {
		if n, err := s.srq.PostRecv(recv); n != 1 || err != nil {
			bad = true
		}
	})
	// Error paths use preallocated errors.
	tooMany := []verbs.SendWR{{Opcode: verbs.OpSend, SGL: []verbs.SGE{tSGE0, tSGE1}}}
	checkNoAllocs(t, "QP.PostSend error", func() {
		if _, err := e.qp.PostSend(tooMany); err == nil {
			bad = true
		}
	})

	var wc [4]verbs.WC
	checkNoAllocs(t, "CQ.Poll (empty, POLL doorbell)", func() {
		if n, err := c.cq.Poll(wc[:]); n != 0 || err != nil {
			bad = true
		}
	})
	checkNoAllocs(t, "CQ.Poll (one completion, wc full)", func() {
		c.produce(CQE{WRID: 1, QP: 1, Opcode: WCOpRecv, Imm: 5})
		if n, err := c.cq.Poll(wc[:1]); n != 1 || err != nil {
			bad = true
		}
	})
	checkNoAllocs(t, "CQ.Poll (two completions, then POLL doorbell)", func() {
		c.produce(CQE{WRID: 1, QP: 1})
		c.produce(CQE{WRID: 2, QP: 1})
		if n, err := c.cq.Poll(wc[:]); n != 2 || err != nil {
			bad = true
		}
	})
	checkNoAllocs(t, "CQ.ReqNotify", func() {
		c.cq.ReqNotify(false)
		c.cq.ReqNotify(true)
	})
	var u UAR = e.uar
	checkNoAllocs(t, "UAR.Write32", func() { u.Write32(UARCQOffset, 8|UARCQArm) })
	if bad {
		t.Errorf("a post or poll in the allocation tests did not do what it should")
	}
}
