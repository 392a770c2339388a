//go:build linux

package unix

import (
	"encoding/binary"
	"fmt"
	"net"
	"unsafe"

	"golang.org/x/sys/unix"
)

// PrepareRoCESocket sets the options a socket carrying RoCE v2 packets
// needs: the don't-fragment bit with path MTU discovery off (IPv4
// IP_PMTUDISC_DO, IPv6 IPV6_PMTUDISC_DO), so that an unconnected socket's
// packets leave with IP ID 0 and DF as rdma_rxe's do (the ICRC covers both),
// and socket buffers of bufBytes each way (forced beyond the sysctl limits
// when the process may).
func PrepareRoCESocket(c *net.UDPConn, ipv6 bool, bufBytes int) error {
	rc, err := c.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	err = rc.Control(func(fd uintptr) {
		if ipv6 {
			serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_IPV6, unix.IPV6_MTU_DISCOVER, unix.IPV6_PMTUDISC_DO)
		} else {
			serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_IP, unix.IP_MTU_DISCOVER, unix.IP_PMTUDISC_DO)
		}
		if serr != nil {
			serr = fmt.Errorf("set don't-fragment: %w", serr)
			return
		}
		for _, o := range [][2]int{{unix.SO_RCVBUFFORCE, unix.SO_RCVBUF}, {unix.SO_SNDBUFFORCE, unix.SO_SNDBUF}} {
			if unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, o[0], bufBytes) != nil {
				_ = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, o[1], bufBytes)
			}
		}
	})
	if err != nil {
		return err
	}
	return serr
}

// EnableUDPGRO asks the kernel to coalesce consecutive datagrams of one
// flow into one read (UDP_GRO); ReadGRO then reports the segment size. It
// reports whether the kernel accepted.
func EnableUDPGRO(c *net.UDPConn) bool {
	rc, err := c.SyscallConn()
	if err != nil {
		return false
	}
	ok := false
	_ = rc.Control(func(fd uintptr) {
		ok = unix.SetsockoptInt(int(fd), unix.IPPROTO_UDP, unix.UDP_GRO, 1) == nil
	})
	return ok
}

// UDPSegmentSpace is the room the control message of PutUDPSegment takes.
var UDPSegmentSpace = unix.CmsgSpace(2)

// PutUDPSegment writes into oob (at least UDPSegmentSpace bytes) the
// control message that makes one send a batch of datagrams of size bytes
// each, the last possibly shorter (UDP generic segmentation offload), and
// returns the message.
func PutUDPSegment(oob []byte, size uint16) []byte {
	h := (*unix.Cmsghdr)(unsafe.Pointer(&oob[0]))
	h.Level = unix.IPPROTO_UDP
	h.Type = unix.UDP_SEGMENT
	h.SetLen(unix.CmsgLen(2))
	*(*uint16)(unsafe.Pointer(&oob[unix.CmsgLen(0)])) = size
	return oob[:UDPSegmentSpace]
}

// EnableDropCount asks the kernel to report, with each datagram read, how
// many datagrams it has dropped for the socket so far: those that found its
// receive buffer full (SO_RXQ_OVFL). It reports whether the kernel
// accepted.
func EnableDropCount(c *net.UDPConn) bool {
	rc, err := c.SyscallConn()
	if err != nil {
		return false
	}
	ok := false
	_ = rc.Control(func(fd uintptr) {
		ok = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RXQ_OVFL, 1) == nil
	})
	return ok
}

// UDPControl reads the control messages of a datagram read: the segment
// size of a read the kernel coalesced (UDP_GRO; 0 if none), and the
// socket's drop count when the kernel gave it (EnableDropCount; it gives
// it only once non-zero). Malformed messages end the scan.
func UDPControl(oob []byte) (seg int, drops uint32, haveDrops bool) {
	const hdr = unix.SizeofCmsghdr // Len (a word), Level, Type (int32 each)
	for len(oob) >= hdr {
		var l uint64
		if hdr == 16 {
			l = binary.NativeEndian.Uint64(oob)
		} else {
			l = uint64(binary.NativeEndian.Uint32(oob))
		}
		if l < hdr || l > uint64(len(oob)) {
			break
		}
		level, typ := int32(binary.NativeEndian.Uint32(oob[hdr-8:])), int32(binary.NativeEndian.Uint32(oob[hdr-4:]))
		data := oob[unix.CmsgLen(0):l]
		switch {
		case level == unix.IPPROTO_UDP && typ == unix.UDP_GRO && len(data) >= 4:
			seg = int(int32(binary.NativeEndian.Uint32(data)))
		case level == unix.SOL_SOCKET && typ == unix.SO_RXQ_OVFL && len(data) >= 4:
			drops, haveDrops = binary.NativeEndian.Uint32(data), true
		}
		oob = oob[min(unix.CmsgSpace(int(l)-unix.CmsgLen(0)), len(oob)):]
	}
	return seg, drops, haveDrops
}
