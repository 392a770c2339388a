package verbstest

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/pvperf/pvperf/verbs"
)

func testErrors(t *testing.T, tg Target) {
	run(t, "REM_ACCESS_ERR", func(t *testing.T) { testRemAccess(t, tg) })
	run(t, "REM_INV_REQ_ERR", func(t *testing.T) { testRemInvReq(t, tg) })
	run(t, "LOC_PROT_ERR", func(t *testing.T) { testLocProt(t, tg) })
	run(t, "RNR_RETRY_EXC_ERR", func(t *testing.T) { testRNR(t, tg) })
	run(t, "RETRY_EXC_ERR", func(t *testing.T) { testRetryExc(t, tg) })
	run(t, "WR_FLUSH_ERR", func(t *testing.T) { testFlushAfterError(t, tg) })
	run(t, "LOC_LEN_ERR", func(t *testing.T) { testLocLen(t, tg) })
	run(t, "QueueFull", func(t *testing.T) { testQueueFull(t, tg) })
	run(t, "CQOverflow", func(t *testing.T) { testCQOverflow(t, tg) })
}

// errState checks that a requester whose request failed is in ERR. rxe
// posts the failed completion before it moves the QP to ERR (rxe_comp.c:
// do_complete, then rxe_qp_error), so a query right after the poll may
// still find it in RTS: the state is waited for, briefly.
func errState(t *testing.T, what string, qp verbs.QP, want verbs.QPState) {
	t.Helper()
	deadline := time.Now().Add(time.Second)
	for qpState(t, qp) != want && time.Now().Before(deadline) {
		time.Sleep(100 * time.Microsecond)
	}
	wantState(t, what, qp, want)
}

// remoteError posts wr on A and checks that it fails with status st, that
// both QPs end in ERR, and that B's context gets event ev for B's QP.
func remoteError(t *testing.T, f *fixture, p *Pair, wr verbs.SendWR, st verbs.WCStatus, ev verbs.EventType) {
	t.Helper()
	a, b := p.A, p.B
	postSend(t, a.QP, wr)
	checkWC(t, "requester", poll1(t, a.SendCQ), wcWant{ID: wr.ID, Status: st, QPNum: a.QP.Num()})
	errState(t, "requester after "+st.Name(), a.QP, verbs.StateErr)
	waitState(t, "responder after "+st.Name(), b.QP, verbs.StateErr)
	if q := f.tg.Quirks.NoQPErrorEvents; q != "" {
		t.Logf("not waiting for a %v event (device quirk: %s)", ev, q)
		return
	}
	if !waitEvent(t, f.ctx, ev, func(e verbs.AsyncEvent) bool { return e.QP == b.QP }) {
		t.Errorf("responder: no %v event after %s", ev, st.Name())
	}
}

func testRemAccess(t *testing.T, tg Target) {
	write := func(p *Pair, mr verbs.MR, off uint64, n int) verbs.SendWR {
		w := p.sendWR(1, verbs.OpRDMAWrite, verbs.SendSignaled, sge(p.A.MR, 0, n))
		w.RemoteAddr, w.RKey = mr.Addr()+off, mr.RKey()
		return w
	}
	run(t, "BadRKey", func(t *testing.T) {
		f := newFixture(t, tg)
		p := f.pair(pairOpts{typ: verbs.RC})
		w := write(p, p.B.MR, 0, 64)
		w.RKey ^= 0x80
		remoteError(t, f, p, w, verbs.WCRemAccessErr, verbs.EventQPAccessErr)
	})
	run(t, "OutOfBounds", func(t *testing.T) {
		f := newFixture(t, tg)
		p := f.pair(pairOpts{typ: verbs.RC})
		size := uint64(len(p.B.MR.Bytes()))
		setGuard(p.B.Mem.Bytes()[size-32:])
		remoteError(t, f, p, write(p, p.B.MR, size-32, 64), verbs.WCRemAccessErr, verbs.EventQPAccessErr)
		checkGuard(t, "memory of a refused write", p.B.Mem.Bytes()[size-32:])
	})
	run(t, "MRWithoutRemoteWrite", func(t *testing.T) {
		f := newFixture(t, tg)
		p := f.pair(pairOpts{typ: verbs.RC})
		ro := regMR(t, p.B.PD, p.B.Mem.Bytes()[:4096], verbs.AccessLocalWrite|verbs.AccessRemoteRead)
		remoteError(t, f, p, write(p, ro, 0, 64), verbs.WCRemAccessErr, verbs.EventQPAccessErr)
	})
	run(t, "MRWithoutRemoteRead", func(t *testing.T) {
		f := newFixture(t, tg)
		p := f.pair(pairOpts{typ: verbs.RC})
		wo := regMR(t, p.B.PD, p.B.Mem.Bytes()[:4096], verbs.AccessLocalWrite|verbs.AccessRemoteWrite)
		w := p.sendWR(1, verbs.OpRDMARead, verbs.SendSignaled, sge(p.A.MR, 0, 64))
		w.RemoteAddr, w.RKey = wo.Addr(), wo.RKey()
		remoteError(t, f, p, w, verbs.WCRemAccessErr, verbs.EventQPAccessErr)
	})
}

