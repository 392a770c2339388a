//go:build linux

package uverbs

import (
	"errors"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pvperf/pvperf/internal/unix"
	"github.com/pvperf/pvperf/verbs"
	"github.com/pvperf/pvperf/verbs/pvrdma"
)

// The neighbour resolution of vmw_pvrdma address handles, on a /proc/net
// of the tests' making.

const (
	pvARPHeader = "IP address       HW type     Flags       HW address            Mask     Device\n"
	pvRoute     = "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n" +
		"eth0\t00000000\t010200C0\t0003\t0\t0\t100\t00000000\t0\t0\t0\n" + // default via 192.0.2.1
		"eth0\t000200C0\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0\n" + // 192.0.2.0/24
		"eth1\t0000010A\t00000000\t0001\t0\t0\t0\t0000FFFF\t0\t0\t0\n" + // 10.1.0.0/16
		"eth1\t0000000A\tFE00010A\t0003\t0\t0\t0\t000000FF\t0\t0\t0\n" + // 10.0.0.0/8 via 10.1.0.254
		"eth1\t0000000A\tFD00010A\t0003\t0\t0\t5\t000000FF\t0\t0\t0\n" + // the same, worse metric
		"eth1\t00000B0A\t00000000\t0201\t0\t0\t0\t0000FFFF\t0\t0\t0\n" // 10.11.0.0/16 unreachable
	pvIPv6Route = "" +
		"fd000000000000000000000000000000 40 00000000000000000000000000000000 00 00000000000000000000000000000000 00000100 00000001 00000000 00000001     eth0\n" +
		"fe800000000000000000000000000000 40 00000000000000000000000000000000 00 00000000000000000000000000000000 00000100 00000002 00000000 00000001     eth0\n" +
		"00000000000000000000000000000000 00 00000000000000000000000000000000 00 fd000000000000000000000000000001 00000400 00000002 00000000 00000003     eth0\n" +
		"fd000000000000000000000000000002 80 00000000000000000000000000000000 00 00000000000000000000000000000000 00000000 00000003 00000000 80200001     eth0\n" +
		"00000000000000000000000000000001 80 00000000000000000000000000000000 00 00000000000000000000000000000000 00000000 00000004 00000000 80200001       lo\n"
)

// pvProcNet points procNet at a directory with these files.
func pvProcNet(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	old := procNet
	procNet = dir
	t.Cleanup(func() { procNet = old })
	return dir
}

// pvNoLocal makes no address local, and restores the lookup after t.
func pvNoLocal(t *testing.T) {
	old, oldProvoke, oldWait := localMAC, provokeNeighbour, neighbourWait
	localMAC = func(netip.Addr) ([6]byte, bool) { return [6]byte{}, false }
	t.Cleanup(func() { localMAC, provokeNeighbour, neighbourWait = old, oldProvoke, oldWait })
}

func TestPVRDMARoutes(t *testing.T) {
	pvProcNet(t, map[string]string{"route": pvRoute, "ipv6_route": pvIPv6Route})
	for _, c := range []struct {
		netdev, dst string
		hop, dev    string
	}{
		{"eth0", "192.0.2.77", "192.0.2.77", "eth0"},     // on link
		{"eth0", "198.51.100.9", "192.0.2.1", "eth0"},    // default route
		{"", "198.51.100.9", "192.0.2.1", "eth0"},        // any interface
		{"eth1", "10.1.2.3", "10.1.2.3", "eth1"},         // the /16 beats the /8
		{"eth1", "10.2.3.4", "10.1.0.254", "eth1"},       // the /8 of the lower metric
		{"eth1", "10.11.0.5", "10.1.0.254", "eth1"},      // unreachable routes are skipped
		{"eth1", "198.51.100.9", "198.51.100.9", "eth1"}, // no route out of eth1
		{"eth0", "fd00::9", "fd00::9", "eth0"},           // on link
		{"eth0", "2001:db8::1", "fd00::1", "eth0"},       // default route
		{"", "fe80::1", "fe80::1", "eth0"},
		{"", "fd00::2", "fd00::2", "eth0"}, // the local route is not a next hop
	} {
		hop, dev := nextHop(c.netdev, netip.MustParseAddr(c.dst))
		if hop.String() != c.hop || dev != c.dev {
			t.Errorf("next hop to %s out of %q: %v on %q, want %s on %q", c.dst, c.netdev, hop, dev, c.hop, c.dev)
		}
	}
	if rs := routes4(filepath.Join(procNet, "missing")); rs != nil {
		t.Errorf("routes of a missing file: %v", rs)
	}
}

