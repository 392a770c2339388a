package roce

import (
	"encoding/binary"
	"errors"
)

// DefaultPKey is the default (full member) partition key, the only one
// rdma_rxe's P_Key table holds.
const DefaultPKey = 0xFFFF

// GSIQKey is the Q_Key of the general services QP (QP 1).
const GSIQKey = 0x80010000

// AETH syndromes: the top 3 bits say ACK (000), RNR NAK (001) or NAK (011);
// the low 5 bits are the credit count, the RNR timer or the NAK code.
const (
	SynACK          = 0x1F // ACK with unlimited credits, as rxe sends
	SynRNR          = 0x20 // RNR NAK; OR in the 5-bit RNR timer
	SynNAKSeq       = 0x60 // NAK: PSN sequence error
	SynNAKInvReq    = 0x61 // NAK: invalid request
	SynNAKRemAccess = 0x62 // NAK: remote access error
	SynNAKRemOp     = 0x63 // NAK: remote operational error
	SynNAKInvRD     = 0x64 // NAK: invalid RD request
)

// IsACK reports whether an AETH syndrome is an ACK.
func IsACK(syn uint8) bool { return syn&0xE0 == 0x00 }

// IsRNR reports whether an AETH syndrome is an RNR NAK.
func IsRNR(syn uint8) bool { return syn&0xE0 == 0x20 }

// IsNAK reports whether an AETH syndrome is a NAK other than RNR.
func IsNAK(syn uint8) bool { return syn&0xE0 == 0x60 }

// Errors returned by Parse, unwrapped so that the error path does not
// allocate either.
var (
	// ErrTruncated: the packet is shorter than its opcode's headers and
	// the ICRC.
	ErrTruncated = errors.New("roce: packet truncated")
	// ErrOpcode: the opcode is not one this package knows (see Valid).
	ErrOpcode = errors.New("roce: unknown opcode")
	// ErrVersion: the BTH transport version (TVer) is not 0.
	ErrVersion = errors.New("roce: bad transport header version")
	// ErrPad: the pad count is larger than the bytes after the headers.
	ErrPad = errors.New("roce: pad count exceeds payload")
	// ErrLength: payload and pad are not a multiple of 4 bytes, or an
	// opcode without payload carries some.
	ErrLength = errors.New("roce: bad packet length")
)

// Packet is a decoded packet. Only the fields of the headers its opcode
// carries (Opcode.Hdrs) are meaningful; Parse zeroes the others and Encode
// ignores them.
type Packet struct {
	Opcode     Opcode
	SE, M      bool  // solicited event, migration request
	Pad        uint8 // PadCnt, 0..3; set by Parse, ignored by Encode
	PKey       uint16
	FECN, BECN bool
	DestQPN    uint32 // 24 bits
	AckReq     bool
	PSN        uint32 // 24 bits

	VA               uint64 // RETH or AtomicETH
	RKey             uint32 // RETH or AtomicETH
	DMALen           uint32 // RETH
	SwapAdd, Compare uint64 // AtomicETH
	Syndrome         uint8  // AETH
	MSN              uint32 // AETH, 24 bits
	AtomicOrig       uint64 // AtomicAckETH
	QKey             uint32 // DETH
	SrcQPN           uint32 // DETH, 24 bits
	Imm              uint32 // ImmDt, the 4 bytes on the wire read big-endian
	InvRKey          uint32 // IETH

	// Payload is the payload without pad and ICRC. Parse sets it to a
	// slice of the parsed buffer; Encode does not read it.
	Payload []byte
}

const mask24 = 0x00FFFFFF

