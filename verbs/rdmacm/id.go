//go:build linux

package rdmacm

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"time"

	"github.com/pvperf/pvperf/internal/ibabi"
	"github.com/pvperf/pvperf/internal/unix"
	"github.com/pvperf/pvperf/internal/wire"
	"github.com/pvperf/pvperf/verbs"
)

// ID is a connection manager id (struct rdma_cm_id): an endpoint that is
// bound to an address, then to an RDMA device and port once the address
// resolves.
type ID struct {
	c  *Channel
	id uint32
	// UID is what the kernel echoes in the id's events.
	UID uint64
	// PS is the port space: PSTCP (RC) or PSUDP (UD).
	PS uint16
}

// CreateID creates an id in port space ps (PSTCP or PSUDP).
func (c *Channel) CreateID(ps uint16) (*ID, error) {
	qpType := uint8(qpTypeRC)
	switch ps {
	case PSTCP:
	case PSUDP:
		qpType = qpTypeUD
	default:
		return nil, fmt.Errorf("rdmacm: create id: port space %#x: %w", ps, verbs.ErrNotSupported)
	}
	c.mu.Lock()
	c.uid++
	uid := c.uid
	c.mu.Unlock()
	var resp createIDResp
	if err := c.exec("create id", cmdCreateID, &createIDReq{UID: uid, PS: ps, QPType: qpType}, 8, &resp); err != nil {
		return nil, err
	}
	return &ID{c: c, id: resp.ID, UID: uid, PS: ps}, nil
}

// Handle is the kernel's number of the id.
func (id *ID) Handle() uint32 { return id.id }

// Destroy destroys the id and returns how many of its events the kernel
// reported.
func (id *ID) Destroy() (uint32, error) {
	var resp destroyIDResp
	err := id.c.exec("destroy id", cmdDestroyID, &destroyIDReq{ID: id.id}, 0, &resp)
	return resp.EventsReported, err
}

// Bind binds the id to a local address (its port 0: any free port).
func (id *ID) Bind(a netip.AddrPort) error {
	sa, n, err := encodeSockaddr(a)
	if err != nil {
		return fmt.Errorf("rdmacm: bind %v: %w", a, err)
	}
	if err := id.c.exec("bind", cmdBind, &bindReq{ID: id.id, AddrSize: n, Addr: sa}, -1, nil); err != nil {
		return fmt.Errorf("%w (address %v)", err, a)
	}
	return nil
}

// ResolveAddr starts resolving dst (from src when src is valid) to an RDMA
// device and port: the id's next event is ADDR_RESOLVED or ADDR_ERROR,
// within timeout.
func (id *ID) ResolveAddr(src, dst netip.AddrPort, timeout time.Duration) error {
	req := resolveAddrReq{ID: id.id, TimeoutMS: uint32(timeout.Milliseconds())}
	var err error
	if src.IsValid() {
		if req.Src, req.SrcSize, err = encodeSockaddr(src); err != nil {
			return fmt.Errorf("rdmacm: resolve address: source %v: %w", src, err)
		}
	}
	if req.Dst, req.DstSize, err = encodeSockaddr(dst); err != nil {
		return fmt.Errorf("rdmacm: resolve address %v: %w", dst, err)
	}
	return id.c.exec("resolve address", cmdResolveAddr, &req, -1, nil)
}

// ResolveRoute starts resolving the route to the resolved address: the
// id's next event is ROUTE_RESOLVED or ROUTE_ERROR, within timeout.
func (id *ID) ResolveRoute(timeout time.Duration) error {
	return id.c.exec("resolve route", cmdResolveRoute, &resolveRouteReq{ID: id.id, TimeoutMS: uint32(timeout.Milliseconds())}, -1, nil)
}

// AddrInfo is what the kernel says of a resolved (or bound) id.
type AddrInfo struct {
	// NodeGUID is the node GUID of the device the id is bound to, as
	// verbs.DeviceAttr.NodeGUID gives it.
	NodeGUID uint64
	Port     uint8
	PKey     uint16
	Src, Dst netip.AddrPort
	// DevIndex is the kernel's index of the device (ibdev_index).
	DevIndex uint32
}

// QueryAddr returns the device, port and addresses of the id.
func (id *ID) QueryAddr() (AddrInfo, error) {
	var r queryAddrResp
	if err := id.c.exec("query address", cmdQuery, &queryReq{ID: id.id, Option: queryAddr}, 0, &r); err != nil {
		return AddrInfo{}, err
	}
	info := AddrInfo{NodeGUID: binary.BigEndian.Uint64(r.NodeGUID[:]), Port: r.PortNum, PKey: r.PKey, DevIndex: r.IBDevIndex}
	if r.SrcSize > 0 {
		if a, err := decodeSockaddr(r.Src[:], int(r.SrcSize)); err == nil {
			info.Src = a
		}
	}
	if r.DstSize > 0 {
		if a, err := decodeSockaddr(r.Dst[:], int(r.DstSize)); err == nil {
			info.Dst = a
		}
	}
	return info, nil
}

