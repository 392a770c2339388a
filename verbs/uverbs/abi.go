//go:build linux

package uverbs

import "github.com/pvperf/pvperf/internal/ibabi"

// The uverbs command ABI (include/uapi/rdma/ib_user_verbs.h): every struct a
// command writes or reads, declared field by field with explicit padding so
// that its encoding with encoding/binary (little-endian, no implicit
// padding) is byte for byte the kernel's layout. abi_test.go pins each
// struct's size and field offsets to the published layout.

// Command numbers of the write() interface.
const (
	cmdGetContext        = 0
	cmdQueryDevice       = 1
	cmdQueryPort         = 2
	cmdAllocPD           = 3
	cmdDeallocPD         = 4
	cmdCreateAH          = 5
	cmdDestroyAH         = 8
	cmdRegMR             = 9
	cmdDeregMR           = 13
	cmdCreateCompChannel = 17
	cmdCreateCQ          = 18
	cmdDestroyCQ         = 20
	cmdReqNotifyCQ       = 23
	cmdCreateQP          = 24
	cmdQueryQP           = 25
	cmdModifyQP          = 26
	cmdDestroyQP         = 27
	cmdPostSend          = 28
	cmdCreateSRQ         = 32
	cmdModifySRQ         = 33
	cmdQuerySRQ          = 34
	cmdDestroySRQ        = 35

	// cmdMask selects the command number of a header's command word
	// (IB_USER_VERBS_CMD_COMMAND_MASK); the bits above are flags.
	cmdMask = 0xff
)

// cmdHdrSize is the size of ib_uverbs_cmd_hdr: command u32, in_words u16,
// out_words u16.
const cmdHdrSize = 8

// ib_uverbs_get_context (the request is only the response pointer).
type respOnly struct {
	Response uint64
}

type getContextResp struct {
	AsyncFD        uint32
	NumCompVectors uint32
}

type queryDeviceResp struct {
	FWVer                 uint64
	NodeGUID              [8]byte // big-endian
	SysImageGUID          [8]byte // big-endian
	MaxMRSize             uint64
	PageSizeCap           uint64
	VendorID              uint32
	VendorPartID          uint32
	HWVer                 uint32
	MaxQP                 uint32
	MaxQPWR               uint32
	DeviceCapFlags        uint32
	MaxSGE                uint32
	MaxSGERd              uint32
	MaxCQ                 uint32
	MaxCQE                uint32
	MaxMR                 uint32
	MaxPD                 uint32
	MaxQPRdAtom           uint32
	MaxEERdAtom           uint32
	MaxResRdAtom          uint32
	MaxQPInitRdAtom       uint32
	MaxEEInitRdAtom       uint32
	AtomicCap             uint32
	MaxEE                 uint32
	MaxRDD                uint32
	MaxMW                 uint32
	MaxRawIPv6QP          uint32
	MaxRawEthyQP          uint32
	MaxMcastGrp           uint32
	MaxMcastQPAttach      uint32
	MaxTotalMcastQPAttach uint32
	MaxAH                 uint32
	MaxFMR                uint32
	MaxMapPerFMR          uint32
	MaxSRQ                uint32
	MaxSRQWR              uint32
	MaxSRQSGE             uint32
	MaxPKeys              uint16
	LocalCAAckDelay       uint8
	PhysPortCnt           uint8
	Reserved              [4]byte
}

type queryPortReq struct {
	Response uint64
	PortNum  uint8
	Reserved [7]byte
}

type queryPortResp struct {
	PortCapFlags  uint32
	MaxMsgSz      uint32
	BadPKeyCntr   uint32
	QKeyViolCntr  uint32
	GIDTblLen     uint32
	PKeyTblLen    uint16
	LID           uint16
	SMLID         uint16
	State         uint8
	MaxMTU        uint8
	ActiveMTU     uint8
	LMC           uint8
	MaxVLNum      uint8
	SMSL          uint8
	SubnetTimeout uint8
	InitTypeReply uint8
	ActiveWidth   uint8
	ActiveSpeed   uint8
	PhysState     uint8
	LinkLayer     uint8
	Flags         uint8
	Reserved      uint8
}

type allocPDResp struct {
	PDHandle uint32
}

type handleOnly struct {
	Handle uint32
}

type regMRReq struct {
	Response    uint64
	Start       uint64
	Length      uint64
	HCAVA       uint64
	PDHandle    uint32
	AccessFlags uint32
}

type regMRResp struct {
	MRHandle uint32
	LKey     uint32
	RKey     uint32
}

type compChannelResp struct {
	FD uint32
}

type createCQReq struct {
	Response    uint64
	UserHandle  uint64
	CQE         uint32
	CompVector  uint32
	CompChannel int32
	Reserved    uint32
}

type createCQResp struct {
	CQHandle uint32
	CQE      uint32
}

type destroyReq struct {
	Response uint64
	Handle   uint32
	Reserved uint32
}

type destroyCQResp struct {
	CompEventsReported  uint32
	AsyncEventsReported uint32
}

type reqNotifyCQ struct {
	CQHandle      uint32
	SolicitedOnly uint32
}

type createQPReq struct {
	Response      uint64
	UserHandle    uint64
	PDHandle      uint32
	SendCQHandle  uint32
	RecvCQHandle  uint32
	SRQHandle     uint32
	MaxSendWR     uint32
	MaxRecvWR     uint32
	MaxSendSGE    uint32
	MaxRecvSGE    uint32
	MaxInlineData uint32
	SQSigAll      uint8
	QPType        uint8
	IsSRQ         uint8
	Reserved      uint8
}

