package cmbench

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"time"

	"github.com/pvperf/pvperf/verbs"
)

// Defaults of Config.
const (
	DefaultConns          = 100
	DefaultResolveTimeout = 2000 * time.Millisecond // cmtime's -t
	DefaultRetries        = 2                       // cmtime's -r
	DefaultPeerTimeout    = 30 * time.Second
)

// Role is the side of a run.
type Role string

// Roles.
const (
	Client Role = "client"
	Server Role = "server"
)

// Config is one side of a run.
type Config struct {
	// Context is the device the connections must go through: an id that
	// resolves to another device (node GUID) is an error. Its QPs, PD
	// and CQ are made on it.
	Context verbs.Context
	// CM is the connection manager of the device.
	CM verbs.CM
	// Role: Server listens on Addr, Client connects to it.
	Role Role
	// Addr is the server's address: where the server listens (port 0:
	// any free port) and where the client connects.
	Addr netip.AddrPort
	// Src is the client's source address (zero: the route's).
	Src netip.Addr
	// Conns is the number of connections.
	Conns int
	// ResolveTimeout bounds one address or route resolution, tried
	// again Retries times when it fails.
	ResolveTimeout time.Duration
	Retries        int
	// PeerTimeout bounds each wait for the peer: an answer, the next
	// request (the server's first excepted), a disconnection.
	PeerTimeout time.Duration
	// Listening, when set, is called once the server listens, with its
	// address (the port chosen, when Addr's was 0).
	Listening func(netip.AddrPort)
}

// ErrConfig is the error of an invalid Config.
var ErrConfig = errors.New("invalid configuration")

func (c *Config) check() error {
	switch {
	case c.Context == nil || c.CM == nil:
		return fmt.Errorf("%w: no device or no connection manager", ErrConfig)
	case c.Role != Client && c.Role != Server:
		return fmt.Errorf("%w: role %q", ErrConfig, c.Role)
	case c.Conns < 1:
		return fmt.Errorf("%w: %d connections (at least 1)", ErrConfig, c.Conns)
	case !c.Addr.Addr().IsValid():
		return fmt.Errorf("%w: no server address", ErrConfig)
	case c.Role == Client && c.Addr.Port() == 0:
		return fmt.Errorf("%w: no server port", ErrConfig)
	case c.ResolveTimeout <= 0 || c.PeerTimeout <= 0 || c.Retries < 0:
		return fmt.Errorf("%w: timeouts must be positive, retries not negative", ErrConfig)
	}
	return nil
}

// conn is one connection and the time of each of its steps.
type conn struct {
	id    verbs.CMID
	qp    verbs.QP
	start time.Time
	d     [numSteps]time.Duration
}

// step runs f as step s of c.
func (c *conn) step(s Step, f func() error) error {
	t := time.Now()
	err := f()
	c.d[s] = time.Since(t)
	return err
}

// run is one side's state.
type run struct {
	cfg   *Config
	guid  uint64
	dev   string
	pd    verbs.PD
	cq    verbs.CQ
	conns []*conn
	wall  [numSteps]time.Duration
	// first and last bound the connections' setup: the first id's
	// creation (client) or request (server) to the last establishment.
	first, last time.Time
	mu          sync.Mutex
}

// Run runs one side of the benchmark and returns its measurements. On an
// error, every id and QP made so far is destroyed before it returns.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	attr, err := cfg.Context.QueryDevice()
	if err != nil {
		return nil, fmt.Errorf("cmbench: query device: %w", err)
	}
	r := &run{cfg: &cfg, guid: attr.NodeGUID, dev: cfg.Context.Device().Name()}
	if r.pd, err = cfg.Context.AllocPD(); err != nil {
		return nil, fmt.Errorf("cmbench: alloc pd: %w", err)
	}
	defer r.pd.Close()
	if r.cq, err = cfg.Context.CreateCQ(verbs.CQInit{Entries: 1}); err != nil {
		return nil, fmt.Errorf("cmbench: create cq: %w", err)
	}
	defer r.cq.Close()
	defer r.cleanup()
	if cfg.Role == Server {
		err = r.server(ctx)
	} else {
		err = r.client(ctx)
	}
	if err != nil && ctx.Err() != nil {
		// The caller's context ended the run (an interrupt): that is the
		// reason, not the echo of it in every connection.
		return nil, context.Cause(ctx)
	}
	if err != nil {
		return nil, err
	}
	return r.result(), nil
}

