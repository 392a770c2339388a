//go:build linux

package emu

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/pvperf/pvperf/internal/unix"
	"github.com/pvperf/pvperf/verbs"
)

// Constants of the emulated connection manager.
const (
	// CMResponseTimeout bounds each wait for the peer's connection
	// manager: the TCP connect and the answer to a request (REP, REJ or
	// SIDR_REP), the RTU after an accept, and the DREP after a
	// disconnect (after which the id counts as disconnected anyway, as
	// the kernel's does when its DREQ times out).
	CMResponseTimeout = 20 * time.Second
	// CMRequestTimeout is how long a listener waits for the first message
	// of a new TCP connection; a connection that sends nothing valid in
	// that time is dropped.
	CMRequestTimeout = 10 * time.Second
	// CMDefaultAckTimeout is the local ACK timeout (4.096 µs × 2^14, 67
	// ms) of the RTS attributes unless SetAckTimeout sets another. The
	// kernel derives its default from the path's packet lifetime.
	CMDefaultAckTimeout = 14
	// CMUDPQKey is the Q_Key of ids in the UDP port space, the kernel's
	// RDMA_UDP_QKEY.
	CMUDPQKey = 0x01234567
	// CMHopLimit is the hop limit of the address vectors the connection
	// manager gives (RTR attributes, SIDR answers).
	CMHopLimit = 64
	// cmMaxBacklog is the backlog of a listener asked for none or too
	// many (the kernel's default rdma_ucm max_backlog).
	cmMaxBacklog = 1024
)

// IB CM reject reasons and SIDR statuses the emulated connection manager
// reports.
const (
	rejNoResources    = 3  // IB_CM_REJ_NO_RESOURCES
	rejInvalidService = 8  // IB_CM_REJ_INVALID_SERVICE_ID: no listener
	rejConsumer       = 28 // IB_CM_REJ_CONSUMER_DEFINED: the peer's Reject
	sidrUnsupported   = 1  // IB_SIDR_UNSUPPORTED: no listener
	sidrReject        = 2  // IB_SIDR_REJECT: the peer's Reject
	sidrNoQP          = 3  // IB_SIDR_NO_QP
)

// Field limits of the IB CM's messages.
const (
	cmPSNMask  = 0xFFFFFF // 24-bit PSNs
	cmQPNMask  = 0xFFFFFF // 24-bit QP numbers
	cmMaxRetry = 7        // 3-bit retry counts
)

// CMRejectError is the error of a connection refused by the peer or by
// its connection manager. It matches verbs.ErrRejected with errors.Is.
type CMRejectError struct {
	// SIDR is set for a datagram service request (UDP port space): Reason
	// is then a SIDR_REP status (1: no listener, 2: rejected) rather than
	// an IB CM reject reason (8: no listener, 28: rejected by the peer).
	SIDR   bool
	Reason int
	// PrivateData is what the peer's Reject sent, zero-padded to the
	// size of the IB CM message's field (148 bytes, 136 for SIDR), as
	// the kernel reports it.
	PrivateData []byte
	// Err is the cause seen locally (a refused TCP connection), if any.
	Err error
}

