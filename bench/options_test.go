package bench

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pvperf/pvperf/emu"
	"github.com/pvperf/pvperf/internal/clock"
	"github.com/pvperf/pvperf/perftest"
	"github.com/pvperf/pvperf/verbs"
)

// TestPollBatch: the CQE poll batch in the header is the one the loops
// poll with: fixed (16, or --cqe_poll), or dynamic (from 1024 down to what
// the polls return).
func TestPollBatch(t *testing.T) {
	for _, c := range []struct {
		name    string
		edit    func(c *Config)
		header  string
		allSize int // every poll asks for this many (0: dynamic)
	}{
		{"fixed default", func(c *Config) {}, " CQE Poll Batch  : 16", 16},
		{"cqe_poll 32", func(c *Config) { c.PollBatch = 32 }, " CQE Poll Batch  : 32", 32},
		{"dynamic", func(c *Config) { c.DynamicPolling, c.Iters = true, 4000 }, " CQE Poll Batch  : Dynamic", 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := testConfig(perftest.Bandwidth, perftest.Write)
			cfg.Size, cfg.CQMod = 64, 1
			c.edit(&cfg)
			r, out := runRecorded(t, cfg)
			if got := headerLine(out, " CQE Poll Batch"); got != c.header {
				t.Errorf("header %q, want %q", got, c.header)
			}
			polls := r.pollSizes()
			if len(polls) == 0 {
				t.Fatal("no polls")
			}
			if c.allSize != 0 {
				for i, n := range polls {
					if n != c.allSize {
						t.Fatalf("poll %d asked for %d completions, want %d", i, n, c.allSize)
					}
				}
				return
			}
			if polls[0] != dynPollMax {
				t.Errorf("first dynamic poll asked for %d, want %d", polls[0], dynPollMax)
			}
			for i, n := range polls {
				if n < dynPollMin || n > dynPollMax {
					t.Fatalf("poll %d asked for %d, outside [%d, %d]", i, n, dynPollMin, dynPollMax)
				}
			}
			if last := polls[len(polls)-1]; last == dynPollMax {
				t.Errorf("the batch never adapted: polls %v...", polls[:min(len(polls), 20)])
			}
		})
	}
}

// TestPollerAdapts follows perftest's poll_cq_adaptive step by step.
func TestPollerAdapts(t *testing.T) {
	cfg := Config{DynamicPolling: true, Iters: 400}
	p := newPoller(&cfg)
	if p.size != 1024 || p.until != 100 {
		t.Fatalf("start: size %d until %d", p.size, p.until)
	}
	p.adapt(10) // far under the batch: halve towards what came
	if p.size != 517 {
		t.Fatalf("after 10 of 1024: %d, want 517", p.size)
	}
	for _, want := range []int{263, 136, 73, 41, 25, 17, 16, 16} {
		if p.adapt(10); p.size != want {
			t.Fatalf("size %d, want %d", p.size, want)
		}
	}
	if p.size != dynPollMin {
		t.Fatalf("shrinks to the minimum: %d", p.size)
	}
	p.adapt(14) // within the threshold of 16: kept; the next equal ones count
	for i := range dynPollStabilize {
		if !p.dynamic {
			t.Fatalf("stopped adapting after %d equal polls", i)
		}
		p.adapt(14)
	}
	if p.dynamic {
		t.Error("still adapting after 10 equal polls")
	}
	// The run's next loop (the next size of -a) starts from the fixed
	// batch, without adapting: perftest clears dynamic_cqe_poll.
	if next := newPoller(&cfg); next.dynamic || next.size != 16 {
		t.Errorf("the next loop: dynamic %v, batch %d; want fixed 16", next.dynamic, next.size)
	}
}

