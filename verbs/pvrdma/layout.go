package pvrdma

import (
	"encoding/binary"
	"math/bits"

	"github.com/pvperf/pvperf/verbs"
)

// Sizes of the structures shared with the device (vmw_pvrdma-abi.h,
// pvrdma_ring.h). All fields are little-endian except imm_data and GIDs.
const (
	PageSize      = 4096 // vmw_pvrdma is x86-64 only: 4 KiB pages
	RingSize      = 8    // struct pvrdma_ring {prod_tail, cons_head}
	RingStateSize = 16   // struct pvrdma_ring_state {tx, rx}
	SGESize       = 16   // struct pvrdma_sge
	SendHdrSize   = 80   // struct pvrdma_sq_wqe_hdr
	RecvHdrSize   = 16   // struct pvrdma_rq_wqe_hdr
	CQESize       = 64   // struct pvrdma_cqe
	AVSize        = 40   // struct pvrdma_av
)

// Offsets of the rings inside page 0 of a queue buffer.
const (
	TxRingOffset = 0 // ring_state.tx: the send queue of a QP
	RxRingOffset = 8 // ring_state.rx: the receive queue of a QP, a CQ's ring, an SRQ's ring
)

// Doorbells: a 32-bit store into the context's UAR page. The low 24 bits
// are a handle, the high bits a command.
const (
	UARQPOffset  = 0
	UARCQOffset  = 4
	UARSRQOffset = 8

	UARHandleMask uint32 = 0x00FFFFFF
	UARQPSend     uint32 = 1 << 30
	UARQPRecv     uint32 = 1 << 31
	UARCQArm      uint32 = 1 << 30
	UARCQArmSol   uint32 = 1 << 29
	UARCQPoll     uint32 = 1 << 31
	UARSRQRecv    uint32 = 1 << 30
)

// Opcode is pvrdma_wr_opcode. Values 0..6 equal the verbs opcodes.
type Opcode uint32

// Work request opcodes (pvrdma_wr_opcode).
const (
	OpRDMAWrite               Opcode = 0
	OpRDMAWriteWithImm        Opcode = 1
	OpSend                    Opcode = 2
	OpSendWithImm             Opcode = 3
	OpRDMARead                Opcode = 4
	OpAtomicCmpAndSwp         Opcode = 5
	OpAtomicFetchAndAdd       Opcode = 6
	OpLSO                     Opcode = 7
	OpSendWithInv             Opcode = 8
	OpRDMAReadWithInv         Opcode = 9
	OpLocalInv                Opcode = 10
	OpFastRegMR               Opcode = 11
	OpMaskedAtomicCmpAndSwp   Opcode = 12
	OpMaskedAtomicFetchAndAdd Opcode = 13
	OpBindMW                  Opcode = 14
	OpRegSigMR                Opcode = 15
	OpError                   Opcode = 16
)

// Send flags (pvrdma_send_flags). Inline is not implemented by the
// vmw_pvrdma device; the emulator's unrestricted profile implements it
// with the payload placed where the SGE array would be (see WQE layout).
const (
	FlagFence     = 1 << 0
	FlagSignaled  = 1 << 1
	FlagSolicited = 1 << 2
	FlagInline    = 1 << 3
	FlagIPCsum    = 1 << 4
)

// Completion opcodes (pvrdma_wc_opcode).
const (
	WCOpSend            = 0
	WCOpRDMAWrite       = 1
	WCOpRDMARead        = 2
	WCOpCompSwap        = 3
	WCOpFetchAdd        = 4
	WCOpBindMW          = 5
	WCOpLSO             = 6
	WCOpLocalInv        = 7
	WCOpFastRegMR       = 8
	WCOpMaskedCompSwap  = 9
	WCOpMaskedFetchAdd  = 10
	WCOpRecv            = 128
	WCOpRecvRDMAWithImm = 129
)

// Completion flags (pvrdma_wc_flags).
const (
	WCFlagGRH                = 1 << 0
	WCFlagWithImm            = 1 << 1
	WCFlagWithInvalidate     = 1 << 2
	WCFlagIPCsumOK           = 1 << 3
	WCFlagWithSMAC           = 1 << 4
	WCFlagWithVLAN           = 1 << 5
	WCFlagWithNetworkHdrType = 1 << 6
)

