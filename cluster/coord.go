package cluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"time"
)

// Defaults of Config.
const (
	DefaultRendezvousTimeout = 60 * time.Second
	DefaultPairTimeout       = 120 * time.Second
)

// Config is a run's plan, the same on every rank.
type Config struct {
	Size    int
	Pattern Pattern
	// BasePort: the server of pair i of a round listens on BasePort+i.
	BasePort int
	// RendezvousTimeout bounds rank 0's wait for every rank, and a rank's
	// attempts to reach rank 0.
	RendezvousTimeout time.Duration
	// PairTimeout bounds each pair test, from its tasks' sending to both
	// outcomes.
	PairTimeout time.Duration
	// Round, when set, is called on rank 0 after each round.
	Round func(r RoundResult)
	// Job names the launcher's job (launch.Info.JobID), if it says: rank
	// 0 refuses the hello of a rank of another job, which another run of
	// the same size on the same first node would send it.
	Job string
}

func (c *Config) defaults() error {
	if c.RendezvousTimeout <= 0 {
		c.RendezvousTimeout = DefaultRendezvousTimeout
	}
	if c.PairTimeout <= 0 {
		c.PairTimeout = DefaultPairTimeout
	}
	if c.Size < 2 {
		return fmt.Errorf("cluster: %d rank(s): a pair needs 2", c.Size)
	}
	if c.BasePort < 1 || c.BasePort+c.Size/2 > 65535 {
		return fmt.Errorf("cluster: base port %d: the servers' ports %d to %d are not all ports", c.BasePort, c.BasePort, c.BasePort+c.Size/2)
	}
	_, err := ParsePattern(string(c.Pattern))
	return err
}

// PairResult is one pair's test.
type PairResult struct {
	Round  int `json:"round"`
	Server int `json:"server"`
	Client int `json:"client"`
	// Value is the client's figure; Err, when not empty, why the pair
	// failed (then Value means nothing).
	Value   float64 `json:"value"`
	Err     string  `json:"error,omitempty"`
	Seconds float64 `json:"seconds"`
	// Path is the client's data path (Outcome.Path).
	Path string `json:"data_path,omitempty"`
}

// RoundResult is one round's pairs.
type RoundResult struct {
	Round, Rounds int
	Pairs         []PairResult
	Seconds       float64
}

// Results are a run's results, as rank 0 gathers them.
type Results struct {
	Members           []Member     `json:"members"`
	Rounds            int          `json:"rounds"`
	Pairs             []PairResult `json:"pairs"`
	RendezvousSeconds float64      `json:"rendezvous_seconds"`
	Seconds           float64      `json:"seconds"`
	// Refused are the hellos rank 0 refused at a rendezvous that
	// succeeded all the same (a rank started twice, a rank of another
	// job), and the connections that came once every rank was in; each
	// was told why.
	Refused []string `json:"refused,omitempty"`
}

// peer is rank 0's connection to a rank.
type peer struct {
	rank int
	conn net.Conn
	wmu  sync.Mutex
	gone error // why the rank is out of the run (read by the rounds only)
}

func (p *peer) send(m message) error {
	p.wmu.Lock()
	defer p.wmu.Unlock()
	_ = p.conn.SetWriteDeadline(time.Now().Add(10 * time.Second))
	return write(p.conn, m)
}

// event is a server's ready, an outcome of a rank, or the end of its
// connection.
type event struct {
	rank    int
	round   int
	ready   bool
	outcome Outcome
	err     error
}