// Listen makes a bound id listen for connection requests.
func (id *ID) Listen(backlog int) error {
	return id.c.exec("listen", cmdListen, &listenReq{ID: id.id, Backlog: uint32(backlog)}, -1, nil)
}

// ConnParam is what a connect or an accept carries to the peer.
type ConnParam struct {
	QPNum              uint32
	QKey               uint32 // UD
	PrivateData        []byte // at most 256 bytes (less on the wire: 56 in a REQ, 196 in a REP)
	SRQ                bool
	ResponderResources uint8
	InitiatorDepth     uint8
	FlowControl        uint8
	RetryCount         uint8
	RNRRetryCount      uint8
}

func (p *ConnParam) encode() (connParam, error) {
	if len(p.PrivateData) > maxPrivateData {
		return connParam{}, fmt.Errorf("private data of %d bytes, at most %d", len(p.PrivateData), maxPrivateData)
	}
	cp := connParam{
		QPNum: p.QPNum, QKey: p.QKey, PrivateDataLen: uint8(len(p.PrivateData)),
		ResponderResources: p.ResponderResources, InitiatorDepth: p.InitiatorDepth,
		FlowControl: p.FlowControl, RetryCount: p.RetryCount, RNRRetryCount: p.RNRRetryCount, Valid: 1,
	}
	if p.SRQ {
		cp.SRQ = 1
	}
	copy(cp.PrivateData[:], p.PrivateData)
	return cp, nil
}

// Connect sends a connection request (RC) or a service ID resolution
// request (UD) carrying p: the id's next event is CONNECT_RESPONSE (the
// QP is the program's: move it to RTR and RTS, then Establish, which ends
// the handshake),
// ESTABLISHED (UD), REJECTED, UNREACHABLE or CONNECT_ERROR.
func (id *ID) Connect(p ConnParam) error {
	cp, err := p.encode()
	if err != nil {
		return fmt.Errorf("rdmacm: connect: %w", err)
	}
	return id.c.exec("connect", cmdConnect, &connectReq{Param: cp, ID: id.id}, -1, nil)
}

// Accept accepts the connection request that created the id, carrying p:
// the id's next event is ESTABLISHED. It also sets the id's UID, which
// its events carry from then on.
func (id *ID) Accept(p ConnParam) error {
	cp, err := p.encode()
	if err != nil {
		return fmt.Errorf("rdmacm: accept: %w", err)
	}
	return id.c.exec("accept", cmdAccept, &acceptReq{UID: id.UID, Param: cp, ID: id.id}, -1, nil)
}

// Establish completes an active connection whose QP the program moved to
// RTS after CONNECT_RESPONSE (what librdmacm does before it reports
// ESTABLISHED): the kernel sends the RTU. No ESTABLISHED event follows on
// this side; the connection is up when Establish returns.
func (id *ID) Establish() error {
	return id.c.exec("establish", cmdAccept, &acceptReq{UID: id.UID, ID: id.id}, -1, nil)
}

// Reject rejects the connection request that created the id.
func (id *ID) Reject(privateData []byte) error {
	if len(privateData) > maxPrivateData {
		return fmt.Errorf("rdmacm: reject: private data of %d bytes, at most %d", len(privateData), maxPrivateData)
	}
	req := rejectReq{ID: id.id, PrivateDataLen: uint8(len(privateData))}
	copy(req.PrivateData[:], privateData)
	return id.c.exec("reject", cmdReject, &req, -1, nil)
}

// Disconnect disconnects a connected id: both sides get DISCONNECTED.
func (id *ID) Disconnect() error {
	return id.c.exec("disconnect", cmdDisconnect, &disconnectReq{ID: id.id}, -1, nil)
}

// SetTOS sets the type of service of the id's packets (before the
// address resolves).
func (id *ID) SetTOS(tos uint8) error { return id.setOption(optionTOS, []byte{tos}) }

// SetAckTimeout sets the QP's local ACK timeout exponent the kernel puts
// in the RTS attributes.
func (id *ID) SetAckTimeout(t uint8) error { return id.setOption(optionAckTimeout, []byte{t}) }

// SetReuseAddr lets the id bind to a port in TIME_WAIT.
func (id *ID) SetReuseAddr(on bool) error {
	v := make([]byte, 4)
	if on {
		v[0] = 1
	}
	return id.setOption(optionReuseAddr, v)
}

