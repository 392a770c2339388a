package uverbs

import (
	"encoding/binary"
	"testing"

	"github.com/pvperf/pvperf/internal/mmio"
	"github.com/pvperf/pvperf/verbs"
)

// BenchmarkRXEHop is the user-space work of one hop of a send ping-pong on
// rdma_rxe's queues (send_lat's loop: a poll that finds the receive
// completion, a receive posted, a send posted, a poll for its completion),
// with the kernel scripted: its doorbell write returns at once and the
// completions are written by the benchmark. Run under qemu-x86_64 it says
// what that work costs on an emulated CPU (natively about 57 ns of the
// 76 ns an op takes, the rest being the scripted kernel's completions; under
// qemu-x86_64 -cpu max about 600 ns an op):
//
//	go test -c -o uverbs.test ./verbs/uverbs/
//	qemu-x86_64 -cpu max ./uverbs.test -test.run '^$' -test.bench RXEHop
func BenchmarkRXEHop(b *testing.B) {
	k, qp, cq, mr := rxeRTS(b)
	k.quiet = true
	send := []verbs.SendWR{{Opcode: verbs.OpSend, Flags: verbs.SendSignaled, SGL: []verbs.SGE{{Addr: mr.Addr(), Length: 2, LKey: mr.LKey()}}}}
	recv := []verbs.RecvWR{{SGL: []verbs.SGE{{Addr: mr.Addr(), Length: 64, LKey: mr.LKey()}}}}
	wc := make([]verbs.WC, 1)
	rq := qp.(*rxeQP)
	rcq := cq.(*rxeCQ)
	complete := func(op verbs.WCOpcode) {
		prod := mmio.Load32(rcq.q.prod)
		w := rcq.q.elem(prod)
		binary.LittleEndian.PutUint64(w[0:], 5)
		binary.LittleEndian.PutUint32(w[12:], uint32(op))
		binary.LittleEndian.PutUint32(w[28:], qp.Num())
		mmio.Store32(rcq.q.prod, (prod+1)&rcq.q.mask)
	}
	for b.Loop() {
		complete(verbs.WCRecv)
		if n, _ := cq.Poll(wc); n != 1 {
			b.Fatal("no completion")
		}
		if _, err := qp.PostRecv(recv); err != nil {
			b.Fatal(err)
		}
		if _, err := qp.PostSend(send); err != nil {
			b.Fatal(err)
		}
		complete(verbs.WCSend)
		if n, _ := cq.Poll(wc); n != 1 {
			b.Fatal("no completion")
		}
		// The kernel takes both.
		mmio.Store32(rq.sq.cons, mmio.Load32(rq.sq.prod))
		mmio.Store32(rq.rq.cons, mmio.Load32(rq.rq.prod))
	}
}
