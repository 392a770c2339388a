package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pvperf/pvperf/bench"
	"github.com/pvperf/pvperf/bench/oob"
)

// Faults: a peer that freezes, sends garbage or nothing, or a server that
// does not answer. Every side must exit with status 1 and a message within
// the bound docs/architecture.md documents; the tests allow a few seconds
// more only to absorb a loaded machine, and log how long each side took.

// slack is the room the tests give a loaded machine beyond a bound.
const slack = 5 * time.Second

// signal sends sig ("STOP", "CONT") to p with kill(1).
func signal(t *testing.T, p *proc, sig string) {
	t.Helper()
	if out, err := exec.Command("kill", "-"+sig, strconv.Itoa(p.cmd.Process.Pid)).CombinedOutput(); err != nil {
		t.Fatalf("kill -%s: %v: %s", sig, err, out)
	}
}

// failCode is the status a failed p exits with, as perftest's test does:
// 17 when the measurement loop failed in send_bw, send_lat, read_lat and
// atomic_lat (their mains return it), else 1.
func failCode(p *proc) int {
	switch filepath.Base(p.cmd.Args[0]) {
	case "send_bw", "send_lat", "read_lat", "atomic_lat":
		if strings.Contains(p.stderr.String(), "Failed to complete run_iter") {
			return 17
		}
	}
	return 1
}

// ends waits for p and checks that it exits with its failure status (see
// failCode), says why on stderr, and does so within bound of since.
func ends(t *testing.T, p *proc, since time.Time, bound time.Duration) {
	t.Helper()
	code, err := p.wait()
	took := time.Since(since)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("exit %d after %v (bound %v); stderr: %q", code, took.Round(time.Millisecond), bound, p.stderr.String())
	if want := failCode(p); code != want {
		t.Errorf("exit %d, want %d", code, want)
	}
	if strings.TrimSpace(p.stderr.String()) == "" {
		t.Error("no message on stderr")
	}
	if took > bound+slack {
		t.Errorf("took %v, bound %v", took, bound)
	}
}

// TestPeerFrozen stops one side (SIGSTOP) in the middle of a test. The
// other ends with an error: when its loop needs the frozen side, after
// bench.StallTimeout without progress; when it does not (an RDMA WRITE or
// READ client: one-sided operations complete without the peer's CPU), at
// the end of its test, when the exchange that follows gets no answer
// within the peer timeout.
func TestPeerFrozen(t *testing.T) {
	for _, c := range []struct {
		test   string
		args   []string
		freeze string
		bound  time.Duration // from the freeze
	}{
		{"write_bw", []string{"-D", "4"}, "server", 4*time.Second + bench.DefaultPeerTimeout},
		{"send_bw", []string{"-n", "1000000000"}, "server", bench.StallTimeout},
		{"send_lat", []string{"-n", "1000000000"}, "client", bench.StallTimeout},
		// RDMA READs complete without the frozen server's CPU, as on
		// hardware: the client ends its test, then waits for the
		// server's handshake.
		{"read_lat", []string{"-D", "4"}, "server", 4*time.Second + bench.DefaultPeerTimeout},
	} {
		t.Run(c.test+"/freeze_"+c.freeze, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			port := strconv.Itoa(freePort(t))
			server := start(t, ctx, c.test, append([]string{"-p", port}, c.args...)...)
			waitListening(t, ctx, server, port)
			client := start(t, ctx, c.test, append([]string{"-p", port}, append(c.args, "localhost")...)...)
			// The client prints its table's header once both sides
			// have connected, before its loop: a side frozen before
			// then would leave a server waiting for its client, as
			// perftest's does, for ever.
			select {
			case <-client.header:
			case <-client.copied:
				t.Fatalf("the client ended before its test began:\n%s%s", client.stdout.String(), client.stderr.String())
			case <-ctx.Done():
				t.Fatalf("the client printed no header:\n%s%s", client.stdout.String(), client.stderr.String())
			}
			time.Sleep(500 * time.Millisecond)
			victim, survivor := server, client
			if c.freeze == "client" {
				victim, survivor = client, server
			}
			signal(t, victim, "STOP")
			frozen := time.Now()
			defer func() {
				signal(t, victim, "CONT")
				_ = victim.cmd.Process.Kill()
				_, _ = victim.wait()
			}()
			// A survivor still running well past its bound is asked
			// for its goroutines' stacks (SIGQUIT), which ends tells.
			quit := time.AfterFunc(c.bound+slack+10*time.Second, func() {
				_ = exec.Command("kill", "-QUIT", strconv.Itoa(survivor.cmd.Process.Pid)).Run()
			})
			defer quit.Stop()
			ends(t, survivor, frozen, c.bound)
		})
	}
}

