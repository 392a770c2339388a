package guest

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// The checks of the emulator's wire transport (group "wire" of
// scripts/guest-test.sh): emu0 sends real RoCE v2 packets, so pvperf on
// emu0 and perftest on a Soft-RoCE device are the two native endpoints of
// one connection. rxe listens on UDP 4791 of the initial network namespace
// only, and two endpoints of one namespace do not reach each other through
// a veth pair (their packets go through lo), so the emulator runs in a
// namespace of its own (-guest.wire-ns) on one end of a veth pair, and the
// rxe device (-guest.wire-device) sits on the other end, in the initial
// namespace. scripts/guest/init sets this up:
//
//	initial namespace: w0 10.79.0.1/24, rxe1 on w0
//	emuns:             w1 10.79.0.2/24, lo up; pvperf runs there with
//	                   PVPERF_EMU=addr=10.79.0.2 (-guest.wire-emu)
//	initial namespace: w2 10.81.0.1/24, IP forwarding on
//	emuns2:            w3 10.81.0.2/24, lo up; a second pvperf runs there
//	                   with PVPERF_EMU=addr=10.81.0.2 (-guest.wire-ns2,
//	                   -guest.wire-peer2); emuns and emuns2 have default
//	                   routes through the initial namespace (10.79.0.1,
//	                   10.81.0.1), so the two emulators reach each other
//	                   across w1, where the fault checks put netem
//
// The emulator's GID table, with an address of its own, is that one GID:
// index 0, the IPv4-mapped GID of 10.79.0.2; every check uses index 0
// there, and rxe's IPv4-mapped GID of 10.79.0.1 on its side (index 1 when
// init made it so; the checks look it up).

var (
	wireNS     = flag.String("guest.wire-ns", "", "the network namespace of the emulator's end of the wire checks (none: they skip)")
	wireDevice = flag.String("guest.wire-device", "rxe1", "the kernel RDMA device of the wire checks, on the initial namespace's end of the veth pair")
	wireAddr   = flag.String("guest.wire-addr", "10.79.0.1", "the address of -guest.wire-device's interface (initial namespace)")
	wirePeer   = flag.String("guest.wire-peer", "10.79.0.2", "the emulator's address, inside -guest.wire-ns")
	wireNetdev = flag.String("guest.wire-netdev", "w1", "the veth end inside -guest.wire-ns, where the fault checks put netem")
	wireEmu    = flag.String("guest.wire-emu", "", "PVPERF_EMU of the emulator in the wire checks (empty: addr=<-guest.wire-peer>)")
	wireEmuGID = flag.Int("guest.wire-emu-gid", 0, "the emulator's GID index (-x) in the wire checks")
	tcCmd      = flag.String("guest.tc", "iproute2-tc", "iproute2's tc command")
	wireNS2    = flag.String("guest.wire-ns2", "", "the network namespace of the second emulator of the fault checks (none: the checks between two emulators skip)")
	wirePeer2  = flag.String("guest.wire-peer2", "10.81.0.2", "the second emulator's address, inside -guest.wire-ns2, routed to -guest.wire-peer")
)

// Iterations of the wire checks: TCG is slow.
const (
	wireBWIters  = "200"
	wireLatIters = "100"
	// The bandwidth figures (64 KiB RDMA WRITE) and the fault checks.
	wireFigIters   = "1000"
	wireFigRounds  = 3
	wireFaultIters = "200"
)

// emuConfig is the emulator's PVPERF_EMU in the wire checks.
func emuConfig() string {
	if *wireEmu != "" {
		return *wireEmu
	}
	return "addr=" + *wirePeer
}

// emuConfigAt is emuConfig with the address addr: the second emulator's
// PVPERF_EMU (-guest.wire-emu's other settings kept).
func emuConfigAt(addr string) string {
	if *wireEmu == "" {
		return "addr=" + addr
	}
	parts := strings.Split(*wireEmu, ",")
	found := false
	for i, p := range parts {
		if strings.HasPrefix(p, "addr=") {
			parts[i], found = "addr="+addr, true
		}
	}
	if !found {
		parts = append([]string{"addr=" + addr}, parts...)
	}
	return strings.Join(parts, ",")
}

// wire is the state of the wire setup, found once: the rxe device's GID
// index of its IPv4 address, or why the setup is not usable.
var wire struct {
	once sync.Once
	err  error
	gid  int
}

// needWire skips a check without -guest.wire-ns and fails it when the rxe
// device of the wire checks never showed its IPv4 GID.
func needWire(t *testing.T) {
	t.Helper()
	needDevice(t)
	if *wireNS == "" {
		t.Skip("no -guest.wire-ns: the wire checks need the namespace and veth pair scripts/guest/init makes for the wire group (scripts/guest-test.sh -c wire)")
	}
	wire.once.Do(func() { wire.gid, wire.err = findIPv4GID(*wireDevice, *wireAddr, *deviceWait) })
	if wire.err != nil {
		t.Fatalf("device %s not ready: %v", *wireDevice, wire.err)
	}
}