func (e *CMRejectError) Error() string {
	kind := "reason"
	if e.SIDR {
		kind = "sidr status"
	}
	s := fmt.Sprintf("%v (%s %d)", verbs.ErrRejected, kind, e.Reason)
	if t := e.reasonText(); t != "" {
		s = fmt.Sprintf("%v (%s %d: %s)", verbs.ErrRejected, kind, e.Reason, t)
	}
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

func (e *CMRejectError) reasonText() string {
	switch {
	case e.SIDR && e.Reason == sidrUnsupported, !e.SIDR && e.Reason == rejInvalidService:
		return "no listener"
	case e.SIDR && e.Reason == sidrReject, !e.SIDR && e.Reason == rejConsumer:
		return "rejected by the peer"
	case e.SIDR && e.Reason == sidrNoQP:
		return "no qp"
	case !e.SIDR && e.Reason == rejNoResources:
		return "no resources"
	}
	return ""
}

// Is reports whether target is verbs.ErrRejected.
func (e *CMRejectError) Is(target error) bool { return target == verbs.ErrRejected }

// Unwrap returns the local cause, if any.
func (e *CMRejectError) Unwrap() error { return e.Err }

// NewCM returns the connection manager of the emulated devices that
// Devices lists. See the package documentation ("Connection manager").
func NewCM() (verbs.CM, error) {
	devs, err := Devices()
	if err != nil {
		return nil, fmt.Errorf("emu cm: %w", err)
	}
	ds := make([]*Device, 0, len(devs))
	for _, d := range devs {
		if e, ok := d.(*Device); ok {
			ds = append(ds, e)
		}
	}
	return newCM(ds, CMResponseTimeout, CMRequestTimeout), nil
}

// cm is the emulated connection manager: a set of ids whose connections
// run over TCP.
type cm struct {
	devs        []*Device
	respTimeout time.Duration
	reqTimeout  time.Duration
	life        context.Context
	stop        context.CancelFunc

	mu     sync.Mutex
	closed bool
	ids    map[*cmID]struct{}
}

var _ verbs.CM = (*cm)(nil)

// newCM returns a connection manager for devs with the given waits for
// peers (CMResponseTimeout) and for requests (CMRequestTimeout).
func newCM(devs []*Device, respTimeout, reqTimeout time.Duration) *cm {
	life, stop := context.WithCancel(context.Background())
	return &cm{devs: devs, respTimeout: respTimeout, reqTimeout: reqTimeout, life: life, stop: stop, ids: map[*cmID]struct{}{}}
}

// CreateID returns a new id in port space ps.
func (m *cm) CreateID(ps verbs.PortSpace) (verbs.CMID, error) {
	if ps != verbs.PortSpaceTCP && ps != verbs.PortSpaceUDP {
		return nil, fmt.Errorf("emu cm: create id: port space %v: %w", ps, verbs.ErrNotSupported)
	}
	id := m.newID(ps)
	if !m.register(id) {
		return nil, fmt.Errorf("emu cm: create id: %w", verbs.ErrClosed)
	}
	return id, nil
}

// newID returns an id that is not registered yet.
func (m *cm) newID(ps verbs.PortSpace) *cmID {
	life, kill := context.WithCancel(m.life)
	return &cmID{m: m, ps: ps, life: life, kill: kill, psn: rand.Uint32() & cmPSNMask, disc: make(chan struct{})}
}

// register adds id to the ids Close closes; false once the CM is closed.
func (m *cm) register(id *cmID) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return false
	}
	m.ids[id] = struct{}{}
	return true
}

func (m *cm) forget(id *cmID) {
	m.mu.Lock()
	delete(m.ids, id)
	m.mu.Unlock()
}

// Close closes every id still open and ends the CM.
func (m *cm) Close() error {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil
	}
	m.closed = true
	ids := make([]*cmID, 0, len(m.ids))
	for id := range m.ids {
		ids = append(ids, id)
	}
	m.mu.Unlock()
	for _, id := range ids {
		_ = id.Close()
	}
	m.stop()
	return nil
}

// idState is where an id is in its life.
type idState uint8

const (
	idIdle          idState = iota
	idBound                 // Bind
	idAddrResolved          // ResolveAddr
	idRouteResolved         // ResolveRoute
	idConnecting            // Connect under way
	idRepRcvd               // active RC: Connect returned, Establish next
	idListening             // Listen
	idReqRcvd               // passive: returned by GetRequest
	idAccepting             // passive RC: Accept under way
	idConnected             // RC: RTU sent or received
	idDatagram              // UD: the service was resolved or answered
	idFailed                // rejected, refused, or the handshake failed
	idClosed
)

var idStateNames = [...]string{"idle", "bound", "address resolved", "route resolved", "connecting",
	"reply received", "listening", "request received", "accepting", "connected", "datagram", "failed", "closed"}

func (s idState) String() string { return idStateNames[s] }