// fakePeer listens on a free port of 127.0.0.1 and, for the one
// connection it accepts, writes what and then reads until the connection
// closes.
func fakePeer(t *testing.T, what []byte) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		_, _ = c.Write(what)
		_, _ = io.Copy(io.Discard, c)
	}()
	return strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
}

// garbage is what a confused peer sends: no version string, no key.
var garbage = []byte(strings.Repeat("\xff\x00garbage:", 40))

// TestBadPeer: a peer that sends garbage, or nothing at all, on the
// out-of-band connection: the client facing such a server, and the server
// facing such a client, end within the peer timeout.
func TestBadPeer(t *testing.T) {
	for _, c := range []struct {
		name string
		send []byte
	}{{"garbage", garbage}, {"silent", nil}} {
		t.Run(c.name+"_server", func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			port := fakePeer(t, c.send)
			began := time.Now()
			client := start(t, ctx, "write_bw", "-p", port, "127.0.0.1")
			ends(t, client, began, bench.DefaultPeerTimeout)
		})
		t.Run(c.name+"_client", func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			port := strconv.Itoa(freePort(t))
			server := start(t, ctx, "write_bw", "-p", port)
			waitListening(t, ctx, server, port)
			conn, err := net.Dial("tcp", "127.0.0.1:"+port)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			began := time.Now()
			if _, err := conn.Write(c.send); err != nil {
				t.Fatal(err)
			}
			ends(t, server, began, bench.DefaultPeerTimeout)
		})
	}
}

// needNetns skips a test that needs a network namespace of its own
// (unshare -n, ip) where it cannot have one: without root or the tools.
func needNetns(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to create a network namespace (unshare -n)")
	}
	for _, tool := range []string{"unshare", "ip"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("needs %s: %v", tool, err)
		}
	}
}

