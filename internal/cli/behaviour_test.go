package cli

import (
	"bytes"
	"context"
	"io"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pvperf/pvperf/bench/oob"
	"github.com/pvperf/pvperf/emu"
	"github.com/pvperf/pvperf/internal/clock"
)

// behaviour shows what one option changes: the same command line without
// and with it, run through Main on the emulator; want matches the output
// (stdout and stderr) with the option and not without it.
type behaviour struct {
	opt           string // long name
	test          string
	without, with string
	want          string // regular expression
	status        int    // exit status with the option (-1: runs until stopped)
	// file, if set, is a file in the working directory whose contents are
	// checked with the output.
	file string
}

// behaviours covers the options whose effect shows in the output of a
// loopback run. optionEvidence names the tests that show the others.
var behaviours = []behaviour{
	{"ib-dev", "write_bw", "--loopback -n 100", "--loopback -n 100 -d emu1", `Device +: emu1\n`, 0, ""},
	{"ib-port", "write_bw", "--loopback -n 100", "--loopback -n 100 -i 2", `Unable to query port 2 attributes`, 1, ""},
	{"mtu", "write_bw", "--loopback -n 100", "--loopback -n 100 -m 256", `Mtu +: 256\[B\]`, 0, ""},
	{"size", "write_bw", "--loopback -n 100", "--loopback -n 100 -s 4096", `(?m)^ 4096 +100 `, 0, ""},
	{"iters", "write_bw", "--loopback -n 100", "--loopback -n 300", `(?m)^ 65536 +300 `, 0, ""},
	{"tx-depth", "write_bw", "--loopback -n 100", "--loopback -n 100 -t 7", `TX depth +: 7\n`, 0, ""},
	{"gid-index", "write_bw", "--loopback -n 100", "--loopback -n 100 -x 0", `GID index +: 0\n(.*\n)* GID: 254:128:`, 0, ""},
	{"all", "write_bw", "--loopback -n 100", "--loopback -n 100 -a", `(?m)^ 2 +100 [^\n]*\n(.*\n)* 8388608 +100 `, 0, ""},
	{"connection", "send_bw", "--loopback -n 100", "--loopback -n 100 -c UC", `Connection type : UC`, 0, ""},
	{"qp", "write_bw", "--loopback -n 100", "--loopback -n 100 -q 2", `Number of qps +: 2[^\n]*\n(.*\n)* local address(.*\n)* local address`, 0, ""},
	{"events", "send_bw", "--loopback -n 100", "--loopback -n 100 -e", `Test with events\.`, 0, ""},
	{"vector", "send_bw", "--loopback -n 100 -e", "--loopback -n 100 -e -X 2", ` Completion vector specified is invalid\n Max completion vector = 0\n`, 1, ""},
	{"inline_size", "send_lat", "--loopback -n 100", "--loopback -n 100 -I 16", `Max inline data : 16\[B\]`, 0, ""},
	{"outs", "read_bw", "--loopback -n 100", "--loopback -n 100 -o 1", `Outstand reads  : 1\n`, 0, ""},
	{"tos", "write_bw", "--loopback -n 100 -R", "--loopback -n 100 -R --tos 3", ` Data ex. method : rdma_cm \tTOS    : 3\n`, 0, ""},
	{"rdma_cm", "write_bw", "--loopback -n 100", "--loopback -n 100 -R", ` rdma_cm QPs\t : ON\n(.*\n)* Data ex. method : rdma_cm\n`, 0, ""},
	{"comm_rdma_cm", "write_bw", "--loopback -n 100", "--loopback -n 100 -z", ` rdma_cm QPs\t : OFF\n(.*\n)* Data ex. method : rdma_cm\n`, 0, ""},
	{"hop_limit", "write_bw", "--loopback -n 100", "--loopback -n 100 --hop_limit 3", ` Hop limit only valid for RawEth QP`, 1, ""},
	{"rx-depth", "send_bw", "--loopback -n 100 -b", "--loopback -n 100 -b -r 64", `RX depth +: 64\n`, 0, ""},
	{"bidirectional", "send_bw", "--loopback -n 100", "--loopback -n 100 -b", `Send Bidirectional BW Test`, 0, ""},
	{"cq-mod", "write_bw", "--loopback -n 100 -s 64", "--loopback -n 100 -s 64 -Q 10", `CQ Moderation +: 10\n`, 0, ""},
	{"noPeak", "write_bw", "--loopback -n 100", "--loopback -n 100 -N", `(?m)^ 65536 +100 +0\.00 `, 0, ""},
	{"report-histogrm", "send_lat", "--loopback -n 100", "--loopback -n 100 -H", `(?m)^#, usec\n1, `, 0, ""},
	{"atomic_type", "atomic_bw", "--loopback -n 100", "--loopback -n 100 -A CMP_AND_SWAP", `Atomic CMP_AND_SWAP BW Test`, 0, ""},
	{"post_list", "write_bw", "--loopback -n 100", "--loopback -n 100 -l 4", `Post List +: 4\n`, 0, ""},
	{"data_validation", "write_bw", "--loopback -n 3000 -s 4096", "--loopback -n 3000 -s 4096 --data_validation", `(?m)^-+\nVALIDATION: PASSED - [1-9][0-9]* chunks, [1-9][0-9]* bytes`, 0, ""},
	{"data_validation_debug", "read_bw", "--loopback -n 3000 -s 4096 --data_validation", "--loopback -n 3000 -s 4096 --data_validation --data_validation_debug",
		`(?m)^\[DATA_VALIDATION\] validation_chunk_size=128 \(tx_depth=128\), chunk_bytes=524288, chunks_per_qp=24, ring_size=12582912 bytes\n(.*\n)*  Markers: [0-9]+ scanned, [0-9]+ hit`, 0, ""},
	{"duration", "write_bw", "--loopback -n 100", "--loopback -D 1", ` WARNING: BW peak won't be measured in this run\.\n`, 0, ""},
	{"limit_bw", "write_bw", "--loopback -n 100", "--loopback -n 100 -w 1e12", `Error: BW result is below bw limit`, 1, ""},
	{"limit_msgrate", "write_bw", "--loopback -n 100 -w 0", "--loopback -n 100 -w 0 -y 1e12", `Error: Msg rate  is below msg_rate limit`, 1, ""},
	{"force-link", "write_bw", "--loopback -n 100", "--loopback -n 100 --force-link=IB", `Link type +: IB\n(.*\n)*.*global route header`, 1, ""},
	{"report_gbits", "write_bw", "--loopback -n 100", "--loopback -n 100 --report_gbits", `BW average\[Gb/sec\]`, 0, ""},
	{"use-srq", "send_bw", "--loopback -n 100", "--loopback -n 100 --use-srq", `Using SRQ +: ON`, 0, ""},
	{"report-both", "send_bw", "--loopback -n 100 -b", "--loopback -n 100 -b --report-both", ` Remote results: `, 0, ""},
	{"reversed", "send_bw", "--loopback -n 100", "--loopback -n 100 --reversed", ` RX depth +: 100\n(.*\n)* 65536 +100 +0\.00 `, 0, ""},
	{"pkey_index", "write_bw", "--loopback -n 100", "--loopback -n 100 --pkey_index=1", ` Specified PKey Index, 1, greater than allowed max, 0\n Changing to 0\n`, 0, ""},
	{"output", "write_bw", "--loopback -n 100", "--loopback -n 100 --output=bandwidth", `(?m)\A(Disabling dynamic polling\n)?[0-9]+\.[0-9]+\n\z`, 0, ""},
	{"cpu_util", "write_bw", "--loopback -D 1 --perftest_output", "--loopback -D 1 --perftest_output --cpu_util", `CPU_Util\[%\]\n 65536 .*\t +[0-9.]+\n`, 0, ""},
	{"perftest_output", "send_lat", "--loopback -n 200", "--loopback -n 200 --perftest_output", `percentile\[usec\] \n 2 [^\n]*\n-{87}\n$`, 0, ""},
	{"perform_warm_up", "write_bw", "--loopback -n 20 -a --write_with_imm", "--loopback -n 20 -a --write_with_imm --perform_warm_up", `Warm up not supported for WRITE_IMM verb.\nSkipping\n`, 0, ""},
	{"repeat", "write_bw", "--loopback -n 200", "--loopback -n 200 --repeat 3", `\n 3 runs: median, range and 95% confidence interval of the median \(bootstrap, 2000 resamples\)\n.*\n 65536 +local +BW average\[MiB/sec\] +[0-9.]+ +[0-9.]+`, 0, ""},
	{"repeat_ci", "send_lat", "--loopback -n 200 --repeat 6", "--loopback -n 200 --repeat 6 --repeat_ci 90", `\n [56] runs: .*\n target: interval within ±90% of the median, (reached|not reached)\n`, 0, ""},
	{"interval_json", "write_bw", "--loopback -D 2", "--loopback -D 2 --interval_json ivl.json", `\{"test":"write_bw","msg_size_bytes":65536,"from_s":0,"to_s":[0-9.]+,"sampled":(true|false),"messages":[1-9][0-9]*,"MiB_per_s":[0-9.]+`, 0, "ivl.json"},
	{"ipv6", "write_bw", "--loopback -n 100", "--loopback -n 100 --ipv6", `GID index +: 2\n`, 0, ""},
	{"wait_destroy", "write_bw", "--loopback -n 100", "--loopback -n 100 --wait_destroy=1", ` Waiting 1 seconds before releasing resources\.\.\.`, 0, ""},
	{"disable_pcie_relaxed", "write_bw", "--loopback -n 100", "--loopback -n 100 --disable_pcie_relaxed", `PCIe relax order: OFF`, 0, ""},
	{"write_with_imm", "write_bw", "--loopback -n 100", "--loopback -n 100 --write_with_imm", `RDMA_Write_imm BW Test`, 0, ""},
	{"send_with_imm", "send_bw", "--loopback -n 100", "--loopback -n 100 --send_with_imm", `Send_imm BW Test`, 0, ""},
	{"cqe_poll", "write_bw", "--loopback -n 5000 -s 64", "--loopback -n 5000 -s 64 --cqe_poll=32", `CQE Poll Batch  : 32\n`, 0, ""},
	{"disable_dynamic_polling", "write_bw", "--loopback -n 5000 -s 64", "--loopback -n 5000 -s 64 --disable_dynamic_polling", `CQE Poll Batch  : 16\n`, 0, ""},
	{"payload_file_path", "write_bw", "--loopback -n 100", "--loopback -n 100 --payload_file_path=/nonexistent", `Failed to open '/nonexistent'`, 1, ""},
	{"out_json", "write_bw", "--loopback -n 100", "--loopback -n 100 --out_json", `"BW_average":`, 0, "perftest_out.json"},
	{"out_json_file", "write_bw", "--loopback -n 100 --out_json", "--loopback -n 100 --out_json --out_json_file=b.json", `"BW_average":`, 0, "b.json"},
	{"out_csv", "write_bw", "--loopback -n 100", "--loopback -n 100 --out_csv=w.csv", `(?m)^test,`, 0, "w.csv"},
	{"out_html", "write_bw", "--loopback -n 100", "--loopback -n 100 --out_html=w.html", `<html`, 0, "w.html"},
}

