//go:build linux

package emu

import (
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pvperf/pvperf/verbs"
)

// pollWC waits up to 5 s for one completion on cq, of any status.
func pollWC(t *testing.T, cq verbs.CQ) verbs.WC {
	t.Helper()
	wc := make([]verbs.WC, 1)
	deadline := time.Now().Add(5 * time.Second)
	for {
		n, err := cq.Poll(wc)
		if err != nil {
			t.Fatal(err)
		}
		if n == 1 {
			return wc[0]
		}
		if time.Now().After(deadline) {
			t.Fatal("no completion within 5 s")
		}
	}
}

// TestZeroLKey: a work request whose SGE names local key 0, on a QP that
// has not used any local region yet, fails with a local protection error
// completion (key 0 is also what the QP's empty region cache holds).
func TestZeroLKey(t *testing.T) {
	for _, op := range []verbs.WROpcode{verbs.OpRDMAWrite, verbs.OpSend} {
		t.Run(op.String(), func(t *testing.T) {
			x, y := connectedPair(t, 4)
			wr := verbs.SendWR{ID: 7, Opcode: op, Flags: verbs.SendSignaled,
				SGL:        []verbs.SGE{{Addr: x.mr.Addr(), Length: 5, LKey: 0}},
				RemoteAddr: y.mr.Addr(), RKey: y.mr.RKey()}
			if _, err := x.qp.PostSend([]verbs.SendWR{wr}); err != nil {
				t.Fatal(err)
			}
			wc := pollWC(t, x.scq)
			if wc.ID != 7 || wc.Status != verbs.WCLocProtErr {
				t.Fatalf("completion %d with status %v, want 7 with %v", wc.ID, wc.Status, verbs.WCLocProtErr)
			}
		})
	}
}

// connectUC moves e's UC QP through INIT, RTR and RTS towards p.
func (e *endpoint) connectUC(t *testing.T, p peerInfo) {
	t.Helper()
	if err := e.qp.Modify(&verbs.QPAttr{State: verbs.StateInit, Port: 1, Access: verbs.AccessLocalWrite | verbs.AccessRemoteWrite},
		verbs.AttrState|verbs.AttrPKeyIndex|verbs.AttrPort|verbs.AttrAccessFlags); err != nil {
		t.Fatal(err)
	}
	if err := e.qp.Modify(&verbs.QPAttr{State: verbs.StateRTR, PathMTU: verbs.MTU1024, DestQPN: p.QPN, RQPSN: p.PSN,
		AH: verbs.AHAttr{IsGlobal: true, Port: 1, GRH: verbs.GRH{DGID: p.GID, HopLimit: 64}}},
		verbs.AttrState|verbs.AttrAV|verbs.AttrPathMTU|verbs.AttrDestQPN|verbs.AttrRQPSN); err != nil {
		t.Fatal(err)
	}
	if err := e.qp.Modify(&verbs.QPAttr{State: verbs.StateRTS, SQPSN: benchPSN}, verbs.AttrState|verbs.AttrSQPSN); err != nil {
		t.Fatal(err)
	}
}

