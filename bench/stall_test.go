package bench

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pvperf/pvperf/emu"
	"github.com/pvperf/pvperf/perftest"
	"github.com/pvperf/pvperf/verbs"
)

// A device whose QPs accept send work requests and never execute them, as
// QEMU's pvrdma device model does with RDMA WRITE (sent as a SEND that
// waits for a receive for ever): nothing completes.
type deafDevice struct{ verbs.Device }
type deafContext struct{ verbs.Context }
type deafPD struct{ verbs.PD }
type deafQP struct{ verbs.QP }

func (d deafDevice) Open() (verbs.Context, error) {
	c, err := d.Device.Open()
	return deafContext{c}, err
}

func (c deafContext) AllocPD() (verbs.PD, error) {
	pd, err := c.Context.AllocPD()
	return deafPD{pd}, err
}

func (pd deafPD) CreateQP(init verbs.QPInit) (verbs.QP, error) {
	qp, err := pd.PD.CreateQP(init)
	return deafQP{qp}, err
}

func (deafQP) PostSend(wrs []verbs.SendWR) (int, error) { return len(wrs), nil }

// TestStalledTestFails: a test whose work never completes fails with
// ErrStalled once StallTimeout has passed without a completion, where
// perftest would wait for ever.
func TestStalledTestFails(t *testing.T) {
	old := StallTimeout
	StallTimeout = 300 * time.Millisecond
	defer func() { StallTimeout = old }()
	dev := deafDevice{device(t, emu.ProfileUnrestricted, 2)}
	for _, c := range []struct {
		name string
		cfg  Config
	}{
		{"write_bw", testConfig(perftest.Bandwidth, perftest.Write)},
		{"send_bw", testConfig(perftest.Bandwidth, perftest.Send)},
		{"read_bw", testConfig(perftest.Bandwidth, perftest.Read)},
		{"send_lat", testConfig(perftest.Latency, perftest.Send)},
		{"write_lat", testConfig(perftest.Latency, perftest.Write)},
		{"atomic_lat", testConfig(perftest.Latency, perftest.Atomic)},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			var errOut strings.Builder
			_, err := Run(ctx, normalize(c.cfg), dev, io.Discard, &errOut)
			if !errors.Is(err, ErrStalled) {
				t.Fatalf("Run: %v (want ErrStalled); stderr:\n%s", err, errOut.String())
			}
			if ctx.Err() != nil {
				t.Fatalf("the run ended only with the test's own timeout: %v", err)
			}
			t.Logf("message:\n%s", PerftestMessage(err))
			if msg := PerftestMessage(err); !strings.Contains(msg, "no progress") {
				t.Errorf("message %q does not say what happened", msg)
			}
		})
	}
}

func TestStallCountsOnlyIdleWaits(t *testing.T) {
	old := StallTimeout
	StallTimeout = 20 * time.Millisecond
	defer func() { StallTimeout = old }()
	var s stall
	deadline := time.Now().Add(10 * time.Second)
	var err error
	for err == nil && time.Now().Before(deadline) {
		err = s.idle("waiting")
	}
	if !errors.Is(err, ErrStalled) {
		t.Fatalf("idle for 10s: %v, want ErrStalled", err)
	}
	// Progress restarts the wait.
	StallTimeout = time.Hour
	s.busy()
	for range 0x10000 * 2 {
		if err := s.idle("waiting"); err != nil {
			t.Fatalf("right after progress: %v", err)
		}
	}
}

// TestStallSlowPolls: a loop whose empty polls take half a millisecond
// each (a loaded, emulated CPU) is told of the stall within a few seconds
// of StallTimeout, not after 131072 polls (65 s) as when the clock was
// read every 65536th.
func TestStallSlowPolls(t *testing.T) {
	const poll = 500 * time.Microsecond
	var now int64
	old := stallNow
	stallNow = func() int64 { return now }
	defer func() { stallNow = old }()
	var s stall
	var err error
	n := 0
	for err == nil && n < 1<<20 {
		now += int64(poll)
		n++
		err = s.idle("waiting")
	}
	if !errors.Is(err, ErrStalled) {
		t.Fatalf("%d slow polls: %v, want ErrStalled", n, err)
	}
	took := time.Duration(n) * poll
	if bound := StallTimeout + 3*time.Second; took < StallTimeout || took > bound {
		t.Errorf("stall reported after %v of waiting, want between %v and %v", took, StallTimeout, bound)
	}
}

