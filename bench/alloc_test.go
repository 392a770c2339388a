package bench

import (
	"context"
	"io"
	"runtime"
	"testing"
	"time"

	"github.com/pvperf/pvperf/perftest"
)

// mallocs runs c in loopback and returns the heap allocations the whole
// process made meanwhile.
func mallocs(t *testing.T, c Config) uint64 {
	t.Helper()
	dev := device(t, "unrestricted", 2)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	if _, err := Run(ctx, normalize(c), dev, io.Discard, io.Discard); err != nil {
		t.Fatalf("Run: %s", PerftestMessage(err))
	}
	runtime.ReadMemStats(&after)
	return after.Mallocs - before.Mallocs
}

// TestLoopsDoNotAllocate: a run of 100 times more messages allocates no
// more than a short one (setup, the out-of-band exchanges and the report
// allocate; the loops must not). The margin absorbs the runtime's own
// background allocations, far below one per message.
func TestLoopsDoNotAllocate(t *testing.T) {
	if testing.Short() {
		t.Skip("long runs")
	}
	type tc struct {
		name string
		cfg  func(iters uint64) Config
	}
	mk := func(test perftest.TestKind, v perftest.Verb, mod func(*Config)) func(uint64) Config {
		return func(iters uint64) Config {
			c := testConfig(test, v)
			c.Iters = iters
			c.Size = 64
			c.NoPeak = true
			if mod != nil {
				mod(&c)
			}
			return c
		}
	}
	for _, c := range []tc{
		{"write_bw", mk(perftest.Bandwidth, perftest.Write, func(c *Config) { c.CQMod = 100 })},
		{"write_bw_peak", mk(perftest.Bandwidth, perftest.Write, func(c *Config) { c.NoPeak = false })},
		{"read_bw", mk(perftest.Bandwidth, perftest.Read, nil)},
		// The validated loop and its validator.
		{"write_bw_data_validation", mk(perftest.Bandwidth, perftest.Write, func(c *Config) { c.DataValidation, c.Size = true, 4096 })},
		{"read_bw_data_validation", mk(perftest.Bandwidth, perftest.Read, func(c *Config) { c.DataValidation, c.Size = true, 4096 })},
		{"send_bw", mk(perftest.Bandwidth, perftest.Send, nil)},
		{"write_bw_bidir", mk(perftest.Bandwidth, perftest.Write, func(c *Config) { c.Bidirectional = true })},
		{"send_lat", mk(perftest.Latency, perftest.Send, nil)},
		{"write_lat", mk(perftest.Latency, perftest.Write, nil)},
		{"read_lat", mk(perftest.Latency, perftest.Read, nil)},
		{"atomic_lat", mk(perftest.Latency, perftest.Atomic, func(c *Config) { c.Size = 8 })},
	} {
		t.Run(c.name, func(t *testing.T) {
			const short, long = 1000, 100000
			mallocs(t, c.cfg(short)) // warm up lazily built state
			a := mallocs(t, c.cfg(short))
			b := mallocs(t, c.cfg(long))
			t.Logf("%d messages: %d allocations; %d messages: %d", short, a, long, b)
			// Setup allocates as much for both; what the loops would
			// allocate grows with the messages. The slack is the
			// runtime's own (timers, the emulator's goroutines).
			if b > a+200 {
				t.Errorf("%d more messages made %d more allocations", long-short, int64(b)-int64(a))
			}
		})
	}
}