// TestUnreachableServer: a client whose server's address answers nothing
// (an address behind a veth pair, in a network namespace the test creates,
// where nothing answers) gives up after oob.MinConnectTimeout (longer than
// the default peer timeout) with perftest's message and the reason, where
// perftest waits for the kernel's SYN retries (about two minutes). It needs
// root for the namespace.
func TestUnreachableServer(t *testing.T) {
	needNetns(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// A veth pair whose far end owns no address, and a fixed neighbour
	// entry for the server's address: the SYNs leave and nothing answers.
	script := "ip link set lo up && ip link add v0 type veth peer name v1 && ip addr add 10.99.0.1/24 dev v0 && " +
		"ip link set v0 up && ip link set v1 up && ip neigh add 10.99.0.2 lladdr 02:00:00:00:00:02 dev v0 && " +
		"exec \"$0\" -p 18515 10.99.0.2"
	p := &proc{banner: make(chan struct{}), copied: make(chan struct{})}
	p.cmd = exec.CommandContext(ctx, "unshare", "--net", "sh", "-c", script, filepath.Join(binDir, "write_bw"))
	p.cmd.Env = env()
	p.cmd.Stdout = &p.stdout
	p.cmd.Stderr = &p.stderr
	close(p.copied)
	began := time.Now()
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ends(t, p, began, oob.MinConnectTimeout)
	if !strings.Contains(p.stderr.String(), "Couldn't connect to 10.99.0.2:18515\n (i/o timeout)\nUnable to open file descriptor for socket connection\n Unable to init the socket connection\n") {
		t.Errorf("stderr %q, want perftest's \"Couldn't connect to 10.99.0.2:18515\" and the reason", p.stderr.String())
	}
}

// TestPeerLinkCut cuts the link to the peer in the middle of a test and
// then kills the peer, so that no FIN ever arrives: a write_bw server,
// which waits for its client's end of the test with no timeout, must
// still end, when the TCP keep-alive finds the peer gone (oob.KeepAlive:
// about 13 s of silence). It needs root for the namespace (unshare -n),
// whose loopback interface is the link.
func TestPeerLinkCut(t *testing.T) {
	needNetns(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir := t.TempDir()
	// The server's output goes to the test; the client's to a file. A
	// server that never ends is killed after 60 s (and the test fails).
	script := `ip link set lo up && timeout -s KILL 60 "$0" -d emu0 -p 18515 -D 30 & s=$!; sleep 1; ` +
		`"$0" -d emu0 -p 18515 -D 30 127.0.0.1 >"$1/client.out" 2>&1 & c=$!; sleep 2; ` +
		`ip link set lo down; kill -9 $c; echo CUT >&2; wait $s`
	p := &proc{banner: make(chan struct{}), copied: make(chan struct{})}
	p.cmd = exec.CommandContext(ctx, "unshare", "--net", "sh", "-c", script, filepath.Join(binDir, "write_bw"), dir)
	p.cmd.Env = env()
	p.cmd.Stdout = &p.stdout
	p.cmd.Stderr = &p.stderr
	close(p.copied)
	began := time.Now()
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	code, err := p.wait()
	took := time.Since(began)
	if err != nil {
		t.Fatal(err)
	}
	cli, _ := os.ReadFile(filepath.Join(dir, "client.out"))
	t.Logf("server exit %d after %v; stderr %q; the client's output:\n%s", code, took.Round(time.Millisecond), p.stderr.String(), cli)
	if ctx.Err() != nil {
		t.Fatal("the server was still waiting 2 minutes later")
	}
	if code != 1 || !strings.Contains(p.stderr.String(), "CUT\n") {
		t.Errorf("server exit %d, want 1 after the cut", code)
	}
	// 3 s before the cut, 13 s of keep-alive, and slack for a loaded
	// machine: far less than the 30 s the test would have run.
	if bound := 3*time.Second + 13*time.Second + 10*time.Second; took > bound {
		t.Errorf("the server took %v, more than %v", took, bound)
	}
}

// TestTerminated sends SIGTERM to a server waiting for its client, as a
// job scheduler or timeout(1) does: it ends at once with status 1 and a
// message that says why, not at the end of its wait.
func TestTerminated(t *testing.T) {
	for _, c := range []struct {
		name string
		args []string
	}{
		{"write_bw", nil},
		{"send_lat", nil},
		{"cm_setup", []string{"-d", "emu0"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			port := strconv.Itoa(freePort(t))
			p := start(t, ctx, c.name, append(append([]string(nil), c.args...), "-p", port)...)
			waitListening(t, ctx, p, port)
			began := time.Now()
			signal(t, p, "TERM")
			ends(t, p, began, time.Second)
			if !strings.Contains(p.stderr.String(), "interrupted by SIGTERM") {
				t.Errorf("stderr %q does not say \"interrupted by SIGTERM\"", p.stderr.String())
			}
		})
	}
}

// TestInterruptedLoopback interrupts (SIGINT, as Ctrl-C) each test in the
// middle of a long --loopback run: it ends at once with status 1 and says
// it was interrupted, without the server side's echo of it. A latency loop
// whose completions come at once (read_lat, atomic_lat) must notice too.
func TestInterruptedLoopback(t *testing.T) {
	for _, test := range []string{"write_bw", "read_bw", "send_bw", "atomic_bw", "write_lat", "read_lat", "send_lat", "atomic_lat"} {
		t.Run(test, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			p := start(t, ctx, test, "--loopback", "-n", "1000000000")
			time.Sleep(time.Second)
			began := time.Now()
			signal(t, p, "INT")
			ends(t, p, began, time.Second)
			if e := p.stderr.String(); !strings.Contains(e, "interrupted by SIGINT") || strings.Contains(e, "server side") {
				t.Errorf("stderr %q, want \"interrupted by SIGINT\" alone", e)
			}
		})
	}
}

// TestInterruptedSweepFiles: a sweep interrupted after some sizes writes
// its files with those sizes, as perftest keeps the rows it printed, in
// place of an older file; pvperf's results say that the run is
// incomplete, and why.
func TestInterruptedSweepFiles(t *testing.T) {
	dir := t.TempDir()
	js, csv := filepath.Join(dir, "r.json"), filepath.Join(dir, "r.csv")
	if err := os.WriteFile(js, []byte(`{"stale": true}`), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p := start(t, ctx, "write_lat", "--loopback", "-a", "-n", "20000", "--out_json", "--out_json_file", js, "--out_csv", csv)
	// The smallest sizes take a few milliseconds each, the largest
	// (8 MiB, 20,000 times) far longer than the test waits: interrupted
	// once the first size's row is out.
	select {
	case <-p.row:
	case <-ctx.Done():
		t.Fatal("no result row within a minute")
	}
	time.Sleep(100 * time.Millisecond)
	began := time.Now()
	signal(t, p, "INT")
	ends(t, p, began, 5*time.Second)
	b, err := os.ReadFile(js)
	var doc struct {
		// perftest's part: the last row printed, as perftest's file.
		Results struct {
			MsgSize int `json:"MsgSize"`
		} `json:"results"`
		Pvperf struct {
			Results []struct {
				Size int `json:"msg_size_bytes"`
			} `json:"results"`
			Incomplete string `json:"incomplete"`
		} `json:"pvperf"`
	}
	if err != nil || json.Unmarshal(b, &doc) != nil || len(doc.Pvperf.Results) == 0 || len(doc.Pvperf.Results) == 23 {
		t.Fatalf("JSON after the interrupt (%v), want some of the 23 sizes:\n%s", err, b)
	}
	rows := doc.Pvperf.Results
	if doc.Results.MsgSize != rows[len(rows)-1].Size {
		t.Errorf("perftest's results are of %d bytes, want the last size done, %d", doc.Results.MsgSize, rows[len(rows)-1].Size)
	}
	if !strings.Contains(doc.Pvperf.Incomplete, "interrupted by SIGINT") {
		t.Errorf("pvperf.incomplete is %q, want the interrupt", doc.Pvperf.Incomplete)
	}
	if c, err := os.ReadFile(csv); err != nil || strings.Count(string(c), "\nwrite_lat,") != len(rows) {
		t.Errorf("CSV after the interrupt (%v), want %d rows:\n%s", err, len(rows), c)
	}
}

// TestInterruptedRepeatFiles interrupts a repeated series (SIGINT, as
// Ctrl-C) after its first run: the runs done are summarised and written,
// saying which run the interrupt stopped.
func TestInterruptedRepeatFiles(t *testing.T) {
	js := filepath.Join(t.TempDir(), "r.json")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p := start(t, ctx, "write_bw", "--loopback", "-n", "100000", "--repeat", "50", "--out_json", "--out_json_file", js)
	select {
	case <-p.row: // the first run's, the only one printed
	case <-ctx.Done():
		t.Fatal("no result row within a minute")
	}
	time.Sleep(time.Second)
	began := time.Now()
	signal(t, p, "INT")
	ends(t, p, began, 5*time.Second)
	b, err := os.ReadFile(js)
	var doc struct {
		Pvperf struct {
			Incomplete string `json:"incomplete"`
			Repeats    struct {
				Runs int `json:"runs"`
			} `json:"repeats"`
		} `json:"pvperf"`
	}
	if err != nil || json.Unmarshal(b, &doc) != nil {
		t.Fatalf("JSON after the interrupt (%v):\n%s", err, b)
	}
	r := doc.Pvperf.Repeats.Runs
	if r < 1 || !strings.Contains(doc.Pvperf.Incomplete, fmt.Sprintf("run %d of 50: interrupted by SIGINT", r+1)) {
		t.Errorf("repeats.runs %d, incomplete %q: want the runs done and the one interrupted", r, doc.Pvperf.Incomplete)
	}
	if !strings.Contains(p.stdout.String(), fmt.Sprintf(" %d runs: median", r)) {
		t.Errorf("no summary of the %d runs done:\n%s", r, p.stdout.String())
	}
}

// TestInterruptedPair interrupts one side of a two-process run in the
// middle of the test. The interrupted side ends at once with status 1 and
// says so, even a server that only waits for its client's end-of-test
// message (RDMA WRITE and READ tests); the other side ends with status 1
// and its own reason, within the bound of losing its peer.
func TestInterruptedPair(t *testing.T) {
	for _, c := range []struct {
		test, victim string
		args         []string
	}{
		{"write_bw", "server", nil}, {"read_lat", "server", nil}, {"send_bw", "server", nil},
		{"write_bw", "client", nil}, {"send_lat", "client", nil},
		// Over rdma_cm the messages go through the QPs: only the
		// connection manager tells the server its client is gone.
		{"write_bw", "client", []string{"-R"}}, {"read_lat", "client", []string{"-R"}},
		{"write_bw", "server", []string{"-R"}},
	} {
		t.Run(strings.Join(append([]string{c.test}, c.args...), "_")+"/"+c.victim, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			port := strconv.Itoa(freePort(t))
			args := append([]string{"-p", port, "-n", "1000000000"}, c.args...)
			server := start(t, ctx, c.test, args...)
			waitListening(t, ctx, server, port)
			client := start(t, ctx, c.test, append(args, "127.0.0.1")...)
			time.Sleep(time.Second)
			victim, other := server, client
			if c.victim == "client" {
				victim, other = client, server
			}
			began := time.Now()
			signal(t, victim, "INT")
			ends(t, victim, began, time.Second)
			if e := victim.stderr.String(); !strings.Contains(e, "interrupted by SIGINT") {
				t.Errorf("%s's stderr %q, want \"interrupted by SIGINT\"", c.victim, e)
			}
			ends(t, other, began, bench.StallTimeout)
		})
	}
}

// TestInterruptedCMSetup interrupts a cm_setup client whose connections
// wait for a server that accepts the connection manager's TCP connections
// and never answers: one line says it was interrupted (not one per
// connection), status 1, at once.
func TestInterruptedCMSetup(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		var held []net.Conn
		defer func() {
			for _, c := range held {
				c.Close()
			}
		}()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			held = append(held, c)
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	p := start(t, ctx, "cm_setup", "-d", "emu0", "-c", "50", "-p", port, "127.0.0.1")
	time.Sleep(time.Second)
	began := time.Now()
	signal(t, p, "INT")
	ends(t, p, began, time.Second)
	if e := p.stderr.String(); e != "cm_setup: interrupted by SIGINT\n" {
		t.Errorf("stderr %q, want \"cm_setup: interrupted by SIGINT\" alone", e)
	}
}

// TestSendCloseFails: send_bw's client whose close handshake fails (its
// UD server still waits for the datagrams its small receive queue lost)
// says so, as perftest's send_bw, and exits 0: the results are printed.
func TestSendCloseFails(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	port := strconv.Itoa(freePort(t))
	srvCtx, stopSrv := context.WithCancel(ctx)
	defer stopSrv()
	srv := start(t, srvCtx, "send_bw", "-d", "emu0", "-c", "UD", "-r", "2", "-n", "100000", "-p", port)
	waitListening(t, ctx, srv, port)
	cli := start(t, ctx, "send_bw", "-d", "emu0", "-c", "UD", "-r", "2", "-n", "100000", "-p", port, "localhost")
	code, err := cli.wait()
	stopSrv()
	_, _ = srv.wait()
	if err != nil || code != 0 {
		t.Fatalf("client: exit %d %v\n%s", code, err, cli.stderr.String())
	}
	if e := cli.stderr.String(); !strings.Contains(e, " Failed to close connection between server and client\n Trying to close this side resources\n") {
		t.Errorf("client's stderr %q, want perftest's two lines", e)
	}
}

// TestBidirectionalWaitsForPeer: in write_bw -b each side's loop waits for
// its own writes only, so the side whose direction is faster waits for the
// other's at the exchange of results. Here the server is held up (SIGSTOP
// for a second) mid-test; the client, whose writes need no CPU of the
// server, ends its loop first and waits longer than its --peer-timeout for
// the server's results, which must not fail it: both sides exit 0.
func TestBidirectionalWaitsForPeer(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	port := strconv.Itoa(freePort(t))
	args := []string{"-b", "-s", "65536", "-n", "3000000", "--peer-timeout=300ms", "-p", port}
	server := start(t, ctx, "write_bw", args...)
	waitListening(t, ctx, server, port)
	client := start(t, ctx, "write_bw", append(args, "localhost")...)
	time.Sleep(300 * time.Millisecond)
	signal(t, server, "STOP")
	time.Sleep(1500 * time.Millisecond)
	signal(t, server, "CONT")
	for _, p := range []*proc{client, server} {
		if code, err := p.wait(); err != nil || code != 0 {
			t.Errorf("%v: exit %d %v\nstdout:\n%s\nstderr:\n%s", p.cmd.Args, code, err, p.stdout.String(), p.stderr.String())
		}
	}
}

// TestCannotAllocate: timestamps that do not fit in the address space the
// process may use fail as perftest's allocation does, " Cannot Allocate"
// and exit status 1 (not the 17 of a failed measurement loop), at once.
func TestCannotAllocate(t *testing.T) {
	for _, test := range []string{"write_lat", "send_lat"} {
		t.Run(test, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			// 3 GB of address space; 500 M timestamps are 4 GB.
			cmd := exec.CommandContext(ctx, "sh", "-c", `ulimit -v 3000000 && exec "$0" --loopback -n 500000000`, filepath.Join(binDir, test))
			cmd.Env = env()
			out, err := cmd.CombinedOutput()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != 1 || !strings.Contains(string(out), " Cannot Allocate (500000000 timestamps: mmap: cannot allocate memory)") {
				t.Errorf("%v:\n%s", err, out)
			}
		})
	}
}