// Coordinate is rank 0's side of a run: it accepts every rank's hello on
// ln (rank 0's own included: it joins like the others), hands out the
// members, runs the rounds of cfg.Pattern and gathers the outcomes. A rank
// that does not arrive in cfg.RendezvousTimeout fails the run, naming the
// missing ranks; a rank that leaves or does not report in
// cfg.PairTimeout fails its pairs, not the run. ln is closed on return.
func Coordinate(ctx context.Context, ln net.Listener, cfg Config) (*Results, error) {
	if err := cfg.defaults(); err != nil {
		ln.Close()
		return nil, err
	}
	start := time.Now()
	peers, members, refused, err := rendezvous(ctx, ln, cfg)
	if err != nil {
		return nil, err
	}
	res := &Results{Members: members, RendezvousSeconds: time.Since(start).Seconds(), Refused: refused}
	events := make(chan event, 2*cfg.Size)
	done := make(chan struct{})
	defer close(done)
	for _, p := range peers {
		go readOutcomes(p, events, done)
	}
	var stopped error // why rank 0 ended the run early (its context)
	defer func() {
		end := message{Type: msgDone}
		if stopped != nil {
			end = message{Type: msgAbort, Reason: "rank 0 stopped: " + stopped.Error()}
		}
		for _, p := range peers {
			_ = p.send(end)
			p.conn.Close()
		}
	}()
	for _, p := range peers {
		if err := p.send(message{Type: msgMembers, Size: cfg.Size}); err != nil {
			p.gone = fmt.Errorf("rank %d left before the first round: %w", p.rank, err)
		}
	}
	rounds, err := Schedule(cfg.Pattern, cfg.Size)
	if err != nil {
		return nil, err
	}
	res.Rounds = len(rounds)
	for r, round := range rounds {
		if ctx.Err() != nil {
			stopped = fmt.Errorf("%w before round %d", context.Cause(ctx), r+1)
			return res, fmt.Errorf("cluster: rank 0: %w", stopped)
		}
		rr := runRound(ctx, cfg, r, round, peers, members, events)
		rr.Rounds = len(rounds)
		res.Pairs = append(res.Pairs, rr.Pairs...)
		if cfg.Round != nil {
			cfg.Round(rr)
		}
		if ctx.Err() != nil {
			stopped = fmt.Errorf("%w during round %d", context.Cause(ctx), r+1)
			return res, fmt.Errorf("cluster: rank 0: %w", stopped)
		}
	}
	res.Seconds = time.Since(start).Seconds()
	return res, nil
}

// rendezvous waits for every rank's hello. It returns, with the ranks,
// what it refused on the way.
func rendezvous(ctx context.Context, ln net.Listener, cfg Config) ([]*peer, []Member, []string, error) {
	ctx, cancel := context.WithTimeout(ctx, cfg.RendezvousTimeout)
	defer cancel()
	stop := context.AfterFunc(ctx, func() { ln.Close() })
	defer stop()
	defer ln.Close()
	peers := make([]*peer, cfg.Size)
	members := make([]Member, cfg.Size)
	var mu sync.Mutex
	arrived := 0
	all := make(chan struct{})
	var wg sync.WaitGroup
	var refused []string
	// pending holds the connections that have not said hello yet: once
	// every rank is in, they are closed (a port scan or a health check
	// must not hold up the run).
	pending := map[net.Conn]bool{}
	// late tells a connection that came once every rank was in why it is
	// closed: a process that says hello then (a rank started twice) must
	// not be left with an end of file.
	late := func(conn net.Conn, what string) {
		refused = append(refused, fmt.Sprintf("%v: %s all %d ranks were in", conn.RemoteAddr(), what, cfg.Size))
		_ = conn.SetWriteDeadline(time.Now().Add(time.Second))
		_ = write(conn, message{Type: msgAbort, Reason: fmt.Sprintf("rank 0 had all %d ranks of the run when this connection came (a rank started twice?)", cfg.Size)})
		conn.Close()
	}
	deadline, _ := ctx.Deadline()
	for {
		conn, err := ln.Accept()
		if err != nil {
			break
		}
		mu.Lock()
		if arrived == cfg.Size {
			late(conn, "connected once")
			mu.Unlock()
			continue
		}
		pending[conn] = true
		mu.Unlock()
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = conn.SetReadDeadline(deadline)
			m, err := newReader(conn).read()
			why := ""
			switch {
			case err != nil:
				why = fmt.Sprintf("%v: %v", conn.RemoteAddr(), err)
			case m.Type != msgHello:
				why = fmt.Sprintf("%v: %s instead of hello", conn.RemoteAddr(), m.Type)
			case m.Version != ProtocolVersion:
				why = fmt.Sprintf("rank %d speaks version %d of the protocol, not %d", m.Member.Rank, m.Version, ProtocolVersion)
			case m.Size != cfg.Size:
				why = fmt.Sprintf("rank %d says the run has %d ranks, rank 0 says %d", m.Member.Rank, m.Size, cfg.Size)
			case m.Job != cfg.Job:
				why = fmt.Sprintf("rank %d belongs to job %q, rank 0 to job %q", m.Member.Rank, m.Job, cfg.Job)
			}
			mu.Lock()
			defer mu.Unlock()
			if !pending[conn] {
				return // closed by late: every rank was in
			}
			delete(pending, conn)
			if why == "" && peers[m.Member.Rank] != nil {
				why = fmt.Sprintf("rank %d arrived twice (%s from %v, and %s from %v)", m.Member.Rank,
					members[m.Member.Rank].Host, peers[m.Member.Rank].conn.RemoteAddr(), m.Member.Host, conn.RemoteAddr())
			}
			if why != "" {
				refused = append(refused, why)
				_ = write(conn, message{Type: msgAbort, Reason: why})
				conn.Close()
				return
			}
			_ = conn.SetReadDeadline(time.Time{})
			peers[m.Member.Rank] = &peer{rank: m.Member.Rank, conn: conn}
			members[m.Member.Rank] = *m.Member
			if arrived++; arrived == cfg.Size {
				close(all)
				ln.Close()
				for c := range pending {
					late(c, "had said nothing when")
				}
				clear(pending)
			}
		}()
	}
	wg.Wait()
	select {
	case <-all:
		return peers, members, refused, nil
	default:
	}
	var missing []string
	for r, p := range peers {
		if p == nil {
			missing = append(missing, fmt.Sprint(r))
		} else {
			_ = p.send(message{Type: msgAbort, Reason: "the rendezvous failed"})
			p.conn.Close()
		}
	}
	err := fmt.Errorf("cluster: rendezvous: %d of %d ranks arrived in %v; missing: %s", arrived, cfg.Size, cfg.RendezvousTimeout, shorten(missing, 20))
	if len(refused) > 0 {
		err = fmt.Errorf("%w; refused: %s", err, strings.Join(refused, "; "))
	}
	if ctx.Err() != nil && !errors.Is(ctx.Err(), context.DeadlineExceeded) {
		err = fmt.Errorf("%w: %w", err, context.Cause(ctx))
	}
	return nil, nil, nil, err
}

