package uverbs

import (
	"testing"

	"github.com/pvperf/pvperf/verbs"
	"github.com/pvperf/pvperf/verbs/verbstest"
)

// kernelTargets are the kernel devices of this machine that have a
// provider: the conformance suite runs against each. A machine without
// RDMA has none, and the suite is skipped; scripts/guest-test.sh runs it
// on a Soft-RoCE device in a virtual machine.
func kernelTargets() []verbstest.Target {
	devs, err := Devices()
	if err != nil {
		return nil
	}
	var out []verbstest.Target
	for _, d := range devs {
		if d.Driver() != DriverRXE && d.Driver() != DriverPVRDMA {
			continue
		}
		name := d.Name()
		out = append(out, verbstest.Target{Name: name, Device: func() (verbs.Device, error) {
			list, err := Devices()
			if err != nil {
				return nil, err
			}
			for _, d := range list {
				if d.Name() == name {
					return d, nil
				}
			}
			return nil, verbs.Errorf(verbs.ErrNotSupported, "device %s is gone", name)
		}})
	}
	return out
}

func TestMain(m *testing.M) { verbstest.Main(m, kernelTargets()...) }

func TestConformance(t *testing.T) {
	targets := kernelTargets()
	if len(targets) == 0 {
		t.Skip("no kernel RDMA device with a provider on this machine (scripts/guest-test.sh runs this test on rdma_rxe)")
	}
	for _, tg := range targets {
		t.Run(tg.Name, func(t *testing.T) { verbstest.Run(t, tg) })
	}
}