// mappedGID is the IPv4-mapped GID of a v4 address as sysfs spells it.
func mappedGID(addr string) (string, error) {
	a, err := netip.ParseAddr(addr)
	if err != nil || !a.Is4() {
		return "", fmt.Errorf("%q is not an IPv4 address", addr)
	}
	return sysfsGID(netip.AddrFrom16(a.As16())), nil
}

// sysfsGID spells an address as sysfs does: eight groups of four hex digits.
func sysfsGID(a netip.Addr) string {
	b := a.As16()
	g := make([]string, 8)
	for i := range g {
		g[i] = fmt.Sprintf("%02x%02x", b[2*i], b[2*i+1])
	}
	return strings.Join(g, ":")
}

// findIPv4GID waits until port 1 of dev is ACTIVE with the IPv4-mapped GID
// of addr in its table and returns that GID's index.
func findIPv4GID(dev, addr string, wait time.Duration) (int, error) {
	want, err := mappedGID(addr)
	if err != nil {
		return 0, err
	}
	port := filepath.Join("/sys/class/infiniband", dev, "ports/1")
	var state string
	for end := time.Now().Add(wait); ; {
		b, _ := os.ReadFile(filepath.Join(port, "state"))
		state = strings.TrimSpace(string(b))
		files, _ := filepath.Glob(filepath.Join(port, "gids/*"))
		for _, f := range files {
			if b, _ := os.ReadFile(f); strings.TrimSpace(string(b)) == want && strings.Contains(state, "ACTIVE") {
				return strconv.Atoi(filepath.Base(f))
			}
		}
		if time.Now().After(end) {
			return 0, fmt.Errorf("port 1 is %q, no GID %s (%s) after %s", state, want, addr, wait)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// gidTable lists the non-zero GIDs of port 1 of dev: index, GID, type and
// netdev.
func gidTable(dev string) []string {
	port := filepath.Join("/sys/class/infiniband", dev, "ports/1")
	files, _ := filepath.Glob(filepath.Join(port, "gids/*"))
	var out []string
	for i := range len(files) {
		idx := strconv.Itoa(i)
		b, err := os.ReadFile(filepath.Join(port, "gids", idx))
		g := strings.TrimSpace(string(b))
		if err != nil || strings.Trim(g, "0:") == "" {
			continue
		}
		typ, _ := os.ReadFile(filepath.Join(port, "gid_attrs/types", idx))
		nd, _ := os.ReadFile(filepath.Join(port, "gid_attrs/ndevs", idx))
		out = append(out, fmt.Sprintf("%s %s %s %s", idx, g, strings.TrimSpace(string(typ)), strings.TrimSpace(string(nd))))
	}
	return out
}

// endpoint is one side of a wire pair: its command line, the network
// namespace it runs in ("": the initial one) and what it is, for messages.
type endpoint struct {
	argv  []string
	ns    string
	label string
}

func (e endpoint) String() string { return strings.Join(e.argv, " ") }

// rxeEnd is perftest's test on the wire checks' rxe device, in the initial
// namespace.
func rxeEnd(test string, opts ...string) endpoint {
	argv := []string{pt(test), "-d", *wireDevice, "-x", strconv.Itoa(wire.gid), "-F"}
	if strings.HasPrefix(test, "read_") || strings.HasPrefix(test, "atomic_") {
		// perftest sets max_rd_atomic to the peer's outstanding reads:
		// rxe offers 128, the emulated device accepts at most 16 (as
		// between any two devices of different limits, -o settles it).
		argv = append(argv, "-o", "16")
	}
	return endpoint{argv: append(argv, opts...), label: "perftest ib_" + test + " on " + *wireDevice}
}

// inNS is argv run in network namespace ns with the emulator's
// configuration: ip netns exec NS env PVPERF_EMU=... ARGV...
func inNS(ns string, argv ...string) []string {
	return inNSWith(ns, emuConfig(), argv...)
}

// inNSWith is inNS with the PVPERF_EMU cfg.
func inNSWith(ns, cfg string, argv ...string) []string {
	return append([]string{*ipCmd, "netns", "exec", ns, "env", "PVPERF_EMU=" + cfg}, argv...)
}

// emuEnd is pvperf's test on emu0 inside -guest.wire-ns.
func emuEnd(test string, opts ...string) endpoint {
	return emuEndIn(*wireNS, emuConfig(), test, opts...)
}

// emuEnd2 is pvperf's test on the second emulator's emu0, inside
// -guest.wire-ns2.
func emuEnd2(test string, opts ...string) endpoint {
	return emuEndIn(*wireNS2, emuConfigAt(*wirePeer2), test, opts...)
}

// emuEndIn is pvperf's test on emu0 inside ns with the PVPERF_EMU cfg.
func emuEndIn(ns, cfg, test string, opts ...string) endpoint {
	argv := []string{pv(test)}
	if *peerTimeout != 0 {
		argv = append(argv, "--peer-timeout="+peerTimeout.String())
	}
	argv = append(argv, "-d", "emu0", "-x", strconv.Itoa(*wireEmuGID), "-F")
	return endpoint{argv: inNSWith(ns, cfg, append(argv, opts...)...), ns: ns, label: "pvperf " + test + " on emu0 in " + ns}
}

// wirePair is a server and a client in their namespaces; the client gets
// serverAddr last.
type wirePair struct {
	server, client endpoint
	serverAddr     string
	// serverRow: the server must print a result row too.
	serverRow bool
	// timeout bounds each side; 0 is -guest.run-timeout.
	timeout time.Duration
}

// run runs the pair as pair.run does (same timeouts and verdicts); the
// server is ready when a TCP socket of its own namespace listens on
// -guest.port.
func (p wirePair) run() pairResult {
	return runSides(sideCmds{
		server: p.server.argv, client: append(append([]string(nil), p.client.argv...), p.serverAddr),
		ready:     func(pid int) bool { return listensIn(pid, p.server.ns != "", *port) },
		serverRow: p.serverRow, timeout: p.timeout,
	})
}

// listensIn tells whether a TCP socket of pid's network namespace listens
// on port. With otherNS, pid must have left this process's namespace
// first (ip netns exec has switched), so that a socket of the initial
// namespace is not taken for the server's.
func listensIn(pid int, otherNS bool, port int) bool {
	dir := fmt.Sprintf("/proc/%d", pid)
	if otherNS {
		mine, err1 := os.Readlink("/proc/self/ns/net")
		its, err2 := os.Readlink(dir + "/ns/net")
		if err1 != nil || err2 != nil || mine == its {
			return false
		}
	}
	suffix := fmt.Sprintf(":%04X", port)
	for _, name := range []string{"net/tcp", "net/tcp6"} {
		f, err := os.Open(filepath.Join(dir, name))
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		found := false
		for sc.Scan() {
			if f := strings.Fields(sc.Text()); len(f) > 3 && f[3] == "0A" && strings.HasSuffix(f[1], suffix) {
				found = true
				break
			}
		}
		f.Close()
		if found {
			return true
		}
	}
	return false
}

// tail is the last n non-empty lines of out, each indented with prefix.
func tail(out string, n int, prefix string) string {
	var lines []string
	for _, l := range strings.Split(out, "\n") {
		if strings.TrimSpace(l) != "" {
			lines = append(lines, prefix+strings.TrimRight(l, " \r"))
		}
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	if len(lines) == 0 {
		return prefix + "(no output)"
	}
	return strings.Join(lines, "\n")
}

// log writes both command lines and outputs into the test's log.
func (p wirePair) log(t *testing.T, r pairResult) {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "server: %s\n", p.server)
	fmt.Fprintf(&b, "client: %s %s\n", p.client, p.serverAddr)
	for _, side := range []struct{ name, out string }{{"server", r.server}, {"client", r.client}} {
		for _, l := range strings.Split(strings.TrimRight(side.out, "\n"), "\n") {
			fmt.Fprintf(&b, "  %s| %s\n", side.name, l)
		}
	}
	fmt.Fprintf(&b, "(%s)", r.took)
	t.Log(b.String())
}

// failure is the message of a failed pair: the reason, then the tails of
// both outputs.
func (p wirePair) failure(r pairResult) string {
	return fmt.Sprintf("%v\n  server (%s):\n%s\n  client (%s):\n%s", r.err,
		p.server.label, tail(r.server, 6, "    s| "),
		p.client.label, tail(r.client, 6, "    c| "))
}

// check runs p as one check.
func (p wirePair) check(t *testing.T) pairResult {
	t.Helper()
	r := p.run()
	p.log(t, r)
	if r.err != nil {
		wireDiag(t)
		t.Fatal(p.failure(r))
	}
	return r
}

// wireDiag logs the kernel's own counts of packets dropped on the way, in
// the initial namespace and those of the wire checks: the interfaces'
// (ip -s link) and the UDP and IP protocols' (/proc/net/snmp), which tell
// a path that lost packets from an emulator that did.
func wireDiag(t *testing.T) {
	t.Helper()
	spaces := []string{""}
	for _, ns := range []string{*wireNS, *wireNS2} {
		if ns != "" {
			spaces = append(spaces, ns)
		}
	}
	for _, ns := range spaces {
		link := []string{*ipCmd, "-s", "-o", "link", "show"}
		snmp := []string{"cat", "/proc/net/snmp"}
		where := "the initial namespace"
		if ns != "" {
			link = append([]string{*ipCmd, "-n", ns}, link[1:]...)
			snmp = append([]string{*ipCmd, "netns", "exec", ns}, snmp...)
			where = "namespace " + ns
		}
		lo, err1 := wireCmd(10*time.Second, link...)
		so, err2 := wireCmd(10*time.Second, snmp...)
		var keep []string
		for _, l := range strings.Split(so, "\n") {
			if strings.HasPrefix(l, "Ip:") || strings.HasPrefix(l, "Udp:") {
				keep = append(keep, l)
			}
		}
		t.Logf("drops seen by the kernel in %s (%v, %v):\n%s\n%s", where, err1, err2, strings.TrimSpace(lo), strings.Join(keep, "\n"))
	}
}

// wireOpts are the options of a wire check of test: the iterations, then
// opts.
func wireOpts(test, opts string) []string {
	if strings.Contains(" "+opts+" ", " -n ") {
		return strings.Fields(opts)
	}
	n := wireBWIters
	if strings.HasSuffix(test, "_lat") {
		n = wireLatIters
	}
	return append([]string{"-n", n}, strings.Fields(opts)...)
}

// wireCmd runs argv (in the initial namespace) with a timeout and returns
// its output and error.
func wireCmd(d time.Duration, argv ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	out, err := exec.CommandContext(ctx, argv[0], argv[1:]...).CombinedOutput()
	if ctx.Err() != nil {
		err = fmt.Errorf("timed out after %s", d)
	}
	return string(out), err
}

// wireHelperEnv makes the test binary a helper process: TestWireHelper
// dials the address it names, from whatever namespace it was started in.
const wireHelperEnv = "PVPERF_GUEST_WIRE_DIAL"

// TestWireHelper is not a check: started by TestWire inside the namespace
// (with wireHelperEnv set), it connects over TCP to the address given,
// sends a line and prints the line it gets back.
func TestWireHelper(t *testing.T) {
	to := os.Getenv(wireHelperEnv)
	if to == "" {
		t.Skip("a helper process of TestWire")
	}
	c, err := net.DialTimeout("tcp", to, 10*time.Second)
	if err != nil {
		fmt.Println("WIRE-DIAL-ERROR", err)
		os.Exit(1)
	}
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	fmt.Fprintf(c, "hello from %s\n", c.LocalAddr())
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		fmt.Println("WIRE-DIAL-ERROR", err)
		os.Exit(1)
	}
	fmt.Print("WIRE-DIAL-REPLY ", line)
	os.Exit(0)
}

// wireTests are the configurations of the matrix: the eight RC tests,
// send_bw -c UD, and reads longer than the emulator's window (it asks for
// their responses 128 packets at a time).
var wireTests = []struct{ test, opts string }{
	{"write_bw", ""}, {"read_bw", ""}, {"send_bw", ""}, {"atomic_bw", ""},
	{"write_lat", ""}, {"read_lat", ""}, {"send_lat", ""}, {"atomic_lat", ""},
	{"send_bw", "-c UD"}, {"read_bw", "-s 1048576 -n 20"},
}

// TestWire checks pvperf on emu0 (its wire transport, inside the
// namespace) against perftest on the rxe device, both ways: first the
// network (namespace, veth, ping and TCP across, the rxe device's GIDs,
// the emulator's GID table), the matrix, and then the 64 KiB write_bw
// figures of emu0 against rxe, both ways, beside rxe's own over loopback,
// in interleaved rounds (reported, not judged).
func TestWire(t *testing.T) {
	needWire(t)
	if !t.Run("net", wireNet) {
		t.Fatal("the network of the wire checks is not usable (see net above)")
	}
	t.Run("emu0_gids", wireEmuGIDs)

	for _, c := range wireTests {
		for _, dir := range []string{"perftest_server", "pvperf_server"} {
			t.Run(interopName(c.test, c.opts)+"/"+dir, func(t *testing.T) {
				o := wireOpts(c.test, c.opts)
				p := wirePair{server: rxeEnd(c.test, o...), client: emuEnd(c.test, o...), serverAddr: *wireAddr, serverRow: serverReports(c.test)}
				if dir == "pvperf_server" {
					p = wirePair{server: emuEnd(c.test, o...), client: rxeEnd(c.test, o...), serverAddr: *wirePeer, serverRow: serverReports(c.test)}
				}
				p.check(t)
			})
		}
	}

	// The 64 KiB write_bw figures: rxe against itself (loopback), emu0's
	// client against perftest's server on rxe, perftest's client against
	// emu0's server, and emu0 against emu0 across both veth pairs (the
	// emulator with no rxe in the path), in interleaved rounds; medians.
	fig := []string{"write_bw", "-s", "65536", "-n", wireFigIters}
	figs := map[string][]float64{}
	pairs := []struct {
		name string
		pair func() wirePair
	}{
		{"rxe_loopback", func() wirePair {
			e := rxeEnd(fig[0], fig[1:]...)
			return wirePair{server: e, client: e, serverAddr: *wireAddr, serverRow: true}
		}},
		{"perftest_server", func() wirePair {
			return wirePair{server: rxeEnd(fig[0], fig[1:]...), client: emuEnd(fig[0], fig[1:]...), serverAddr: *wireAddr, serverRow: true}
		}},
		{"pvperf_server", func() wirePair {
			return wirePair{server: emuEnd(fig[0], fig[1:]...), client: rxeEnd(fig[0], fig[1:]...), serverAddr: *wirePeer, serverRow: true}
		}},
	}
	if *wireNS2 != "" {
		pairs = append(pairs, struct {
			name string
			pair func() wirePair
		}{"emu_pair", func() wirePair {
			return wirePair{server: emuEnd2(fig[0], fig[1:]...), client: emuEnd(fig[0], fig[1:]...), serverAddr: *wirePeer2, serverRow: true}
		}})
	}
	for round := range wireFigRounds {
		for _, pc := range pairs {
			t.Run(fmt.Sprintf("write_bw_64k/%s/round=%d", pc.name, round+1), func(t *testing.T) {
				r := pc.pair().check(t)
				if v, err := strconv.ParseFloat(field(r.client, 4), 64); err == nil {
					figs[pc.name] = append(figs[pc.name], v)
				}
			})
		}
	}
	med := func(name string) string {
		v := slices.Clone(figs[name])
		if len(v) == 0 {
			return "failed"
		}
		slices.Sort(v)
		m := v[len(v)/2]
		if len(v)%2 == 0 {
			m = (v[len(v)/2-1] + v[len(v)/2]) / 2
		}
		return fmt.Sprintf("%.2f", m)
	}
	ratio := func(name string) string {
		a, err1 := strconv.ParseFloat(med(name), 64)
		b, err2 := strconv.ParseFloat(med("rxe_loopback"), 64)
		if err1 != nil || err2 != nil || b == 0 {
			return "-"
		}
		return fmt.Sprintf("%.2f", a/b)
	}
	each := func(name string) string {
		var b strings.Builder
		for i, v := range figs[name] {
			if i > 0 {
				b.WriteString(" ")
			}
			fmt.Fprintf(&b, "%.2f", v)
		}
		return b.String()
	}
	pair := ""
	if *wireNS2 != "" {
		pair = fmt.Sprintf("\n  emu0 client -> emu0 server (%s)   %s  (x%s of rxe)  [%s]",
			*wireNS2, med("emu_pair"), ratio("emu_pair"), each("emu_pair"))
	}
	t.Logf("write_bw -s 65536 -n %s, BW average [MB/sec, 2^20 bytes], median of %d interleaved rounds (each round's in brackets; reported, not judged; TCG: only ratios mean anything):\n"+
		"  rxe<->rxe loopback (%s)                  %s  [%s]\n"+
		"  emu0 client -> perftest server on %s     %s  (x%s of rxe)  [%s]\n"+
		"  perftest client on %s -> emu0 server     %s  (x%s of rxe)  [%s]%s",
		wireFigIters, wireFigRounds, *wireDevice, med("rxe_loopback"), each("rxe_loopback"),
		*wireDevice, med("perftest_server"), ratio("perftest_server"), each("perftest_server"),
		*wireDevice, med("pvperf_server"), ratio("pvperf_server"), each("pvperf_server"), pair)
}

// wireNet checks the network of the wire checks: the addresses on both
// ends, ping both ways, TCP from the namespace to the initial one, and
// the rxe device on the initial end with its IPv4 GID.
func wireNet(t *testing.T) {
	out, err := wireCmd(20*time.Second, *ipCmd, "-n", *wireNS, "-o", "addr", "show")
	t.Logf("ip -n %s -o addr show:\n%s", *wireNS, out)
	if err != nil || !strings.Contains(out, " "+*wirePeer+"/") {
		t.Fatalf("namespace %s has no %s (%v)", *wireNS, *wirePeer, err)
	}
	out, err = wireCmd(20*time.Second, *ipCmd, "-o", "addr", "show", "to", *wireAddr)
	if err != nil || !strings.Contains(out, " "+*wireAddr+"/") {
		t.Fatalf("no interface with %s in the initial namespace (%v): %s", *wireAddr, err, out)
	}
	t.Logf("initial namespace: %s", strings.TrimSpace(out))
	if out, err := wireCmd(30*time.Second, "ping", "-c", "2", "-W", "5", *wirePeer); err != nil {
		t.Errorf("ping %s from the initial namespace: %v\n%s", *wirePeer, err, out)
	} else {
		t.Logf("ping %s: %s", *wirePeer, lastLine(out))
	}
	if out, err := wireCmd(30*time.Second, *ipCmd, "netns", "exec", *wireNS, "ping", "-c", "2", "-W", "5", *wireAddr); err != nil {
		t.Errorf("ping %s from %s: %v\n%s", *wireAddr, *wireNS, err, out)
	} else {
		t.Logf("ping %s from %s: %s", *wireAddr, *wireNS, lastLine(out))
	}

	// TCP: this process listens on the initial end, a helper process
	// (this binary) dials from the namespace.
	ln, err := net.Listen("tcp", net.JoinHostPort(*wireAddr, "0"))
	if err != nil {
		t.Fatalf("listen on %s: %v", *wireAddr, err)
	}
	defer ln.Close()
	got := make(chan string, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			got <- "accept: " + err.Error()
			return
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(20 * time.Second))
		line, _ := bufio.NewReader(c).ReadString('\n')
		fmt.Fprintf(c, "hello from %s\n", c.LocalAddr())
		got <- strings.TrimSpace(line)
	}()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	hc := exec.CommandContext(ctx, *ipCmd, "netns", "exec", *wireNS, self, "-test.run", "^TestWireHelper$")
	hc.Env = append(os.Environ(), wireHelperEnv+"="+ln.Addr().String())
	hout, herr := hc.CombinedOutput()
	if herr != nil || !strings.Contains(string(hout), "WIRE-DIAL-REPLY hello from "+ln.Addr().String()) {
		t.Errorf("TCP from %s to %s: %v\n%s", *wireNS, ln.Addr(), herr, hout)
	} else {
		select {
		case l := <-got:
			t.Logf("TCP %s -> %s: got %q, answered", *wireNS, ln.Addr(), l)
		case <-time.After(5 * time.Second):
			t.Errorf("TCP: the listener saw nothing")
		}
	}

	// The rxe device: on the initial end, with the IPv4 GID.
	tab := gidTable(*wireDevice)
	t.Logf("%s GIDs (index GID type netdev):\n  %s", *wireDevice, strings.Join(tab, "\n  "))
	want, _ := mappedGID(*wireAddr)
	t.Logf("%s: GID index %d is %s (%s); the checks pass -x %d on its side", *wireDevice, wire.gid, want, *wireAddr, wire.gid)
	if wire.gid != 1 {
		t.Logf("note: the IPv4 GID of %s is not at index 1", *wireDevice)
	}
}

// wireEmuGIDs checks what pvperf's devinfo shows of emu0 inside the
// namespace with the wire configuration: its one GID (-guest.wire-emu-gid)
// is the IPv4-mapped GID of -guest.wire-peer.
func wireEmuGIDs(t *testing.T) {
	out, err := wireCmd(20*time.Second, *ipCmd, "-n", *wireNS, "-o", "link", "show", "dev", *wireNetdev)
	if err != nil {
		t.Fatalf("ip -n %s link show dev %s: %v\n%s", *wireNS, *wireNetdev, err, out)
	}
	f := strings.Fields(out)
	var mac net.HardwareAddr
	for i := range f {
		if f[i] == "link/ether" && i+1 < len(f) {
			mac, _ = net.ParseMAC(f[i+1])
		}
	}
	if len(mac) != 6 {
		t.Fatalf("no MAC address of %s in: %s", *wireNetdev, out)
	}
	v4, _ := mappedGID(*wirePeer)
	want := map[string]string{strconv.Itoa(*wireEmuGID): v4}
	t.Logf("%s in %s: MAC %s; emu0 should have GID %d %s", *wireNetdev, *wireNS, mac, *wireEmuGID, v4)
	argv := inNS(*wireNS, pv("devinfo"), "-d", "emu0")
	out, err = wireCmd(30*time.Second, argv...)
	t.Logf("%s\n%s", strings.Join(argv, " "), out)
	if err != nil {
		t.Fatalf("devinfo: %v\n%s", err, tail(out, 6, "    | "))
	}
	got := map[string]string{}
	for _, l := range strings.Split(out, "\n") {
		c := strings.Split(l, "|")
		if len(c) >= 4 && isUint(strings.TrimSpace(c[1])) {
			got[strings.TrimSpace(c[1])] = strings.TrimSpace(c[2])
		}
	}
	for idx, g := range want {
		if got[idx] != g {
			t.Errorf("emu0 GID %s is %q, want %s", idx, got[idx], g)
		}
	}
}

// faultCase is one impairment of TestWireFaults: its name, netem's
// arguments, on the egress of the namespace's veth end (what the emulator
// in -guest.wire-ns sends), and the options (sizes, iterations) of the
// runs against perftest and of those between two emulators.
type faultCase struct {
	name, netem     string
	rxeOpts, pvOpts string
}

// netemCases are the impairments of TestWireFaults, after a run of every
// pair without one (its durations are the reference). Two emulators under
// TCG move fewer packets a second than an emulator and rxe, so their runs
// move 100 messages of 64 KiB where those against perftest move 200.
// Reordering is costly to both responders (rxe's and the emulator's drop
// every packet out of sequence and NAK once per gap; the requesters go
// back N), so the reordering cases move 200 messages of 4 KiB (4 packets
// of the 1024 B MTU), and, with 25%, of 1 KiB (single packets) as well.
// (500 messages of 64 KiB did not end within a minute even with 5%.)
var netemCases = []faultCase{
	{"no_fault", "", "-n " + wireFaultIters, "-n 100"},
	{"loss_1%", "loss 1%", "-n " + wireFaultIters, "-n 100"},
	{"delay_1ms_reorder_5%_50%/4KiB", "delay 1ms reorder 5% 50%", "-s 4096 -n 200", "-s 4096 -n 200"},
	{"delay_1ms_reorder_25%_50%/4KiB", "delay 1ms reorder 25% 50%", "-s 4096 -n 200", "-s 4096 -n 200"},
	{"delay_1ms_reorder_25%_50%/1KiB", "delay 1ms reorder 25% 50%", "-s 1024 -n 200", "-s 1024 -n 200"},
	{"duplicate_1%", "duplicate 1%", "-n " + wireFaultIters, "-n 100"},
}

// faultPair is one run of TestWireFaults: its name (the kind of pair and
// the test), the pair and its options.
type faultPair struct {
	name, opts string
	pair       wirePair
}

// faultPairs are the runs of an impairment: pvperf on emu0 (client, in
// -guest.wire-ns) against perftest's server on the rxe device, write_bw
// and send_bw; then, with -guest.wire-ns2, pvperf against pvperf: the
// server on the second emulator, both with --check_data, write_bw and
// send_bw (the server receives and checks) and read_bw (the client does).
func faultPairs(c faultCase) []faultPair {
	o := strings.Fields(c.rxeOpts)
	var ps []faultPair
	for _, test := range []string{"write_bw", "send_bw"} {
		ps = append(ps, faultPair{"perftest_server/" + test, c.rxeOpts,
			wirePair{server: rxeEnd(test, o...), client: emuEnd(test, o...), serverAddr: *wireAddr, serverRow: true}})
	}
	if *wireNS2 == "" {
		return ps
	}
	o = append(strings.Fields(c.pvOpts), "--check_data")
	for _, test := range []string{"write_bw", "send_bw", "read_bw"} {
		ps = append(ps, faultPair{"pvperf_server/" + test, strings.Join(o, " "),
			wirePair{server: emuEnd2(test, o...), client: emuEnd(test, o...), serverAddr: *wirePeer2, serverRow: true}})
	}
	// perftest's validation too: the sender's chunk markers travel as
	// fetch-and-adds behind the data, and the validating side (WRITE's
	// server) fails the run on a wrong byte.
	o = append(strings.Fields(c.pvOpts), "--data_validation")
	ps = append(ps, faultPair{"pvperf_server/write_bw_data_validation", strings.Join(o, " "),
		wirePair{server: emuEnd2("write_bw", o...), client: emuEnd("write_bw", o...), serverAddr: *wirePeer2, serverRow: true}})
	return ps
}

// netPortLine is the " Network port    : ..." line pvperf prints after its
// results when emu0 used the network, trimmed ("" without one).
func netPortLine(out string) string {
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "Network port") {
			return strings.TrimSpace(l)
		}
	}
	return ""
}

