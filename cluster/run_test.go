package cluster

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"strings"
	"sync"
	"testing"
	"time"
)

// simulated runs a coordinator and n ranks in this process; test(rank)
// is each rank's test (nil: the rank never joins).
func simulated(t testing.TB, cfg Config, test func(rank int, die func()) Test) (*Results, []error, error) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	errs := make([]error, cfg.Size)
	var wg sync.WaitGroup
	for r := range cfg.Size {
		rctx, die := context.WithCancel(ctx)
		defer die()
		f := test(r, die)
		if f == nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[r] = Join(rctx, addr, cfg, Member{Rank: r, Host: fmt.Sprintf("node%d", r)}, f)
		}()
	}
	res, err := Coordinate(ctx, ln, cfg)
	wg.Wait()
	return res, errs, err
}

// value is the simulated figure of a pair.
func value(t Task, self int) Outcome {
	if t.Server {
		return Outcome{}
	}
	return Outcome{Value: float64(1000*t.Peer.Rank + self)}
}

func healthy(rank int, _ func()) Test {
	return func(_ context.Context, t Task, ready func()) Outcome {
		if t.Server {
			ready()
		}
		return value(t, rank)
	}
}

func TestRun(t *testing.T) {
	var rounds []RoundResult
	cfg := Config{Size: 6, Pattern: AllPairs, BasePort: 20000, Round: func(r RoundResult) { rounds = append(rounds, r) }}
	res, errs, err := simulated(t, cfg, healthy)
	if err != nil || errors.Join(errs...) != nil {
		t.Fatalf("run: %v; ranks: %v", err, errs)
	}
	if res.Rounds != 5 || len(res.Pairs) != 15 || len(rounds) != 5 || len(res.Members) != 6 {
		t.Fatalf("%d rounds, %d pairs, %d round reports, %d members", res.Rounds, len(res.Pairs), len(rounds), len(res.Members))
	}
	for _, p := range res.Pairs {
		if p.Err != "" || p.Value != float64(1000*p.Server+p.Client) {
			t.Errorf("pair %+v", p)
		}
	}
	for i, m := range res.Members {
		if m.Rank != i || m.Addr != "127.0.0.1" || m.Host != fmt.Sprintf("node%d", i) {
			t.Errorf("member %d: %+v", i, m)
		}
	}
}

// A rank that dies after the rendezvous fails its pairs, not the run; a
// rank whose test hangs fails its pair at the pair timeout, and its later
// pairs at once.
func TestFailingRanks(t *testing.T) {
	cfg := Config{Size: 6, Pattern: AllPairs, BasePort: 20000, PairTimeout: 300 * time.Millisecond}
	res, errs, err := simulated(t, cfg, func(rank int, die func()) Test {
		switch rank {
		case 2: // dies at its first task
			return func(context.Context, Task, func()) Outcome {
				die()
				time.Sleep(100 * time.Millisecond)
				return Outcome{}
			}
		case 4: // hangs past the pair timeout
			return func(ctx context.Context, t Task, ready func()) Outcome {
				if t.Server {
					ready()
				}
				<-ctx.Done()
				time.Sleep(3 * time.Second) // past rank 0's margin
				return Outcome{}
			}
		}
		return healthy(rank, die)
	})
	if errs[2] == nil {
		t.Error("the dead rank's Join returned no error")
	}
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	hung := 0 // the round rank 4 was given up in
	for _, p := range res.Pairs {
		involved := func(r int) bool { return p.Server == r || p.Client == r }
		switch {
		case involved(2) || involved(4):
			if p.Err == "" {
				t.Errorf("pair %+v of a failing rank did not fail", p)
			}
		case p.Err != "" || p.Value != float64(1000*p.Server+p.Client):
			t.Errorf("pair %+v of healthy ranks", p)
		}
		if !involved(4) || involved(2) {
			continue
		}
		// rank 4's later pairs, which do not run, name the round it
		// hung in.
		if hung == 0 {
			hung = p.Round
		}
		if want := fmt.Sprintf("rank 4 did not report in round %d within", hung); !strings.Contains(p.Err, want) {
			t.Errorf("pair %+v: the error does not say %q", p, want)
		}
	}
	if hung == 0 {
		t.Error("no pair of rank 4 alone")
	}
}

