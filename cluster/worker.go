package cluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"
)

// Test runs one task on a rank: as the server, it listens on t.Port for
// t.Peer and calls ready once it does; as the client, it connects to
// t.Peer.Addr on t.Port. It returns the client's figure (the server's is
// not used), or the error.
type Test func(ctx context.Context, t Task, ready func()) Outcome

// ErrAborted means that rank 0 ended the run (a failed rendezvous, a
// refused rank).
var ErrAborted = errors.New("cluster: the run was aborted")

// Join is a rank's side of a run: it reaches rank 0 at addr (trying again
// until cfg.RendezvousTimeout), says hello as me, waits for the members,
// then runs the task of each round it takes part in with test, until rank
// 0 says the run is done. Between two tasks it waits at most the whole
// run's length (rounds × cfg.PairTimeout) for rank 0.
func Join(ctx context.Context, addr string, cfg Config, me Member, test Test) error {
	if err := cfg.defaults(); err != nil {
		return err
	}
	rounds, err := Schedule(cfg.Pattern, cfg.Size)
	if err != nil {
		return err
	}
	conn, err := dial(ctx, addr, cfg.RendezvousTimeout)
	if err != nil {
		return err
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	if me.Addr == "" {
		// The address rank 0 is reached from: the interface peers use.
		if a, ok := conn.LocalAddr().(*net.TCPAddr); ok {
			me.Addr = a.IP.String()
		}
	}
	_ = conn.SetWriteDeadline(time.Now().Add(cfg.RendezvousTimeout))
	if err := write(conn, message{Type: msgHello, Version: ProtocolVersion, Size: cfg.Size, Member: &me}); err != nil {
		return fmt.Errorf("cluster: rank %d: hello to rank 0 at %s: %w", me.Rank, addr, err)
	}
	r := newReader(conn)
	// Rank 0 answers within its own rendezvous timeout, which may have
	// begun after this rank's: the margin lets its answer (or its abort)
	// arrive first.
	_ = conn.SetReadDeadline(time.Now().Add(cfg.RendezvousTimeout + rendezvousMargin))
	m, err := r.read()
	switch {
	case err != nil:
		return fmt.Errorf("cluster: rank %d: waiting for the other ranks: %w", me.Rank, ctxErr(ctx, err))
	case m.Type == msgAbort:
		return fmt.Errorf("%w by rank 0: %s", ErrAborted, m.Reason)
	case m.Type != msgMembers || m.Size != cfg.Size:
		return fmt.Errorf("cluster: rank %d: %w: %s of %d ranks instead of the members of %d", me.Rank, errMessage, m.Type, m.Size, cfg.Size)
	}
	idle := time.Duration(len(rounds)+1) * cfg.PairTimeout
	for {
		_ = conn.SetReadDeadline(time.Now().Add(idle))
		m, err := r.read()
		if err != nil {
			return fmt.Errorf("cluster: rank %d: waiting for rank 0: %w", me.Rank, ctxErr(ctx, err))
		}
		switch m.Type {
		case msgDone:
			return nil
		case msgAbort:
			return fmt.Errorf("%w by rank 0: %s", ErrAborted, m.Reason)
		case msgTask:
		default:
			return fmt.Errorf("cluster: rank %d: %w: %s from rank 0", me.Rank, errMessage, m.Type)
		}
		tctx, cancel := context.WithTimeout(ctx, cfg.PairTimeout)
		var once sync.Once
		round := m.Task.Round
		ready := func() {
			once.Do(func() {
				_ = conn.SetWriteDeadline(time.Now().Add(cfg.PairTimeout))
				_ = write(conn, message{Type: msgReady, Round: round})
			})
		}
		o := test(tctx, *m.Task, ready)
		cancel()
		o.Round = m.Task.Round
		_ = conn.SetWriteDeadline(time.Now().Add(cfg.PairTimeout))
		if err := write(conn, message{Type: msgOutcome, Outcome: &o}); err != nil {
			return fmt.Errorf("cluster: rank %d: report to rank 0: %w", me.Rank, ctxErr(ctx, err))
		}
	}
}

// rendezvousMargin is how much longer than the rendezvous timeout a rank
// waits for the members.
const rendezvousMargin = 10 * time.Second

// dial reaches addr, trying again every 100 ms while it refuses, for at
// most timeout.
func dial(ctx context.Context, addr string, timeout time.Duration) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var d net.Dialer
	for {
		conn, err := d.DialContext(ctx, "tcp", addr)
		if err == nil {
			return conn, nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("cluster: rank 0 at %s not reached in %v: %w", addr, timeout, err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// ctxErr prefers ctx's cause to the error its cancellation made.
func ctxErr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	return err
}
