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
	"github.com/pvperf/pvperf/verbs"
)

// A device whose QPs accept send work requests and never execute them, as
// QEMU's pvrdma device model does with RDMA WRITE (sent as a SEND that
// waits for a receive for ever): nothing completes.
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

// TestStalledTestFails: a test whose work never completes fails with
// ErrStalled once StallTimeout has passed without a completion, where
// perftest would wait for ever.
func TestStalledTestFails(t *testing.T) {
	old := StallTimeout
	StallTimeout = 300 * time.Millisecond
	defer func() { StallTimeout = old }()
	dev := deafDevice{device(t, emu.ProfileUnrestricted, 2)}
	for _, c := range []struct {
		name string
		cfg  Config
	}{
		{"write_bw", testConfig(perftest.Bandwidth, perftest.Write)},
		{"send_bw", testConfig(perftest.Bandwidth, perftest.Send)},
		{"read_bw", testConfig(perftest.Bandwidth, perftest.Read)},
		{"send_lat", testConfig(perftest.Latency, perftest.Send)},
		{"write_lat", testConfig(perftest.Latency, perftest.Write)},
		{"atomic_lat", testConfig(perftest.Latency, perftest.Atomic)},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			var errOut strings.Builder
			_, err := Run(ctx, normalize(c.cfg), dev, io.Discard, &errOut)
			if !errors.Is(err, ErrStalled) {
				t.Fatalf("Run: %v (want ErrStalled); stderr:\n%s", err, errOut.String())
			}
			if ctx.Err() != nil {
				t.Fatalf("the run ended only with the test's own timeout: %v", err)
			}
			t.Logf("message:\n%s", PerftestMessage(err))
			if msg := PerftestMessage(err); !strings.Contains(msg, "no progress") {
				t.Errorf("message %q does not say what happened", msg)
			}
		})
	}
}

func TestStallCountsOnlyIdleWaits(t *testing.T) {
	old := StallTimeout
	StallTimeout = 20 * time.Millisecond
	defer func() { StallTimeout = old }()
	var s stall
	deadline := time.Now().Add(10 * time.Second)
	var err error
	for err == nil && time.Now().Before(deadline) {
		err = s.idle("waiting")
	}
	if !errors.Is(err, ErrStalled) {
		t.Fatalf("idle for 10s: %v, want ErrStalled", err)
	}
	// Progress restarts the wait.
	StallTimeout = time.Hour
	s.busy()
	for range 0x10000 * 2 {
		if err := s.idle("waiting"); err != nil {
			t.Fatalf("right after progress: %v", err)
		}
	}
}

// A device that completes every work request, signalled or not, as QEMU's
// pvrdma device model does.
type chattyDevice struct{ verbs.Device }
type chattyContext struct{ verbs.Context }
type chattyPD struct{ verbs.PD }
type chattyQP struct{ verbs.QP }

func (d chattyDevice) Open() (verbs.Context, error) {
	c, err := d.Device.Open()
	return chattyContext{c}, err
}

func (c chattyContext) AllocPD() (verbs.PD, error) {
	pd, err := c.Context.AllocPD()
	return chattyPD{pd}, err
}

func (pd chattyPD) CreateQP(init verbs.QPInit) (verbs.QP, error) {
	qp, err := pd.PD.CreateQP(init)
	return chattyQP{qp}, err
}

func (q chattyQP) PostSend(wrs []verbs.SendWR) (int, error) {
	var buf [16]verbs.SendWR
	all := append(buf[:0], wrs...)
	for i := range all {
		all[i].Flags |= verbs.SendSignaled
	}
	return q.QP.PostSend(all)
}

// TestUnsignaledCompletionsFail: bandwidth tests count a completion as
// cq_mod messages; on a device that completes unsignalled work requests
// they fail with ErrUnsignaledCompletion instead of reporting a wrong
// figure, and run right with -Q 1.
func TestUnsignaledCompletionsFail(t *testing.T) {
	dev := chattyDevice{device(t, emu.ProfileUnrestricted, 2)}
	for _, bidir := range []bool{false, true} {
		c := testConfig(perftest.Bandwidth, perftest.Send)
		c.Size, c.CQMod, c.Bidirectional = 64, 100, bidir
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		_, err := Run(ctx, normalize(c), dev, io.Discard, io.Discard)
		cancel()
		if !errors.Is(err, ErrUnsignaledCompletion) {
			t.Errorf("bidirectional %v, cq_mod 100: %v, want ErrUnsignaledCompletion", bidir, err)
		} else if msg := PerftestMessage(err); !strings.Contains(msg, "-Q 1") {
			t.Errorf("message %q does not say what to do", msg)
		}
		c.CQMod = 1
		ctx, cancel = context.WithTimeout(context.Background(), time.Minute)
		_, err = Run(ctx, normalize(c), dev, io.Discard, io.Discard)
		cancel()
		if err != nil {
			t.Errorf("bidirectional %v, -Q 1: %v", bidir, err)
		}
	}
}