// cmPeer is what the peer's REQ or REP said.
type cmPeer struct {
	qpn  uint32
	psn  uint32
	gid  verbs.GID
	mtu  verbs.MTU // the path MTU: the smaller of both devices' active MTUs
	qkey uint32
}

// cmID is an id of the emulated connection manager.
type cmID struct {
	m    *cm
	ps   verbs.PortSpace
	psn  uint32             // the id's starting PSN (the kernel's seq_num)
	life context.Context    // ends when the id closes
	kill context.CancelFunc // ends life
	wg   sync.WaitGroup     // the id's goroutines
	wmu  sync.Mutex         // serializes writes to conn

	mu         sync.Mutex // guards what follows
	st         idState
	dev        *cmDev // the device the id is bound to, once known
	gidIdx     int
	src, dst   netip.AddrPort
	tos        uint8
	ackTimeout uint8
	ackSet     bool
	// What the connection agreed on, as the kernel's ib_cm keeps it:
	// this side's responder resources and initiator depth, the retry
	// counts of its RTS attributes, and the peer.
	respRes, initDepth uint8
	retry, rnrRetry    uint8
	peer               cmPeer
	peerKnown          bool
	req                verbs.ConnParam // passive: what GetRequest returns
	conn               net.Conn
	// Listener.
	ln       net.Listener
	reqs     chan *cmID
	inflight map[net.Conn]struct{}
	// Disconnection.
	connected bool          // reached idConnected once
	disc      chan struct{} // closed when the connection has ended
	discOnce  sync.Once
	dreqSent  bool
	dreqRcvd  bool
	dreqAt    time.Time
}

var _ verbs.CMID = (*cmID)(nil)

// errf returns op's error: "emu cm: op: detail: errno".
func errf(op string, errno error, format string, args ...any) error {
	return fmt.Errorf("emu cm: %s: %w", op, verbs.Errorf(errno, format, args...))
}

// usable returns an error once the id is closed. Call with mu held.
func (id *cmID) usable(op string) error {
	if id.st == idClosed {
		return fmt.Errorf("emu cm: %s: %w", op, verbs.ErrClosed)
	}
	return nil
}

// Bind binds the id to a local address: a TCP listener on it (port 0: a
// free port) and, for an address other than the unspecified one, the
// emulated device it belongs to.
func (id *cmID) Bind(addr netip.AddrPort) error {
	id.mu.Lock()
	defer id.mu.Unlock()
	if err := id.usable("bind"); err != nil {
		return err
	}
	if id.st != idIdle {
		return errf("bind", unix.EINVAL, "id is %v", id.st)
	}
	if !addr.IsValid() {
		return errf("bind", unix.EINVAL, "invalid address")
	}
	a := addr.Addr().Unmap()
	network := "tcp4"
	switch {
	case a.Is6() && a.IsUnspecified():
		network = "tcp" // [::] takes IPv4 too, as the kernel's rdma_cm does
	case a.Is6():
		network = "tcp6"
	}
	ln, err := net.Listen(network, netip.AddrPortFrom(a, addr.Port()).String())
	if err != nil {
		return fmt.Errorf("emu cm: bind %v: %w", addr, err)
	}
	if !a.IsUnspecified() {
		dev, gi, err := id.m.device(a, a.Is6())
		if err != nil {
			ln.Close()
			return errf("bind "+addr.String(), unix.ENODEV, "%v", err)
		}
		id.dev, id.gidIdx = dev, gi
	}
	id.ln, id.src, id.st = ln, addrPortOf(ln.Addr()), idBound
	return nil
}

