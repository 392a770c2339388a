//go:build linux

package uverbs

import (
	"bufio"
	"encoding/hex"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/pvperf/pvperf/internal/unix"
	"github.com/pvperf/pvperf/verbs"
	"github.com/pvperf/pvperf/verbs/pvrdma"
)

// pvrdmaAH is a vmw_pvrdma address handle. The kernel has no part in it: it
// is the address vector UD work requests carry, with the PD number and
// the destination MAC, which the program resolves itself.
type pvrdmaAH struct {
	*pvrdma.AH
	pd     *PD
	closed atomic.Bool
}

var _ pvrdma.AddressVector = (*pvrdmaAH)(nil)

func (p *pvrdmaProvider) createAH(pd *PD, attr verbs.AHAttr) (verbs.AH, error) {
	if !attr.IsGlobal {
		return nil, verbs.Errorf(unix.EINVAL, "RoCE address handles need a GRH (is_global)")
	}
	if attr.Port == 0 {
		attr.Port = 1
	}
	if p.caps.ports > 0 && int(attr.Port) > p.caps.ports {
		return nil, verbs.Errorf(unix.EINVAL, "no port %d (the device has %d)", attr.Port, p.caps.ports)
	}
	mac, err := pvrdmaDestMAC(pd.c.dev.name, &attr)
	if err != nil {
		return nil, err
	}
	return &pvrdmaAH{AH: pvrdma.NewAH(attr, pvrdmaPDN(pd), mac), pd: pd}, nil
}

func (ah *pvrdmaAH) Close() error {
	c := ah.pd.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if ah.closed.Load() {
		return nil
	}
	ah.closed.Store(true)
	ah.pd.release()
	return nil
}

// pvrdmaDestMAC finds the MAC address packets to attr's destination go
// to. A link-local GID built from a MAC (EUI-64, as the default GID of
// every RoCE port is) carries it; an IP-based GID (IPv4-mapped, or any
// other IPv6 address) is resolved like the kernel resolves the address:
// the neighbour entry of the next hop on the interface of the source GID.
func pvrdmaDestMAC(dev string, attr *verbs.AHAttr) ([6]byte, error) {
	g := attr.GRH.DGID
	switch {
	case g[0] == 0xff:
		return [6]byte{}, verbs.Errorf(verbs.ErrNotSupported, "multicast destination gid %v", g)
	case g.IsZero():
		return [6]byte{}, verbs.Errorf(unix.EINVAL, "destination gid is zero")
	case g.IsLinkLocal() && g[11] == 0xff && g[12] == 0xfe:
		return pvrdma.MACFromGID(g), nil
	}
	netdev := ""
	if e, err := gidEntry(dev, int(attr.Port), int(attr.GRH.SGIDIndex)); err == nil {
		netdev = e.Netdev
	}
	mac, err := pvrdmaNeighbour(netdev, g.Addr())
	if err != nil {
		return [6]byte{}, fmt.Errorf("resolve the destination mac address of %v (gid %v): %w", g.Addr(), g, err)
	}
	return mac, nil
}

// pvrdmaNeighbour returns the MAC address of the next hop towards dst
// out of interface netdev ("" when unknown). Tests replace it.
var pvrdmaNeighbour = resolveNeighbour

// What resolveNeighbour reads and does; tests replace them.
var (
	procNet           = "/proc/net"
	neighbourWait     = time.Second
	neighbourInterval = 20 * time.Millisecond
	localMAC          = interfaceMAC
	neighbours6       = unix.Neighbours
	provokeNeighbour  = sendDiscard
)

// resolveNeighbour looks dst up as the kernel would route a packet to it:
// the MAC of a local interface for one of this host's own addresses, else
// the neighbour entry of the next hop (dst, or the gateway of the route to
// it). Without an entry it makes the kernel resolve one by sending a UDP
// datagram to dst's discard port, and looks again for up to a second.
func resolveNeighbour(netdev string, dst netip.Addr) ([6]byte, error) {
	if mac, ok := localMAC(dst); ok {
		return mac, nil
	}
	hop, dev := nextHop(netdev, dst)
	deadline := time.Now().Add(neighbourWait)
	for tries := 0; ; tries++ {
		mac, ok, err := lookupNeighbour(dev, hop)
		if err != nil {
			return [6]byte{}, err
		}
		if ok {
			return mac, nil
		}
		if time.Now().After(deadline) {
			break
		}
		if tries == 0 {
			provokeNeighbour(dst, dev)
		}
		time.Sleep(neighbourInterval)
	}
	via := ""
	if hop != dst {
		via = " via " + hop.String()
	}
	on := ""
	if dev != "" {
		on = " on " + dev
	}
	return [6]byte{}, verbs.Errorf(unix.ETIMEDOUT, "no neighbour entry for %s%s%s after %v", dst, via, on, neighbourWait)
}