func testRemInvReq(t *testing.T, tg Target) {
	run(t, "QPWithoutRemoteWrite", func(t *testing.T) {
		f := newFixture(t, tg)
		pb := f.params()
		pb.Access = verbs.AccessLocalWrite | verbs.AccessRemoteRead
		p := f.pair(pairOpts{typ: verbs.RC, pb: pb})
		w := p.sendWR(1, verbs.OpRDMAWrite, verbs.SendSignaled, sge(p.A.MR, 0, 64))
		w.RemoteAddr, w.RKey = p.B.MR.Addr(), p.B.MR.RKey() // the MR allows it, the QP does not
		remoteError(t, f, p, w, verbs.WCRemInvReqErr, verbs.EventQPReqErr)
	})
	run(t, "QPWithoutRemoteRead", func(t *testing.T) {
		f := newFixture(t, tg)
		pb := f.params()
		pb.Access = verbs.AccessLocalWrite | verbs.AccessRemoteWrite
		p := f.pair(pairOpts{typ: verbs.RC, pb: pb})
		w := p.sendWR(1, verbs.OpRDMARead, verbs.SendSignaled, sge(p.A.MR, 0, 64))
		w.RemoteAddr, w.RKey = p.B.MR.Addr(), p.B.MR.RKey()
		remoteError(t, f, p, w, verbs.WCRemInvReqErr, verbs.EventQPReqErr)
	})
}

// localError posts wr on A and checks that it fails with status st, that A
// ends in ERR, and that B receives nothing. B's state is not checked: the
// error is the requester's alone (on real devices B stays in RTS).
func localError(t *testing.T, p *Pair, wr verbs.SendWR, st verbs.WCStatus) {
	t.Helper()
	a, b := p.A, p.B
	postRecv(t, b.QP, verbs.RecvWR{ID: 50, SGL: []verbs.SGE{sge(b.MR, 0, 4096)}})
	postSend(t, a.QP, wr)
	checkWC(t, "requester", poll1(t, a.SendCQ), wcWant{ID: wr.ID, Status: st, QPNum: a.QP.Num()})
	errState(t, "requester after "+st.Name(), a.QP, verbs.StateErr)
	expectNoWC(t, "responder of a request that failed locally", b.RecvCQ, waitShort)
}

