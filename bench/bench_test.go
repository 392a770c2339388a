package bench

// Benchmarks of the engine on the emulated device
//
// Each benchmark runs the real engine (Run in loopback mode: client and
// server in this process, connected through a TCP out-of-band channel) on
// an emulated device, and reports perftest's own measurement of it. One
// benchmark operation is one message for the BW tests and one latency
// sample (one iteration of the ping-pong loop) for the latency tests; the
// engine is given b.N operations to do (at least minBWMessages or
// minLatIters, and for BW a multiple of the number of queue pairs).
//
// A run of the engine also opens the device, creates and connects the
// queue pairs and exchanges parameters over TCP. That setup would dominate
// the framework's timer for small b.N, so the benchmarks report the
// engine's measured time instead, overriding the framework's ns/op:
//
//   - BW tests: ns/op is 1000 / perftest's average message rate (Mpps):
//     the time from the first post to the last completion, divided by the
//     number of messages of all queue pairs (the peak search is disabled).
//   - Latency tests: ns/op is perftest's average latency (t_avg):
//     one-way (half the round trip) for SEND and WRITE, the round trip for
//     READ, over the samples perftest keeps.
//
// The framework's MB/s would still divide by its own timer, setup
// included, so MB/s is overridden as well, with the same time base:
// MB/s = size * 1000 / (ns/op), that is, perftest's average BW in MiB/s
// times 1.048576 for the BW tests. The framework's timer (setup and any
// operations above b.N included) only decides how large b.N grows.
//
// Extra metrics:
//
//   - Mpps: millions of messages per second, 1000 / (ns/op). For the
//     latency tests this counts the messages of both directions (a SEND or
//     WRITE ping-pong moves two messages per round trip, a READ one).
//   - p50-ns/op, p99-ns/op (latency tests): perftest's 50th and 99th
//     latency percentiles in nanoseconds (benchstat shows them scaled, as
//     p50-sec/op and p99-sec/op).
//
// Both sides of a test poll, each on its own thread, so on a machine with
// few cores a descheduled poller shows as samples of milliseconds: the
// average latency (ns/op) suffers from it, the median (p50-ns/op) hardly.
//
// reports.BenchUnits, printed once before the results when benchmarks run,
// tells benchstat which direction of each custom unit is an improvement.
//
// To compare two versions:
//
//	go test -run '^$' -bench . -count 6 ./bench/ > old.txt
//	# change the code
//	go test -run '^$' -bench . -count 6 ./bench/ > new.txt
//	benchstat old.txt new.txt

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/pvperf/pvperf/emu"
	"github.com/pvperf/pvperf/perftest"
	"github.com/pvperf/pvperf/reports"
	"github.com/pvperf/pvperf/verbs"
)

// TestMain prints reports.BenchUnits (benchfmt unit metadata lines for the
// custom metrics; benchstat knows ns/op and MB/s already) when benchmarks were requested (-test.bench),
// so that plain test runs print nothing extra.
func TestMain(m *testing.M) {
	flag.Parse()
	if f := flag.Lookup("test.bench"); f != nil && f.Value.String() != "" {
		fmt.Print(reports.BenchUnits)
	}
	os.Exit(m.Run())
}

const (
	// minLatIters is the fewest iterations of a latency run: perftest
	// needs at least 5, and a hundred samples give the percentiles some
	// meaning when b.N is small (the framework's first probe, b.N = 1).
	minLatIters = 100
	// minBWMessages is the fewest messages of a BW run, so that the
	// rate is measured over more than the first burst of the send queue.
	minBWMessages = 1000
	// benchTimeout bounds one run of the engine.
	benchTimeout = 2 * time.Minute
)

// benchDevice is the emulated device all benchmarks share.
var benchDevice = sync.OnceValues(func() (verbs.Device, error) {
	cfg := emu.DefaultConfig()
	cfg.Profile, cfg.RoCE = emu.ProfileUnrestricted, 2
	return emu.NewDevice("emu0", cfg)
})