// cleanup destroys what a failed run leaves: QPs, then ids.
func (r *run) cleanup() {
	for _, c := range r.conns {
		if c == nil {
			continue
		}
		if c.qp != nil {
			_ = c.qp.Close()
		}
		if c.id != nil {
			_ = c.id.Close()
		}
	}
}

// phase runs f for every connection, concurrently or one by one, as step
// s (f times its own steps), and records the phase's wall time. The first
// error ends the phase (the others are left to finish) and is returned.
func (r *run) phase(ctx context.Context, s Step, concurrent bool, f func(ctx context.Context, i int, c *conn) error) error {
	t := time.Now()
	defer func() { r.wall[s] = time.Since(t) }()
	if !concurrent {
		for i, c := range r.conns {
			if err := f(ctx, i, c); err != nil {
				return fmt.Errorf("connection %d of %d: %w", i+1, len(r.conns), err)
			}
		}
		return nil
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var wg sync.WaitGroup
	errs := make([]error, len(r.conns))
	for i, c := range r.conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := f(ctx, i, c); err != nil {
				errs[i] = fmt.Errorf("connection %d of %d: %w", i+1, len(r.conns), err)
				cancel(errs[i])
			}
		}()
	}
	wg.Wait()
	// The first error in time is the cause; the others are its echoes.
	if err := context.Cause(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return errors.Join(errs...)
}

// peerErr is err, of a wait for the peer bounded by PeerTimeout under
// ctx: when the bound, not ctx, ended the wait, an error that says so
// and wraps verbs.ErrCMTimeout.
func (r *run) peerErr(ctx context.Context, err error) error {
	if err == nil || ctx.Err() != nil || !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return fmt.Errorf("%w from the peer in %v (the peer timeout)", verbs.ErrCMTimeout, r.cfg.PeerTimeout)
}

// checkDevice fails unless id is bound to the run's device.
func (r *run) checkDevice(id verbs.CMID) error {
	a, err := id.Bound()
	if err != nil {
		return err
	}
	if a.NodeGUID != r.guid {
		return fmt.Errorf("the connection goes through the RDMA device with node GUID %016x, not %s (%016x)",
			a.NodeGUID, r.dev, r.guid)
	}
	return nil
}

func (r *run) createQP() (verbs.QP, error) {
	return r.pd.CreateQP(verbs.QPInit{Type: verbs.RC, SendCQ: r.cq, RecvCQ: r.cq, SigAll: true,
		Cap: verbs.QPCap{MaxSendWR: 1, MaxRecvWR: 1, MaxSendSGE: 1, MaxRecvSGE: 1}})
}

// param is what each side's request or answer carries (cmtime's).
func param(qp verbs.QP) verbs.ConnParam {
	return verbs.ConnParam{QPNum: qp.Num(), ResponderResources: 1, InitiatorDepth: 1}
}

