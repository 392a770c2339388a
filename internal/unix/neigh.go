//go:build linux

package unix

import (
	"encoding/binary"
	"net/netip"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// Neighbour is an entry of the kernel's neighbour table: the link-layer
// address of a host on a directly attached network (ARP for IPv4,
// neighbour discovery for IPv6).
type Neighbour struct {
	Ifindex int
	Addr    netip.Addr
	MAC     []byte // empty while the entry is unresolved
	State   uint16 // NUD_* bits
}

// Usable reports whether the entry holds a link-layer address the kernel
// itself would send to.
func (n *Neighbour) Usable() bool {
	const ok = unix.NUD_REACHABLE | unix.NUD_STALE | unix.NUD_DELAY | unix.NUD_PROBE | unix.NUD_PERMANENT | unix.NUD_NOARP
	return n.State&ok != 0 && len(n.MAC) > 0
}

// Neighbours returns the kernel's IPv4 or IPv6 neighbour table, read
// through rtnetlink (an RTM_GETNEIGH dump, which needs no privilege).
func Neighbours(ipv6 bool) ([]Neighbour, error) {
	family := unix.AF_INET
	if ipv6 {
		family = unix.AF_INET6
	}
	rib, err := syscall.NetlinkRIB(unix.RTM_GETNEIGH, family)
	if err != nil {
		return nil, os.NewSyscallError("netlink", err)
	}
	msgs, err := syscall.ParseNetlinkMessage(rib)
	if err != nil {
		return nil, os.NewSyscallError("netlink", err)
	}
	var out []Neighbour
	for _, m := range msgs {
		if m.Header.Type == unix.NLMSG_DONE {
			break
		}
		if m.Header.Type != unix.RTM_NEWNEIGH {
			continue
		}
		if n, ok := parseNeighbour(m.Data, family); ok {
			out = append(out, n)
		}
	}
	return out, nil
}

// parseNeighbour decodes the body of an RTM_NEWNEIGH message: a struct
// ndmsg (12 bytes) followed by route attributes.
func parseNeighbour(b []byte, family int) (Neighbour, bool) {
	const ndmsgLen = 12
	if len(b) < ndmsgLen || int(b[0]) != family {
		return Neighbour{}, false
	}
	ne := binary.NativeEndian
	n := Neighbour{Ifindex: int(int32(ne.Uint32(b[4:]))), State: ne.Uint16(b[8:])}
	for a := b[ndmsgLen:]; len(a) >= 4; {
		l := int(ne.Uint16(a[0:]))
		if l < 4 || l > len(a) {
			break
		}
		v := a[4:l]
		switch ne.Uint16(a[2:]) {
		case unix.NDA_DST:
			if ip, ok := netip.AddrFromSlice(v); ok {
				n.Addr = ip
			}
		case unix.NDA_LLADDR:
			n.MAC = append([]byte(nil), v...)
		}
		a = a[min((l+3)&^3, len(a)):]
	}
	return n, n.Addr.IsValid()
}