// firstLines is the first n lines of out on one line, spaces squeezed.
func firstLines(out string, n int) string {
	lines := strings.SplitN(out, "\n", n+1)
	if len(lines) > n {
		lines = lines[:n]
	}
	return strings.Join(strings.Fields(strings.Join(lines, " ")), " ")
}

// wireNet2 checks the route between the two emulators' namespaces: the
// address in -guest.wire-ns2, ping from each namespace to the other's
// address (through the initial namespace, which forwards).
func wireNet2(t *testing.T) {
	out, err := wireCmd(20*time.Second, *ipCmd, "-n", *wireNS2, "-o", "addr", "show")
	t.Logf("ip -n %s -o addr show:\n%s", *wireNS2, out)
	if err != nil || !strings.Contains(out, " "+*wirePeer2+"/") {
		t.Fatalf("namespace %s has no %s (%v)", *wireNS2, *wirePeer2, err)
	}
	for _, ns := range []string{*wireNS, *wireNS2} {
		out, err := wireCmd(20*time.Second, *ipCmd, "-n", ns, "route", "show")
		t.Logf("ip -n %s route show:\n%s", ns, strings.TrimRight(out, "\n"))
		if err != nil {
			t.Errorf("ip -n %s route show: %v", ns, err)
		}
	}
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_forward"); err != nil || strings.TrimSpace(string(b)) != "1" {
		t.Errorf("IP forwarding of the initial namespace is %q (%v), want 1", strings.TrimSpace(string(b)), err)
	}
	for _, p := range [][2]string{{*wireNS, *wirePeer2}, {*wireNS2, *wirePeer}} {
		out, err := wireCmd(30*time.Second, *ipCmd, "netns", "exec", p[0], "ping", "-c", "2", "-W", "5", p[1])
		if err != nil {
			t.Errorf("ping %s from %s: %v\n%s", p[1], p[0], err, out)
		} else {
			t.Logf("ping %s from %s: %s", p[1], p[0], lastLine(out))
		}
	}
}

