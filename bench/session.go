package bench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/debug"
	"strings"
	"time"

	"github.com/pvperf/pvperf/bench/oob"
	"github.com/pvperf/pvperf/internal/clock"
	"github.com/pvperf/pvperf/perftest"
	"github.com/pvperf/pvperf/reports"
	"github.com/pvperf/pvperf/verbs"
)

// session is one side of a test: perftest's main for one binary.
type session struct {
	cfg Config
	// listens tells the side that listens for the out-of-band connection;
	// server is the side that receives the test's traffic (perftest's
	// machine == SERVER): the same, unless --reversed swaps them.
	listens bool
	server  bool
	dev     verbs.Device
	out     io.Writer
	errOut  io.Writer
	conn    *oob.Conn
	ep      *endpoint
	ti      reports.TestInfo
	kf      oob.KeyFormat
	json    reports.JSONReport
	// results is the run in pvperf's results model (JSON, CSV, HTML).
	results reports.Run
	start   time.Time
	// stop ends the test when the peer's connection closes.
	cancel context.CancelCauseFunc
	// ready, if set, learns the port a server listens on.
	ready func(port int)
	// bwLimit is the last BW row this side measured, checked against -w
	// and -y; bwLimitSet tells there is one (a WRITE or READ server has
	// none, and perftest's returns before its limit check).
	bwLimit    reports.BWResult
	bwLimitSet bool
}

// failure is an error whose text is already what perftest prints (on
// stderr, lines ending in newlines).
type failure struct {
	msg string
	err error
}

func (f *failure) Error() string {
	if f.err != nil && f.msg == "" {
		return f.err.Error()
	}
	return strings.TrimRight(strings.TrimLeft(f.msg, " \n"), "\n")
}

func (f *failure) Unwrap() error { return f.err }

// Message returns the text perftest prints for the failure.
func (f *failure) Message() string { return f.msg }

// PerftestMessage returns the text to print on stderr for an error Run
// returned: perftest's own words where it has them.
func PerftestMessage(err error) string {
	var f *failure
	if errors.As(err, &f) && f.msg != "" {
		return f.msg
	}
	if m := oob.PerftestMessage(err); m != "" {
		return m
	}
	return " " + err.Error() + "\n"
}

func fail(err error, lines ...string) error {
	return &failure{msg: strings.Join(lines, ""), err: err}
}

func (s *session) printf(format string, args ...any) { fmt.Fprintf(s.out, format, args...) }

func (s *session) full() bool { return s.cfg.Output == perftest.OutputFull }

// run is the whole test.
func (s *session) run(ctx context.Context) (err error) {
	// The polling loops stay on one OS thread, as perftest's do, and time
	// with the cycle counter where it is usable, as perftest's do.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	clock.Calibrate()
	s.start = time.Now()
	cfg := &s.cfg
	if err := s.openDevice(); err != nil {
		return err
	}
	outer := ctx
	defer func() {
		s.waitDestroy(outer)
		if cerr := s.ep.close(); cerr != nil && err == nil {
			err = fail(cerr, "Failed to destroy resources\n")
		}
	}()
	if err := s.connect(ctx); err != nil {
		return err
	}
	defer s.conn.Close()
	ctx, s.cancel = context.WithCancelCause(ctx)
	defer s.cancel(nil)

	if err := s.exchangeSetup(); err != nil {
		return err
	}
	size := int(cfg.Size)
	if cfg.AllSizes {
		size = MaxSize
	}
	if err := s.ep.setup(size); err != nil {
		return fail(err, " "+err.Error()+"\n", " Couldn't create IB resources\n")
	}
	if err := s.chooseGID(); err != nil {
		return err
	}
	s.ep.localDests()
	s.fillTestInfo()
	_ = reports.WriteHeader(s.out, &s.ti)

	// Setup is done allocating: collect its garbage and give free memory
	// back to the system now, so that the runtime's background scavenger
	// has nothing to return during the measurement (its madvise calls
	// interrupt the polling thread wherever it runs).
	debug.FreeOSMemory()

	switch {
	case cfg.Test == perftest.Bandwidth && (cfg.Verb == perftest.Send || cfg.Verb == perftest.SendImm):
		err = s.runSendBW(ctx)
	case cfg.Test == perftest.Bandwidth:
		err = s.runRDMABW(ctx)
	case cfg.Verb == perftest.Send || cfg.Verb == perftest.SendImm:
		err = s.runSendLat(ctx)
	case cfg.Verb == perftest.Write || cfg.Verb == perftest.WriteImm:
		err = s.runWriteLat(ctx)
	default:
		err = s.runReadAtomicLat(ctx)
	}
	if err != nil {
		if cause := context.Cause(ctx); cause != nil && !errors.Is(err, cause) && errors.Is(err, context.Canceled) {
			err = cause
		}
		return err
	}
	if err := s.writeFiles(); err != nil {
		return err
	}
	return s.checkLimits()
}

