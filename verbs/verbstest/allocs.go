package verbstest

import (
	"errors"
	"testing"
	"time"

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
	// A device that executes only SENDs gets SENDs, each with a receive
	// posted before the phase that sends it (outside the counting).
	sendOnly := tg.Quirks.SendOnly != ""
	recvs := func() {}
	if sendOnly {
		t.Logf("SENDs instead of RDMA writes (device quirk: %s)", tg.Quirks.SendOnly)
		write[0].Opcode = verbs.OpSend
		next := 0
		recvs = func() {
			for range runs + 1 {
				postRecv(t, b.QP, verbs.RecvWR{ID: uint64(1000 + next), SGL: []verbs.SGE{sge(b.MR, 4096+64*(next%32), 64)}})
				next++
			}
		}
	}
	wc := make([]verbs.WC, 4)
	var err error
	// poll spins on cq until it holds a completion; a device that never
	// completes fails the test instead of hanging it.
	poll := func(cq verbs.CQ, wc []verbs.WC) (int, error) {
		start := time.Now()
		for i := 0; ; i++ {
			n, e := cq.Poll(wc)
			if e != nil || n > 0 {
				return n, e
			}
			if i == 1<<20 {
				i = 0
				if time.Since(start) > 30*time.Second {
					return 0, errNoCompletion
				}
			}
		}
	}
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
	recvs()
	check("PostSend (unsignaled RDMA write, 1 SGE)", testing.AllocsPerRun(runs, func() {
		if _, e := a.QP.PostSend(write); e != nil {
			err = e
		}
	}))
	signaled := []verbs.SendWR{write[0]}
	signaled[0].Flags = verbs.SendSignaled
	recvs()
	check("PostSend (signaled RDMA write) and Poll", testing.AllocsPerRun(runs, func() {
		if _, e := a.QP.PostSend(signaled); e != nil {
			err = e
		}
		if _, e := poll(a.SendCQ, wc); e != nil {
			err = e
		}
	}))
	check("Poll (empty CQ)", testing.AllocsPerRun(runs, func() {
		if n, e := b.RecvCQ.Poll(wc); e != nil || n != 0 {
			err = e
		}
	}))
	// Fill A's send CQ, then poll it one completion at a time.
	if sendOnly {
		// Every send so far completed, unsignaled ones too: empty the CQs.
		drain(a.SendCQ, wc)
		drain(b.RecvCQ, wc)
	}
	recvs()
	for range runs + 1 {
		postSend(t, a.QP, signaled...)
	}
	polled := 0
	check("Poll (non-empty CQ)", testing.AllocsPerRun(runs, func() {
		n, e := poll(a.SendCQ, wc[:1])
		if e != nil {
			err = e
			return
		}
		polled += n
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

// errNoCompletion: a spinning poll gave up.
var errNoCompletion = errors.New("no completion within 30s")

// drain polls cq until it is empty, for at most a second.
func drain(cq verbs.CQ, wc []verbs.WC) {
	for end := time.Now().Add(time.Second); time.Now().Before(end); {
		if n, err := cq.Poll(wc); err != nil || n == 0 {
			time.Sleep(10 * time.Millisecond)
			if n, err = cq.Poll(wc); err != nil || n == 0 {
				return
			}
		}
	}
}
