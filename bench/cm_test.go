//go:build linux

package bench

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pvperf/pvperf/emu"
	"github.com/pvperf/pvperf/perftest"
	"github.com/pvperf/pvperf/verbs"
)

// recCM records the parameters of every connect and accept.
type recCM struct {
	verbs.CM
	mu      sync.Mutex
	params  []verbs.ConnParam
	spaces  []verbs.PortSpace
	tos     []uint8
	listens []int // backlogs
	// rtsTimeouts are the ACK timeouts of the RTS attributes the ids gave
	// to RC QPs.
	rtsTimeouts []uint8
}

type recCMID struct {
	verbs.CMID
	m *recCM
}

func (m *recCM) CreateID(ps verbs.PortSpace) (verbs.CMID, error) {
	id, err := m.CM.CreateID(ps)
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	m.spaces = append(m.spaces, ps)
	m.mu.Unlock()
	return recCMID{id, m}, nil
}

func (x recCMID) record(p verbs.ConnParam) {
	x.m.mu.Lock()
	x.m.params = append(x.m.params, p)
	x.m.mu.Unlock()
}

func (x recCMID) Connect(ctx context.Context, p verbs.ConnParam) (verbs.ConnParam, error) {
	x.record(p)
	return x.CMID.Connect(ctx, p)
}

func (x recCMID) Accept(ctx context.Context, p verbs.ConnParam) error {
	x.record(p)
	return x.CMID.Accept(ctx, p)
}

func (x recCMID) SetTOS(t uint8) error {
	x.m.mu.Lock()
	x.m.tos = append(x.m.tos, t)
	x.m.mu.Unlock()
	return x.CMID.SetTOS(t)
}

func (x recCMID) InitQPAttr(st verbs.QPState) (verbs.QPAttr, verbs.QPAttrMask, error) {
	a, m, err := x.CMID.InitQPAttr(st)
	if err == nil && st == verbs.StateRTS && m&verbs.AttrTimeout != 0 {
		x.m.mu.Lock()
		x.m.rtsTimeouts = append(x.m.rtsTimeouts, a.Timeout)
		x.m.mu.Unlock()
	}
	return a, m, err
}

func (x recCMID) Listen(n int) error {
	x.m.mu.Lock()
	x.m.listens = append(x.m.listens, n)
	x.m.mu.Unlock()
	return x.CMID.Listen(n)
}

func (x recCMID) GetRequest(ctx context.Context) (verbs.CMID, verbs.ConnParam, error) {
	id, p, err := x.CMID.GetRequest(ctx)
	if err != nil {
		return nil, p, err
	}
	return recCMID{id, x.m}, p, nil
}

func newRecCM(t *testing.T) *recCM {
	t.Helper()
	m, err := emu.NewCM()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return &recCM{CM: m}
}

// TestRdmaCM: -R runs the test over QPs the connection manager connects,
// with perftest's parameters: the retry count (--retry_count) in both
// counts, the outstanding reads as the depths of READ, a listener with a
// backlog of the QPs, the TOS with --tos, -u's ACK timeout on every RC QP
// (the exchange's too); the header says so.
func TestRdmaCM(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  func(*Config)
	}{
		{"write_bw", func(c *Config) {}},
		{"read_bw -q 3 --retry_count 5 --tos 96 -u 19", func(c *Config) {
			c.Verb, c.NumQPs, c.RetryCount, c.TOS, c.OutReads, c.QPTimeout = perftest.Read, 3, 5, 96, 4, 19
		}},
		{"send_lat", func(c *Config) {
			c.Test, c.Verb = perftest.Latency, perftest.Send
			c.Size, c.TxDepth, c.RxDepth, c.CQMod = DefaultLatSize, DefaultLatTxDepth, DefaultRecvRxDepth, 1
		}},
		{"send_bw -c UD", func(c *Config) {
			c.Verb, c.Connection, c.Size, c.RxDepth = perftest.Send, perftest.UD, 1024, DefaultRecvRxDepth
		}},
	} {
		t.Run(strings.ReplaceAll(tc.name, " ", "_"), func(t *testing.T) {
			cfg := testConfig(perftest.Bandwidth, perftest.Write)
			cfg.RdmaCM, cfg.RetryCount, cfg.TOS = true, DefaultRetryCount, -1
			tc.cfg(&cfg)
			m := newRecCM(t)
			cfg.CM = m
			out := runLoop(t, device(t, emu.ProfileUnrestricted, 2), cfg)
			if !strings.Contains(out, " rdma_cm QPs\t : ON\n") || !strings.Contains(out, " Data ex. method : rdma_cm") {
				t.Errorf("header:\n%s", out)
			}
			if cfg.TOS >= 0 && !strings.Contains(out, "TOS    : 96") {
				t.Errorf("no TOS in the header:\n%s", out)
			}
			m.mu.Lock()
			defer m.mu.Unlock()
			// The exchange's connection (2 params), then one per QP and side.
			if want := 2 + 2*cfg.NumQPs; len(m.params) != want {
				t.Fatalf("%d connects and accepts, want %d", len(m.params), want)
			}
			for i, p := range m.params[2:] {
				if p.RetryCount != uint8(cfg.RetryCount) || p.RNRRetryCount != uint8(cfg.RetryCount) {
					t.Errorf("param %d: retry %d, RNR retry %d; want %d", i, p.RetryCount, p.RNRRetryCount, cfg.RetryCount)
				}
				if cfg.Verb == perftest.Read && (p.ResponderResources != 4 || p.InitiatorDepth != 4) {
					t.Errorf("param %d: depths %d/%d, want 4", i, p.ResponderResources, p.InitiatorDepth)
				}
				if cfg.Connection == perftest.UD && p.QKey != cmUDQKey {
					t.Errorf("param %d: Q_Key %#x", i, p.QKey)
				}
			}
			if len(m.listens) != 2 || m.listens[0] != 1 || m.listens[1] != cfg.NumQPs {
				t.Errorf("listen backlogs %v, want [1 %d]", m.listens, cfg.NumQPs)
			}
			if cfg.TOS >= 0 && len(m.tos) != cfg.NumQPs {
				t.Errorf("TOS set %d times, want %d", len(m.tos), cfg.NumQPs)
			}
			for _, tos := range m.tos {
				if int(tos) != cfg.TOS {
					t.Errorf("TOS set to %d, want %d", tos, cfg.TOS)
				}
			}
			if cfg.TOS < 0 && len(m.tos) != 0 {
				t.Errorf("TOS set without --tos: %v", m.tos)
			}
			// RTS attributes of the exchange's QP (both sides), then of
			// each RC test QP (both sides).
			rc := 2
			if cfg.Connection == perftest.RC {
				rc += 2 * cfg.NumQPs
			}
			if len(m.rtsTimeouts) != rc {
				t.Errorf("%d RC QPs moved to RTS, want %d", len(m.rtsTimeouts), rc)
			}
			for i, to := range m.rtsTimeouts {
				if to != uint8(cfg.QPTimeout) {
					t.Errorf("RTS attributes %d: ACK timeout %d, want -u's %d", i, to, cfg.QPTimeout)
				}
			}
		})
	}
}