// waitDestroy is --wait_destroy: it keeps the resources for a while
// before they are destroyed (perftest's destroy_ctx), or until ctx ends.
func (s *session) waitDestroy(ctx context.Context) {
	d := s.cfg.WaitDestroy
	if d <= 0 {
		return
	}
	s.printf(" Waiting %d seconds before releasing resources...\n", int64(d/time.Second))
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// openDevice opens the device and applies perftest's checks that need it
// (check_link, ctx_set_max_inline, ctx_set_out_reads, set_mtu).
func (s *session) openDevice() error {
	cfg := &s.cfg
	vctx, err := s.dev.Open()
	if err != nil {
		return fail(err, " "+err.Error()+"\n", " Couldn't get context for the device\n")
	}
	e := &endpoint{cfg: cfg, dev: s.dev, ctx: vctx, gidIndex: cfg.GIDIndex}
	s.ep = e
	if e.attr, err = vctx.QueryDevice(); err != nil {
		return fail(err, " Couldn't query device\n", " Couldn't get context for the device\n")
	}
	if cfg.Events && cfg.CompVector >= e.attr.NumCompVectors {
		return fail(nil, " Completion vector specified is invalid\n", fmt.Sprintf(" Max completion vector = %d\n", e.attr.NumCompVectors-1),
			" Couldn't get context for the device\n")
	}
	if e.port, err = vctx.QueryPort(cfg.IBPort); err != nil {
		return fail(err, " Unable to query port attributes\n", " Couldn't set the link layer\n", " Couldn't get context for the device\n")
	}
	if e.port.State != verbs.PortActive {
		return fail(nil, fmt.Sprintf(" Port number %d state is %s\n", cfg.IBPort, e.port.State),
			" Couldn't set the link layer\n", " Couldn't get context for the device\n")
	}
	// --force-link replaces the port's link layer (perftest's
	// set_link_layer).
	if cfg.ForceLink != verbs.LinkUnspecified {
		e.port.LinkLayer = cfg.ForceLink
	}
	if e.port.LinkLayer == verbs.LinkEthernet && e.gidIndex == -1 {
		e.gidIndex = 0 // chosen later among the GIDs (perftest's get_best_gid_index)
		e.autoGID = true
	}
	// Inline data: perftest's defaults for latency tests on devices it
	// knows; pvperf knows a device supports inline from its attributes.
	e.inline = cfg.Inline
	if e.attr.MaxInlineData == 0 {
		if cfg.InlineGiven && cfg.Inline > 0 {
			_ = reports.WriteInlineNotRecognized(s.out, s.errOut)
		}
		e.inline = 0
	} else if !cfg.InlineGiven || cfg.Inline < 0 {
		e.inline = 0
		if cfg.Test == perftest.Latency {
			switch cfg.Verb {
			case perftest.Write, perftest.WriteImm:
				e.inline = 220
			case perftest.Send, perftest.SendImm:
				e.inline = 236
				if cfg.Connection == perftest.UD {
					e.inline = 188
				}
			}
		}
	}
	e.inline = min(e.inline, e.attr.MaxInlineData)
	if cfg.Verb == perftest.Read || cfg.Verb == perftest.Atomic {
		e.outReads = max(e.attr.MaxQPRdAtom, 1)
		if cfg.OutReads > e.outReads {
			s.printf("%s", reports.ResultLine)
			fmt.Fprintf(s.errOut, " Number of outstanding reads is above max = %d\n Changing to that max value\n", e.outReads)
		} else if cfg.OutReads > 0 {
			e.outReads = cfg.OutReads
		}
	} else {
		e.outReads = 1
	}
	// P_Key index (ctx_chk_pkey_index): beyond the table, index 0.
	e.pkeyIndex = cfg.PKeyIndex
	if e.pkeyIndex > 0 && e.pkeyIndex > e.attr.MaxPKeys-1 {
		s.printf("%s", reports.ResultLine)
		fmt.Fprintf(s.errOut, " Specified PKey Index, %d, greater than allowed max, %d\n Changing to 0\n", e.pkeyIndex, e.attr.MaxPKeys-1)
		e.pkeyIndex = 0
	}
	// MTU (set_mtu).
	e.mtu = e.port.ActiveMTU
	if cfg.MTU != 0 {
		m := verbs.MTUFromBytes(cfg.MTU)
		if m == 0 {
			fmt.Fprintf(s.errOut, " Invalid MTU - %d \n Please choose mtu from {256,512,1024,2048,4096}\n Will run with the port active mtu - %d\n", cfg.MTU, e.port.ActiveMTU)
			m = e.port.ActiveMTU
		}
		if m > e.port.ActiveMTU {
			s.printf("Requested mtu is higher than active mtu \nChanging to active mtu - %d\n", e.port.ActiveMTU)
			m = e.port.ActiveMTU
		}
		e.mtu = m
	}
	return nil
}

// connect sets up the out-of-band TCP connection.
func (s *session) connect(ctx context.Context) error {
	cfg := &s.cfg
	occfg := oob.Config{Version: cfg.Version, Timeout: cfg.PeerTimeout}
	addr := oob.Addr{Port: cfg.Port, BindSourceIP: cfg.BindSourceIP, IPv6: cfg.IPv6Addr}
	var err error
	if s.listens {
		var ln *oob.Listener
		ln, err = oob.Listen(ctx, addr)
		if err == nil {
			// The banner comes once the port listens, so a client
			// started on seeing it finds the server.
			if s.full() {
				ti := reports.TestInfo{Server: true, Output: perftest.OutputFull}
				_ = reports.WriteWaitingBanner(s.out, &ti)
			}
			if s.ready != nil {
				s.ready(ln.Addr().Port)
			}
			s.conn, err = ln.Accept(ctx, occfg)
		}
	} else {
		s.conn, err = oob.Dial(ctx, cfg.Server, addr, occfg)
	}
	if err != nil {
		msg := oob.PerftestMessage(err)
		if msg == "" {
			msg = " " + err.Error() + "\n"
		}
		return fail(err, msg, " Unable to init the socket connection\n")
	}
	return nil
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
	cfg := &s.cfg
	e := s.ep
	if _, err := s.conn.ExchangeVersion(); err != nil {
		return fail(err, oob.PerftestMessage(err))
	}
	sd, err := s.conn.ExchangeSysData(oob.SysData{PageSize: int32(os.Getpagesize()), CacheLineSize: int32(cacheLineSize())})
	if err != nil {
		return fail(err, oob.PerftestMessage(err))
	}
	e.pageSize, e.cacheLine = int(sd.PageSize), int(sd.CacheLineSize)
	m, err := s.conn.ExchangeMTU(oob.MTU(e.mtu))
	if err != nil {
		return fail(err, oob.PerftestMessage(err), " Failed to exchange data between server and clients\n")
	}
	e.mtu = verbs.MTU(m)
	// UD messages must fit in the MTU (check_mtu).
	if cfg.Connection == perftest.UD && int(cfg.Size) > e.mtu.Bytes() {
		if cfg.AllSizes || !cfg.SizeGiven {
			fmt.Fprintf(s.errOut, " Max msg size in UD is MTU %d\n Changing to this MTU\n", e.mtu.Bytes())
			cfg.Size = uint64(e.mtu.Bytes())
		} else {
			return fail(nil, " Max message size in UD cannot be greater than MTU \n", " Couldn't get context for the device\n")
		}
	}
	local := s.params()
	remote, err := s.conn.Negotiate(&local)
	if err != nil {
		var mm *oob.MismatchError
		if errors.As(err, &mm) {
			return fail(err, mm.PerftestMessage(), " Failed to negotiate parameters\n")
		}
		return fail(err, oob.PerftestMessage(err), " Failed to negotiate parameters\n")
	}
	if remote != nil && (cfg.Verb == perftest.Read || cfg.Verb == perftest.Atomic) {
		if n, changed := oob.OutReadsForPeer(e.outReads, cfg.Connection, &remote.Attr); changed {
			s.printf(" out_reads is greater than remote max_qp_rd_atom, using remote max_qp_rd_atom\n")
			e.outReads = n
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
		Size:           cfg.Size,
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
	switch {
	case cfg.AllSizes:
		p.TestMethod = oob.RunAll
		p.Size = MaxSize
	}
	if cfg.ReportGbits {
		p.ReportFmt = oob.GBS
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
	e := s.ep
	if e.gidIndex < 0 {
		s.kf = oob.KeyPlain
		return nil
	}
	if e.autoGID {
		i, err := bestGID(e.ctx, s.cfg.IBPort, s.cfg.PreferIPv6)
		if err != nil {
			return fail(err, " Unable to set up socket connection\n")
		}
		e.gidIndex = i
	}
	g, err := e.ctx.QueryGID(s.cfg.IBPort, e.gidIndex)
	if err != nil {
		return fail(err, " "+err.Error()+"\n", " Unable to set up socket connection\n")
	}
	e.gid = g.GID
	e.gidType = g.Type
	s.kf = oob.KeyGID
	return nil
}

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
	ti.MTU = e.mtu.Bytes()
	switch e.port.LinkLayer {
	case verbs.LinkEthernet:
		ti.Link = reports.LinkEthernet
	case verbs.LinkInfiniBand, verbs.LinkUnspecified:
		ti.Link = reports.LinkIB
	default:
		ti.Link = reports.LinkUnknown
	}
	ti.GIDIndex = e.gidIndex
	if e.gidIndex < 0 {
		ti.GIDIndex = reports.NotSet
	}
	ti.InlineSize = e.inline
	ti.NUMANode = reports.NotSet
	if e.attr.NUMANode >= 0 {
		ti.NUMANode = e.attr.NUMANode
	}
	ti.OutReads = e.outReads
	ti.DLID = uint16(cfg.DLID)
	ti.Gbits = cfg.ReportGbits
	ti.Output = cfg.Output
	ti.CPUUtil = cfg.CPUUtil && cfg.Duration > 0
	ti.Duration = cfg.Duration > 0
	ti.ReportUnsorted = cfg.ReportUnsorted
	ti.ReportHistogram = cfg.ReportHistogram
	s.ti = ti

	info := reports.NewRunInfo(cfg.TestName(), &ti)
	info.Loopback = cfg.Loopback
	info.Driver = s.dev.Driver()
	if ti.Link == reports.LinkEthernet && e.gidIndex >= 0 {
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
	s.results = reports.Run{Info: info}
}

// handshake exchanges the key of QP i.
func (s *session) handshake(i int) error {
	r, err := s.conn.Handshake(s.kf, s.ep.my[i])
	if err != nil {
		return fail(err, oob.PerftestMessage(err), " Failed to exchange data between server and clients\n")
	}
	s.setRemote(i, r)
	return nil
}

// barrier is a key handshake of QP 0 whose answer is not needed.
func (s *session) barrier() error {
	_, err := s.conn.Handshake(s.kf, s.ep.my[0])
	if err != nil {
		return fail(err, oob.PerftestMessage(err), " Failed to exchange data between server and clients\n")
	}
	return nil
}

// waitingBarrier is a barrier that waits for the peer's test to run: no
// timeout, but the peer's death still ends it.
func (s *session) waitingBarrier() error {
	s.conn.SetTimeout(oob.NoTimeout)
	defer s.conn.SetTimeout(s.cfg.PeerTimeout)
	return s.barrier()
}

func (s *session) setRemote(i int, k perftest.Dest) {
	e := s.ep
	if e.rem == nil {
		e.rem = make([]perftest.Dest, s.cfg.NumQPs)
	}
	e.rem[i] = k
}

// exchangeKeys runs the key rounds common to all tests (perftest's mains
// between ctx_print_test_info and the test): round 1, the GID check, the
// connection of the QPs, the send tests' extra handshake, and round 2 with
// the address lines.
func (s *session) exchangeKeys(sends bool) error {
	cfg := &s.cfg
	n := cfg.NumQPs
	recvVerb := cfg.Verb == perftest.Send || cfg.Verb == perftest.SendImm
	if cfg.Test == perftest.Latency && !recvVerb {
		if err := s.handshake(0); err != nil {
			return err
		}
	}
	for i := range n {
		if err := s.handshake(i); err != nil {
			return err
		}
	}
	if verbs.GID(s.ep.my[0].GID).IsV4Mapped() != verbs.GID(s.ep.rem[0].GID).IsV4Mapped() && s.kf == oob.KeyGID {
		return fail(nil, "\n Found Incompatibility issue with GID types.\n Please Try to use a different IP version.\n\n")
	}
	if err := s.ep.connect(sends); err != nil {
		return fail(err, " "+err.Error()+"\n", " Unable to Connect the HCA's through the link\n")
	}
	if recvVerb {
		if err := s.barrier(); err != nil {
			return err
		}
	}
	for i := range n {
		if err := s.handshake(i); err != nil {
			return err
		}
	}
	_ = reports.WriteAddresses(s.out, &s.ti, s.ep.my, s.ep.rem)
	if cfg.Events {
		if err := s.ep.scq.ReqNotify(false); err != nil {
			return fail(err, " Couldn't request CQ notification\n")
		}
		if s.ep.rcq != s.ep.scq {
			if err := s.ep.rcq.ReqNotify(false); err != nil {
				return fail(err, " Couldn't request CQ notification\n")
			}
		}
	}
	return nil
}

// sizes returns the message sizes of the run: 2..2^23 with -a (up to the
// MTU for UD), else the one size.
func (s *session) sizes() []int {
	cfg := &s.cfg
	if !cfg.AllSizes {
		return []int{int(cfg.Size)}
	}
	top := MaxSize
	if cfg.Connection == perftest.UD {
		top = s.ep.mtu.Bytes()
	}
	var out []int
	for n := 2; n <= top; n *= 2 {
		out = append(out, n)
	}
	return out
}

// cpuOf is the CPU use of a run when --cpu_util asked for it.
func (s *session) cpuOf(sm samples) float32 {
	if !s.cfg.CPUUtil {
		return 0
	}
	return sm.cpu
}

// bwResult turns the samples of a bandwidth run into perftest's numbers.
func (s *session) bwResult(size int, sm samples, peak bool) (reports.BWResult, error) {
	cfg := &s.cfg
	in := reports.BWInput{
		Size: uint64(size), Iters: sm.iters, NumQPs: cfg.NumQPs, Duration: cfg.Duration > 0,
		NoPeak: !peak, CQMod: cfg.CQMod, PostList: cfg.PostList,
		Posted: sm.tposted, Completed: sm.tcompleted, Gbits: cfg.ReportGbits,
	}
	in.CPUUtil = s.cpuOf(sm)
	if cfg.Duration == 0 {
		in.Iters = cfg.Iters
	}
	r, err := reports.ComputeBW(in)
	if err != nil {
		return r, fail(err, " "+err.Error()+"\n")
	}
	return r, nil
}

func (s *session) reportOf(r reports.BWResult) oob.BWReport {
	return oob.BWReport{Size: r.Size, Iters: r.Iters, BWPeak: r.Peak, BWAvg: r.Average, MsgRateAvg: r.MsgRate}
}

func fromReport(r oob.BWReport) reports.BWResult {
	return reports.BWResult{Size: r.Size, Iters: r.Iters, Peak: r.BWPeak, Average: r.BWAvg, MsgRate: r.MsgRateAvg}
}

// exchangeReports swaps BW results with the peer.
func (s *session) exchangeReports(local reports.BWResult) (reports.BWResult, error) {
	r, err := s.conn.ExchangeReports(s.reportOf(local), false)
	if err != nil {
		return reports.BWResult{}, fail(err, oob.PerftestMessage(err), " Failed to exchange data between server and clients\n")
	}
	return fromReport(r), nil
}

// closeConn is perftest's ctx_close_connection.
func (s *session) closeConn() error {
	if _, err := s.conn.CloseHandshake(s.kf, s.ep.my[0]); err != nil {
		return fail(err, oob.PerftestMessage(err), "Failed to close connection between server and client\n")
	}
	return nil
}

func (s *session) resultLine() {
	if s.full() {
		s.printf("%s", reports.ResultLine)
	}
}

// peakOn tells whether the BW peak is measured on this side.
func (s *session) peakOn() bool {
	cfg := &s.cfg
	return !cfg.NoPeak && cfg.Duration == 0 && cfg.Iters <= 20000
}

// runErr turns a loop error into perftest's report.
func runErr(err error, what string) error {
	var ce *errCompletion
	if errors.As(err, &ce) {
		return fail(err, ce.Error(), " Failed to complete "+what+" function successfully\n")
	}
	var f *failure
	if errors.As(err, &f) {
		return err
	}
	return fail(err, " "+err.Error()+"\n", " Failed to complete "+what+" function successfully\n")
}

// runRDMABW is write_bw, read_bw and atomic_bw (and write_bw with
// --write_with_imm): the client measures, the server waits and prints the
// client's numbers, except that the server of WRITE with immediate counts
// its receive completions itself.
func (s *session) runRDMABW(ctx context.Context) error {
	cfg := &s.cfg
	writeImm := cfg.Verb == perftest.WriteImm
	sends := !s.server || cfg.Bidirectional
	if err := s.exchangeKeys(sends); err != nil {
		return err
	}
	if err := s.barrier(); err != nil {
		return err
	}
	if s.full() {
		_ = reports.WriteBWHeader(s.out, &s.ti)
	}
	if s.server && !cfg.Bidirectional && !writeImm {
		// The client runs the test; wait for it, then print its results.
		stop := s.watchPeer(ctx)
		err := s.waitingBarrier()
		stop()
		if err != nil {
			return s.peerErr(ctx, err)
		}
		rem, err := s.exchangeReports(reports.BWResult{})
		if err != nil {
			return err
		}
		_ = reports.WriteBWReport(s.out, &s.ti, rem, nil)
		s.json.AddBW(&s.ti, rem, nil)
		s.results.AddBW(reports.SideRemote, rem, cfg.ReportGbits)
		if err := s.closeConn(); err != nil {
			return err
		}
		s.resultLine()
		return nil
	}
	var last reports.BWResult
	for _, size := range s.sizes() {
		var r *receiver
		if writeImm && (s.server || cfg.Bidirectional) {
			var err error
			if r, err = s.ep.postReceives(size); err != nil {
				return fail(err, " "+err.Error()+"\n", " Failed to post receive recv_wqes\n")
			}
		}
		if cfg.WarmUp && !writeImm && (!s.server || cfg.Bidirectional) {
			if err := s.ep.warmUp(ctx, size); err != nil {
				return fail(err, " "+err.Error()+"\n", "Problems with warm up\n")
			}
		}
		if cfg.Bidirectional || writeImm {
			if err := s.barrier(); err != nil {
				return err
			}
		}
		stop := s.watchPeer(ctx)
		var sm samples
		var err error
		peak := s.peakOn()
		switch {
		case cfg.Bidirectional && writeImm:
			sm, err = s.ep.runBi(ctx, r, size, peak, s.server)
		case !s.server || !writeImm:
			sm, err = s.ep.runBW(ctx, size, peak)
		default:
			peak = false
			sm, err = s.ep.runBWServer(ctx, r)
		}
		stop()
		if err != nil {
			return s.peerErr(ctx, runErr(err, "run_iter_bw"))
		}
		if writeImm || (cfg.Bidirectional && cfg.AllSizes) {
			if err := s.barrier(); err != nil {
				return err
			}
		}
		res, err := s.bwResult(size, sm, peak)
		if err != nil {
			return err
		}
		last = res
		if err := s.reportBW(res, cfg.Bidirectional && (!writeImm || cfg.Duration == 0)); err != nil {
			return err
		}
	}
	s.resultLine()
	if !s.server && !cfg.Bidirectional && !writeImm {
		if err := s.barrier(); err != nil {
			return err
		}
		if _, err := s.exchangeReports(last); err != nil {
			return err
		}
	}
	s.bwLimit, s.bwLimitSet = last, true
	return s.closeConn()
}

// reportBW prints and records this side's BW row for one size; with
// exchange (a bidirectional run) it first trades rows with the peer and
// reports their sum, both sides kept in the results.
func (s *session) reportBW(res reports.BWResult, exchange bool) error {
	cfg := &s.cfg
	if !exchange {
		_ = reports.WriteBWReport(s.out, &s.ti, res, nil)
		s.json.AddBW(&s.ti, res, nil)
		s.results.AddBW(reports.SideLocal, res, cfg.ReportGbits)
		return nil
	}
	rem, err := s.exchangeReports(res)
	if err != nil {
		return err
	}
	_ = reports.WriteBWReport(s.out, &s.ti, res, &rem)
	s.json.AddBW(&s.ti, res, &rem)
	s.results.AddBW(reports.SideLocal, res, cfg.ReportGbits)
	s.results.AddBW(reports.SideRemote, rem, cfg.ReportGbits)
	s.results.AddBW(reports.SideSum, reports.SumBW(res, rem), cfg.ReportGbits)
	if cfg.ReportBoth && !cfg.AllSizes {
		_ = reports.WriteBWReportBoth(s.out, &s.ti, res, rem)
	}
	return nil
}

// runSendBW is send_bw: the server counts what it receives and prints its
// own row, as the client does.
func (s *session) runSendBW(ctx context.Context) error {
	cfg := &s.cfg
	sends := !s.server || cfg.Bidirectional
	if err := s.exchangeKeys(sends); err != nil {
		return err
	}
	if s.full() {
		_ = reports.WriteBWHeader(s.out, &s.ti)
	}
	var last reports.BWResult
	for _, size := range s.sizes() {
		var r *receiver
		if s.server || cfg.Bidirectional {
			var err error
			if r, err = s.ep.postReceives(size); err != nil {
				return fail(err, " "+err.Error()+"\n", " Failed to post receive recv_wqes\n")
			}
		}
		if err := s.barrier(); err != nil {
			return err
		}
		stop := s.watchPeer(ctx)
		var sm samples
		var err error
		peak := s.peakOn()
		switch {
		case cfg.Bidirectional:
			sm, err = s.ep.runBi(ctx, r, size, peak, s.server)
		case !s.server:
			sm, err = s.ep.runBW(ctx, size, peak)
		default:
			peak = false
			sm, err = s.ep.runBWServer(ctx, r)
		}
		stop()
		if err != nil {
			return s.peerErr(ctx, runErr(err, "run_iter_bw"))
		}
		res, err := s.bwResult(size, sm, peak)
		if err != nil {
			return err
		}
		last = res
		if err := s.reportBW(res, cfg.Bidirectional && cfg.Duration == 0); err != nil {
			return err
		}
		if cfg.AllSizes {
			if err := s.barrier(); err != nil {
				return err
			}
		}
	}
	s.resultLine()
	s.bwLimit, s.bwLimitSet = last, true
	return s.closeConn()
}

// latResult turns latency samples into perftest's numbers and prints them.
func (s *session) latReport(size int, sm samples) error {
	cfg := &s.cfg
	rtt := 2
	if cfg.Verb == perftest.Read || cfg.Verb == perftest.Atomic {
		rtt = 1
	}
	if cfg.Duration > 0 {
		r := reports.ComputeLatencyDuration(reports.LatencyDurationInput{Size: uint64(size), Iters: sm.iters,
			Start: sm.tposted[0], End: sm.tcompleted[0], RTTFactor: rtt, CPUUtil: s.cpuOf(sm)})
		_ = reports.WriteLatencyDurationReport(s.out, &s.ti, r)
		s.json.AddLatencyDuration(r)
		s.results.AddLatencyDuration(reports.SideLocal, r)
		return nil
	}
	r, err := reports.ComputeLatency(reports.LatencyInput{Size: uint64(size), Iters: cfg.Iters,
		Samples: reports.PostedDeltas(sm.tposted), RTTFactor: rtt, Cycles: cfg.Cycles, CPUUtil: s.cpuOf(sm)})
	if err != nil {
		return fail(err, " "+err.Error()+"\n")
	}
	_ = reports.WriteLatencyReport(s.out, &s.ti, &r)
	s.json.AddLatency(r)
	s.results.AddLatency(reports.SideLocal, &r, reports.Nanoseconds)
	return nil
}

// runSendLat is send_lat.
func (s *session) runSendLat(ctx context.Context) error {
	if err := s.exchangeKeys(true); err != nil {
		return err
	}
	if s.full() {
		_ = reports.WriteLatencyHeader(s.out, &s.ti)
	}
	for _, size := range s.sizes() {
		r, err := s.ep.postReceives(size)
		if err != nil {
			return fail(err, " "+err.Error()+"\n", " Failed to post receive recv_wqes\n")
		}
		if err := s.barrier(); err != nil {
			return err
		}
		stop := s.watchPeer(ctx)
		sm, err := s.ep.runLatSend(ctx, r, size, s.server)
		stop()
		if err != nil {
			return s.peerErr(ctx, runErr(err, "run_iter_lat_send"))
		}
		if err := s.latReport(size, sm); err != nil {
			return err
		}
	}
	s.resultLine()
	return s.closeConn()
}

// runWriteLat is write_lat: no final handshake, each side just exits.
func (s *session) runWriteLat(ctx context.Context) error {
	cfg := &s.cfg
	if err := s.exchangeKeys(true); err != nil {
		return err
	}
	if err := s.barrier(); err != nil {
		return err
	}
	if s.full() {
		_ = reports.WriteLatencyHeader(s.out, &s.ti)
	}
	for _, size := range s.sizes() {
		var sm samples
		var err error
		if cfg.Verb == perftest.WriteImm {
			r, err2 := s.ep.postReceives(size)
			if err2 != nil {
				return fail(err2, " "+err2.Error()+"\n", " Failed to post receive recv_wqes\n")
			}
			if err := s.barrier(); err != nil {
				return err
			}
			stop := s.watchPeer(ctx)
			sm, err = s.ep.runLatWriteImm(ctx, r, size, s.server)
			stop()
		} else {
			stop := s.watchPeer(ctx)
			sm, err = s.ep.runLatWrite(ctx, size, s.server)
			stop()
		}
		if err != nil {
			return s.peerErr(ctx, runErr(err, "run_iter_lat_write"))
		}
		if err := s.latReport(size, sm); err != nil {
			return err
		}
	}
	s.resultLine()
	return nil
}

// runReadAtomicLat is read_lat and atomic_lat: only the client measures.
func (s *session) runReadAtomicLat(ctx context.Context) error {
	if err := s.exchangeKeys(true); err != nil {
		return err
	}
	if err := s.barrier(); err != nil {
		return err
	}
	if s.server {
		s.conn.SetTimeout(oob.NoTimeout)
		err := s.closeConn()
		if err != nil {
			return err
		}
		s.resultLine()
		return nil
	}
	if s.full() {
		_ = reports.WriteLatencyHeader(s.out, &s.ti)
	}
	for _, size := range s.sizes() {
		stop := s.watchPeer(ctx)
		sm, err := s.ep.runLatReadAtomic(ctx, size)
		stop()
		if err != nil {
			return s.peerErr(ctx, runErr(err, "run_iter_lat"))
		}
		if err := s.latReport(size, sm); err != nil {
			return err
		}
	}
	if err := s.closeConn(); err != nil {
		return err
	}
	s.resultLine()
	return nil
}

// peerErr prefers the peer's death, when that is what ended the test, to
// the error it caused.
func (s *session) peerErr(ctx context.Context, err error) error {
	if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, context.Canceled) {
		var f *failure
		if errors.As(cause, &f) {
			return cause
		}
	}
	return err
}

// writeFiles writes --out_json, --out_csv and --out_html.
func (s *session) writeFiles() error {
	cfg := &s.cfg
	if cfg.JSON {
		name := cfg.JSONFile
		if name == "" {
			name = "perftest_out.json"
		}
		err := writeFile(name, "JSON", func(w io.Writer) error {
			return reports.WriteJSON(w, &s.ti, &s.json, &s.results)
		})
		if err != nil {
			return err
		}
	}
	if cfg.CSVFile != "" {
		err := writeFile(cfg.CSVFile, "CSV", func(w io.Writer) error {
			return reports.WriteCSV(w, []reports.Run{s.results})
		})
		if err != nil {
			return err
		}
	}
	if cfg.HTMLFile != "" {
		return writeFile(cfg.HTMLFile, "HTML", func(w io.Writer) error {
			return reports.WriteHTML(w, []reports.Run{s.results})
		})
	}
	return nil
}

// writeFile creates (or truncates) name and writes it with write, in
// perftest's words when that fails.
func writeFile(name, format string, write func(io.Writer) error) error {
	f, err := os.OpenFile(name, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return fail(err, fmt.Sprintf(" Couldn't open %s output file %s: %v\n", format, name, err))
	}
	w := bufio.NewWriter(f)
	err = write(w)
	if err == nil {
		err = w.Flush()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fail(err, fmt.Sprintf(" Couldn't write %s output file %s: %v\n", format, name, err))
	}
	return nil
}

// checkLimits applies -w and -y (perftest checks the message rate only
// when -w is set too).
func (s *session) checkLimits() error {
	cfg := &s.cfg
	if !cfg.LimitBWSet || cfg.Test != perftest.Bandwidth || !s.bwLimitSet {
		return nil
	}
	if s.bwLimit.Average < cfg.LimitBW {
		return fail(nil, "Error: BW result is below bw limit\n")
	}
	if cfg.LimitMsgRate > 0 && s.bwLimit.MsgRate < cfg.LimitMsgRate {
		return fail(nil, "Error: Msg rate  is below msg_rate limit\n")
	}
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
