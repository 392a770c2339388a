package guest

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

var (
	device        = flag.String("guest.device", "", "the kernel RDMA device to check (none: every check skips)")
	pvperfDir     = flag.String("guest.pvperf", "/pvperf", "directory of pvperf's commands and test binaries")
	perftestDir   = flag.String("guest.perftest", "/usr/bin", "directory of perftest's commands (ib_write_bw, ...)")
	perftestNew   = flag.String("guest.perftest-new", "", "directory of a perftest 6.29 or later, which the interop checks also run against (none: not run)")
	addr          = flag.String("guest.addr", "127.0.0.1", "the address clients connect to")
	gidIndex      = flag.Int("guest.gid", 0, "the GID index every test uses (-x)")
	port          = flag.Int("guest.port", 18515, "the out-of-band port")
	iters         = flag.Int("guest.iters", 200, "iterations of the pair checks (-n)")
	rounds        = flag.Int("guest.rounds", 7, "rounds of the side-by-side comparison")
	runTimeout    = flag.Duration("guest.run-timeout", 60*time.Second, "how long one side of a pair may run")
	listenTimeout = flag.Duration("guest.listen-timeout", 30*time.Second, "how long a server may take to listen")
	peerTimeout   = flag.Duration("guest.peer-timeout", 0, "pvperf's --peer-timeout in the pair checks (0: its default)")
	deviceWait    = flag.Duration("guest.device-wait", 30*time.Second, "how long the device's port may take to become ACTIVE with its GID")
	budgetFlag    = flag.Duration("guest.budget", 0, "no pair starts after this long (0: no limit), so that the summary comes before the guest's own limit")
)

// started is when the checks began (the time budget counts from it).
var started = time.Now()

// budget returns d, or what is left of the time budget when less; ok is
// false when under 5 s are left.
func budget(d time.Duration) (time.Duration, bool) {
	if *budgetFlag <= 0 {
		return d, true
	}
	left := *budgetFlag - time.Since(started)
	if left < 5*time.Second {
		return 0, false
	}
	return min(d, left), true
}

// setupErr is why the device is not ready (nil: it is).
var setupErr error

func TestMain(m *testing.M) {
	flag.Parse()
	if *device != "" {
		setupErr = waitDevice(*device, *gidIndex, *deviceWait)
		info()
		up, _ := os.ReadFile("/proc/uptime")
		fmt.Printf("PVPERF-GUEST-CHECKS-BEGIN uptime %ss\n", strings.SplitN(string(up), ".", 2)[0])
	}
	os.Exit(m.Run())
}

// needDevice skips a check when no device was given and fails it when the
// device never became ready.
func needDevice(t *testing.T) {
	t.Helper()
	if *device == "" {
		t.Skip("no -guest.device: these checks run inside a guest with a kernel RDMA device (scripts/guest-test.sh)")
	}
	if setupErr != nil {
		t.Fatalf("device %s not ready: %v", *device, setupErr)
	}
}

// common are the options every pair check passes: the device, the GID,
// no CPU-frequency check.
func common() []string {
	return []string{"-d", *device, "-x", strconv.Itoa(*gidIndex), "-F"}
}

// args are common, "-n -guest.iters" and extra, split on spaces.
func args(extra string) []string {
	a := append(common(), "-n", strconv.Itoa(*iters))
	return append(a, strings.Fields(extra)...)
}

