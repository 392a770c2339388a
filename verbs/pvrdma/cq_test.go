package pvrdma

import (
	"fmt"
	"runtime"
	"sort"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/pvperf/pvperf/verbs"
)

const tCQN = 0x000042

func pollDoorbell(cqn uint32) dbWrite { return dbWrite{4, cqn | 1<<31} }

func TestPollDecodesEveryField(t *testing.T) {
	c := newCQEnv(t, tCQN, 8)
	// cqeVector's qp field is 0x010203: the QP table is indexed by the low
	// 16 bits of the handle, 0x0203.
	c.qps.Set(0x0203, 0x00abcdef)
	c.produceRaw(cqeVector(t))
	var wc [2]verbs.WC
	n, err := c.cq.Poll(wc[:])
	if n != 1 || err != nil {
		t.Fatalf("Poll = %d, %v; want 1, nil", n, err)
	}
	want := verbs.WC{
		ID:           0x1122334455667788,
		Status:       verbs.WCWRFlushErr,
		Opcode:       verbs.WCRecvRDMAWithImm,
		VendorErr:    0x8badf00d,
		ByteLen:      0x10000,
		Imm:          0xdeadbeef, // host order: the CQE holds it big-endian
		QPNum:        0x00abcdef, // mapped from the handle, not the handle
		SrcQP:        0x00abcdef,
		Flags:        verbs.WCWithGRH | verbs.WCWithImm | 64,
		PKeyIndex:    0x0102,
		SLID:         0xc001,
		SL:           7,
		DLIDPathBits: 0x3f,
	}
	if wc[0] != want {
		t.Errorf("WC =\n %+v\nwant\n %+v", wc[0], want)
	}
	if c.head() != 1 || c.tail() != 1 {
		t.Errorf("CQ ring %d/%d after polling one CQE, want 1/1", c.tail(), c.head())
	}
	// The ring ran empty before wc was full: one POLL doorbell.
	c.uar.expect(t, "poll that empties the ring", pollDoorbell(tCQN))

	// Every opcode and status value goes through unchanged.
	for _, op := range []uint32{WCOpSend, WCOpRDMAWrite, WCOpRDMARead, WCOpCompSwap, WCOpFetchAdd, WCOpRecv, WCOpRecvRDMAWithImm} {
		for _, st := range []uint32{0, 1, 4, 5, 10, 12, 13, 21} {
			c.produce(CQE{WRID: uint64(op)<<8 | uint64(st), QP: 0x0203, Opcode: op, Status: st})
			if n, err := c.cq.Poll(wc[:1]); n != 1 || err != nil {
				t.Fatalf("Poll = %d, %v", n, err)
			}
			if uint32(wc[0].Opcode) != op || uint32(wc[0].Status) != st || wc[0].ID != uint64(op)<<8|uint64(st) {
				t.Errorf("CQE opcode %d status %d polled as %+v", op, st, wc[0])
			}
		}
	}
}

func TestPollImmHostOrder(t *testing.T) {
	c := newCQEnv(t, tCQN, 4)
	c.qps.Set(1, 100)
	c.produceRaw(layout(t, 64,
		at(8, 0x01),                    // qp handle 1
		at(16, 0x80),                   // opcode RECV
		at(28, 0x01, 0x02, 0x03, 0x04), // imm_data, big-endian on the wire
		at(36, 0x02),                   // wc_flags WITH_IMM
	))
	var wc [1]verbs.WC
	if n, err := c.cq.Poll(wc[:]); n != 1 || err != nil {
		t.Fatalf("Poll = %d, %v", n, err)
	}
	if wc[0].Imm != 0x01020304 || wc[0].Flags != verbs.WCWithImm || wc[0].Opcode != verbs.WCRecv || wc[0].QPNum != 100 {
		t.Errorf("WC %+v: want imm 0x01020304 flags WITH_IMM opcode RECV qp 100", wc[0])
	}
}

