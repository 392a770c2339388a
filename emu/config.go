//go:build linux

package emu

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"

	"github.com/pvperf/pvperf/verbs"
)

// EnvVar is the environment variable that configures the emulated devices.
//
// Its value is a list of devices separated by ';'. Each device is a list of
// key=value settings separated by ',':
//
//	profile=unrestricted|pvrdma-hw13|pvrdma-hw14   (default unrestricted)
//	roce=v1|v2                                     (default v2; pvrdma-hw13 only has v1)
//	mtu=256|512|1024|2048|4096                     (active MTU, default 1024)
//	netdev=NAME                                    (interface the GIDs come from;
//	                                                default: the default-route interface;
//	                                                with addr, the interface that holds it)
//	addr=IP                                        (the device's own address on the
//	                                                network: its GIDs, and where it
//	                                                sends and receives packets)
//	transport=auto|copy|roce|tcp                   (how QPs reach peers; default auto)
//
// Transports, as PVRDMA's: copy moves data between the memory of processes
// on this host; roce sends RoCE v2 packets over UDP port 4791 from addr, to
// any RoCE v2 device (another emulated device, or a kernel one such as
// rdma_rxe), or with roce=v1 RoCE v1 frames (Ethertype 0x8915, a GRH
// before the BTH) on the interface that holds addr, which needs
// CAP_NET_RAW; tcp carries the same packets over TCP connections to port
// 4791 of an emulated peer. auto, the default, uses copy when the peer QP
// is on this host and, with addr set, RoCE otherwise, or TCP when UDP
// port 4791 of addr is taken (by rdma_rxe, for example) or raw frames are
// not permitted. A RoCE v2 device in auto mode listens on TCP port 4791
// too, and answers over TCP a peer that fell back to TCP: such a peer
// connects when its QP moves to RTR or it creates an address handle, and
// the device asks an address handle's peer whether it did. When both
// ports 4791 of addr are taken (another process's device has the address),
// auto leaves the device with copy alone. Without addr a device has only
// the copy transport.
//
// The devices are named emu0, emu1, ... in order. Unset or empty means one
// device, emu0, with every default. "off" means no emulated device.
//
// Example: PVPERF_EMU='profile=pvrdma-hw14,roce=v1;profile=pvrdma-hw13,mtu=4096'
const EnvVar = "PVPERF_EMU"

// Profile names.
const (
	ProfileUnrestricted = "unrestricted"
	ProfileHW13         = "pvrdma-hw13"
	ProfileHW14         = "pvrdma-hw14"
)

// Config describes one emulated device.
type Config struct {
	Profile string    // one of the Profile* names
	RoCE    int       // RoCE version of every GID: 1 or 2
	MTU     verbs.MTU // active MTU of the port
	Netdev  string    // interface whose addresses give the GIDs; "" = default

	// Addr is the device's own IP address on the network, for the roce
	// and tcp transports; the zero Addr means none (copy only).
	Addr netip.Addr
	// Transport is one of the Transport* names; "" means TransportAuto.
	Transport string
}

// Transport names.
const (
	TransportAuto = "auto"
	TransportCopy = "copy"
	TransportRoCE = "roce"
	TransportTCP  = "tcp"
)

// DefaultConfig is the device used when nothing is configured.
func DefaultConfig() Config {
	return Config{Profile: ProfileUnrestricted, RoCE: 2, MTU: verbs.MTU1024}
}