// benchConfig is the configuration of a benchmark run of test and verb
// with qps queue pairs, messages of size bytes and n operations in all.
func benchConfig(test perftest.TestKind, verb perftest.Verb, qps int, size uint64, n int) Config {
	c := testConfig(test, verb)
	c.NumQPs = qps
	c.Size = size
	if test == perftest.Bandwidth {
		// Iterations are per queue pair.
		c.Iters = uint64(max(n, minBWMessages)+qps-1) / uint64(qps)
		c.NoPeak = true
		// As the command line does: CQ moderation only for small
		// messages.
		c.CQMod = DefaultCQMod
		if size > 8192 {
			c.CQMod = 1
		}
	} else {
		c.Iters = uint64(max(n, minLatIters))
	}
	return normalize(c)
}

// runBench runs the engine for b and reports its measurement.
func runBench(b *testing.B, test perftest.TestKind, verb perftest.Verb, qps int, size uint64) {
	runBenchEdit(b, test, verb, qps, size, nil)
}

// runBenchEdit is runBench with the configuration changed by edit.
func runBenchEdit(b *testing.B, test perftest.TestKind, verb perftest.Verb, qps int, size uint64, edit func(*Config)) {
	dev, err := benchDevice()
	if err != nil {
		b.Fatal(err)
	}
	cfg := benchConfig(test, verb, qps, size, b.N)
	if edit != nil {
		edit(&cfg)
	}
	ctx, cancel := context.WithTimeout(context.Background(), benchTimeout)
	defer cancel()
	var errOut bytes.Buffer
	b.SetBytes(int64(size))
	run, err := Run(ctx, cfg, dev, io.Discard, &errOut)
	if err != nil {
		b.Fatalf("%s: %s%s", cfg.TestName(), PerftestMessage(err), errOut.String())
	}
	rows := run.Primary()
	if len(rows) != 1 {
		b.Fatalf("%s: %d result rows, want 1", cfg.TestName(), len(rows))
	}
	r := rows[0]
	var ns float64
	switch {
	case test == perftest.Bandwidth && r.BW != nil:
		ns = 1e3 / float64(r.BW.MsgRateMpps)
	case test == perftest.Latency && r.Latency != nil:
		ns = float64(r.Latency.MeanUs) * 1e3
		b.ReportMetric(float64(r.Latency.P50Us)*1e3, "p50-ns/op")
		b.ReportMetric(float64(r.Latency.P99Us)*1e3, "p99-ns/op")
	default:
		b.Fatalf("%s: no statistics in the result row", cfg.TestName())
	}
	if ns <= 0 || math.IsInf(ns, 0) || math.IsNaN(ns) {
		b.Fatalf("%s: measured %v ns per operation", cfg.TestName(), ns)
	}
	b.ReportMetric(ns, "ns/op")
	b.ReportMetric(float64(size)*1e3/ns, "MB/s")
	b.ReportMetric(1e3/ns, "Mpps")
}

// The sub-benchmarks. Each one costs one to two -benchtime (the
// framework's ramp to b.N included), so the grid is kept small enough for
// "-count 6" of everything to run in about four minutes on two cores: BW
// with a small message (bound by the message rate), one page and
// perftest's default size; latency with perftest's default size, one page
// and 64 KiB.
var (
	bwSizes    = []uint64{64, 4096, 65536}
	bwSizesAlt = []uint64{64, 65536}
	latSizes   = []uint64{2, 4096, 65536}
)

// runCases runs test and verb with qps queue pairs as the sub-benchmarks
// qp=N/size=S, one for each S of sizes.
func runCases(b *testing.B, test perftest.TestKind, verb perftest.Verb, qps int, sizes []uint64) {
	b.Run(fmt.Sprintf("qp=%d", qps), func(b *testing.B) {
		for _, s := range sizes {
			b.Run(fmt.Sprintf("size=%d", s), func(b *testing.B) { runBench(b, test, verb, qps, s) })
		}
	})
}

