//go:build linux

package rdmacm

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"

	"github.com/pvperf/pvperf/internal/ibabi"
)

// The rdma_cm command ABI (include/uapi/rdma/rdma_user_cm.h, ABI version
// 4, as in Linux 5.10 and later: with ECE in connect, accept and events and
// the device index in the address query): every struct a command writes or
// reads, declared field by field with explicit padding so that its
// encoding with encoding/binary (little-endian, no implicit padding) is
// byte for byte the kernel's layout. abi_test.go pins each struct's size
// and field offsets; docs/rdmacm.md gives the sources.

// ABIVersion is the only version of the rdma_cm ABI this package speaks
// (/sys/class/misc/rdma_cm/abi_version).
const ABIVersion = 4

// Command numbers of the write() interface.
const (
	cmdCreateID     = 0
	cmdDestroyID    = 1
	cmdResolveRoute = 4
	cmdConnect      = 6
	cmdListen       = 7
	cmdAccept       = 8
	cmdReject       = 9
	cmdDisconnect   = 10
	cmdInitQPAttr   = 11
	cmdGetEvent     = 12
	cmdSetOption    = 14
	cmdQuery        = 19
	cmdBind         = 20
	cmdResolveAddr  = 21
)

// cmdHdrSize is the size of rdma_ucm_cmd_hdr: cmd u32, in u16 (the size of
// the command struct that follows), out u16 (the size of its response).
const cmdHdrSize = 8

// Port spaces (enum rdma_ucm_port_space).
const (
	PSTCP = 0x0106 // connected QPs (RC)
	PSUDP = 0x0111 // datagram QPs (UD): SIDR instead of a connection
)

// QP types as create_id takes them (enum ib_uverbs_qp_type).
const (
	qpTypeRC = 2
	qpTypeUD = 4
)

// Options of set_option: level RDMA_OPTION_ID and its option names.
const (
	optionLevelID    = 0
	optionTOS        = 0 // u8 type of service
	optionReuseAddr  = 1 // int
	optionAFOnly     = 2 // int
	optionAckTimeout = 3 // u8, the QP's local ACK timeout exponent
)

// Query options (RDMA_USER_CM_QUERY_*).
const (
	queryAddr = 0
	queryPath = 1
	queryGID  = 2
)

// sockaddrSize is the size of struct sockaddr_storage.
const sockaddrSize = 128

// Address families of a sockaddr.
const (
	afInet  = 2
	afInet6 = 10
)

// maxPrivateData is RDMA_MAX_PRIVATE_DATA.
const maxPrivateData = 256

type cmdHdr struct {
	Cmd uint32
	In  uint16
	Out uint16
}

// rdma_ucm_create_id
type createIDReq struct {
	UID      uint64
	Response uint64
	PS       uint16
	QPType   uint8
	Reserved [5]uint8
}

type createIDResp struct {
	ID uint32
}

// rdma_ucm_destroy_id
type destroyIDReq struct {
	Response uint64
	ID       uint32
	Reserved uint32
}

type destroyIDResp struct {
	EventsReported uint32
}

// rdma_ucm_bind
type bindReq struct {
	ID       uint32
	AddrSize uint16
	Reserved uint16
	Addr     [sockaddrSize]byte
}

// rdma_ucm_resolve_addr
type resolveAddrReq struct {
	ID        uint32
	TimeoutMS uint32
	SrcSize   uint16
	DstSize   uint16
	Reserved  uint32
	Src       [sockaddrSize]byte
	Dst       [sockaddrSize]byte
}

// rdma_ucm_resolve_route
type resolveRouteReq struct {
	ID        uint32
	TimeoutMS uint32
}

// rdma_ucm_query
type queryReq struct {
	Response uint64
	ID       uint32
	Option   uint32
}

// rdma_ucm_query_addr_resp
type queryAddrResp struct {
	NodeGUID   [8]byte // __be64
	PortNum    uint8
	Reserved   uint8
	PKey       uint16
	SrcSize    uint16
	DstSize    uint16
	Src        [sockaddrSize]byte
	Dst        [sockaddrSize]byte
	IBDevIndex uint32
	Reserved1  uint32
}

// rdma_ucm_conn_param
type connParam struct {
	QPNum              uint32
	QKey               uint32
	PrivateData        [maxPrivateData]byte
	PrivateDataLen     uint8
	SRQ                uint8
	ResponderResources uint8
	InitiatorDepth     uint8
	FlowControl        uint8
	RetryCount         uint8
	RNRRetryCount      uint8
	Valid              uint8
}

// rdma_ucm_ud_param
type udParam struct {
	QPNum          uint32
	QKey           uint32
	AH             ibabi.AHAttr
	PrivateData    [maxPrivateData]byte
	PrivateDataLen uint8
	Reserved       [7]uint8
}

// rdma_ucm_ece
type ece struct {
	VendorID uint32
	AttrMod  uint32
}

// rdma_ucm_connect
type connectReq struct {
	Param    connParam
	ID       uint32
	Reserved uint32
	ECE      ece
}

// rdma_ucm_listen
type listenReq struct {
	ID      uint32
	Backlog uint32
}

// rdma_ucm_accept
type acceptReq struct {
	UID      uint64
	Param    connParam
	ID       uint32
	Reserved uint32
	ECE      ece
}

// rdma_ucm_reject
type rejectReq struct {
	ID             uint32
	PrivateDataLen uint8
	Reason         uint8
	Reserved       [2]uint8
	PrivateData    [maxPrivateData]byte
}

