package cli

import (
	"bytes"
	"context"
	"runtime"
	"testing"

	"github.com/pvperf/pvperf/devices"
	"github.com/pvperf/pvperf/verbs"
)

type kernelDevice struct{ verbs.Device }

func (kernelDevice) Kind() verbs.DeviceKind { return verbs.KindKernel }

// TestProcs: a run on a kernel device gets one scheduler processor unless
// GOMAXPROCS says otherwise or other goroutines poll beside its loop (a
// loopback run, --data_validation); one on the emulator keeps them all.
func TestProcs(t *testing.T) {
	emu0, err := devices.Find("emu0")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		dev    verbs.Device
		shared bool
		env    string
		want   int
	}{
		{kernelDevice{emu0}, false, "", 1},
		{kernelDevice{emu0}, true, "", 0},
		{kernelDevice{emu0}, false, "4", 0},
		{emu0, false, "", 0},
		{emu0, false, "1", 0},
	} {
		if got := Procs(tc.dev, tc.shared, tc.env); got != tc.want {
			t.Errorf("%v device, shared %v, GOMAXPROCS=%q: %d processors, want %d", tc.dev.Kind(), tc.shared, tc.env, got, tc.want)
		}
	}
	// A run on the emulator leaves the process's setting as it was.
	t.Setenv("GOMAXPROCS", "")
	before := runtime.GOMAXPROCS(0)
	cfg, err := Parse("write_bw", []string{"--loopback", "-n", "10"}, &bytes.Buffer{}, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	if _, err := Run(context.Background(), cfg, &out, &errOut); err != nil {
		t.Fatalf("loopback: %v: %s", err, errOut.String())
	}
	if got := runtime.GOMAXPROCS(0); got != before {
		t.Errorf("GOMAXPROCS %d after an emulator run, was %d", got, before)
	}
}