// client sets the connections up phase by phase.
func (r *run) client(ctx context.Context) error {
	cfg := r.cfg
	r.conns = make([]*conn, cfg.Conns)
	for i := range r.conns {
		r.conns[i] = &conn{}
	}
	r.first = time.Now()
	err := r.phase(ctx, CreateID, false, func(_ context.Context, _ int, c *conn) error {
		c.start = time.Now()
		return c.step(CreateID, func() (err error) {
			c.id, err = cfg.CM.CreateID(verbs.PortSpaceTCP)
			return err
		})
	})
	if err != nil {
		return err
	}
	err = r.phase(ctx, ResolveAddr, true, func(ctx context.Context, i int, c *conn) error {
		if err := c.step(ResolveAddr, func() error {
			return r.retry(ctx, func() error { return c.id.ResolveAddr(ctx, cfg.Src, cfg.Addr, cfg.ResolveTimeout) })
		}); err != nil {
			return err
		}
		// Every connection resolves the same addresses: the first
		// tells the device of all.
		if i > 0 {
			return nil
		}
		return r.checkDevice(c.id)
	})
	if err != nil {
		return err
	}
	err = r.phase(ctx, ResolveRoute, true, func(ctx context.Context, _ int, c *conn) error {
		return c.step(ResolveRoute, func() error {
			return r.retry(ctx, func() error { return c.id.ResolveRoute(ctx, cfg.ResolveTimeout) })
		})
	})
	if err != nil {
		return err
	}
	err = r.phase(ctx, CreateQP, false, func(_ context.Context, _ int, c *conn) error {
		return c.step(CreateQP, func() (err error) {
			c.qp, err = r.createQP()
			return err
		})
	})
	if err != nil {
		return err
	}
	err = r.phase(ctx, InitQP, false, func(_ context.Context, _ int, c *conn) error {
		return c.step(InitQP, func() error { return verbs.CMModify(c.id, c.qp, verbs.StateInit) })
	})
	if err != nil {
		return err
	}
	err = r.phase(ctx, Connect, true, func(ctx context.Context, _ int, c *conn) error {
		cctx, cancel := context.WithTimeout(ctx, cfg.PeerTimeout)
		defer cancel()
		if err := c.step(Connect, func() error {
			_, err := c.id.Connect(cctx, param(c.qp))
			return err
		}); err != nil {
			return fmt.Errorf("connect to %v: %w", cfg.Addr, r.peerErr(ctx, err))
		}
		// The access rights come with the answer: INIT again, then
		// RTR (librdmacm's ucma_modify_qp_rtr), RTS, and the RTU.
		if err := c.step(RTRQP, func() error {
			return verbs.CMModify(c.id, c.qp, verbs.StateInit, verbs.StateRTR)
		}); err != nil {
			return err
		}
		if err := c.step(RTSQP, func() error { return verbs.CMModify(c.id, c.qp, verbs.StateRTS) }); err != nil {
			return err
		}
		if err := c.step(Establish, c.id.Establish); err != nil {
			return err
		}
		r.established(c)
		return nil
	})
	if err != nil {
		return err
	}
	return r.teardown(ctx)
}

// retry runs a resolution, again after a failure (not after ctx's end)
// up to Retries times.
func (r *run) retry(ctx context.Context, f func() error) error {
	err := f()
	for n := 0; err != nil && n < r.cfg.Retries && ctx.Err() == nil; n++ {
		err = f()
	}
	return err
}

// established records that c is set up.
func (r *run) established(c *conn) {
	now := time.Now()
	c.d[FullConnect] = now.Sub(c.start)
	r.mu.Lock()
	if now.After(r.last) {
		r.last = now
	}
	r.mu.Unlock()
}

// teardown disconnects every connection (the client first: it
// disconnects, then waits for the end; the server waits for the client's
// disconnection and answers it), then destroys QPs and ids.
func (r *run) teardown(ctx context.Context) error {
	cfg := r.cfg
	err := r.phase(ctx, Disconnect, true, func(ctx context.Context, _ int, c *conn) error {
		wctx, cancel := context.WithTimeout(ctx, cfg.PeerTimeout)
		defer cancel()
		if cfg.Role == Client {
			return c.step(Disconnect, func() error {
				if err := c.id.Disconnect(); err != nil {
					return err
				}
				return r.peerErr(ctx, c.id.WaitDisconnected(wctx))
			})
		}
		if err := c.id.WaitDisconnected(wctx); err != nil {
			return fmt.Errorf("waiting for the client's disconnection: %w", r.peerErr(ctx, err))
		}
		// The answer to the peer's disconnection request.
		return c.step(Disconnect, c.id.Disconnect)
	})
	if err != nil {
		return err
	}
	return r.phase(ctx, Destroy, false, func(_ context.Context, _ int, c *conn) error {
		return c.step(Destroy, func() error {
			err := c.qp.Close()
			c.qp = nil
			if ierr := c.id.Close(); err == nil {
				err = ierr
			}
			c.id = nil
			return err
		})
	})
}

