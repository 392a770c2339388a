//go:build linux

package emu

import (
	"testing"

	"github.com/pvperf/pvperf/verbs"
)

// TestDataPathAllocs: on the memory-copy transport, posting (and the
// doorbell that executes the work request) and polling allocate nothing:
// an RDMA WRITE, a SEND with its receive, and the polls of both
// completions.
func TestDataPathAllocs(t *testing.T) {
	a, b := connectedPair(t, 0)
	sge := []verbs.SGE{{Addr: a.mr.Addr(), Length: 4096, LKey: a.mr.LKey()}}
	write := []verbs.SendWR{{ID: 1, Opcode: verbs.OpRDMAWrite, Flags: verbs.SendSignaled, SGL: sge, RemoteAddr: b.mr.Addr(), RKey: b.mr.RKey()}}
	send := []verbs.SendWR{{ID: 2, Opcode: verbs.OpSend, Flags: verbs.SendSignaled, SGL: sge}}
	recv := []verbs.RecvWR{{ID: 3, SGL: []verbs.SGE{{Addr: b.mr.Addr(), Length: 4096, LKey: b.mr.LKey()}}}}
	wc := make([]verbs.WC, 4)
	bad := ""
	one := func(what string, n int, err error) {
		if (n != 1 || err != nil) && bad == "" {
			bad = what
		}
	}
	post := func(what string, q verbs.QP, wrs []verbs.SendWR) { n, err := q.PostSend(wrs); one(what, n, err) }
	poll := func(what string, cq verbs.CQ) { n, err := cq.Poll(wc); one(what, n, err) }
	for _, c := range []struct {
		name string
		f    func()
	}{
		{"RDMA WRITE and its completion", func() {
			post("post write", a.qp, write)
			poll("poll write", a.scq)
		}},
		{"SEND, its receive and both completions", func() {
			n, err := b.qp.PostRecv(recv)
			one("post recv", n, err)
			post("post send", a.qp, send)
			poll("poll send", a.scq)
			poll("poll recv", b.rcq)
		}},
	} {
		c.f() // warm up
		if n := testing.AllocsPerRun(1000, c.f); n != 0 {
			t.Errorf("%s: %v allocations", c.name, n)
		}
		if bad != "" {
			t.Fatalf("%s: %s failed or completed nothing", c.name, bad)
		}
	}
}