// TestWireFaults runs pairs with netem impairing what the emulator in
// -guest.wire-ns sends (loss, delay with reordering, duplication): pvperf
// against perftest's server on the rxe device, and pvperf against pvperf
// on a second emulator (-guest.wire-ns2) with --check_data, and write_bw
// with --data_validation; each run must end well (both exit 0, result
// rows, no data check or validation failure). Each run
// gets a fresh qdisc, so that its netem statistics are its own; they are
// logged after it with the Network port lines of both pvperf sides, and
// the durations of all runs at the end.
func TestWireFaults(t *testing.T) {
	needWire(t)
	tc := func(args ...string) (string, error) {
		return wireCmd(20*time.Second, append([]string{*tcCmd, "-n", *wireNS, "qdisc"}, args...)...)
	}
	if out, err := tc("add", "dev", *wireNetdev, "root", "netem", "loss", "0%"); err != nil {
		t.Skipf("netem is not available (%s -n %s qdisc add dev %s root netem: %v: %s): the fault checks need sch_netem and iproute2's tc in the guest",
			*tcCmd, *wireNS, *wireNetdev, err, strings.TrimSpace(out))
	}
	if out, err := tc("del", "dev", *wireNetdev, "root"); err != nil {
		t.Fatalf("tc qdisc del dev %s root: %v: %s", *wireNetdev, err, out)
	}
	net2 := false
	if *wireNS2 != "" {
		net2 = t.Run("net2", wireNet2)
	}
	var summary []string
	for _, c := range netemCases {
		t.Run(c.name, func(t *testing.T) {
			for _, fp := range faultPairs(c) {
				t.Run(fp.name, func(t *testing.T) {
					if fp.pair.server.ns == *wireNS2 && !net2 {
						t.Fatalf("%s and %s do not reach each other (see net2)", *wireNS, *wireNS2)
					}
					if c.netem != "" {
						args := append([]string{"add", "dev", *wireNetdev, "root", "netem"}, strings.Fields(c.netem)...)
						if out, err := tc(args...); err != nil {
							t.Fatalf("tc qdisc %s: %v: %s", strings.Join(args, " "), err, out)
						}
					}
					r := fp.pair.run()
					stats, _ := wireCmd(20*time.Second, *tcCmd, "-s", "-n", *wireNS, "qdisc", "show", "dev", *wireNetdev)
					if c.netem != "" {
						if out, err := tc("del", "dev", *wireNetdev, "root"); err != nil {
							t.Errorf("tc qdisc del dev %s root: %v: %s", *wireNetdev, err, out)
						}
					}
					fp.pair.log(t, r)
					verdict := "ok"
					if r.err != nil {
						verdict = "FAILED: " + strings.SplitN(r.err.Error(), "\n", 2)[0]
					}
					var b strings.Builder
					fmt.Fprintf(&b, "%s %s (%s): %s in %s\n", c.name, fp.name, fp.opts, verdict, r.took)
					fmt.Fprintf(&b, "  netem: %s\n", firstLines(stats, 2))
					for _, side := range []struct {
						name, out string
						e         endpoint
					}{{"client", r.client, fp.pair.client}, {"server", r.server, fp.pair.server}} {
						if strings.HasPrefix(side.e.label, "pvperf") {
							l := netPortLine(side.out)
							if l == "" {
								l = "(no Network port line)"
							}
							fmt.Fprintf(&b, "  %s (%s): %s\n", side.name, side.e.ns, l)
						}
					}
					t.Log(strings.TrimRight(b.String(), "\n"))
					summary = append(summary, fmt.Sprintf("  %-31s %-24s %-30s %9s  %s", c.name, fp.name, fp.opts, r.took, verdict))
					if r.err != nil {
						t.Fatal(fp.pair.failure(r))
					}
				})
			}
		})
	}
	t.Logf("durations (pvperf client in %s; server: perftest on %s, or pvperf in %s):\n%s",
		*wireNS, *wireDevice, *wireNS2, strings.Join(summary, "\n"))
}

