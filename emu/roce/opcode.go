package roce

// Port is the UDP destination port of RoCE v2 (ROCE_V2_UDP_DPORT).
const Port = 4791

// Opcode is the BTH opcode: the transport in the top 3 bits (RC 0x00, UC
// 0x20, UD 0x60) and the operation in the low 5 bits.
type Opcode uint8

// The opcodes this package encodes and parses.
const (
	RCSendFirst      Opcode = 0x00
	RCSendMiddle     Opcode = 0x01
	RCSendLast       Opcode = 0x02
	RCSendLastImm    Opcode = 0x03
	RCSendOnly       Opcode = 0x04
	RCSendOnlyImm    Opcode = 0x05
	RCWriteFirst     Opcode = 0x06
	RCWriteMiddle    Opcode = 0x07
	RCWriteLast      Opcode = 0x08
	RCWriteLastImm   Opcode = 0x09
	RCWriteOnly      Opcode = 0x0A
	RCWriteOnlyImm   Opcode = 0x0B
	RCReadRequest    Opcode = 0x0C
	RCReadRespFirst  Opcode = 0x0D
	RCReadRespMiddle Opcode = 0x0E
	RCReadRespLast   Opcode = 0x0F
	RCReadRespOnly   Opcode = 0x10
	RCAck            Opcode = 0x11
	RCAtomicAck      Opcode = 0x12
	RCCompareSwap    Opcode = 0x13
	RCFetchAdd       Opcode = 0x14
	RCSendLastInv    Opcode = 0x16
	RCSendOnlyInv    Opcode = 0x17

	UCSendFirst    Opcode = 0x20
	UCSendMiddle   Opcode = 0x21
	UCSendLast     Opcode = 0x22
	UCSendLastImm  Opcode = 0x23
	UCSendOnly     Opcode = 0x24
	UCSendOnlyImm  Opcode = 0x25
	UCWriteFirst   Opcode = 0x26
	UCWriteMiddle  Opcode = 0x27
	UCWriteLast    Opcode = 0x28
	UCWriteLastImm Opcode = 0x29
	UCWriteOnly    Opcode = 0x2A
	UCWriteOnlyImm Opcode = 0x2B

	UDSendOnly    Opcode = 0x64
	UDSendOnlyImm Opcode = 0x65

	// CNP is the RoCE v2 congestion notification packet: a BTH (with
	// BECN set) followed by 16 reserved bytes, which Parse returns as the
	// payload. rdma_rxe neither sends nor accepts it.
	CNP Opcode = 0x81
)

// Hdr is a set of properties of an opcode: the extension headers it
// carries, whether it carries a payload, its position in a message, and
// whether it is a request or a response.
type Hdr uint16

// Opcode properties.
const (
	HdrRETH      Hdr = 1 << iota // RDMA extended transport header, 16 bytes
	HdrAETH                      // ACK extended transport header, 4 bytes
	HdrDETH                      // datagram extended transport header, 8 bytes
	HdrImm                       // immediate data, 4 bytes
	HdrIETH                      // invalidate extended transport header, 4 bytes
	HdrAtomicETH                 // atomic extended transport header, 28 bytes
	HdrAtomicAck                 // atomic ACK extended transport header, 8 bytes
	HdrPayload                   // the opcode carries a payload
	HdrFirst                     // first packet of a multi-packet message
	HdrMiddle                    // middle packet of a multi-packet message
	HdrLast                      // last packet of a multi-packet message
	HdrOnly                      // the only packet of its message
	HdrRequest                   // sent by a requester
	HdrResponse                  // sent by a responder
)

// Header lengths in bytes.
const (
	bthLen       = 12
	rethLen      = 16
	aethLen      = 4
	dethLen      = 8
	immLen       = 4
	iethLen      = 4
	atomicETHLen = 28
	atomicAckLen = 8
	icrcLen      = 4
)

type opInfo struct {
	hdrs Hdr
	hlen uint8
	name string
}

var opTable = buildOpTable()