func TestPVRDMAARP(t *testing.T) {
	dir := pvProcNet(t, map[string]string{"arp": pvARPHeader +
		"192.0.2.1        0x1         0x2         02:fc:00:00:00:05     *        eth0\n" +
		"192.0.2.7        0x1         0x0         00:00:00:00:00:00     *        eth0\n" + // incomplete
		"192.0.2.8        0x1         0x6         02:fc:00:00:00:08     *        eth1\n"})
	path := filepath.Join(dir, "arp")
	for _, c := range []struct {
		netdev, ip string
		mac        [6]byte
		ok         bool
	}{
		{"eth0", "192.0.2.1", [6]byte{2, 0xfc, 0, 0, 0, 5}, true},
		{"", "192.0.2.1", [6]byte{2, 0xfc, 0, 0, 0, 5}, true},
		{"eth1", "192.0.2.1", [6]byte{}, false},
		{"eth0", "192.0.2.7", [6]byte{}, false},
		{"", "192.0.2.8", [6]byte{2, 0xfc, 0, 0, 0, 8}, true},
		{"", "192.0.2.9", [6]byte{}, false},
	} {
		mac, ok, err := arpEntry(path, c.netdev, netip.MustParseAddr(c.ip))
		if err != nil || ok != c.ok || mac != c.mac {
			t.Errorf("arp entry of %s on %q: %x, %v, %v", c.ip, c.netdev, mac, ok, err)
		}
	}
	if _, _, err := arpEntry(filepath.Join(dir, "missing"), "", netip.MustParseAddr("192.0.2.1")); err == nil {
		t.Error("a missing arp table is not an error")
	}
}

