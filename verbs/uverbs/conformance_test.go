package uverbs

import (
	"errors"
	"testing"

	"github.com/pvperf/pvperf/internal/unix"
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
		var q verbstest.Quirks
		if d.Driver() == DriverRXE {
			q = rxeQuirks
		}
		out = append(out, verbstest.Target{Name: name, Quirks: q, Device: func() (verbs.Device, error) {
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

// rxeQuirks are the ways rdma_rxe (as of Linux 6.1) departs from what the
// suite checks, seen on it in scripts/guest-test.sh.
var rxeQuirks = verbstest.Quirks{
	RecvPostedInErr:       "rdma_rxe reads a user receive queue only when a packet arrives, so a receive posted in ERR stays queued instead of being flushed",
	ResetKeepsCompletions: "rdma_rxe leaves the completions of a reset QP in its CQs (the kernel does not purge them, nor does rdma-core's rxe provider)",
	NoQPErrorEvents:       "rdma_rxe raises no QP_ACCESS_ERR, QP_REQ_ERR or QP_FATAL event for the responder of a failed request",
	UDOversize:            "rdma_rxe sends a UD message larger than the path MTU without error, and the receiver drops it",
	NoGRHChecksum:         "rdma_rxe leaves the IPv4 header checksum in the GRH area of UD receives zero",
	Statuses: map[verbstest.Situation]verbs.WCStatus{
		verbstest.RecvTooSmall:    verbs.WCLocQPOpErr,
		verbstest.MessageTooLarge: verbs.WCRemOpErr,
		verbstest.BadLKey:         verbs.WCLocQPOpErr,
	},
	StatusesReason: "rdma_rxe reports LOC_QP_OP_ERR for receives that are too small and for invalid local keys, and REM_OP_ERR to the sender of a message too large for the receive",
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

// TestKernelGIDTable checks, on each kernel device, that the GID table of
// one ioctl is the one sysfs shows entry by entry.
func TestKernelGIDTable(t *testing.T) {
	targets := kernelTargets()
	if len(targets) == 0 {
		t.Skip("no kernel RDMA device with a provider on this machine (scripts/guest-test.sh runs this test on rdma_rxe)")
	}
	for _, tg := range targets {
		t.Run(tg.Name, func(t *testing.T) {
			d, err := tg.Device()
			if err != nil {
				t.Fatal(err)
			}
			vc, err := d.Open()
			if err != nil {
				t.Fatal(err)
			}
			defer vc.Close()
			c := vc.(*Context)
			byIoctl, err := c.gidTableIoctl(1)
			if errors.Is(err, unix.ENOTTY) || errors.Is(err, unix.EPROTONOSUPPORT) {
				t.Skipf("the kernel has no QUERY_GID_TABLE ioctl (before Linux 5.10): %v", err)
			}
			if err != nil {
				t.Fatalf("query gid table: %v", err)
			}
			pa, err := c.QueryPort(1)
			if err != nil {
				t.Fatal(err)
			}
			bySysfs, err := gidTable(d.Name(), 1, pa.GIDTblLen)
			if err != nil {
				t.Fatal(err)
			}
			if len(byIoctl) == 0 || len(byIoctl) != len(bySysfs) {
				t.Fatalf("ioctl: %+v\nsysfs: %+v", byIoctl, bySysfs)
			}
			for i := range byIoctl {
				if byIoctl[i] != bySysfs[i] {
					t.Errorf("entry %d: ioctl %+v, sysfs %+v", i, byIoctl[i], bySysfs[i])
				}
			}
			t.Logf("%d entries, the same from the ioctl and from sysfs", len(byIoctl))
		})
	}
}
