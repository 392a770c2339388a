package cluster

import (
	"context"
	"errors"
	"fmt"
	"math"
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
	// Only the number of rounds: each rank building the schedule of a
	// large run would cost more than the rendezvous.
	rounds := Rounds(cfg.Pattern, cfg.Size)
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
	if err := write(conn, message{Type: msgHello, Version: ProtocolVersion, Size: cfg.Size, Member: &me, Job: cfg.Job}); err != nil {
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
	idle := time.Duration(rounds+1) * cfg.PairTimeout
	// The messages of rank 0 are read all along, so that a cancel reaches
	// a test under way.
	type read struct {
		m   message
		err error
	}
	msgs := make(chan read, 1)
	quit := make(chan struct{})
	defer close(quit)
	go func() {
		for {
			_ = conn.SetReadDeadline(time.Now().Add(idle))
			m, err := r.read()
			select {
			case msgs <- read{m, err}:
			case <-quit:
				return
			}
			if err != nil {
				return
			}
		}
	}()
	var wmu sync.Mutex
	send := func(m message) error {
		wmu.Lock()
		defer wmu.Unlock()
		_ = conn.SetWriteDeadline(time.Now().Add(cfg.PairTimeout))
		return write(conn, m)
	}
	// next is rank 0's next message between tests.
	next := func() (message, error) {
		in := <-msgs
		if in.err != nil {
			return message{}, fmt.Errorf("cluster: rank %d: waiting for rank 0: %w", me.Rank, ctxErr(ctx, in.err))
		}
		switch in.m.Type {
		case msgDone, msgTask, msgCancel:
			return in.m, nil
		case msgAbort:
			return message{}, fmt.Errorf("%w by rank 0: %s", ErrAborted, in.m.Reason)
		}
		return message{}, fmt.Errorf("cluster: rank %d: %w: %s from rank 0", me.Rank, errMessage, in.m.Type)
	}
	for {
		m, err := next()
		if err != nil {
			return err
		}
		switch m.Type {
		case msgDone:
			return nil
		case msgCancel:
			continue // the test it cancels has ended
		}
		task := *m.Task
		tctx, cancel := context.WithTimeoutCause(ctx, cfg.PairTimeout, fmt.Errorf("the pair timeout (%v) ended the test", cfg.PairTimeout))
		var once sync.Once
		ready := func() {
			once.Do(func() { _ = send(message{Type: msgReady, Round: task.Round}) })
		}
		done := make(chan Outcome, 1)
		go func() { done <- test(tctx, task, ready) }()
		var o Outcome
	wait:
		for {
			select {
			case o = <-done:
				break wait
			case in := <-msgs:
				if in.err == nil && in.m.Type == msgCancel && in.m.Round == task.Round {
					cancel()
					continue
				}
				// Anything else ends the run: the test ends with it.
				cancel()
				<-done
				switch {
				case ctx.Err() != nil:
					// This rank was stopped (a signal): its connection
					// to rank 0 closed with it.
					return fmt.Errorf("cluster: rank %d: %w during round %d", me.Rank, context.Cause(ctx), task.Round)
				case in.err != nil:
					return fmt.Errorf("cluster: rank %d: rank 0 gone during round %d: %w", me.Rank, task.Round, in.err)
				case in.m.Type == msgAbort:
					return fmt.Errorf("%w by rank 0: %s", ErrAborted, in.m.Reason)
				case in.m.Type == msgDone:
					// Rank 0 gave up waiting for this pair (the pair
					// timeout) and ended the run.
					return fmt.Errorf("cluster: rank %d: rank 0 ended the run during round %d, whose pair it had failed for not reporting in time", me.Rank, task.Round)
				}
				return fmt.Errorf("cluster: rank %d: %w: %s from rank 0 during round %d", me.Rank, errMessage, in.m.Type, task.Round)
			}
		}
		cancel()
		o.Round = task.Round
		if math.IsNaN(o.Value) || math.IsInf(o.Value, 0) {
			// JSON has no such numbers (a duration run that completed
			// nothing gives one): the pair fails, saying why.
			if o.Err == "" {
				o.Err = fmt.Sprintf("no finite result (%v)", o.Value)
			}
			o.Value = 0
		}
		if err := send(message{Type: msgOutcome, Outcome: &o}); err != nil {
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
