//go:build linux

package emu

import (
	"net/netip"
	"os"
	"testing"
	"time"

	"github.com/pvperf/pvperf/verbs"
	"github.com/pvperf/pvperf/verbs/verbstest"
)

// conformanceConfigs are the emulated devices the verbs conformance suite
// runs against: each profile, and RoCE v1 and v2 where a profile has both.
var conformanceConfigs = []struct {
	name string
	cfg  Config
}{
	{"unrestricted-roce2", Config{Profile: ProfileUnrestricted, RoCE: 2, MTU: verbs.MTU1024}},
	{"unrestricted-roce1", Config{Profile: ProfileUnrestricted, RoCE: 1, MTU: verbs.MTU1024}},
	{"pvrdma-hw14-roce2", Config{Profile: ProfileHW14, RoCE: 2, MTU: verbs.MTU1024}},
	{"pvrdma-hw13", Config{Profile: ProfileHW13, RoCE: 1, MTU: verbs.MTU1024}},
	// The network transports, each QP reaching its peer through the
	// device's own port on a loopback address.
	{"wire-roce", Config{Profile: ProfileUnrestricted, RoCE: 2, MTU: verbs.MTU1024, Addr: netip.MustParseAddr("127.0.0.2"), Transport: TransportRoCE}},
	{"wire-tcp", Config{Profile: ProfileUnrestricted, RoCE: 2, MTU: verbs.MTU1024, Addr: netip.MustParseAddr("127.0.0.3"), Transport: TransportTCP}},
}

func conformanceTarget(name string, cfg Config) verbstest.Target {
	return verbstest.Target{Name: name, Device: func() (verbs.Device, error) {
		if cfg.Addr.IsValid() && os.Getenv(verbstest.PeerEnv) != "" {
			// A peer process is another host: an address of its own,
			// so that the two processes talk over the network.
			cfg.Addr = cfg.Addr.Next().Next()
		}
		return NewDevice("emu0", cfg)
	}, Quirks: quirks(cfg)}
}

func quirks(cfg Config) verbstest.Quirks {
	var q verbstest.Quirks
	if cfg.Addr.IsValid() {
		q.NoLinkLocalGID = "a device with an address of its own has that one GID"
	}
	return q
}

func conformanceTargets() []verbstest.Target {
	var out []verbstest.Target
	for _, c := range conformanceConfigs {
		out = append(out, conformanceTarget(c.name, c.cfg))
	}
	return out
}

func TestMain(m *testing.M) { verbstest.Main(m, conformanceTargets()...) }

func TestConformance(t *testing.T) {
	for _, tg := range conformanceTargets() {
		t.Run(tg.Name, func(t *testing.T) { verbstest.Run(t, tg) })
	}
}

// TestConformanceGIDTypes: every GID of a device has the RoCE version it
// was configured with.
func TestConformanceGIDTypes(t *testing.T) {
	for _, c := range conformanceConfigs {
		t.Run(c.name, func(t *testing.T) {
			d, err := NewDevice("emu0", c.cfg)
			if err != nil {
				t.Fatal(err)
			}
			ctx, err := d.Open()
			if err != nil {
				t.Fatal(err)
			}
			defer ctx.Close()
			tbl, err := ctx.GIDTable(1)
			if err != nil {
				t.Fatal(err)
			}
			want := verbs.GIDTypeRoCEv1
			if c.cfg.RoCE == 2 {
				want = verbs.GIDTypeRoCEv2
			}
			for _, e := range tbl {
				if e.Type != want {
					t.Errorf("gid %d (%v) has type %v on a RoCE v%d device", e.Index, e.GID, e.Type, c.cfg.RoCE)
				}
			}
		})
	}
}

// TestConformanceRoCEVersions: RC traffic between a RoCE v2 and a RoCE v1
// device is lost (RETRY_EXC_ERR); between two RoCE v2 devices it works.
func TestConformanceRoCEVersions(t *testing.T) {
	open := func(t *testing.T, name string, roce int) verbs.Context {
		d, err := NewDevice(name, Config{Profile: ProfileUnrestricted, RoCE: roce, MTU: verbs.MTU1024})
		if err != nil {
			t.Fatal(err)
		}
		ctx, err := d.Open()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := ctx.Close(); err != nil {
				t.Errorf("close context: %v", err)
			}
		})
		return ctx
	}
	send := func(t *testing.T, p *verbstest.Pair) verbs.WC {
		t.Helper()
		a, b := p.A, p.B
		if _, err := b.QP.PostRecv([]verbs.RecvWR{{ID: 2, SGL: []verbs.SGE{{Addr: b.MR.Addr(), Length: 4096, LKey: b.MR.LKey()}}}}); err != nil {
			t.Fatal(err)
		}
		if _, err := a.QP.PostSend([]verbs.SendWR{{ID: 1, Opcode: verbs.OpSend, Flags: verbs.SendSignaled,
			SGL: []verbs.SGE{{Addr: a.MR.Addr(), Length: 64, LKey: a.MR.LKey()}}}}); err != nil {
			t.Fatal(err)
		}
		wc := make([]verbs.WC, 1)
		for range 5000 {
			if n, err := a.SendCQ.Poll(wc); err != nil {
				t.Fatal(err)
			} else if n == 1 {
				return wc[0]
			}
			pause()
		}
		t.Fatalf("no completion")
		return verbs.WC{}
	}
	params := verbstest.DefaultConnParams()
	params.Timeout, params.RetryCnt = 8, 1
	t.Run("v2-v1", func(t *testing.T) {
		v2, v1 := open(t, "emu0", 2), open(t, "emu1", 1)
		for _, dir := range []struct {
			name string
			a, b verbs.Context
		}{{"v2->v1", v2, v1}, {"v1->v2", v1, v2}} {
			p := verbstest.NewPair(t, dir.a, dir.b, verbs.RC, params)
			if wc := send(t, p); wc.Status != verbs.WCRetryExcErr {
				t.Errorf("%s: RC send completed with %s, want RETRY_EXC_ERR", dir.name, wc.Status.Name())
			}
		}
	})
	t.Run("v2-v2", func(t *testing.T) {
		p := verbstest.NewPair(t, open(t, "emu0", 2), open(t, "emu1", 2), verbs.RC, params)
		if wc := send(t, p); wc.Status != verbs.WCSuccess {
			t.Errorf("RC send between two RoCE v2 devices completed with %s", wc.Status.Name())
		}
	})
}

func pause() { time.Sleep(time.Millisecond) }
