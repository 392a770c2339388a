package pvrdma

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/pvperf/pvperf/verbs"
)

// The ring rules of spec 3.3: N slots, indices in [0, 2N) with bit N a
// generation bit; valid iff idx & ~(2N-1) == 0; slot = idx & (N-1);
// next = (idx+1) & (2N-1); has data iff tail != head; has space iff
// tail != head ^ N.

func TestRingArithmetic(t *testing.T) {
	buf := mmapBuf(t, PageSize)
	for _, n := range []int{1, 2, 4, 8, 64, 1024} {
		r := NewRing(buf, 8, n)
		N := uint32(n)
		if r.Len() != n {
			t.Errorf("Len() = %d, want %d", r.Len(), n)
		}
		for idx := uint32(0); idx < 4*N+3; idx++ {
			if got, want := r.Valid(idx), idx < 2*N; got != want {
				t.Errorf("N=%d: Valid(%d) = %v, want %v", n, idx, got, want)
			}
		}
		for _, idx := range []uint32{2 * N, 2*N + 1, 1 << 31, ^uint32(0), ^uint32(0) &^ (2*N - 1)} {
			if r.Valid(idx) {
				t.Errorf("N=%d: Valid(%#x) = true", n, idx)
			}
		}
		for idx := uint32(0); idx < 2*N; idx++ {
			if got, want := r.Slot(idx), int(idx%N); got != want {
				t.Errorf("N=%d: Slot(%d) = %d, want %d", n, idx, got, want)
			}
			if got, want := r.Next(idx), (idx+1)%(2*N); got != want {
				t.Errorf("N=%d: Next(%d) = %d, want %d", n, idx, got, want)
			}
			for head := uint32(0); head < 2*N && n <= 64; head++ {
				used := (idx + 2*N - head) % (2 * N)
				if got, want := r.Full(idx, head), idx == head^N; got != want {
					t.Errorf("N=%d: Full(%d, %d) = %v, want %v", n, idx, head, got, want)
				}
				if got := r.Full(idx, head); got != (used == N) {
					t.Errorf("N=%d: Full(%d, %d) = %v but %d slots are used", n, idx, head, got, used)
				}
				if got := r.Count(idx, head); got != int(used) {
					t.Errorf("N=%d: Count(%d, %d) = %d, want %d", n, idx, head, got, used)
				}
			}
		}
		// Empty when equal, never full then.
		for idx := uint32(0); idx < 2*N; idx++ {
			if r.Full(idx, idx) || r.Count(idx, idx) != 0 {
				t.Errorf("N=%d: ring with tail == head == %d is not empty", n, idx)
			}
		}
	}
}

func TestRingStateOffsets(t *testing.T) {
	buf := mmapBuf(t, PageSize)
	tx := NewRing(buf, TxRingOffset, 4)
	rx := NewRing(buf, RxRingOffset, 4)
	tx.SetProducer(0x01020304)
	tx.SetConsumer(0x05060708)
	rx.SetProducer(0x090a0b0c)
	rx.SetConsumer(0x0d0e0f10)
	want := layout(t, 16,
		at(0, 0x04, 0x03, 0x02, 0x01),  // tx.prod_tail
		at(4, 0x08, 0x07, 0x06, 0x05),  // tx.cons_head
		at(8, 0x0c, 0x0b, 0x0a, 0x09),  // rx.prod_tail
		at(12, 0x10, 0x0f, 0x0e, 0x0d), // rx.cons_head
	)
	diffBytes(t, "pvrdma_ring_state", buf[:16], want)
	if tx.Producer() != 0x01020304 || tx.Consumer() != 0x05060708 || rx.Producer() != 0x090a0b0c || rx.Consumer() != 0x0d0e0f10 {
		t.Errorf("ring loads do not read back the stores")
	}
	rx.Reset()
	if rx.Producer() != 0 || rx.Consumer() != 0 || tx.Producer() != 0x01020304 {
		t.Errorf("Reset of rx: rx %d/%d tx %#x", rx.Producer(), rx.Consumer(), tx.Producer())
	}
}

