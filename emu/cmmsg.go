//go:build linux

package emu

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/pvperf/pvperf/verbs"
)

// The emulated connection manager's messages travel over TCP. Each is an
// 8-byte header followed by a body of the length the header gives;
// integers are big-endian:
//
//	header   0  4  magic "PVCM"
//	         4  1  version (1)
//	         5  1  type: 1 REQ, 2 REP, 3 RTU, 4 REJ, 5 DREQ, 6 DREP,
//	                     7 SIDR_REQ, 8 SIDR_REP
//	         6  2  body length
//
// REQ, REP, SIDR_REQ and SIDR_REP carry the sender's parameters (40 bytes)
// and then its private data:
//
//	 0  2  port space (0x0106 TCP, 0x0111 UDP)
//	 2  1  flags: bit 0 SRQ; the other bits are 0
//	 3  1  active MTU of the sender's device (1 = 256 ... 5 = 4096)
//	 4  4  QP number (24 bits)
//	 8  4  starting PSN (24 bits)
//	12  4  Q_Key (SIDR_REP)
//	16 16  the sender's GID
//	32  1  responder resources
//	33  1  initiator depth
//	34  1  flow control (0 or 1)
//	35  1  retry count (0..7)
//	36  1  RNR retry count (0..7)
//	37  1  status (SIDR_REP: 0 success, 1 service ID not supported,
//	       2 rejected, ... 5; 0 in the others)
//	38  1  reserved, 0
//	39  1  private data length: at most 56 (REQ), 196 (REP), 216
//	       (SIDR_REQ), 136 (SIDR_REP), as in the IB CM's messages
//	40  -  private data
//
// REJ carries a reason (2 bytes, IB CM reject reason, not 0), a reserved
// 0 byte, the private data length (at most 148) and the private data. RTU,
// DREQ and DREP have no body. The body length must be exactly what the
// fields say; anything else is malformed.
const (
	msgHdrLen    = 8
	msgVersion   = 1
	msgParamsLen = 40
	msgRejLen    = 4
	msgMaxBody   = msgParamsLen + sidrReqPrivateData
)

var msgMagic = [4]byte{'P', 'V', 'C', 'M'}

// msgType is the type of a connection manager message.
type msgType uint8

// Message types.
const (
	msgREQ msgType = 1 + iota
	msgREP
	msgRTU
	msgREJ
	msgDREQ
	msgDREP
	msgSIDRREQ
	msgSIDRREP
)

var msgNames = [...]string{"", "REQ", "REP", "RTU", "REJ", "DREQ", "DREP", "SIDR_REQ", "SIDR_REP"}

func (t msgType) String() string {
	if int(t) < len(msgNames) && t != 0 {
		return msgNames[t]
	}
	return fmt.Sprintf("message type %d", uint8(t))
}

// Sizes of the IB CM messages' private data, which the messages carry
// at most.
const (
	reqPrivateData     = 56
	repPrivateData     = 196
	rejPrivateData     = 148
	sidrReqPrivateData = 216
	sidrRepPrivateData = 136
	// cmaHdrLen is what the kernel's rdma_cm puts at the start of the
	// private data of REQ and SIDR_REQ for an IP port space (struct
	// cma_hdr): its callers have that much less room.
	cmaHdrLen = 36
)

// hasParams reports whether messages of type t carry the parameter block.
func (t msgType) hasParams() bool {
	return t == msgREQ || t == msgREP || t == msgSIDRREQ || t == msgSIDRREP
}

// maxPrivateData is how much private data messages of type t carry.
func (t msgType) maxPrivateData() int {
	switch t {
	case msgREQ:
		return reqPrivateData
	case msgREP:
		return repPrivateData
	case msgREJ:
		return rejPrivateData
	case msgSIDRREQ:
		return sidrReqPrivateData
	case msgSIDRREP:
		return sidrRepPrivateData
	}
	return 0
}

