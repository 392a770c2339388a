package verbs

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/pvperf/pvperf/internal/unix"
)

const errnoNOMEM = unix.ENOMEM

// QPType is the transport service of a queue pair.
type QPType uint8

// QP types, numbered as in ib_uverbs (enum ib_qp_type).
const (
	RC QPType = 2 // reliable connected
	UC QPType = 3 // unreliable connected
	UD QPType = 4 // unreliable datagram
)

func (t QPType) String() string {
	switch t {
	case RC:
		return "RC"
	case UC:
		return "UC"
	case UD:
		return "UD"
	}
	return fmt.Sprintf("QPType(%d)", uint8(t))
}

// QPState is the state of a queue pair.
type QPState uint8

// QP states, numbered as in ib_uverbs.
const (
	StateReset QPState = 0
	StateInit  QPState = 1
	StateRTR   QPState = 2 // ready to receive
	StateRTS   QPState = 3 // ready to send
	StateSQD   QPState = 4 // send queue drained
	StateSQE   QPState = 5 // send queue error
	StateErr   QPState = 6
)

var qpStateNames = [...]string{"RESET", "INIT", "RTR", "RTS", "SQD", "SQE", "ERR"}

func (s QPState) String() string {
	if int(s) < len(qpStateNames) {
		return qpStateNames[s]
	}
	return fmt.Sprintf("QPState(%d)", uint8(s))
}

// Access is a set of memory-region and QP access rights.
type Access uint32

// Access flags, with the values of ib_uverbs.
const (
	AccessLocalWrite   Access = 1 << 0
	AccessRemoteWrite  Access = 1 << 1
	AccessRemoteRead   Access = 1 << 2
	AccessRemoteAtomic Access = 1 << 3
	AccessMWBind       Access = 1 << 4
	AccessZeroBased    Access = 1 << 5
	AccessOnDemand     Access = 1 << 6
	// AccessRelaxedOrdering is the first of the optional flags, which a
	// device that does not know them ignores (IB_ACCESS_RELAXED_ORDERING).
	AccessRelaxedOrdering Access = 1 << 20
)

func (a Access) String() string {
	if a == 0 {
		return "none"
	}
	names := []string{"LOCAL_WRITE", "REMOTE_WRITE", "REMOTE_READ", "REMOTE_ATOMIC", "MW_BIND", "ZERO_BASED", "ON_DEMAND"}
	var parts []string
	for i, n := range names {
		if a&(1<<i) != 0 {
			parts = append(parts, n)
		}
	}
	if a&AccessRelaxedOrdering != 0 {
		parts = append(parts, "RELAXED_ORDERING")
	}
	if rest := a &^ (1<<len(names) - 1) &^ AccessRelaxedOrdering; rest != 0 {
		parts = append(parts, fmt.Sprintf("%#x", uint32(rest)))
	}
	return strings.Join(parts, "|")
}

// MTU is an IB path MTU enumeration value (1 = 256 bytes ... 5 = 4096 bytes).
type MTU uint8

// Path MTUs.
const (
	MTU256  MTU = 1
	MTU512  MTU = 2
	MTU1024 MTU = 3
	MTU2048 MTU = 4
	MTU4096 MTU = 5
)

// Bytes returns the MTU in bytes, or 0 for an invalid value.
func (m MTU) Bytes() int {
	if m < MTU256 || m > MTU4096 {
		return 0
	}
	return 128 << m
}

func (m MTU) String() string {
	if b := m.Bytes(); b != 0 {
		return fmt.Sprint(b)
	}
	return fmt.Sprintf("MTU(%d)", uint8(m))
}

// MTUFromBytes returns the MTU enumeration for a size in bytes, or 0 when
// n is not one of 256, 512, 1024, 2048 and 4096.
func MTUFromBytes(n int) MTU {
	for m := MTU256; m <= MTU4096; m++ {
		if m.Bytes() == n {
			return m
		}
	}
	return 0
}

// WROpcode is the operation of a send work request.
type WROpcode uint8

// Send opcodes, numbered as in ib_uverbs (enum ib_uverbs_wr_opcode).
const (
	OpRDMAWrite      WROpcode = 0
	OpRDMAWriteImm   WROpcode = 1
	OpSend           WROpcode = 2
	OpSendImm        WROpcode = 3
	OpRDMARead       WROpcode = 4
	OpAtomicCmpSwap  WROpcode = 5
	OpAtomicFetchAdd WROpcode = 6
)