// waitDevice waits until port 1 of dev is ACTIVE with a GID at index gid.
func waitDevice(dev string, gid int, wait time.Duration) error {
	port := filepath.Join("/sys/class/infiniband", dev, "ports/1")
	var state, g string
	for end := time.Now().Add(wait); ; {
		b, _ := os.ReadFile(filepath.Join(port, "state"))
		state = strings.TrimSpace(string(b))
		b, _ = os.ReadFile(filepath.Join(port, "gids", strconv.Itoa(gid)))
		g = strings.TrimSpace(string(b))
		if strings.Contains(state, "ACTIVE") && g != "" && strings.Trim(g, "0:") != "" {
			return nil
		}
		if time.Now().After(end) {
			return fmt.Errorf("port 1 is %q, GID %d is %q after %s", state, gid, g, wait)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// info prints what the checks run on: the kernel, the clock, both
// versions, the device's GIDs and pvperf's devinfo.
func info() {
	fmt.Println("=== guest")
	kernel, _ := os.ReadFile("/proc/version")
	cs, _ := os.ReadFile("/sys/devices/system/clocksource/clocksource0/current_clocksource")
	fmt.Printf("kernel: %s", kernel)
	fmt.Printf("clocksource: %s", cs)
	run := func(name string, args ...string) string {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
		s := strings.TrimSpace(string(out))
		if err != nil {
			s += fmt.Sprintf(" (%v)", err)
		}
		return s
	}
	if clock := filepath.Join(*pvperfDir, "clock.test"); exists(clock) {
		out := run(clock, "-test.run", "TestNowIsMonotonicNanoseconds$", "-test.v")
		if m := regexp.MustCompile(`time-stamp counter used: .*`).FindString(out); m != "" {
			fmt.Println("pvperf's clock:", m)
		}
	}
	fmt.Println("perftest:", strings.Join(strings.Fields(run(pt("write_bw"), "-V")), " "))
	fmt.Println("pvperf:", strings.Join(strings.Fields(run(pv("write_bw"), "-V")), " "))
	fmt.Printf("device %s:", *device)
	if setupErr != nil {
		fmt.Printf(" NOT READY: %v\n", setupErr)
	} else {
		fmt.Println(" ready")
	}
	gids, _ := filepath.Glob(filepath.Join("/sys/class/infiniband", *device, "ports/*/gids/*"))
	for _, g := range gids {
		b, _ := os.ReadFile(g)
		v := strings.TrimSpace(string(b))
		if strings.Trim(v, "0:") == "" {
			continue
		}
		idx := filepath.Base(g)
		p := filepath.Dir(filepath.Dir(g))
		typ, _ := os.ReadFile(filepath.Join(p, "gid_attrs/types", idx))
		fmt.Printf("  GID %s/%s %s %s\n", filepath.Base(p), idx, v, strings.TrimSpace(string(typ)))
	}
	fmt.Println("+ devinfo")
	fmt.Println(run(pv("devinfo")))
}

func exists(name string) bool {
	_, err := os.Stat(name)
	return err == nil
}

// tests are perftest's eight tests.
var tests = []string{"write_bw", "read_bw", "send_bw", "atomic_bw", "write_lat", "read_lat", "send_lat", "atomic_lat"}

// serverReports tells whether the server of test prints a result row
// (not in read_lat and atomic_lat, where it stays passive).
func serverReports(test string) bool { return test != "read_lat" && test != "atomic_lat" }

// TestSanity runs pvperf on the emulated device, which every guest has.
func TestSanity(t *testing.T) {
	needDevice(t)
	ctx, cancel := context.WithTimeout(context.Background(), *runTimeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, pv("write_bw"), "-d", "emu0", "--loopback", "-F", "-n", "200").CombinedOutput()
	t.Logf("write_bw -d emu0 --loopback -F -n 200\n%s", out)
	if err != nil {
		t.Fatalf("%v: %s", err, lastLine(string(out)))
	}
	if !hasRow(string(out)) {
		t.Fatal("no result row")
	}
}

// TestPvperf runs the eight tests, pvperf client against pvperf server.
func TestPvperf(t *testing.T) {
	needDevice(t)
	for _, test := range tests {
		t.Run(test, func(t *testing.T) {
			// Both sides check what they received (pvperf's pattern).
			pair{server: pv(test), client: pv(test), args: args("--check_data"), serverRow: serverReports(test)}.check(t)
		})
	}
	// UD and several queue pairs, checked too.
	for _, c := range []struct{ test, opts string }{{"send_bw", "-c UD --check_data"}, {"write_bw", "-q 2 --check_data"}, {"read_bw", "-q 2 --check_data"}} {
		t.Run(interopName(c.test, c.opts), func(t *testing.T) {
			pair{server: pv(c.test), client: pv(c.test), args: args(c.opts), serverRow: serverReports(c.test)}.check(t)
		})
	}
}

// interop are the configurations pvperf and perftest run against each
// other: a test and its options (after the common ones and -n).
var interop = []struct{ test, opts string }{
	{"write_bw", ""}, {"read_bw", ""}, {"send_bw", ""}, {"atomic_bw", ""},
	{"write_lat", ""}, {"read_lat", ""}, {"send_lat", ""}, {"atomic_lat", ""},
	{"send_bw", "-c UD"}, {"write_bw", "-q 2"},
}

func interopName(test, opts string) string {
	return strings.ReplaceAll(strings.TrimSpace(test+" "+opts), " ", "_")
}

// TestReference runs perftest against perftest in every interop
// configuration: what the device does for perftest itself.
func TestReference(t *testing.T) {
	needDevice(t)
	for _, c := range interop {
		t.Run(interopName(c.test, c.opts), func(t *testing.T) {
			pair{server: pt(c.test), client: pt(c.test), args: args(c.opts), serverRow: serverReports(c.test)}.check(t)
		})
	}
}

// TestInterop runs pvperf against perftest, both ways, in every interop
// configuration; against -guest.perftest-new's too when given.
func TestInterop(t *testing.T) {
	needDevice(t)
	for _, c := range interop {
		for _, dir := range []struct {
			name           string
			server, client string
		}{
			{"pvperf_server", pv(c.test), pt(c.test)},
			{"perftest_server", pt(c.test), pv(c.test)},
			{"pvperf_server_new", pv(c.test), ptNew(c.test)},
			{"perftest_new_server", ptNew(c.test), pv(c.test)},
		} {
			if dir.server == "" || dir.client == "" {
				continue
			}
			t.Run(interopName(c.test, c.opts)+"/"+dir.name, func(t *testing.T) {
				pair{server: dir.server, client: dir.client, args: args(c.opts), serverRow: serverReports(c.test)}.check(t)
			})
		}
	}
}

// TestRunInfinitely runs write_bw and read_bw with --run_infinitely -D 1,
// pvperf against perftest both ways, and stops the client with SIGINT
// after 4 s, as a user does with Ctrl-C: the client must have printed a
// row a second, say "User stopped traffic" and exit 0, and the server
// exit 0 after perftest's last words: "Client closed connection", or with
// perftest 6.06 as the server, the row of the client's report (zeros).
// perftest 6.06's client has no SIGINT handler (Ctrl-C kills it), so
// pvperf's server faces perftest's client only with -guest.perftest-new.
func TestRunInfinitely(t *testing.T) {
	needDevice(t)
	for _, test := range []string{"write_bw", "read_bw"} {
		for _, c := range []struct {
			name           string
			server, client string
			closed         bool // the server says "Client closed connection"
		}{
			{"perftest_server", pt(test), pv(test), false},
			{"pvperf_server_new", pv(test), ptNew(test), true},
			{"perftest_new_server", ptNew(test), pv(test), true},
		} {
			if c.server == "" || c.client == "" {
				continue
			}
			t.Run(test+"/"+c.name, func(t *testing.T) {
				p := pair{server: c.server, client: c.client, args: append(common(), "--run_infinitely", "-D", "1"), stopClient: 4 * time.Second}
				res := p.run()
				res.log(t, p, false)
				if res.err != nil {
					t.Fatal(res.err)
				}
				if n := strings.Count(res.client, "\n 65536 "); n < 2 {
					t.Errorf("the client printed %d rows in 4 s, want a row a second", n)
				}
				if !strings.Contains(res.client, "\n User stopped traffic\n") {
					t.Error("the client did not say the traffic was stopped")
				}
				if c.closed && !strings.Contains(res.server, " Client closed connection\n") {
					t.Error(`the server did not say "Client closed connection"`)
				}
				if !c.closed && !hasRow(res.server) {
					t.Error("perftest 6.06's server printed no row of the client's report")
				}
			})
		}
	}
}

// TestDataValidation runs write_bw and read_bw with --data_validation,
// one way, both ways (-b) and over rdma_cm (-R), pvperf against pvperf
// and, given -guest.perftest-new, against that perftest both ways: the
// validating side (WRITE's server, READ's client, both with -b) must say
// VALIDATION: PASSED after its results.
func TestDataValidation(t *testing.T) {
	needDevice(t)
	passed := regexp.MustCompile(`(?m)^-+\n(VALIDATION: PASSED \(SERVER\) - [1-9][0-9]* chunks, [1-9][0-9]* bytes.*\n)?VALIDATION: PASSED( \((SERVER|CLIENT)\))? - [1-9][0-9]* chunks, [1-9][0-9]* bytes`)
	for _, test := range []string{"write_bw", "read_bw"} {
		runs := []struct{ name, server, client string }{{"pvperf", pv(test), pv(test)}}
		if *perftestNew != "" {
			runs = append(runs, struct{ name, server, client string }{"pvperf_server", pv(test), ptNew(test)},
				struct{ name, server, client string }{"perftest_server", ptNew(test), pv(test)})
		}
		for _, opt := range []string{"", "-b", "-R"} {
			for _, r := range runs {
				t.Run(interopName(test, opt)+"/"+r.name, func(t *testing.T) {
					a := append(common(), "--data_validation", "-s", "4096", "-n", "5000")
					if opt != "" {
						a = append(a, opt)
					}
					p := pair{server: r.server, client: r.client, args: a, serverRow: true}
					res := p.run()
					res.log(t, p, false)
					if res.err != nil {
						t.Fatal(res.err)
					}
					check := func(side, out string) {
						if !passed.MatchString(out) {
							t.Errorf("the %s (a validating side) did not pass the validation", side)
						}
					}
					if opt == "-b" || test == "write_bw" {
						check("server", res.server)
					}
					if opt == "-b" || test == "read_bw" {
						check("client", res.client)
					}
				})
			}
		}
	}
	if *perftestNew == "" {
		t.Log("against perftest: not run, no -guest.perftest-new (perftest 6.29 or later; scripts/guest-test.sh takes its build directory from PVPERF_GUEST_PERFTEST_NEW)")
	}
}

// TestReports runs a write_bw -a sweep between two pvperf processes, each
// writing --out_json, --out_csv and --out_html in its own directory: the
// client's CSV has a row per size (23), the server's the client's last
// row; both pages hold charts. The client's JSON is printed between
// PVPERF-GUEST-FILE markers, for the host to compare with the emulator's.
func TestReports(t *testing.T) {
	needDevice(t)
	srv, cli := t.TempDir(), t.TempDir()
	a := append(common(), "-a", "-n", "20", "--out_json", "--out_json_file", "w.json", "--out_csv", "w.csv", "--out_html", "w.html")
	p := pair{server: pv("write_bw"), client: pv("write_bw"), args: a, serverDir: srv, clientDir: cli}
	r := p.run()
	r.log(t, p, true)
	if r.err != nil {
		t.Fatal(r.err)
	}
	read := func(dir, name string) string {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil || len(b) == 0 {
			t.Errorf("%s: missing or empty (%v)", filepath.Join(dir, name), err)
		}
		return string(b)
	}
	cjson, ccsv, chtml := read(cli, "w.json"), read(cli, "w.csv"), read(cli, "w.html")
	_, scsv, shtml := read(srv, "w.json"), read(srv, "w.csv"), read(srv, "w.html")
	if t.Failed() {
		return
	}
	csvRows := func(s string) int { return len(strings.Split(strings.TrimSpace(s), "\n")) - 1 }
	crows, srows := csvRows(ccsv), csvRows(scsv)
	csvg, ssvg := strings.Count(chtml, "<svg"), strings.Count(shtml, "<svg")
	t.Logf("client: %d CSV rows, %d charts; server: %d CSV rows, %d charts", crows, csvg, srows, ssvg)
	if crows != 23 || srows != 1 || csvg < 2 || ssvg < 2 {
		t.Fatalf("client %d rows and %d charts, server %d rows and %d charts (want 23, 1, 2+, 2+)", crows, csvg, srows, ssvg)
	}
	fmt.Printf("PVPERF-GUEST-FILE-BEGIN %s-write_bw.json\n%sPVPERF-GUEST-FILE-END\n", *device, cjson)
}