// A pair whose test ends at the pair timeout fails alone: both its ranks,
// which reported in time, run their later pairs.
func TestPairTimeoutKeepsRanks(t *testing.T) {
	cfg := Config{Size: 4, Pattern: AllPairs, BasePort: 20000, PairTimeout: 300 * time.Millisecond}
	res, errs, err := simulated(t, cfg, func(rank int, die func()) Test {
		return func(ctx context.Context, t Task, ready func()) Outcome {
			if t.Peer.Rank+rank != 1 { // not the pair of ranks 0 and 1
				return healthy(rank, die)(ctx, t, ready)
			}
			if t.Server {
				ready()
			}
			<-ctx.Done()
			return Outcome{Err: context.Cause(ctx).Error()}
		}
	})
	if err != nil || errors.Join(errs...) != nil {
		t.Fatalf("run: %v; ranks: %v", err, errs)
	}
	for _, p := range res.Pairs {
		stalled := p.Server+p.Client == 1
		if stalled != (p.Err != "") {
			t.Errorf("pair %+v", p)
		}
		if stalled && !strings.Contains(p.Err, "the pair timeout") {
			t.Errorf("stalled pair's error %q does not name the pair timeout", p.Err)
		}
	}
}

// A rank that leaves between rounds, owing nothing, fails its later pairs
// at once: its servers are cancelled, and their ranks stay in the run.
func TestClientLeavesBetweenRounds(t *testing.T) {
	cfg := Config{Size: 4, Pattern: AllPairs, BasePort: 20000, PairTimeout: 500 * time.Millisecond}
	res, errs, err := simulated(t, cfg, func(rank int, die func()) Test {
		return func(ctx context.Context, t Task, ready func()) Outcome {
			if rank == 2 && t.Round == 1 {
				// Gone after reporting round 1, while it owes nothing.
				go func() { time.Sleep(100 * time.Millisecond); die() }()
			}
			if t.Server && t.Peer.Rank == 2 && t.Round > 1 {
				time.Sleep(200 * time.Millisecond) // ready after rank 2 left
				ready()
				<-ctx.Done() // its client never comes
				return Outcome{Err: context.Cause(ctx).Error()}
			}
			if t.Server {
				ready()
			}
			return value(t, rank)
		}
	})
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	for r, e := range errs {
		if r != 2 && e != nil {
			t.Errorf("rank %d: %v", r, e)
		}
	}
	for _, p := range res.Pairs {
		involved := p.Server == 2 || p.Client == 2
		switch {
		case involved && p.Round > 1:
			if !strings.Contains(p.Err, "rank 2 left") {
				t.Errorf("pair %+v: want an error saying rank 2 left", p)
			}
		case p.Err != "":
			t.Errorf("pair %+v failed", p)
		}
	}
}

// A test that gives no finite number fails its pair, not its rank.
func TestInfiniteResult(t *testing.T) {
	cfg := Config{Size: 3, Pattern: AllPairs, BasePort: 20000}
	res, errs, err := simulated(t, cfg, func(rank int, die func()) Test {
		return func(ctx context.Context, t Task, ready func()) Outcome {
			if rank == 1 && !t.Server {
				return Outcome{Value: math.Inf(1)}
			}
			return healthy(rank, die)(ctx, t, ready)
		}
	})
	if err != nil || errors.Join(errs...) != nil {
		t.Fatalf("run: %v; ranks: %v", err, errs)
	}
	failed := 0
	for _, p := range res.Pairs {
		if bad := p.Client == 1; bad != (p.Err != "") || bad && !strings.Contains(p.Err, "no finite result (+Inf)") {
			t.Errorf("pair %+v", p)
		}
		if p.Err != "" {
			failed++
		}
	}
	if failed == 0 {
		t.Error("rank 1 was the client of no pair")
	}
}

// A client that fails makes rank 0 cancel its server's test, which would
// otherwise wait for its client until the pair timeout.
func TestCancelServer(t *testing.T) {
	cfg := Config{Size: 2, Pattern: AllPairs, BasePort: 20000, PairTimeout: time.Minute}
	res, errs, err := simulated(t, cfg, func(rank int, die func()) Test {
		return func(ctx context.Context, t Task, ready func()) Outcome {
			if !t.Server {
				return Outcome{Err: "Couldn't connect"}
			}
			ready()
			<-ctx.Done()
			return Outcome{Err: context.Cause(ctx).Error()}
		}
	})
	if err != nil || errors.Join(errs...) != nil {
		t.Fatalf("run: %v; ranks: %v", err, errs)
	}
	if len(res.Pairs) != 1 || !strings.Contains(res.Pairs[0].Err, "client (rank 1): Couldn't connect; server (rank 0): context canceled") {
		t.Errorf("pairs: %+v", res.Pairs)
	}
}

