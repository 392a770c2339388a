package guest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

var (
	cmtimeBin = flag.String("guest.cmtime", "/usr/bin/cmtime", "librdmacm's cmtime (Debian's rdmacm-utils), which TestCMSetup runs beside cm_setup")
	cmConns   = flag.Int("guest.cm-conns", 100, "connections per run of TestCMSetup")
	// The setup times and the data path's figures on the guest's
	// emulated CPUs vary twofold from one run to the next: a median needs
	// nine rounds (write_bw -R: 0.86 of the plain run over five rounds,
	// 0.99 over twelve, in two runs of the same build).
	cmRounds   = flag.Int("guest.cm-rounds", 9, "rounds of TestCMSetup")
	dataRounds = flag.Int("guest.cm-data-rounds", 9, "rounds of TestCMDataPath")
)

// cmSetupSteps and cmtimeSteps are the client's steps that make up a
// connection's setup, from the id's creation to its establishment, in
// cm_setup's table and in cmtime's (whose connect step holds the QP's
// moves to RTR and RTS and the RTU: librdmacm makes them in rdma_connect's
// answer, as cm_setup does in its connect step).
var (
	cmSetupSteps = []string{"create id", "resolve addr", "resolve route", "create qp", "init qp", "connect"}
	cmtimeSteps  = []string{"create id", "resolve addr", "resolve route", "create qp", "connect"}
)

// cmRun runs a connection-setup server and client on the kernel's
// connection manager: the server first, the client once the server's id
// listens on port. serverEnds says whether the server ends by itself after
// its client (cm_setup) or must be killed (cmtime's never ends). The
// result has both outputs and the CPU time (user and system) each side
// used.
func cmRun(server, client, env []string, port int, serverEnds bool, tmo time.Duration) (r cmResult, err error) {
	var so, co bytes.Buffer
	sctx, scancel := context.WithTimeout(context.Background(), tmo)
	defer scancel()
	srv := command(sctx, server[0], server[1:], "", &so)
	srv.Env = append(os.Environ(), env...)
	if err := srv.Start(); err != nil {
		return r, fmt.Errorf("server: %w", err)
	}
	var serr error
	sdone := make(chan struct{})
	go func() { serr = srv.Wait(); close(sdone) }()
	defer func() {
		select {
		case <-sdone:
		default:
			_ = srv.Process.Kill()
			<-sdone
		}
		r.server = so.String()
		if st := srv.ProcessState; st != nil {
			r.serverCPU = st.UserTime() + st.SystemTime()
		}
	}()
	for end := time.Now().Add(*listenTimeout); !cmListening(port); {
		select {
		case <-sdone:
			return r, fmt.Errorf("server %s before listening: %s", exitText(serr), lastLine(so.String()))
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(end) {
			return r, fmt.Errorf("server not listening on port %d after %s", port, *listenTimeout)
		}
	}
	cctx, ccancel := context.WithTimeout(context.Background(), tmo)
	defer ccancel()
	cli := command(cctx, client[0], client[1:], "", &co)
	cli.Env = append(os.Environ(), env...)
	cerr := cli.Run()
	r.client = co.String()
	if st := cli.ProcessState; st != nil {
		r.clientCPU = st.UserTime() + st.SystemTime()
	}
	if cerr != nil {
		return r, fmt.Errorf("client %s: %s", exitText(cerr), lastLine(co.String()))
	}
	if serverEnds {
		select {
		case <-sdone:
			if serr != nil {
				return r, fmt.Errorf("server %s: %s", exitText(serr), lastLine(so.String()))
			}
		case <-time.After(30 * time.Second):
			return r, errors.New("server still running 30 s after its client ended")
		}
	}
	return r, nil
}

// cmResult is how a cmRun went.
type cmResult struct {
	server, client       string
	serverCPU, clientCPU time.Duration
}

// cmSetupTotal sums the client's steps of cmSetupSteps in cm_setup's JSON.
func cmSetupTotal(file string) (float64, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return 0, err
	}
	var doc struct {
		Results []struct {
			Role  string
			Steps []struct {
				Step    string
				TotalMS float64 `json:"total_ms"`
			}
		}
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		return 0, fmt.Errorf("%s: %w", file, err)
	}
	if len(doc.Results) != 1 || doc.Results[0].Role != "client" {
		return 0, fmt.Errorf("%s: not one client's result", file)
	}
	got := map[string]float64{}
	for _, s := range doc.Results[0].Steps {
		got[s.Step] = s.TotalMS
	}
	return sumSteps(got, cmSetupSteps)
}