// ResolveAddr binds the id to the emulated device that reaches dst: the
// device of src if valid (or of the bound address), else of the address
// the routing table picks to reach dst. Loopback destinations reach the
// first device. Nothing is sent; timeout is not needed.
func (id *cmID) ResolveAddr(ctx context.Context, src netip.Addr, dst netip.AddrPort, _ time.Duration) error {
	op := "resolve address " + dst.String()
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("emu cm: %s: %w", op, context.Cause(ctx))
	}
	id.mu.Lock()
	defer id.mu.Unlock()
	if err := id.usable(op); err != nil {
		return err
	}
	if id.st != idIdle && id.st != idBound {
		return errf(op, unix.EINVAL, "id is %v", id.st)
	}
	if !dst.IsValid() {
		return errf(op, unix.EINVAL, "invalid destination")
	}
	if !src.IsValid() && id.st == idBound && !id.src.Addr().IsUnspecified() {
		src = id.src.Addr()
	}
	d := dst.Addr().Unmap()
	if src.IsValid() && !src.IsUnspecified() && src.Unmap().Is4() != d.Is4() {
		return errf(op, unix.EINVAL, "source %v and destination are of different address families", src)
	}
	s, err := id.source(src, d)
	if err != nil {
		return fmt.Errorf("emu cm: %s: %w: %w", op, verbs.ErrUnreachable, err)
	}
	dev, gi, err := id.m.device(s, d.Is6())
	if err != nil {
		return fmt.Errorf("emu cm: %s: %w: %w", op, verbs.ErrUnreachable, err)
	}
	if id.ln != nil {
		id.ln.Close() // an active id needs no listener
		id.ln = nil
	}
	id.dev, id.gidIdx = dev, gi
	id.src, id.dst, id.st = netip.AddrPortFrom(s, id.src.Port()), netip.AddrPortFrom(d, dst.Port()), idAddrResolved
	return nil
}

// source returns the local address that reaches dst: src when given, a
// loopback address for an unspecified dst (the kernel resolves it to
// loopback), else the routing table's choice.
func (id *cmID) source(src, dst netip.Addr) (netip.Addr, error) {
	switch {
	case src.IsValid() && !src.IsUnspecified():
		return src.Unmap(), nil
	case dst.IsUnspecified() && dst.Is4():
		return netip.AddrFrom4([4]byte{127, 0, 0, 1}), nil
	case dst.IsUnspecified():
		return netip.IPv6Loopback(), nil
	}
	s, err := routeSource(dst)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("no route: %w", err)
	}
	return s, nil
}

// ResolveRoute completes the resolution: nothing more is needed.
func (id *cmID) ResolveRoute(ctx context.Context, _ time.Duration) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("emu cm: resolve route: %w", context.Cause(ctx))
	}
	id.mu.Lock()
	defer id.mu.Unlock()
	if err := id.usable("resolve route"); err != nil {
		return err
	}
	if id.st != idAddrResolved {
		return errf("resolve route", unix.EINVAL, "id is %v, not address resolved", id.st)
	}
	id.st = idRouteResolved
	return nil
}

// Bound returns the device (node GUID, port 1) and addresses of the id.
func (id *cmID) Bound() (verbs.CMAddr, error) {
	id.mu.Lock()
	defer id.mu.Unlock()
	if err := id.usable("bound address"); err != nil {
		return verbs.CMAddr{}, err
	}
	a := verbs.CMAddr{Src: id.src, Dst: id.dst}
	if id.dev != nil {
		a.NodeGUID, a.Port = id.dev.guid, 1
	}
	return a, nil
}

// SetTOS sets the traffic class of the address vectors the id gives.
func (id *cmID) SetTOS(tos uint8) error {
	id.mu.Lock()
	defer id.mu.Unlock()
	if err := id.usable("set tos"); err != nil {
		return err
	}
	id.tos = tos
	return nil
}

// SetAckTimeout sets the local ACK timeout of the RTS attributes of an
// id in the TCP port space (the kernel refuses it for UD).
func (id *cmID) SetAckTimeout(t uint8) error {
	id.mu.Lock()
	defer id.mu.Unlock()
	if err := id.usable("set ack timeout"); err != nil {
		return err
	}
	if id.ps != verbs.PortSpaceTCP {
		return errf("set ack timeout", unix.EINVAL, "%v port space", id.ps)
	}
	id.ackTimeout, id.ackSet = t, true
	return nil
}