func TestRendezvousMissingRank(t *testing.T) {
	cfg := Config{Size: 4, Pattern: Ring, BasePort: 20000, RendezvousTimeout: 500 * time.Millisecond}
	_, errs, err := simulated(t, cfg, func(rank int, die func()) Test {
		if rank == 3 {
			return nil
		}
		return healthy(rank, die)
	})
	for r, e := range errs[:3] {
		if !errors.Is(e, ErrAborted) {
			t.Errorf("rank %d: %v, want ErrAborted", r, e)
		}
	}
	if err == nil || !strings.Contains(err.Error(), "3 of 4 ranks arrived") || !strings.Contains(err.Error(), "missing: 3") {
		t.Errorf("err = %v", err)
	}
}

// A rank of another job (another run of the same size whose rank 0 is on
// the same node) is refused, with a message naming both jobs.
func TestRendezvousOtherJob(t *testing.T) {
	cfg := Config{Size: 2, Pattern: AllPairs, BasePort: 20000, RendezvousTimeout: 500 * time.Millisecond, Job: "42.0"}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	other := cfg
	other.Job = "43.0"
	errc := make(chan error, 1)
	go func() {
		errc <- Join(context.Background(), ln.Addr().String(), other, Member{Rank: 1, Host: "node7"}, healthy(1, nil))
	}()
	_, err = Coordinate(context.Background(), ln, cfg)
	if e := <-errc; !errors.Is(e, ErrAborted) || !strings.Contains(e.Error(), `rank 1 belongs to job "43.0", rank 0 to job "42.0"`) {
		t.Errorf("the other job's rank: %v", e)
	}
	if err == nil {
		t.Error("the rendezvous succeeded with a rank of another job")
	}
}

// A connection that says nothing does not hold up a rendezvous every rank
// has reached.
func TestRendezvousSilentConnection(t *testing.T) {
	cfg := Config{Size: 2, Pattern: AllPairs, BasePort: 20000, RendezvousTimeout: time.Minute}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	silent, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	done := make(chan error, 2)
	go func() {
		done <- Join(context.Background(), ln.Addr().String(), cfg, Member{Rank: 1, Host: "node1"}, healthy(1, nil))
	}()
	go func() {
		_, err := Coordinate(context.Background(), ln, cfg)
		done <- err
	}()
	go func() {
		done <- Join(context.Background(), ln.Addr().String(), cfg, Member{Rank: 0, Host: "node0"}, healthy(0, nil))
	}()
	for range 3 {
		select {
		case err := <-done:
			if err != nil {
				t.Error(err)
			}
		case <-time.After(20 * time.Second):
			t.Fatal("the run waits for a connection that said nothing (rendezvous timeout 1 min)")
		}
	}
}

// TestScale runs 1,024 simulated ranks in this process: the rendezvous,
// then a ring (two rounds of 512 pairs) and the aggregation of its pairs;
// it logs the rendezvous time. BenchmarkAllPairs1024 runs all 1,023 rounds.
func TestScale(t *testing.T) {
	const n = 1024
	res := scale(t, Ring, n)
	if res.Rounds != 2 || len(res.Pairs) != n {
		t.Fatalf("%d rounds, %d pairs", res.Rounds, len(res.Pairs))
	}
	t.Logf("%d ranks: rendezvous %.3f s, %d rounds in %.3f s", n, res.RendezvousSeconds, res.Rounds, res.Seconds-res.RendezvousSeconds)
}

// scale runs n healthy simulated ranks and checks every pair.
func scale(t testing.TB, p Pattern, n int) *Results {
	cfg := Config{Size: n, Pattern: p, BasePort: 20000}
	res, errs, err := simulated(t, cfg, healthy)
	if err != nil || errors.Join(errs...) != nil {
		t.Fatalf("run: %v; ranks: %v", err, errors.Join(errs...))
	}
	seen := make(map[[2]int]bool, len(res.Pairs))
	for _, p := range res.Pairs {
		k := [2]int{min(p.Server, p.Client), max(p.Server, p.Client)}
		if seen[k] || p.Err != "" || p.Value != float64(1000*p.Server+p.Client) {
			t.Fatalf("pair %+v (seen before: %v)", p, seen[k])
		}
		seen[k] = true
	}
	return res
}