// optionEvidence names, for the options a loopback run's output does not
// show, the test that shows what they do.
var optionEvidence = map[string]string{
	"port":            "TestOptionAddresses",
	"check_data":      "TestCheckDataTwoProcesses",
	"bind_source_ip":  "TestOptionAddresses",
	"ipv6-addr":       "TestOptionAddresses",
	"peer-timeout":    "TestOptionAddresses",
	"params-size":     "TestOptionParamsSize",
	"retry_count":     "TestRdmaCM",
	"help":            "TestHelp",
	"version":         "TestVersion",
	"report-cycles":   "TestOptionReportCycles",
	"report-unsorted": "TestOptionReportOrder",
	"latency_gap":     "TestOptionLatencyGap",
	"margin":          "TestDurationMargin",
	"loopback":        "TestLoopbackMatrix",
	"qp-timeout":      "TestQPAttributes",
	"sl":              "TestQPAttributes",
	"tclass":          "TestQPAttributes",
	"flow_label":      "TestQPAttributes",
	"dlid":            "TestQPAttributes",
	"perform_warm_up": "TestWarmUpPosts",
	"recv_post_list":  "TestRecvPostList",
	"run_infinitely":  "TestRunInfinitely; send_bw refuses it (its receiving server's endless loop is not implemented), and so do -b and --write_with_imm",
}