// TestPVRDMAResolveIPv4: without an entry the resolver provokes one and
// waits for it; the gateway is what it looks up for a routed destination.
func TestPVRDMAResolveIPv4(t *testing.T) {
	dir := pvProcNet(t, map[string]string{"route": pvRoute, "arp": pvARPHeader})
	pvNoLocal(t)
	var mu sync.Mutex
	var provoked []string
	provokeNeighbour = func(dst netip.Addr, netdev string) {
		mu.Lock()
		provoked = append(provoked, dst.String()+"%"+netdev)
		mu.Unlock()
		go func() {
			time.Sleep(30 * time.Millisecond)
			f, _ := os.OpenFile(filepath.Join(dir, "arp"), os.O_APPEND|os.O_WRONLY, 0)
			_, _ = f.WriteString("192.0.2.1        0x1         0x2         02:fc:00:00:00:05     *        eth0\n")
			_ = f.Close()
		}()
	}
	mac, err := resolveNeighbour("eth0", netip.MustParseAddr("198.51.100.9"))
	if err != nil || mac != [6]byte{2, 0xfc, 0, 0, 0, 5} {
		t.Fatalf("resolve 198.51.100.9 via its gateway: %x, %v", mac, err)
	}
	if len(provoked) != 1 || provoked[0] != "198.51.100.9%eth0" {
		t.Errorf("provoked %v, want one datagram to 198.51.100.9 out of eth0", provoked)
	}
	// Found at once: nothing sent.
	provoked = nil
	if mac, err := resolveNeighbour("", netip.MustParseAddr("192.0.2.1")); err != nil || mac[5] != 5 || provoked != nil {
		t.Errorf("resolve a known neighbour: %x, %v, provoked %v", mac, err, provoked)
	}
	// Never found: a timeout that says what is missing.
	provokeNeighbour = func(netip.Addr, string) {}
	neighbourWait = 50 * time.Millisecond
	start := time.Now()
	_, err = resolveNeighbour("eth0", netip.MustParseAddr("192.0.2.44"))
	if !errors.Is(err, unix.ETIMEDOUT) || !strings.Contains(err.Error(), "192.0.2.44") || !strings.Contains(err.Error(), "eth0") {
		t.Errorf("unresolvable neighbour: %v", err)
	}
	if d := time.Since(start); d < neighbourWait || d > 10*time.Second {
		t.Errorf("gave up after %v, want about %v", d, neighbourWait)
	}
	_, err = resolveNeighbour("eth1", netip.MustParseAddr("10.2.3.4"))
	if !errors.Is(err, unix.ETIMEDOUT) || !strings.Contains(err.Error(), "via 10.1.0.254 on eth1") {
		t.Errorf("unresolvable gateway: %v", err)
	}
	// A local address is this host's own interface.
	localMAC = func(a netip.Addr) ([6]byte, bool) { return [6]byte{1, 2, 3, 4, 5, 6}, a.String() == "192.0.2.200" }
	if mac, err := resolveNeighbour("eth0", netip.MustParseAddr("192.0.2.200")); err != nil || mac != [6]byte{1, 2, 3, 4, 5, 6} {
		t.Errorf("resolve a local address: %x, %v", mac, err)
	}
}

func TestPVRDMAResolveIPv6(t *testing.T) {
	// The routes name an interface of this host, which the neighbour
	// entries refer to by index.
	ifs, err := net.Interfaces()
	if err != nil {
		t.Skip(err)
	}
	var ifc *net.Interface
	for i := range ifs {
		if ifs[i].Flags&net.FlagLoopback == 0 {
			ifc = &ifs[i]
			break
		}
	}
	if ifc == nil {
		t.Skip("no interface but loopback")
	}
	pvProcNet(t, map[string]string{"ipv6_route": strings.ReplaceAll(pvIPv6Route, " eth0\n", " "+ifc.Name+"\n")})
	pvNoLocal(t)
	old := neighbours6
	t.Cleanup(func() { neighbours6 = old })
	neighbours6 = func(v6 bool) ([]unix.Neighbour, error) {
		if !v6 {
			t.Errorf("ipv4 neighbours asked for an ipv6 destination")
		}
		return []unix.Neighbour{
			{Ifindex: ifc.Index, Addr: netip.MustParseAddr("fd00::1"), MAC: []byte{2, 0, 0, 0, 0, 1}, State: 0x02}, // REACHABLE
			{Ifindex: ifc.Index, Addr: netip.MustParseAddr("fd00::7"), State: 0x20},                                // FAILED
		}, nil
	}
	provokeNeighbour = func(netip.Addr, string) {}
	neighbourWait = 30 * time.Millisecond
	if mac, err := resolveNeighbour("", netip.MustParseAddr("2001:db8::5")); err != nil || mac != [6]byte{2, 0, 0, 0, 0, 1} {
		t.Errorf("resolve via the ipv6 default gateway: %x, %v", mac, err)
	}
	if mac, err := resolveNeighbour(ifc.Name, netip.MustParseAddr("fd00::1")); err != nil || mac[5] != 1 {
		t.Errorf("resolve on %s: %x, %v", ifc.Name, mac, err)
	}
	if _, err := resolveNeighbour("no-such-if", netip.MustParseAddr("fd00::1")); !errors.Is(err, unix.ETIMEDOUT) {
		t.Errorf("an entry on another interface: %v", err)
	}
	if _, err := resolveNeighbour("", netip.MustParseAddr("fd00::7")); !errors.Is(err, unix.ETIMEDOUT) {
		t.Errorf("a failed entry: %v", err)
	}
	neighbours6 = func(bool) ([]unix.Neighbour, error) { return nil, unix.EPERM }
	if _, err := resolveNeighbour("", netip.MustParseAddr("fd00::1")); !errors.Is(err, unix.EPERM) {
		t.Errorf("an unreadable neighbour table: %v", err)
	}
}

