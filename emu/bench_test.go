//go:build linux

package emu

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/pvperf/pvperf/internal/unix"
	"github.com/pvperf/pvperf/verbs"
)

// The benchmarks of the emulated device, each beside a plain baseline
// measured in the same run:
//
//   - BenchmarkWriteBW: RDMA WRITE of 64 KiB on one RC QP, against copy() of
//     64 KiB between two buffers (metric of_copy: emulator / copy).
//   - BenchmarkWriteRate: RDMA WRITE of 2 bytes, every 100th signalled, in
//     messages per second (Mmsg/s).
//   - BenchmarkPingPong: SEND/RECV ping-pong of 2 bytes (emu) and
//     perftest write_lat's RDMA WRITE ping-pong of 2 bytes (emu-write)
//     between two goroutines on two OS threads, against a bare atomic-flag
//     ping-pong (metric x_bare: emulator half round trip / bare half round
//     trip, measured interleaved: see slicedPingPong). Its bare-work
//     runs are the bare ping-pong with a fixed amount of arithmetic on
//     each side per hop (no memory touched): the floor of a ping-pong
//     whose hop costs that much CPU. Their x_bare, beside the emulator's,
//     tells how much of the emulator's ratio is the CPU cost of its hop
//     (BenchmarkSendRecvCost, BenchmarkWritePostCost) and how much is
//     anything else, such as cache lines moving between the cores.
//   - BenchmarkTwoProcess: the same write bandwidth and ping-pongs between
//     two processes through shared memory (the peer is this test binary
//     started again), against copy() and an atomic flag in a shared page.

const (
	benchChildEnv = "PVPERF_EMU_BENCH_CHILD"
	benchPSN      = 0x1234
)

// endpoint is one side of a benchmark connection: a QP, its CQs and a
// registered buffer.
type endpoint struct {
	ctx verbs.Context
	pd  verbs.PD
	mem verbs.Memory
	mr  verbs.MR
	scq verbs.CQ
	rcq verbs.CQ
	qp  verbs.QP
	gid verbs.GID
}

// peerInfo is what two endpoints exchange out of band, as perftest does.
type peerInfo struct {
	QPN  uint32
	PSN  uint32
	GID  verbs.GID
	RKey uint32
	Addr uint64
}

func newEndpoint(tb testing.TB, ctx verbs.Context, size int) *endpoint {
	tb.Helper()
	return newEndpointOf(tb, ctx, size, verbs.RC, 128)
}

// newEndpointOf is newEndpoint with a QP of type typ whose RQ holds
// maxRecv receives.
func newEndpointOf(tb testing.TB, ctx verbs.Context, size int, typ verbs.QPType, maxRecv int) *endpoint {
	tb.Helper()
	e := &endpoint{ctx: ctx}
	var err error
	must := func(err error) {
		if err != nil {
			tb.Fatal(err)
		}
	}
	e.pd, err = ctx.AllocPD()
	must(err)
	e.mem, err = ctx.AllocMemory(size)
	must(err)
	e.mr, err = e.pd.RegMR(e.mem.Bytes(), verbs.AccessLocalWrite|verbs.AccessRemoteWrite|verbs.AccessRemoteRead)
	must(err)
	e.scq, err = ctx.CreateCQ(verbs.CQInit{Entries: 256})
	must(err)
	e.rcq, err = ctx.CreateCQ(verbs.CQInit{Entries: 256})
	must(err)
	e.qp, err = e.pd.CreateQP(verbs.QPInit{Type: typ, SendCQ: e.scq, RecvCQ: e.rcq,
		Cap: verbs.QPCap{MaxSendWR: 128, MaxRecvWR: maxRecv, MaxSendSGE: 1, MaxRecvSGE: 1}})
	must(err)
	g, err := ctx.QueryGID(1, 0)
	must(err)
	e.gid = g.GID
	return e
}

func (e *endpoint) info() peerInfo {
	return peerInfo{QPN: e.qp.Num(), PSN: benchPSN, GID: e.gid, RKey: e.mr.RKey(), Addr: e.mr.Addr()}
}

// connect moves the QP through INIT, RTR and RTS towards the peer, with the
// attributes perftest uses.
func (e *endpoint) connect(p peerInfo) error { return e.connectWith(p, 14, 7) }