func runOpt(t *testing.T, test, args string) (int, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	status := MainContext(ctx, test, strings.Fields(args), &out, &errOut)
	return status, out.String() + errOut.String()
}

// TestOptionBehaviour runs every row of behaviours.
func TestOptionBehaviour(t *testing.T) {
	t.Setenv(emu.EnvVar, "profile=unrestricted;profile=unrestricted")
	t.Chdir(t.TempDir()) // perftest_out.json and friends land here
	for _, b := range behaviours {
		t.Run(b.opt, func(t *testing.T) {
			re := regexp.MustCompile(b.want)
			withFile := func(out string) string {
				if b.file == "" {
					return out
				}
				data, _ := os.ReadFile(b.file)
				os.Remove(b.file)
				return out + string(data)
			}
			status, out := runOpt(t, b.test, b.without)
			out = withFile(out)
			if status != 0 {
				t.Fatalf("%s %s: status %d\n%s", b.test, b.without, status, out)
			}
			if re.MatchString(out) {
				t.Fatalf("%s %s (without --%s) already matches %q:\n%s", b.test, b.without, b.opt, b.want, out)
			}
			if b.status < 0 { // runs until interrupted
				ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
				defer cancel()
				var o bytes.Buffer
				MainContext(ctx, b.test, strings.Fields(b.with), &o, &o)
				out = o.String()
			} else {
				status, out = runOpt(t, b.test, b.with)
				out = withFile(out)
				if status != b.status {
					t.Fatalf("%s %s: status %d, want %d\n%s", b.test, b.with, status, b.status, out)
				}
			}
			if !re.MatchString(out) {
				t.Errorf("%s %s: no match for %q in:\n%s", b.test, b.with, b.want, out)
			}
		})
	}
}