// TestUCSharedDestination: two UC QPs send to one destination, whose RQ
// holds a single receive. Each receive completes once; a message that
// finds no receive is dropped (the sender's send succeeds), and the
// destination can post again. A sender must not take a receive from how
// far it last saw the destination post: the other sender may have taken
// it since.
func TestUCSharedDestination(t *testing.T) {
	ctx := openBench(t)
	t.Cleanup(func() { ctx.Close() })
	b := newEndpointOf(t, ctx, 1<<16, verbs.UC, 1)
	a1 := newEndpointOf(t, ctx, 1<<16, verbs.UC, 1)
	a2 := newEndpointOf(t, ctx, 1<<16, verbs.UC, 1)
	for _, e := range []*endpoint{b, a1, a2} {
		t.Cleanup(e.close)
	}
	a1.connectUC(t, b.info())
	a2.connectUC(t, b.info())
	b.connectUC(t, a1.info())
	recv := func(id uint64) error {
		_, err := b.qp.PostRecv([]verbs.RecvWR{{ID: id, SGL: []verbs.SGE{{Addr: b.mr.Addr() + 4096, Length: 64, LKey: b.mr.LKey()}}}})
		return err
	}
	send := func(a *endpoint) {
		t.Helper()
		wr := verbs.SendWR{ID: 1, Opcode: verbs.OpSend, Flags: verbs.SendSignaled,
			SGL: []verbs.SGE{{Addr: a.mr.Addr(), Length: 2, LKey: a.mr.LKey()}}}
		if _, err := a.qp.PostSend([]verbs.SendWR{wr}); err != nil {
			t.Fatal(err)
		}
		if wc := pollWC(t, a.scq); wc.Status != verbs.WCSuccess {
			t.Fatalf("send: %v", wc.Status)
		}
	}
	received := func(want uint64) {
		t.Helper()
		if wc := pollWC(t, b.rcq); wc.ID != want || wc.Status != verbs.WCSuccess {
			t.Fatalf("receive %d (%v), want %d", wc.ID, wc.Status, want)
		}
	}
	if err := recv(100); err != nil {
		t.Fatal(err)
	}
	send(a2)
	received(100)
	if err := recv(101); err != nil {
		t.Fatal(err)
	}
	send(a1)
	received(101)
	send(a2) // no receive posted: dropped
	wc := make([]verbs.WC, 1)
	if n, _ := b.rcq.Poll(wc); n != 0 {
		t.Fatalf("a message that found no receive completed receive %d", wc[0].ID)
	}
	if err := recv(102); err != nil {
		t.Fatalf("post a receive after the drop: %v", err)
	}
	send(a1)
	received(102)
}

