package main

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
)

// The rdmacm-mux message of QEMU 7.2 (contrib/rdmacm-mux/rdmacm-mux.h): a C
// struct in the host's byte order, not packed. On x86-64:
//
//	offset size field
//	     0    4 hdr.msg_type  (0 request, 1 response)
//	     4    4 hdr.op_code   (0 REG, 1 UNREG, 2 MAD)
//	     8   16 hdr.sgid      (the GID, network order)
//	    24    4 hdr.err_code  (0 OK, 1 EINVAL, 2 EEXIST, 3 EACCES, 4 ENOTFOUND)
//	    28    4 padding
//	    32    4 umad_len
//	    36   64 umad.hdr      (struct ib_user_mad)
//	   100  256 umad.mad
//	   356    4 padding       (8-byte alignment)
const (
	msgSize      = 360
	offMsgType   = 0
	offOpCode    = 4
	offGID       = 8
	offErrCode   = 24
	offUmadLen   = 32
	offUmad      = 36
	offMad       = 100
	madDataBytes = 256
)

const (
	msgTypeReq  = 0
	msgTypeResp = 1
)

// opCode is the request of a message.
type opCode uint32

const (
	opReg   opCode = 0
	opUnreg opCode = 1
	opMAD   opCode = 2
)

func (o opCode) String() string {
	switch o {
	case opReg:
		return "REG"
	case opUnreg:
		return "UNREG"
	case opMAD:
		return "MAD"
	}
	return fmt.Sprintf("op %d", uint32(o))
}

// errCode is a reply's status.
type errCode uint32

const (
	errOK       errCode = 0
	errInval    errCode = 1
	errNotFound errCode = 4
)

var errNotRequest = errors.New("not a request")

// request is a decoded message from the device.
type request struct {
	op      opCode
	gid     netip.Addr // the 16-byte GID as an IPv6 address
	umadLen uint32
}

// decode reads a message the device sent. The device sends only requests.
func decode(b []byte) (request, error) {
	if len(b) != msgSize {
		return request{}, fmt.Errorf("message of %d bytes, want %d", len(b), msgSize)
	}
	le := binary.LittleEndian
	if t := le.Uint32(b[offMsgType:]); t != msgTypeReq {
		return request{}, fmt.Errorf("message type %d: %w", t, errNotRequest)
	}
	return request{
		op:      opCode(le.Uint32(b[offOpCode:])),
		gid:     netip.AddrFrom16([16]byte(b[offGID : offGID+16])),
		umadLen: le.Uint32(b[offUmadLen:]),
	}, nil
}

// reply turns the request in b into its response with status code, in place.
func reply(b []byte, code errCode) {
	le := binary.LittleEndian
	le.PutUint32(b[offMsgType:], msgTypeResp)
	le.PutUint32(b[offErrCode:], uint32(code))
}
