package verbstest

import (
	"errors"
	"fmt"
	"testing"

	"github.com/pvperf/pvperf/verbs"
)

// needSRQ reports whether the device has SRQs; if not, it checks that
// creating one fails with ErrNotSupported.
func needSRQ(t *testing.T, f *fixture) bool {
	t.Helper()
	if f.attr.MaxSRQ > 0 {
		return true
	}
	srq, err := f.pd.CreateSRQ(verbs.SRQInit{MaxWR: 4, MaxSGE: 1})
	if srq != nil {
		srq.Close()
	}
	wantErr(t, "create srq (device MaxSRQ 0)", err, verbs.ErrNotSupported)
	return false
}

func createSRQ(t *testing.T, f *fixture, init verbs.SRQInit) verbs.SRQ {
	t.Helper()
	srq, err := f.pd.CreateSRQ(init)
	if err != nil {
		t.Fatalf("create srq %+v: %v", init, err)
	}
	closeLater(t, "srq", srq)
	return srq
}

// srqSetup is n RC requesters, each connected to its own responder; the
// responders receive from one SRQ into one CQ.
type srqSetup struct {
	srq        verbs.SRQ
	mr         verbs.MR
	buf        []byte
	scq, rcq   verbs.CQ
	reqs, resp []verbs.QP
}

func newSRQSetup(t *testing.T, f *fixture, n int, init verbs.SRQInit) *srqSetup {
	t.Helper()
	s := &srqSetup{srq: createSRQ(t, f, init)}
	mem := f.alloc(64 << 10)
	s.buf = mem.Bytes()
	s.mr = regMR(t, f.pd, s.buf, verbs.AccessLocalWrite|verbs.AccessRemoteWrite|verbs.AccessRemoteRead)
	s.scq, s.rcq = f.cq(64, nil), f.cq(64, nil)
	p := f.params()
	for range n {
		s.reqs = append(s.reqs, newQP(t, f.pd, verbs.QPInit{Type: verbs.RC, SendCQ: s.scq, RecvCQ: s.scq, Cap: verbs.QPCap{MaxSendWR: 8, MaxRecvWR: 1, MaxSendSGE: 1, MaxRecvSGE: 1}}))
		s.resp = append(s.resp, newQP(t, f.pd, verbs.QPInit{Type: verbs.RC, SendCQ: s.scq, RecvCQ: s.rcq, SRQ: s.srq, Cap: verbs.QPCap{MaxSendWR: 8, MaxSendSGE: 1}}))
	}
	gid := f.gids[0].GID
	for i := range n {
		a, b := s.reqs[i], s.resp[i]
		mustOK(t, "connect requester", Connect(a, 10, Endpoint{QPN: b.Num(), PSN: 20, GID: gid}, p))
		mustOK(t, "connect responder", Connect(b, 20, Endpoint{QPN: a.Num(), PSN: 10, GID: gid}, p))
	}
	return s
}

// recv posts receive id into the SRQ, into 4 KiB slot slot of the buffer.
func (s *srqSetup) recv(t *testing.T, id uint64, slot int) {
	t.Helper()
	n, err := s.srq.PostRecv([]verbs.RecvWR{{ID: id, SGL: []verbs.SGE{sge(s.mr, 4096*slot, 4096)}}})
	if err != nil || n != 1 {
		t.Fatalf("post srq recv: %d queued: %v", n, err)
	}
}

// send sends n bytes with pattern seed from requester i and waits for its
// completion.
func (s *srqSetup) send(t *testing.T, i int, id uint64, n int, seed byte) {
	t.Helper()
	off := 48<<10 + int(seed)*256
	fill(s.buf[off:off+n], seed)
	postSend(t, s.reqs[i], verbs.SendWR{ID: id, Opcode: verbs.OpSend, Flags: verbs.SendSignaled, SGL: []verbs.SGE{sge(s.mr, off, n)}})
	checkWC(t, "send to a qp on an srq", poll1(t, s.scq), wcWant{ID: id, QPNum: s.reqs[i].Num(), Opcode: verbs.WCSend, Len: -1})
}

