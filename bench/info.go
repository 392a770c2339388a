package bench

import (
	"os"

	"github.com/pvperf/pvperf/internal/unix"
	"github.com/pvperf/pvperf/reports"
	"github.com/pvperf/pvperf/verbs"
)

// fillTestInfo describes the run for the report functions.
func (s *session) fillTestInfo() {
	cfg := &s.cfg
	e := s.ep
	ti := reports.NewTestInfo(cfg.Verb, cfg.Test)
	ti.AtomicType = cfg.AtomicType
	ti.Duplex = cfg.Bidirectional
	ti.PostList = cfg.PostList
	ti.RecvPostList = cfg.RecvPostList
	ti.Events = cfg.Events
	ti.CompVector = cfg.CompVector
	ti.Device = s.dev.Name()
	ti.NumQPs = cfg.NumQPs
	ti.Transport = reports.TransportIB
	ti.Connection = cfg.Connection
	ti.SRQ = cfg.UseSRQ
	ti.Server = s.server
	ti.TxDepth = cfg.TxDepth
	ti.RxDepth = cfg.RxDepth
	ti.CQMod = cfg.CQMod
	ti.DynamicCQEPoll = cfg.DynamicPolling
	ti.CQEPollBatch = cfg.pollBatch()
	ti.RelaxedOrdering = reports.Off
	if cfg.relaxedOrdering() {
		ti.RelaxedOrdering = reports.On
		ti.RelaxedOrderingWarning = !relaxedOrderingCompliant()
	}
	ti.MTU = s.plan.mtu.Bytes()
	switch s.plan.link {
	case verbs.LinkEthernet:
		ti.Link = reports.LinkEthernet
	case verbs.LinkInfiniBand, verbs.LinkUnspecified:
		ti.Link = reports.LinkIB
	default:
		ti.Link = reports.LinkUnknown
	}
	ti.GIDIndex = s.plan.gidIndex
	if s.plan.gidIndex < 0 {
		ti.GIDIndex = reports.NotSet
	}
	ti.InlineSize = s.plan.inline
	// perftest prints the node of the CPU it runs on (after binding itself
	// to the device's node, which pvperf does not do).
	ti.NUMANode = reports.NotSet
	if n, ok := unix.CPUNode(); ok {
		ti.NUMANode = n
	}
	ti.OutReads = s.plan.outReads
	ti.DLID = uint16(cfg.DLID)
	ti.Gbits = cfg.ReportGbits
	ti.Output = cfg.Output
	ti.CPUUtil = cfg.CPUUtil && cfg.Duration > 0
	ti.Duration = cfg.Duration > 0
	ti.ReportUnsorted = cfg.ReportUnsorted
	ti.ReportHistogram = cfg.ReportHistogram
	ti.RdmaCMQPs = cfg.RdmaCM
	ti.RdmaCMExchange = cfg.RdmaCM || cfg.CMExchange
	if cfg.RdmaCM && cfg.TOS >= 0 {
		ti.TOS = cfg.TOS
	}
	s.ti = ti

	info := reports.NewRunInfo(cfg.TestName(), &ti)
	info.Loopback = cfg.Loopback
	info.Driver = s.dev.Driver()
	if ti.Link == reports.LinkEthernet && s.plan.gidIndex >= 0 {
		info.RoCEVersion = 1
		if e.gidType == verbs.GIDTypeRoCEv2 {
			info.RoCEVersion = 2
		}
	}
	info.Iterations = cfg.Iters
	if cfg.Duration > 0 {
		info.Iterations = 0
		info.DurationSeconds = cfg.Duration
	}
	info.Host, _ = os.Hostname()
	info.Peer = cfg.Server
	info.PvperfVersion = cfg.PvperfVersion
	info.PerftestVersion = cfg.Version
	info.Time = s.start
	s.info = info
}