// BenchmarkAllPairs1024: the rendezvous of 1,024 ranks and the 1,023
// rounds of all pairs (523,776 pairs), with tests that take no time: what
// the coordination itself costs.
func BenchmarkAllPairs1024(b *testing.B) {
	const n = 1024
	for b.Loop() {
		res := scale(b, AllPairs, n)
		if len(res.Pairs) != n*(n-1)/2 {
			b.Fatalf("%d pairs", len(res.Pairs))
		}
		b.ReportMetric(res.RendezvousSeconds, "rendezvous-s")
		b.ReportMetric(1000*(res.Seconds-res.RendezvousSeconds)/float64(res.Rounds), "ms/round")
	}
}

// TestRankStoppedMidTest: a rank stopped during its test (a signal cancels
// its context) says so, and does not blame rank 0 for the connection its
// own end closed.
func TestRankStoppedMidTest(t *testing.T) {
	cfg := Config{Size: 2, Pattern: AllPairs, BasePort: 20000, PairTimeout: 5 * time.Second}
	_, errs, _ := simulated(t, cfg, func(rank int, die func()) Test {
		return func(ctx context.Context, t Task, ready func()) Outcome {
			if t.Server {
				ready()
			}
			if rank == 1 {
				die()
				// A test ends a while after its context: the
				// connection to rank 0 has closed meanwhile.
				time.Sleep(300 * time.Millisecond)
			}
			<-ctx.Done()
			return Outcome{Err: context.Cause(ctx).Error()}
		}
	})
	t.Logf("rank 1: %v", errs[1])
	if errs[1] == nil || !errors.Is(errs[1], context.Canceled) || !strings.Contains(errs[1].Error(), "during round 1") || strings.Contains(errs[1].Error(), "rank 0") {
		t.Errorf("rank 1, stopped: %v", errs[1])
	}
}

// TestLateRankToldTheRunEnded: a rank whose test outlasted the pair
// timeout and its margin (stopped, then resumed), and that hears from
// rank 0 that the run is over, says what happened instead of calling the
// message malformed.
func TestLateRankToldTheRunEnded(t *testing.T) {
	// Rank 0 gives up on the pair after 2 s and the margin (1 s), and
	// ends the run; the rank's own wait for rank 0 lasts (rounds + 1) × 2 s.
	cfg := Config{Size: 2, Pattern: AllPairs, BasePort: 20000, PairTimeout: 2 * time.Second}
	_, errs, err := simulated(t, cfg, func(rank int, die func()) Test {
		return func(ctx context.Context, t Task, ready func()) Outcome {
			if t.Server {
				ready()
			}
			if rank == 1 {
				time.Sleep(cfg.PairTimeout + pairMargin(cfg.PairTimeout) + 500*time.Millisecond) // deaf to ctx, as a stopped process
			}
			<-ctx.Done()
			return Outcome{Err: context.Cause(ctx).Error()}
		}
	})
	t.Logf("run: %v; rank 1: %v", err, errs[1])
	if errs[1] == nil || errors.Is(errs[1], errMessage) || !strings.Contains(errs[1].Error(), "ended the run during round 1") {
		t.Errorf("rank 1, late: %v", errs[1])
	}
}

// TestRankZeroStopped: rank 0 stopped mid-round (a signal cancels its
// context) ends the run with that cause, and every other rank, in a test
// or between two, fails saying rank 0 stopped and why.
func TestRankZeroStopped(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{Size: 4, Pattern: AllPairs, BasePort: 20000, PairTimeout: 10 * time.Second}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cctx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	signalled := errors.New("interrupted by SIGINT")
	errs := make([]error, cfg.Size)
	var wg sync.WaitGroup
	for r := 1; r < cfg.Size; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[r] = Join(ctx, ln.Addr().String(), cfg, Member{Rank: r, Host: fmt.Sprint("node", r)}, func(ctx context.Context, t Task, ready func()) Outcome {
				if t.Server {
					ready()
				}
				if r == 3 {
					stop(signalled) // rank 0 is interrupted while 2->3 and 0->1 run
				}
				<-ctx.Done()
				return Outcome{Err: context.Cause(ctx).Error()}
			})
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		errs[0] = Join(ctx, ln.Addr().String(), cfg, Member{Rank: 0, Host: "node0"}, func(ctx context.Context, t Task, ready func()) Outcome {
			if t.Server {
				ready()
			}
			<-ctx.Done()
			return Outcome{Err: context.Cause(ctx).Error()}
		})
	}()
	_, err = Coordinate(cctx, ln, cfg)
	wg.Wait()
	if err == nil || !errors.Is(err, signalled) || !strings.Contains(err.Error(), "rank 0: interrupted by SIGINT during round 1") {
		t.Errorf("rank 0: %v", err)
	}
	for r, e := range errs {
		if e == nil || !errors.Is(e, ErrAborted) || !strings.Contains(e.Error(), "rank 0 stopped: interrupted by SIGINT during round 1") {
			t.Errorf("rank %d: %v", r, e)
		}
	}
}