func testLocProt(t *testing.T, tg Target) {
	run(t, "BadLKey", func(t *testing.T) {
		f := newFixture(t, tg)
		p := f.pair(pairOpts{typ: verbs.RC})
		s := sge(p.A.MR, 0, 64)
		s.LKey ^= 0x80
		localError(t, p, p.sendWR(1, verbs.OpSend, verbs.SendSignaled, s), f.tg.status(t, BadLKey, verbs.WCLocProtErr))
	})
	run(t, "OutOfBounds", func(t *testing.T) {
		f := newFixture(t, tg)
		p := f.pair(pairOpts{typ: verbs.RC})
		localError(t, p, p.sendWR(1, verbs.OpSend, verbs.SendSignaled, sge(p.A.MR, len(p.A.MR.Bytes())-32, 64)), verbs.WCLocProtErr)
	})
	run(t, "MROfAnotherPD", func(t *testing.T) {
		f := newFixture(t, tg)
		p := f.pair(pairOpts{typ: verbs.RC}) // A and B have a PD each
		localError(t, p, p.sendWR(1, verbs.OpSend, verbs.SendSignaled, sge(p.B.MR, 0, 64)), f.tg.status(t, BadLKey, verbs.WCLocProtErr))
	})
	run(t, "ReadIntoMRWithoutLocalWrite", func(t *testing.T) {
		f := newFixture(t, tg)
		p := f.pair(pairOpts{typ: verbs.RC})
		ro := regMR(t, p.A.PD, p.A.Mem.Bytes()[:4096], verbs.AccessRemoteRead)
		w := p.sendWR(1, verbs.OpRDMARead, verbs.SendSignaled, sge(ro, 0, 64))
		w.RemoteAddr, w.RKey = p.B.MR.Addr(), p.B.MR.RKey()
		localError(t, p, w, verbs.WCLocProtErr)
	})
	run(t, "MRClosedBeforeRetransmission", func(t *testing.T) {
		// A SEND stalled on RNR (no receive posted) is sent again once
		// a receive is: its MR closed in between, the requester,
		// which reads the buffer again (rxe looks the lkey up for
		// every packet it builds), fails it with a local protection
		// error, not after its retries as if the packet were lost.
		f := newFixture(t, tg)
		p := stallPair(f, pairOpts{})
		a, b := p.A, p.B
		mr := regMR(t, a.PD, a.Mem.Bytes()[:4096], verbs.AccessLocalWrite)
		postSend(t, a.QP, p.sendWR(1, verbs.OpSend, verbs.SendSignaled, sge(mr, 0, 64)))
		expectNoWC(t, "send waiting for a receive (rnr_retry 7)", a.SendCQ, waitShort)
		if err := mr.Close(); err != nil {
			t.Fatalf("close the mr of a send in flight: %v", err)
		}
		// A retransmission built just before the close may still be on
		// its way: it meets no receive either (another RNR NAK) if it
		// arrives before the receive is posted.
		time.Sleep(100 * time.Millisecond)
		postRecv(t, b.QP, verbs.RecvWR{ID: 2, SGL: []verbs.SGE{sge(b.MR, 0, 4096)}})
		checkWC(t, "send whose mr was closed", poll1(t, a.SendCQ), wcWant{ID: 1, Status: f.tg.status(t, BadLKey, verbs.WCLocProtErr), QPNum: a.QP.Num()})
		errState(t, "requester after the send whose mr was closed", a.QP, verbs.StateErr)
	})
}

func testRNR(t *testing.T, tg Target) {
	for _, c := range []struct {
		retry uint8
		op    verbs.WROpcode
	}{{0, verbs.OpSend}, {2, verbs.OpSend}, {0, verbs.OpRDMAWriteImm}, {3, verbs.OpRDMAWriteImm}} {
		run(t, fmt.Sprintf("rnr_retry=%d/%v", c.retry, c.op), func(t *testing.T) {
			f := newFixture(t, tg)
			pa, pb := f.params(), f.params()
			pa.RNRRetry, pb.MinRNRTimer = c.retry, 1 // 0.01 ms
			p := f.pair(pairOpts{typ: verbs.RC, pa: pa, pb: pb})
			w := p.sendWR(1, c.op, verbs.SendSignaled, sge(p.A.MR, 0, 64))
			w.RemoteAddr, w.RKey = p.B.MR.Addr(), p.B.MR.RKey()
			postSend(t, p.A.QP, w)
			checkWC(t, "send without a receive posted", poll1(t, p.A.SendCQ), wcWant{ID: 1, Status: verbs.WCRNRRetryExcErr, QPNum: p.A.QP.Num()})
			errState(t, "requester after RNR_RETRY_EXC_ERR", p.A.QP, verbs.StateErr)
		})
	}
	run(t, "rnr_retry=7_waits", func(t *testing.T) {
		f := newFixture(t, tg)
		p := stallPair(f, pairOpts{})
		a, b := p.A, p.B
		fill(a.Mem.Bytes()[:64], 3)
		postSend(t, a.QP, p.sendWR(1, verbs.OpSend, verbs.SendSignaled, sge(a.MR, 0, 64)))
		expectNoWC(t, "send waiting for a receive (rnr_retry 7)", a.SendCQ, 3*waitShort)
		postRecv(t, b.QP, verbs.RecvWR{ID: 2, SGL: []verbs.SGE{sge(b.MR, 0, 4096)}})
		checkWC(t, "send once the receive is posted", poll1(t, a.SendCQ), wcWant{ID: 1, QPNum: a.QP.Num(), Opcode: verbs.WCSend, Len: -1})
		checkWC(t, "its receive", poll1(t, b.RecvCQ), wcWant{ID: 2, QPNum: b.QP.Num(), Opcode: verbs.WCRecv, Len: 64})
		sameBytes(t, "message", b.Mem.Bytes()[:64], a.Mem.Bytes()[:64])
	})
}