// server accepts Conns connections, each as soon as its request arrives.
func (r *run) server(ctx context.Context) error {
	cfg := r.cfg
	l, err := cfg.CM.CreateID(verbs.PortSpaceTCP)
	if err != nil {
		return err
	}
	defer l.Close()
	if err := l.Bind(cfg.Addr); err != nil {
		return err
	}
	if err := l.Listen(cfg.Conns); err != nil {
		return err
	}
	if cfg.Listening != nil {
		a, err := l.Bound()
		if err != nil {
			return err
		}
		cfg.Listening(a.Src)
	}
	r.conns = make([]*conn, cfg.Conns)
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var wg sync.WaitGroup
	errs := make([]error, cfg.Conns)
	var t0 time.Time
	for i := range cfg.Conns {
		rctx, rcancel := ctx, context.CancelFunc(func() {})
		if i > 0 {
			rctx, rcancel = context.WithTimeout(ctx, cfg.PeerTimeout)
		}
		id, _, err := l.GetRequest(rctx)
		rcancel()
		if err != nil {
			err = r.peerErr(ctx, err)
			wg.Wait()
			if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, context.Canceled) {
				return cause
			}
			return fmt.Errorf("connection request %d of %d: %w", i+1, cfg.Conns, err)
		}
		c := &conn{id: id, start: time.Now()}
		if i == 0 {
			t0 = c.start
			r.first = t0
		}
		r.conns[i] = c
		// The QP is made ready here, one request after the other as
		// they come (cmtime's server does the same); the accept and its
		// wait for the client's RTU go on concurrently.
		if err := r.prepare(c); err != nil {
			err = fmt.Errorf("connection %d of %d: %w", i+1, cfg.Conns, err)
			cancel(err)
			wg.Wait()
			return err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := r.accept(ctx, c); err != nil {
				errs[i] = fmt.Errorf("connection %d of %d: %w", i+1, cfg.Conns, err)
				cancel(errs[i])
			}
		}()
	}
	wg.Wait()
	r.wall[Connect] = time.Since(t0)
	if err := context.Cause(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	return r.teardown(ctx)
}

// prepare creates the server's QP of c and moves it to RTS; a failure
// rejects the request.
func (r *run) prepare(c *conn) error {
	if err := r.checkDevice(c.id); err != nil {
		_ = c.id.Reject(nil)
		return err
	}
	if err := c.step(CreateQP, func() (err error) {
		c.qp, err = r.createQP()
		return err
	}); err != nil {
		_ = c.id.Reject(nil)
		return err
	}
	for _, st := range []struct {
		s     Step
		state verbs.QPState
	}{{InitQP, verbs.StateInit}, {RTRQP, verbs.StateRTR}, {RTSQP, verbs.StateRTS}} {
		if err := c.step(st.s, func() error { return verbs.CMModify(c.id, c.qp, st.state) }); err != nil {
			_ = c.id.Reject(nil)
			return err
		}
	}
	return nil
}

// accept answers c's request and waits for the client's RTU.
func (r *run) accept(ctx context.Context, c *conn) error {
	actx, cancel := context.WithTimeout(ctx, r.cfg.PeerTimeout)
	defer cancel()
	if err := c.step(Accept, func() error { return c.id.Accept(actx, param(c.qp)) }); err != nil {
		return fmt.Errorf("accept: %w", r.peerErr(ctx, err))
	}
	r.established(c)
	return nil
}