func buildOpTable() *[256]opInfo {
	var t [256]opInfo
	const (
		send  = HdrPayload | HdrRequest
		resp  = HdrResponse
		first = HdrFirst
		mid   = HdrMiddle
		last  = HdrLast
		only  = HdrOnly
	)
	set := func(o Opcode, h Hdr, name string) {
		n := bthLen
		for _, x := range [...]struct {
			h Hdr
			n int
		}{
			{HdrRETH, rethLen}, {HdrAETH, aethLen}, {HdrDETH, dethLen},
			{HdrImm, immLen}, {HdrIETH, iethLen},
			{HdrAtomicETH, atomicETHLen}, {HdrAtomicAck, atomicAckLen},
		} {
			if h&x.h != 0 {
				n += x.n
			}
		}
		t[o] = opInfo{hdrs: h, hlen: uint8(n), name: name}
	}
	// SEND and RDMA WRITE: the same in RC and UC, 0x20 apart.
	for _, tr := range [...]struct {
		base Opcode
		name string
	}{{0x00, "RC "}, {0x20, "UC "}} {
		b, p := tr.base, tr.name
		set(b+0x00, send|first, p+"SEND_FIRST")
		set(b+0x01, send|mid, p+"SEND_MIDDLE")
		set(b+0x02, send|last, p+"SEND_LAST")
		set(b+0x03, send|last|HdrImm, p+"SEND_LAST_IMM")
		set(b+0x04, send|only, p+"SEND_ONLY")
		set(b+0x05, send|only|HdrImm, p+"SEND_ONLY_IMM")
		set(b+0x06, send|first|HdrRETH, p+"WRITE_FIRST")
		set(b+0x07, send|mid, p+"WRITE_MIDDLE")
		set(b+0x08, send|last, p+"WRITE_LAST")
		set(b+0x09, send|last|HdrImm, p+"WRITE_LAST_IMM")
		set(b+0x0A, send|only|HdrRETH, p+"WRITE_ONLY")
		set(b+0x0B, send|only|HdrRETH|HdrImm, p+"WRITE_ONLY_IMM")
	}
	set(RCReadRequest, HdrRequest|only|HdrRETH, "RC READ_REQUEST")
	set(RCReadRespFirst, resp|HdrPayload|first|HdrAETH, "RC READ_RESP_FIRST")
	set(RCReadRespMiddle, resp|HdrPayload|mid, "RC READ_RESP_MIDDLE")
	set(RCReadRespLast, resp|HdrPayload|last|HdrAETH, "RC READ_RESP_LAST")
	set(RCReadRespOnly, resp|HdrPayload|only|HdrAETH, "RC READ_RESP_ONLY")
	set(RCAck, resp|only|HdrAETH, "RC ACK")
	set(RCAtomicAck, resp|only|HdrAETH|HdrAtomicAck, "RC ATOMIC_ACK")
	set(RCCompareSwap, HdrRequest|only|HdrAtomicETH, "RC COMPARE_SWAP")
	set(RCFetchAdd, HdrRequest|only|HdrAtomicETH, "RC FETCH_ADD")
	set(RCSendLastInv, send|last|HdrIETH, "RC SEND_LAST_INV")
	set(RCSendOnlyInv, send|only|HdrIETH, "RC SEND_ONLY_INV")
	set(UDSendOnly, send|only|HdrDETH, "UD SEND_ONLY")
	set(UDSendOnlyImm, send|only|HdrDETH|HdrImm, "UD SEND_ONLY_IMM")
	set(CNP, HdrPayload|only, "CNP")
	return &t
}

// Hdrs returns the properties of o, or 0 if this package does not know o.
func (o Opcode) Hdrs() Hdr { return opTable[o].hdrs }

// Valid reports whether this package encodes and parses o.
func (o Opcode) Valid() bool { return opTable[o].hdrs != 0 }

// String returns the transport and operation, such as "RC SEND_FIRST", or
// "opcode 0xNN" for an opcode this package does not know.
func (o Opcode) String() string {
	if n := opTable[o].name; n != "" {
		return n
	}
	const hex = "0123456789abcdef"
	return "opcode 0x" + string([]byte{hex[o>>4], hex[o&0xF]})
}

// HeaderLen is the length in bytes of the BTH and the extension headers of
// o; for an opcode that is not Valid it is the length of the BTH alone.
func (o Opcode) HeaderLen() int {
	if n := opTable[o].hlen; n != 0 {
		return int(n)
	}
	return bthLen
}
