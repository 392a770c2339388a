package unix

import (
	"fmt"
	"net"

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