// connectWith is connect with the local ACK timeout timeout (4.096 µs
// times 2 to that power) and rnr_retry rnrRetry.
func (e *endpoint) connectWith(p peerInfo, timeout, rnrRetry uint8) error {
	acc := verbs.AccessLocalWrite | verbs.AccessRemoteWrite | verbs.AccessRemoteRead
	if err := e.qp.Modify(&verbs.QPAttr{State: verbs.StateInit, Port: 1, Access: acc},
		verbs.AttrState|verbs.AttrPKeyIndex|verbs.AttrPort|verbs.AttrAccessFlags); err != nil {
		return err
	}
	if err := e.qp.Modify(&verbs.QPAttr{State: verbs.StateRTR, PathMTU: verbs.MTU1024, DestQPN: p.QPN, RQPSN: p.PSN,
		MaxDestRdAtomic: 1, MinRNRTimer: 12, AH: verbs.AHAttr{IsGlobal: true, Port: 1, GRH: verbs.GRH{DGID: p.GID, HopLimit: 64}}},
		verbs.AttrState|verbs.AttrAV|verbs.AttrPathMTU|verbs.AttrDestQPN|verbs.AttrRQPSN|verbs.AttrMaxDestRdAtomic|verbs.AttrMinRNRTimer); err != nil {
		return err
	}
	return e.qp.Modify(&verbs.QPAttr{State: verbs.StateRTS, SQPSN: benchPSN, Timeout: timeout, RetryCnt: 7, RNRRetry: rnrRetry, MaxRdAtomic: 1},
		verbs.AttrState|verbs.AttrTimeout|verbs.AttrRetryCnt|verbs.AttrRNRRetry|verbs.AttrSQPSN|verbs.AttrMaxQPRdAtomic)
}

func (e *endpoint) close() {
	for _, c := range []interface{ Close() error }{e.qp, e.scq, e.rcq, e.mr, e.mem, e.pd} {
		_ = c.Close()
	}
}

func openBench(tb testing.TB) verbs.Context {
	tb.Helper()
	d, err := NewDevice("emu0", DefaultConfig())
	if err != nil {
		tb.Fatal(err)
	}
	ctx, err := d.Open()
	if err != nil {
		tb.Fatal(err)
	}
	return ctx
}

// writeLoop posts n RDMA writes of size bytes from local offset 0 to the
// peer, perftest style: at most depth outstanding, every cqMod-th and the
// last one signalled. It returns the elapsed time.
func writeLoop(tb testing.TB, e *endpoint, p peerInfo, size, n, depth, cqMod int) time.Duration {
	sge := []verbs.SGE{{Addr: e.mr.Addr(), Length: uint32(size), LKey: e.mr.LKey()}}
	wr := []verbs.SendWR{{Opcode: verbs.OpRDMAWrite, SGL: sge, RemoteAddr: p.Addr, RKey: p.RKey}}
	wc := make([]verbs.WC, 16)
	posted, completed, sinceSignal := 0, 0, 0
	start := time.Now()
	for completed < n {
		for posted < n && posted-completed < depth {
			sinceSignal++
			wr[0].Flags = 0
			if sinceSignal == cqMod || posted == n-1 {
				wr[0].Flags = verbs.SendSignaled
				sinceSignal = 0
			}
			if _, err := e.qp.PostSend(wr); err != nil {
				tb.Fatal(err)
			}
			posted++
		}
		k, err := e.scq.Poll(wc)
		if err != nil {
			tb.Fatal(err)
		}
		for i := range k {
			if err := wc[i].Err(); err != nil {
				tb.Fatal(err)
			}
			completed = min(completed+cqMod, posted)
		}
	}
	return time.Since(start)
}

// copyBW measures copy() of size bytes between two buffers, in bytes/s,
// for about d.
func copyBW(size int, d time.Duration) float64 {
	src := make([]byte, size)
	dst := make([]byte, size)
	n := 0
	start := time.Now()
	for time.Since(start) < d {
		for range 64 {
			copy(dst, src)
		}
		n += 64
	}
	return float64(n*size) / time.Since(start).Seconds()
}