// ParseConfig parses the value of EnvVar.
func ParseConfig(s string) ([]Config, error) {
	s = strings.TrimSpace(s)
	switch s {
	case "":
		return []Config{DefaultConfig()}, nil
	case "off", "none":
		return nil, nil
	}
	var out []Config
	for _, dev := range strings.Split(s, ";") {
		dev = strings.TrimSpace(dev)
		if dev == "" {
			continue
		}
		c := DefaultConfig()
		roceSet := false
		seen := map[string]bool{}
		for _, kv := range strings.Split(dev, ",") {
			k, v, ok := strings.Cut(strings.TrimSpace(kv), "=")
			if !ok {
				return nil, fmt.Errorf("%s: %q is not key=value", EnvVar, kv)
			}
			k, v = strings.TrimSpace(k), strings.TrimSpace(v)
			if seen[k] {
				return nil, fmt.Errorf("%s: %s given twice for one device (devices are separated by ';')", EnvVar, k)
			}
			seen[k] = true
			switch k {
			case "profile":
				if _, ok := profiles[v]; !ok {
					return nil, fmt.Errorf("%s: unknown profile %q (want %s, %s or %s)", EnvVar, v, ProfileUnrestricted, ProfileHW13, ProfileHW14)
				}
				c.Profile = v
			case "roce":
				switch strings.TrimPrefix(strings.ToLower(v), "v") {
				case "1":
					c.RoCE = 1
				case "2":
					c.RoCE = 2
				default:
					return nil, fmt.Errorf("%s: roce must be v1 or v2, not %q", EnvVar, v)
				}
				roceSet = true
			case "mtu":
				n, err := strconv.Atoi(v)
				if err != nil || verbs.MTUFromBytes(n) == 0 {
					return nil, fmt.Errorf("%s: mtu must be 256, 512, 1024, 2048 or 4096, not %q", EnvVar, v)
				}
				c.MTU = verbs.MTUFromBytes(n)
			case "netdev":
				c.Netdev = v
			case "addr":
				a, err := netip.ParseAddr(v)
				if err != nil || a.IsUnspecified() || a.IsMulticast() || a.Zone() != "" {
					return nil, fmt.Errorf("%s: addr must be a unicast IP address, not %q", EnvVar, v)
				}
				c.Addr = a.Unmap()
			case "transport":
				switch v {
				case TransportAuto, TransportCopy, TransportRoCE, TransportTCP:
					c.Transport = v
				default:
					return nil, fmt.Errorf("%s: transport must be auto, copy, roce or tcp, not %q", EnvVar, v)
				}
			default:
				return nil, fmt.Errorf("%s: unknown setting %q", EnvVar, k)
			}
		}
		if c.Profile == ProfileHW13 {
			if roceSet && c.RoCE != 1 {
				return nil, fmt.Errorf("%s: profile %s supports RoCE v1 only", EnvVar, ProfileHW13)
			}
			c.RoCE = 1
		}
		if (c.Transport == TransportRoCE || c.Transport == TransportTCP) && !c.Addr.IsValid() {
			return nil, fmt.Errorf("%s: transport=%s needs addr=IP, the device's address", EnvVar, c.Transport)
		}
		out = append(out, c)
	}
	return out, nil
}