// TestRTSModifyKeepsRetries: a modify from RTS to RTS (here of the minimum
// RNR timer) while a SEND waits for its RNR retry neither restores the
// retries used nor sends again at once: with rnr_retry 1 the SEND fails
// with RNR_RETRY_EXC_ERR after its one retry, modifies or not.
func TestRTSModifyKeepsRetries(t *testing.T) {
	ctx := openBench(t)
	t.Cleanup(func() { ctx.Close() })
	x, y := newEndpoint(t, ctx, 1<<16), newEndpoint(t, ctx, 1<<16)
	t.Cleanup(y.close)
	t.Cleanup(x.close)
	if err := x.connectWith(y.info(), 14, 1); err != nil {
		t.Fatal(err)
	}
	if err := y.connect(x.info()); err != nil {
		t.Fatal(err)
	}
	// y posts no receive and asks for the RNR timer 0 (655 ms).
	if err := y.qp.Modify(&verbs.QPAttr{MinRNRTimer: 0}, verbs.AttrMinRNRTimer); err != nil {
		t.Fatal(err)
	}
	wr := verbs.SendWR{ID: 9, Opcode: verbs.OpSend, Flags: verbs.SendSignaled,
		SGL: []verbs.SGE{{Addr: x.mr.Addr(), Length: 2, LKey: x.mr.LKey()}}}
	if _, err := x.qp.PostSend([]verbs.SendWR{wr}); err != nil {
		t.Fatal(err)
	}
	wc := make([]verbs.WC, 1)
	start := time.Now()
	for time.Since(start) < 6*time.Second {
		if err := x.qp.Modify(&verbs.QPAttr{MinRNRTimer: 12}, verbs.AttrMinRNRTimer); err != nil {
			t.Fatal(err)
		}
		n, err := x.scq.Poll(wc)
		if err != nil {
			t.Fatal(err)
		}
		if n == 1 {
			if wc[0].Status != verbs.WCRNRRetryExcErr {
				t.Fatalf("completion status %v, want %v", wc[0].Status, verbs.WCRNRRetryExcErr)
			}
			t.Logf("failed after %v", time.Since(start))
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatal("no completion within 6 s: the modifies restored the RNR retries")
}

// TestUCSendErrorKeepsReceiving: a UC QP whose send failed locally is in
// SQE, where its receive queue still works: a message sent to it lands.
func TestUCSendErrorKeepsReceiving(t *testing.T) {
	ctx := openBench(t)
	t.Cleanup(func() { ctx.Close() })
	a := newEndpointOf(t, ctx, 1<<16, verbs.UC, 4)
	b := newEndpointOf(t, ctx, 1<<16, verbs.UC, 4)
	t.Cleanup(a.close)
	t.Cleanup(b.close)
	a.connectUC(t, b.info())
	b.connectUC(t, a.info())
	bad := verbs.SendWR{ID: 1, Opcode: verbs.OpSend, Flags: verbs.SendSignaled,
		SGL: []verbs.SGE{{Addr: a.mr.Addr(), Length: 2, LKey: a.mr.LKey() ^ 0x80}}}
	if _, err := a.qp.PostSend([]verbs.SendWR{bad}); err != nil {
		t.Fatal(err)
	}
	if wc := pollWC(t, a.scq); wc.Status != verbs.WCLocProtErr {
		t.Fatalf("bad send: %v, want %v", wc.Status, verbs.WCLocProtErr)
	}
	if attr, err := a.qp.Query(); err != nil || attr.State != verbs.StateSQE {
		t.Fatalf("after the failed send: %v, %v; want SQE", attr.State, err)
	}
	if _, err := a.qp.PostRecv([]verbs.RecvWR{{ID: 5, SGL: []verbs.SGE{{Addr: a.mr.Addr() + 4096, Length: 64, LKey: a.mr.LKey()}}}}); err != nil {
		t.Fatal(err)
	}
	b.mem.Bytes()[0], b.mem.Bytes()[1] = 0x5A, 0xA5
	if _, err := b.qp.PostSend([]verbs.SendWR{{ID: 2, Opcode: verbs.OpSend, Flags: verbs.SendSignaled,
		SGL: []verbs.SGE{{Addr: b.mr.Addr(), Length: 2, LKey: b.mr.LKey()}}}}); err != nil {
		t.Fatal(err)
	}
	if wc := pollWC(t, b.scq); wc.Status != verbs.WCSuccess {
		t.Fatalf("send to the QP in SQE: %v", wc.Status)
	}
	if wc := pollWC(t, a.rcq); wc.ID != 5 || wc.Status != verbs.WCSuccess || wc.ByteLen != 2 {
		t.Fatalf("receive %d: %v, %d bytes; want 5, success, 2 bytes", wc.ID, wc.Status, wc.ByteLen)
	}
	if got := a.mem.Bytes()[4096:4098]; got[0] != 0x5A || got[1] != 0xA5 {
		t.Fatalf("received % x", got)
	}
}

// TestDestroyDuringDelivery: a QP destroyed or reset while a peer is
// delivering a SEND into it leaves no completion behind for it in its CQ.
// A completion for a destroyed QP would make every later Poll of that CQ
// fail (the provider cannot map its handle), as the driver's purge of the
// CQ at destroy promises there is none.
func TestDestroyDuringDelivery(t *testing.T) {
	for _, how := range []string{"destroy", "reset"} {
		t.Run(how, func(t *testing.T) {
			ctx := openBench(t)
			t.Cleanup(func() { ctx.Close() })
			const size = 1 << 16
			x := newEndpointOf(t, ctx, size, verbs.UC, 1)
			y := newEndpointOf(t, ctx, 64*size, verbs.UC, 64)
			t.Cleanup(y.close)
			t.Cleanup(x.close)
			wc := make([]verbs.WC, 16)
			for round := range 200 {
				if round > 0 {
					if how == "destroy" {
						_ = y.qp.Close()
						qp, err := y.pd.CreateQP(verbs.QPInit{Type: verbs.UC, SendCQ: y.scq, RecvCQ: y.rcq,
							Cap: verbs.QPCap{MaxSendWR: 128, MaxRecvWR: 64, MaxSendSGE: 1, MaxRecvSGE: 1}})
						if err != nil {
							t.Fatal(err)
						}
						y.qp = qp
					}
					if err := x.qp.Modify(&verbs.QPAttr{State: verbs.StateReset}, verbs.AttrState); err != nil {
						t.Fatal(err)
					}
				}
				y.connectUC(t, x.info())
				x.connectUC(t, y.info())
				for i := range 64 {
					sge := verbs.SGE{Addr: y.mr.Addr() + uint64(i*size), Length: size, LKey: y.mr.LKey()}
					if _, err := y.qp.PostRecv([]verbs.RecvWR{{ID: uint64(i), SGL: []verbs.SGE{sge}}}); err != nil {
						t.Fatal(err)
					}
				}
				var stop atomic.Bool
				done := make(chan error, 1)
				go func() {
					swc := make([]verbs.WC, 1)
					wr := verbs.SendWR{ID: 1, Opcode: verbs.OpSend, Flags: verbs.SendSignaled,
						SGL: []verbs.SGE{{Addr: x.mr.Addr(), Length: size, LKey: x.mr.LKey()}}}
					for !stop.Load() {
						if _, err := x.qp.PostSend([]verbs.SendWR{wr}); err != nil {
							done <- err
							return
						}
						for n := 0; n == 0; {
							var err error
							if n, err = x.scq.Poll(swc); err != nil {
								done <- err
								return
							}
						}
					}
					done <- nil
				}()
				time.Sleep(time.Duration(round%20) * 10 * time.Microsecond)
				if how == "destroy" {
					if err := y.qp.Close(); err != nil {
						t.Fatal(err)
					}
				} else if err := y.qp.Modify(&verbs.QPAttr{State: verbs.StateReset}, verbs.AttrState); err != nil {
					t.Fatal(err)
				}
				stop.Store(true)
				if err := <-done; err != nil {
					t.Fatal(err)
				}
				for {
					n, err := y.rcq.Poll(wc)
					if err != nil {
						t.Fatalf("round %d: poll after %s: %v", round, how, err)
					}
					if n == 0 {
						break
					}
					t.Fatalf("round %d: receive %d completed after the %s", round, wc[0].ID, how)
				}
			}
		})
	}
}

// TestCloseWithCQLockHeld: a QP closes even while its CQ's lock is held
// by a process that neither releases it nor dies (a peer stopped with
// SIGSTOP in the middle of a delivery): its completions stay in the CQ.
func TestCloseWithCQLockHeld(t *testing.T) {
	ctx := openBench(t)
	t.Cleanup(func() { ctx.Close() })
	x := newEndpoint(t, ctx, 4096)
	t.Cleanup(x.close)
	c := x.scq.(*cq)
	h := c.c.h
	stopped := h.slot%(maxSlots-1) + 1 // another slot, whose process is not known dead
	if !atomic.CompareAndSwapUint32(&c.view.ctx.lock, 0, stopped) {
		t.Fatal("the CQ's lock is held")
	}
	done := make(chan error, 1)
	start := time.Now()
	go func() { done <- x.qp.Close() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
		if el := time.Since(start); el < purgeBound {
			t.Errorf("closed in %v, before the lock's bound %v", el, purgeBound)
		}
	case <-time.After(purgeBound + 20*time.Second):
		t.Fatal("the QP's close still waits for its CQ's lock")
	}
	// The stopped process may still write into the QP's queues and the
	// CQ: neither is reused.
	qpIdx, cqIdx := x.qp.(*qp).idx, c.idx
	if err := x.scq.Close(); err != nil {
		t.Fatal(err)
	}
	h.mu.Lock()
	reused := slices.Contains(h.freeQP, qpIdx) || slices.Contains(h.freeCQ, cqIdx)
	h.mu.Unlock()
	if reused {
		t.Error("the QP's or the CQ's entry is free for reuse while a stopped process holds the CQ's lock")
	}
	atomic.StoreUint32(&c.view.ctx.lock, 0)
}