func BenchmarkWriteBW(b *testing.B) {
	const size = 65536
	b.Run("copy/size=65536", func(b *testing.B) {
		src := make([]byte, size)
		dst := make([]byte, size)
		b.SetBytes(size)
		for b.Loop() {
			copy(dst, src)
		}
	})
	b.Run("emu/size=65536", func(b *testing.B) {
		ctx := openBench(b)
		defer ctx.Close()
		a, t := newEndpoint(b, ctx, 1<<20), newEndpoint(b, ctx, 1<<20)
		defer a.close()
		defer t.close()
		if err := a.connect(t.info()); err != nil {
			b.Fatal(err)
		}
		if err := t.connect(a.info()); err != nil {
			b.Fatal(err)
		}
		base := copyBW(size, 100*time.Millisecond)
		b.SetBytes(size)
		b.ResetTimer()
		el := writeLoop(b, a, t.info(), size, b.N, 128, 1)
		b.StopTimer()
		base = (base + copyBW(size, 100*time.Millisecond)) / 2
		b.ReportMetric(float64(b.N)*size/el.Seconds()/base, "of_copy")
	})
}

func BenchmarkWriteRate(b *testing.B) {
	ctx := openBench(b)
	defer ctx.Close()
	a, t := newEndpoint(b, ctx, 1<<20), newEndpoint(b, ctx, 1<<20)
	defer a.close()
	defer t.close()
	if err := a.connect(t.info()); err != nil {
		b.Fatal(err)
	}
	if err := t.connect(a.info()); err != nil {
		b.Fatal(err)
	}
	b.Run("size=2/cq_mod=100", func(b *testing.B) {
		el := writeLoop(b, a, t.info(), 2, b.N, 128, 100)
		b.ReportMetric(float64(b.N)/el.Seconds()/1e6, "Mmsg/s")
	})
}

// pingPong runs n SEND/RECV round trips of 2 bytes; the initiator sends
// first. Each side sends, then reposts the receive it consumed after its
// own send (off the round trip), and reaps its send completion: between
// a receive completion and the next send there is nothing else. (The
// initiator reposts the receive of round trip i after its send of round
// trip i+1, and the last one before returning.) Each poll asks for one
// completion, as perftest's latency loops do: asked for more, the pvrdma
// provider rings the POLL doorbell after the one it found, as rdma-core's
// does.
func pingPong(tb testing.TB, e *endpoint, n int, initiator bool) {
	send := []verbs.SendWR{{Opcode: verbs.OpSend, Flags: verbs.SendSignaled,
		SGL: []verbs.SGE{{Addr: e.mr.Addr(), Length: 2, LKey: e.mr.LKey()}}}}
	recv := []verbs.RecvWR{{SGL: []verbs.SGE{{Addr: e.mr.Addr() + 4096, Length: 64, LKey: e.mr.LKey()}}}}
	wc := make([]verbs.WC, 1) // one completion a poll (see above)
	poll := func(cq verbs.CQ) {
		for i := uint(1); ; i++ {
			k, err := cq.Poll(wc)
			if err != nil {
				tb.Fatal(err)
			}
			if k > 0 {
				if err := wc[0].Err(); err != nil {
					tb.Fatal(err)
				}
				return
			}
			abortCheck(i)
		}
	}
	post := func() {
		if _, err := e.qp.PostSend(send); err != nil {
			tb.Fatal(err)
		}
	}
	repost := func() {
		if _, err := e.qp.PostRecv(recv); err != nil {
			tb.Fatal(err)
		}
	}
	for i := 0; i < n; i++ {
		if initiator {
			post()
			if i > 0 {
				repost()
			}
			poll(e.scq)
			poll(e.rcq)
		} else {
			poll(e.rcq)
			post()
			repost()
			poll(e.scq)
		}
	}
	if initiator && n > 0 {
		repost()
	}
}

// connectBoth connects x's QP to y's and y's to x's.
func connectBoth(tb testing.TB, x, y *endpoint) {
	tb.Helper()
	if err := x.connect(y.info()); err != nil {
		tb.Fatal(err)
	}
	if err := y.connect(x.info()); err != nil {
		tb.Fatal(err)
	}
}

// connectedPair opens emu0 and returns two RC endpoints connected to each
// other, with recvs receives posted on both; closing them is left to tb's
// cleanup.
func connectedPair(tb testing.TB, recvs int) (x, y *endpoint) {
	tb.Helper()
	ctx := openBench(tb)
	tb.Cleanup(func() { ctx.Close() })
	x, y = newEndpoint(tb, ctx, 1<<16), newEndpoint(tb, ctx, 1<<16)
	tb.Cleanup(y.close)
	tb.Cleanup(x.close)
	connectBoth(tb, x, y)
	prepostRecvs(tb, x, recvs)
	prepostRecvs(tb, y, recvs)
	return x, y
}