// shorten lists at most n items.
func shorten(items []string, n int) string {
	if len(items) <= n {
		return strings.Join(items, " ")
	}
	return strings.Join(items[:n], " ") + fmt.Sprintf(" and %d more", len(items)-n)
}

// readOutcomes passes on the outcomes a rank sends, then the end of its
// connection.
func readOutcomes(p *peer, events chan<- event, done <-chan struct{}) {
	r := newReader(p.conn)
	for {
		m, err := r.read()
		if err == nil && m.Type != msgOutcome && m.Type != msgReady {
			err = fmt.Errorf("%w: %s from rank %d during the rounds", errMessage, m.Type, p.rank)
		}
		e := event{rank: p.rank, err: err}
		switch {
		case err != nil:
		case m.Type == msgReady:
			e.round, e.ready = m.Round, true
		default:
			e.round, e.outcome = m.Outcome.Round, *m.Outcome
		}
		select {
		case events <- e:
		case <-done:
			return
		}
		if err != nil {
			return
		}
	}
}

// pairMargin is how much longer than the pair timeout rank 0 waits for a
// pair's outcomes: a quarter of it, at least 1 s and at most 10 s.
func pairMargin(d time.Duration) time.Duration { return min(max(d/4, time.Second), 10*time.Second) }

// runRound runs a round: it sends each server its task, each client its
// task once its server is ready, and waits for both outcomes of every
// pair, at most cfg.PairTimeout.
func runRound(ctx context.Context, cfg Config, r int, round []Pair, peers []*peer, members []Member, events <-chan event) RoundResult {
	start := time.Now()
	res := make([]PairResult, len(round))
	// owed[rank] is the pair whose outcome (or, for a server not yet
	// ready, whose ready) the rank owes.
	owed := map[int]int{}
	got := make([][2]*Outcome, len(round))
	task := func(i int, server bool) bool {
		pr := round[i]
		rank, other := pr.Server, pr.Client
		if !server {
			rank, other = other, rank
		}
		t := Task{Round: r + 1, Server: server, Peer: members[other], Port: cfg.BasePort + i}
		if err := peers[rank].send(message{Type: msgTask, Task: &t}); err != nil {
			peers[rank].gone = fmt.Errorf("rank %d left: %w", rank, err)
			return false
		}
		owed[rank] = i
		return true
	}
	for i, pr := range round {
		res[i] = PairResult{Round: r + 1, Server: pr.Server, Client: pr.Client}
		if why := gone(peers, pr); why != "" {
			res[i].Err = why
			continue
		}
		if !task(i, true) {
			res[i].Err = gone(peers, pr)
		}
	}
	// The ranks' own tests end at the pair timeout and then report:
	// rank 0 gives them a margin to do so before it gives up on a rank.
	deadline := time.NewTimer(cfg.PairTimeout + pairMargin(cfg.PairTimeout))
	defer deadline.Stop()
	for len(owed) > 0 {
		select {
		case e := <-events:
			if e.err != nil {
				peers[e.rank].gone = fmt.Errorf("rank %d left: %v", e.rank, e.err)
			}
			i, ok := owed[e.rank]
			if !ok || (e.err == nil && e.round != r+1) {
				continue // a late message of a rank already given up on
			}
			pr := round[i]
			if e.ready {
				if e.rank == pr.Server && got[i][0] == nil && (peers[pr.Client].gone != nil || !task(i, false)) {
					// The client left (perhaps while it owed nothing):
					// its server would wait for it until the pair
					// timeout.
					o := Outcome{Err: peers[pr.Client].gone.Error()}
					got[i][1] = &o
					_ = peers[pr.Server].send(message{Type: msgCancel, Round: r + 1})
				}
				continue
			}
			delete(owed, e.rank)
			o := e.outcome
			if e.err != nil {
				o = Outcome{Err: peers[e.rank].gone.Error()}
			}
			side := 0
			if e.rank == pr.Client {
				side = 1
				// A server whose client failed would wait for it
				// until the pair timeout.
				if _, waiting := owed[pr.Server]; waiting && o.Err != "" && peers[pr.Server].gone == nil {
					_ = peers[pr.Server].send(message{Type: msgCancel, Round: r + 1})
				}
			}
			got[i][side] = &o
		case <-deadline.C:
			for rank := range owed {
				// The round is named: the rank's later links,
				// which do not run, give this as their reason.
				peers[rank].gone = fmt.Errorf("rank %d did not report in round %d within %v (the pair timeout and a margin); given up on", rank, r+1, cfg.PairTimeout+pairMargin(cfg.PairTimeout))
			}
			owed = nil
		case <-ctx.Done():
			for rank := range owed {
				peers[rank].gone = context.Cause(ctx)
			}
			owed = nil
		}
	}
	for i, pr := range round {
		if res[i].Err != "" {
			continue
		}
		s, c := got[i][0], got[i][1]
		switch {
		case s != nil && c == nil && s.Err != "":
			res[i].Err = fmt.Sprintf("server (rank %d): %s", pr.Server, s.Err)
		case s == nil || c == nil:
			res[i].Err = gone(peers, pr)
		case c.Err != "" && s.Err != "":
			res[i].Err = fmt.Sprintf("client (rank %d): %s; server (rank %d): %s", pr.Client, c.Err, pr.Server, s.Err)
		case c.Err != "":
			res[i].Err = fmt.Sprintf("client (rank %d): %s", pr.Client, c.Err)
		case s.Err != "":
			res[i].Err = fmt.Sprintf("server (rank %d): %s", pr.Server, s.Err)
		default:
			res[i].Value, res[i].Path = c.Value, c.Path
		}
		res[i].Seconds = time.Since(start).Seconds()
	}
	return RoundResult{Round: r + 1, Pairs: res, Seconds: time.Since(start).Seconds()}
}

// gone says why a pair cannot run ("" when both ranks are in the run).
func gone(peers []*peer, pr Pair) string {
	var why []string
	for _, r := range []int{pr.Server, pr.Client} {
		if peers[r].gone != nil {
			why = append(why, peers[r].gone.Error())
		}
	}
	slices.Sort(why)
	return strings.Join(slices.Compact(why), "; ")
}