// cmtimeTotal sums the steps of cmtimeSteps in cmtime's table
// ("create id    :        1.23 ..."; the first number is the step's total
// in ms).
func cmtimeTotal(out string) (float64, error) {
	got := map[string]float64{}
	for _, l := range strings.Split(out, "\n") {
		name, rest, ok := strings.Cut(l, ":")
		f := strings.Fields(rest)
		if !ok || len(f) != 4 {
			continue
		}
		v, err := strconv.ParseFloat(f[0], 64)
		if err != nil {
			continue
		}
		got[strings.TrimSpace(name)] = v
	}
	return sumSteps(got, cmtimeSteps)
}

func sumSteps(got map[string]float64, steps []string) (float64, error) {
	var sum float64
	for _, s := range steps {
		v, ok := got[s]
		if !ok {
			return 0, fmt.Errorf("no step %q in the table", s)
		}
		sum += v
	}
	return sum, nil
}

// cmVariant is one way TestCMSetup sets connections up: a server and a
// client command, the client's arguments before the server's address, and
// the environment of both.
type cmVariant struct {
	name           string
	server, client []string
	serverEnds     bool
	env            []string
	pvperfClient   bool // the client is cm_setup (its JSON has the figures), else cmtime
}

// TestCMSetup runs pvperf's cm_setup and librdmacm's cmtime on the device,
// -guest.cm-conns connections each, in rounds that rotate the order of the
// variants, and reports the median time the client takes to set its
// connections up (the sum of its steps from the ids' creation to the
// connections' establishment) and its ratio to cmtime's. cm_setup's client
// runs against its own server and against cmtime's, and cmtime's client
// against cm_setup's server, which tells the client's share from the
// server's; and both sides with GOMAXPROCS=2, which tells what cm_setup's
// one scheduler processor on a kernel device saves on the guest's two
// emulated CPUs.
// The figures are reported, not judged.
func TestCMSetup(t *testing.T) {
	needDevice(t)
	if *rdmacmAddr == "" {
		t.Skip("-guest.rdmacm is not set")
	}
	setup := filepath.Join(*pvperfDir, "cm_setup")
	if !exists(*cmtimeBin) {
		t.Fatalf("%s not found (Debian's rdmacm-utils)", *cmtimeBin)
	}
	n := strconv.Itoa(*cmConns)
	pvServer := []string{setup, "-d", *device, "-c", n}
	pvClient := []string{setup, "-d", *device, "-c", n}
	variants := []cmVariant{
		{name: "cmtime/cmtime", server: []string{*cmtimeBin}, client: []string{*cmtimeBin, "-c", n, "-s"}},
		{name: "cm_setup/cm_setup", server: pvServer, serverEnds: true, client: pvClient, pvperfClient: true},
		{name: "cm_setup/cmtime", server: []string{*cmtimeBin}, client: pvClient, pvperfClient: true},
		{name: "cmtime/cm_setup", server: pvServer, serverEnds: true, client: []string{*cmtimeBin, "-c", n, "-s"}},
		{name: "cm_setup(GOMAXPROCS=2)/cm_setup(GOMAXPROCS=2)", server: pvServer, serverEnds: true, client: pvClient, pvperfClient: true, env: []string{"GOMAXPROCS=2"}},
	}
	vals := make([][]float64, len(variants))
	last := make([]string, len(variants))
	lastServer := make([]string, len(variants))
	cpu := make([][2][]float64, len(variants)) // ms of CPU, client and server
	port := 20000
	for r := 1; r <= *cmRounds; r++ {
		tmo, ok := budget(2 * time.Minute)
		if !ok {
			t.Fatalf("round %d not run: the time budget (%s) is spent", r, *budgetFlag)
		}
		for k := range variants {
			i := (k + r) % len(variants)
			v := variants[i]
			port++
			p := strconv.Itoa(port)
			js := filepath.Join(t.TempDir(), "cm.json")
			srv := append(append([]string(nil), v.server...), "-p", p)
			cli := append(append([]string(nil), v.client...), *rdmacmAddr, "-p", p)
			if v.pvperfClient {
				cli = append(cli, "--out_json_file", js)
			}
			res, err := cmRun(srv, cli, v.env, port, v.serverEnds, tmo)
			out := res.client
			lastServer[i] = res.server
			if err != nil {
				t.Fatalf("round %d, %s: %v\n%s", r, v.name, err, out)
			}
			var total float64
			if v.pvperfClient {
				total, err = cmSetupTotal(js)
			} else {
				total, err = cmtimeTotal(out)
			}
			if err != nil {
				t.Fatalf("round %d, %s: %v\n%s", r, v.name, err, out)
			}
			vals[i] = append(vals[i], total)
			cpu[i][0] = append(cpu[i][0], float64(res.clientCPU)/1e6)
			cpu[i][1] = append(cpu[i][1], float64(res.serverCPU)/1e6)
			last[i] = out
			t.Logf("round %d, %s: %.2f ms", r, v.name, total)
		}
	}
	var b strings.Builder
	ref := median(vals[0])
	for i, v := range variants {
		t.Logf("last round, %s, the client's output:\n%s", v.name, last[i])
		if v.serverEnds {
			t.Logf("last round, %s, the server's output:\n%s", v.name, lastServer[i])
		}
		fmt.Fprintf(&b, "  %-48s %8.2f ms  ratio %.3f  %v; CPU ms client %.0f, server %.0f\n", v.name, median(vals[i]), median(vals[i])/ref, rounded(vals[i]),
			median(cpu[i][0]), median(cpu[i][1]))
	}
	fmt.Printf("PVPERF-CMSETUP-BEGIN\nconnection setup on %s, %d RC connections; client/server, the client's steps from create id to established, median of %d rounds, ratio to cmtime/cmtime (target <= 1.1, reported):\n%sPVPERF-CMSETUP-END\n",
		*device, *cmConns, *cmRounds, b.String())
}