// ackTimeout is the local ACK timeout of an RC QP: 4.096 us * 2^timeout.
func ackTimeout(timeout uint8) time.Duration {
	return time.Duration(4096<<timeout) * time.Nanosecond
}

func testRetryExc(t *testing.T, tg Target) {
	const timeout, retries = 12, 2 // 16.8 ms, 3 transmissions
	fail := func(t *testing.T, p *Pair) {
		t.Helper()
		a := p.A
		start := time.Now()
		postSend(t, a.QP, p.sendWR(1, verbs.OpSend, verbs.SendSignaled, sge(a.MR, 0, 64)))
		wc := poll1(t, a.SendCQ)
		elapsed := time.Since(start)
		checkWC(t, "send to a qp that is not there", wc, wcWant{ID: 1, Status: verbs.WCRetryExcErr, QPNum: a.QP.Num()})
		errState(t, "requester after RETRY_EXC_ERR", a.QP, verbs.StateErr)
		// Each of the retries+1 transmissions waits for its ACK timeout.
		// Timers do not fire early; the lower bound allows for a device
		// whose timer is coarse (20% short) and the upper bound for a
		// loaded machine.
		want := (retries + 1) * ackTimeout(timeout)
		if elapsed < want*8/10 {
			t.Errorf("RETRY_EXC_ERR after %v; want about (retry_cnt %d + 1) * 4.096us * 2^%d = %v (at least %v)",
				elapsed.Round(100*time.Microsecond), retries, timeout, want, want*8/10)
		}
		if elapsed > waitLong/2 {
			t.Errorf("RETRY_EXC_ERR after %v; want about %v", elapsed, want)
		}
		t.Logf("RETRY_EXC_ERR after %v (nominal %v)", elapsed.Round(100*time.Microsecond), want)
	}
	params := func(f *fixture) ConnParams {
		p := f.params()
		p.Timeout, p.RetryCnt = timeout, retries
		return p
	}
	run(t, "DestroyedQP", func(t *testing.T) {
		f := newFixture(t, tg)
		p := f.pair(pairOpts{typ: verbs.RC, pa: params(f)})
		postRecv(t, p.B.QP, verbs.RecvWR{ID: 9, SGL: []verbs.SGE{sge(p.B.MR, 0, 4096)}})
		mustOK(t, "destroy the responder", p.B.QP.Close())
		fail(t, p)
	})
	run(t, "NoSuchQP", func(t *testing.T) {
		f := newFixture(t, tg)
		p := f.pair(pairOpts{typ: verbs.RC, noConnect: true})
		mustOK(t, "connect", Connect(p.A.QP, p.A.PSN, Endpoint{QPN: 0xFFFFFE, PSN: 1, GID: f.gids[0].GID}, params(f)))
		fail(t, p)
	})
}