func prepostRecvs(tb testing.TB, e *endpoint, n int) {
	recv := []verbs.RecvWR{{SGL: []verbs.SGE{{Addr: e.mr.Addr() + 4096, Length: 64, LKey: e.mr.LKey()}}}}
	for range n {
		if _, err := e.qp.PostRecv(recv); err != nil {
			tb.Fatal(err)
		}
	}
}

// barePingPong measures the half round trip of two threads bouncing a
// counter in word through atomic stores, for n round trips; other runs in
// its own goroutine. It is the floor any ping-pong through memory can reach.
func barePingPong(word *uint64, n int, first bool) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	for i := uint64(0); i < uint64(n); i++ {
		if first {
			atomic.StoreUint64(word, 2*i+1)
			for k := uint(1); atomic.LoadUint64(word) != 2*i+2; k++ {
				abortCheck(k)
			}
		} else {
			for k := uint(1); atomic.LoadUint64(word) != 2*i+1; k++ {
				abortCheck(k)
			}
			atomic.StoreUint64(word, 2*i+2)
		}
	}
}

// workPingPong is barePingPong with iters steps of arithmetic (see work)
// before each store of the counter: each side's hop costs that much CPU.
func workPingPong(word *uint64, n int, first bool, iters int64) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var s uint64
	for i := uint64(0); i < uint64(n); i++ {
		if first {
			s = work(s, iters)
			atomic.StoreUint64(word, 2*i+1)
			for k := uint(1); atomic.LoadUint64(word) != 2*i+2; k++ {
				abortCheck(k)
			}
		} else {
			for k := uint(1); atomic.LoadUint64(word) != 2*i+1; k++ {
				abortCheck(k)
			}
			s = work(s, iters)
			atomic.StoreUint64(word, 2*i+2)
		}
	}
	workSink.Add(s)
}

// pingAbort is set when the peer of a ping-pong has failed: a child
// process that exited with an error, a peer goroutine that stopped on one.
// The other side, spinning for the peer's next message, would otherwise
// wait for ever.
var pingAbort atomic.Bool

// abortCheck is called by spin loops with the count k of their empty
// looks: every 2^20th it panics if the peer has failed.
func abortCheck(k uint) {
	if k&(1<<20-1) == 0 && pingAbort.Load() {
		panic("ping-pong: the peer failed (see its error above)")
	}
}

// work runs iters steps of a dependent multiply-add on s: CPU time and
// nothing else, no memory touched.
func work(s uint64, iters int64) uint64 {
	for range iters {
		s = s*6364136223846793005 + 1442695040888963407
	}
	return s
}

var (
	workSink  atomic.Uint64 // keeps work's results alive
	workIters atomic.Int64  // the steps per hop of the bare-work ping-pong
)

// itersFor returns the steps of work that take about d on one thread.
func itersFor(d time.Duration) int64 {
	const probe = 1 << 20
	best := time.Duration(1 << 62)
	for range 5 {
		start := time.Now()
		workSink.Add(work(uint64(start.UnixNano()), probe))
		best = min(best, time.Since(start))
	}
	return max(1, int64(float64(d)/float64(best)*probe))
}

func bareHalfRTT(n int) time.Duration {
	var w uint64
	done := make(chan struct{})
	go func() { barePingPong(&w, n, false); close(done) }()
	start := time.Now()
	barePingPong(&w, n, true)
	<-done
	return time.Since(start) / time.Duration(2*n)
}

// writePinger plays one side of perftest write_lat's ping-pong: each side
// RDMA-writes a 2-byte message whose last byte is a counter into the
// peer's buffer (at offset 4096 of the peer's region), and spins on the
// last byte of its own buffer for the peer's counter. Every write is
// signalled and its completion reaped after the write, off the round trip.
// The counter goes on from one call of run to the next.
type writePinger struct {
	tb   testing.TB
	e    *endpoint
	wr   []verbs.SendWR
	out  []byte  // the message, at offset 0 of the local region
	in   *uint32 // the word holding the last byte of the incoming message
	wc   []verbs.WC
	sent uint8
}

const writeMsgSize = 2

func newWritePinger(tb testing.TB, e *endpoint, p peerInfo) *writePinger {
	mem := e.mem.Bytes()
	return &writePinger{
		tb: tb, e: e,
		wr: []verbs.SendWR{{Opcode: verbs.OpRDMAWrite, Flags: verbs.SendSignaled,
			SGL:        []verbs.SGE{{Addr: e.mr.Addr(), Length: writeMsgSize, LKey: e.mr.LKey()}},
			RemoteAddr: p.Addr + 4096, RKey: p.RKey}},
		out: mem[:writeMsgSize],
		in:  (*uint32)(unsafe.Pointer(&mem[4096])),
		wc:  make([]verbs.WC, 1),
	}
}

