package bench

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"time"

	"github.com/pvperf/pvperf/bench/oob"
	"github.com/pvperf/pvperf/perftest"
	"github.com/pvperf/pvperf/verbs"
)

// Bounds of the connection manager's steps (perftest's).
const (
	// cmResolveTimeout bounds one address or route resolution.
	cmResolveTimeout = 2000 * time.Millisecond
	// cmResolveRetries is how many times a failed resolution is tried
	// (perftest's NUM_OF_RETRIES).
	cmResolveRetries = 10
	// cmConnectAttempts and cmConnectPause: a test QP's connection is
	// tried this many times, this far apart, while the server's
	// listener may not be up yet.
	cmConnectAttempts = 10
	cmConnectPause    = 100 * time.Millisecond
	// cmMinRNRTimer is what perftest's server sets on its -R QPs after
	// the accept (the kernel's attributes carry 0).
	cmMinRNRTimer = minRNRTimer
	// cmUDQKey is the Q_Key of rdma_cm's datagram QPs (RDMA_UDP_QKEY).
	cmUDQKey = 0x01234567
)

// cmState is what a session keeps of the connection manager: the ids of
// the test QPs (-R) and, for UD, their peers.
type cmState struct {
	port int // the port the server listens on (the chosen one with AnyPort)
	ids  []verbs.CMID
}

// cmConnectTimeout bounds a wait for the peer's connection manager.
func (s *session) cmConnectTimeout() time.Duration {
	return max(s.cfg.PeerTimeout, oob.MinConnectTimeout)
}

// cmListenAddr is the server's address: --bind_source_ip, or any.
func (s *session) cmListenAddr(ctx context.Context, port int) (netip.AddrPort, error) {
	cfg := &s.cfg
	if cfg.BindSourceIP != "" {
		a, err := lookupIP(ctx, cfg.BindSourceIP, cfg.IPv6Addr)
		if err != nil {
			return netip.AddrPort{}, err
		}
		return netip.AddrPortFrom(a, uint16(port)), nil
	}
	if cfg.IPv6Addr {
		return netip.AddrPortFrom(netip.IPv6Unspecified(), uint16(port)), nil
	}
	return netip.AddrPortFrom(netip.IPv4Unspecified(), uint16(port)), nil
}

// lookupIP resolves host to one address of the family asked.
func lookupIP(ctx context.Context, host string, ipv6 bool) (netip.Addr, error) {
	network := "ip4"
	if ipv6 {
		network = "ip6"
	}
	ips, err := net.DefaultResolver.LookupNetIP(ctx, network, host)
	if err != nil {
		return netip.Addr{}, err
	}
	if len(ips) == 0 {
		return netip.Addr{}, fmt.Errorf("no address for %s", host)
	}
	return ips[0].Unmap(), nil
}

// cmPort is the port of -p (with AnyPort: 0, any free port).
func (s *session) cmPort() int {
	switch s.cfg.Port {
	case oob.AnyPort:
		return 0
	case 0:
		return DefaultPort
	}
	return s.cfg.Port
}

// cmCheckDevice fails unless id is bound to this session's device.
func (s *session) cmCheckDevice(id verbs.CMID) error {
	a, err := id.Bound()
	if err != nil {
		return err
	}
	if a.NodeGUID != s.ep.attr.NodeGUID {
		return fmt.Errorf("rdma_cm: the connection goes through the RDMA device with node GUID %016x, not %s (%016x): choose that device with -d",
			a.NodeGUID, s.dev.Name(), s.ep.attr.NodeGUID)
	}
	return nil
}