// testFlushAfterError: after an RC error, the requests behind the failed
// one and the posted receives of both QPs complete with WR_FLUSH_ERR.
func testFlushAfterError(t *testing.T, tg Target) {
	f := newFixture(t, tg)
	p := f.pair(pairOpts{typ: verbs.RC})
	a, b := p.A, p.B
	postRecv(t, a.QP, verbs.RecvWR{ID: 10, SGL: []verbs.SGE{sge(a.MR, 0, 64)}}, verbs.RecvWR{ID: 11, SGL: []verbs.SGE{sge(a.MR, 0, 64)}})
	postRecv(t, b.QP, verbs.RecvWR{ID: 20, SGL: []verbs.SGE{sge(b.MR, 0, 64)}}, verbs.RecvWR{ID: 21, SGL: []verbs.SGE{sge(b.MR, 64, 64)}})
	bad := p.sendWR(1, verbs.OpRDMAWrite, verbs.SendSignaled, sge(a.MR, 0, 8))
	bad.RemoteAddr, bad.RKey = b.MR.Addr(), b.MR.RKey()^0x80
	good := bad
	good.ID, good.RKey = 2, b.MR.RKey()
	postSend(t, a.QP, bad, good, p.sendWR(3, verbs.OpSend, 0, sge(a.MR, 0, 8)))
	ws := pollN(t, a.SendCQ, 3)
	checkWC(t, "failed request", ws[0], wcWant{ID: 1, Status: verbs.WCRemAccessErr, QPNum: a.QP.Num()})
	checkWC(t, "request behind it", ws[1], wcWant{ID: 2, Status: verbs.WCWRFlushErr, QPNum: a.QP.Num()})
	checkWC(t, "unsignaled request behind it", ws[2], wcWant{ID: 3, Status: verbs.WCWRFlushErr, QPNum: a.QP.Num()})
	for i, wc := range pollN(t, a.RecvCQ, 2) {
		checkWC(t, "requester's receive", wc, wcWant{ID: uint64(10 + i), Status: verbs.WCWRFlushErr, QPNum: a.QP.Num()})
	}
	for i, wc := range pollN(t, b.RecvCQ, 2) {
		checkWC(t, "responder's receive", wc, wcWant{ID: uint64(20 + i), Status: verbs.WCWRFlushErr, QPNum: b.QP.Num()})
	}
	waitState(t, "responder", b.QP, verbs.StateErr)
	// The responder's own sends are flushed too.
	postSend(t, b.QP, verbs.SendWR{ID: 30, Opcode: verbs.OpSend, Flags: verbs.SendSignaled, SGL: []verbs.SGE{sge(b.MR, 0, 8)}})
	checkWC(t, "send of the responder in ERR", poll1(t, b.SendCQ), wcWant{ID: 30, Status: verbs.WCWRFlushErr, QPNum: b.QP.Num()})
}

func testLocLen(t *testing.T, tg Target) {
	run(t, "RC", func(t *testing.T) {
		f := newFixture(t, tg)
		p := f.pair(pairOpts{typ: verbs.RC})
		a, b := p.A, p.B
		postRecv(t, b.QP, verbs.RecvWR{ID: 1, SGL: []verbs.SGE{sge(b.MR, 0, 10)}}, verbs.RecvWR{ID: 2, SGL: []verbs.SGE{sge(b.MR, 4096, 4096)}})
		postSend(t, a.QP, p.sendWR(3, verbs.OpSend, verbs.SendSignaled, sge(a.MR, 0, 100)))
		checkWC(t, "requester of a message too large for the receive", poll1(t, a.SendCQ), wcWant{ID: 3, Status: f.tg.status(t, MessageTooLarge, verbs.WCRemInvReqErr), QPNum: a.QP.Num()})
		ws := pollN(t, b.RecvCQ, 2)
		checkWC(t, "receive too small", ws[0], wcWant{ID: 1, Status: f.tg.status(t, RecvTooSmall, verbs.WCLocLenErr), QPNum: b.QP.Num()})
		checkWC(t, "the receive after it", ws[1], wcWant{ID: 2, Status: verbs.WCWRFlushErr, QPNum: b.QP.Num()})
		errState(t, "requester after REM_INV_REQ_ERR", a.QP, verbs.StateErr)
		waitState(t, "receiver after LOC_LEN_ERR", b.QP, verbs.StateErr)
		if q := f.tg.Quirks.NoQPErrorEvents; q != "" {
			t.Logf("not waiting for a QP_FATAL event (device quirk: %s)", q)
		} else {
			waitEvent(t, f.ctx, verbs.EventQPFatal, func(e verbs.AsyncEvent) bool { return e.QP == b.QP })
		}
	})
	run(t, "AtomicBufferNot8Bytes", func(t *testing.T) {
		f := newFixture(t, tg)
		if f.attr.AtomicCap == verbs.AtomicNone {
			t.Logf("no atomics (ATOMIC_NONE): checked in Opcodes")
			p := f.pair(pairOpts{typ: verbs.RC})
			n, err := p.A.QP.PostSend([]verbs.SendWR{{ID: 1, Opcode: verbs.OpAtomicFetchAdd, SGL: []verbs.SGE{sge(p.A.MR, 0, 8)}, RemoteAddr: p.B.MR.Addr(), RKey: p.B.MR.RKey()}})
			if wantErr(t, "fetch and add on a device with ATOMIC_NONE", err, verbs.ErrNotSupported) && n != 0 {
				t.Errorf("%d queued", n)
			}
			return
		}
		p := f.pair(pairOpts{typ: verbs.RC})
		w := p.sendWR(1, verbs.OpAtomicFetchAdd, verbs.SendSignaled, sge(p.A.MR, 0, 4))
		w.RemoteAddr, w.RKey, w.CompareAdd = p.B.MR.Addr(), p.B.MR.RKey(), 1
		// Either the post refuses it (as rdma-core's rxe provider does) or
		// the request completes with LOC_LEN_ERR.
		if n, err := p.A.QP.PostSend([]verbs.SendWR{w}); err != nil {
			if wantErr(t, "atomic on a 4-byte buffer", err, errEINVAL) && n != 0 {
				t.Errorf("refused atomic: %d queued", n)
			}
			return
		}
		postRecv(t, p.B.QP, verbs.RecvWR{ID: 50, SGL: []verbs.SGE{sge(p.B.MR, 0, 4096)}})
		checkWC(t, "requester", poll1(t, p.A.SendCQ), wcWant{ID: w.ID, Status: verbs.WCLocLenErr, QPNum: p.A.QP.Num()})
		errState(t, "requester after LOC_LEN_ERR", p.A.QP, verbs.StateErr)
		expectNoWC(t, "responder of a request that failed locally", p.B.RecvCQ, waitShort)
	})
}