// Network header types of a completion (pvrdma_network_type).
const (
	NetworkIB   = 0 // IB or RoCE v1
	NetworkIPv4 = 1 // RoCE v2 over IPv4
	NetworkIPv6 = 2 // RoCE v2 over IPv6
)

// Offsets inside a send WQE header (pvrdma_sq_wqe_hdr).
const (
	sqWRID     = 0
	sqNumSGE   = 8
	sqTotalLen = 12
	sqOpcode   = 16
	sqFlags    = 20
	sqImm      = 24
	sqReserved = 28
	sqUnion    = 32
	// rdma
	sqRemoteAddr = 32
	sqRKey       = 40
	// atomic
	sqAtomicAddr = 32
	sqCompareAdd = 40
	sqSwap       = 48
	sqAtomicRKey = 56
	// ud
	sqRemoteQPN  = 32
	sqRemoteQKey = 36
	sqAV         = 40
)

// Offsets inside a pvrdma_cqe.
const (
	cqeWRID       = 0
	cqeQP         = 8
	cqeOpcode     = 16
	cqeStatus     = 20
	cqeByteLen    = 24
	cqeImm        = 28
	cqeSrcQP      = 32
	cqeFlags      = 36
	cqeVendorErr  = 40
	cqePKeyIndex  = 44
	cqeSLID       = 46
	cqeSL         = 48
	cqeDLIDPath   = 49
	cqePort       = 50
	cqeSMAC       = 51
	cqeNetHdrType = 57
)

// RoundPow2 rounds n up to a power of two (at least 1).
func RoundPow2(n int) int {
	if n <= 1 {
		return 1
	}
	return 1 << bits.Len(uint(n-1))
}

func alignPage(n int) int { return (n + PageSize - 1) &^ (PageSize - 1) }

// SendStride returns the size of a send WQE that holds maxSGE SGEs or
// maxInline bytes of inline payload: next_pow2(80 + max(16*maxSGE, maxInline)).
func SendStride(maxSGE, maxInline int) int {
	body := max(SGESize*max(maxSGE, 1), maxInline)
	return RoundPow2(SendHdrSize + body)
}

// RecvStride returns the size of a receive WQE: next_pow2(16 + 16*maxSGE).
func RecvStride(maxSGE int) int { return RoundPow2(RecvHdrSize + SGESize*max(maxSGE, 1)) }

// QPLayout is the shape of a QP's two buffers. The send buffer holds the
// ring state page followed by the send WQEs; the receive buffer holds the
// receive WQEs from offset 0 (and is absent when the QP uses an SRQ).
type QPLayout struct {
	SendWR, SendStride int // ring slots (a power of two) and WQE size
	RecvWR, RecvStride int // 0 slots when the QP uses an SRQ
	SendBufLen         int
	RecvBufLen         int
}

// NewQPLayout computes the layout for the requested capabilities, rounding
// the ring sizes to powers of two as the driver must before CREATE_QP.
func NewQPLayout(c verbs.QPCap, srq bool) QPLayout {
	var l QPLayout
	l.SendWR = RoundPow2(max(c.MaxSendWR, 1))
	l.SendStride = SendStride(c.MaxSendSGE, c.MaxInlineData)
	l.SendBufLen = alignPage(PageSize + l.SendWR*l.SendStride)
	if !srq {
		l.RecvWR = RoundPow2(max(c.MaxRecvWR, 1))
		l.RecvStride = RecvStride(c.MaxRecvSGE)
		l.RecvBufLen = alignPage(l.RecvWR * l.RecvStride)
	}
	return l
}

// CQBufLen is the length of a CQ buffer of n entries (n a power of two):
// the ring state page followed by n 64-byte CQEs.
func CQBufLen(n int) int { return alignPage(PageSize + n*CQESize) }

// SRQBufLen is the length of an SRQ buffer of n WQEs of the given stride.
func SRQBufLen(n, stride int) int { return alignPage(PageSize + n*stride) }

// SendWQE gives the device's view of a send WQE.
type SendWQE []byte

