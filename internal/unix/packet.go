//go:build linux

package unix

import (
	"fmt"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// PacketConn is a link-layer datagram socket (AF_PACKET, SOCK_DGRAM) for
// one Ethertype on one interface: reads return the frames' payloads and
// their source MACs; writes add the Ethernet header for a destination MAC.
// It needs CAP_NET_RAW.
type PacketConn struct {
	f       *os.File
	rc      syscall.RawConn
	ifindex int
	proto   uint16 // the Ethertype in network byte order
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

// ListenPacket opens a PacketConn for ethertype on interface ifindex.
func ListenPacket(ifindex int, ethertype uint16) (*PacketConn, error) {
	proto := htons(ethertype)
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_DGRAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, int(proto))
	if err != nil {
		return nil, os.NewSyscallError("socket", err)
	}
	if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: proto, Ifindex: ifindex}); err != nil {
		unix.Close(fd)
		return nil, os.NewSyscallError("bind", err)
	}
	for _, o := range [][2]int{{unix.SO_RCVBUFFORCE, unix.SO_RCVBUF}, {unix.SO_SNDBUFFORCE, unix.SO_SNDBUF}} {
		if unix.SetsockoptInt(fd, unix.SOL_SOCKET, o[0], 4<<20) != nil {
			_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, o[1], 4<<20)
		}
	}
	f := os.NewFile(uintptr(fd), fmt.Sprintf("packet:%d:%#04x", ifindex, ethertype))
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return nil, err
	}
	return &PacketConn{f: f, rc: rc, ifindex: ifindex, proto: proto}, nil
}

// ReadFrom reads one frame's payload into b and returns its length and the
// sender's MAC. It blocks until a frame arrives or the socket is closed
// (then it fails).
func (c *PacketConn) ReadFrom(b []byte) (int, [6]byte, error) {
	var n int
	var mac [6]byte
	var rerr error
	err := c.rc.Read(func(fd uintptr) bool {
		var from unix.Sockaddr
		for {
			n, from, rerr = unix.Recvfrom(int(fd), b, 0)
			if rerr == unix.EAGAIN {
				return false
			}
			ll, ok := from.(*unix.SockaddrLinklayer)
			if rerr == nil && ok && ll.Pkttype == unix.PACKET_OUTGOING {
				continue // the socket also sees what this host sends
			}
			if ok {
				copy(mac[:], ll.Addr[:6])
			}
			return true
		}
	})
	if err != nil {
		return 0, mac, err
	}
	return n, mac, rerr
}

// WriteTo sends b as the payload of one frame to mac.
func (c *PacketConn) WriteTo(b []byte, mac [6]byte) error {
	to := &unix.SockaddrLinklayer{Protocol: c.proto, Ifindex: c.ifindex, Halen: 6}
	copy(to.Addr[:], mac[:])
	var werr error
	err := c.rc.Write(func(fd uintptr) bool {
		werr = unix.Sendto(int(fd), b, 0, to)
		return werr != unix.EAGAIN
	})
	if err != nil {
		return err
	}
	return werr
}

// Drops returns the frames the kernel dropped for want of room in the
// socket's receive buffer since the last call (PACKET_STATISTICS, which
// reading resets).
func (c *PacketConn) Drops() uint64 {
	var st *unix.TpacketStats
	_ = c.rc.Control(func(fd uintptr) {
		st, _ = unix.GetsockoptTpacketStats(int(fd), unix.SOL_PACKET, unix.PACKET_STATISTICS)
	})
	if st == nil {
		return 0
	}
	return uint64(st.Drops)
}

// Close closes the socket; blocked reads return.
func (c *PacketConn) Close() error { return c.f.Close() }