// BenchmarkWriteBW is write_bw.
func BenchmarkWriteBW(b *testing.B) {
	runCases(b, perftest.Bandwidth, perftest.Write, 1, bwSizes)
	runCases(b, perftest.Bandwidth, perftest.Write, 2, bwSizesAlt)
}

// BenchmarkReadBW is read_bw.
func BenchmarkReadBW(b *testing.B) { runCases(b, perftest.Bandwidth, perftest.Read, 1, bwSizesAlt) }

// BenchmarkSendBW is send_bw.
func BenchmarkSendBW(b *testing.B) { runCases(b, perftest.Bandwidth, perftest.Send, 1, bwSizesAlt) }

// BenchmarkWriteLat is write_lat.
func BenchmarkWriteLat(b *testing.B) { runCases(b, perftest.Latency, perftest.Write, 1, latSizes) }

// BenchmarkReadLat is read_lat.
func BenchmarkReadLat(b *testing.B) { runCases(b, perftest.Latency, perftest.Read, 1, latSizes) }

// BenchmarkSendLat is send_lat.
func BenchmarkSendLat(b *testing.B) { runCases(b, perftest.Latency, perftest.Send, 1, latSizes) }

// BenchmarkLatencyHistogram is send_lat and write_lat of 2 bytes with and
// without the latency loop's HDR histogram: what recording every sample
// costs the loop (compare hist=true with hist=false in benchstat).
func BenchmarkLatencyHistogram(b *testing.B) {
	for _, verb := range []perftest.Verb{perftest.Send, perftest.Write} {
		for _, hist := range []bool{true, false} {
			b.Run(fmt.Sprintf("verb=%s/hist=%v", verb, hist), func(b *testing.B) {
				runBenchEdit(b, perftest.Latency, verb, 1, 2, func(c *Config) { c.NoLatencyHistogram = !hist })
			})
		}
	}
}

// BenchmarkLatencyHistogramCost measures the histogram's cost in the
// latency loop as a ratio taken side by side: rounds of send_lat and
// write_lat of 2 bytes, each round one run with the histogram and one
// without (the order alternating); it reports the median over the rounds
// of (mean latency with) / (without) - 1, in percent. In iteration mode
// (b.N round trips per run) the histogram is filled from the timestamps
// after the loop; in duration mode (-D 2, one run per round whatever b.N)
// the loop records each sample.
func BenchmarkLatencyHistogramCost(b *testing.B) {
	dev, err := benchDevice()
	if err != nil {
		b.Fatal(err)
	}
	for _, mode := range []string{"iterations", "duration"} {
		for _, verb := range []perftest.Verb{perftest.Send, perftest.Write} {
			b.Run(fmt.Sprintf("mode=%s/verb=%s", mode, verb), func(b *testing.B) {
				mean := func(hist bool) float64 {
					cfg := benchConfig(perftest.Latency, verb, 1, 2, b.N)
					if mode == "duration" {
						cfg.Duration, cfg.Margin, cfg.Iters = 2, 0, 0
					}
					cfg.NoLatencyHistogram = !hist
					ctx, cancel := context.WithTimeout(context.Background(), benchTimeout)
					defer cancel()
					run, err := Run(ctx, cfg, dev, io.Discard, io.Discard)
					if err != nil {
						b.Fatal(err)
					}
					return float64(run.Primary()[0].Latency.MeanUs)
				}
				rounds := 7
				if mode == "duration" {
					rounds = 5
				}
				var costs []float64
				for r := range rounds {
					var with, without float64
					if r%2 == 0 {
						with, without = mean(true), mean(false)
					} else {
						without, with = mean(false), mean(true)
					}
					costs = append(costs, 100*(with/without-1))
				}
				slices.Sort(costs)
				b.ReportMetric(costs[rounds/2], "hist_cost_%")
				b.ReportMetric(0, "ns/op")
			})
		}
	}
}