// TestWireFallback: the emulator in the initial namespace, where rdma_rxe
// holds UDP port 4791, with the address of rxe's interface: in auto mode
// it falls back to TCP, and the emulator of -guest.wire-ns (auto, RoCE v2)
// follows it there, in both roles, for RC and UD, with the data checked.
// Both headers must name TCP as the data path.
func TestWireFallback(t *testing.T) {
	needWire(t)
	here := func(test string, opts ...string) endpoint {
		argv := []string{"env", "PVPERF_EMU=addr=" + *wireAddr, pv(test), "-d", "emu0", "-x", "0", "-F"}
		return endpoint{argv: append(argv, opts...), label: "pvperf " + test + " on emu0 beside " + *wireDevice}
	}
	// The Data path lines of each side, the emulator beside rxe (on TCP)
	// and the one in the namespace (RoCE v2, TCP to the first).
	tcpSide, nsSide := *wireAddr, *wirePeer
	paths := map[string][2]string{ // [fallback side, namespace side]
		"write_bw": {"TCP, " + tcpSide + " -> " + nsSide, "TCP, " + nsSide + " -> " + tcpSide},
		"send_bw": {"memory copy on this host, else TCP from " + tcpSide,
			"memory copy on this host, else RoCE v2 from " + nsSide + " (TCP to " + tcpSide + ")"},
	}
	for _, c := range []struct{ test, opts string }{{"write_bw", "--check_data"}, {"send_bw", "-c UD --check_data"}} {
		for _, dir := range []string{"fallback_server", "fallback_client"} {
			t.Run(interopName(c.test, c.opts)+"/"+dir, func(t *testing.T) {
				o := wireOpts(c.test, c.opts)
				p := wirePair{server: here(c.test, o...), client: emuEnd(c.test, o...), serverAddr: *wireAddr, serverRow: serverReports(c.test)}
				if dir == "fallback_client" {
					p = wirePair{server: emuEnd(c.test, o...), client: here(c.test, o...), serverAddr: *wirePeer, serverRow: serverReports(c.test)}
				}
				r := p.check(t)
				outFB, outNS := r.server, r.client
				if dir == "fallback_client" {
					outFB, outNS = r.client, r.server
				}
				for i, out := range []string{outFB, outNS} {
					if want := " Data path       : " + paths[c.test][i] + " (emulated device)\n"; !strings.Contains(out, want) {
						t.Errorf("the %s side's header lacks %q", [2]string{"fallback", "namespace"}[i], want)
					}
				}
			})
		}
	}
}