type createQPResp struct {
	QPHandle      uint32
	QPN           uint32
	MaxSendWR     uint32
	MaxRecvWR     uint32
	MaxSendSGE    uint32
	MaxRecvSGE    uint32
	MaxInlineData uint32
	Reserved      uint32
}

// ib_uverbs_qp_dest
type qpDest struct {
	DGID         [16]byte
	FlowLabel    uint32
	DLID         uint16
	Reserved     uint16
	SGIDIndex    uint8
	HopLimit     uint8
	TrafficClass uint8
	SL           uint8
	SrcPathBits  uint8
	StaticRate   uint8
	IsGlobal     uint8
	PortNum      uint8
}

type modifyQP struct {
	Dest             qpDest
	AltDest          qpDest
	QPHandle         uint32
	AttrMask         uint32
	QKey             uint32
	RQPSN            uint32
	SQPSN            uint32
	DestQPNum        uint32
	QPAccessFlags    uint32
	PKeyIndex        uint16
	AltPKeyIndex     uint16
	QPState          uint8
	CurQPState       uint8
	PathMTU          uint8
	PathMigState     uint8
	EnSQDAsyncNotify uint8
	MaxRdAtomic      uint8
	MaxDestRdAtomic  uint8
	MinRNRTimer      uint8
	PortNum          uint8
	Timeout          uint8
	RetryCnt         uint8
	RNRRetry         uint8
	AltPortNum       uint8
	AltTimeout       uint8
	Reserved         [2]byte
}

type queryQPReq struct {
	Response uint64
	QPHandle uint32
	AttrMask uint32
}

type queryQPResp struct {
	Dest            qpDest
	AltDest         qpDest
	MaxSendWR       uint32
	MaxRecvWR       uint32
	MaxSendSGE      uint32
	MaxRecvSGE      uint32
	MaxInlineData   uint32
	QKey            uint32
	RQPSN           uint32
	SQPSN           uint32
	DestQPNum       uint32
	QPAccessFlags   uint32
	PKeyIndex       uint16
	AltPKeyIndex    uint16
	QPState         uint8
	CurQPState      uint8
	PathMTU         uint8
	PathMigState    uint8
	SQDraining      uint8
	MaxRdAtomic     uint8
	MaxDestRdAtomic uint8
	MinRNRTimer     uint8
	PortNum         uint8
	Timeout         uint8
	RetryCnt        uint8
	RNRRetry        uint8
	AltPortNum      uint8
	AltTimeout      uint8
	SQSigAll        uint8
	Reserved        [5]byte
}

type destroyQPResp struct {
	EventsReported uint32
}

type postSendReq struct {
	Response uint64
	QPHandle uint32
	WRCount  uint32
	SGECount uint32
	WQESize  uint32
}

type createSRQReq struct {
	Response   uint64
	UserHandle uint64
	PDHandle   uint32
	MaxWR      uint32
	MaxSGE     uint32
	SRQLimit   uint32
}

type createSRQResp struct {
	SRQHandle uint32
	MaxWR     uint32
	MaxSGE    uint32
	SRQN      uint32
}

type modifySRQ struct {
	SRQHandle uint32
	AttrMask  uint32
	MaxWR     uint32
	SRQLimit  uint32
}

type querySRQReq struct {
	Response  uint64
	SRQHandle uint32
	Reserved  uint32
}

type querySRQResp struct {
	MaxWR    uint32
	MaxSGE   uint32
	SRQLimit uint32
	Reserved uint32
}

type createAHReq struct {
	Response   uint64
	UserHandle uint64
	PDHandle   uint32
	Reserved   uint32
	Attr       ibabi.AHAttr
}

// ib_uverbs_async_event_desc and ib_uverbs_comp_event_desc.
const (
	asyncEventSize = 16
	compEventSize  = 8
)

// The ioctl interface (rdma_user_ioctl_cmds.h, ib_user_ioctl_cmds.h): only
// the GID table query uses it, where write() has no equivalent and sysfs
// takes two files per entry.
const (
	rdmaVerbsIoctl = 0xc0181b01 // _IOWR(0x1b, 1, struct ib_uverbs_ioctl_hdr)
	ioctlHdrSize   = 24
	ioctlAttrSize  = 16
	attrMandatory  = 1 // UVERBS_ATTR_F_MANDATORY

	objectDevice        = 0 // UVERBS_OBJECT_DEVICE
	methodQueryGIDTable = 5 // UVERBS_METHOD_QUERY_GID_TABLE (kernel 5.10)

	attrGIDTableEntrySize      = 0 // const in: the size of one entry
	attrGIDTableFlags          = 1 // u32 in: 0
	attrGIDTableRespEntries    = 2 // out: the entries
	attrGIDTableRespNumEntries = 3 // out: u64, how many

	gidEntrySize = 32 // ib_uverbs_gid_entry
)

// RDMA_DRIVER_* (enum rdma_driver_id): an ioctl names the driver it was
// written for.
var driverIDs = map[string]uint32{DriverPVRDMA: 10, DriverRXE: 14}

// ib_uverbs_ioctl_hdr.
type ioctlHdr struct {
	Length    uint16
	ObjectID  uint16
	MethodID  uint16
	NumAttrs  uint16
	Reserved1 uint64
	DriverID  uint32
	Reserved2 uint32
}

// ib_uverbs_attr: Data is the value itself for inputs of at most 8 bytes,
// a pointer otherwise and for every output.
type ioctlAttr struct {
	AttrID   uint16
	Len      uint16
	Flags    uint16
	AttrData uint16
	Data     uint64
}

// ib_uverbs_gid_entry.
type gidEntryABI struct {
	GID           [16]byte
	GIDIndex      uint32
	PortNum       uint32
	GIDType       uint32 // 0 IB, 1 RoCE v1, 2 RoCE v2
	NetdevIfindex uint32
}