// Devices returns the emulated devices configured by EnvVar.
func Devices() ([]verbs.Device, error) {
	cfgs, err := ParseConfig(os.Getenv(EnvVar))
	if err != nil {
		return nil, err
	}
	var out []verbs.Device
	for i, c := range cfgs {
		d, err := NewDevice(fmt.Sprintf("emu%d", i), c)
		if err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	return out, nil
}

// profile holds what an emulated device can do.
type profile struct {
	name   string
	attr   verbs.DeviceAttr
	roce   []int // RoCE versions allowed
	partID uint32
}

// The limits of the PVRDMA profiles follow the defaults of QEMU's pvrdma
// device model (max_qp 1024, max_cq 2048, max_qp_wr and max_cqe 1024,
// 4 SGEs, max_qp_rd_atom 16), which mirror what ESXi hosts report; the
// maximum MR size is the driver's page-directory limit (262144 pages).
// ESXi 6.5 (hardware version 13) has RoCE v1, RC and UD with at most
// three UD QPs and no SRQ; ESXi 6.7 (hardware version 14) adds SRQs and
// RoCE v2. Neither has inline data or atomic operations. The unrestricted
// profile lifts those limits so that every perftest mode can run.
var profiles = map[string]*profile{
	ProfileHW13: {
		name:   ProfileHW13,
		roce:   []int{1},
		partID: 0x0820,
		attr: pvrdmaAttr(func(a *verbs.DeviceAttr) {
			a.HWVersion = 13
			a.MaxUDQP = 3
		}),
	},
	ProfileHW14: {
		name:   ProfileHW14,
		roce:   []int{1, 2},
		partID: 0x0820,
		attr: pvrdmaAttr(func(a *verbs.DeviceAttr) {
			a.HWVersion = 14
			a.MaxSRQ = 512
			a.MaxSRQWR = 1024
			a.MaxSRQSGE = 4
		}),
	},
	ProfileUnrestricted: {
		name:   ProfileUnrestricted,
		roce:   []int{1, 2},
		partID: 0x0820,
		attr: verbs.DeviceAttr{
			FWVersion:       "3.0.0",
			MaxMRSize:       1 << 34,
			PageSizeCap:     0xfffff000,
			VendorID:        0x15ad,
			VendorPartID:    0x0820,
			HWVersion:       0x100,
			MaxQP:           maxQPs,
			MaxQPWR:         16384,
			Flags:           verbs.DevicePortActiveEvent | verbs.DeviceRCRNRNAKGen,
			MaxSGE:          32,
			MaxSGERd:        32,
			MaxCQ:           maxCQs,
			MaxCQE:          1 << 18,
			MaxMR:           maxMRs,
			MaxPD:           maxMRs,
			MaxQPRdAtom:     16,
			MaxResRdAtom:    16 * maxQPs,
			MaxQPInitRdAtom: 16,
			AtomicCap:       verbs.AtomicHCA,
			MaxAH:           maxQPs,
			MaxSRQ:          maxSRQs,
			MaxSRQWR:        16384,
			MaxSRQSGE:       32,
			MaxPKeys:        1,
			LocalCAAckDelay: 15,
			PhysPortCnt:     1,
			QPTypes:         []verbs.QPType{verbs.RC, verbs.UC, verbs.UD},
			MaxInlineData:   1024,
			NumCompVectors:  1,
		},
	},
}

func pvrdmaAttr(mod func(*verbs.DeviceAttr)) verbs.DeviceAttr {
	a := verbs.DeviceAttr{
		FWVersion:       "3.0.0",
		MaxMRSize:       1 << 30,
		PageSizeCap:     0xfffff000,
		VendorID:        0x15ad,
		VendorPartID:    0x0820,
		MaxQP:           1024,
		MaxQPWR:         1024,
		Flags:           verbs.DevicePortActiveEvent | verbs.DeviceRCRNRNAKGen,
		MaxSGE:          4,
		MaxSGERd:        4,
		MaxCQ:           2048,
		MaxCQE:          1024,
		MaxMR:           2048,
		MaxPD:           2048,
		MaxQPRdAtom:     16,
		MaxResRdAtom:    16 * 1024,
		MaxQPInitRdAtom: 16,
		AtomicCap:       verbs.AtomicNone,
		MaxAH:           1024,
		MaxPKeys:        1,
		LocalCAAckDelay: 15,
		PhysPortCnt:     1,
		QPTypes:         []verbs.QPType{verbs.RC, verbs.UD},
		NumCompVectors:  1,
	}
	mod(&a)
	return a
}

// netdev reads the interface the device's GIDs come from: the one that
// holds its address, else the configured or default one.
func (d *Device) netdev() (netdevInfo, error) {
	if !d.cfg.Addr.IsValid() {
		return readNetdev(d.cfg.Netdev)
	}
	nd, err := netdevOf(d.cfg.Addr)
	if err == nil && d.cfg.Netdev != "" && nd.name != d.cfg.Netdev {
		return netdevInfo{}, fmt.Errorf("emu: addr %v is on interface %s, not on netdev=%s", d.cfg.Addr, nd.name, d.cfg.Netdev)
	}
	return nd, err
}

// netdevInfo is what the GID table is built from.
type netdevInfo struct {
	own   bool // the device's own address (Config.Addr) is addrs[0]
	name  string
	mtu   int // the interface's MTU (0: unknown)
	mac   [6]byte
	addrs []netip.Addr
}

// defaultNetdev returns the interface of the default route, else the first
// interface that is up, has an address and is not a loopback, else lo.
func defaultNetdev() string {
	if b, err := os.ReadFile("/proc/net/route"); err == nil {
		for _, line := range strings.Split(string(b), "\n")[1:] {
			f := strings.Fields(line)
			if len(f) > 2 && f[1] == "00000000" {
				return f[0]
			}
		}
	}
	ifs, _ := net.Interfaces()
	for _, ifc := range ifs {
		if ifc.Flags&net.FlagUp == 0 || ifc.Flags&net.FlagLoopback != 0 {
			continue
		}
		if addrs, _ := ifc.Addrs(); len(addrs) > 0 {
			return ifc.Name
		}
	}
	return "lo"
}

func readNetdev(name string) (netdevInfo, error) {
	if name == "" {
		name = defaultNetdev()
	}
	ifc, err := net.InterfaceByName(name)
	if err != nil {
		return netdevInfo{}, fmt.Errorf("emu: netdev %q: %w", name, err)
	}
	info := netdevInfo{name: name}
	copy(info.mac[:], ifc.HardwareAddr)
	addrs, err := ifc.Addrs()
	if err != nil {
		return netdevInfo{}, fmt.Errorf("emu: addresses of %q: %w", name, err)
	}
	for _, a := range addrs {
		ipn, ok := a.(*net.IPNet)
		if !ok {
			continue
		}
		ip, ok := netip.AddrFromSlice(ipn.IP)
		if !ok {
			continue
		}
		info.addrs = append(info.addrs, ip.Unmap())
	}
	return info, nil
}

// netdevOf returns the interface that holds addr, with addr as its only
// address: a device with an address of its own has that one GID.
func netdevOf(addr netip.Addr) (netdevInfo, error) {
	ifs, err := net.Interfaces()
	if err != nil {
		return netdevInfo{}, fmt.Errorf("emu: interfaces: %w", err)
	}
	for _, ifc := range ifs {
		addrs, _ := ifc.Addrs()
		for _, a := range addrs {
			ipn, ok := a.(*net.IPNet)
			if !ok {
				continue
			}
			ip, ok := netip.AddrFromSlice(ipn.IP)
			if !ok {
				continue
			}
			// Any address of a loopback prefix is local (127.0.0.2, ...).
			if ip.Unmap() == addr || (ifc.Flags&net.FlagLoopback != 0 && ipn.Contains(addr.AsSlice())) {
				info := netdevInfo{own: true, name: ifc.Name, mtu: ifc.MTU, addrs: []netip.Addr{addr}}
				copy(info.mac[:], ifc.HardwareAddr)
				return info, nil
			}
		}
	}
	return netdevInfo{}, fmt.Errorf("emu: addr %s: %w", addr, errAddrNotLocal)
}

// gidTable builds the GID table of a device, as the PVRDMA device shows it:
// index 0 is the link-local GID made from the MAC (modified EUI-64), then
// one GID per IPv4 address (v4-mapped) and per IPv6 address that is not
// link-local. Every entry has the device's single RoCE version.
func gidTable(nd netdevInfo, roce int) []verbs.GIDEntry {
	typ := verbs.GIDTypeRoCEv1
	if roce == 2 {
		typ = verbs.GIDTypeRoCEv2
	}
	var gids []verbs.GID
	if nd.own {
		// A device with an address of its own has that one GID: packets
		// leave from that address, and a link-local GID would name
		// none the network transports can send from.
		gids = []verbs.GID{verbs.GIDFromAddr(nd.addrs[0])}
		return []verbs.GIDEntry{{Index: 0, GID: gids[0], Type: typ, Netdev: nd.name}}
	}
	var ll verbs.GID
	ll[0], ll[1] = 0xfe, 0x80
	ll[8] = nd.mac[0] ^ 0x02
	ll[9], ll[10] = nd.mac[1], nd.mac[2]
	ll[11], ll[12] = 0xff, 0xfe
	ll[13], ll[14], ll[15] = nd.mac[3], nd.mac[4], nd.mac[5]
	gids = append(gids, ll)
	for _, a := range nd.addrs {
		if a.Is4() {
			gids = append(gids, verbs.GIDFromAddr(a))
		}
	}
	for _, a := range nd.addrs {
		if a.Is6() && !a.IsLinkLocalUnicast() {
			gids = append(gids, verbs.GIDFromAddr(a))
		}
	}
	if len(gids) > maxGIDs {
		gids = gids[:maxGIDs]
	}
	out := make([]verbs.GIDEntry, len(gids))
	for i, g := range gids {
		out[i] = verbs.GIDEntry{Index: i, GID: g, Type: typ, Netdev: nd.name}
	}
	return out
}

var errBadConfig = errors.New("invalid emulated device configuration")