// TestEveryOptionShown: every option pvperf implements has a behaviour
// row or names a test that exists.
func TestEveryOptionShown(t *testing.T) {
	rows := map[string]bool{}
	for _, b := range behaviours {
		rows[b.opt] = true
	}
	src := testSources(t)
	for _, o := range options().opts {
		if o.unsupported != "" || o.noop != "" {
			if rows[o.long] || optionEvidence[o.long] != "" {
				t.Errorf("--%s is refused or without effect, yet has a behaviour test", o.long)
			}
			continue
		}
		name, ok := optionEvidence[o.long]
		name, _, _ = strings.Cut(name, "; ") // "Test; note"
		switch {
		case rows[o.long]:
		case !ok:
			t.Errorf("--%s: no test shows what it does", o.long)
		case !strings.Contains(src, "func "+name+"("):
			t.Errorf("--%s: its test %s does not exist", o.long, name)
		}
	}
}

// testSources is the text of the module's test files.
func testSources(t *testing.T) string {
	t.Helper()
	var b strings.Builder
	root := filepath.Join("..", "..")
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".cache" || d.Name() == ".git") {
			return filepath.SkipDir
		}
		if strings.HasSuffix(p, "_test.go") {
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			b.Write(data)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// TestOptionAddresses: -p, --bind_source_ip and --ipv6-addr choose the
// out-of-band connection's addresses, seen by a listener of the test's
// own; --peer-timeout bounds the wait for a peer that says nothing.
func TestOptionAddresses(t *testing.T) {
	t.Setenv(emu.EnvVar, "")
	accept := func(network, addr string) (net.Listener, chan net.Addr) {
		ln, err := net.Listen(network, addr)
		if err != nil {
			t.Skipf("listen %s %s: %v", network, addr, err)
		}
		t.Cleanup(func() { ln.Close() })
		peers := make(chan net.Addr, 4)
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				peers <- c.RemoteAddr()
				t.Cleanup(func() { c.Close() }) // silent: the client times out
			}
		}()
		return ln, peers
	}
	port := func(ln net.Listener) string { return strconv.Itoa(ln.Addr().(*net.TCPAddr).Port) }

	ln, peers := accept("tcp4", "127.0.0.1:0")
	start := time.Now()
	status, out := runOpt(t, "write_bw", "-n 100 --peer-timeout=1s -p "+port(ln)+" --bind_source_ip=127.0.0.2 127.0.0.1")
	if status == 0 {
		t.Fatalf("a silent peer passed:\n%s", out)
	}
	select {
	case a := <-peers:
		if ip := a.(*net.TCPAddr).IP.String(); ip != "127.0.0.2" {
			t.Errorf("connection from %s, want 127.0.0.2 (--bind_source_ip)", ip)
		}
	default:
		t.Errorf("no connection on port %s (-p):\n%s", port(ln), out)
	}
	if d := time.Since(start); d > time.Minute {
		t.Errorf("--peer-timeout=1s: the client gave up after %v", d)
	}

	ln6, peers6 := accept("tcp6", "[::1]:0")
	status, out = runOpt(t, "write_bw", "-n 100 --peer-timeout=1s --ipv6-addr -p "+port(ln6)+" ::1")
	if status == 0 {
		t.Fatalf("a silent peer passed:\n%s", out)
	}
	select {
	case a := <-peers6:
		if a.(*net.TCPAddr).IP.To4() != nil {
			t.Errorf("--ipv6-addr connected from %v", a)
		}
	default:
		t.Errorf("no IPv6 connection:\n%s", out)
	}
}

