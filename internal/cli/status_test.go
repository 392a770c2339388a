package cli

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/pvperf/pvperf/bench"
	"github.com/pvperf/pvperf/emu"
	"github.com/pvperf/pvperf/verbs"
)

// A device whose QPs take send work requests and never execute them:
// every test's measurement loop stalls.
type deafDevice struct{ verbs.Device }
type deafContext struct{ verbs.Context }
type deafPD struct{ verbs.PD }
type deafQP struct{ verbs.QP }

func (d deafDevice) Open() (verbs.Context, error) {
	c, err := d.Device.Open()
	return deafContext{c}, err
}

func (c deafContext) AllocPD() (verbs.PD, error) {
	pd, err := c.Context.AllocPD()
	return deafPD{pd}, err
}

func (pd deafPD) CreateQP(init verbs.QPInit) (verbs.QP, error) {
	qp, err := pd.PD.CreateQP(init)
	return deafQP{qp}, err
}

func (deafQP) PostSend(wrs []verbs.SendWR) (int, error) { return len(wrs), nil }

// TestFailStatus: a failed measurement loop exits with perftest's 17 in
// the tests whose main returns it, 1 in the others; a failure before the
// loop exits with 1.
func TestFailStatus(t *testing.T) {
	old := bench.StallTimeout
	bench.StallTimeout = 200 * time.Millisecond
	defer func() { bench.StallTimeout = old }()
	d, err := emu.NewDevice("emu0", emu.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		test, args string
		want       int
	}{
		{"send_bw", "--loopback -n 100", 17},
		{"send_lat", "--loopback -n 100", 17},
		{"read_lat", "--loopback -n 100", 17},
		{"atomic_lat", "--loopback -n 100", 17},
		{"read_bw", "--loopback -n 100 -a", 17},
		{"read_bw", "--loopback -n 100", 1},
		{"write_bw", "--loopback -n 100", 1},
		{"write_lat", "--loopback -n 100", 1},
		{"atomic_bw", "--loopback -n 100", 1},
		{"send_bw", "--loopback -n 100 -e -X 5", 1}, // refused before the loop
	} {
		cfg, err := Parse(c.test, strings.Fields(c.args), io.Discard, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		_, err = bench.Run(ctx, cfg, deafDevice{d}, io.Discard, io.Discard)
		cancel()
		if err == nil {
			t.Fatalf("%s %s: ran on a deaf device", c.test, c.args)
		}
		if got := failStatus(c.test, &cfg, err); got != c.want {
			t.Errorf("%s %s: status %d, want %d (%v)", c.test, c.args, got, c.want, err)
		}
	}
}