// interfaceMAC returns the MAC of the local interface that has address a.
func interfaceMAC(a netip.Addr) ([6]byte, bool) {
	ifs, err := net.Interfaces()
	if err != nil {
		return [6]byte{}, false
	}
	for _, ifc := range ifs {
		if len(ifc.HardwareAddr) != 6 {
			continue
		}
		addrs, err := ifc.Addrs()
		if err != nil {
			continue
		}
		for _, x := range addrs {
			if n, ok := x.(*net.IPNet); ok {
				if ip, ok := netip.AddrFromSlice(n.IP); ok && ip.Unmap() == a {
					return [6]byte(ifc.HardwareAddr), true
				}
			}
		}
	}
	return [6]byte{}, false
}

// sendDiscard sends one UDP datagram to dst's discard port, which makes
// the kernel resolve the neighbour it goes through.
func sendDiscard(dst netip.Addr, netdev string) {
	if dst.Is6() && dst.IsLinkLocalUnicast() && netdev != "" {
		dst = dst.WithZone(netdev)
	}
	c, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(netip.AddrPortFrom(dst, 9)))
	if err != nil {
		return
	}
	_, _ = c.Write([]byte{0})
	_ = c.Close()
}

// lookupNeighbour returns the MAC address of a complete neighbour entry for
// ip (on netdev, unless netdev is empty).
func lookupNeighbour(netdev string, ip netip.Addr) ([6]byte, bool, error) {
	if ip.Is4() {
		return arpEntry(filepath.Join(procNet, "arp"), netdev, ip)
	}
	ns, err := neighbours6(true)
	if err != nil {
		return [6]byte{}, false, err
	}
	for _, n := range ns {
		if n.Addr.WithZone("") != ip.WithZone("") || !n.Usable() || len(n.MAC) != 6 {
			continue
		}
		if netdev != "" {
			if ifc, err := net.InterfaceByIndex(n.Ifindex); err != nil || ifc.Name != netdev {
				continue
			}
		}
		return [6]byte(n.MAC), true, nil
	}
	return [6]byte{}, false, nil
}