// rdma_ucm_disconnect
type disconnectReq struct {
	ID uint32
}

// rdma_ucm_init_qp_attr
type initQPAttrReq struct {
	Response uint64
	ID       uint32
	QPState  uint32
}

// rdma_ucm_get_event
type getEventReq struct {
	Response uint64
}

// rdma_ucm_event_resp. Param is the union of conn_param (272 bytes) and
// ud_param (304): decode it as one or the other by the id's port space.
type eventResp struct {
	UID      uint64
	ID       uint32
	Event    uint32
	Status   uint32 // a negative errno, or a reject reason, as an int32
	Param    [udParamSize]byte
	Reserved uint32
	ECE      ece
}

const (
	connParamSize = 272
	udParamSize   = 304
	eventRespSize = 336
)

// rdma_ucm_set_option
type setOptionReq struct {
	OptVal  uint64 // the address of the value
	ID      uint32
	Level   uint32
	OptName uint32
	OptLen  uint32
}

// Events (enum rdma_cm_event_type).
const (
	EventAddrResolved   = 0
	EventAddrError      = 1
	EventRouteResolved  = 2
	EventRouteError     = 3
	EventConnectRequest = 4
	EventConnectResp    = 5
	EventConnectError   = 6
	EventUnreachable    = 7
	EventRejected       = 8
	EventEstablished    = 9
	EventDisconnected   = 10
	EventDeviceRemoval  = 11
	EventMulticastJoin  = 12
	EventMulticastError = 13
	EventAddrChange     = 14
	EventTimewaitExit   = 15
)

var eventNames = [...]string{
	"ADDR_RESOLVED", "ADDR_ERROR", "ROUTE_RESOLVED", "ROUTE_ERROR",
	"CONNECT_REQUEST", "CONNECT_RESPONSE", "CONNECT_ERROR", "UNREACHABLE",
	"REJECTED", "ESTABLISHED", "DISCONNECTED", "DEVICE_REMOVAL",
	"MULTICAST_JOIN", "MULTICAST_ERROR", "ADDR_CHANGE", "TIMEWAIT_EXIT",
}

// EventName is librdmacm's rdma_event_str without its RDMA_CM_EVENT_
// prefix: "ESTABLISHED", "REJECTED", ...
func EventName(e uint32) string {
	if int(e) < len(eventNames) {
		return eventNames[e]
	}
	return fmt.Sprintf("EVENT_%d", e)
}

// errSockaddr is a sockaddr that is not an IPv4 or IPv6 one of its size.
var errSockaddr = errors.New("rdmacm: not an IPv4 or IPv6 socket address")

// encodeSockaddr lays ap out as a struct sockaddr_in (16 bytes) or, for an
// IPv6 address, a struct sockaddr_in6 (28 bytes) at the start of a
// sockaddr_storage, and returns the size used. An IPv4-mapped IPv6
// address is encoded as IPv4, as the kernel's address resolution expects;
// an IPv6 zone (an interface name or index) becomes the scope id.
func encodeSockaddr(ap netip.AddrPort) ([sockaddrSize]byte, uint16, error) {
	var b [sockaddrSize]byte
	a := ap.Addr().Unmap()
	binary.BigEndian.PutUint16(b[2:], ap.Port())
	if a.Is4() {
		binary.LittleEndian.PutUint16(b[0:], afInet)
		ip := a.As4()
		copy(b[4:8], ip[:])
		return b, 16, nil
	}
	binary.LittleEndian.PutUint16(b[0:], afInet6)
	ip := a.As16()
	copy(b[8:24], ip[:])
	// sin6_flowinfo (4:8) stays 0; sin6_scope_id follows the address.
	if z := a.Zone(); z != "" {
		idx, err := zoneIndex(z)
		if err != nil {
			return b, 0, err
		}
		binary.LittleEndian.PutUint32(b[24:], idx)
	}
	return b, 28, nil
}

// zoneIndex is the interface index of an IPv6 zone: a number, or the name
// of an interface of this host.
func zoneIndex(z string) (uint32, error) {
	if n, err := strconv.ParseUint(z, 10, 32); err == nil {
		return uint32(n), nil
	}
	ifi, err := net.InterfaceByName(z)
	if err != nil {
		return 0, fmt.Errorf("rdmacm: zone %q: %w", z, err)
	}
	return uint32(ifi.Index), nil
}

// decodeSockaddr is the inverse of encodeSockaddr, for the first size
// bytes of b (the kernel's answer to a query): the address and port, with
// an IPv6 scope as its numeric zone.
func decodeSockaddr(b []byte, size int) (netip.AddrPort, error) {
	if size > len(b) || size < 2 {
		return netip.AddrPort{}, fmt.Errorf("%w: %d bytes", errSockaddr, size)
	}
	switch fam := binary.LittleEndian.Uint16(b); {
	case fam == afInet && size >= 16:
		return netip.AddrPortFrom(netip.AddrFrom4([4]byte(b[4:8])), binary.BigEndian.Uint16(b[2:])), nil
	case fam == afInet6 && size >= 28:
		a := netip.AddrFrom16([16]byte(b[8:24]))
		if scope := binary.LittleEndian.Uint32(b[24:]); scope != 0 {
			a = a.WithZone(fmt.Sprint(scope))
		}
		return netip.AddrPortFrom(a, binary.BigEndian.Uint16(b[2:])), nil
	default:
		return netip.AddrPort{}, fmt.Errorf("%w: family %d, %d bytes", errSockaddr, fam, size)
	}
}