var wrOpcodeNames = [...]string{"RDMA_WRITE", "RDMA_WRITE_WITH_IMM", "SEND", "SEND_WITH_IMM", "RDMA_READ", "ATOMIC_CMP_AND_SWP", "ATOMIC_FETCH_AND_ADD"}

func (o WROpcode) String() string {
	if int(o) < len(wrOpcodeNames) {
		return wrOpcodeNames[o]
	}
	return fmt.Sprintf("WROpcode(%d)", uint8(o))
}

// SendFlags modify a send work request.
type SendFlags uint32

// Send flags, with the values of ib_uverbs.
const (
	SendFence     SendFlags = 1 << 0 // wait for earlier RDMA reads and atomics
	SendSignaled  SendFlags = 1 << 1 // generate a completion
	SendSolicited SendFlags = 1 << 2 // solicited event at the receiver
	SendInline    SendFlags = 1 << 3 // copy the payload into the work request
)

// WCOpcode is the operation a work completion reports.
type WCOpcode uint8

// Completion opcodes, numbered as in ib_uverbs (enum ib_wc_opcode).
const (
	WCSend            WCOpcode = 0
	WCRDMAWrite       WCOpcode = 1
	WCRDMARead        WCOpcode = 2
	WCCompSwap        WCOpcode = 3
	WCFetchAdd        WCOpcode = 4
	WCRecv            WCOpcode = 128
	WCRecvRDMAWithImm WCOpcode = 129
)

func (o WCOpcode) String() string {
	switch o {
	case WCSend:
		return "SEND"
	case WCRDMAWrite:
		return "RDMA_WRITE"
	case WCRDMARead:
		return "RDMA_READ"
	case WCCompSwap:
		return "COMP_SWAP"
	case WCFetchAdd:
		return "FETCH_ADD"
	case WCRecv:
		return "RECV"
	case WCRecvRDMAWithImm:
		return "RECV_RDMA_WITH_IMM"
	}
	return fmt.Sprintf("WCOpcode(%d)", uint8(o))
}

// WCStatus is the outcome of a work request.
type WCStatus uint8

// Completion statuses, numbered as in ib_uverbs (enum ib_wc_status).
const (
	WCSuccess        WCStatus = 0
	WCLocLenErr      WCStatus = 1
	WCLocQPOpErr     WCStatus = 2
	WCLocEECOpErr    WCStatus = 3
	WCLocProtErr     WCStatus = 4
	WCWRFlushErr     WCStatus = 5
	WCMWBindErr      WCStatus = 6
	WCBadRespErr     WCStatus = 7
	WCLocAccessErr   WCStatus = 8
	WCRemInvReqErr   WCStatus = 9
	WCRemAccessErr   WCStatus = 10
	WCRemOpErr       WCStatus = 11
	WCRetryExcErr    WCStatus = 12
	WCRNRRetryExcErr WCStatus = 13
	WCLocRDDViolErr  WCStatus = 14
	WCRemInvRdReqErr WCStatus = 15
	WCRemAbortErr    WCStatus = 16
	WCInvEECNErr     WCStatus = 17
	WCInvEECStateErr WCStatus = 18
	WCFatalErr       WCStatus = 19
	WCRespTimeoutErr WCStatus = 20
	WCGeneralErr     WCStatus = 21
)

// The strings of ibv_wc_status_str, so tools print what perftest prints.
var wcStatusNames = [...]string{
	"success",
	"local length error",
	"local QP operation error",
	"local EE context operation error",
	"local protection error",
	"Work Request Flushed Error",
	"memory management operation error",
	"bad response error",
	"local access error",
	"remote invalid request error",
	"remote access error",
	"remote operation error",
	"transport retry counter exceeded",
	"RNR retry counter exceeded",
	"local RDD violation error",
	"remote invalid RD request",
	"aborted error",
	"invalid EE context number",
	"invalid EE context state",
	"fatal error",
	"response timeout error",
	"general error",
}

func (s WCStatus) String() string {
	if int(s) < len(wcStatusNames) {
		return wcStatusNames[s]
	}
	return fmt.Sprintf("unknown (%d)", uint8(s))
}