// connectCM sets up the out-of-band exchange over rdma_cm (-z):
// perftest's rdma_server_connect and rdma_client_connect.
func (s *session) connectCM(ctx context.Context) error {
	cfg := &s.cfg
	if cfg.CM == nil {
		return fail(nil, " rdma_cm is not available for device "+s.dev.Name()+"\n", " Unable to create RDMA_CM resources\n")
	}
	occfg := oob.Config{Version: cfg.Version, Timeout: cfg.PeerTimeout, ParamsSize: cfg.ParamsSize}
	var c *cmConn
	var err error
	role := oob.Client
	if s.listens {
		role = oob.Server
		c, err = s.acceptCM(ctx)
		if err != nil {
			return fail(err, " "+err.Error()+"\n", " Unable to perform rdma_server function\n", " Unable to init the socket connection\n")
		}
	} else {
		if s.full() && s.server {
			s.printWaitingBanner()
		}
		c, err = s.dialCM(ctx)
		if err != nil {
			return fail(err, " "+err.Error()+"\n", " Unable to perform rdma_client function\n", " Unable to init the socket connection\n")
		}
	}
	s.conn, err = oob.NewConn(c, role, occfg)
	if err != nil {
		_ = c.Close()
		return fail(err, " "+err.Error()+"\n", " Unable to init the socket connection\n")
	}
	return nil
}

// acceptCM listens on -p, takes one connection request, accepts it and
// closes the listener.
func (s *session) acceptCM(ctx context.Context) (*cmConn, error) {
	cfg := &s.cfg
	addr, err := s.cmListenAddr(ctx, s.cmPort())
	if err != nil {
		return nil, fmt.Errorf("rdma_cm: listen: %w", err)
	}
	l, err := cfg.CM.CreateID(verbs.PortSpaceTCP)
	if err != nil {
		return nil, err
	}
	defer l.Close()
	if err := l.Bind(addr); err != nil {
		return nil, err
	}
	if err := l.Listen(1); err != nil {
		return nil, err
	}
	b, err := l.Bound()
	if err != nil {
		return nil, err
	}
	s.cm.port = int(b.Src.Port())
	if s.full() && s.server {
		s.printWaitingBanner()
	}
	if s.ready != nil {
		s.ready(s.cm.port)
	}
	// A server waits for its client as long as it takes.
	id, _, err := l.GetRequest(ctx)
	if err != nil {
		return nil, err
	}
	if err := s.cmCheckDevice(id); err != nil {
		_ = id.Reject(nil)
		_ = id.Close()
		return nil, err
	}
	c, err := newCMConn(s.ep.ctx, id)
	if err != nil {
		_ = id.Reject(nil)
		_ = id.Close()
		return nil, err
	}
	if err := s.cmAckTimeout(id); err != nil {
		_ = id.Reject(nil)
		_ = c.Close()
		return nil, err
	}
	if err := verbs.CMModify(id, c.qp, verbs.StateRTR, verbs.StateRTS); err != nil {
		_ = c.Close()
		return nil, err
	}
	actx, cancel := context.WithTimeout(ctx, s.cmConnectTimeout())
	defer cancel()
	if err := id.Accept(actx, verbs.ConnParam{QPNum: c.qp.Num(), RetryCount: uint8(cfg.RetryCount), RNRRetryCount: 7}); err != nil {
		_ = c.Close()
		return nil, err
	}
	c.setAddrs()
	return c, nil
}

// dialCM resolves the server's address and route and connects the
// exchange's QP.
func (s *session) dialCM(ctx context.Context) (*cmConn, error) {
	cfg := &s.cfg
	id, err := s.resolveCM(ctx, verbs.PortSpaceTCP, false, true)
	if err != nil {
		return nil, err
	}
	c, err := newCMConn(s.ep.ctx, id)
	if err != nil {
		_ = id.Close()
		return nil, err
	}
	cctx, cancel := context.WithTimeout(ctx, s.cmConnectTimeout())
	defer cancel()
	if _, err := id.Connect(cctx, verbs.ConnParam{QPNum: c.qp.Num(), RetryCount: uint8(cfg.RetryCount), RNRRetryCount: 7}); err != nil {
		_ = c.Close()
		return nil, fmt.Errorf("rdma_cm: connect to %s:%d: %w", cfg.Server, s.cmPort(), err)
	}
	if err := verbs.CMModify(id, c.qp, verbs.StateInit, verbs.StateRTR, verbs.StateRTS); err != nil {
		_ = c.Close()
		return nil, err
	}
	if err := id.Establish(); err != nil {
		_ = c.Close()
		return nil, err
	}
	c.setAddrs()
	return c, nil
}

