//go:build linux

package emu

import (
	"fmt"
	"net"
	"net/netip"

	"github.com/pvperf/pvperf/verbs"
)

// cmDev is what the connection manager knows of an emulated device: what
// an open context of it reports (Device.Open builds the same node GUID,
// GID table and active MTU from the device's netdev), read without
// opening it.
type cmDev struct {
	dev  *Device
	guid uint64
	mtu  verbs.MTU
	gids []verbs.GIDEntry
}

// cmView reads the device's netdev now, as Device.Open does.
func (d *Device) cmView() (*cmDev, error) {
	nd, err := d.netdev()
	if err != nil {
		return nil, err
	}
	return &cmDev{dev: d, guid: guidFromMAC(nd.mac), mtu: d.cfg.MTU, gids: gidTable(nd, d.cfg.RoCE)}, nil
}

// gidIndex returns the index of the device's GID equal to a, or -1.
func (v *cmDev) gidIndex(a netip.Addr) int {
	g := verbs.GIDFromAddr(a.Unmap())
	for _, e := range v.gids {
		if e.GID == g {
			return e.Index
		}
	}
	return -1
}

// bestGID returns the index of the GID perftest would choose on its own:
// of the address family asked for, then not link-local, then of the
// higher RoCE version.
func (v *cmDev) bestGID(preferIPv6 bool) int { return verbs.BestGID(v.gids, preferIPv6) }

// errNoDevice says that no emulated device owns a local address.
type errNoDevice struct{ addr netip.Addr }

func (e *errNoDevice) Error() string {
	if !e.addr.IsValid() {
		return "no emulated RDMA device"
	}
	return fmt.Sprintf("no emulated RDMA device on the interface of %v", e.addr)
}

// device returns the emulated device that local address src belongs to
// and the index of the GID an id bound to src uses. A loopback (or
// unspecified) address belongs to the first device, as the kernel binds
// loopback ids to its first RDMA device; any other address to the device
// whose GID table holds it. The GID is the one of src itself if the device
// has it, else the device's best GID for the address family preferIPv6
// says. The error is an *errNoDevice or the netdev's.
func (m *cm) device(src netip.Addr, preferIPv6 bool) (*cmDev, int, error) {
	src = src.Unmap()
	loop := src.IsLoopback() || src.IsUnspecified()
	for _, d := range m.devs {
		v, err := d.cmView()
		if err != nil {
			if loop {
				return nil, -1, err
			}
			continue
		}
		i := v.gidIndex(src)
		if !loop && i < 0 {
			continue
		}
		if i < 0 {
			i = v.bestGID(preferIPv6)
		}
		if i < 0 {
			return nil, -1, &errNoDevice{addr: src}
		}
		return v, i, nil
	}
	if len(m.devs) == 0 {
		return nil, -1, &errNoDevice{}
	}
	return nil, -1, &errNoDevice{addr: src}
}

// routeSource returns the local address the kernel's routing table
// chooses to reach dst. Connecting a UDP socket sends nothing.
func routeSource(dst netip.Addr) (netip.Addr, error) {
	c, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(netip.AddrPortFrom(dst, 9)))
	if err != nil {
		return netip.Addr{}, err
	}
	defer c.Close()
	a, ok := c.LocalAddr().(*net.UDPAddr)
	if !ok {
		return netip.Addr{}, fmt.Errorf("route to %v: local address %v", dst, c.LocalAddr())
	}
	return a.AddrPort().Addr().Unmap(), nil
}

// addrPortOf returns a TCP address as a netip.AddrPort (IPv4 unmapped).
func addrPortOf(a net.Addr) netip.AddrPort {
	t, ok := a.(*net.TCPAddr)
	if !ok {
		return netip.AddrPort{}
	}
	ap := t.AddrPort()
	return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
}