// setOption sets option name of level RDMA_OPTION_ID to val, which is
// copied to the end of the command buffer's response half (the kernel
// reads it from there; a command without a response leaves it alone).
func (id *ID) setOption(name uint32, val []byte) error {
	c := id.c
	s, err := c.slot("set option")
	if err != nil {
		return err
	}
	defer c.put(s)
	v := s.resp[len(s.resp)-len(val):]
	copy(v, val)
	return c.execIn(s, "set option", cmdSetOption, &setOptionReq{
		OptVal: unix.Addr(v), ID: id.id, Level: optionLevelID, OptName: name, OptLen: uint32(len(val)),
	}, -1, nil)
}

// InitQPAttr asks the kernel for the attributes that move the id's QP to
// state, for the QP's Modify.
func (id *ID) InitQPAttr(state verbs.QPState) (verbs.QPAttr, verbs.QPAttrMask, error) {
	var r ibabi.QPAttr
	if err := id.c.exec("init qp attributes", cmdInitQPAttr, &initQPAttrReq{ID: id.id, QPState: uint32(state)}, 0, &r); err != nil {
		return verbs.QPAttr{}, 0, err
	}
	a, m := r.Verbs()
	return a, m, nil
}

// Event is an event of the connection manager.
type Event struct {
	Type uint32 // EventAddrResolved, ...
	// Status is 0, a negative errno (-ETIMEDOUT, -ENODEV, ...) or, for
	// REJECTED, the IB CM's reject reason.
	Status int32
	// UID is the UID of the id the event is for (for CONNECT_REQUEST,
	// the listening id's).
	UID uint64
	// ID is the kernel's number of the id; for CONNECT_REQUEST, the new
	// id of the request (see NewID).
	ID uint32
	// Conn is what the peer's connect or accept carried (RC); UD the
	// peer's QP, Q_Key and address (UD's ESTABLISHED).
	Conn ConnParam
	UD   UDParam
}

// UDParam is what a datagram peer answered (SIDR).
type UDParam struct {
	QPNum       uint32
	QKey        uint32
	AH          verbs.AHAttr
	PrivateData []byte
}

// Errors of events.
var (
	// ErrRejected: the peer (or its connection manager: no listener)
	// rejected the connection. It is verbs.ErrRejected.
	ErrRejected = verbs.ErrRejected
	// ErrEvent: an event other than the one expected.
	ErrEvent = errors.New("unexpected event")
)

// Reject reasons of the IB CM that the kernel's REJECTED events carry.
const (
	RejectInvalidServiceID = 8  // no listener on the port (or of another port space)
	RejectConsumer         = 28 // the peer's program rejected the request
)

// rejectReason describes an IB CM reject reason.
func rejectReason(r int32) string {
	switch r {
	case RejectInvalidServiceID:
		return "no listener on the port"
	case RejectConsumer:
		return "rejected by the peer"
	}
	return ""
}

// Err is the event's status as an error (nil for 0): a negative errno
// wraps that errno, a REJECTED event's reason (or an UNREACHABLE event's
// positive SIDR status) wraps ErrRejected. Time-outs (-ETIMEDOUT, and
// UNREACHABLE with a negative errno) also wrap verbs.ErrCMTimeout; an address with
// no route or no RDMA device also wraps verbs.ErrUnreachable.
func (e *Event) Err() error {
	switch {
	case e.Status == 0 && e.Type != EventRejected && e.Type != EventUnreachable:
		return nil
	case e.Type == EventRejected:
		if d := rejectReason(e.Status); d != "" {
			return fmt.Errorf("rdmacm: %w (IB CM reason %d: %s)", ErrRejected, e.Status, d)
		}
		return fmt.Errorf("rdmacm: %w (IB CM reason %d)", ErrRejected, e.Status)
	case e.Status < 0:
		errno := unix.Errno(-e.Status)
		var class error
		switch {
		case errno == unix.ETIMEDOUT || e.Type == EventUnreachable:
			class = verbs.ErrCMTimeout
		case errno == unix.ENETUNREACH || errno == unix.EHOSTUNREACH || errno == unix.ENODEV || errno == unix.EADDRNOTAVAIL:
			class = verbs.ErrUnreachable
		}
		if class != nil {
			return fmt.Errorf("rdmacm: %s: %w", EventName(e.Type), classified{errno, class})
		}
		return fmt.Errorf("rdmacm: %s: %w", EventName(e.Type), errno)
	case e.Type == EventUnreachable:
		// A datagram service's refusal: the SIDR reply's status (1: no
		// listener on the port, 2: rejected by the peer).
		return fmt.Errorf("rdmacm: %s: %w (SIDR status %d)", EventName(e.Type), ErrRejected, e.Status)
	}
	return fmt.Errorf("rdmacm: %s: status %d", EventName(e.Type), e.Status)
}