// resolveCM creates an id in ps and resolves the server's address and
// route (each tried up to cmResolveRetries times), setting the TOS first
// when tos (-R's ids with --tos) and the ACK timeout when ack, and checks
// the device.
func (s *session) resolveCM(ctx context.Context, ps verbs.PortSpace, tos, ack bool) (verbs.CMID, error) {
	cfg := &s.cfg
	dst, err := lookupIP(ctx, cfg.Server, cfg.IPv6Addr)
	if err != nil {
		return nil, fmt.Errorf("rdma_cm: resolve %s: %w", cfg.Server, err)
	}
	var src netip.Addr
	if cfg.BindSourceIP != "" {
		if src, err = lookupIP(ctx, cfg.BindSourceIP, cfg.IPv6Addr); err != nil {
			return nil, fmt.Errorf("rdma_cm: resolve %s: %w", cfg.BindSourceIP, err)
		}
	}
	to := netip.AddrPortFrom(dst, uint16(s.cmPort()))
	id, err := cfg.CM.CreateID(ps)
	if err != nil {
		return nil, err
	}
	if err := s.resolveSteps(ctx, id, src, to, tos, ack); err != nil {
		_ = id.Close()
		return nil, err
	}
	return id, nil
}

func (s *session) resolveSteps(ctx context.Context, id verbs.CMID, src netip.Addr, to netip.AddrPort, tos, ack bool) error {
	cfg := &s.cfg
	var err error
	for range cmResolveRetries {
		if err = id.ResolveAddr(ctx, src, to, cmResolveTimeout); err == nil || ctx.Err() != nil || !errors.Is(err, verbs.ErrCMTimeout) {
			break
		}
	}
	if err != nil {
		return fmt.Errorf("rdma_cm: resolve address %v: %w", to, err)
	}
	if tos && cfg.TOS >= 0 {
		if err := id.SetTOS(uint8(cfg.TOS)); err != nil {
			return fmt.Errorf("rdma_cm: set TOS: %w", err)
		}
	}
	if ack {
		if err := s.cmAckTimeout(id); err != nil {
			return err
		}
	}
	for range cmResolveRetries {
		if err = id.ResolveRoute(ctx, cmResolveTimeout); err == nil || ctx.Err() != nil || !errors.Is(err, verbs.ErrCMTimeout) {
			break
		}
	}
	if err != nil {
		return fmt.Errorf("rdma_cm: resolve route to %v: %w", to, err)
	}
	return s.cmCheckDevice(id)
}

// cmAckTimeout gives the RC QP of id the local ACK timeout of -u, as
// perftest (since 24.10) does on the exchange's id and on RC test ids:
// without it the connection manager's default applies (on RoCE the packet
// lifetime + 1: 4.096 µs × 2^17 or 2^19, where -u's default is 2^14), and
// a lost packet stalls the test 8 or 32 times longer than without -R.
func (s *session) cmAckTimeout(id verbs.CMID) error {
	if err := id.SetAckTimeout(uint8(s.cfg.QPTimeout)); err != nil {
		return fmt.Errorf("rdma_cm: set the ACK timeout: %w", err)
	}
	return nil
}