// run plays n round trips; the initiator writes first.
func (w *writePinger) run(n int, initiator bool) {
	const shift = 8 * (writeMsgSize - 1) // the last byte within *in (little endian)
	wait := func(c uint8) {
		for k := uint(1); uint8(atomic.LoadUint32(w.in)>>shift) != c; k++ {
			abortCheck(k)
		}
	}
	for range n {
		c := w.sent + 1
		if !initiator {
			wait(c)
		}
		w.out[writeMsgSize-1] = c
		if _, err := w.e.qp.PostSend(w.wr); err != nil {
			w.tb.Fatal(err)
		}
		w.sent = c
		for {
			k, err := w.e.scq.Poll(w.wc)
			if err != nil {
				w.tb.Fatal(err)
			}
			if k > 0 {
				if err := w.wc[0].Err(); err != nil {
					w.tb.Fatal(err)
				}
				break
			}
		}
		if initiator {
			wait(c)
		}
	}
}

// The bare baseline of the ping-pongs. On this 2-vCPU machine the bare
// half round trip is bimodal, about 25-30 ns or about 160 ns, and changes
// from one moment to the next: it depends on where the hypervisor runs the
// two vCPUs at the time (and on what else runs on the host). A baseline
// taken once before and once after the emulator's run may see one mode
// while the emulator's run saw the other, which made x_bare swing by 5x.
// So the emulator's run is cut into slices, and a short bare ping-pong runs
// (timer stopped) before every slice and after the last one, on the same
// two OS threads (for two processes, in the same child process) as the
// emulator's ping-pong. Each slice's ratio is its half round trip over the
// mean of the two bare slices around it, and x_bare is the median of the
// slices' ratios: the emulator and its baseline are compared under the
// same conditions, and the median discards a slice that a preemption or a
// mode change spoiled. ns/halfrtt is still the emulator's total time over
// all round trips; bare-ns/halfrtt is the median bare slice.
const (
	pingSlices    = 8    // emulator slices per run (fewer when b.N is small)
	bareSliceRTTs = 5000 // round trips of a bare slice
)

// pingKind tells a ping-pong peer what to play next.
type pingKind string

const (
	pingBare  pingKind = "bare"
	pingWork  pingKind = "bare-work" // bare, with workIters of arithmetic per hop
	pingSend  pingKind = "send"
	pingWrite pingKind = "write"
)

// pingPeer is the other side of a sliced ping-pong: start makes it play n
// round trips of kind as the responder, wait returns when it has.
type pingPeer interface {
	start(kind pingKind, n int)
	wait()
}

// slicedPingPong runs b.N round trips of kind against peer, local playing
// the initiator side of n round trips of a kind, and reports ns/halfrtt,
// x_bare and bare-ns/halfrtt (see above). bare is the word of the bare
// ping-pong, reset before each bare slice.
func slicedPingPong(b *testing.B, kind pingKind, peer pingPeer, bare *uint64, local func(kind pingKind, n int)) {
	slices := min(pingSlices, b.N)
	bareSlice := func() time.Duration {
		atomic.StoreUint64(bare, 0)
		peer.start(pingBare, bareSliceRTTs)
		start := time.Now()
		local(pingBare, bareSliceRTTs)
		el := time.Since(start)
		peer.wait()
		return el / (2 * bareSliceRTTs)
	}
	bares := make([]time.Duration, 0, slices+1)
	ratios := make([]float64, 0, slices)
	b.StopTimer()
	bares = append(bares, bareSlice())
	b.ResetTimer()
	for i := range slices {
		n := b.N/slices + btoi(i < b.N%slices)
		peer.start(kind, n)
		b.StartTimer()
		start := time.Now()
		local(kind, n)
		el := time.Since(start)
		b.StopTimer()
		peer.wait()
		bares = append(bares, bareSlice())
		ref := float64(bares[i]+bares[i+1]) / 2
		ratios = append(ratios, float64(el)/float64(2*n)/ref)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(2*b.N), "ns/halfrtt")
	b.ReportMetric(median(ratios), "x_bare")
	fb := make([]float64, len(bares))
	for i, d := range bares {
		fb[i] = float64(d)
	}
	b.ReportMetric(median(fb), "bare-ns/halfrtt")
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// threadPeer is a ping-pong peer in a goroutine locked to its OS thread,
// for the whole run.
type threadPeer struct {
	cmd  chan pingCmd
	done chan struct{}
}

type pingCmd struct {
	kind pingKind
	n    int
}

func newThreadPeer(play func(kind pingKind, n int)) *threadPeer {
	p := &threadPeer{cmd: make(chan pingCmd), done: make(chan struct{})}
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		ended := false
		defer func() {
			if !ended {
				pingAbort.Store(true) // play stopped on an error (tb.Fatal)
			}
		}()
		for c := range p.cmd {
			play(c.kind, c.n)
			p.done <- struct{}{}
		}
		ended = true
	}()
	return p
}