func TestPollQPHandleMapping(t *testing.T) {
	c := newCQEnv(t, tCQN, 8)
	c.qps.Set(0x0005, 0x000111)
	c.qps.Set(0x1234, 0xfffffe)
	c.qps.Set(0x0000, 0x000777) // handle 0 is a valid table entry
	for _, cs := range []struct {
		qp  uint64
		qpn uint32
	}{
		{0x5, 0x111},
		{0x10005, 0x111},                // only the low 16 bits are used
		{0xffffffff00000005, 0x111},     // of all 64
		{0x1234, 0xfffffe},              //
		{0x0, 0x777},                    //
		{0x00ff0000_00001234, 0xfffffe}, //
	} {
		c.produce(CQE{WRID: cs.qp, QP: cs.qp})
		var wc [1]verbs.WC
		n, err := c.cq.Poll(wc[:])
		if n != 1 || err != nil {
			t.Fatalf("Poll of a CQE for qp %#x = %d, %v", cs.qp, n, err)
		}
		if wc[0].QPNum != cs.qpn || wc[0].ID != cs.qp {
			t.Errorf("CQE qp %#x polled as QPNum %#x, want %#x", cs.qp, wc[0].QPNum, cs.qpn)
		}
	}
	// Clear forgets a handle.
	c.qps.Clear(0x1234)
	c.produce(CQE{QP: 0x1234})
	var wc [1]verbs.WC
	if n, err := c.cq.Poll(wc[:]); n != 0 || err == nil {
		t.Errorf("Poll of a CQE for a cleared handle = %d, %v; want 0 and an error", n, err)
	}
}

func TestPollUnknownQP(t *testing.T) {
	c := newCQEnv(t, tCQN, 8)
	c.qps.Set(1, 11)
	c.produce(CQE{WRID: 1, QP: 1})
	c.produce(CQE{WRID: 2, QP: 2}) // handle 2 not in the table
	c.produce(CQE{WRID: 3, QP: 1})
	var wc [4]verbs.WC
	n, err := c.cq.Poll(wc[:])
	if n != 1 || err == nil {
		t.Fatalf("Poll = %d, %v; want 1 and an error", n, err)
	}
	if wc[0].ID != 1 || wc[0].QPNum != 11 {
		t.Errorf("first WC %+v, want wr_id 1 qp 11", wc[0])
	}
	// The good CQE is consumed, the unknown one is not.
	if c.head() != 1 {
		t.Errorf("cons_head = %d, want 1", c.head())
	}
	n, err = c.cq.Poll(wc[:])
	if n != 0 || err == nil || c.head() != 1 {
		t.Errorf("second Poll = %d, %v, cons_head %d; want 0, an error, 1", n, err, c.head())
	}
	c.uar.expect(t, "polls stopped by an unknown qp")
	// Once the QP is known, everything is delivered in order.
	c.qps.Set(2, 22)
	n, err = c.cq.Poll(wc[:])
	if n != 2 || err != nil || wc[0].ID != 2 || wc[0].QPNum != 22 || wc[1].ID != 3 || wc[1].QPNum != 11 {
		t.Errorf("Poll after Set = %d, %v, %+v %+v", n, err, wc[0], wc[1])
	}
	if c.head() != 3 {
		t.Errorf("cons_head = %d, want 3", c.head())
	}
}

func TestPollDoorbell(t *testing.T) {
	t.Run("empty", func(t *testing.T) {
		c := newCQEnv(t, tCQN, 4)
		var wc [4]verbs.WC
		for i := 1; i <= 3; i++ {
			if n, err := c.cq.Poll(wc[:]); n != 0 || err != nil {
				t.Fatalf("Poll of an empty CQ = %d, %v", n, err)
			}
			if got := c.uar.total(); got != i {
				t.Fatalf("after %d polls of an empty CQ: %d doorbells, want %d", i, got, i)
			}
		}
		want := []dbWrite{pollDoorbell(tCQN), pollDoorbell(tCQN), pollDoorbell(tCQN)}
		c.uar.expect(t, "three empty polls", want...)
		if c.head() != 0 || c.tail() != 0 {
			t.Errorf("empty polls moved the ring to %d/%d", c.tail(), c.head())
		}
		c.uar.reset()
		if n, err := c.cq.Poll(wc[:0]); n != 0 || err != nil {
			t.Errorf("Poll with no room = %d, %v", n, err)
		}
		c.uar.expect(t, "poll with no room")
	})
	t.Run("device produces on POLL", func(t *testing.T) {
		c := newCQEnv(t, tCQN, 4)
		c.qps.Set(3, 33)
		var produced atomic.Int32
		c.uar.hook = func(off, val uint32) {
			// Produce on the first POLL only: rdma-core lets every entry
			// ring POLL once, so a device producing on each would fill wc.
			if off == 4 && val == tCQN|1<<31 && produced.Add(1) == 1 {
				c.produce(CQE{WRID: 0x5150, QP: 3, Opcode: WCOpRDMAWrite})
			}
		}
		var wc [4]verbs.WC
		n, err := c.cq.Poll(wc[:])
		if n != 1 || err != nil {
			t.Fatalf("Poll = %d, %v; want the CQE produced on POLL", n, err)
		}
		if wc[0].ID != 0x5150 || wc[0].QPNum != 33 || wc[0].Opcode != verbs.WCRDMAWrite {
			t.Errorf("WC %+v", wc[0])
		}
		c.uar.expect(t, "poll with a producing device", pollDoorbell(tCQN), pollDoorbell(tCQN))
		if c.head() != 1 || c.tail() != 1 {
			t.Errorf("ring %d/%d, want 1/1", c.tail(), c.head())
		}
	})
	t.Run("data present", func(t *testing.T) {
		c := newCQEnv(t, tCQN, 8)
		c.qps.Set(1, 1)
		for i := range 5 {
			c.produce(CQE{WRID: uint64(i), QP: 1})
		}
		var wc [3]verbs.WC
		// wc fills up before the ring empties: no doorbell.
		if n, err := c.cq.Poll(wc[:]); n != 3 || err != nil {
			t.Fatalf("Poll = %d, %v", n, err)
		}
		c.uar.expect(t, "poll filling wc")
		// Two left, room for three: the ring empties, one doorbell.
		if n, err := c.cq.Poll(wc[:]); n != 2 || err != nil || wc[0].ID != 3 || wc[1].ID != 4 {
			t.Fatalf("Poll = %d, %v, ids %d %d", n, err, wc[0].ID, wc[1].ID)
		}
		c.uar.expect(t, "poll emptying the ring", pollDoorbell(tCQN))
	})
}