// TestStallSeesCancel: a wait whose empty polls take half a millisecond
// each ends within a fraction of a second of its context's cancellation
// (the watch of a dead peer cancels it), not after 65536 polls (33 s), as
// when the loops checked the context that seldom.
func TestStallSeesCancel(t *testing.T) {
	const poll = 500 * time.Microsecond
	ctx, cancel := context.WithCancelCause(context.Background())
	gone := errors.New("peer gone")
	s := stall{ctx: ctx}
	for range 1000 {
		if err := s.idle("waiting"); err != nil {
			t.Fatalf("before the cancellation: %v", err)
		}
	}
	cancel(gone)
	n := 0
	var err error
	for err == nil && n < 1<<20 {
		n++
		err = s.idle("waiting")
	}
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("%d polls after the cancellation: %v, want context.Canceled", n, err)
	}
	if took := time.Duration(n) * poll; took > 200*time.Millisecond {
		t.Errorf("cancellation seen after %d polls (%v at %v each), want at most 200ms", n, took, poll)
	}
}

// A device that completes every work request, signalled or not, as QEMU's
// pvrdma device model does.
type chattyDevice struct{ verbs.Device }
type chattyContext struct{ verbs.Context }
type chattyPD struct{ verbs.PD }
type chattyQP struct{ verbs.QP }

func (d chattyDevice) Open() (verbs.Context, error) {
	c, err := d.Device.Open()
	return chattyContext{c}, err
}

func (c chattyContext) AllocPD() (verbs.PD, error) {
	pd, err := c.Context.AllocPD()
	return chattyPD{pd}, err
}

func (pd chattyPD) CreateQP(init verbs.QPInit) (verbs.QP, error) {
	qp, err := pd.PD.CreateQP(init)
	return chattyQP{qp}, err
}

func (q chattyQP) PostSend(wrs []verbs.SendWR) (int, error) {
	var buf [16]verbs.SendWR
	all := append(buf[:0], wrs...)
	for i := range all {
		all[i].Flags |= verbs.SendSignaled
	}
	return q.QP.PostSend(all)
}

// TestUnsignaledCompletionsFail: bandwidth tests count a completion as
// cq_mod messages; on a device that completes unsignalled work requests
// they fail with ErrUnsignaledCompletion instead of reporting a wrong
// figure, and run right with -Q 1.
func TestUnsignaledCompletionsFail(t *testing.T) {
	dev := chattyDevice{device(t, emu.ProfileUnrestricted, 2)}
	for _, bidir := range []bool{false, true} {
		c := testConfig(perftest.Bandwidth, perftest.Send)
		c.Size, c.CQMod, c.Bidirectional = 64, 100, bidir
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		_, err := Run(ctx, normalize(c), dev, io.Discard, io.Discard)
		cancel()
		if !errors.Is(err, ErrUnsignaledCompletion) {
			t.Errorf("bidirectional %v, cq_mod 100: %v, want ErrUnsignaledCompletion", bidir, err)
		} else if msg := PerftestMessage(err); !strings.Contains(msg, "-Q 1") {
			t.Errorf("message %q does not say what to do", msg)
		}
		c.CQMod = 1
		ctx, cancel = context.WithTimeout(context.Background(), time.Minute)
		_, err = Run(ctx, normalize(c), dev, io.Discard, io.Discard)
		cancel()
		if err != nil {
			t.Errorf("bidirectional %v, -Q 1: %v", bidir, err)
		}
	}
}

// countingDevice is a chattyDevice that counts the data work requests
// posted (wr_id's low half equal to the QP index, as the bandwidth loops
// number them with a post list of one) and their completions polled.
type countingDevice struct {
	verbs.Device
	posted, polled *atomic.Int64
}
type countingContext struct {
	verbs.Context
	d countingDevice
}
type countingPD struct {
	verbs.PD
	d countingDevice
}
type countingQP struct {
	chattyQP
	d countingDevice
}
type countingCQ struct {
	verbs.CQ
	d countingDevice
}

func isData(id uint64) bool { return uint32(id) == uint32(wrQP(id)) }

func (d countingDevice) Open() (verbs.Context, error) {
	c, err := d.Device.Open()
	return countingContext{c, d}, err
}

func (c countingContext) AllocPD() (verbs.PD, error) {
	pd, err := c.Context.AllocPD()
	return countingPD{pd, c.d}, err
}

func (c countingContext) CreateCQ(init verbs.CQInit) (verbs.CQ, error) {
	cq, err := c.Context.CreateCQ(init)
	return countingCQ{cq, c.d}, err
}

func (pd countingPD) CreateQP(init verbs.QPInit) (verbs.QP, error) {
	if cq, ok := init.SendCQ.(countingCQ); ok {
		init.SendCQ = cq.CQ
	}
	if cq, ok := init.RecvCQ.(countingCQ); ok {
		init.RecvCQ = cq.CQ
	}
	qp, err := pd.PD.CreateQP(init)
	return countingQP{chattyQP{qp}, pd.d}, err
}

func (q countingQP) PostSend(wrs []verbs.SendWR) (int, error) {
	n, err := q.chattyQP.PostSend(wrs)
	for _, w := range wrs[:n] {
		if isData(w.ID) {
			q.d.posted.Add(1)
		}
	}
	return n, err
}

