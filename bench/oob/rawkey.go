package oob

import (
	"encoding/binary"
	"fmt"
	"net"

	"github.com/pvperf/pvperf/perftest"
)

// KeyRaw is the key message of the rdma_cm exchange (-z, -R): perftest's
// struct pingpong_dest as it lies in memory, integers big-endian, sent as
// one message. Its size is that of the sender's struct: 56 bytes up to
// perftest 6.28 (RawKeySizeOld), 64 bytes from 6.29, which added the tail
// markers' address (RawKeySize). A side sends the layout of its peer's
// version and reads either, by the message's length, so that pvperf
// faces both (two perftest binaries of either layout do not face each
// other).
const KeyRaw KeyFormat = 4

// Sizes of the raw key message.
const (
	RawKeySizeOld = 56 // lid, out_reads, qpn, psn, rkey (4 bytes each), 4 of padding, vaddr, gid, srqn, gid_index
	RawKeySize    = 64 // as RawKeySizeOld with the tail markers' address after vaddr
)

// rawKeyNewSince is the first perftest version whose struct pingpong_dest
// has the tail markers' address.
const rawKeyNewSince = 6.29

// rawKeySizeFor returns the size of the raw key message a peer of version
// v reads.
func rawKeySizeFor(v float64) int {
	if v < rawKeyNewSince {
		return RawKeySizeOld
	}
	return RawKeySize
}

// MarshalRawKey returns k as a raw key message of size RawKeySizeOld or
// RawKeySize.
func MarshalRawKey(k *perftest.Dest, size int) ([]byte, error) {
	if size != RawKeySizeOld && size != RawKeySize {
		return nil, fmt.Errorf("oob: encode key: raw size %d, want %d or %d: %w", size, RawKeySizeOld, RawKeySize, ErrMalformed)
	}
	b := make([]byte, size)
	be := binary.BigEndian
	be.PutUint32(b[0:], uint32(k.LID))
	be.PutUint32(b[4:], uint32(k.OutReads))
	be.PutUint32(b[8:], k.QPN)
	be.PutUint32(b[12:], k.PSN)
	be.PutUint32(b[16:], k.RKey)
	be.PutUint64(b[24:], k.VAddr)
	off := 32
	if size == RawKeySize {
		be.PutUint64(b[32:], k.TailMarkersVAddr)
		off = 40
	}
	copy(b[off:off+16], k.GID[:])
	be.PutUint32(b[off+16:], k.SRQN)
	return b, nil
}

// parseRawKey decodes a raw key message of either size.
func parseRawKey(b []byte) (perftest.Dest, error) {
	var k perftest.Dest
	if len(b) != RawKeySizeOld && len(b) != RawKeySize {
		return k, fmt.Errorf("%d bytes, want %d or %d: %w", len(b), RawKeySizeOld, RawKeySize, ErrMalformed)
	}
	be := binary.BigEndian
	for i, max := range []uint32{0xffff, 0xffff, 0xffffff, 0xffffff} {
		if v := be.Uint32(b[4*i:]); v > max {
			return k, fmt.Errorf("field at offset %d is %#x, more than %#x: %w", 4*i, v, max, ErrMalformed)
		}
	}
	k.LID = uint16(be.Uint32(b[0:]))
	k.OutReads = uint16(be.Uint32(b[4:]))
	k.QPN = be.Uint32(b[8:])
	k.PSN = be.Uint32(b[12:])
	k.RKey = be.Uint32(b[16:])
	k.VAddr = be.Uint64(b[24:])
	off := 32
	if len(b) == RawKeySize {
		k.TailMarkersVAddr = be.Uint64(b[32:])
		off = 40
	}
	copy(k.GID[:], b[off:off+16])
	k.SRQN = be.Uint32(b[off+16:])
	return k, nil
}

// MessageConn is a connection that keeps message boundaries: each Write
// sends one message, ReadMessage returns one whole message. The rdma_cm
// exchange is one: a SEND per message over an RC QP. A Conn over a
// MessageConn reads each message whole and fails on one of a size other
// than the exchange's.
type MessageConn interface {
	net.Conn
	// ReadMessage reads the next message into b and returns its length;
	// a message longer than b is an error.
	ReadMessage(b []byte) (int, error)
}

// PeerWatcher is a connection that tells when its peer has gone by other
// means than reading (rdma_cm's DISCONNECTED): WaitPeerClosed uses it.
type PeerWatcher interface {
	// WaitPeerClosed waits until the peer has gone (true) or done is
	// closed (false).
	WaitPeerClosed(done <-chan struct{}) bool
}