// Name returns the ibv_wc_status enumerator name without its prefix, e.g.
// "REM_ACCESS_ERR".
func (s WCStatus) Name() string {
	names := [...]string{"SUCCESS", "LOC_LEN_ERR", "LOC_QP_OP_ERR", "LOC_EEC_OP_ERR", "LOC_PROT_ERR", "WR_FLUSH_ERR",
		"MW_BIND_ERR", "BAD_RESP_ERR", "LOC_ACCESS_ERR", "REM_INV_REQ_ERR", "REM_ACCESS_ERR", "REM_OP_ERR",
		"RETRY_EXC_ERR", "RNR_RETRY_EXC_ERR", "LOC_RDD_VIOL_ERR", "REM_INV_RD_REQ_ERR", "REM_ABORT_ERR",
		"INV_EECN_ERR", "INV_EEC_STATE_ERR", "FATAL_ERR", "RESP_TIMEOUT_ERR", "GENERAL_ERR"}
	if int(s) < len(names) {
		return names[s]
	}
	return fmt.Sprintf("STATUS_%d", uint8(s))
}

// WCFlags describe a work completion.
type WCFlags uint32

// Completion flags, with the kernel's ib_wc_flags values (the ones both
// kernel drivers write into completions).
const (
	WCWithGRH WCFlags = 1 << 0 // the first 40 bytes of the receive buffer hold a GRH
	WCWithImm WCFlags = 1 << 1 // Imm is valid
)

// SGE is a scatter/gather element: a span of registered memory.
type SGE struct {
	Addr   uint64 // virtual address inside the memory region
	Length uint32
	LKey   uint32 // local key of the memory region
}

// SendWR is a send work request. Posting copies it into the send queue: the
// caller keeps ownership of the struct and of SGL, and may reuse both as soon
// as PostSend returns.
type SendWR struct {
	ID     uint64 // returned in the work completion
	Opcode WROpcode
	Flags  SendFlags
	SGL    []SGE  // data to send, or buffer that receives READ/atomic results
	Imm    uint32 // immediate data (host order; carried in network order)

	// RDMA and atomic operations.
	RemoteAddr uint64
	RKey       uint32
	CompareAdd uint64 // compare value (CMP_AND_SWP) or addend (FETCH_AND_ADD)
	Swap       uint64 // swap value (CMP_AND_SWP)

	// UD.
	AH         AH
	RemoteQPN  uint32
	RemoteQKey uint32
}

// RecvWR is a receive work request; like SendWR it is copied when posted.
type RecvWR struct {
	ID  uint64
	SGL []SGE
}

// WC is a work completion.
type WC struct {
	ID           uint64 // the work request's ID
	Status       WCStatus
	Opcode       WCOpcode
	VendorErr    uint32
	ByteLen      uint32 // bytes received (receives), or read / fetched (RDMA READ, atomics)
	Imm          uint32 // immediate data in host order, valid with WCWithImm
	QPNum        uint32 // number of the local QP
	SrcQP        uint32 // remote QP number (UD receives)
	Flags        WCFlags
	PKeyIndex    uint16
	SLID         uint16
	SL           uint8
	DLIDPathBits uint8
}

// QPCap are the work-queue sizes of a queue pair.
type QPCap struct {
	MaxSendWR     int
	MaxRecvWR     int
	MaxSendSGE    int
	MaxRecvSGE    int
	MaxInlineData int
}

// QPInit describes a queue pair to create.
type QPInit struct {
	Type   QPType
	SendCQ CQ
	RecvCQ CQ
	SRQ    SRQ // when set, receives come from the SRQ and Cap.MaxRecvWR must be 0
	Cap    QPCap
	SigAll bool // every send work request generates a completion
}

// GRH holds the global routing fields of an address (mandatory on RoCE).
type GRH struct {
	DGID         GID
	FlowLabel    uint32
	SGIDIndex    uint8
	HopLimit     uint8
	TrafficClass uint8
}

// AHAttr is an address vector: where packets go.
type AHAttr struct {
	GRH         GRH
	DLID        uint16
	SL          uint8
	SrcPathBits uint8
	StaticRate  uint8
	IsGlobal    bool
	Port        uint8
}

// QPAttrMask selects the QPAttr fields that Modify applies or Query fills.
type QPAttrMask uint32

