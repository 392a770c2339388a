package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/pvperf/pvperf/bench/oob"
	"github.com/pvperf/pvperf/perftest"
	"github.com/pvperf/pvperf/reports"
	"github.com/pvperf/pvperf/verbs"
)

// openDevice opens the device and applies perftest's checks that need it
// (check_link, ctx_set_max_inline, ctx_set_out_reads, set_mtu).
func (s *session) openDevice() (err error) {
	cfg := &s.cfg
	vctx, err := s.dev.Open()
	if err != nil {
		return fail(err, " "+err.Error()+"\n", " Couldn't get context for the device\n")
	}
	defer func() {
		if err != nil {
			// The run ends here, before it takes charge of closing.
			_ = vctx.Close()
		}
	}()
	e := &endpoint{cfg: cfg, dev: s.dev, ctx: vctx, plan: &s.plan, debugOut: s.out, turn: s.turn}
	s.ep = e
	if e.attr, err = vctx.QueryDevice(); err != nil {
		return fail(err, " Couldn't query device\n", " Couldn't get context for the device\n")
	}
	if cfg.Events && cfg.CompVector > e.attr.NumCompVectors {
		return fail(nil, " Completion vector specified is invalid\n", fmt.Sprintf(" Max completion vector = %d\n", e.attr.NumCompVectors-1),
			" Couldn't get context for the device\n")
	}
	if e.port, err = vctx.QueryPort(cfg.IBPort); err != nil {
		return fail(err, fmt.Sprintf(" Unable to query port %d attributes\n", cfg.IBPort), " Couldn't set the link layer\n", " Couldn't get context for the device\n")
	}
	if e.port.State != verbs.PortActive {
		return fail(nil, fmt.Sprintf(" Port number %d state is %s\n", cfg.IBPort, e.port.State),
			" Couldn't set the link layer\n", " Couldn't get context for the device\n")
	}
	var notes []note
	s.plan, notes = planDevice(cfg, &e.attr, &e.port, s.dev.Kind() == verbs.KindEmulated)
	s.print(notes)
	return nil
}

// print writes the messages of a plan step.
func (s *session) print(notes []note) {
	for _, n := range notes {
		fmt.Fprint(s.out, n.stdout)
		fmt.Fprint(s.errOut, n.stderr)
	}
}

// connect sets up the out-of-band TCP connection.
func (s *session) connect(ctx context.Context) error {
	cfg := &s.cfg
	occfg := oob.Config{Version: cfg.Version, Timeout: cfg.PeerTimeout, ParamsSize: cfg.ParamsSize}
	addr := oob.Addr{Port: cfg.Port, BindSourceIP: cfg.BindSourceIP, IPv6: cfg.IPv6Addr}
	var err error
	if s.listens {
		var ln *oob.Listener
		if s.lnHold != nil && *s.lnHold != nil {
			ln = *s.lnHold // a repeated series: the listener of its first run
		} else {
			ln, err = oob.Listen(ctx, addr)
			if err == nil && s.lnHold != nil {
				ln.Keep()
				*s.lnHold = ln
			}
		}
		if err == nil {
			// The banner comes once the port listens, so a client
			// started on seeing it finds the server.
			if s.full() && s.server {
				s.printWaitingBanner()
			}
			if s.ready != nil {
				s.ready(ln.Addr().Port)
			}
			s.conn, err = ln.Accept(ctx, occfg)
			if s.lnHold != nil && s.runNo >= s.cfg.Repeat {
				// The series' last run: a client given a larger
				// --repeat is refused at once, not taken into the
				// backlog of a listener about to close.
				_ = ln.Close()
			}
		}
	} else {
		if s.full() && s.server {
			s.printWaitingBanner() // --reversed: the test's server connects
		}
		s.conn, err = oob.Dial(ctx, cfg.Server, addr, occfg)
		// A repeated test's server takes the next run's connection on
		// the listener of its first run; a peer that is not pvperf
		// (perftest started again for each run) may take a moment to
		// listen again: it is given the peer timeout.
		for deadline := time.Now().Add(cfg.PeerTimeout); s.redial && errors.Is(err, oob.ErrConnect) && time.Now().Before(deadline); {
			select {
			case <-ctx.Done():
				cause := context.Cause(ctx)
				return fail(cause, " "+cause.Error()+"\n", " Unable to init the socket connection\n")
			case <-time.After(20 * time.Millisecond):
			}
			s.conn, err = oob.Dial(ctx, cfg.Server, addr, occfg)
		}
	}
	if err != nil {
		msg := oob.PerftestMessage(err)
		if msg == "" {
			msg = " " + err.Error() + "\n"
		}
		var ne *oob.NetError
		if errors.As(err, &ne) {
			// perftest's message does not say why; pvperf adds the
			// reason under it.
			if (ne.Kind == oob.ErrConnect || ne.Kind == oob.ErrAccept) && ne.Reason() != "" {
				msg += " (" + ne.Reason() + ")\n"
			}
			// establish_connection's line for any failed socket setup.
			msg += "Unable to open file descriptor for socket connection\n"
		}
		return fail(err, msg, " Unable to init the socket connection\n")
	}
	return nil
}