func (p *threadPeer) start(kind pingKind, n int) { p.cmd <- pingCmd{kind, n} }
func (p *threadPeer) wait()                      { <-p.done }
func (p *threadPeer) stop()                      { close(p.cmd) }

// player returns the function that plays one side of the ping-pongs on
// endpoint e (connected to p), the bare one on word bare.
func player(tb testing.TB, e *endpoint, p peerInfo, bare *uint64, initiator bool) func(kind pingKind, n int) {
	w := newWritePinger(tb, e, p)
	return func(kind pingKind, n int) {
		switch kind {
		case pingBare:
			barePingPong(bare, n, initiator)
		case pingWork:
			workPingPong(bare, n, initiator, workIters.Load())
		case pingSend:
			pingPong(tb, e, n, initiator)
		case pingWrite:
			w.run(n, initiator)
		}
	}
}

func BenchmarkPingPong(b *testing.B) {
	b.Run("bare", func(b *testing.B) {
		b.ReportMetric(float64(bareHalfRTT(b.N).Nanoseconds()), "ns/halfrtt")
	})
	run := func(b *testing.B, kind pingKind) {
		x, y := connectedPair(b, 8)
		var bare uint64
		peer := newThreadPeer(player(b, y, x.info(), &bare, false))
		defer peer.stop()
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		slicedPingPong(b, kind, peer, &bare, player(b, x, y.info(), &bare, true))
	}
	b.Run("emu/size=2", func(b *testing.B) { run(b, pingSend) })
	b.Run("emu-write/size=2", func(b *testing.B) { run(b, pingWrite) })
	// The CPU cost of a hop, measured by BenchmarkWritePostCost (about
	// 65-70 ns on the 2-vCPU machine of the docs) and BenchmarkSendRecvCost
	// (about 125 ns).
	for _, ns := range []int{70, 125} {
		b.Run(fmt.Sprintf("bare-work/ns=%d", ns), func(b *testing.B) {
			workIters.Store(itersFor(time.Duration(ns)))
			run(b, pingWork)
		})
	}
}

// The two-process benchmarks start this test binary again as the peer.
// The child opens emu0, prints its endpoint as a JSON line, reads the
// parent's, connects, and then serves the role it was started for until
// its standard input closes.

func init() {
	role := os.Getenv(benchChildEnv)
	if role == "" {
		return
	}
	os.Exit(benchChild(role))
}

func benchChild(role string) int {
	fail := func(err error) int { fmt.Fprintln(os.Stderr, "bench child:", err); return 1 }
	switch role {
	case "bare":
		// The shared page is descriptor 3; bounce the counter n times.
		var n int
		if _, err := fmt.Fscan(os.Stdin, &n); err != nil {
			return fail(err)
		}
		page, err := unix.MmapFile(3, 4096)
		if err != nil {
			return fail(err)
		}
		fmt.Println("ready")
		barePingPong((*uint64)(unsafe.Pointer(&page[0])), n, false)
		return 0
	case "write", "pingpong":
	default:
		return fail(fmt.Errorf("unknown role %q", role))
	}
	tb := &childTB{}
	ctx := openBench(tb)
	e := newEndpoint(tb, ctx, 1<<20)
	if tb.err != nil {
		return fail(tb.err)
	}
	if err := json.NewEncoder(os.Stdout).Encode(e.info()); err != nil {
		return fail(err)
	}
	in := bufio.NewReader(os.Stdin)
	var p peerInfo
	line, err := in.ReadBytes('\n')
	if err != nil {
		return fail(err)
	}
	if err := json.Unmarshal(line, &p); err != nil {
		return fail(err)
	}
	if err := e.connect(p); err != nil {
		return fail(err)
	}
	if role == "pingpong" {
		// The page of the bare ping-pong is descriptor 3. Play what the
		// parent asks for, "KIND N" a line, answering "done" to each,
		// all on one OS thread.
		page, err := unix.MmapFile(3, 4096)
		if err != nil {
			return fail(err)
		}
		prepostRecvs(tb, e, 8)
		runtime.LockOSThread()
		play := player(tb, e, p, (*uint64)(unsafe.Pointer(&page[0])), false)
		fmt.Println("ready")
		for {
			var kind pingKind
			var n int
			if _, err := fmt.Fscan(in, &kind, &n); err == io.EOF {
				return 0
			} else if err != nil {
				return fail(err)
			}
			play(kind, n)
			fmt.Println("done")
		}
	}
	fmt.Println("ready")
	_, _ = io.Copy(io.Discard, in) // serve until the parent is done
	return 0
}