// TestRelaxedOrdering: memory regions carry relaxed ordering unless
// --disable_pcie_relaxed (and never for write_lat), as the header says.
func TestRelaxedOrdering(t *testing.T) {
	for _, c := range []struct {
		name string
		cfg  Config
		ro   bool
	}{
		{"write_bw", testConfig(perftest.Bandwidth, perftest.Write), true},
		{"write_bw disabled", func() Config {
			c := testConfig(perftest.Bandwidth, perftest.Write)
			c.NoRelaxedOrdering = true
			return c
		}(), false},
		{"write_lat", testConfig(perftest.Latency, perftest.Write), false},
		{"send_lat", testConfig(perftest.Latency, perftest.Send), true},
	} {
		t.Run(c.name, func(t *testing.T) {
			r, out := runRecorded(t, c.cfg)
			want := " PCIe relax order: OFF"
			if c.ro {
				want = " PCIe relax order: ON"
			}
			if got := headerLine(out, " PCIe relax order"); !strings.HasPrefix(got, want) {
				t.Errorf("header %q, want %q", got, want)
			}
			if len(r.regs) == 0 {
				t.Fatal("no memory registered")
			}
			for _, a := range r.regs {
				if (a&verbs.AccessRelaxedOrdering != 0) != c.ro {
					t.Errorf("registered with %v", a)
				}
			}
		})
	}
}

// TestWaitDestroy: --wait_destroy says so and keeps the resources that
// long.
func TestWaitDestroy(t *testing.T) {
	cfg := testConfig(perftest.Bandwidth, perftest.Write)
	cfg.WaitDestroy = time.Second
	start := time.Now()
	out := runLoop(t, device(t, emu.ProfileUnrestricted, 2), cfg)
	if !strings.Contains(out, " Waiting 1 seconds before releasing resources...\n") {
		t.Errorf("no waiting line in:\n%s", out)
	}
	if d := time.Since(start); d < time.Second {
		t.Errorf("the run took %v, less than the wait", d)
	}

	// A client that never reached its server ends at once, as perftest's,
	// whose main leaves before destroy_ctx (where it waits).
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close() // nothing listens there now
	cfg.Loopback, cfg.Server, cfg.Port, cfg.WaitDestroy = false, "127.0.0.1", port, 3*time.Second
	var o bytes.Buffer
	start = time.Now()
	_, err = Run(context.Background(), normalize(cfg), device(t, emu.ProfileUnrestricted, 2), &o, &bytes.Buffer{})
	if err == nil {
		t.Fatal("a client with no server succeeded")
	}
	if d := time.Since(start); d > 2*time.Second || strings.Contains(o.String(), "Waiting 3 seconds") {
		t.Errorf("a client that never connected waited: %v, output:\n%s", d, o.String())
	}
}

// TestForceLink: --force-link=IB on the emulator's Ethernet port makes
// the header say IB and the QPs address their peer without a GID, which
// RoCE refuses at RTR, as a real RoCE device does with perftest.
func TestForceLink(t *testing.T) {
	dev := device(t, emu.ProfileUnrestricted, 2)
	cfg := testConfig(perftest.Bandwidth, perftest.Write)
	out := runLoop(t, dev, cfg)
	if got := headerLine(out, " Link type"); got != " Link type       : Ethernet" || !strings.Contains(out, " GID: ") {
		t.Fatalf("without --force-link: %q\n%s", got, out)
	}
	cfg.ForceLink = verbs.LinkInfiniBand
	var o bytes.Buffer
	_, err := Run(context.Background(), normalize(cfg), dev, &o, &bytes.Buffer{})
	if got := headerLine(o.String(), " Link type"); got != " Link type       : IB" {
		t.Errorf("with --force-link=IB: %q", got)
	}
	if err == nil || !strings.Contains(PerftestMessage(err), "global route header") {
		t.Errorf("with --force-link=IB on RoCE: %v", err)
	}
}