// printWaitingBanner prints perftest's "Waiting for client to connect"
// box. The test's server prints it: the side that listens, unless
// --reversed makes that side the test's client.
func (s *session) printWaitingBanner() {
	ti := reports.TestInfo{Server: true, Output: perftest.OutputFull}
	_ = reports.WriteWaitingBanner(s.out, &ti)
}

// watchPeer cancels the test when the peer closes the connection while no
// exchange is expected (its process died).
func (s *session) watchPeer(ctx context.Context) (stop func()) {
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		if !oob.WaitPeerClosed(s.conn, done) {
			return
		}
		// A peer that has finished may close first: write_lat has no
		// final handshake, and its server is done when the client's last
		// write lands, while the client still waits for that write's
		// completion. A loop that ends within the grace period has not
		// lost its peer.
		t := time.NewTimer(peerCloseGrace)
		defer t.Stop()
		select {
		case <-done:
		case <-t.C:
			s.cancel(fail(oob.ErrPeerClosed, " The peer closed the connection during the test\n"))
		}
	}()
	return func() {
		close(done)
		<-finished
	}
}

// peerCloseGrace is how long a loop may go on after its peer closed the
// connection before the test fails.
const peerCloseGrace = 2 * time.Second

// exchangeSetup runs the version, system data, MTU and parameter exchanges.
func (s *session) exchangeSetup() error {
	cfg, p := &s.cfg, &s.plan
	if _, err := s.conn.ExchangeVersion(); err != nil {
		return fail(err, oob.PerftestMessage(err))
	}
	sd, err := s.conn.ExchangeSysData(oob.SysData{PageSize: int32(os.Getpagesize()), CacheLineSize: int32(cacheLineSize())})
	if err != nil {
		return fail(err, oob.PerftestMessage(err))
	}
	m, err := s.conn.ExchangeMTU(oob.MTU(p.mtu))
	if err != nil {
		return fail(err, oob.PerftestMessage(err), " Failed to exchange data between server and clients\n")
	}
	notes, err := p.planPeer(cfg, int(sd.PageSize), int(sd.CacheLineSize), verbs.MTU(m))
	if err != nil {
		return err
	}
	s.print(notes)
	local := s.params()
	remote, err := s.conn.Negotiate(&local)
	if err != nil {
		var mm *oob.MismatchError
		if errors.As(err, &mm) {
			return fail(err, mm.PerftestMessage(), " Failed to negotiate parameters\n")
		}
		return fail(err, oob.PerftestMessage(err), " Failed to negotiate parameters\n")
	}
	if remote != nil && (cfg.Verb == perftest.Read || cfg.Verb == perftest.Atomic || cfg.DataValidation) {
		if n, changed := oob.OutReadsForPeer(p.outReads, cfg.Connection, &remote.Attr); changed {
			s.printf(" out_reads is greater than remote max_qp_rd_atom, using remote max_qp_rd_atom\n")
			p.outReads = n
		}
	}
	return nil
}

