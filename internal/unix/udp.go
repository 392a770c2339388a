//go:build linux

package unix

import (
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

// GROSize returns the segment size of a read that the kernel coalesced
// (the UDP_GRO control message in oob), or 0.
func GROSize(oob []byte) int {
	for len(oob) >= unix.CmsgLen(0) {
		h := (*unix.Cmsghdr)(unsafe.Pointer(&oob[0]))
		l := int(h.Len)
		if l < unix.CmsgLen(0) || l > len(oob) {
			return 0
		}
		if h.Level == unix.IPPROTO_UDP && h.Type == unix.UDP_GRO && l >= unix.CmsgLen(4) {
			return int(*(*int32)(unsafe.Pointer(&oob[unix.CmsgLen(0)])))
		}
		oob = oob[min(unix.CmsgSpace(l-unix.CmsgLen(0)), len(oob)):]
	}
	return 0
}
