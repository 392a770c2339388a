//go:build linux

package cmbench

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pvperf/pvperf/emu"
	"github.com/pvperf/pvperf/verbs"
)

// counts tracks the ids and QPs a run holds.
type counts struct{ ids, qps atomic.Int64 }

func (n *counts) check(t *testing.T, who string) {
	t.Helper()
	if i, q := n.ids.Load(), n.qps.Load(); i != 0 || q != 0 {
		t.Errorf("%s left %d ids and %d QPs behind", who, i, q)
	}
}

type countCM struct {
	verbs.CM
	n *counts
}

func (m countCM) CreateID(ps verbs.PortSpace) (verbs.CMID, error) {
	id, err := m.CM.CreateID(ps)
	if err != nil {
		return nil, err
	}
	m.n.ids.Add(1)
	return &countID{CMID: id, n: m.n}, nil
}

type countID struct {
	verbs.CMID
	n      *counts
	closed atomic.Bool
}

func (x *countID) GetRequest(ctx context.Context) (verbs.CMID, verbs.ConnParam, error) {
	id, p, err := x.CMID.GetRequest(ctx)
	if err != nil {
		return nil, p, err
	}
	x.n.ids.Add(1)
	return &countID{CMID: id, n: x.n}, p, nil
}

func (x *countID) Close() error {
	if !x.closed.Swap(true) {
		x.n.ids.Add(-1)
	}
	return x.CMID.Close()
}

type countCtx struct {
	verbs.Context
	n *counts
}

func (c countCtx) AllocPD() (verbs.PD, error) {
	pd, err := c.Context.AllocPD()
	if err != nil {
		return nil, err
	}
	return countPD{PD: pd, n: c.n}, nil
}

type countPD struct {
	verbs.PD
	n *counts
}

func (p countPD) CreateQP(init verbs.QPInit) (verbs.QP, error) {
	q, err := p.PD.CreateQP(init)
	if err != nil {
		return nil, err
	}
	p.n.qps.Add(1)
	return &countQP{QP: q, n: p.n}, nil
}

type countQP struct {
	verbs.QP
	n      *counts
	closed atomic.Bool
}

func (q *countQP) Close() error {
	if !q.closed.Swap(true) {
		q.n.qps.Add(-1)
	}
	return q.QP.Close()
}

// side is one side's configuration on the emulated device, with its
// counts.
func side(t *testing.T, role Role, n int) (Config, *counts) {
	t.Helper()
	return sideOn(t, emu.DefaultConfig(), role, n)
}

// sideOn is side on a device of configuration dc.
func sideOn(t *testing.T, dc emu.Config, role Role, n int) (Config, *counts) {
	t.Helper()
	d, err := emu.NewDevice("emu0", dc)
	if err != nil {
		t.Fatal(err)
	}
	vctx, err := d.Open()
	if err != nil {
		t.Fatal(err)
	}
	m, err := emu.NewCM()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		m.Close()
		if err := vctx.Close(); err != nil {
			t.Error(err)
		}
	})
	c := &counts{}
	return Config{Context: countCtx{vctx, c}, CM: countCM{m, c}, Role: role, Conns: n,
		Addr:           netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, 0, 0, 1}), 0),
		ResolveTimeout: DefaultResolveTimeout, Retries: DefaultRetries, PeerTimeout: 5 * time.Second}, c
}

// pair runs a server and a client; the client connects once the server
// listens.
func pair(t *testing.T, srv, cli Config) (sres, cres *Result, serr, cerr error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	listening := make(chan netip.AddrPort, 1)
	srv.Listening = func(a netip.AddrPort) { listening <- a }
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		sres, serr = Run(ctx, srv)
		if serr != nil {
			close(listening)
		}
	}()
	a, ok := <-listening
	if ok {
		cli.Addr = netip.AddrPortFrom(cli.Addr.Addr(), a.Port())
		cres, cerr = Run(ctx, cli)
	}
	wg.Wait()
	return sres, cres, serr, cerr
}