// TestPVRDMADestMAC: which GIDs carry their MAC, which are looked up.
func TestPVRDMADestMAC(t *testing.T) {
	var asked []string
	old := pvrdmaNeighbour
	pvrdmaNeighbour = func(netdev string, dst netip.Addr) ([6]byte, error) {
		asked = append(asked, dst.String())
		return [6]byte{9, 9, 9, 9, 9, 9}, nil
	}
	t.Cleanup(func() { pvrdmaNeighbour = old })
	for _, c := range []struct {
		gid   string
		mac   [6]byte
		asked string
	}{
		{"fe80::250:56ff:fe8a:1b2c", [6]byte{0x00, 0x50, 0x56, 0x8a, 0x1b, 0x2c}, ""},
		{"fe80::0250:56ff:fe00:1", [6]byte{0x00, 0x50, 0x56, 0x00, 0x00, 0x01}, ""},
		{"fe80::1234:5678:9abc:def0", [6]byte{9, 9, 9, 9, 9, 9}, "fe80::1234:5678:9abc:def0"}, // not EUI-64
		{"::ffff:10.0.0.1", [6]byte{9, 9, 9, 9, 9, 9}, "10.0.0.1"},
		{"2001:db8::1", [6]byte{9, 9, 9, 9, 9, 9}, "2001:db8::1"},
	} {
		asked = nil
		g, _ := verbs.ParseGID(c.gid)
		mac, err := pvrdmaDestMAC("none", &verbs.AHAttr{IsGlobal: true, Port: 1, GRH: verbs.GRH{DGID: g}})
		if err != nil || mac != c.mac || (c.asked == "") != (asked == nil) || (asked != nil && asked[0] != c.asked) {
			t.Errorf("gid %s: mac %x, %v, looked up %v", c.gid, mac, err, asked)
		}
	}
	if _, err := pvrdmaDestMAC("none", &verbs.AHAttr{IsGlobal: true}); !errors.Is(err, unix.EINVAL) {
		t.Errorf("zero gid: %v", err)
	}
	if got := pvrdma.MACFromGID(verbs.GID{0xfe, 0x80, 8: 0x02, 9: 0x50, 10: 0x56, 11: 0xff, 12: 0xfe, 13: 1, 14: 2, 15: 3}); got != [6]byte{0, 0x50, 0x56, 1, 2, 3} {
		t.Errorf("mac of an eui-64 gid: %x", got)
	}
}

// TestPVRDMAInterfaceMAC finds this host's own addresses.
func TestPVRDMAInterfaceMAC(t *testing.T) {
	ifs, err := net.Interfaces()
	if err != nil {
		t.Skip(err)
	}
	for _, ifc := range ifs {
		if len(ifc.HardwareAddr) != 6 {
			continue
		}
		addrs, _ := ifc.Addrs()
		for _, a := range addrs {
			n, ok := a.(*net.IPNet)
			if !ok {
				continue
			}
			ip, _ := netip.AddrFromSlice(n.IP)
			mac, ok := interfaceMAC(ip.Unmap())
			if !ok || mac != [6]byte(ifc.HardwareAddr) {
				t.Errorf("address %v of %s: %x, %v; want %v", ip, ifc.Name, mac, ok, ifc.HardwareAddr)
			}
			return
		}
	}
	t.Skip("no interface with a MAC address and an IP address")
}
