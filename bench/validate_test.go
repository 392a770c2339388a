package bench

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/pvperf/pvperf/emu"
	"github.com/pvperf/pvperf/perftest"
)

// TestCheckReceived: a loopback run of each test checks what its
// receiving side got (TestLoopbackMatrix runs them all); here a byte of
// what arrived is spoilt, or one is left unwritten, and the run fails
// with ErrDataMismatch, while the same run untouched passes.
func TestCheckReceived(t *testing.T) {
	dev := device(t, emu.ProfileUnrestricted, 2)
	cases := []struct {
		name  string
		test  perftest.TestKind
		verb  perftest.Verb
		spoil func(s *session)
	}{
		{"write_bw changed byte", perftest.Bandwidth, perftest.Write, func(s *session) { s.ep.slotBytes(1)[100] ^= 0xff }},
		{"write_bw message not there", perftest.Bandwidth, perftest.Write, func(s *session) { clear(s.ep.slotBytes(1)[:64]) }},
		{"read_bw stray byte", perftest.Bandwidth, perftest.Read, func(s *session) { s.ep.slotBytes(0)[3000] = 0x01 }},
		{"send_lat changed byte", perftest.Latency, perftest.Send, func(s *session) { s.ep.slotBytes(1)[0]++ }},
		{"read_lat", perftest.Latency, perftest.Read, func(s *session) { s.ep.slotBytes(0)[1] = 0 }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := testConfig(c.test, c.verb)
			run := func(spoil bool) error {
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				_, err := runOnce(ctx, normalize(cfg), dev, io.Discard, io.Discard, func(s *session) {
					if spoil && s.receives() {
						s.beforeCheck = func() { c.spoil(s) }
					}
				})
				return err
			}
			if err := run(false); err != nil {
				t.Fatalf("untouched: %v", err)
			}
			err := run(true)
			if !errors.Is(err, ErrDataMismatch) || !strings.Contains(PerftestMessage(err), " Data check failed: queue pair 0: byte ") {
				t.Errorf("spoilt: %v (%q)", err, PerftestMessage(err))
			}
		})
	}
}