// arpEntry reads the IPv4 neighbour table, /proc/net/arp:
//
//	IP address       HW type     Flags       HW address            Mask     Device
//	192.0.2.1        0x1         0x2         02:fc:00:00:00:05     *        eth0
//
// An entry is complete when its flags have ATF_COM (0x2).
func arpEntry(path, netdev string, ip netip.Addr) ([6]byte, bool, error) {
	f, err := os.Open(path)
	if err != nil {
		return [6]byte{}, false, err
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	s.Scan() // header
	for s.Scan() {
		fs := strings.Fields(s.Text())
		if len(fs) < 6 || fs[0] != ip.String() || (netdev != "" && fs[5] != netdev) {
			continue
		}
		flags, err := strconv.ParseUint(strings.TrimPrefix(fs[2], "0x"), 16, 32)
		hw, herr := net.ParseMAC(fs[3])
		if err != nil || herr != nil || flags&0x2 == 0 || len(hw) != 6 {
			continue
		}
		return [6]byte(hw), true, nil
	}
	return [6]byte{}, false, s.Err()
}

// nextHop returns where a packet to dst goes first: the gateway of the
// most specific route to it (out of netdev, when known), or dst itself
// when it is on a directly attached network or no route says otherwise;
// and the interface it leaves through.
func nextHop(netdev string, dst netip.Addr) (netip.Addr, string) {
	var rs []route
	if dst.Is4() {
		rs = routes4(filepath.Join(procNet, "route"))
	} else {
		rs = routes6(filepath.Join(procNet, "ipv6_route"))
	}
	best := -1
	for i, r := range rs {
		if (netdev != "" && r.dev != netdev) || !r.dst.Contains(dst) {
			continue
		}
		if best < 0 || r.dst.Bits() > rs[best].dst.Bits() || r.dst.Bits() == rs[best].dst.Bits() && r.metric < rs[best].metric {
			best = i
		}
	}
	if best < 0 {
		return dst, netdev
	}
	if r := rs[best]; r.gw.IsValid() {
		return r.gw, r.dev
	}
	return dst, rs[best].dev
}

// route is a usable unicast route of the main table.
type route struct {
	dst    netip.Prefix
	gw     netip.Addr // invalid: directly attached
	metric uint32
	dev    string
}

// Route flags (linux/route.h, linux/ipv6_route.h).
const (
	rtfUp      = 0x1
	rtfGateway = 0x2
	rtfReject  = 0x200
	rtfLocal   = 0x80000000
)

// routes4 reads /proc/net/route, whose addresses are 32-bit words in host
// (little-endian) byte order, in hexadecimal:
//
//	Iface  Destination  Gateway   Flags  RefCnt  Use  Metric  Mask      MTU  Window  IRTT
//	eth0   000200C0     00000000  0001   0       0    0       00FFFFFF  0    0       0
func routes4(path string) []route {
	var out []route
	forFields(path, 8, func(fs []string) {
		dst, ok1 := hexIPv4(fs[1])
		gw, ok2 := hexIPv4(fs[2])
		mask, ok3 := hexIPv4(fs[7])
		flags, err1 := strconv.ParseUint(fs[3], 16, 32)
		metric, err2 := strconv.ParseUint(fs[6], 10, 32)
		if !ok1 || !ok2 || !ok3 || err1 != nil || err2 != nil || flags&rtfUp == 0 || flags&rtfReject != 0 {
			return
		}
		m := mask.As4()
		bits := 0
		for _, b := range m {
			for ; b&0x80 != 0; b <<= 1 {
				bits++
			}
		}
		r := route{dst: netip.PrefixFrom(dst, bits).Masked(), metric: uint32(metric), dev: fs[0]}
		if flags&rtfGateway != 0 && !gw.IsUnspecified() {
			r.gw = gw
		}
		out = append(out, r)
	})
	return out
}

func hexIPv4(s string) (netip.Addr, bool) {
	v, err := strconv.ParseUint(s, 16, 32)
	if err != nil {
		return netip.Addr{}, false
	}
	return netip.AddrFrom4([4]byte{byte(v), byte(v >> 8), byte(v >> 16), byte(v >> 24)}), true
}

// routes6 reads /proc/net/ipv6_route: destination, prefix length, source,
// source prefix length, next hop, metric, reference count, use, flags and
// interface, all numbers in hexadecimal, addresses in network byte order:
//
//	00000000000000000000000000000000 00 00000000000000000000000000000000 00 fd000000000000000000000000000001 00000400 00000002 00000000 00000003 eth0
func routes6(path string) []route {
	var out []route
	forFields(path, 10, func(fs []string) {
		dst, ok1 := hexIPv6(fs[0])
		gw, ok2 := hexIPv6(fs[4])
		bits, err1 := strconv.ParseUint(fs[1], 16, 8)
		metric, err2 := strconv.ParseUint(fs[5], 16, 32)
		flags, err3 := strconv.ParseUint(fs[8], 16, 32)
		if !ok1 || !ok2 || err1 != nil || err2 != nil || err3 != nil || bits > 128 || fs[9] == "lo" ||
			flags&rtfUp == 0 || flags&(rtfReject|rtfLocal) != 0 || dst.IsMulticast() {
			return
		}
		r := route{dst: netip.PrefixFrom(dst, int(bits)).Masked(), metric: uint32(metric), dev: fs[9]}
		if flags&rtfGateway != 0 && !gw.IsUnspecified() {
			r.gw = gw
		}
		out = append(out, r)
	})
	return out
}

func hexIPv6(s string) (netip.Addr, bool) {
	var b [16]byte
	if len(s) != 32 {
		return netip.Addr{}, false
	}
	if _, err := hex.Decode(b[:], []byte(s)); err != nil {
		return netip.Addr{}, false
	}
	return netip.AddrFrom16(b), true
}

// forFields calls f with the fields of each line of path that has at least
// n of them.
func forFields(path string, n int, f func([]string)) {
	file, err := os.Open(path)
	if err != nil {
		return
	}
	defer file.Close()
	s := bufio.NewScanner(file)
	for s.Scan() {
		if fs := strings.Fields(s.Text()); len(fs) >= n {
			f(fs)
		}
	}
}
