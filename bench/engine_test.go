package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/pvperf/pvperf/emu"
	"github.com/pvperf/pvperf/perftest"
	"github.com/pvperf/pvperf/verbs"
)

// testConfig is a test's configuration with perftest's defaults for test
// and verb, shrunk to a short run.
func testConfig(test perftest.TestKind, verb perftest.Verb) Config {
	c := Config{Test: test, Verb: verb, Connection: perftest.RC, IBPort: 1, GIDIndex: -1, Inline: -1,
		PostList: 1, RecvPostList: 1, NumQPs: 1, CQMod: DefaultCQMod, QPTimeout: DefaultQPTimeout, Loopback: true,
		Iters: 200}
	if test == perftest.Bandwidth {
		c.Size, c.TxDepth, c.RxDepth = DefaultBWSize, DefaultBWTxDepth, 1
		if verb.HasReceives() {
			c.RxDepth = DefaultRecvRxDepth
		}
		if c.Size > 8192 {
			c.CQMod = 1
		}
	} else {
		c.Size, c.TxDepth, c.RxDepth, c.CQMod = DefaultLatSize, DefaultLatTxDepth, 1, 1
		if verb.HasReceives() {
			c.RxDepth = DefaultRecvRxDepth
		}
	}
	if verb == perftest.Atomic {
		c.Size = DefaultAtomicSize
		c.AtomicType = perftest.FetchAndAdd
	}
	return c
}

// normalize applies the derived adjustments the command line makes.
func normalize(c Config) Config {
	c.TxDepth = min(c.TxDepth, int(c.Iters))
	if c.Verb.HasReceives() {
		c.RxDepth = min(c.RxDepth, int(c.Iters))
		if c.RxDepth%2 == 1 {
			c.RxDepth++
		}
	}
	c.CQMod = min(c.CQMod, c.TxDepth)
	return c
}

func runLoop(t *testing.T, dev verbs.Device, c Config) string {
	t.Helper()
	var out, errOut bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := Run(ctx, normalize(c), dev, &out, &errOut); err != nil {
		var chain []string
		for e := err; e != nil; e = errors.Unwrap(e) {
			chain = append(chain, fmt.Sprintf("%T: %v", e, e))
		}
		t.Fatalf("Run: %s\nchain:\n%s\nstdout:\n%s\nstderr:\n%s", PerftestMessage(err), strings.Join(chain, "\n"), out.String(), errOut.String())
	}
	return out.String()
}