// QP attribute mask bits, with the values of ib_uverbs.
const (
	AttrState            QPAttrMask = 1 << 0
	AttrCurState         QPAttrMask = 1 << 1
	AttrEnSQDAsyncNotify QPAttrMask = 1 << 2
	AttrAccessFlags      QPAttrMask = 1 << 3
	AttrPKeyIndex        QPAttrMask = 1 << 4
	AttrPort             QPAttrMask = 1 << 5
	AttrQKey             QPAttrMask = 1 << 6
	AttrAV               QPAttrMask = 1 << 7
	AttrPathMTU          QPAttrMask = 1 << 8
	AttrTimeout          QPAttrMask = 1 << 9
	AttrRetryCnt         QPAttrMask = 1 << 10
	AttrRNRRetry         QPAttrMask = 1 << 11
	AttrRQPSN            QPAttrMask = 1 << 12
	AttrMaxQPRdAtomic    QPAttrMask = 1 << 13
	AttrAltPath          QPAttrMask = 1 << 14
	AttrMinRNRTimer      QPAttrMask = 1 << 15
	AttrSQPSN            QPAttrMask = 1 << 16
	AttrMaxDestRdAtomic  QPAttrMask = 1 << 17
	AttrPathMigState     QPAttrMask = 1 << 18
	AttrCap              QPAttrMask = 1 << 19
	AttrDestQPN          QPAttrMask = 1 << 20
)

// QPAttr holds queue-pair attributes for Modify and Query.
type QPAttr struct {
	State           QPState
	CurState        QPState
	PathMTU         MTU
	QKey            uint32
	RQPSN           uint32
	SQPSN           uint32
	DestQPN         uint32
	Access          Access
	Cap             QPCap
	AH              AHAttr
	PKeyIndex       uint16
	SQDrainNotify   bool
	SQDraining      bool
	MaxRdAtomic     uint8
	MaxDestRdAtomic uint8
	MinRNRTimer     uint8 // RNR NAK timer code (0..31), 12 = 0.64 ms
	Port            uint8
	Timeout         uint8 // local ACK timeout: 4.096 us * 2^Timeout, 0 = infinite
	RetryCnt        uint8 // 0..7
	RNRRetry        uint8 // 0..7, 7 = retry forever
	SigAll          bool  // reported by Query
}

// SRQInit describes a shared receive queue to create.
type SRQInit struct {
	MaxWR  int
	MaxSGE int
	Limit  int // arm the limit event at creation (0 = not armed)
}

// SRQAttr holds shared-receive-queue attributes.
type SRQAttr struct {
	MaxWR  int
	MaxSGE int
	Limit  int
}

// SRQAttrMask selects the SRQAttr fields that ModifySRQ applies.
type SRQAttrMask uint32

// SRQ attribute mask bits.
const (
	SRQMaxWR SRQAttrMask = 1 << 0
	SRQLimit SRQAttrMask = 1 << 1
)

// CQInit describes a completion queue to create.
type CQInit struct {
	Entries int         // at least this many completions
	Channel CompChannel // optional: where notifications are delivered
	Vector  int         // completion vector
}

// EventType is the type of an asynchronous event.
type EventType uint8

// Asynchronous event types, numbered as in ib_uverbs.
const (
	EventCQErr            EventType = 0
	EventQPFatal          EventType = 1
	EventQPReqErr         EventType = 2
	EventQPAccessErr      EventType = 3
	EventCommEst          EventType = 4
	EventSQDrained        EventType = 5
	EventPathMig          EventType = 6
	EventPathMigErr       EventType = 7
	EventDeviceFatal      EventType = 8
	EventPortActive       EventType = 9
	EventPortErr          EventType = 10
	EventLIDChange        EventType = 11
	EventPKeyChange       EventType = 12
	EventSMChange         EventType = 13
	EventSRQErr           EventType = 14
	EventSRQLimitReached  EventType = 15
	EventQPLastWQEReached EventType = 16
	EventClientReregister EventType = 17
	EventGIDChange        EventType = 18
)

var eventNames = [...]string{"CQ_ERR", "QP_FATAL", "QP_REQ_ERR", "QP_ACCESS_ERR", "COMM_EST", "SQ_DRAINED",
	"PATH_MIG", "PATH_MIG_ERR", "DEVICE_FATAL", "PORT_ACTIVE", "PORT_ERR", "LID_CHANGE", "PKEY_CHANGE",
	"SM_CHANGE", "SRQ_ERR", "SRQ_LIMIT_REACHED", "QP_LAST_WQE_REACHED", "CLIENT_REREGISTER", "GID_CHANGE"}