func TestNewRingPanics(t *testing.T) {
	buf := mmapBuf(t, PageSize)
	for _, c := range []struct {
		off, n int
	}{
		{0, 0}, {0, -4}, {0, 3}, {0, 6}, {0, 100}, {2, 4}, {5, 4},
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("NewRing(off %d, n %d) did not panic", c.off, c.n)
				}
			}()
			NewRing(buf, c.off, c.n)
		}()
	}
}

// TestSendRingWrap posts and consumes through many cycles of the ring, with
// varying batch sizes, and checks the indices, generation bit and slots.
func TestSendRingWrap(t *testing.T) {
	for _, N := range []int{1, 2, 4, 8} {
		t.Run(fmt.Sprintf("N=%d", N), func(t *testing.T) {
			e := newQPEnv(t, qpOpts{cap: verbs.QPCap{MaxSendWR: N, MaxRecvWR: N, MaxSendSGE: 1, MaxRecvSGE: 1}, handle: 1, state: verbs.StateRTS})
			mask := uint32(2*N - 1)
			var posted, consumed uint64
			wrs := make([]verbs.SendWR, N+1)
			for cycle := range 20 * N {
				batch := cycle%(N+1) + 1 // 1..N+1: sometimes overflows
				for i := range wrs[:batch] {
					id := posted + uint64(i)
					wrs[i] = verbs.SendWR{ID: id, Opcode: verbs.OpSend, SGL: []verbs.SGE{{Addr: id, Length: uint32(id), LKey: 7}}}
				}
				free := N - int(posted-consumed)
				n, err := e.qp.PostSend(wrs[:batch])
				wantN := min(batch, free)
				if n != wantN {
					t.Fatalf("cycle %d: posted %d of %d with %d free", cycle, n, batch, free)
				}
				if (batch > free) != (err != nil) {
					t.Fatalf("cycle %d: batch %d, free %d, err %v", cycle, batch, free, err)
				}
				if err != nil {
					checkQueueFull(t, "overflowing batch", err)
				}
				posted += uint64(n)
				tail := e.sqTail()
				if tail != uint32(posted)&mask {
					t.Fatalf("cycle %d: prod_tail %d, want %d (posted %d)", cycle, tail, uint32(posted)&mask, posted)
				}
				// Generation bit: set during odd passes over the ring.
				if gen := tail&uint32(N) != 0; gen != ((posted/uint64(N))%2 == 1) {
					t.Fatalf("cycle %d: generation bit of %d wrong after %d posts", cycle, tail, posted)
				}
				// Device: consume all but (cycle % 2) WQEs, checking each.
				for posted-consumed > uint64(cycle%2) {
					head := e.sqHead()
					w := SendWQE(e.sqSlot(int(head) & (N - 1)))
					if w.WRID() != consumed || w.SGE(0).Addr != consumed {
						t.Fatalf("cycle %d: WQE at index %d has wr_id %d, want %d", cycle, head, w.WRID(), consumed)
					}
					consumed++
					e.setSQHead((head + 1) & mask)
				}
			}
			if posted < uint64(10*N) {
				t.Errorf("only %d WRs went through", posted)
			}
		})
	}
}