// TestCMExchange: -z alone runs the exchange over the connection manager
// and connects the test QPs with verbs.
func TestCMExchange(t *testing.T) {
	cfg := testConfig(perftest.Bandwidth, perftest.Send)
	cfg.CMExchange, cfg.RetryCount, cfg.TOS = true, DefaultRetryCount, -1
	m := newRecCM(t)
	cfg.CM = m
	out := runLoop(t, device(t, emu.ProfileUnrestricted, 2), cfg)
	if !strings.Contains(out, " rdma_cm QPs\t : OFF\n") || !strings.Contains(out, " Data ex. method : rdma_cm") {
		t.Errorf("header:\n%s", out)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.params) != 2 || len(m.listens) != 1 {
		t.Errorf("%d connects and accepts, %d listens: want the exchange's only", len(m.params), len(m.listens))
	}
}

// TestRdmaCMClampsDepths: a -R server whose outstanding reads (16) exceed
// the client's (4) accepts with the client's depths, as perftest clamps
// them to the request's; the READ test then runs.
func TestRdmaCMClampsDepths(t *testing.T) {
	dev := device(t, emu.ProfileUnrestricted, 2)
	base := testConfig(perftest.Bandwidth, perftest.Read)
	base.RdmaCM, base.RetryCount, base.TOS, base.Loopback = true, DefaultRetryCount, -1, false
	base.Port = 20000 + int(time.Now().UnixNano()%10000)
	srv, cli := base, base
	srv.OutReads, cli.OutReads = 16, 4
	cli.Server = "127.0.0.1"
	ms, mc := newRecCM(t), newRecCM(t)
	srv.CM, cli.CM = ms, mc
	listening := make(chan struct{})
	srv.Listening = func(int) {
		select {
		case <-listening:
		default:
			close(listening)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := Run(ctx, normalize(srv), dev, &bytes.Buffer{}, &bytes.Buffer{})
		done <- err
	}()
	select {
	case <-listening:
	case err := <-done:
		t.Fatalf("server: %v", err)
	}
	if _, err := Run(ctx, normalize(cli), dev, &bytes.Buffer{}, &bytes.Buffer{}); err != nil {
		t.Fatalf("client: %v", PerftestMessage(err))
	}
	if err := <-done; err != nil {
		t.Fatalf("server: %v", PerftestMessage(err))
	}
	ms.mu.Lock()
	defer ms.mu.Unlock()
	accepts := ms.params[1:] // after the exchange's
	if len(accepts) != 1 {
		t.Fatalf("server accepts %+v, want the exchange's and one test QP's", ms.params)
	}
	if p := accepts[0]; p.ResponderResources != 4 || p.InitiatorDepth != 4 {
		t.Errorf("server's accept: depths %d/%d, want the client's 4/4", p.ResponderResources, p.InitiatorDepth)
	}
}
