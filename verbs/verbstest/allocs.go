package verbstest

import (
	"testing"

	"github.com/pvperf/pvperf/verbs"
)

// testAllocs checks that the data path does not allocate. The counts are
// of the whole process, so nothing else may run meanwhile.
func testAllocs(t *testing.T, tg Target) {
	f := newFixture(t, tg)
	const runs = 100
	p := f.pair(pairOpts{typ: verbs.RC, cqSize: 1024, cap: verbs.QPCap{MaxSendWR: 256, MaxRecvWR: 256, MaxSendSGE: 1, MaxRecvSGE: 1}})
	a, b := p.A, p.B
	write := []verbs.SendWR{p.sendWR(1, verbs.OpRDMAWrite, 0, sge(a.MR, 0, 64))}
	write[0].RemoteAddr, write[0].RKey = b.MR.Addr(), b.MR.RKey()
	wc := make([]verbs.WC, 4)
	var err error
	check := func(what string, allocs float64) {
		t.Helper()
		if err != nil {
			t.Errorf("%s: %v", what, err)
			err = nil
		}
		if allocs != 0 {
			t.Errorf("%s: %v allocations per call, want 0", what, allocs)
		}
	}
	check("PostSend (unsignaled RDMA write, 1 SGE)", testing.AllocsPerRun(runs, func() {
		if _, e := a.QP.PostSend(write); e != nil {
			err = e
		}
	}))
	signaled := []verbs.SendWR{write[0]}
	signaled[0].Flags = verbs.SendSignaled
	check("PostSend (signaled RDMA write) and Poll", testing.AllocsPerRun(runs, func() {
		if _, e := a.QP.PostSend(signaled); e != nil {
			err = e
		}
		for {
			n, e := a.SendCQ.Poll(wc)
			if e != nil {
				err = e
				return
			}
			if n > 0 {
				return
			}
		}
	}))
	check("Poll (empty CQ)", testing.AllocsPerRun(runs, func() {
		if n, e := b.RecvCQ.Poll(wc); e != nil || n != 0 {
			err = e
		}
	}))
	// Fill A's send CQ, then poll it one completion at a time.
	for range runs + 1 {
		postSend(t, a.QP, signaled...)
	}
	polled := 0
	check("Poll (non-empty CQ)", testing.AllocsPerRun(runs, func() {
		for {
			n, e := a.SendCQ.Poll(wc[:1])
			if e != nil {
				err = e
				return
			}
			if n > 0 {
				polled += n
				return
			}
		}
	}))
	if polled != runs+1 {
		t.Errorf("polled %d completions, want %d", polled, runs+1)
	}
	recv := []verbs.RecvWR{{ID: 2, SGL: []verbs.SGE{sge(b.MR, 4096, 64)}}}
	check("PostRecv (1 SGE)", testing.AllocsPerRun(runs, func() {
		if _, e := b.QP.PostRecv(recv); e != nil {
			err = e
		}
	}))
	check("ReqNotify", testing.AllocsPerRun(runs, func() {
		if e := b.RecvCQ.ReqNotify(false); e != nil {
			err = e
		}
	}))
	check("ReqNotify (solicited only)", testing.AllocsPerRun(runs, func() {
		if e := b.RecvCQ.ReqNotify(true); e != nil {
			err = e
		}
	}))
}