// cmParam is what the test QPs' connect and accept carry: perftest's
// retry counts and, for READ, atomics and --data_validation (whose
// markers take fetch-and-adds), the outstanding reads: with them the
// connection manager grants remote reads and atomics.
func (s *session) cmParam(qpn uint32) verbs.ConnParam {
	cfg := &s.cfg
	p := verbs.ConnParam{QPNum: qpn, RetryCount: uint8(cfg.RetryCount), RNRRetryCount: uint8(cfg.RetryCount)}
	if cfg.Verb == perftest.Read || cfg.Verb == perftest.Atomic || cfg.DataValidation {
		p.ResponderResources = uint8(s.plan.outReads)
		p.InitiatorDepth = uint8(s.plan.outReads)
	}
	if cfg.Connection == perftest.UD {
		p.QKey = cmUDQKey
	}
	return p
}

// cmPortSpace is the port space of the test QPs' ids.
func (s *session) cmPortSpace() verbs.PortSpace {
	if s.cfg.Connection == perftest.UD {
		return verbs.PortSpaceUDP
	}
	return verbs.PortSpaceTCP
}

// connectQPsCM connects the test QPs through the connection manager
// (-R): perftest's create_rdma_cm_connection, between its two
// synchronising key exchanges.
func (s *session) connectQPsCM(ctx context.Context) error {
	zero := perftest.Dest{}
	// The server listens before the exchange that lets the client
	// connect: a datagram service request (UD) that finds no listener
	// is answered "unsupported", which no client tries again.
	var l verbs.CMID
	if s.listens {
		var err error
		if l, err = s.listenQPsCM(ctx); err != nil {
			return fail(err, " "+err.Error()+"\n", "Failed to create RDMA CM connection.\n")
		}
		defer l.Close()
	}
	if _, err := s.conn.Handshake(s.kf, zero); err != nil {
		return fail(err, oob.PerftestMessage(err), "Failed to sync between client and server before creating RDMA CM connection.\n")
	}
	var err error
	if s.listens {
		err = s.acceptQPsCM(ctx, l)
	} else {
		err = s.dialQPsCM(ctx)
	}
	if err != nil {
		var f *failure
		if errors.As(err, &f) {
			return err
		}
		return fail(err, " "+err.Error()+"\n", "Failed to create RDMA CM connection.\n")
	}
	if _, err := s.conn.Handshake(s.kf, zero); err != nil {
		return fail(err, oob.PerftestMessage(err), "Failed to sync between client and server after creating RDMA CM connection.\n")
	}
	return nil
}

// listenQPsCM listens again on -p, with a backlog of one request per QP.
func (s *session) listenQPsCM(ctx context.Context) (verbs.CMID, error) {
	cfg := &s.cfg
	addr, err := s.cmListenAddr(ctx, s.cm.port)
	if err != nil {
		return nil, fmt.Errorf("rdma_cm: listen: %w", err)
	}
	l, err := cfg.CM.CreateID(s.cmPortSpace())
	if err != nil {
		return nil, err
	}
	if err := l.Bind(addr); err != nil {
		_ = l.Close()
		return nil, err
	}
	if err := l.Listen(cfg.NumQPs); err != nil {
		_ = l.Close()
		return nil, err
	}
	return l, nil
}