// TestOptionParamsSize: --params-size=312 makes a client send perftest's
// parameter struct in 312 bytes (perftest built without mlx5dv), as a
// server of the test's own speaking perftest 6.29 sees; without it, 320.
// Another size is refused.
func TestOptionParamsSize(t *testing.T) {
	t.Setenv(emu.EnvVar, "")
	sent := func(args string) int {
		ln, err := net.Listen("tcp4", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		got := make(chan int, 1)
		go func() {
			nc, err := ln.Accept()
			if err != nil {
				got <- -1
				return
			}
			defer nc.Close()
			c, err := oob.NewConn(nc, oob.Server, oob.Config{Version: "6.29", ParamsSize: oob.ParamsSize})
			if err != nil {
				got <- -1
				return
			}
			if _, err := c.ExchangeVersion(); err != nil {
				got <- -2
				return
			}
			if _, err := c.ExchangeSysData(oob.SysData{PageSize: 4096, CacheLineSize: 64}); err != nil {
				got <- -3
				return
			}
			if _, err := c.ExchangeMTU(oob.MTU1024); err != nil {
				got <- -4
				return
			}
			// The struct, read as it comes: a 312-byte one has no tail.
			b := make([]byte, oob.ParamsSize)
			_ = nc.SetReadDeadline(time.Now().Add(10 * time.Second))
			n, _ := io.ReadAtLeast(nc, b, oob.ParamsSizeNoMLX5DV)
			if n < len(b) {
				_ = nc.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
				k, _ := io.ReadFull(nc, b[n:])
				n += k
			}
			got <- n
		}()
		port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
		status, out := runOpt(t, "write_bw", "-n 100 --peer-timeout=2s -p "+port+" "+args+" 127.0.0.1")
		if status == 0 {
			t.Fatalf("%s: a server that never answers passed:\n%s", args, out)
		}
		return <-got
	}
	if n := sent(""); n != oob.ParamsSize {
		t.Errorf("without --params-size the client sent %d bytes, want %d", n, oob.ParamsSize)
	}
	if n := sent("--params-size=312"); n != oob.ParamsSizeNoMLX5DV {
		t.Errorf("--params-size=312: the client sent %d bytes, want %d", n, oob.ParamsSizeNoMLX5DV)
	}
	status, out := runOpt(t, "write_bw", "--loopback --params-size=300")
	if status == 0 || !strings.Contains(out, "--params-size takes 312 or 320") {
		t.Errorf("--params-size=300: status %d\n%s", status, out)
	}
}

// TestOptionReportCycles: -C reports CPU cycles, not microseconds. With a
// --latency_gap of 1 ms before each post on both sides, send_lat's half
// round trip is a millisecond and more: that many cycles at the CPU's rate
// (the cycle counter's, or /proc/cpuinfo's cpu MHz).
func TestOptionReportCycles(t *testing.T) {
	t.Setenv(emu.EnvVar, "")
	tmin := func(args string) float64 {
		status, out := runOpt(t, "send_lat", args)
		if status != 0 {
			t.Fatalf("%s: status %d\n%s", args, status, out)
		}
		for l := range strings.SplitSeq(out, "\n") {
			if f := strings.Fields(l); len(f) == 9 && f[0] == "2" {
				v, err := strconv.ParseFloat(f[2], 64)
				if err == nil {
					return v
				}
			}
		}
		t.Fatalf("%s: no result row\n%s", args, out)
		return 0
	}
	clock.Calibrate()
	mhz := clock.TicksMHz()
	if mhz == 0 {
		b, err := os.ReadFile("/proc/cpuinfo")
		if err != nil {
			t.Skip("no cycle rate known here")
		}
		for l := range strings.SplitSeq(string(b), "\n") {
			if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "cpu MHz" {
				mhz, _ = strconv.ParseFloat(strings.TrimSpace(v), 64)
				break
			}
		}
	}
	if mhz == 0 {
		t.Skip("no cycle rate known here")
	}
	cycles := tmin("--loopback -n 20 --latency_gap 1000 -C")
	// The gap bounds it from below; above, a loaded machine may add a
	// lot, but not tens of milliseconds.
	if us := cycles / mhz; us < 1000 || us > 50000 {
		t.Errorf("t_min %v cycles at %.0f MHz is %.1f us, want 1000 (the 1 ms gap) and a little more", cycles, mhz, us)
	}
}

// TestOptionReportOrder: -H prints the samples sorted, -U in the order
// they were measured (the first, with the connection's warm-up, is
// seldom the smallest).
func TestOptionReportOrder(t *testing.T) {
	t.Setenv(emu.EnvVar, "")
	dump := func(flag string) []float64 {
		status, out := runOpt(t, "send_lat", "--loopback -n 200 "+flag)
		if status != 0 {
			t.Fatalf("%s: status %d\n%s", flag, status, out)
		}
		var v []float64
		in := false
		for l := range strings.SplitSeq(out, "\n") {
			if l == "#, usec" {
				in = true
				continue
			}
			k, x, ok := strings.Cut(l, ", ")
			if !in || !ok || !isDigits(k) {
				if in && len(v) > 0 {
					break
				}
				continue
			}
			f, err := strconv.ParseFloat(x, 64)
			if err != nil {
				t.Fatalf("%s: sample line %q", flag, l)
			}
			v = append(v, f)
		}
		if len(v) < 100 {
			t.Fatalf("%s: %d samples\n%s", flag, len(v), out)
		}
		return v
	}
	if h := dump("-H"); !slices.IsSorted(h) {
		t.Errorf("-H: samples not sorted: %v", h[:10])
	}
	// 199 measured times in sorted order by chance: practically never.
	if u := dump("-U"); slices.IsSorted(u) {
		t.Errorf("-U: samples sorted: %v", u[:10])
	}
}

func isDigits(s string) bool {
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return s != ""
}

// TestOptionLatencyGap: --latency_gap waits that many microseconds
// between iterations, so the run lasts at least iterations times the gap.
func TestOptionLatencyGap(t *testing.T) {
	t.Setenv(emu.EnvVar, "")
	start := time.Now()
	if status, out := runOpt(t, "send_lat", "--loopback -n 100 --latency_gap=10000"); status != 0 {
		t.Fatalf("status %d\n%s", status, out)
	}
	if d := time.Since(start); d < 100*10*time.Millisecond {
		t.Errorf("100 iterations 10 ms apart took %v", d)
	}
}
