//go:build linux

package emu

import (
	"testing"
	"time"

	"github.com/pvperf/pvperf/verbs"
)

// connectedPair opens emu0 and returns two RC endpoints connected to each
// other, with receives posted on both.
func connectedPair(t *testing.T) (x, y *endpoint) {
	t.Helper()
	ctx := openBench(t)
	t.Cleanup(func() { ctx.Close() })
	x, y = newEndpoint(t, ctx, 1<<16), newEndpoint(t, ctx, 1<<16)
	t.Cleanup(y.close)
	t.Cleanup(x.close)
	if err := x.connect(y.info()); err != nil {
		t.Fatal(err)
	}
	if err := y.connect(x.info()); err != nil {
		t.Fatal(err)
	}
	prepostRecvs(t, x, 4)
	prepostRecvs(t, y, 4)
	return x, y
}

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
			x, y := connectedPair(t)
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
