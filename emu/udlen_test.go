//go:build linux

package emu

import (
	"testing"
	"time"

	"github.com/pvperf/pvperf/verbs"
	"github.com/pvperf/pvperf/verbs/verbstest"
)

// TestUnreliableSendLength: a UD or UC sender's completion has the
// message's length whatever became of the message (rxe reports the WQE's
// length), over memory copy as on the wire: a datagram dropped for its
// Q_Key, or a UC message without a receive, does not show in it.
func TestUnreliableSendLength(t *testing.T) {
	ctx := openBench(t)
	t.Cleanup(func() { ctx.Close() })
	for _, typ := range []verbs.QPType{verbs.UD, verbs.UC} {
		t.Run(typ.String(), func(t *testing.T) {
			p := verbstest.NewPair(t, ctx, ctx, typ, verbstest.DefaultConnParams())
			a, b := p.A, p.B
			w := verbs.SendWR{ID: 7, Opcode: verbs.OpSend, Flags: verbs.SendSignaled,
				SGL: []verbs.SGE{{Addr: a.MR.Addr(), Length: 64, LKey: a.MR.LKey()}}}
			if typ == verbs.UD {
				// A wrong Q_Key: dropped by the receiver.
				w.AH, w.RemoteQPN, w.RemoteQKey = a.AH, b.QP.Num(), 0x22222222
			} // UC: no receive posted, dropped too
			if _, err := a.QP.PostSend([]verbs.SendWR{w}); err != nil {
				t.Fatal(err)
			}
			wc := make([]verbs.WC, 1)
			for end := time.Now().Add(10 * time.Second); ; {
				n, err := a.SendCQ.Poll(wc)
				if err != nil {
					t.Fatal(err)
				}
				if n == 1 {
					break
				}
				if time.Now().After(end) {
					t.Fatal("no send completion")
				}
			}
			if wc[0].Status != verbs.WCSuccess || wc[0].ByteLen != 64 {
				t.Errorf("sender's completion %v, length %d; want success, 64", wc[0].Status, wc[0].ByteLen)
			}
			if n, _ := b.RecvCQ.Poll(wc); n != 0 {
				t.Errorf("the receiver got a completion: %+v", wc[0])
			}
		})
	}
}
