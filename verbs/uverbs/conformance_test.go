//go:build linux

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
		switch {
		case d.Driver() == DriverRXE:
			q = rxeQuirks
		case d.Driver() == DriverPVRDMA && qemuModel(d):
			q = qemuPVRDMAQuirks
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

// qemuModel reports whether a vmw_pvrdma device is QEMU's pvrdma device
// model (QEMU 7.2 and before): it reports vendor ID 0 where VMware's
// device reports VMware's (0x15ad).
func qemuModel(d verbs.Device) bool {
	c, err := d.Open()
	if err != nil {
		return false
	}
	defer c.Close()
	a, err := c.QueryDevice()
	return err == nil && a.VendorID == 0
}

// What QEMU 7.2's pvrdma device model (hw/rdma/) does not do, found in
// scripts/pvrdma-lab.sh and read in its source.
const (
	qemuSendOnly = "QEMU's pvrdma posts every send work request to its backend as IBV_WR_SEND with IBV_SEND_SIGNALED only (hw/rdma/rdma_backend.c, rdma_backend_post_send): RDMA WRITE, READ and atomics, immediate data and the solicited flag never reach the peer, and every rkey it gives is 0xFFFFFFFF (hw/rdma/rdma_rm.c, rdma_rm_alloc_mr)"
	qemuSignaled = "QEMU's pvrdma signals every work request it posts to its backend (hw/rdma/rdma_backend.c, rdma_backend_post_send): unsignaled sends complete too"
	qemuStaleAH  = "QEMU's pvrdma keeps one backend address handle per destination GID for every PD and process (hw/rdma/rdma_backend.c, create_ah and ah_hash): once the PD that first sent to a GID is gone, UD sends to that GID use its stale handle and fail with LOC_QP_OP_ERR; the suite's UD pairs all use GID 0"
	qemuQuery    = "QEMU's pvrdma answers QUERY_QP with a struct ibv_qp_attr written over the device's pvrdma_qp_attr and QUERY_SRQ with a struct ibv_srq_attr (hw/rdma/vmw/pvrdma_cmd.c, query_qp and query_srq): the attributes the guest reads are wrong, or the query fails"
	qemuModify   = "QEMU's pvrdma applies only the state, GID, destination QP, Q_Key and PSNs of MODIFY_QP (hw/rdma/vmw/pvrdma_cmd.c, modify_qp); its backend QP has path MTU 1024, timeout 14, retry_cnt 7 and rnr_retry 7 whatever the guest asks (hw/rdma/rdma_backend.c), re-transitions (INIT to INIT, RTS to RTS) fail in the backend (EINVAL), and ERR, RESET and a failed request reach neither the backend nor the QP state (no flush)"
	qemuAligned  = "QEMU 7.2's pvrdma refuses a memory region that does not start on a page boundary: pvrdma_map_to_pdir (hw/rdma/vmw/pvrdma_cmd.c) rounds the length up to pages without the start's offset and finds one page too many (\"Invalid nchunks/length\")"
	qemuLKey     = "QEMU's pvrdma checks local keys itself and completes a request with an unknown one with GENERAL_ERR (vendor error VENDOR_ERR_INVLKEY) without moving the QP to ERR (hw/rdma/rdma_backend.c, build_host_sge_array); a key of another PD gets its backend's LOC_QP_OP_ERR"
	qemuNoEvents = "no asynchronous event (QP_FATAL, CQ_ERR, SRQ_LIMIT_REACHED) reaches the guest from QEMU's pvrdma (none within the suite's wait)"
	qemuCounters = "QEMU's pvrdma answers QUERY_PORT with a zeroed struct in which it sets state, MTUs, table lengths, width and speed only (hw/rdma/vmw/pvrdma_cmd.c, query_port): qkey_viol_cntr stays 0"
	qemuNotify   = "a CQ armed for completion events got none in 2s on QEMU's pvrdma (solicited flag dropped by rdma_backend_post_send; the unsolicited case is not explained)"
)

// qemuPVRDMAQuirks are the subtests QEMU's pvrdma device model fails for
// the reasons above; the rest of the suite runs as on any device.
var qemuPVRDMAQuirks = verbstest.Quirks{
	NoQPErrorEvents: qemuNoEvents,
	SendOnly:        qemuSendOnly,
	Statuses: map[verbstest.Situation]verbs.WCStatus{
		verbstest.RecvTooSmall:    verbs.WCLocQPOpErr,
		verbstest.MessageTooLarge: verbs.WCRemOpErr,
	},
	StatusesReason: "QEMU's pvrdma passes on its rdma_rxe backend's statuses: LOC_QP_OP_ERR for a receive too small, REM_OP_ERR to its sender",
	Skip: map[string]string{
		"Lifecycle/CloseOrder":                qemuQuery,
		"MemoryRegion/Keys":                   qemuAligned,
		"QPState/Transitions":                 qemuModify,
		"QPState/IllegalTransitions":          qemuModify,
		"QPState/CurState":                    qemuModify,
		"QPState/Query":                       qemuQuery,
		"QPState/ErrFlushes":                  qemuModify,
		"QPState/ErrFlushesStalledForever":    qemuModify,
		"QPState/ResetClears":                 qemuModify,
		"Opcodes/Each/RC/RDMA_WRITE":          qemuSendOnly,
		"Opcodes/Each/RC/RDMA_WRITE_WITH_IMM": qemuSendOnly,
		"Opcodes/Each/RC/SEND_WITH_IMM":       qemuSendOnly,
		"Opcodes/Each/RC/RDMA_READ":           qemuSendOnly,
		"Opcodes/Each/UD":                     qemuStaleAH,
		"Opcodes/Disallowed/UD":               qemuStaleAH,
		"Opcodes/Chain/RC":                    qemuSendOnly,
		"Opcodes/Chain/UD":                    qemuStaleAH,
		"Opcodes/SGEs/RC":                     qemuSendOnly,
		"Opcodes/SGEs/UD":                     qemuStaleAH,
		"Opcodes/ZeroLength/RC":               qemuSendOnly,
		"Opcodes/ZeroLength/UD":               qemuStaleAH,
		"Opcodes/Unsignaled/RC":               qemuSignaled,
		"Opcodes/Unsignaled/UD":               qemuStaleAH,
		"Opcodes/SigAll/UD":                   qemuStaleAH,
		"Opcodes/CompChannel":                 qemuNotify,
		"SRQ/Query":                           qemuQuery,
		"SRQ/LimitEvent":                      qemuNoEvents,
		"SRQ/LimitTooLarge":                   qemuQuery,
		"UD/GRH":                              qemuStaleAH,
		"UD/RecvTooSmall":                     qemuStaleAH,
		"UD/QKeyMismatch":                     qemuStaleAH,
		"UD/QKeyViolCounter":                  qemuCounters,
		"UD/NoSuchQP":                         qemuStaleAH,
		"UD/MTU":                              qemuStaleAH,
		"Errors/REM_ACCESS_ERR":               qemuSendOnly,
		"Errors/REM_INV_REQ_ERR":              qemuSendOnly,
		"Errors/LOC_PROT_ERR":                 qemuLKey,
		"Errors/RNR_RETRY_EXC_ERR":            qemuModify,
		"Errors/RETRY_EXC_ERR":                qemuModify,
		"Errors/WR_FLUSH_ERR":                 qemuModify,
		"Errors/QueueFull":                    qemuQuery,
		"Errors/CQOverflow":                   qemuNoEvents,
		"TwoProcesses":                        qemuSendOnly,
	},
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