// acceptQPsCM accepts one request per QP on listener l, in their order
// of arrival.
func (s *session) acceptQPsCM(ctx context.Context, l verbs.CMID) error {
	cfg, e := &s.cfg, s.ep
	n := cfg.NumQPs
	s.cm.ids = make([]verbs.CMID, n)
	wctx, cancel := context.WithTimeout(ctx, s.cmConnectTimeout())
	defer cancel()
	for i := range n {
		id, req, err := l.GetRequest(wctx)
		if err != nil {
			return fmt.Errorf("rdma_cm: connection request %d of %d: %w", i+1, n, err)
		}
		s.cm.ids[i] = id
		if err := s.cmCheckDevice(id); err != nil {
			_ = id.Reject(nil)
			return err
		}
		q := e.qps[i]
		param := s.cmParam(q.Num())
		if param.ResponderResources != 0 || param.InitiatorDepth != 0 {
			// perftest clamps its depths to what the request offers (as
			// the event reports it), for peers of other limits; its
			// rdma_accept then moves the QP with them.
			param.ResponderResources = min(param.ResponderResources, req.InitiatorDepth)
			param.InitiatorDepth = min(param.InitiatorDepth, req.ResponderResources)
		}
		if cfg.Connection == perftest.UD {
			if err := s.udToRTS(id, q); err != nil {
				_ = id.Reject(nil)
				return err
			}
		} else {
			if cfg.Connection == perftest.RC {
				if err := s.cmAckTimeout(id); err != nil {
					_ = id.Reject(nil)
					return err
				}
			}
			if err := acceptingModify(id, q, param); err != nil {
				_ = id.Reject(nil)
				return fmt.Errorf("rdma_cm: QP %d: %w", q.Num(), err)
			}
		}
		if err := id.Accept(wctx, param); err != nil {
			return fmt.Errorf("rdma_cm: accept QP %d: %w", q.Num(), err)
		}
		if cfg.Connection != perftest.UD {
			a := verbs.QPAttr{MinRNRTimer: cmMinRNRTimer}
			if err := q.Modify(&a, verbs.AttrMinRNRTimer); err != nil {
				return fmt.Errorf("rdma_cm: QP %d: set the minimum RNR timer: %w", q.Num(), err)
			}
		}
	}
	return nil
}

// acceptingModify moves the passive side's QP to RTS with the attributes
// the connection manager gives, and, as librdmacm's rdma_accept does, the
// depths the accept carries: p.ResponderResources as max_dest_rd_atomic,
// p.InitiatorDepth as max_rd_atomic (when set).
func acceptingModify(id verbs.CMID, q verbs.QP, p verbs.ConnParam) error {
	for _, st := range []verbs.QPState{verbs.StateInit, verbs.StateRTR, verbs.StateRTS} {
		a, m, err := id.InitQPAttr(st)
		if err != nil {
			return err
		}
		if st == verbs.StateRTR && m&verbs.AttrMaxDestRdAtomic != 0 && p.ResponderResources != 0 {
			a.MaxDestRdAtomic = p.ResponderResources
		}
		if st == verbs.StateRTS && m&verbs.AttrMaxQPRdAtomic != 0 && p.InitiatorDepth != 0 {
			a.MaxRdAtomic = p.InitiatorDepth
		}
		if err := q.Modify(&a, m); err != nil {
			return err
		}
	}
	return nil
}

// dialQPsCM connects each QP in turn, trying again while the server's
// listener is not up.
func (s *session) dialQPsCM(ctx context.Context) error {
	cfg, e := &s.cfg, s.ep
	n := cfg.NumQPs
	s.cm.ids = make([]verbs.CMID, n)
	if cfg.Connection == perftest.UD {
		e.udQPN = make([]uint32, n)
		e.udQKey = make([]uint32, n)
	}
	for i := range n {
		var err error
		for attempt := 1; ; attempt++ {
			err = s.dialQPCM(ctx, i)
			if err == nil || !errors.Is(err, verbs.ErrRejected) || attempt == cmConnectAttempts || ctx.Err() != nil {
				break
			}
			time.Sleep(cmConnectPause)
		}
		if err != nil {
			return fmt.Errorf("%w (QP %d of %d)", err, i+1, n)
		}
	}
	return nil
}