func testSRQ(t *testing.T, tg Target) {
	run(t, "Shared", func(t *testing.T) {
		f := newFixture(t, tg)
		if !needSRQ(t, f) {
			return
		}
		s := newSRQSetup(t, f, 3, verbs.SRQInit{MaxWR: 32, MaxSGE: 1})
		for i := range 6 {
			s.recv(t, uint64(1+i), i)
		}
		for k := range 6 {
			s.send(t, k%3, uint64(100+k), 100+k, byte(k))
		}
		for k, wc := range pollN(t, s.rcq, 6) {
			// Receives are taken in the order they were posted.
			if checkWC(t, fmt.Sprintf("receive %d through the srq", k), wc,
				wcWant{ID: uint64(1 + k), QPNum: s.resp[k%3].Num(), Opcode: verbs.WCRecv, Len: 100 + k}) {
				sameBytes(t, fmt.Sprintf("message %d", k), s.buf[4096*k:4096*k+100+k], pattern(100+k, byte(k)))
			}
		}
		// A QP on an SRQ has no receive queue of its own.
		_, err := s.resp[0].PostRecv([]verbs.RecvWR{{ID: 9, SGL: []verbs.SGE{sge(s.mr, 0, 16)}}})
		if err == nil {
			t.Errorf("post recv on a qp attached to an srq succeeded")
		}
		_, err = f.pd.CreateQP(verbs.QPInit{Type: verbs.RC, SendCQ: s.scq, RecvCQ: s.rcq, SRQ: s.srq, Cap: verbs.QPCap{MaxSendWR: 1, MaxRecvWR: 4}})
		wantErr(t, "create qp on an srq with max_recv_wr 4", err, errEINVAL)
	})
	run(t, "Query", func(t *testing.T) {
		f := newFixture(t, tg)
		if !needSRQ(t, f) {
			return
		}
		init := verbs.SRQInit{MaxWR: 10, MaxSGE: 1, Limit: 3}
		srq := createSRQ(t, f, init)
		a, err := srq.Query()
		mustOK(t, "query srq", err)
		if a.MaxWR < init.MaxWR || a.MaxSGE < init.MaxSGE || a.Limit != init.Limit {
			t.Errorf("query of srq %+v: %+v", init, a)
		}
		if srq.Num() == 0 {
			t.Errorf("srq number 0")
		}
		mustOK(t, "modify srq limit", srq.Modify(verbs.SRQAttr{Limit: 5}, verbs.SRQLimit))
		if a, _ := srq.Query(); a.Limit != 5 {
			t.Errorf("srq limit %d after setting 5", a.Limit)
		}
	})
	run(t, "LimitEvent", func(t *testing.T) {
		f := newFixture(t, tg)
		if !needSRQ(t, f) {
			return
		}
		s := newSRQSetup(t, f, 1, verbs.SRQInit{MaxWR: 16, MaxSGE: 1})
		for i := range 8 {
			s.recv(t, uint64(1+i), i)
		}
		mustOK(t, "arm srq limit 4", s.srq.Modify(verbs.SRQAttr{Limit: 4}, verbs.SRQLimit))
		if a, _ := s.srq.Query(); a.Limit != 4 {
			t.Errorf("srq limit %d after setting 4", a.Limit)
		}
		for k := range 4 {
			s.send(t, 0, uint64(100+k), 10, byte(k))
		}
		pollN(t, s.rcq, 4)
		expectNoEvent(t, f.ctx, verbs.EventSRQLimitReached, waitShort) // 4 left: not below the limit
		s.send(t, 0, 104, 10, 4)
		poll1(t, s.rcq)
		waitEvent(t, f.ctx, verbs.EventSRQLimitReached, func(ev verbs.AsyncEvent) bool { return ev.SRQ == s.srq })
		if a, _ := s.srq.Query(); a.Limit != 0 {
			t.Errorf("srq limit %d after the limit event, want 0 (disarmed)", a.Limit)
		}
		s.send(t, 0, 105, 10, 5)
		poll1(t, s.rcq)
		expectNoEvent(t, f.ctx, verbs.EventSRQLimitReached, waitShort) // fired once
	})
	run(t, "LimitTooLarge", func(t *testing.T) {
		f := newFixture(t, tg)
		if !needSRQ(t, f) {
			return
		}
		srq := createSRQ(t, f, verbs.SRQInit{MaxWR: 8, MaxSGE: 1})
		a, err := srq.Query()
		mustOK(t, "query srq", err)
		wantErr(t, fmt.Sprintf("srq limit %d above max_wr %d", a.MaxWR+1, a.MaxWR), srq.Modify(verbs.SRQAttr{Limit: a.MaxWR + 1}, verbs.SRQLimit), errEINVAL)
		if b, _ := srq.Query(); b.Limit != 0 {
			t.Errorf("srq limit %d after a refused modify", b.Limit)
		}
		// At creation the limit means nothing to some devices (ibv_create_srq
		// ignores it; rdma_rxe accepts any value): refused or accepted.
		s, err := f.pd.CreateSRQ(verbs.SRQInit{MaxWR: 8, MaxSGE: 1, Limit: 9})
		if s != nil {
			s.Close()
		} else if !errors.Is(err, errEINVAL) {
			t.Errorf("create srq with limit 9 above max_wr 8: %v, want success or EINVAL", err)
		}
	})
	run(t, "Resize", func(t *testing.T) {
		f := newFixture(t, tg)
		if !needSRQ(t, f) {
			return
		}
		srq := createSRQ(t, f, verbs.SRQInit{MaxWR: 8, MaxSGE: 1})
		err := srq.Modify(verbs.SRQAttr{MaxWR: 16}, verbs.SRQMaxWR)
		if f.attr.Flags&verbs.DeviceSRQResize == 0 {
			wantErr(t, "resize srq (device without SRQ_RESIZE)", err, verbs.ErrNotSupported)
			return
		}
		if wantOK(t, "resize srq", err) {
			if a, _ := srq.Query(); a.MaxWR < 16 {
				t.Errorf("srq max_wr %d after resizing to 16", a.MaxWR)
			}
		}
	})
	run(t, "DeviceLimits", func(t *testing.T) {
		f := newFixture(t, tg)
		if !needSRQ(t, f) {
			return
		}
		for _, init := range []verbs.SRQInit{{MaxWR: f.attr.MaxSRQWR + 1, MaxSGE: 1}, {MaxWR: 4, MaxSGE: f.attr.MaxSRQSGE + 1}} {
			s, err := f.pd.CreateSRQ(init)
			if s != nil {
				s.Close()
			}
			wantErr(t, fmt.Sprintf("create srq %+v (device max_srq_wr %d, max_srq_sge %d)", init, f.attr.MaxSRQWR, f.attr.MaxSRQSGE), err, errEINVAL)
		}
	})
}