func (t EventType) String() string {
	if int(t) < len(eventNames) {
		return eventNames[t]
	}
	return fmt.Sprintf("EventType(%d)", uint8(t))
}

// AsyncEvent is an asynchronous event of a device context. Exactly one of
// QP, CQ and SRQ is set for object events; Port is set for port events.
type AsyncEvent struct {
	Type EventType
	QP   QP
	CQ   CQ
	SRQ  SRQ
	Port int
}

// LinkLayer is the link layer of a port.
type LinkLayer uint8

// Link layers, numbered as in ib_uverbs.
const (
	LinkUnspecified LinkLayer = 0
	LinkInfiniBand  LinkLayer = 1
	LinkEthernet    LinkLayer = 2
)

func (l LinkLayer) String() string {
	switch l {
	case LinkInfiniBand:
		return "InfiniBand"
	case LinkEthernet:
		return "Ethernet"
	}
	return "Unknown"
}

// PortState is the logical state of a port.
type PortState uint8

// Port states.
const (
	PortNop         PortState = 0
	PortDown        PortState = 1
	PortInit        PortState = 2
	PortArmed       PortState = 3
	PortActive      PortState = 4
	PortActiveDefer PortState = 5
)

func (s PortState) String() string {
	names := [...]string{"NOP", "DOWN", "INIT", "ARMED", "ACTIVE", "ACTIVE_DEFER"}
	if int(s) < len(names) {
		return names[s]
	}
	return fmt.Sprintf("PortState(%d)", uint8(s))
}

// AtomicCap tells how atomic operations behave on a device.
type AtomicCap uint8

// Atomic capabilities.
const (
	AtomicNone AtomicCap = 0
	AtomicHCA  AtomicCap = 1 // atomic only with respect to this device
	AtomicGlob AtomicCap = 2 // atomic with respect to the CPU too
)

func (a AtomicCap) String() string {
	switch a {
	case AtomicNone:
		return "ATOMIC_NONE"
	case AtomicHCA:
		return "ATOMIC_HCA"
	case AtomicGlob:
		return "ATOMIC_GLOB"
	}
	return fmt.Sprintf("AtomicCap(%d)", uint8(a))
}

// DeviceCapFlags are ibv_device_cap_flags.
type DeviceCapFlags uint32

// Device capability flags used by pvperf.
const (
	DeviceResizeMaxWR     DeviceCapFlags = 1 << 0
	DevicePortActiveEvent DeviceCapFlags = 1 << 14
	DeviceSRQResize       DeviceCapFlags = 1 << 13
	DeviceRCRNRNAKGen     DeviceCapFlags = 1 << 12
)

// DeviceAttr are the capability limits of a device (ibv_device_attr), plus
// the features a benchmark must know about before it asks for them.
type DeviceAttr struct {
	FWVersion             string
	NodeGUID              uint64
	SysImageGUID          uint64
	MaxMRSize             uint64
	PageSizeCap           uint64
	VendorID              uint32
	VendorPartID          uint32
	HWVersion             uint32
	MaxQP                 int
	MaxQPWR               int
	Flags                 DeviceCapFlags
	MaxSGE                int
	MaxSGERd              int
	MaxCQ                 int
	MaxCQE                int
	MaxMR                 int
	MaxPD                 int
	MaxQPRdAtom           int
	MaxEERdAtom           int
	MaxResRdAtom          int
	MaxQPInitRdAtom       int
	MaxEEInitRdAtom       int
	AtomicCap             AtomicCap
	MaxEE                 int
	MaxRDD                int
	MaxMW                 int
	MaxRawIPv6QP          int
	MaxRawEthyQP          int
	MaxMcastGrp           int
	MaxMcastQPAttach      int
	MaxTotalMcastQPAttach int
	MaxAH                 int
	MaxFMR                int
	MaxMapPerFMR          int
	MaxSRQ                int // 0: the device has no shared receive queues
	MaxSRQWR              int
	MaxSRQSGE             int
	MaxPKeys              int
	LocalCAAckDelay       uint8
	PhysPortCnt           int

	// Not part of ibv_device_attr: what the device can do, so callers need
	// not try and fail.
	QPTypes        []QPType // supported QP types
	MaxUDQP        int      // limit on UD QPs, 0 = only MaxQP applies
	MaxInlineData  int      // 0: no inline sends
	NumCompVectors int
	// NUMANode is the NUMA node the device is attached to (sysfs
	// numa_node), -1 when unknown. Emulated devices report node 0.
	NUMANode int
}