// dialQPCM connects QP i.
func (s *session) dialQPCM(ctx context.Context, i int) error {
	cfg, e := &s.cfg, s.ep
	q := e.qps[i]
	id, err := s.resolveCM(ctx, s.cmPortSpace(), true, s.cfg.Connection == perftest.RC)
	if err != nil {
		return err
	}
	ok := false
	defer func() {
		if !ok {
			_ = id.Close()
		}
	}()
	cctx, cancel := context.WithTimeout(ctx, s.cmConnectTimeout())
	defer cancel()
	if cfg.Connection == perftest.UD {
		if err := s.udToRTS(id, q); err != nil {
			return err
		}
		r, err := id.Connect(cctx, s.cmParam(q.Num()))
		if err != nil {
			return fmt.Errorf("rdma_cm: connect to %s:%d: %w", cfg.Server, s.cmPort(), err)
		}
		ah, err := e.pd.CreateAH(r.AH)
		if err != nil {
			return fmt.Errorf("rdma_cm: create the peer's address handle: %w", err)
		}
		e.ahs[i] = ah
		e.udQPN[i], e.udQKey[i] = r.QPNum, r.QKey
	} else {
		if err := resetQP(q); err != nil {
			return err
		}
		if err := verbs.CMModify(id, q, verbs.StateInit); err != nil {
			return fmt.Errorf("rdma_cm: QP %d: %w", q.Num(), err)
		}
		if _, err := id.Connect(cctx, s.cmParam(q.Num())); err != nil {
			return fmt.Errorf("rdma_cm: connect to %s:%d: %w", cfg.Server, s.cmPort(), err)
		}
		// The access rights come with the connection: INIT again (as
		// librdmacm does), then RTR and RTS.
		if err := verbs.CMModify(id, q, verbs.StateInit, verbs.StateRTR, verbs.StateRTS); err != nil {
			return fmt.Errorf("rdma_cm: QP %d: %w", q.Num(), err)
		}
		if err := id.Establish(); err != nil {
			return err
		}
	}
	s.cm.ids[i] = id
	ok = true
	return nil
}

// resetQP moves a QP that an earlier attempt moved back to RESET.
func resetQP(q verbs.QP) error {
	a, err := q.Query()
	if err != nil || a.State == verbs.StateReset {
		return err
	}
	a = verbs.QPAttr{State: verbs.StateReset}
	if err := q.Modify(&a, verbs.AttrState); err != nil {
		return fmt.Errorf("rdma_cm: reset QP %d: %w", q.Num(), err)
	}
	return nil
}

// udToRTS moves a datagram QP to RTS as librdmacm does: INIT with the
// id's attributes (its Q_Key), then RTR and RTS (send PSN 0).
func (s *session) udToRTS(id verbs.CMID, q verbs.QP) error {
	if err := resetQP(q); err != nil {
		return err
	}
	if err := verbs.CMModify(id, q, verbs.StateInit); err != nil {
		return fmt.Errorf("rdma_cm: QP %d: %w", q.Num(), err)
	}
	a := verbs.QPAttr{State: verbs.StateRTR}
	if err := q.Modify(&a, verbs.AttrState); err != nil {
		return fmt.Errorf("rdma_cm: QP %d to RTR: %w", q.Num(), err)
	}
	a = verbs.QPAttr{State: verbs.StateRTS}
	if err := q.Modify(&a, verbs.AttrState|verbs.AttrSQPSN); err != nil {
		return fmt.Errorf("rdma_cm: QP %d to RTS: %w", q.Num(), err)
	}
	return nil
}

// closeCM ends the test QPs' connections: each side disconnects and
// waits a while for the connection to end (perftest 6.06's client, and
// 6.29's server, disconnect; the kernel ends a connection when either
// side does), then destroys the ids.
func (s *session) closeCM() {
	ids := s.cm.ids
	s.cm.ids = nil
	if len(ids) == 0 {
		return
	}
	if s.cfg.Connection != perftest.UD {
		// Only an id that disconnects waits for its DISCONNECTED event:
		// one that never connected (rejected, or whose accept failed)
		// gets none and would hold the exit for the peer timeout.
		var connected []verbs.CMID
		for _, id := range ids {
			if id != nil && id.Disconnect() == nil {
				connected = append(connected, id)
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), s.cfg.PeerTimeout)
		for _, id := range connected {
			_ = id.WaitDisconnected(ctx)
		}
		cancel()
	}
	for _, id := range ids {
		if id != nil {
			_ = id.Close()
		}
	}
}