func testQueueFull(t *testing.T, tg Target) {
	full := func(t *testing.T, what string, n int, err error, asked, capacity int) {
		t.Helper()
		var oe *verbs.OpError
		if !errors.Is(err, verbs.ErrQueueFull) || !errors.Is(err, errENOMEM) || !errors.As(err, &oe) || oe.Op != what {
			t.Errorf("%s: error %v, want ErrQueueFull matching ENOMEM, of the verb %q", what, err, what)
		}
		if n < asked || n > capacity {
			t.Errorf("%s: %d queued before the queue was full; want between the %d asked for and the capacity %d", what, n, asked, capacity)
		}
	}
	run(t, "Send", func(t *testing.T) {
		f := newFixture(t, tg)
		const asked = 8
		p := stallPair(f, pairOpts{cap: verbs.QPCap{MaxSendWR: asked, MaxRecvWR: 64, MaxSendSGE: 1, MaxRecvSGE: 1}})
		a, b := p.A, p.B
		qa, err := a.QP.Query()
		mustOK(t, "query", err)
		capacity := qa.Cap.MaxSendWR
		abuf := a.Mem.Bytes()
		wrs := make([]verbs.SendWR, capacity+3)
		for i := range wrs {
			fill(abuf[i*64:i*64+64], byte(i))
			wrs[i] = p.sendWR(uint64(1+i), verbs.OpSend, verbs.SendSignaled, sge(a.MR, i*64, 64))
		}
		// The first send waits for a receive: the queue fills up.
		n, err := a.QP.PostSend(wrs)
		full(t, "post send", n, err, asked, capacity)
		if n > len(wrs) || n <= 0 {
			t.FailNow()
		}
		for i := range wrs {
			postRecv(t, b.QP, verbs.RecvWR{ID: uint64(100 + i), SGL: []verbs.SGE{sge(b.MR, i*256, 256)}})
		}
		for i, wc := range pollN(t, a.SendCQ, n) {
			checkWC(t, "queued send", wc, wcWant{ID: uint64(1 + i), QPNum: a.QP.Num(), Opcode: verbs.WCSend, Len: -1})
		}
		postSend(t, a.QP, wrs[n:]...)
		for i, wc := range pollN(t, a.SendCQ, len(wrs)-n) {
			checkWC(t, "send posted after the queue drained", wc, wcWant{ID: uint64(1 + n + i), QPNum: a.QP.Num(), Opcode: verbs.WCSend, Len: -1})
		}
		for i, wc := range pollN(t, b.RecvCQ, len(wrs)) {
			if checkWC(t, "receive", wc, wcWant{ID: uint64(100 + i), QPNum: b.QP.Num(), Opcode: verbs.WCRecv, Len: 64}) {
				sameBytes(t, fmt.Sprintf("message %d", i), b.Mem.Bytes()[i*256:i*256+64], pattern(64, byte(i)))
			}
		}
	})
	run(t, "Recv", func(t *testing.T) {
		f := newFixture(t, tg)
		const asked = 16
		p := f.pair(pairOpts{typ: verbs.RC, cap: verbs.QPCap{MaxSendWR: 64, MaxRecvWR: asked, MaxSendSGE: 1, MaxRecvSGE: 1}})
		a, b := p.A, p.B
		qb, err := b.QP.Query()
		mustOK(t, "query", err)
		capacity := qb.Cap.MaxRecvWR
		wrs := make([]verbs.RecvWR, capacity+3)
		for i := range wrs {
			wrs[i] = verbs.RecvWR{ID: uint64(100 + i), SGL: []verbs.SGE{sge(b.MR, i*256, 256)}}
		}
		n, err := b.QP.PostRecv(wrs)
		full(t, "post recv", n, err, asked, capacity)
		if n > len(wrs) || n <= 0 {
			t.FailNow()
		}
		abuf := a.Mem.Bytes()
		for i := range n {
			fill(abuf[i*64:i*64+64], byte(i))
			postSend(t, a.QP, p.sendWR(uint64(1+i), verbs.OpSend, verbs.SendSignaled, sge(a.MR, i*64, 64)))
			checkWC(t, "send", poll1(t, a.SendCQ), wcWant{ID: uint64(1 + i), QPNum: a.QP.Num(), Opcode: verbs.WCSend, Len: -1})
		}
		for i, wc := range pollN(t, b.RecvCQ, n) {
			if checkWC(t, "queued receive", wc, wcWant{ID: uint64(100 + i), QPNum: b.QP.Num(), Opcode: verbs.WCRecv, Len: 64}) {
				sameBytes(t, fmt.Sprintf("message %d", i), b.Mem.Bytes()[i*256:i*256+64], pattern(64, byte(i)))
			}
		}
		postRecv(t, b.QP, wrs[n:]...)
	})
}