// TestRun sets up connections between a server and a client on the
// emulated device: every step is timed for every connection, and nothing
// is left behind.
func TestRun(t *testing.T) {
	const n = 16
	srv, sn := side(t, Server, n)
	cli, cn := side(t, Client, n)
	sres, cres, serr, cerr := pair(t, srv, cli)
	if serr != nil || cerr != nil {
		t.Fatalf("server: %v, client: %v", serr, cerr)
	}
	sn.check(t, "the server")
	cn.check(t, "the client")
	for _, r := range []*Result{sres, cres} {
		if r.Conns != n || r.Device != "emu0" || r.Elapsed <= 0 || r.ConnsPerSec <= 0 {
			t.Errorf("%s: %d connections on %s in %v (%.1f/s)", r.Role, r.Conns, r.Device, r.Elapsed, r.ConnsPerSec)
		}
		if len(r.Steps) != len(roleSteps[r.Role]) {
			t.Fatalf("%s: %d steps, want %d", r.Role, len(r.Steps), len(roleSteps[r.Role]))
		}
		for i, s := range r.Steps {
			if s.Step != roleSteps[r.Role][i] {
				t.Errorf("%s: step %d is %v, want %v", r.Role, i, s.Step, roleSteps[r.Role][i])
			}
			if s.Min <= 0 || s.Min > s.P50 || s.P50 > s.P90 || s.P90 > s.P99 || s.P99 > s.Max || s.Mean < s.Min || s.Mean > s.Max {
				t.Errorf("%s %v: min %v p50 %v p90 %v p99 %v max %v mean %v", r.Role, s.Step, s.Min, s.P50, s.P90, s.P99, s.Max, s.Mean)
			}
		}
		// A connection's full setup contains its steps.
		full := r.Steps[len(r.Steps)-3]
		if full.Step != FullConnect || full.Max > r.Elapsed || full.Wall != r.Elapsed {
			t.Errorf("%s: full connect %+v, elapsed %v", r.Role, full, r.Elapsed)
		}
	}
}

// TestTooManyQPs: a client that needs more QPs than its device has fails
// with the device's refusal, naming the connection, before it connects,
// and leaves nothing behind.
func TestTooManyQPs(t *testing.T) {
	dc := emu.DefaultConfig()
	dc.Profile = emu.ProfileHW14 // 1024 QPs
	const n = 1030
	cli, cn := sideOn(t, dc, Client, n)
	cli.Addr = netip.AddrPortFrom(cli.Addr.Addr(), 9) // nobody listens: the client must fail before it connects
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := Run(ctx, cli)
	if err == nil || !strings.Contains(err.Error(), "connection 1025 of 1030: emu0: create qp: device limit of 1024 queue pairs reached") {
		t.Errorf("client: %v", err)
	}
	cn.check(t, "the client")
}

// TestNoListener: a client whose server does not listen fails at once
// with the connection manager's rejection, and leaves nothing behind.
func TestNoListener(t *testing.T) {
	cli, cn := side(t, Client, 4)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	cli.Addr = netip.AddrPortFrom(cli.Addr.Addr(), uint16(port))
	_, err = Run(context.Background(), cli)
	if !errors.Is(err, verbs.ErrRejected) {
		t.Fatalf("err = %v, want one wrapping verbs.ErrRejected", err)
	}
	cn.check(t, "the client")
}

// TestPeerGone: a server that takes fewer connections than the client
// asks for leaves the client's last requests unanswered: the client
// fails within its peer timeout, and neither side leaves anything
// behind.
func TestPeerGone(t *testing.T) {
	srv, sn := side(t, Server, 2)
	cli, cn := side(t, Client, 4)
	srv.PeerTimeout, cli.PeerTimeout = 500*time.Millisecond, 500*time.Millisecond
	_, _, serr, cerr := pair(t, srv, cli)
	// Unanswered, or rejected once the server closes its listener.
	if !errors.Is(cerr, verbs.ErrCMTimeout) && !errors.Is(cerr, verbs.ErrRejected) {
		t.Fatalf("client: %v, want an error wrapping verbs.ErrCMTimeout or verbs.ErrRejected", cerr)
	}
	t.Logf("server: %v\nclient: %v", serr, cerr)
	sn.check(t, "the server")
	cn.check(t, "the client")
}

// TestCancel: a server waiting for its first request ends with its
// context, and leaves nothing behind.
func TestCancel(t *testing.T) {
	srv, sn := side(t, Server, 2)
	ctx, cancel := context.WithCancel(context.Background())
	srv.Listening = func(netip.AddrPort) { cancel() }
	if _, err := Run(ctx, srv); !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v, want context.Canceled", err)
	}
	sn.check(t, "the server")
}

func TestConfigErrors(t *testing.T) {
	cli, _ := side(t, Client, 1)
	for name, mod := range map[string]func(*Config){
		"no connections": func(c *Config) { c.Conns = 0 },
		"no port":        func(c *Config) { c.Addr = netip.AddrPortFrom(c.Addr.Addr(), 0) },
		"no role":        func(c *Config) { c.Role = "" },
		"no CM":          func(c *Config) { c.CM = nil },
		"no timeout":     func(c *Config) { c.PeerTimeout = 0 },
	} {
		c := cli
		c.Addr = netip.AddrPortFrom(c.Addr.Addr(), 1)
		mod(&c)
		if _, err := Run(context.Background(), c); !errors.Is(err, ErrConfig) {
			t.Errorf("%s: err = %v, want ErrConfig", name, err)
		}
	}
}