// cmMsg is a decoded message; the fields a type does not carry are zero.
type cmMsg struct {
	typ       msgType
	ps        verbs.PortSpace
	srq       bool
	mtu       verbs.MTU
	qpn       uint32
	psn       uint32
	qkey      uint32
	gid       verbs.GID
	respRes   uint8
	initDepth uint8
	flowCtl   uint8
	retry     uint8
	rnrRetry  uint8
	status    uint8  // SIDR_REP
	reason    uint16 // REJ
	pdata     []byte
}

// errBadMsg is wrapped by every error about a malformed message.
var errBadMsg = errors.New("malformed connection manager message")

func badMsg(format string, args ...any) error {
	return fmt.Errorf("%w: %s", errBadMsg, fmt.Sprintf(format, args...))
}

// encode returns the message on the wire. It checks the fields as decode
// does, so that what one side sends the other accepts.
func (m *cmMsg) encode() ([]byte, error) {
	if len(m.pdata) > m.typ.maxPrivateData() {
		return nil, badMsg("%v with %d bytes of private data, at most %d", m.typ, len(m.pdata), m.typ.maxPrivateData())
	}
	var body []byte
	switch {
	case m.typ.hasParams():
		body = make([]byte, msgParamsLen, msgParamsLen+len(m.pdata))
		binary.BigEndian.PutUint16(body[0:], uint16(m.ps))
		if m.srq {
			body[2] = 1
		}
		body[3] = uint8(m.mtu)
		binary.BigEndian.PutUint32(body[4:], m.qpn)
		binary.BigEndian.PutUint32(body[8:], m.psn)
		binary.BigEndian.PutUint32(body[12:], m.qkey)
		copy(body[16:32], m.gid[:])
		body[32], body[33], body[34] = m.respRes, m.initDepth, m.flowCtl
		body[35], body[36], body[37] = m.retry, m.rnrRetry, m.status
		body[39] = uint8(len(m.pdata))
		body = append(body, m.pdata...)
	case m.typ == msgREJ:
		body = make([]byte, msgRejLen, msgRejLen+len(m.pdata))
		binary.BigEndian.PutUint16(body[0:], m.reason)
		body[3] = uint8(len(m.pdata))
		body = append(body, m.pdata...)
	}
	if _, err := decodeBody(m.typ, body); err != nil {
		return nil, err
	}
	b := make([]byte, msgHdrLen, msgHdrLen+len(body))
	copy(b, msgMagic[:])
	b[4], b[5] = msgVersion, uint8(m.typ)
	binary.BigEndian.PutUint16(b[6:], uint16(len(body)))
	return append(b, body...), nil
}

// decodeHeader checks a message header and returns the type and body
// length it announces.
func decodeHeader(h []byte) (msgType, int, error) {
	if len(h) < msgHdrLen {
		return 0, 0, badMsg("header of %d bytes", len(h))
	}
	if [4]byte(h[0:4]) != msgMagic {
		return 0, 0, badMsg("bad magic % x", h[0:4])
	}
	if h[4] != msgVersion {
		return 0, 0, badMsg("version %d, want %d", h[4], msgVersion)
	}
	t := msgType(h[5])
	if t < msgREQ || t > msgSIDRREP {
		return 0, 0, badMsg("unknown message type %d", h[5])
	}
	n := int(binary.BigEndian.Uint16(h[6:]))
	if n > msgMaxBody {
		return 0, 0, badMsg("%v body of %d bytes, at most %d", t, n, msgMaxBody)
	}
	return t, n, nil
}

// decodeMsg decodes b, which must hold exactly one message.
func decodeMsg(b []byte) (*cmMsg, error) {
	t, n, err := decodeHeader(b)
	if err != nil {
		return nil, err
	}
	if len(b) != msgHdrLen+n {
		return nil, badMsg("%v of %d bytes, its header says %d", t, len(b), msgHdrLen+n)
	}
	return decodeBody(t, b[msgHdrLen:])
}