func (w SendWQE) WRID() uint64       { return binary.LittleEndian.Uint64(w[sqWRID:]) }
func (w SendWQE) NumSGE() int        { return int(binary.LittleEndian.Uint32(w[sqNumSGE:])) }
func (w SendWQE) TotalLen() uint32   { return binary.LittleEndian.Uint32(w[sqTotalLen:]) }
func (w SendWQE) Opcode() Opcode     { return Opcode(binary.LittleEndian.Uint32(w[sqOpcode:])) }
func (w SendWQE) Flags() uint32      { return binary.LittleEndian.Uint32(w[sqFlags:]) }
func (w SendWQE) Imm() uint32        { return binary.BigEndian.Uint32(w[sqImm:]) }
func (w SendWQE) RemoteAddr() uint64 { return binary.LittleEndian.Uint64(w[sqRemoteAddr:]) }
func (w SendWQE) RKey() uint32       { return binary.LittleEndian.Uint32(w[sqRKey:]) }
func (w SendWQE) AtomicAddr() uint64 { return binary.LittleEndian.Uint64(w[sqAtomicAddr:]) }
func (w SendWQE) CompareAdd() uint64 { return binary.LittleEndian.Uint64(w[sqCompareAdd:]) }
func (w SendWQE) Swap() uint64       { return binary.LittleEndian.Uint64(w[sqSwap:]) }
func (w SendWQE) AtomicRKey() uint32 { return binary.LittleEndian.Uint32(w[sqAtomicRKey:]) }
func (w SendWQE) RemoteQPN() uint32  { return binary.LittleEndian.Uint32(w[sqRemoteQPN:]) }
func (w SendWQE) RemoteQKey() uint32 { return binary.LittleEndian.Uint32(w[sqRemoteQKey:]) }
func (w SendWQE) AV() AV             { return DecodeAV(w[sqAV : sqAV+AVSize]) }

// SGE returns SGE i of the WQE.
func (w SendWQE) SGE(i int) verbs.SGE { return decodeSGE(w[SendHdrSize+i*SGESize:]) }

// Inline returns the n bytes of inline payload.
func (w SendWQE) Inline(n int) []byte { return w[SendHdrSize : SendHdrSize+n] }

// RecvWQE gives the device's view of a receive WQE.
type RecvWQE []byte

func (w RecvWQE) WRID() uint64        { return binary.LittleEndian.Uint64(w[0:]) }
func (w RecvWQE) NumSGE() int         { return int(binary.LittleEndian.Uint32(w[8:])) }
func (w RecvWQE) SGE(i int) verbs.SGE { return decodeSGE(w[RecvHdrSize+i*SGESize:]) }

func decodeSGE(b []byte) verbs.SGE {
	b = b[:SGESize]
	return verbs.SGE{
		Addr:   binary.LittleEndian.Uint64(b[0:]),
		Length: binary.LittleEndian.Uint32(b[8:]),
		LKey:   binary.LittleEndian.Uint32(b[12:]),
	}
}

func encodeSGE(b []byte, s *verbs.SGE) {
	b = b[:SGESize]
	binary.LittleEndian.PutUint64(b[0:], s.Addr)
	binary.LittleEndian.PutUint32(b[8:], s.Length)
	binary.LittleEndian.PutUint32(b[12:], s.LKey)
}

// AV is a pvrdma_av, the address vector of a UD work request.
type AV struct {
	PortPD            uint32 // pdn | port << 24
	SLTClassFlowLabel uint32 // traffic_class << 20 | flow_label
	DGID              verbs.GID
	SrcPathBits       uint8 // | 0x80 when a GRH is present
	GIDIndex          uint8
	StatRate          uint8
	HopLimit          uint8
	DMAC              [6]byte
}

// Encode writes the 40-byte encoding of av into b.
func (av *AV) Encode(b []byte) {
	b = b[:AVSize]
	binary.LittleEndian.PutUint32(b[0:], av.PortPD)
	binary.LittleEndian.PutUint32(b[4:], av.SLTClassFlowLabel)
	copy(b[8:24], av.DGID[:])
	b[24] = av.SrcPathBits
	b[25] = av.GIDIndex
	b[26] = av.StatRate
	b[27] = av.HopLimit
	copy(b[28:34], av.DMAC[:])
	clear(b[34:40])
}