// TestLimits: -w and -y fail the run below the limit; -y is checked only
// when -w is given, even as -w 0 (perftest's rule).
func TestLimits(t *testing.T) {
	dev := device(t, emu.ProfileUnrestricted, 2)
	run := func(edit func(c *Config)) error {
		cfg := testConfig(perftest.Bandwidth, perftest.Write)
		edit(&cfg)
		_, err := Run(context.Background(), normalize(cfg), dev, &bytes.Buffer{}, &bytes.Buffer{})
		return err
	}
	if err := run(func(c *Config) { c.LimitMsgRate = 1e12 }); err != nil {
		t.Errorf("-y alone: %v (perftest does not check it)", err)
	}
	err := run(func(c *Config) { c.LimitBWSet, c.LimitMsgRate = true, 1e12 })
	if err == nil || !strings.Contains(PerftestMessage(err), "Msg rate  is below msg_rate limit") {
		t.Errorf("-w 0 -y 1e12: %v", err)
	}
	err = run(func(c *Config) { c.LimitBWSet, c.LimitBW = true, 1e12 })
	if err == nil || !strings.Contains(PerftestMessage(err), "BW result is below bw limit") {
		t.Errorf("-w 1e12: %v", err)
	}
	if err := run(func(c *Config) { c.LimitBWSet, c.LimitBW, c.LimitMsgRate = true, 1, 1e-6 }); err != nil {
		t.Errorf("limits met: %v", err)
	}
}

// TestCPUUtil: with --cpu_util in duration mode, the CPU_Util column is
// the share of user time in /proc/stat over the sample window; the polling
// thread spins in user mode all along, so it is above 0.
func TestCPUUtil(t *testing.T) {
	if _, err := os.Stat("/proc/stat"); err != nil {
		t.Skip("no /proc/stat")
	}
	cfg := testConfig(perftest.Bandwidth, perftest.Write)
	cfg.Duration, cfg.Margin, cfg.CPUUtil, cfg.NoPeak = 2, 0, true, true
	out := runLoop(t, device(t, emu.ProfileUnrestricted, 2), cfg)
	var row []string
	for l := range strings.SplitSeq(out, "\n") {
		if f := strings.Fields(l); len(f) == 6 && f[0] == "65536" {
			row = f
		}
	}
	if row == nil || !strings.Contains(out, "CPU_Util[%]") {
		t.Fatalf("no CPU_Util column in:\n%s", out)
	}
	v, err := strconv.ParseFloat(row[5], 64)
	if err != nil || v <= 0 || v > 100 {
		t.Errorf("CPU_Util %q", row[5])
	}
}

func TestParseCPUTimes(t *testing.T) {
	c := parseCPUTimes([]byte("cpu  100 5 20 1000 3 0 1 0 0 0\ncpu0 1 2 3 4\n"))
	if !c.ok || c.user != 100 || c.idle != 1000 {
		t.Errorf("%+v", c)
	}
	if parseCPUTimes([]byte("intr 1 2 3\n")).ok {
		t.Error("accepted a file without the cpu line")
	}
	if got := cpuUtil(cpuTimes{100, 1000, true}, cpuTimes{150, 1150, true}); got != 25 {
		t.Errorf("cpuUtil = %v, want 25", got)
	}
}

// TestQPAttributes: -u, -S, --tclass, --flow_label and --dlid reach the
// attributes the QPs are moved to RTR and RTS with.
func TestQPAttributes(t *testing.T) {
	cfg := testConfig(perftest.Bandwidth, perftest.Write)
	cfg.QPTimeout, cfg.SL, cfg.TClass, cfg.FlowLabel, cfg.DLID = 20, 3, 96, []int{77}, 9
	r, _ := runRecorded(t, cfg)
	var rtr, rts int
	for _, a := range r.modify {
		switch a.State {
		case verbs.StateRTR:
			rtr++
			ah := a.AH
			if ah.SL != 3 || ah.DLID != 9 || ah.GRH.TrafficClass != 96 || ah.GRH.FlowLabel != 77 || !ah.IsGlobal {
				t.Errorf("RTR address %+v", ah)
			}
		case verbs.StateRTS:
			rts++
			if a.Timeout != 20 {
				t.Errorf("RTS timeout %d, want 20", a.Timeout)
			}
		}
	}
	if rtr == 0 || rts == 0 {
		t.Fatalf("%d RTR and %d RTS transitions", rtr, rts)
	}
}