func TestRecvRingWrap(t *testing.T) {
	const N = 4
	e := newQPEnv(t, qpOpts{cap: verbs.QPCap{MaxSendWR: 1, MaxRecvWR: N, MaxSendSGE: 1, MaxRecvSGE: 1}, handle: 1, state: verbs.StateRTR})
	s := newSRQEnv(t, 2, N, 1)
	type rq struct {
		name               string
		post               func([]verbs.RecvWR) (int, error)
		tail, head         func() uint32
		setHead            func(uint32)
		slot               func(int) []byte
		posted, consumed   uint64
		doorbell           dbWrite
		uar                *fakeUAR
		wantDoorbellsSoFar int
	}
	qs := []*rq{
		{name: "QP", post: e.qp.PostRecv, tail: e.rqTail, head: e.rqHead, setHead: e.setRQHead, slot: e.rqSlot, doorbell: dbWrite{0, 1 | 1<<31}, uar: e.uar},
		{name: "SRQ", post: s.srq.PostRecv, tail: s.tail, head: s.head, setHead: s.setHead, slot: s.slot, doorbell: dbWrite{8, 2 | 1<<30}, uar: s.uar},
	}
	wrs := make([]verbs.RecvWR, N+1)
	for cycle := range 40 {
		for _, q := range qs {
			batch := cycle%(N+1) + 1
			for i := range wrs[:batch] {
				wrs[i] = verbs.RecvWR{ID: q.posted + uint64(i), SGL: []verbs.SGE{{Addr: q.posted + uint64(i)}}}
			}
			free := N - int(q.posted-q.consumed)
			n, err := q.post(wrs[:batch])
			if n != min(batch, free) || (batch > free) != (err != nil) {
				t.Fatalf("%s cycle %d: post %d with %d free = %d, %v", q.name, cycle, batch, free, n, err)
			}
			if n > 0 {
				q.wantDoorbellsSoFar++
			}
			q.posted += uint64(n)
			if q.tail() != uint32(q.posted)&(2*N-1) {
				t.Fatalf("%s cycle %d: prod_tail %d after %d posts", q.name, cycle, q.tail(), q.posted)
			}
			for q.posted-q.consumed > uint64(cycle%3) {
				head := q.head()
				w := RecvWQE(q.slot(int(head) % N))
				if w.WRID() != q.consumed || w.SGE(0).Addr != q.consumed {
					t.Fatalf("%s cycle %d: WQE at %d has wr_id %d, want %d", q.name, cycle, head, w.WRID(), q.consumed)
				}
				q.consumed++
				q.setHead((head + 1) % (2 * N))
			}
		}
	}
	for _, q := range qs {
		w := q.uar.writes()
		if len(w) != q.wantDoorbellsSoFar {
			t.Errorf("%s: %d doorbells, want %d", q.name, len(w), q.wantDoorbellsSoFar)
		}
		for _, d := range w {
			if d != q.doorbell {
				t.Errorf("%s: doorbell %v, want %v", q.name, d, q.doorbell)
			}
		}
	}
}

// TestCorruptIndices: any index >= 2N means the ring is corrupt; posting
// and polling must fail without writing a WQE, moving an index or ringing
// a doorbell.
func TestCorruptIndices(t *testing.T) {
	const N = 4
	for _, bad := range []uint32{2 * N, 2*N + 1, 0x80000000, 0xffffffff} {
		t.Run(fmt.Sprintf("%#x", bad), func(t *testing.T) {
			t.Run("SQ prod_tail", func(t *testing.T) {
				e := newQPEnv(t, qpOpts{cap: verbs.QPCap{MaxSendWR: N, MaxRecvWR: N, MaxSendSGE: 1, MaxRecvSGE: 1}, state: verbs.StateRTS})
				e.setSQTail(bad)
				checkCorruptSend(t, e)
			})
			t.Run("SQ cons_head", func(t *testing.T) {
				e := newQPEnv(t, qpOpts{cap: verbs.QPCap{MaxSendWR: N, MaxRecvWR: N, MaxSendSGE: 1, MaxRecvSGE: 1}, state: verbs.StateRTS})
				e.setSQHead(bad)
				checkCorruptSend(t, e)
			})
			t.Run("RQ prod_tail", func(t *testing.T) {
				e := newQPEnv(t, qpOpts{cap: verbs.QPCap{MaxSendWR: N, MaxRecvWR: N, MaxSendSGE: 1, MaxRecvSGE: 1}, state: verbs.StateRTS})
				e.setRQTail(bad)
				checkCorruptRecv(t, e)
			})
			t.Run("RQ cons_head", func(t *testing.T) {
				e := newQPEnv(t, qpOpts{cap: verbs.QPCap{MaxSendWR: N, MaxRecvWR: N, MaxSendSGE: 1, MaxRecvSGE: 1}, state: verbs.StateRTS})
				e.setRQHead(bad)
				checkCorruptRecv(t, e)
			})
			t.Run("SRQ prod_tail", func(t *testing.T) {
				s := newSRQEnv(t, 1, N, 1)
				s.setTail(bad)
				checkCorruptSRQ(t, s)
			})
			t.Run("SRQ cons_head", func(t *testing.T) {
				s := newSRQEnv(t, 1, N, 1)
				s.setHead(bad)
				checkCorruptSRQ(t, s)
			})
			t.Run("CQ prod_tail", func(t *testing.T) {
				c := newCQEnv(t, 1, N)
				c.qps.Set(1, 1)
				c.produce(CQE{QP: 1})
				c.setTail(bad)
				checkCorruptCQ(t, c)
			})
			t.Run("CQ cons_head", func(t *testing.T) {
				c := newCQEnv(t, 1, N)
				c.qps.Set(1, 1)
				c.produce(CQE{QP: 1})
				c.setHead(bad)
				checkCorruptCQ(t, c)
			})
		})
	}
}