// readMsg reads one message from r. A stream that ends before the first
// byte gives io.EOF, one that ends inside a message io.ErrUnexpectedEOF.
func readMsg(r io.Reader) (*cmMsg, error) {
	var h [msgHdrLen]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return nil, err
	}
	t, n, err := decodeHeader(h[:])
	if err != nil {
		return nil, err
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(r, body); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	return decodeBody(t, body)
}

// decodeBody decodes and checks the body of a message of type t.
func decodeBody(t msgType, b []byte) (*cmMsg, error) {
	switch {
	case t.hasParams():
		return decodeParams(t, b)
	case t == msgREJ:
		return decodeREJ(b)
	case t == msgRTU || t == msgDREQ || t == msgDREP:
		if len(b) != 0 {
			return nil, badMsg("%v with a body of %d bytes", t, len(b))
		}
		return &cmMsg{typ: t}, nil
	}
	return nil, badMsg("unknown message type %d", uint8(t))
}

func decodeParams(t msgType, b []byte) (*cmMsg, error) {
	if len(b) < msgParamsLen {
		return nil, badMsg("%v body of %d bytes, at least %d", t, len(b), msgParamsLen)
	}
	m := &cmMsg{
		typ: t, ps: verbs.PortSpace(binary.BigEndian.Uint16(b[0:])), srq: b[2]&1 != 0, mtu: verbs.MTU(b[3]),
		qpn: binary.BigEndian.Uint32(b[4:]), psn: binary.BigEndian.Uint32(b[8:]), qkey: binary.BigEndian.Uint32(b[12:]),
		gid:     verbs.GID(b[16:32]),
		respRes: b[32], initDepth: b[33], flowCtl: b[34], retry: b[35], rnrRetry: b[36], status: b[37],
	}
	switch {
	case m.ps != verbs.PortSpaceTCP && m.ps != verbs.PortSpaceUDP:
		return nil, badMsg("%v: unknown port space %#x", t, uint16(m.ps))
	case b[2]&^1 != 0 || b[38] != 0:
		return nil, badMsg("%v: reserved bits set", t)
	case m.mtu.Bytes() == 0:
		return nil, badMsg("%v: invalid MTU %d", t, b[3])
	case m.qpn > 0xFFFFFF || m.psn > 0xFFFFFF:
		return nil, badMsg("%v: QP number %#x or PSN %#x exceeds 24 bits", t, m.qpn, m.psn)
	case m.flowCtl > 1 || m.retry > 7 || m.rnrRetry > 7:
		return nil, badMsg("%v: flow control %d, retry count %d or RNR retry count %d out of range", t, m.flowCtl, m.retry, m.rnrRetry)
	case m.status > 5 || (m.status != 0 && t != msgSIDRREP):
		return nil, badMsg("%v: status %d", t, m.status)
	}
	if err := decodePrivateData(m, b[39], b[msgParamsLen:]); err != nil {
		return nil, err
	}
	return m, nil
}

func decodeREJ(b []byte) (*cmMsg, error) {
	if len(b) < msgRejLen {
		return nil, badMsg("REJ body of %d bytes, at least %d", len(b), msgRejLen)
	}
	m := &cmMsg{typ: msgREJ, reason: binary.BigEndian.Uint16(b[0:])}
	switch {
	case m.reason == 0:
		return nil, badMsg("REJ without a reason")
	case b[2] != 0:
		return nil, badMsg("REJ: reserved byte set")
	}
	if err := decodePrivateData(m, b[3], b[msgRejLen:]); err != nil {
		return nil, err
	}
	return m, nil
}

// decodePrivateData checks that rest is exactly n bytes of private data,
// no more than m's type carries, and stores a copy in m.
func decodePrivateData(m *cmMsg, n uint8, rest []byte) error {
	if int(n) > m.typ.maxPrivateData() {
		return badMsg("%v with %d bytes of private data, at most %d", m.typ, n, m.typ.maxPrivateData())
	}
	if len(rest) != int(n) {
		return badMsg("%v: %d bytes of private data announced, %d present", m.typ, n, len(rest))
	}
	if n > 0 {
		m.pdata = append([]byte(nil), rest...)
	}
	return nil
}