// TestWarmUpPosts: --perform_warm_up posts a burst of tx_depth work
// requests before the measured ones.
func TestWarmUpPosts(t *testing.T) {
	cfg := testConfig(perftest.Bandwidth, perftest.Write)
	cfg.Iters, cfg.TxDepth = 200, 32
	r, _ := runRecorded(t, cfg)
	cfg.WarmUp = true
	w, _ := runRecorded(t, cfg)
	if w.sends != r.sends+32 {
		t.Errorf("%d work requests with the warm-up, %d without: want %d more", w.sends, r.sends, 32)
	}
	// With a post list, as perftest: one list, whose last work request
	// is signalled (a burst of tx_depth, all signalled, would overflow
	// the send CQ when tx_depth is no multiple of the list).
	cfg.WarmUp, cfg.PostList, cfg.TxDepth, cfg.Iters = false, 3, 8, 24
	r, _ = runRecorded(t, cfg)
	cfg.WarmUp = true
	w, _ = runRecorded(t, cfg)
	if w.sends != r.sends+3 {
		t.Errorf("post list 3: %d work requests with the warm-up, %d without: want 3 more", w.sends, r.sends)
	}
}

// TestPostingPattern: with a post list of one, runBW's loop for a count
// of iterations without peak (postSingles) posts what its general loop
// (with peak) posts: every cq_mod-th work request and the last signalled,
// local and remote addresses stepping through the buffer and back.
func TestPostingPattern(t *testing.T) {
	cfg := testConfig(perftest.Bandwidth, perftest.Write)
	cfg.Iters, cfg.TxDepth, cfg.CQMod, cfg.Size = 1050, 128, 100, 2
	pattern := func(noPeak bool) []postedWR {
		c := cfg
		c.NoPeak = noPeak
		r, _ := runRecorded(t, c)
		p := r.posted
		if len(p) != 1050 {
			t.Fatalf("noPeak %v: %d work requests posted, want 1050", noPeak, len(p))
		}
		// Addresses relative to the first work request's.
		a, ra := p[0].addr, p[0].remote
		for i := range p {
			p[i].addr -= a
			p[i].remote -= ra
		}
		return p
	}
	fast, general := pattern(true), pattern(false)
	wraps := 0
	for i := range fast {
		if fast[i] != general[i] {
			t.Fatalf("work request %d: %+v without peak, %+v with", i, fast[i], general[i])
		}
		if want := i%100 == 99 || i == 1049; fast[i].signaled != want {
			t.Errorf("work request %d: signalled %v, want %v", i, fast[i].signaled, want)
		}
		if i > 0 && fast[i].addr == 0 {
			wraps++
		}
	}
	if wraps == 0 || fast[1].addr == 0 || fast[1].remote != fast[1].addr {
		t.Errorf("addresses do not step and wrap: %+v ... (%d wraps)", fast[:2], wraps)
	}
}

// TestRecvPostList: --recv_post_list posts receives in lists of that
// length.
func TestRecvPostList(t *testing.T) {
	cfg := testConfig(perftest.Bandwidth, perftest.Send)
	cfg.Iters = 200
	r, _ := runRecorded(t, cfg)
	cfg.RecvPostList = 4
	l, _ := runRecorded(t, cfg)
	longest := func(r *recorder) int {
		m := 0
		for _, n := range r.recvs {
			m = max(m, n)
		}
		return m
	}
	if longest(r) != 1 || longest(l) != 4 {
		t.Errorf("receive lists of up to %d without, %d with --recv_post_list=4", longest(r), longest(l))
	}
}

