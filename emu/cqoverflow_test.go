//go:build linux

package emu

import (
	"context"
	"testing"
	"time"

	"github.com/pvperf/pvperf/verbs"
)

// TestRecvCQOverflow: a SEND whose receive completion finds the
// responder's receive CQ full fails the responder QP, with no event of
// its own (the CQ raises CQ_ERR), and the requester, unanswered, fails
// with RETRY_EXC_ERR: rdma_rxe's class G error, over memory copy and on
// the wire.
func TestRecvCQOverflow(t *testing.T) {
	for _, transport := range []string{"memory", TransportRoCE} {
		t.Run(transport, func(t *testing.T) {
			var x, y *endpoint
			if transport == "memory" {
				ctx := openBench(t)
				t.Cleanup(func() { ctx.Close() })
				x, y = newEndpoint(t, ctx, 1<<16), newEndpoint(t, ctx, 1<<16)
				t.Cleanup(x.close)
				t.Cleanup(y.close)
				if err := y.connect(x.info()); err != nil {
					t.Fatal(err)
				}
			} else {
				f := newWireFixture(t, 170)
				x, y = f.b, f.a
			}
			// The requester's ACK timeout: 4.096 µs << 12, about 17 ms,
			// its 8 transmissions 134 ms: long enough for a responder
			// thread descheduled on a loaded machine (1 ms was not),
			// short enough for the overflow's RETRY_EXC_ERR.
			if err := x.qp.Modify(&verbs.QPAttr{State: verbs.StateReset}, verbs.AttrState); err != nil {
				t.Fatal(err)
			}
			if err := x.connectWith(y.info(), 12, 7); err != nil {
				t.Fatal(err)
			}
			recv := []verbs.RecvWR{{SGL: []verbs.SGE{{Addr: y.mr.Addr(), Length: 64, LKey: y.mr.LKey()}}}}
			send := []verbs.SendWR{{Opcode: verbs.OpSend, Flags: verbs.SendSignaled,
				SGL: []verbs.SGE{{Addr: x.mr.Addr(), Length: 8, LKey: x.mr.LKey()}}}}
			sent := 0
			var last verbs.WC
			for range 1000 {
				if _, err := y.qp.PostRecv(recv); err != nil {
					t.Fatal(err)
				}
				if _, err := x.qp.PostSend(send); err != nil {
					t.Fatal(err)
				}
				if last = pollWC(t, x.scq); last.Status != verbs.WCSuccess {
					break
				}
				sent++
			}
			if last.Status != verbs.WCRetryExcErr {
				t.Fatalf("after %d SENDs completed: %v, want RETRY_EXC_ERR", sent, last.Status)
			}
			if a, err := y.qp.Query(); err != nil || a.State != verbs.StateErr {
				t.Errorf("responder QP: %v (%v), want ERR", a.State, err)
			}
			if got := successes(y.rcq); got != sent {
				t.Errorf("%d SENDs acknowledged, %d received", sent, got)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
			defer cancel()
			var events []verbs.EventType
			for {
				ev, err := y.ctx.AsyncEvent(ctx)
				if err != nil {
					break
				}
				events = append(events, ev.Type)
			}
			if len(events) != 1 || events[0] != verbs.EventCQErr {
				t.Errorf("responder's events %v, want one CQ_ERR", events)
			}
		})
	}
}

// TestRecvCQOverflowShared: two requesters, in two threads, send to two
// responders that share one receive CQ until it overflows. Whatever the
// interleaving (a delivery may find the CQ full after another QP's
// completion took the last slot), every SEND acknowledged has its receive
// completion in the CQ, and both requesters end with RETRY_EXC_ERR.
func TestRecvCQOverflowShared(t *testing.T) {
	ctx := openBench(t)
	t.Cleanup(func() { ctx.Close() })
	var x, y [2]*endpoint
	for i := range 2 {
		x[i], y[i] = newEndpoint(t, ctx, 1<<16), newEndpoint(t, ctx, 1<<16)
		t.Cleanup(x[i].close)
		t.Cleanup(y[i].close)
	}
	// y[1] takes its receives' completions on y[0]'s receive CQ.
	if err := y[1].qp.Close(); err != nil {
		t.Fatal(err)
	}
	qp, err := y[1].pd.CreateQP(verbs.QPInit{Type: verbs.RC, SendCQ: y[1].scq, RecvCQ: y[0].rcq,
		Cap: verbs.QPCap{MaxSendWR: 128, MaxRecvWR: 128, MaxSendSGE: 1, MaxRecvSGE: 1}})
	if err != nil {
		t.Fatal(err)
	}
	y[1].qp = qp
	for i := range 2 {
		if err := y[i].connect(x[i].info()); err != nil {
			t.Fatal(err)
		}
		if err := x[i].connectWith(y[i].info(), 8, 7); err != nil {
			t.Fatal(err)
		}
	}
	type outcome struct {
		sent int
		last verbs.WCStatus
		err  error
	}
	done := make(chan outcome, 2)
	for i := range 2 {
		go func(x, y *endpoint) {
			recv := []verbs.RecvWR{{SGL: []verbs.SGE{{Addr: y.mr.Addr(), Length: 64, LKey: y.mr.LKey()}}}}
			send := []verbs.SendWR{{Opcode: verbs.OpSend, Flags: verbs.SendSignaled,
				SGL: []verbs.SGE{{Addr: x.mr.Addr(), Length: 8, LKey: x.mr.LKey()}}}}
			wc := make([]verbs.WC, 1)
			var o outcome
			for range 1000 {
				if _, o.err = y.qp.PostRecv(recv); o.err != nil {
					break
				}
				if _, o.err = x.qp.PostSend(send); o.err != nil {
					break
				}
				deadline := time.Now().Add(5 * time.Second)
				n := 0
				for n == 0 && o.err == nil && time.Now().Before(deadline) {
					n, o.err = x.scq.Poll(wc)
				}
				if n == 0 || o.err != nil {
					o.last = verbs.WCGeneralErr
					break
				}
				if o.last = wc[0].Status; o.last != verbs.WCSuccess {
					break
				}
				o.sent++
			}
			done <- o
		}(x[i], y[i])
	}
	sent := 0
	for range 2 {
		o := <-done
		if o.err != nil || o.last != verbs.WCRetryExcErr {
			t.Errorf("a requester ended with %v (%v) after %d SENDs, want RETRY_EXC_ERR", o.last, o.err, o.sent)
		}
		sent += o.sent
	}
	if got := successes(y[0].rcq); got != sent {
		t.Errorf("%d SENDs acknowledged, %d receive completions", sent, got)
	}
}

// successes polls cq empty and returns how many of its completions
// succeeded.
func successes(cq verbs.CQ) int {
	got := 0
	wc := make([]verbs.WC, 64)
	for {
		n, err := cq.Poll(wc)
		if err != nil || n == 0 {
			return got
		}
		for _, w := range wc[:n] {
			if w.Status == verbs.WCSuccess {
				got++
			}
		}
	}
}