// childTB lets the benchmark helpers run outside a test.
type childTB struct {
	testing.TB
	err error
}

func (c *childTB) Helper() {}
func (c *childTB) Fatal(args ...any) {
	c.err = fmt.Errorf("%v", fmt.Sprint(args...))
	fmt.Fprintln(os.Stderr, "bench child:", c.err)
	os.Exit(1)
}

// startChild starts the peer process in role and returns its pipes and
// a function that waits for its end. A child that exits with an error
// sets pingAbort, so that a ping-pong waiting for it ends.
func startChild(tb testing.TB, role string, extra ...*os.File) (wait func(), in io.WriteCloser, out *bufio.Reader) {
	tb.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), benchChildEnv+"="+role)
	cmd.Stderr = os.Stderr
	cmd.ExtraFiles = extra
	in, err := cmd.StdinPipe()
	if err != nil {
		tb.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	done := make(chan struct{})
	var closing atomic.Bool // the cleanup ends the child
	go func() {
		// Wait closes stdout once the child has exited: nothing is
		// read from it then.
		if err := cmd.Wait(); err != nil && !closing.Load() {
			pingAbort.Store(true)
		}
		close(done)
	}()
	tb.Cleanup(func() {
		closing.Store(true)
		_ = in.Close()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})
	return func() { <-done }, in, bufio.NewReader(stdout)
}

func expectLine(tb testing.TB, r *bufio.Reader, want string) {
	tb.Helper()
	line, err := r.ReadString('\n')
	if err != nil || line != want+"\n" {
		tb.Fatalf("peer process said %q (%v), want %q", line, err, want)
	}
}

// connectChild exchanges endpoints with a child started in role, with
// extra as its descriptors from 3 on.
func connectChild(tb testing.TB, e *endpoint, role string, extra ...*os.File) (peerInfo, io.WriteCloser, *bufio.Reader) {
	tb.Helper()
	_, in, out := startChild(tb, role, extra...)
	var p peerInfo
	line, err := out.ReadBytes('\n')
	if err != nil {
		tb.Fatalf("peer process: %v", err)
	}
	if err := json.Unmarshal(line, &p); err != nil {
		tb.Fatal(err)
	}
	if err := json.NewEncoder(in).Encode(e.info()); err != nil {
		tb.Fatal(err)
	}
	if err := e.connect(p); err != nil {
		tb.Fatal(err)
	}
	expectLine(tb, out, "ready")
	return p, in, out
}

// bareHalfRTTProcess measures the bare ping-pong through a page shared
// with a child process.
func bareHalfRTTProcess(tb testing.TB, n int) time.Duration {
	fd, err := unix.MemfdCreate("pvperf-bench", 4096)
	if err != nil {
		tb.Fatal(err)
	}
	f := os.NewFile(uintptr(fd), "shared page")
	defer f.Close()
	page, err := unix.MmapFile(fd, 4096)
	if err != nil {
		tb.Fatal(err)
	}
	defer func() { _ = unix.Munmap(page) }()
	wait, in, out := startChild(tb, "bare", f)
	fmt.Fprintln(in, n)
	expectLine(tb, out, "ready")
	start := time.Now()
	barePingPong((*uint64)(unsafe.Pointer(&page[0])), n, true)
	el := time.Since(start)
	_ = in.Close()
	wait()
	return el / time.Duration(2*n)
}