// TestDurationMargin: -f delays the measured window of -D by the margin.
func TestDurationMargin(t *testing.T) {
	t0 := clock.Now()
	d := startDuration(context.Background(), 3, 1, nil)
	<-d.done
	if got := time.Duration(d.start.Load() - t0); got < time.Second {
		t.Errorf("the window started %v after the run, before the 1 s margin", got)
	}
	if got := time.Duration(d.stop.Load() - d.start.Load()); got < time.Second {
		t.Errorf("the window lasted %v, less than duration - 2*margin", got)
	}
}

// TestDurationEnd: a loop that fails ends its clock at once, however
// long the duration: its error is not held back until the duration ends.
func TestDurationEnd(t *testing.T) {
	var ticks []interval
	d := startDuration(context.Background(), 600, 2, func(iv interval) { ticks = append(ticks, iv) })
	time.Sleep(50 * time.Millisecond)
	done := make(chan struct{})
	go func() { d.end(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("end() waits for the 600 s duration")
	}
	if d.state.Load() != stateEnd || len(ticks) > 1 {
		t.Errorf("state %d after end, %d intervals reported", d.state.Load(), len(ticks))
	}
}

// TestLimitRows: like perftest, a run meets -w and -y when any row it
// checks does (the sizes of -a; the summed row of -b), and fails when none
// does; a side that checks no row (a WRITE or READ server) does not fail.
func TestLimitRows(t *testing.T) {
	check := func(limitBW, limitRate float64, rows ...[2]float64) error {
		s := &session{cfg: Config{Test: perftest.Bandwidth, LimitBWSet: true, LimitBW: limitBW, LimitMsgRate: limitRate}}
		for _, r := range rows {
			s.limitRow(r[0], r[1])
		}
		return s.checkLimits()
	}
	if err := check(200, 0, [2]float64{50, 1}, [2]float64{300, 1}, [2]float64{100, 1}); err != nil {
		t.Errorf("-a, one size above -w: %v", err)
	}
	if err := check(200, 0, [2]float64{50, 1}, [2]float64{100, 1}); err == nil || !strings.Contains(PerftestMessage(err), "BW result is below bw limit") {
		t.Errorf("-a, every size below -w: %v", err)
	}
	if err := check(0, 2, [2]float64{50, 1}, [2]float64{60, 3}); err != nil {
		t.Errorf("-y met by one size: %v", err)
	}
	if err := check(0, 5, [2]float64{50, 1}, [2]float64{60, 3}); err == nil || !strings.Contains(PerftestMessage(err), "Msg rate  is below msg_rate limit") {
		t.Errorf("-y met by no size: %v", err)
	}
	if err := check(1e12, 1e12); err != nil {
		t.Errorf("no row checked: %v", err)
	}
}

// TestFailedSetupCloses: a run refused after the device was opened (an
// invalid completion vector) closes its context: a hundred of them leave
// the device usable.
func TestFailedSetupCloses(t *testing.T) {
	dev := device(t, emu.ProfileUnrestricted, 2)
	c := testConfig(perftest.Bandwidth, perftest.Write)
	bad := c
	bad.Events, bad.CompVector = true, 99
	for i := range 100 {
		var out, errOut bytes.Buffer
		_, err := Run(context.Background(), normalize(bad), dev, &out, &errOut)
		if err == nil || !strings.Contains(PerftestMessage(err), "Completion vector specified is invalid") {
			t.Fatalf("run %d: %v", i, err)
		}
	}
	runLoop(t, dev, c)
}

// TestConnectRefused: a client whose server is not there prints
// perftest's three lines, with the reason under the first.
func TestConnectRefused(t *testing.T) {
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	c := testConfig(perftest.Bandwidth, perftest.Write)
	c.Loopback, c.Server, c.Port, c.PeerTimeout = false, "127.0.0.1", port, 5*time.Second
	var out, errOut bytes.Buffer
	_, err = Run(context.Background(), normalize(c), device(t, emu.ProfileUnrestricted, 2), &out, &errOut)
	want := fmt.Sprintf("Couldn't connect to 127.0.0.1:%d\n (connection refused)\n"+
		"Unable to open file descriptor for socket connection\n Unable to init the socket connection\n", port)
	if got := PerftestMessage(err); got != want {
		t.Errorf("message\n%q\nwant\n%q (error %v)", got, want, err)
	}
}

// TestCompVectorLimit: as perftest's, the check of -X against the device
// lets -X equal to the number of vectors through (an off-by-one of
// perftest's); creating the CQ then fails.
func TestCompVectorLimit(t *testing.T) {
	dev := device(t, emu.ProfileUnrestricted, 2)
	for _, c := range []struct {
		vector int
		want   string
	}{
		{1, " Couldn't create IB resources\n"},
		{2, " Completion vector specified is invalid\n Max completion vector = 0\n"},
	} {
		cfg := testConfig(perftest.Bandwidth, perftest.Send)
		cfg.Events, cfg.CompVector = true, c.vector
		_, err := Run(context.Background(), normalize(cfg), dev, io.Discard, io.Discard)
		if msg := PerftestMessage(err); !strings.Contains(msg, c.want) || (c.vector == 1 && !strings.Contains(msg, "Couldn't create CQ")) {
			t.Errorf("-X %d: %q, want %q", c.vector, msg, c.want)
		}
	}
}

// TestReceiverStartsLate: a send_bw receiver whose first poll finds a
// backlog (it started late, as a loopback run's receiver often does with
// --reversed) times from its barrier, not from that poll: it never reports
// more than the emulator can copy. Before, one run in two or three
// reported terabytes per second.
func TestReceiverStartsLate(t *testing.T) {
	dev := device(t, emu.ProfileUnrestricted, 2)
	const size, n = 65536, 100
	// What the machine can copy, measured here: a bound no receiver can
	// beat. The best of measurements before, between and after the
	// runs, since one of them may fall in a moment when the machine is
	// busy; and a margin of ten, since a late receiver that times from
	// its first poll reports orders of magnitude too much.
	src, dst := make([]byte, size*n), make([]byte, size*n)
	copy(dst, src) // the pages, faulted in
	copyMiBps := 0.0
	measure := func() {
		start := time.Now()
		for range 5 {
			copy(dst, src)
		}
		copyMiBps = max(copyMiBps, float64(5*size*n)/time.Since(start).Seconds()/(1<<20))
	}
	measure()
	worst, worstRun := 0.0, 0
	for i := range 20 {
		c := testConfig(perftest.Bandwidth, perftest.Send)
		c.Iters, c.Reversed = n, true
		run, err := Run(context.Background(), normalize(c), dev, io.Discard, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range run.Results {
			if r.BW != nil && float64(r.BW.AverageMiBps) > worst {
				worst, worstRun = float64(r.BW.AverageMiBps), i
			}
		}
		measure()
	}
	if worst > 10*copyMiBps {
		t.Fatalf("run %d: the receiver reports %.0f MiB/s; copying runs at %.0f MiB/s at best", worstRun, worst, copyMiBps)
	}
}

// TestOptionEffects: what -m, -o, -I, -l, -e, -t, -r and --use-srq change
// in the calls to the device: the path MTU of RTR, the read depths of RTR
// and RTS, the inline flag of the work requests, the length of the post
// lists, waits on the completion channel, the most sends and receives
// outstanding, and where receives are posted.
func TestOptionEffects(t *testing.T) {
	t.Run("tx_depth", func(t *testing.T) {
		for _, depth := range []int{7, 32} {
			cfg := testConfig(perftest.Bandwidth, perftest.Write)
			cfg.TxDepth, cfg.CQMod = depth, 1
			r, _ := runRecorded(t, cfg)
			if r.maxSendsOut != depth {
				t.Errorf("-t %d: at most %d work requests outstanding", depth, r.maxSendsOut)
			}
		}
	})
	t.Run("rx_depth", func(t *testing.T) {
		for _, depth := range []int{16, 64} {
			cfg := testConfig(perftest.Bandwidth, perftest.Send)
			cfg.RxDepth, cfg.CQMod = depth, 1
			r, _ := runRecorded(t, cfg)
			if r.maxRecvsOut != depth {
				t.Errorf("-r %d: at most %d receives outstanding", depth, r.maxRecvsOut)
			}
		}
	})
	t.Run("use_srq", func(t *testing.T) {
		for _, srq := range []bool{false, true} {
			cfg := testConfig(perftest.Bandwidth, perftest.Send)
			cfg.UseSRQ, cfg.NumQPs = srq, 2
			r, _ := runRecorded(t, cfg)
			if srq != (r.srqQPs > 0) || srq != (len(r.recvs) == 0) {
				t.Errorf("--use-srq %v: %d QPs on an SRQ, %d receive lists posted to QPs", srq, r.srqQPs, len(r.recvs))
			}
		}
	})
	t.Run("mtu", func(t *testing.T) {
		cfg := testConfig(perftest.Bandwidth, perftest.Write)
		cfg.MTU = 256
		r, _ := runRecorded(t, cfg)
		for _, a := range r.modify {
			if a.State == verbs.StateRTR && a.PathMTU != verbs.MTU256 {
				t.Errorf("-m 256: RTR path MTU %v", a.PathMTU)
			}
		}
	})
	t.Run("outs", func(t *testing.T) {
		cfg := testConfig(perftest.Bandwidth, perftest.Read)
		cfg.OutReads = 3
		r, _ := runRecorded(t, cfg)
		var rtr, rts int
		for _, a := range r.modify {
			switch a.State {
			case verbs.StateRTR:
				if rtr++; a.MaxDestRdAtomic != 3 {
					t.Errorf("-o 3: RTR max_dest_rd_atomic %d", a.MaxDestRdAtomic)
				}
			case verbs.StateRTS:
				if rts++; a.MaxRdAtomic != 3 {
					t.Errorf("-o 3: RTS max_rd_atomic %d", a.MaxRdAtomic)
				}
			}
		}
		if rtr == 0 || rts == 0 {
			t.Errorf("%d RTR and %d RTS transitions", rtr, rts)
		}
	})
	t.Run("inline", func(t *testing.T) {
		for _, inline := range []int{0, 64} {
			cfg := testConfig(perftest.Bandwidth, perftest.Send)
			cfg.Size, cfg.Inline, cfg.InlineGiven = 64, inline, true
			r, _ := runRecorded(t, cfg)
			n := 0
			for _, w := range r.posted {
				if w.inline {
					n++
				}
			}
			if (inline > 0) != (n == len(r.posted)) || (inline == 0 && n != 0) {
				t.Errorf("-I %d: %d of %d work requests inline", inline, n, len(r.posted))
			}
		}
	})
	t.Run("post_list", func(t *testing.T) {
		cfg := testConfig(perftest.Bandwidth, perftest.Write)
		cfg.PostList, cfg.CQMod, cfg.Iters = 4, 4, 200
		r, _ := runRecorded(t, cfg)
		for _, n := range r.lists {
			if n != 4 {
				t.Fatalf("-l 4: a post of %d work requests (lists %v)", n, r.lists)
			}
		}
	})
	t.Run("events", func(t *testing.T) {
		// send_bw: the client waits for send completions, the server
		// for receive completions.
		for _, events := range []bool{false, true} {
			cfg := testConfig(perftest.Bandwidth, perftest.Send)
			cfg.Events = events
			r, _ := runRecorded(t, cfg)
			if (r.sendWaits > 0) != events || (r.recvWaits > 0) != events {
				t.Errorf("-e %v: %d waits on send CQs' channels, %d on receive CQs'", events, r.sendWaits, r.recvWaits)
			}
		}
	})
}