// Parse decodes b, a UDP payload from the BTH to the ICRC, into p without
// allocating; p.Payload aliases b. It checks that b holds the opcode's
// headers and the ICRC, that the opcode is known and TVer is 0, that the
// pad fits in the bytes after the headers, and that payload and pad fill a
// multiple of 4 bytes (which makes the pad count the one Encode writes;
// rdma_rxe always pads so, though it does not check it on receive). An
// opcode without payload must carry none. Parse checks neither the ICRC
// (see CheckICRC) nor P_Key, QPN or PSN, and ignores the reserved bits of
// the BTH and DETH. A packet cut short by a multiple of 4 bytes may still
// parse, as a shorter payload; its ICRC then does not check. On error p
// is left unchanged.
func Parse(b []byte, p *Packet) error {
	if len(b) < bthLen+icrcLen {
		return ErrTruncated
	}
	op := Opcode(b[0])
	info := &opTable[op]
	if info.hdrs == 0 {
		return ErrOpcode
	}
	if b[1]&0x0F != 0 {
		return ErrVersion
	}
	hl := int(info.hlen)
	if len(b) < hl+icrcLen {
		return ErrTruncated
	}
	rest := len(b) - hl - icrcLen // payload and pad
	pad := int(b[1]>>4) & 3
	switch {
	case pad > rest:
		return ErrPad
	case rest&3 != 0:
		return ErrLength
	case rest != 0 && info.hdrs&HdrPayload == 0:
		return ErrLength
	}

	qpn := binary.BigEndian.Uint32(b[4:])
	psn := binary.BigEndian.Uint32(b[8:])
	*p = Packet{
		Opcode:  op,
		SE:      b[1]&0x80 != 0,
		M:       b[1]&0x40 != 0,
		Pad:     uint8(pad),
		PKey:    binary.BigEndian.Uint16(b[2:]),
		FECN:    qpn&0x80000000 != 0,
		BECN:    qpn&0x40000000 != 0,
		DestQPN: qpn & mask24,
		AckReq:  psn&0x80000000 != 0,
		PSN:     psn & mask24,
		Payload: b[hl : hl+rest-pad : hl+rest-pad],
	}
	h := info.hdrs
	o := bthLen
	if h&HdrDETH != 0 {
		p.QKey = binary.BigEndian.Uint32(b[o:])
		p.SrcQPN = binary.BigEndian.Uint32(b[o+4:]) & mask24
		o += dethLen
	}
	if h&HdrRETH != 0 {
		p.VA = binary.BigEndian.Uint64(b[o:])
		p.RKey = binary.BigEndian.Uint32(b[o+8:])
		p.DMALen = binary.BigEndian.Uint32(b[o+12:])
		o += rethLen
	}
	if h&HdrAtomicETH != 0 {
		p.VA = binary.BigEndian.Uint64(b[o:])
		p.RKey = binary.BigEndian.Uint32(b[o+8:])
		p.SwapAdd = binary.BigEndian.Uint64(b[o+12:])
		p.Compare = binary.BigEndian.Uint64(b[o+20:])
		o += atomicETHLen
	}
	if h&HdrAETH != 0 {
		a := binary.BigEndian.Uint32(b[o:])
		p.Syndrome = uint8(a >> 24)
		p.MSN = a & mask24
		o += aethLen
	}
	if h&HdrAtomicAck != 0 {
		p.AtomicOrig = binary.BigEndian.Uint64(b[o:])
		o += atomicAckLen
	}
	if h&HdrImm != 0 {
		p.Imm = binary.BigEndian.Uint32(b[o:])
		o += immLen
	}
	if h&HdrIETH != 0 {
		p.InvRKey = binary.BigEndian.Uint32(b[o:])
	}
	return nil
}

// Encode writes the BTH and the extension headers of p.Opcode, from p's
// fields, at the start of dst and returns their length, p.Opcode's
// HeaderLen. PadCnt comes from payloadLen, not p.Pad; 24-bit fields are
// truncated to 24 bits; TVer and the reserved bits are written as 0. For
// an opcode that is not Valid, Encode writes the BTH alone. The caller
// copies the payload to dst[n:], and after it leaves PadLen(payloadLen) pad
// bytes (zeroed, as rxe sends them) and 4 bytes for the ICRC, which Seal
// writes. Encode does not allocate; it panics if dst is shorter than the
// headers.
func Encode(dst []byte, p *Packet, payloadLen int) int {
	info := &opTable[p.Opcode]
	hl := p.Opcode.HeaderLen()
	b := dst[:hl]

	flags := byte(PadLen(payloadLen)) << 4
	if p.SE {
		flags |= 0x80
	}
	if p.M {
		flags |= 0x40
	}
	qpn := p.DestQPN & mask24
	if p.FECN {
		qpn |= 0x80000000
	}
	if p.BECN {
		qpn |= 0x40000000
	}
	psn := p.PSN & mask24
	if p.AckReq {
		psn |= 0x80000000
	}
	b[0] = byte(p.Opcode)
	b[1] = flags
	binary.BigEndian.PutUint16(b[2:], p.PKey)
	binary.BigEndian.PutUint32(b[4:], qpn)
	binary.BigEndian.PutUint32(b[8:], psn)

	h := info.hdrs
	o := bthLen
	if h&HdrDETH != 0 {
		binary.BigEndian.PutUint32(b[o:], p.QKey)
		binary.BigEndian.PutUint32(b[o+4:], p.SrcQPN&mask24)
		o += dethLen
	}
	if h&HdrRETH != 0 {
		binary.BigEndian.PutUint64(b[o:], p.VA)
		binary.BigEndian.PutUint32(b[o+8:], p.RKey)
		binary.BigEndian.PutUint32(b[o+12:], p.DMALen)
		o += rethLen
	}
	if h&HdrAtomicETH != 0 {
		binary.BigEndian.PutUint64(b[o:], p.VA)
		binary.BigEndian.PutUint32(b[o+8:], p.RKey)
		binary.BigEndian.PutUint64(b[o+12:], p.SwapAdd)
		binary.BigEndian.PutUint64(b[o+20:], p.Compare)
		o += atomicETHLen
	}
	if h&HdrAETH != 0 {
		binary.BigEndian.PutUint32(b[o:], uint32(p.Syndrome)<<24|p.MSN&mask24)
		o += aethLen
	}
	if h&HdrAtomicAck != 0 {
		binary.BigEndian.PutUint64(b[o:], p.AtomicOrig)
		o += atomicAckLen
	}
	if h&HdrImm != 0 {
		binary.BigEndian.PutUint32(b[o:], p.Imm)
		o += immLen
	}
	if h&HdrIETH != 0 {
		binary.BigEndian.PutUint32(b[o:], p.InvRKey)
	}
	return hl
}

// PadLen is the number of pad bytes (0..3) after a payload of n bytes.
func PadLen(n int) int { return -n & 3 }

// Len is the length of a whole packet (the UDP payload) of opcode o with a
// payload of payloadLen bytes: headers, payload, pad and ICRC.
func Len(o Opcode, payloadLen int) int {
	return o.HeaderLen() + payloadLen + PadLen(payloadLen) + icrcLen
}