// TestPollConsumesBeforeCorruption: a CQE handed to the caller must be
// consumed (cons_head advanced, spec 3.6 poll_cq step 3) even if the ring
// turns out corrupt later in the same Poll call; otherwise the next Poll
// delivers it a second time.
func TestPollConsumesBeforeCorruption(t *testing.T) {
	const N = 4
	c := newCQEnv(t, tCQN, N)
	c.qps.Set(1, 1)
	c.produce(CQE{WRID: 0xfeed, QP: 1})
	c.uar.hook = func(off, val uint32) {
		if off == 4 && val&(1<<31) != 0 {
			c.setTail(2*N + 1) // the device scribbles over prod_tail
		}
	}
	var wc [4]verbs.WC
	n, err := c.cq.Poll(wc[:])
	if n != 1 || wc[0].ID != 0xfeed {
		t.Fatalf("Poll = %d, %v (wc[0] %+v); want the one good CQE", n, err, wc[0])
	}
	if c.head() != 1 {
		t.Errorf("cons_head = %d after delivering one CQE, want 1 (Poll returned %d, %v)", c.head(), n, err)
	}
	c.uar.hook = nil
	c.setTail(1)
	wc[0] = verbs.WC{}
	if n, err := c.cq.Poll(wc[:]); n != 0 {
		t.Errorf("after repair, Poll = %d, %v: CQE wr_id %#x delivered twice", n, err, wc[0].ID)
	}
}

func TestCQRingWrap(t *testing.T) {
	for _, N := range []int{1, 2, 4, 16} {
		t.Run(fmt.Sprintf("N=%d", N), func(t *testing.T) {
			c := newCQEnv(t, tCQN, N)
			c.qps.Set(9, 99)
			mask := uint32(2*N - 1)
			var produced, polled uint64
			wc := make([]verbs.WC, N+1)
			for cycle := range 30 * N {
				// Device: fill up to N - (cycle%2) outstanding entries.
				for produced-polled < uint64(N-cycle%2) {
					if c.tail() == c.head()^uint32(N) {
						t.Fatalf("cycle %d: ring full with %d outstanding", cycle, produced-polled)
					}
					c.produce(CQE{WRID: produced, QP: 9})
					produced++
				}
				want := int(produced - polled)
				room := cycle%(N+1) + 1
				n, err := c.cq.Poll(wc[:room])
				if err != nil || n != min(room, want) {
					t.Fatalf("cycle %d: Poll(%d) with %d ready = %d, %v", cycle, room, want, n, err)
				}
				for i := range n {
					if wc[i].ID != polled || wc[i].QPNum != 99 {
						t.Fatalf("cycle %d: WC %d is wr_id %d, want %d", cycle, i, wc[i].ID, polled)
					}
					polled++
				}
				if c.head() != uint32(polled)&mask {
					t.Fatalf("cycle %d: cons_head %d after %d polled", cycle, c.head(), polled)
				}
			}
		})
	}
}