// classified is an errno that also matches a class of verbs' errors; its
// text is the errno's.
type classified struct {
	errno unix.Errno
	class error
}

func (c classified) Error() string   { return c.errno.Error() }
func (c classified) Unwrap() []error { return []error{c.errno, c.class} }

// Expect waits for the channel's next event (as GetEvent) and returns it
// when it is of type want with status 0; otherwise an error: the event's
// own (a rejection, an errno), or one wrapping ErrEvent.
func (c *Channel) Expect(ctx context.Context, ps uint16, want uint32) (Event, error) {
	e, err := c.GetEvent(ctx, ps)
	if err != nil {
		return e, fmt.Errorf("%w (waiting for %s)", err, EventName(want))
	}
	if err := e.Err(); err != nil {
		return e, fmt.Errorf("%w (waiting for %s)", err, EventName(want))
	}
	if e.Type != want {
		return e, fmt.Errorf("rdmacm: %w: %s, waiting for %s", ErrEvent, EventName(e.Type), EventName(want))
	}
	return e, nil
}

// NewID is the id a CONNECT_REQUEST event created, in the port space of
// the listener; Accept or Reject it.
func (c *Channel) NewID(e *Event, ps uint16) *ID {
	c.mu.Lock()
	c.uid++
	uid := c.uid
	c.mu.Unlock()
	return &ID{c: c, id: e.ID, UID: uid, PS: ps}
}

// GetEvent waits for the channel's next event, until ctx ends. The port
// space ps tells how to read the event's parameters (RC or UD).
func (c *Channel) GetEvent(ctx context.Context, ps uint16) (Event, error) {
	c.evMu.Lock()
	defer c.evMu.Unlock()
	c.mu.Lock()
	closed := c.closed
	c.mu.Unlock()
	if closed {
		return Event{}, fmt.Errorf("rdmacm: get event: %w", ErrClosed)
	}
	resp := c.evResp[:eventRespSize]
	n, err := encodeCmd(c.evReq, cmdGetEvent, &getEventReq{}, 0, resp)
	if err != nil {
		return Event{}, fmt.Errorf("rdmacm: get event: %w", err)
	}
	w, err := c.k.getEvent(ctx, c.evReq[:n])
	switch {
	case err != nil && ctx.Err() != nil:
		return Event{}, fmt.Errorf("rdmacm: get event: %w", context.Cause(ctx))
	case errors.Is(err, os.ErrDeadlineExceeded):
		// The descriptor's deadline, ctx's, fired first.
		return Event{}, fmt.Errorf("rdmacm: get event: %w", context.DeadlineExceeded)
	case errors.Is(err, os.ErrClosed):
		return Event{}, fmt.Errorf("rdmacm: get event: %w", ErrClosed)
	case err != nil:
		return Event{}, fmt.Errorf("rdmacm: get event: %w", err)
	case w != n:
		return Event{}, fmt.Errorf("rdmacm: get event: short write (%d of %d bytes)", w, n)
	}
	return decodeEvent(resp, ps)
}

// decodeEvent reads an rdma_ucm_event_resp; the parameters are those of a
// connection (PSTCP) or a datagram service (PSUDP).
func decodeEvent(b []byte, ps uint16) (Event, error) {
	var r eventResp
	if _, err := wire.Decode(b, &r); err != nil {
		return Event{}, fmt.Errorf("rdmacm: event: %w", err)
	}
	e := Event{Type: r.Event, Status: int32(r.Status), UID: r.UID, ID: r.ID}
	if ps == PSUDP {
		var u udParam
		if _, err := wire.Decode(r.Param[:], &u); err != nil {
			return Event{}, fmt.Errorf("rdmacm: event: %w", err)
		}
		e.UD = UDParam{QPNum: u.QPNum, QKey: u.QKey, AH: u.AH.Verbs(),
			PrivateData: append([]byte(nil), u.PrivateData[:min(int(u.PrivateDataLen), maxPrivateData)]...)}
		return e, nil
	}
	var p connParam
	if _, err := wire.Decode(r.Param[:connParamSize], &p); err != nil {
		return Event{}, fmt.Errorf("rdmacm: event: %w", err)
	}
	e.Conn = ConnParam{
		QPNum: p.QPNum, QKey: p.QKey, SRQ: p.SRQ != 0,
		ResponderResources: p.ResponderResources, InitiatorDepth: p.InitiatorDepth,
		FlowControl: p.FlowControl, RetryCount: p.RetryCount, RNRRetryCount: p.RNRRetryCount,
		PrivateData: append([]byte(nil), p.PrivateData[:min(int(p.PrivateDataLen), maxPrivateData)]...),
	}
	return e, nil
}