func checkCorruptSend(t *testing.T, e *qpEnv) {
	t.Helper()
	tail, head := e.sqTail(), e.sqHead()
	snap := append([]byte(nil), e.sbuf...)
	n, err := e.qp.PostSend([]verbs.SendWR{{ID: 1, Opcode: verbs.OpSend, SGL: []verbs.SGE{tSGE0}}})
	if n != 0 || err == nil {
		t.Errorf("PostSend with SQ indices %#x/%#x = %d, %v; want 0 and an error", tail, head, n, err)
	}
	if !bytes.Equal(e.sbuf, snap) {
		t.Errorf("PostSend with SQ indices %#x/%#x modified the send buffer (prod_tail now %#x)", tail, head, e.sqTail())
	}
	e.uar.expect(t, "post into a corrupt ring")
}

func checkCorruptRecv(t *testing.T, e *qpEnv) {
	t.Helper()
	tail, head := e.rqTail(), e.rqHead()
	snapS := append([]byte(nil), e.sbuf...)
	snapR := append([]byte(nil), e.rbuf...)
	n, err := e.qp.PostRecv([]verbs.RecvWR{{ID: 1, SGL: []verbs.SGE{tSGE0}}})
	if n != 0 || err == nil {
		t.Errorf("PostRecv with RQ indices %#x/%#x = %d, %v; want 0 and an error", tail, head, n, err)
	}
	if !bytes.Equal(e.sbuf, snapS) || !bytes.Equal(e.rbuf, snapR) {
		t.Errorf("PostRecv with RQ indices %#x/%#x modified the buffers (prod_tail now %#x)", tail, head, e.rqTail())
	}
	e.uar.expect(t, "post into a corrupt ring")
}

func checkCorruptSRQ(t *testing.T, s *srqEnv) {
	t.Helper()
	tail, head := s.tail(), s.head()
	snap := append([]byte(nil), s.buf...)
	n, err := s.srq.PostRecv([]verbs.RecvWR{{ID: 1, SGL: []verbs.SGE{tSGE0}}})
	if n != 0 || err == nil {
		t.Errorf("SRQ PostRecv with indices %#x/%#x = %d, %v; want 0 and an error", tail, head, n, err)
	}
	if !bytes.Equal(s.buf, snap) {
		t.Errorf("SRQ PostRecv with indices %#x/%#x modified the buffer (prod_tail now %#x)", tail, head, s.tail())
	}
	s.uar.expect(t, "post into a corrupt ring")
}

func checkCorruptCQ(t *testing.T, c *cqEnv) {
	t.Helper()
	tail, head := c.tail(), c.head()
	var wc [4]verbs.WC
	n, err := c.cq.Poll(wc[:])
	if n != 0 || err == nil {
		t.Errorf("Poll with CQ indices %#x/%#x = %d, %v; want 0 and an error", tail, head, n, err)
	}
	if c.tail() != tail || c.head() != head {
		t.Errorf("Poll with corrupt indices moved them to %#x/%#x", c.tail(), c.head())
	}
}