func testCQOverflow(t *testing.T, tg Target) {
	f := newFixture(t, tg)
	p := f.pair(pairOpts{typ: verbs.RC, sendCQA: 4})
	a, b := p.A, p.B
	k := a.SendCQ.Entries()
	qa, err := a.QP.Query()
	mustOK(t, "query", err)
	if k+1 > qa.Cap.MaxSendWR {
		t.Fatalf("a CQ of 4 entries holds %d: more than the %d sends this test can post", k, qa.Cap.MaxSendWR)
	}
	wrs := make([]verbs.SendWR, k+1)
	for i := range wrs {
		wrs[i] = p.sendWR(uint64(1+i), verbs.OpRDMAWrite, verbs.SendSignaled, sge(a.MR, 0, 8))
		wrs[i].RemoteAddr, wrs[i].RKey = b.MR.Addr(), b.MR.RKey()
	}
	postSend(t, a.QP, wrs...)
	waitEvent(t, f.ctx, verbs.EventCQErr, func(e verbs.AsyncEvent) bool { return e.CQ == a.SendCQ })
	// What the CQ holds is intact: at most k completions, in order.
	wc := make([]verbs.WC, k+2)
	n, err := a.SendCQ.Poll(wc)
	if err != nil {
		t.Logf("poll of an overflowed CQ: %v", err)
	}
	if n > k {
		t.Errorf("a CQ of %d entries returned %d completions", k, n)
	}
	for i := range n {
		if wc[i].ID != uint64(1+i) {
			t.Errorf("completion %d of an overflowed CQ: %s, want wr_id %d", i, fmtWC(wc[i]), 1+i)
		}
	}
}