// cmDataPath are the tests TestCMDataPath runs with and without -R: the
// field of the client's row and what it measures.
type dataSpec struct {
	spec   string
	field  int
	metric string
	target string
}

var cmDataPath = []dataSpec{
	{"write_bw -s 65536 -n 1000", 4, "BW average [MiB/s]", "0.95-1.05"},
	{"send_lat -s 2 -n 5000", 5, "t_typical [usec]", "0.95-1.05"},
}

// TestCMDataPath runs pvperf against pvperf, and perftest against
// perftest, with and without -R, in rounds that rotate the order of the
// four, and reports the median of each and the ratios with -R to without:
// the connection manager must not change what pvperf's data path measures,
// and perftest's own ratio on the same device tells what the device's
// connection-managed QPs do to any program.
func TestCMDataPath(t *testing.T) {
	needDevice(t)
	type variant struct {
		bin   func(string) string
		extra string
	}
	variants := []variant{{pv, ""}, {pv, " -R"}, {pt, ""}, {pt, " -R"}}
	var table strings.Builder
	fmt.Fprintf(&table, "%-28s %-20s %12s %12s %8s   %12s %12s %8s   %s\n", "test", "metric",
		"pvperf", "pvperf -R", "ratio", "perftest", "perftest -R", "ratio", "target")
	for _, c := range cmDataPath {
		test, opts, _ := strings.Cut(c.spec, " ")
		vals := make([][]float64, len(variants))
		lost := make([]int, len(variants))
		for r := 1; r <= *dataRounds; r++ {
			for k := range variants {
				i := (k + r) % len(variants)
				v := variants[i]
				name := filepath.Base(v.bin(test)) + v.extra
				p := pair{server: v.bin(test), client: v.bin(test), args: append(common(), strings.Fields(opts+v.extra)...), timeout: max(*runTimeout, 2*time.Minute)}
				res := p.run()
				if res.err != nil && i < 2 {
					res.log(t, p, false)
					t.Fatalf("round %d, %s %s: %v", r, name, opts, res.err)
				}
				f, err := strconv.ParseFloat(field(res.client, c.field), 64)
				if res.err != nil || err != nil || !(f > 0) {
					if i < 2 {
						res.log(t, p, false)
						t.Fatalf("round %d, %s %s: no value in field %d: %q", r, name, opts, c.field, field(res.client, c.field))
					}
					// perftest's own figure: perftest 6.06 has been
					// seen to print a bandwidth of 0.00 on this
					// emulated CPU. The round is left out of its
					// median, as is a round perftest failed (its
					// output is logged); losing more than a third
					// fails.
					if res.err != nil {
						res.log(t, p, false)
					}
					t.Logf("round %d, %s %s: perftest printed %q in field %d (%v); the round is left out. Its output:\n%s", r, name, opts, field(res.client, c.field), c.field, res.err, res.client)
					if lost[i]++; lost[i] > *dataRounds/3 {
						t.Fatalf("%s %s: perftest printed no value in %d of %d rounds", name, opts, lost[i], *dataRounds)
					}
					continue
				}
				vals[i] = append(vals[i], f)
			}
		}
		m := make([]float64, len(variants))
		for i := range variants {
			m[i] = median(vals[i])
		}
		fmt.Fprintf(&table, "%-28s %-20s %12s %12s %8.3f   %12s %12s %8.3f   %s\n", c.spec, c.metric,
			num(m[0]), num(m[1]), m[1]/m[0], num(m[2]), num(m[3]), m[3]/m[2], c.target)
		t.Logf("%s: pvperf %v, pvperf -R %v, perftest %v, perftest -R %v", c.spec, vals[0], vals[1], vals[2], vals[3])
	}
	fmt.Printf("PVPERF-CMDATA-BEGIN\n-R against the same test without it on %s (client/server of one program, medians of %d rounds; reported):\n%sPVPERF-CMDATA-END\n",
		*device, *dataRounds, table.String())
}