func device(t *testing.T, profile string, roce int) verbs.Device {
	t.Helper()
	cfg := emu.DefaultConfig()
	cfg.Profile, cfg.RoCE = profile, roce
	d, err := emu.NewDevice("emu0", cfg)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestLoopbackMatrix(t *testing.T) {
	dev := device(t, emu.ProfileUnrestricted, 2)
	type tc struct {
		name string
		cfg  func() Config
		want string
	}
	bw := func(v perftest.Verb, mod func(*Config)) func() Config {
		return func() Config {
			c := testConfig(perftest.Bandwidth, v)
			if mod != nil {
				mod(&c)
			}
			return c
		}
	}
	lat := func(v perftest.Verb, mod func(*Config)) func() Config {
		return func() Config {
			c := testConfig(perftest.Latency, v)
			if mod != nil {
				mod(&c)
			}
			return c
		}
	}
	cases := []tc{
		{"write_bw", bw(perftest.Write, nil), "RDMA_Write BW Test"},
		{"read_bw", bw(perftest.Read, nil), "RDMA_Read BW Test"},
		{"send_bw", bw(perftest.Send, nil), "Send BW Test"},
		{"atomic_bw", bw(perftest.Atomic, nil), "Atomic FETCH_AND_ADD BW Test"},
		{"atomic_bw_cas", bw(perftest.Atomic, func(c *Config) { c.AtomicType = perftest.CmpAndSwap }), "Atomic CMP_AND_SWAP BW Test"},
		{"write_bw_imm", bw(perftest.WriteImm, nil), "RDMA_Write_imm BW Test"},
		{"send_bw_imm", bw(perftest.SendImm, nil), "Send_imm BW Test"},
		{"write_bw_small_cqmod", bw(perftest.Write, func(c *Config) { c.Size = 64; c.CQMod = 100 }), "RDMA_Write BW Test"},
		{"write_bw_q4", bw(perftest.Write, func(c *Config) { c.NumQPs = 4 }), "Number of qps   : 4"},
		{"write_bw_postlist", bw(perftest.Write, func(c *Config) { c.Size = 64; c.PostList = 10; c.CQMod = 10 }), "Post List BW Test"},
		{"write_bw_bidir", bw(perftest.Write, func(c *Config) { c.Bidirectional = true }), "Bidirectional BW Test"},
		{"send_bw_bidir", bw(perftest.Send, func(c *Config) { c.Bidirectional = true }), "Bidirectional BW Test"},
		{"send_bw_ud", bw(perftest.Send, func(c *Config) { c.Connection = perftest.UD; c.Size = 1024 }), "Connection type : UD"},
		{"send_bw_uc", bw(perftest.Send, func(c *Config) { c.Connection = perftest.UC; c.Size = 1024 }), "Connection type : UC"},
		{"write_bw_uc", bw(perftest.Write, func(c *Config) { c.Connection = perftest.UC }), "Connection type : UC"},
		{"send_bw_srq", bw(perftest.Send, func(c *Config) { c.UseSRQ = true; c.NumQPs = 2 }), "Using SRQ      : ON"},
		// Receives rounded up to the MTU reach past the last QP's slot.
		// One QP: every receive is posted up front (a UD datagram that
		// finds the SRQ empty is dropped, and the server waits).
		{"send_bw_srq_ud", bw(perftest.Send, func(c *Config) {
			c.UseSRQ, c.Connection, c.Size, c.Iters = true, perftest.UD, 1024, 100
		}), "Using SRQ      : ON"},
		{"send_lat_srq_ud", lat(perftest.Send, func(c *Config) { c.UseSRQ = true; c.Connection = perftest.UD; c.Size = 1024 }), "Using SRQ      : ON"},
		{"send_bw_events", bw(perftest.Send, func(c *Config) { c.Events = true }), "Test with events"},
		{"write_bw_all", bw(perftest.Write, func(c *Config) { c.AllSizes = true; c.Iters = 20; c.CQMod = 100 }), " 8388608 "},
		{"send_bw_all_ud", bw(perftest.Send, func(c *Config) { c.AllSizes = true; c.Iters = 20; c.Connection = perftest.UD }), " 1024    "},
		{"write_bw_gbits", bw(perftest.Write, func(c *Config) { c.ReportGbits = true }), "BW peak[Gb/sec]"},
		{"write_bw_warmup", bw(perftest.Write, func(c *Config) { c.WarmUp = true }), "RDMA_Write BW Test"},
		{"send_lat", lat(perftest.Send, nil), "Send Latency Test"},
		{"send_lat_ud", lat(perftest.Send, func(c *Config) { c.Connection = perftest.UD }), "Connection type : UD"},
		{"send_lat_all", lat(perftest.Send, func(c *Config) { c.AllSizes = true; c.Iters = 10 }), " 8388608 "},
		{"write_lat", lat(perftest.Write, nil), "RDMA_Write Latency Test"},
		{"write_lat_imm", lat(perftest.WriteImm, nil), "RDMA_Write_imm Latency Test"},
		{"read_lat", lat(perftest.Read, nil), "RDMA_Read Latency Test"},
		{"atomic_lat", lat(perftest.Atomic, nil), "Atomic FETCH_AND_ADD Latency Test"},
		{"send_lat_events", lat(perftest.Send, func(c *Config) { c.Events = true }), "Test with events"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out := runLoop(t, dev, c.cfg())
			if !strings.Contains(out, c.want) {
				t.Errorf("output lacks %q:\n%s", c.want, out)
			}
			if !strings.Contains(out, "#bytes") {
				t.Errorf("no result table:\n%s", out)
			}
		})
	}
}

func TestDurationMode(t *testing.T) {
	if testing.Short() {
		t.Skip("duration runs take seconds")
	}
	dev := device(t, emu.ProfileUnrestricted, 2)
	c := testConfig(perftest.Bandwidth, perftest.Write)
	c.Duration, c.Margin, c.Iters = 3, 1, 1000
	out := runLoop(t, dev, c)
	if !strings.Contains(out, " 65536      ") {
		t.Errorf("no row:\n%s", out)
	}
}