func TestPurge(t *testing.T) {
	const N = 8
	c := newCQEnv(t, tCQN, N)
	const A, B, C = 0x0011, 0x0022, 0x0033
	c.qps.Set(A, 1)
	c.qps.Set(B, 2)
	c.qps.Set(C, 3)
	// Start near the end of the ring so the entries wrap (indices 6..12).
	c.setTail(6)
	c.setHead(6)
	handles := []uint64{A, B, A, C, 0x10000 | A, B, A}
	for i, h := range handles {
		c.produce(CQE{WRID: uint64(100 + i), QP: h})
	}
	tail := c.tail()
	var dev countingLocker
	c.cq.Purge(A, &dev)
	if dev.locks != 1 || dev.held {
		t.Errorf("Purge took the device lock %d times (held after: %v), want once and released", dev.locks, dev.held)
	}
	if c.tail() != tail {
		t.Errorf("Purge moved prod_tail from %d to %d", tail, c.tail())
	}
	if got := (c.tail() - c.head()) & (2*N - 1); got != 3 {
		t.Errorf("%d CQEs left after Purge, want 3", got)
	}
	var wc [8]verbs.WC
	n, err := c.cq.Poll(wc[:])
	if n != 3 || err != nil {
		t.Fatalf("Poll after Purge = %d, %v; want 3", n, err)
	}
	// The others stay, in order: B(101), C(103), B(105).
	for i, want := range []struct {
		id  uint64
		qpn uint32
	}{{101, 2}, {103, 3}, {105, 2}} {
		if wc[i].ID != want.id || wc[i].QPNum != want.qpn {
			t.Errorf("WC %d after Purge: wr_id %d qp %d, want %d qp %d", i, wc[i].ID, wc[i].QPNum, want.id, want.qpn)
		}
	}

	// Purging a handle with no CQEs changes nothing; purging all empties.
	for i, h := range []uint64{B, C, B} {
		c.produce(CQE{WRID: uint64(200 + i), QP: h})
	}
	head, tail := c.head(), c.tail()
	c.cq.Purge(A, &dev)
	if c.head() != head || c.tail() != tail {
		t.Errorf("Purge of an absent handle moved the ring")
	}
	c.cq.Purge(B, &dev)
	c.cq.Purge(C, &dev)
	if c.head() != c.tail() {
		t.Errorf("ring not empty after purging every handle: %d/%d", c.tail(), c.head())
	}
	c.uar.reset()
	if n, _ := c.cq.Poll(wc[:]); n != 0 {
		t.Errorf("Poll after purging everything = %d", n)
	}
}

// TestConcurrentPoll: a device goroutine produces CQEs (never overrunning
// cons_head) while several goroutines poll; every CQE is delivered once.
func TestConcurrentPoll(t *testing.T) {
	const (
		total   = 20000
		pollers = 3
	)
	c := newCQEnv(t, tCQN, 16)
	c.qps.Set(1, 1)
	N := uint32(c.n)
	var stop atomic.Bool
	go func() {
		for i := uint64(0); i < total && !stop.Load(); {
			if c.tail() == c.head()^N {
				runtime.Gosched()
				continue
			}
			c.produce(CQE{WRID: i, QP: 1})
			i++
		}
	}()
	defer stop.Store(true)
	var (
		mu  sync.Mutex
		all []uint64
		got atomic.Int64
		wg  sync.WaitGroup
	)
	for range pollers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var wc [5]verbs.WC
			var mine []uint64
			for got.Load() < total {
				n, err := c.cq.Poll(wc[:])
				if err != nil {
					t.Errorf("Poll: %v", err)
					return
				}
				for i := range n {
					mine = append(mine, wc[i].ID)
				}
				got.Add(int64(n))
				if n == 0 {
					runtime.Gosched()
				}
			}
			// One poller's completions come out in increasing order.
			if !sort.SliceIsSorted(mine, func(i, j int) bool { return mine[i] < mine[j] }) {
				t.Errorf("a poller saw completions out of order")
			}
			mu.Lock()
			all = append(all, mine...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	sort.Slice(all, func(i, j int) bool { return all[i] < all[j] })
	if len(all) != total {
		t.Fatalf("%d completions delivered, want %d", len(all), total)
	}
	for i, id := range all {
		if id != uint64(i) {
			t.Fatalf("completion %d missing or duplicated (saw %d)", i, id)
		}
	}
}

// countingLocker is a device lock that records its use.
type countingLocker struct {
	locks int
	held  bool
}

func (l *countingLocker) Lock() {
	if l.held {
		panic("device lock taken twice")
	}
	l.held = true
	l.locks++
}

func (l *countingLocker) Unlock() {
	if !l.held {
		panic("device lock released while not held")
	}
	l.held = false
}
