package verbs

import (
	"context"
	"errors"
	"net/netip"
	"strconv"
	"time"
)

// PortSpace is the port space of a connection manager id, numbered as the
// kernel's enum rdma_ucm_port_space: reliable connections (TCP) or datagram
// services (UDP).
type PortSpace uint16

// Port spaces.
const (
	PortSpaceTCP PortSpace = 0x0106 // RDMA_PS_TCP: RC (and UC) connections
	PortSpaceUDP PortSpace = 0x0111 // RDMA_PS_UDP: UD service ID resolution
)

func (ps PortSpace) String() string {
	switch ps {
	case PortSpaceTCP:
		return "TCP"
	case PortSpaceUDP:
		return "UDP"
	}
	return "PortSpace(" + strconv.Itoa(int(ps)) + ")"
}

// CM is a connection manager (librdmacm's event channel and rdma_cm_ids):
// it resolves IP addresses to a device and a port, and connects queue pairs
// the program owns by exchanging their numbers with the peer's connection
// manager. The kernel's (package verbs/rdmacm) serves kernel devices; the
// emulator has its own, with the same events and errors.
//
// A CM and its ids may be used from several goroutines, one call per id at
// a time. Close every id before the CM.
type CM interface {
	// CreateID returns a new id in port space ps.
	CreateID(ps PortSpace) (CMID, error)
	Close() error
}

// CMID is one connection manager id: an active side (ResolveAddr,
// ResolveRoute, Connect, Establish), a listener (Bind, Listen, GetRequest)
// or the passive side of a connection (an id GetRequest returned: Accept or
// Reject). Waiting calls end when ctx ends.
type CMID interface {
	// Bind binds the id to a local address (port 0: any free port).
	Bind(addr netip.AddrPort) error
	// ResolveAddr resolves dst to a local device and port (from src, if
	// valid), waiting at most timeout for the answer.
	ResolveAddr(ctx context.Context, src netip.Addr, dst netip.AddrPort, timeout time.Duration) error
	// ResolveRoute resolves the route to the resolved address.
	ResolveRoute(ctx context.Context, timeout time.Duration) error
	// Bound returns the device, port and addresses of the id.
	Bound() (CMAddr, error)
	// SetTOS sets the type of service of the id's traffic.
	SetTOS(tos uint8) error
	// SetAckTimeout sets the local ACK timeout (4.096 µs × 2^t) that the
	// id's RTS attributes carry.
	SetAckTimeout(t uint8) error
	// InitQPAttr returns the attributes that move the id's QP to state
	// (INIT, RTR or RTS), for the QP's Modify.
	InitQPAttr(state QPState) (QPAttr, QPAttrMask, error)

	// Connect sends a connection request carrying p (the QP number and
	// resources of the caller's QP) and waits for the answer: for a
	// TCP-space id the peer's accept (the caller then moves its QP to RTR
	// and RTS and calls Establish), for a UDP-space id the peer's QP
	// number, Q_Key and address (in the returned AH). A rejection is an
	// error wrapping ErrRejected; no answer, one wrapping ErrCMTimeout.
	Connect(ctx context.Context, p ConnParam) (ConnParam, error)
	// Establish tells the peer that the caller's QP is ready (the RTU),
	// after a TCP-space Connect.
	Establish() error

	// Listen makes a bound id a listener with a backlog of pending
	// requests.
	Listen(backlog int) error
	// GetRequest waits for a connection request on a listener and returns
	// the request's new id and what the peer sent.
	GetRequest(ctx context.Context) (CMID, ConnParam, error)
	// Accept answers a request with p (the caller's QP, moved to RTS with
	// InitQPAttr's attributes). For a TCP-space id it waits until the
	// peer's Establish arrives.
	Accept(ctx context.Context, p ConnParam) error
	// Reject refuses a request.
	Reject(privateData []byte) error

	// Disconnect ends a connection; both sides then see it disconnected.
	Disconnect() error
	// WaitDisconnected waits until the connection has ended (either side's
	// Disconnect).
	WaitDisconnected(ctx context.Context) error
	// Close destroys the id.
	Close() error
}

// CMAddr is where a connection manager id is bound.
type CMAddr struct {
	NodeGUID uint64 // the device's node GUID (DeviceAttr.NodeGUID); 0 if none yet
	Port     int    // the device's port
	Src, Dst netip.AddrPort
}

// ConnParam is what a connection request or its answer carries
// (struct rdma_conn_param).
type ConnParam struct {
	QPNum              uint32
	QKey               uint32 // UD answers
	SRQ                bool
	ResponderResources uint8
	InitiatorDepth     uint8
	FlowControl        uint8
	RetryCount         uint8
	RNRRetryCount      uint8
	PrivateData        []byte
	// AH is, in a UD answer, the address of the peer's QP.
	AH AHAttr
}

// Errors of connection managers, matched with errors.Is.
var (
	// ErrRejected: the peer, or its connection manager (no listener on
	// the port), refused the connection.
	ErrRejected = errors.New("connection rejected")
	// ErrCMTimeout: an address, a route or a peer did not answer in time.
	ErrCMTimeout = errors.New("no answer")
	// ErrUnreachable: no device reaches the address (no route, no RDMA
	// device on the interface).
	ErrUnreachable = errors.New("address unreachable")
)

// CMModify moves qp to each of states in turn with the attributes id gives
// for it (librdmacm's rdma_init_qp_attr, then ibv_modify_qp).
func CMModify(id CMID, qp QP, states ...QPState) error {
	for _, st := range states {
		a, m, err := id.InitQPAttr(st)
		if err != nil {
			return err
		}
		if err := qp.Modify(&a, m); err != nil {
			return err
		}
	}
	return nil
}