// cmFail runs a command that must fail: exit status 1 within tmo, with a
// message that holds want (any of them).
func cmFail(t *testing.T, name string, args []string, tmo time.Duration, want ...string) string {
	t.Helper()
	var out bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), tmo)
	defer cancel()
	start := time.Now()
	err := command(ctx, name, args, "", &out).Run()
	took := time.Since(start).Round(10 * time.Millisecond)
	t.Logf("%s %s\n  -> %s after %s: %s", filepath.Base(name), strings.Join(args, " "), exitText(err), took, strings.TrimSpace(out.String()))
	switch {
	case ctx.Err() != nil:
		t.Errorf("still running after %s", tmo)
	case exitText(err) != "exit 1":
		t.Errorf("%s, want exit 1", exitText(err))
	default:
		for _, w := range want {
			if strings.Contains(out.String(), w) {
				return out.String()
			}
		}
		t.Errorf("the message holds none of %q", want)
	}
	return out.String()
}

// cmIDs is what "rdma resource show cm_id" lists.
func cmIDs(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("rdma", "resource", "show", "cm_id").CombinedOutput()
	if err != nil {
		t.Fatalf("rdma resource show cm_id: %v: %s", err, out)
	}
	return strings.TrimSpace(string(out))
}

// TestCMFailures makes the connection manager fail in each way users meet
// and checks that each ends the command with exit status 1 and a message
// that says why, in bounded time, leaving no id in the kernel: no listener
// on the port, an address whose interface has no RDMA device (10.78.0.1,
// on a veth without rxe that the guest's init sets up), an address nobody
// answers (ARP) for, a server that hangs (stopped) and then vanishes
// (killed) while a client connects, and a client that may not create
// enough QPs (the rdma cgroup's limit of objects).
func TestCMFailures(t *testing.T) {
	needDevice(t)
	if *rdmacmAddr == "" {
		t.Skip("-guest.rdmacm is not set")
	}
	if ids := cmIDs(t); ids != "" {
		t.Fatalf("ids left before the checks:\n%s", ids)
	}
	setup := filepath.Join(*pvperfDir, "cm_setup")
	dev := []string{"-d", *device, "-x", strconv.Itoa(*gidIndex), "-F"}

	t.Run("no_listener", func(t *testing.T) {
		cmFail(t, pv("write_bw"), append(dev, "-R", "-p", "20101", *rdmacmAddr), time.Minute, "rejected (IB CM reason 8")
		cmFail(t, setup, []string{"-d", *device, "-p", "20101", "-c", "4", *rdmacmAddr}, time.Minute, "rejected (IB CM reason 8")
	})
	t.Run("no_rdma_device", func(t *testing.T) {
		cmFail(t, pv("send_bw"), append(dev, "-R", "-p", "20102", "10.78.0.1"), 2*time.Minute, "no such device", "No such device")
	})
	t.Run("unreachable", func(t *testing.T) {
		cmFail(t, setup, []string{"-d", *device, "-p", "20103", "-c", "2", "-t", "500", "-r", "1", "10.77.0.99"}, time.Minute,
			"resolve addr", "address")
	})
	t.Run("peer_hangs_then_vanishes", func(t *testing.T) {
		var so bytes.Buffer
		srv := command(context.Background(), setup, []string{"-d", *device, "-p", "20104", "-c", "4"}, "", &so)
		if err := srv.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() { _ = srv.Process.Kill(); _ = srv.Wait() }()
		for end := time.Now().Add(*listenTimeout); !cmListening(20104); time.Sleep(50 * time.Millisecond) {
			if time.Now().After(end) {
				t.Fatalf("server not listening: %s", so.String())
			}
		}
		if out, err := exec.Command("kill", "-STOP", strconv.Itoa(srv.Process.Pid)).CombinedOutput(); err != nil {
			t.Fatalf("kill -STOP: %v: %s", err, out)
		}
		cmFail(t, setup, []string{"-d", *device, "-p", "20104", "-c", "4", "--peer-timeout", "5s", *rdmacmAddr}, time.Minute,
			"the peer timeout")
		// Now the server dies while a client waits for its answers.
		go func() { time.Sleep(2 * time.Second); _ = srv.Process.Kill() }()
		cmFail(t, setup, []string{"-d", *device, "-p", "20104", "-c", "4", "--peer-timeout", "20s", *rdmacmAddr}, time.Minute,
			"the peer timeout", "rejected", "unreachable")
	})
	t.Run("too_many_qps", func(t *testing.T) {
		cg := "/sys/fs/cgroup/pvperf-rdma"
		if err := rdmaCgroup(cg, *device+" hca_handle=8 hca_object=24"); err != nil {
			t.Skipf("no rdma cgroup to limit the client's objects: %v", err)
		}
		defer os.Remove(cg)
		var so bytes.Buffer
		srv := command(context.Background(), setup, []string{"-d", *device, "-p", "20105", "-c", "40", "--peer-timeout", "5s"}, "", &so)
		if err := srv.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() { _ = srv.Process.Kill(); _ = srv.Wait() }()
		for end := time.Now().Add(*listenTimeout); !cmListening(20105); time.Sleep(50 * time.Millisecond) {
			if time.Now().After(end) {
				t.Fatalf("server not listening: %s", so.String())
			}
		}
		cmFail(t, "/bin/sh", []string{"-c", `echo $$ > "$0/cgroup.procs" && exec "$@"`, cg,
			setup, "-d", *device, "-p", "20105", "-c", "40", "--peer-timeout", "5s", *rdmacmAddr}, time.Minute, "create qp")
	})
	// The kernel may keep an id for a moment after its process ends.
	var ids string
	for end := time.Now().Add(5 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if ids = cmIDs(t); ids == "" || time.Now().After(end) {
			break
		}
	}
	if ids != "" {
		t.Errorf("ids left behind:\n%s", ids)
	}
}

// rdmaCgroup makes the cgroup dir with the rdma controller's limit max,
// mounting cgroup2 on /sys/fs/cgroup first when it is not.
func rdmaCgroup(dir, limit string) error {
	root := filepath.Dir(dir)
	if _, err := os.Stat(filepath.Join(root, "cgroup.controllers")); err != nil {
		if out, err := exec.Command("mount", "-t", "cgroup2", "none", root).CombinedOutput(); err != nil {
			return fmt.Errorf("mount cgroup2: %v: %s", err, out)
		}
	}
	ctrl, err := os.ReadFile(filepath.Join(root, "cgroup.controllers"))
	if err != nil {
		return err
	}
	if !strings.Contains(string(ctrl), "rdma") {
		return fmt.Errorf("the kernel's cgroup controllers are %q", strings.TrimSpace(string(ctrl)))
	}
	if err := os.WriteFile(filepath.Join(root, "cgroup.subtree_control"), []byte("+rdma"), 0); err != nil {
		return err
	}
	if err := os.Mkdir(dir, 0o755); err != nil && !os.IsExist(err) {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "rdma.max"), []byte(limit), 0)
}