// rankZero runs rank 0's side of a run of cfg in the background, on a
// listener of 127.0.0.1 whose address it returns; coordinated waits for
// its end.
func rankZero(t *testing.T, ctx context.Context, cfg Config) (addr string, coordinated func() (*Results, error)) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	type outcome struct {
		res *Results
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		res, err := Coordinate(ctx, ln, cfg)
		done <- outcome{res, err}
	}()
	return ln.Addr().String(), func() (*Results, error) {
		o := <-done
		return o.res, o.err
	}
}

// TestRankTwice: a second rank with a number already taken is refused,
// the message naming both hosts and their addresses (hosts may share a
// name); the run goes on with the first.
func TestRankTwice(t *testing.T) {
	cfg := Config{Size: 2, Pattern: AllPairs, BasePort: 20000, RendezvousTimeout: 10 * time.Second}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	addr, coordinated := rankZero(t, ctx, cfg)
	first := make(chan error, 1)
	go func() { first <- Join(ctx, addr, cfg, Member{Rank: 1, Host: "vm"}, healthy(1, nil)) }()
	// The second comes once the first is in.
	time.Sleep(200 * time.Millisecond)
	second := Join(ctx, addr, cfg, Member{Rank: 1, Host: "vm"}, healthy(1, nil))
	if err := Join(ctx, addr, cfg, Member{Rank: 0, Host: "vm"}, healthy(0, nil)); err != nil {
		t.Errorf("rank 0's member: %v", err)
	}
	res, err := coordinated()
	if err != nil {
		t.Errorf("run: %v", err)
	}
	if err := <-first; err != nil {
		t.Errorf("the first rank 1: %v", err)
	}
	if second == nil || !strings.Contains(second.Error(), "rank 1 arrived twice (vm from 127.0.0.1:") || strings.Count(second.Error(), "127.0.0.1:") != 2 {
		t.Errorf("the second rank 1: %v", second)
	}
	// Rank 0 says what it refused, though the run went on.
	if res == nil {
		t.Fatal("no results")
	}
	if len(res.Refused) != 1 || !strings.Contains(res.Refused[0], "rank 1 arrived twice") {
		t.Errorf("rank 0's refused: %q", res.Refused)
	}
}

// TestLateConnection: a connection still without a hello when the last
// rank arrives (a rank started twice, whose hello is on its way) is told
// why it is closed, and rank 0 lists it.
func TestLateConnection(t *testing.T) {
	cfg := Config{Size: 2, Pattern: AllPairs, BasePort: 20000, RendezvousTimeout: 10 * time.Second}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	addr, coordinated := rankZero(t, ctx, cfg)
	late, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer late.Close()
	time.Sleep(500 * time.Millisecond) // accepted, pending
	ranks := make(chan error, 2)
	for r := range 2 {
		go func() { ranks <- Join(ctx, addr, cfg, Member{Rank: r, Host: "vm"}, healthy(r, nil)) }()
	}
	_ = late.SetReadDeadline(time.Now().Add(30 * time.Second))
	m, err := newReader(late).read()
	if err != nil || m.Type != msgAbort || !strings.Contains(m.Reason, "rank 0 had all 2 ranks of the run when this connection came") {
		t.Errorf("the late connection read %+v, %v", m, err)
	}
	for range 2 {
		if err := <-ranks; err != nil {
			t.Errorf("rank: %v", err)
		}
	}
	res, err := coordinated()
	if err != nil {
		t.Errorf("run: %v", err)
	}
	if res == nil {
		t.Fatal("no results")
	}
	if len(res.Refused) != 1 || !strings.Contains(res.Refused[0], "had said nothing when all 2 ranks were in") {
		t.Errorf("rank 0's refused: %q", res.Refused)
	}
}