// Supports reports whether the device offers QP type t.
func (a *DeviceAttr) Supports(t QPType) bool {
	for _, x := range a.QPTypes {
		if x == t {
			return true
		}
	}
	return false
}

// PortAttr are the attributes of a port (ibv_port_attr).
type PortAttr struct {
	State         PortState
	MaxMTU        MTU
	ActiveMTU     MTU
	GIDTblLen     int
	PortCapFlags  uint32
	MaxMsgSz      uint32
	BadPKeyCntr   uint32
	QKeyViolCntr  uint32
	PKeyTblLen    uint16
	LID           uint16
	SMLID         uint16
	LMC           uint8
	MaxVLNum      uint8
	SMSL          uint8
	SubnetTimeout uint8
	InitTypeReply uint8
	ActiveWidth   uint8
	ActiveSpeed   uint8
	PhysState     uint8
	LinkLayer     LinkLayer
	Flags         uint8
}

// GIDType is the RoCE version (or IB) of a GID table entry.
type GIDType uint8

// GID types, numbered as in ib_uverbs_gid_entry.
const (
	GIDTypeIB     GIDType = 0
	GIDTypeRoCEv1 GIDType = 1
	GIDTypeRoCEv2 GIDType = 2
)

// String returns the type as sysfs prints it (gid_attrs/types).
func (t GIDType) String() string {
	switch t {
	case GIDTypeIB, GIDTypeRoCEv1:
		return "IB/RoCE v1"
	case GIDTypeRoCEv2:
		return "RoCE v2"
	}
	return fmt.Sprintf("GIDType(%d)", uint8(t))
}

// GID is a 128-bit global identifier, in network byte order.
type GID [16]byte

// IsZero reports whether g is all zeros (an unused table entry).
func (g GID) IsZero() bool { return g == GID{} }

// Addr returns g as an IP address: IPv4 for a v4-mapped GID, IPv6 otherwise.
func (g GID) Addr() netip.Addr { return netip.AddrFrom16(g).Unmap() }

// IsV4Mapped reports whether g holds an IPv4 address (::ffff:a.b.c.d).
func (g GID) IsV4Mapped() bool { return netip.AddrFrom16(g).Is4In6() }

// IsLinkLocal reports whether g is an fe80::/10 link-local GID.
func (g GID) IsLinkLocal() bool { return g[0] == 0xfe && g[1]&0xc0 == 0x80 }

// String formats g the way sysfs does: eight groups of four hex digits.
func (g GID) String() string {
	var b strings.Builder
	for i := 0; i < 16; i += 2 {
		if i > 0 {
			b.WriteByte(':')
		}
		fmt.Fprintf(&b, "%02x%02x", g[i], g[i+1])
	}
	return b.String()
}

// GIDFromAddr returns the GID of an IP address (IPv4 addresses are mapped).
func GIDFromAddr(a netip.Addr) GID { return GID(a.As16()) }

// ParseGID parses a GID written as an IPv6 address (either form).
func ParseGID(s string) (GID, error) {
	a, err := netip.ParseAddr(s)
	if err != nil || !a.Is6() && !a.Is4() {
		return GID{}, fmt.Errorf("parse gid %q: not an IPv6 address", s)
	}
	return GID(a.As16()), nil
}

// GIDEntry is one entry of a port's GID table.
type GIDEntry struct {
	Index  int
	GID    GID
	Type   GIDType
	Netdev string // network interface the GID belongs to, if any
}

// DeviceKind tells real kernel devices from emulated ones.
type DeviceKind uint8

// Device kinds.
const (
	KindKernel   DeviceKind = 1 // a kernel RDMA device under /sys/class/infiniband
	KindEmulated DeviceKind = 2 // an emulated device (package emu)
)

func (k DeviceKind) String() string {
	switch k {
	case KindKernel:
		return "kernel"
	case KindEmulated:
		return "emulated"
	}
	return fmt.Sprintf("DeviceKind(%d)", uint8(k))
}