// params is this side's parameter-negotiation struct.
func (s *session) params() oob.Params {
	cfg := &s.cfg
	a := &s.ep.attr
	p := oob.Params{
		ConnectionType: cfg.Connection,
		Verb:           cfg.Verb,
		Tst:            cfg.Test,
		ReportFmt:      oob.MBS,
		Size:           uint64(s.plan.size),
		Iters:          cfg.Iters,
		NumQPs:         int32(cfg.NumQPs),
		Duration:       int32(cfg.Duration),
	}
	if cfg.Duration == 0 {
		p.Duration = DefaultDuration
	} else {
		p.TestType = oob.Duration
		p.Iters = 0
	}
	if cfg.Verb == perftest.Atomic {
		p.AtomicType = cfg.AtomicType
	}
	if cfg.AllSizes {
		p.TestMethod = oob.RunAll
		p.Size = MaxSize
	}
	if cfg.RunInfinitely {
		// The iterations stay what they were before --run_infinitely
		// made it a duration run: 0 after -D, else -n's.
		p.TestMethod = oob.RunInfinitely
		p.Iters = cfg.Iters
	}
	if cfg.ReportGbits {
		p.ReportFmt = oob.GBS
	}
	if cfg.DataValidation {
		p.DataValidation = oob.On
	}
	if cfg.RdmaCM || cfg.CMExchange {
		p.UseRDMACM = oob.On
	}
	p.Attr = oob.DeviceAttr{
		FWVer: a.FWVersion, NodeGUID: a.NodeGUID, SysImageGUID: a.SysImageGUID, MaxMRSize: a.MaxMRSize,
		PageSizeCap: a.PageSizeCap, VendorID: a.VendorID, VendorPartID: a.VendorPartID, HWVer: a.HWVersion,
		MaxQP: int32(a.MaxQP), MaxQPWR: int32(a.MaxQPWR), DeviceCapFlags: uint32(a.Flags), MaxSGE: int32(a.MaxSGE),
		MaxSGERd: int32(a.MaxSGERd), MaxCQ: int32(a.MaxCQ), MaxCQE: int32(a.MaxCQE), MaxMR: int32(a.MaxMR),
		MaxPD: int32(a.MaxPD), MaxQPRdAtom: int32(a.MaxQPRdAtom), MaxEERdAtom: int32(a.MaxEERdAtom),
		MaxResRdAtom: int32(a.MaxResRdAtom), MaxQPInitRdAtom: int32(a.MaxQPInitRdAtom), MaxEEInitRdAtom: int32(a.MaxEEInitRdAtom),
		AtomicCap: uint32(a.AtomicCap), MaxEE: int32(a.MaxEE), MaxRDD: int32(a.MaxRDD), MaxMW: int32(a.MaxMW),
		MaxRawIPv6QP: int32(a.MaxRawIPv6QP), MaxRawEthyQP: int32(a.MaxRawEthyQP), MaxMcastGrp: int32(a.MaxMcastGrp),
		MaxMcastQPAttach: int32(a.MaxMcastQPAttach), MaxTotalMcastQPAttach: int32(a.MaxTotalMcastQPAttach),
		MaxAH: int32(a.MaxAH), MaxFMR: int32(a.MaxFMR), MaxMapPerFMR: int32(a.MaxMapPerFMR), MaxSRQ: int32(a.MaxSRQ),
		MaxSRQWR: int32(a.MaxSRQWR), MaxSRQSGE: int32(a.MaxSRQSGE), MaxPKeys: uint16(a.MaxPKeys),
		LocalCAAckDelay: a.LocalCAAckDelay, PhysPortCnt: uint8(a.PhysPortCnt),
	}
	return p
}

// chooseGID picks the GID index (automatically on Ethernet without -x)
// and reads the GID.
func (s *session) chooseGID() error {
	e, p := s.ep, &s.plan
	if p.gidIndex < 0 {
		s.kf = oob.KeyFormatFor(false, s.cfg.DataValidation)
		return nil
	}
	if p.autoGID {
		i, err := bestGID(e.ctx, s.cfg.IBPort, s.cfg.PreferIPv6)
		if err != nil {
			return fail(err, " Unable to set up socket connection\n")
		}
		p.gidIndex = i
	}
	g, err := e.ctx.QueryGID(s.cfg.IBPort, p.gidIndex)
	if err != nil {
		return fail(err, " "+err.Error()+"\n", " Unable to set up socket connection\n")
	}
	e.gid = g.GID
	e.gidType = g.Type
	s.kf = oob.KeyFormatFor(true, s.cfg.DataValidation)
	return nil
}

// cacheLineSize is the L1 data cache line size (perftest's
// get_cache_line_size), 64 when unknown.
func cacheLineSize() int {
	b, err := os.ReadFile("/sys/devices/system/cpu/cpu0/cache/index0/coherency_line_size")
	if err == nil {
		var n int
		if _, err := fmt.Sscanf(strings.TrimSpace(string(b)), "%d", &n); err == nil && n > 0 {
			return n
		}
	}
	return 64
}