func BenchmarkTwoProcess(b *testing.B) {
	b.Run("write/emu/size=65536", func(b *testing.B) {
		const size = 65536
		ctx := openBench(b)
		defer ctx.Close()
		e := newEndpoint(b, ctx, 1<<20)
		defer e.close()
		p, _, _ := connectChild(b, e, "write")
		base := copyBW(size, 100*time.Millisecond)
		b.SetBytes(size)
		b.ResetTimer()
		el := writeLoop(b, e, p, size, b.N, 128, 1)
		b.StopTimer()
		base = (base + copyBW(size, 100*time.Millisecond)) / 2
		b.ReportMetric(float64(b.N)*size/el.Seconds()/base, "of_copy")
	})
	b.Run("pingpong/bare", func(b *testing.B) {
		b.ReportMetric(float64(bareHalfRTTProcess(b, b.N).Nanoseconds()), "ns/halfrtt")
	})
	run := func(b *testing.B, kind pingKind) {
		fd, err := unix.MemfdCreate("pvperf-bench", 4096)
		if err != nil {
			b.Fatal(err)
		}
		f := os.NewFile(uintptr(fd), "shared page")
		defer f.Close()
		page, err := unix.MmapFile(fd, 4096)
		if err != nil {
			b.Fatal(err)
		}
		defer func() { _ = unix.Munmap(page) }()
		bare := (*uint64)(unsafe.Pointer(&page[0]))
		ctx := openBench(b)
		defer ctx.Close()
		e := newEndpoint(b, ctx, 1<<16)
		defer e.close()
		p, in, out := connectChild(b, e, "pingpong", f)
		prepostRecvs(b, e, 8)
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		slicedPingPong(b, kind, &processPeer{tb: b, in: in, out: out}, bare, player(b, e, p, bare, true))
	}
	b.Run("pingpong/emu/size=2", func(b *testing.B) { run(b, pingSend) })
	b.Run("pingpong/emu-write/size=2", func(b *testing.B) { run(b, pingWrite) })
}

// processPeer is a ping-pong peer in a child process.
type processPeer struct {
	tb  testing.TB
	in  io.Writer
	out *bufio.Reader
}

func (p *processPeer) start(kind pingKind, n int) {
	if _, err := fmt.Fprintln(p.in, kind, n); err != nil {
		p.tb.Fatal(err)
	}
}

func (p *processPeer) wait() { expectLine(p.tb, p.out, "done") }

// BenchmarkWritePostCost is one thread posting a signalled 2-byte RDMA
// WRITE and reaping its completion: the CPU cost of a hop of the write
// ping-pong.
func BenchmarkWritePostCost(b *testing.B) {
	x, y := connectedPair(b, 0)
	w := newWritePinger(b, x, y.info())
	for b.Loop() {
		if _, err := x.qp.PostSend(w.wr); err != nil {
			b.Fatal(err)
		}
		if n, _ := x.scq.Poll(w.wc); n != 1 || w.wc[0].Err() != nil {
			b.Fatal("no send completion")
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "ns/hop")
}

// BenchmarkSendRecvCost is one thread playing both sides of the ping-pong:
// the CPU cost of a SEND, its receive completion, the repost and the send
// completion, without the cost of moving cache lines between cores.
func BenchmarkSendRecvCost(b *testing.B) {
	x, y := connectedPair(b, 8)
	send := func(e *endpoint) []verbs.SendWR {
		return []verbs.SendWR{{Opcode: verbs.OpSend, Flags: verbs.SendSignaled,
			SGL: []verbs.SGE{{Addr: e.mr.Addr(), Length: 2, LKey: e.mr.LKey()}}}}
	}
	recv := func(e *endpoint) []verbs.RecvWR {
		return []verbs.RecvWR{{SGL: []verbs.SGE{{Addr: e.mr.Addr() + 4096, Length: 64, LKey: e.mr.LKey()}}}}
	}
	sx, sy, rx, ry := send(x), send(y), recv(x), recv(y)
	wc := make([]verbs.WC, 1)
	hop := func(from *endpoint, s []verbs.SendWR, to *endpoint, r []verbs.RecvWR) {
		if _, err := from.qp.PostSend(s); err != nil {
			b.Fatal(err)
		}
		if n, _ := to.rcq.Poll(wc); n != 1 || wc[0].Err() != nil {
			b.Fatal("no receive completion")
		}
		if _, err := to.qp.PostRecv(r); err != nil {
			b.Fatal(err)
		}
		if n, _ := from.scq.Poll(wc); n != 1 || wc[0].Err() != nil {
			b.Fatal("no send completion")
		}
	}
	for b.Loop() {
		hop(x, sx, y, ry)
		hop(y, sy, x, rx)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(2*b.N), "ns/hop")
}