// DecodeAV reads a 40-byte pvrdma_av.
func DecodeAV(b []byte) AV {
	b = b[:AVSize]
	var av AV
	av.PortPD = binary.LittleEndian.Uint32(b[0:])
	av.SLTClassFlowLabel = binary.LittleEndian.Uint32(b[4:])
	copy(av.DGID[:], b[8:24])
	av.SrcPathBits = b[24]
	av.GIDIndex = b[25]
	av.StatRate = b[26]
	av.HopLimit = b[27]
	copy(av.DMAC[:], b[28:34])
	return av
}

// CQE is a pvrdma_cqe.
type CQE struct {
	WRID           uint64
	QP             uint64 // device QP handle (low 16 bits used by the driver)
	Opcode         uint32
	Status         uint32
	ByteLen        uint32
	Imm            uint32 // host order; stored big-endian
	SrcQP          uint32
	Flags          uint32
	VendorErr      uint32
	PKeyIndex      uint16
	SLID           uint16
	SL             uint8
	DLIDPathBits   uint8
	Port           uint8
	SMAC           [6]byte
	NetworkHdrType uint8
}

// Encode writes the 64-byte encoding of c into b.
func (c *CQE) Encode(b []byte) {
	b = b[:CQESize]
	binary.LittleEndian.PutUint64(b[cqeWRID:], c.WRID)
	binary.LittleEndian.PutUint64(b[cqeQP:], c.QP)
	binary.LittleEndian.PutUint32(b[cqeOpcode:], c.Opcode)
	binary.LittleEndian.PutUint32(b[cqeStatus:], c.Status)
	binary.LittleEndian.PutUint32(b[cqeByteLen:], c.ByteLen)
	binary.BigEndian.PutUint32(b[cqeImm:], c.Imm)
	binary.LittleEndian.PutUint32(b[cqeSrcQP:], c.SrcQP)
	binary.LittleEndian.PutUint32(b[cqeFlags:], c.Flags)
	binary.LittleEndian.PutUint32(b[cqeVendorErr:], c.VendorErr)
	binary.LittleEndian.PutUint16(b[cqePKeyIndex:], c.PKeyIndex)
	binary.LittleEndian.PutUint16(b[cqeSLID:], c.SLID)
	b[cqeSL] = c.SL
	b[cqeDLIDPath] = c.DLIDPathBits
	b[cqePort] = c.Port
	copy(b[cqeSMAC:cqeSMAC+6], c.SMAC[:])
	b[cqeNetHdrType] = c.NetworkHdrType
	clear(b[58:64])
}

// decodeCQE reads a 64-byte pvrdma_cqe.
func decodeCQE(b []byte) CQE {
	b = b[:CQESize]
	var c CQE
	c.WRID = binary.LittleEndian.Uint64(b[cqeWRID:])
	c.QP = binary.LittleEndian.Uint64(b[cqeQP:])
	c.Opcode = binary.LittleEndian.Uint32(b[cqeOpcode:])
	c.Status = binary.LittleEndian.Uint32(b[cqeStatus:])
	c.ByteLen = binary.LittleEndian.Uint32(b[cqeByteLen:])
	c.Imm = binary.BigEndian.Uint32(b[cqeImm:])
	c.SrcQP = binary.LittleEndian.Uint32(b[cqeSrcQP:])
	c.Flags = binary.LittleEndian.Uint32(b[cqeFlags:])
	c.VendorErr = binary.LittleEndian.Uint32(b[cqeVendorErr:])
	c.PKeyIndex = binary.LittleEndian.Uint16(b[cqePKeyIndex:])
	c.SLID = binary.LittleEndian.Uint16(b[cqeSLID:])
	c.SL = b[cqeSL]
	c.DLIDPathBits = b[cqeDLIDPath]
	c.Port = b[cqePort]
	copy(c.SMAC[:], b[cqeSMAC:cqeSMAC+6])
	c.NetworkHdrType = b[cqeNetHdrType]
	return c
}