func (c countingCQ) Poll(wc []verbs.WC) (int, error) {
	n, err := c.CQ.Poll(wc)
	for _, w := range wc[:n] {
		if isData(w.ID) {
			c.d.polled.Add(1)
		}
	}
	return n, err
}

// TestUnsignaledMarkersIgnored: with --data_validation each chunk ends
// with an unsignalled fetch-and-add on its marker. On a device that
// completes it anyway (QEMU's pvrdma), with -Q 1, the loop must still wait
// for every message's own completion (counting a marker's as a message's
// would end it early) and the validation passes.
func TestUnsignaledMarkersIgnored(t *testing.T) {
	for _, verb := range []perftest.Verb{perftest.Write, perftest.Read} {
		dev := countingDevice{device(t, emu.ProfileUnrestricted, 2), new(atomic.Int64), new(atomic.Int64)}
		c := testConfig(perftest.Bandwidth, verb)
		c.DataValidation, c.Size, c.Iters, c.CQMod = true, 4096, 2000, 1
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		var out bytes.Buffer
		_, err := Run(ctx, normalize(c), dev, &out, io.Discard)
		cancel()
		if err != nil || !strings.Contains(out.String(), "VALIDATION: PASSED - ") {
			t.Errorf("%v: %v\n%s", verb, err, out.String())
		}
		if p, q := dev.posted.Load(), dev.polled.Load(); p != 2000 || q != p {
			t.Errorf("%v: %d messages posted, %d of their completions polled", verb, p, q)
		}
	}
}

// TestStallLatencyGap: a latency test whose --latency_gap is longer than
// StallTimeout waits the gap out on both sides; only a wait beyond the
// gap is a stall. (SEND's loop is READ's and ATOMIC's too.) The margin
// left for scheduling delays on a loaded machine is StallTimeout.
func TestStallLatencyGap(t *testing.T) {
	old := StallTimeout
	StallTimeout = 300 * time.Millisecond
	defer func() { StallTimeout = old }()
	dev := device(t, emu.ProfileUnrestricted, 2)
	for _, verb := range []perftest.Verb{perftest.Send, perftest.Write} {
		t.Run(verb.String(), func(t *testing.T) {
			cfg := testConfig(perftest.Latency, verb)
			cfg.Iters, cfg.LatencyGap = 4, 600_000 // 600 ms
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			var errOut strings.Builder
			if _, err := Run(ctx, normalize(cfg), dev, io.Discard, &errOut); err != nil {
				t.Fatalf("Run: %v; stderr:\n%s", err, errOut.String())
			}
		})
	}
}

// A device whose QPs post their first keepRecvs receives and then drop the
// receives posted (reporting them posted): UD sends find no receive and
// are lost, as when the receiver falls behind.
type lossyDevice struct{ verbs.Device }
type lossyContext struct{ verbs.Context }
type lossyPD struct{ verbs.PD }
type lossyQP struct {
	verbs.QP
	posted *atomic.Int64
}

const keepRecvs = 20

func (d lossyDevice) Open() (verbs.Context, error) {
	c, err := d.Device.Open()
	return lossyContext{c}, err
}

func (c lossyContext) AllocPD() (verbs.PD, error) {
	pd, err := c.Context.AllocPD()
	return lossyPD{pd}, err
}

func (pd lossyPD) CreateQP(init verbs.QPInit) (verbs.QP, error) {
	qp, err := pd.PD.CreateQP(init)
	return lossyQP{qp, new(atomic.Int64)}, err
}

func (q lossyQP) PostRecv(wrs []verbs.RecvWR) (int, error) {
	n := max(0, min(len(wrs), keepRecvs-int(q.posted.Load())))
	q.posted.Add(int64(n))
	if n > 0 {
		if _, err := q.QP.PostRecv(wrs[:n]); err != nil {
			return 0, err
		}
	}
	return len(wrs), nil
}

// TestUDLossStall: a UD send_bw whose server gets fewer messages than the
// client sends (the others found no receive posted) stalls and says, as
// perftest's check_alive, what it received of what was due.
func TestUDLossStall(t *testing.T) {
	old := StallTimeout
	StallTimeout = 300 * time.Millisecond
	defer func() { StallTimeout = old }()
	dev := lossyDevice{device(t, emu.ProfileUnrestricted, 2)}
	c := testConfig(perftest.Bandwidth, perftest.Send)
	c.Connection, c.Iters, c.RxDepth, c.Size = perftest.UD, 50, 34, 64
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := Run(ctx, normalize(c), dev, io.Discard, io.Discard)
	if err == nil {
		t.Fatal("Run: no error")
	}
	msg := PerftestMessage(err)
	if !errors.Is(err, ErrStalled) || !strings.Contains(msg, "waiting for receive completions for ") ||
		!strings.Contains(msg, "\n Total Received=20, Total Iters Required=50\n") {
		t.Fatalf("Run: %v\nmessage:\n%s", err, msg)
	}
}
