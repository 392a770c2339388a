package e2e

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// binDir holds the commands built by TestMain.
var binDir string

var tests = []string{"write_bw", "read_bw", "send_bw", "atomic_bw", "write_lat", "read_lat", "send_lat", "atomic_lat"}

func TestMain(m *testing.M) {
	flag.Parse()
	dir, err := os.MkdirTemp("", "pvperf-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	cmd := exec.Command("go", "build", "-o", dir+string(filepath.Separator), "github.com/pvperf/pvperf/cmd/...")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building the commands:", err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	binDir = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// env is the environment of every command: one emulated device whose GIDs
// come from the loopback interface, so the GID lines are the same on every
// machine.
func env() []string {
	return append(os.Environ(), "PVPERF_EMU=netdev=lo")
}

// freePort returns a TCP port that was free a moment ago.
func freePort(t *testing.T) int {
	t.Helper()
	// Below the kernel's ephemeral range (32768 and up by default), where
	// no outgoing connection of a test running meanwhile takes it, and
	// one after the other from a random start, so that parallel tests of
	// this process do not pick the same.
	for range 1000 {
		p := int(nextPort.Add(1))%(32768-10000) + 10000
		ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
		if err != nil {
			continue
		}
		ln.Close()
		return p
	}
	t.Fatal("no free port from 10000 to 32767")
	return 0
}

// nextPort is the last port freePort tried.
var nextPort = func() *atomic.Int32 {
	var v atomic.Int32
	v.Store(rand.Int32N(32768 - 10000))
	return &v
}()

// proc is a running command with its output collected.
type proc struct {
	cmd            *exec.Cmd
	stdout, stderr bytes.Buffer
	said           time.Time     // when stderr was first written to
	banner         chan struct{} // closed when stdout shows the server banner
	header         chan struct{} // closed when stdout shows the result table's header
	row            chan struct{} // closed when stdout shows a result row
	copied         chan struct{} // closed when stdout is drained
}

func start(t *testing.T, ctx context.Context, name string, args ...string) *proc {
	t.Helper()
	return startEnv(t, ctx, env(), name, args...)
}

// startEnv is start with the environment environ.
func startEnv(t *testing.T, ctx context.Context, environ []string, name string, args ...string) *proc {
	t.Helper()
	p := &proc{banner: make(chan struct{}), header: make(chan struct{}), row: make(chan struct{}), copied: make(chan struct{})}
	p.cmd = exec.CommandContext(ctx, filepath.Join(binDir, name), args...)
	p.cmd.Env = environ
	p.cmd.Stderr = stamped{p}
	out, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(p.copied)
		r := bufio.NewReader(out)
		seen, header, row := false, false, false
		for {
			line, err := r.ReadString('\n')
			p.stdout.WriteString(line)
			if !seen && strings.Contains(line, "Waiting for client to connect") {
				seen = true
				close(p.banner)
			}
			if !header && strings.HasPrefix(line, " #bytes") {
				header = true
				close(p.header)
			}
			if f := strings.Fields(line); !row && len(f) > 2 && isNumber(f[0]) && isNumber(f[1]) {
				row = true
				close(p.row)
			}
			if err != nil {
				_, _ = io.Copy(io.Discard, r)
				return
			}
		}
	}()
	return p
}

// stamped is a process's stderr: it keeps the time of the first write,
// which tells a slow failure from a slow exit.
type stamped struct{ p *proc }

func (w stamped) Write(b []byte) (int, error) {
	if w.p.said.IsZero() {
		w.p.said = time.Now()
	}
	return w.p.stderr.Write(b)
}

// isNumber reports whether s is a decimal number, as a result row's first
// fields (size, iterations) are.
func isNumber(s string) bool {
	_, err := strconv.ParseFloat(s, 64)
	return err == nil
}

// exit waits for the command and returns its exit code; a command that
// could not be waited for fails the test.
func (p *proc) exit(t *testing.T) int {
	t.Helper()
	code, err := p.wait()
	if err != nil {
		t.Fatal(err)
	}
	return code
}

// wait waits for the command and returns its exit code.
func (p *proc) wait() (int, error) {
	<-p.copied
	err := p.cmd.Wait()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode(), nil
	}
	if err != nil {
		return -1, err
	}
	return 0, nil
}

// runPair runs a server and a client of test with args and returns both.
func runPair(t *testing.T, test string, args ...string) (server, client *proc) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	port := strconv.Itoa(freePort(t))
	server = start(t, ctx, test, append([]string{"-p", port}, args...)...)
	waitListening(t, ctx, server, port)
	client = start(t, ctx, test, append([]string{"-p", port}, append(args, "localhost")...)...)
	for _, p := range []*proc{client, server} {
		code, err := p.wait()
		if err != nil {
			t.Fatal(err)
		}
		if code != 0 {
			t.Fatalf("%s %v exited with %d:\nstdout:\n%s\nstderr:\n%s", test, p.cmd.Args[1:], code, p.stdout.String(), p.stderr.String())
		}
	}
	return server, client
}

// waitListening waits until the server listens on port: its banner says
// so, or (with --output, which prints no banner) the kernel's socket table.
func waitListening(t *testing.T, ctx context.Context, server *proc, port string) {
	t.Helper()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-server.banner:
			return
		case <-server.copied:
			code, _ := server.wait()
			t.Fatalf("server exited with %d before listening:\n%s%s", code, server.stdout.String(), server.stderr.String())
		case <-ctx.Done():
			t.Fatal("server never listened")
		case <-tick.C:
			if listening(port) {
				return
			}
		}
	}
}

// listening reports whether a TCP socket listens on port.
func listening(port string) bool { return tcpPort(port, true) }

// tcpPort reports whether a TCP socket of this host has port as its local
// port (only a listening one with listen), from /proc/net/tcp and
// /proc/net/tcp6.
func tcpPort(port string, listen bool) bool {
	n, _ := strconv.Atoi(port)
	want := fmt.Sprintf(":%04X ", n)
	for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n") {
			fields := strings.Fields(line)
			// sl local_address rem_address st ...; st 0A is LISTEN.
			if len(fields) > 3 && strings.HasSuffix(fields[1]+" ", want) && (!listen || fields[3] == "0A") {
				return true
			}
		}
	}
	return false
}

var (
	// Per-run values of the address lines.
	addrValue = regexp.MustCompile(`(QPN|PSN|RKey|VAddr) 0x[0-9a-f]+`)
	// Measured values in result rows.
	float = regexp.MustCompile(`[0-9]+\.[0-9]+`)
	// Any figure (the Hockney fit's line).
	number = regexp.MustCompile(`[0-9]+(\.[0-9]+)?`)
	// A value alone on its line (--output).
	bare   = regexp.MustCompile(`^[0-9]+\.[0-9]+\n$`)
	spaces = regexp.MustCompile(`[ \t]+`)
)

// mask replaces what changes from run to run in perftest output (queue pair
// numbers, PSNs, keys, addresses and measured figures) with fixed text, so
// the rest can be compared byte for byte. Result rows have their spacing
// collapsed, as the column padding depends on the figures.
func mask(s string) string {
	var b strings.Builder
	inRows := false
	for _, line := range strings.SplitAfter(s, "\n") {
		line = addrValue.ReplaceAllString(line, "$1 0x#")
		line = bare.ReplaceAllString(line, "#\n")
		switch {
		case strings.HasPrefix(line, " Hockney model"):
			line = float.ReplaceAllString(line, "#")
		case strings.HasPrefix(line, " α "):
			line = number.ReplaceAllString(line, "#")
		case strings.Contains(line, "#bytes"):
			inRows = true
		case strings.HasPrefix(line, "-----"):
			inRows = false
		case inRows:
			line = float.ReplaceAllString(line, "#")
			nl := strings.HasSuffix(line, "\n")
			line = strings.TrimRight(spaces.ReplaceAllString(line, " "), " \n")
			if nl {
				line += "\n"
			}
		}
		b.WriteString(line)
	}
	return b.String()
}

func TestMask(t *testing.T) {
	in := " local address: LID 0000 QPN 0x3fb001 PSN 0xd3541c RKey 0x3fb00101 VAddr 0x007f2dcc171000\n" +
		" #bytes     #iterations    BW peak[MiB/sec]    BW average[MiB/sec]   MsgRate[Mpps]\n" +
		" 65536      100              23791.40            14535.80\t\t     0.232573\n" +
		"---------------------------------------------------------------------------------------\n" +
		" Mtu             : 1024[B]\n"
	want := " local address: LID 0000 QPN 0x# PSN 0x# RKey 0x# VAddr 0x#\n" +
		" #bytes     #iterations    BW peak[MiB/sec]    BW average[MiB/sec]   MsgRate[Mpps]\n" +
		" 65536 100 # # #\n" +
		"---------------------------------------------------------------------------------------\n" +
		" Mtu             : 1024[B]\n"
	if got := mask(in); got != want {
		t.Errorf("mask:\n%s\nwant:\n%s", got, want)
	}
}

// golden compares got with testdata/name, or rewrites it with -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./e2e -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("%s differs from the golden file:\n--- got\n%s\n--- want\n%s", name, got, want)
	}
}

// TestTwoProcesses runs each test as perftest's users do: a server, then a
// client naming it, two processes on one emulated device.
func TestTwoProcesses(t *testing.T) {
	type tc struct {
		name string
		test string
		args []string
	}
	var cases []tc
	for _, test := range tests {
		cases = append(cases, tc{test, test, nil})
	}
	cases = append(cases,
		tc{"write_bw_q2", "write_bw", []string{"-q", "2"}},
		tc{"write_bw_b", "write_bw", []string{"-b"}},
		tc{"send_bw_ud", "send_bw", []string{"-c", "UD"}},
		tc{"send_bw_srq", "send_bw", []string{"--use-srq", "-q", "2"}},
		tc{"read_bw_a", "read_bw", []string{"-a", "-n", "50"}},
		tc{"write_lat_a", "write_lat", []string{"-a", "-n", "100"}},
		tc{"send_lat_uc", "send_lat", []string{"-c", "UC", "-s", "64"}},
		tc{"write_bw_output", "write_bw", []string{"--report_gbits", "-s", "4096", "--output=bandwidth"}},
		tc{"send_bw_reversed", "send_bw", []string{"--reversed", "-n", "100"}},
	)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			server, client := runPair(t, c.test, c.args...)
			golden(t, c.name+".server.stdout", mask(server.stdout.String()))
			golden(t, c.name+".server.stderr", mask(server.stderr.String()))
			golden(t, c.name+".client.stdout", mask(client.stdout.String()))
			golden(t, c.name+".client.stderr", mask(client.stderr.String()))
		})
	}
}

// TestLoopback runs each test with both ends in one process.
func TestLoopback(t *testing.T) {
	for _, test := range tests {
		t.Run(test, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			p := start(t, ctx, test, "--loopback")
			code, err := p.wait()
			if err != nil {
				t.Fatal(err)
			}
			if code != 0 {
				t.Fatalf("exit %d:\n%s%s", code, p.stdout.String(), p.stderr.String())
			}
			golden(t, test+".loopback.stdout", mask(p.stdout.String()))
			golden(t, test+".loopback.stderr", mask(p.stderr.String()))
		})
	}
}

// TestPeerKilled kills one side in the middle of a long test: the other
// must say why and exit within the 5 seconds pvperf promises (the test
// allows more only to absorb a loaded machine's scheduling, and reports
// how long it took), saying that its measurement loop failed, with that
// failure's status: 17 for the tests whose loop perftest fails with 17,
// 1 for the others, whether the loop saw an error completion first or
// the watch of the connection ended it.
func TestPeerKilled(t *testing.T) {
	for _, c := range []struct {
		test string
		args []string
		kill string // "server" or "client"
		want int
		says string // how the survivor's stderr says its loop failed
	}{
		{"write_bw", []string{"-D", "30"}, "server", 1, ""},
		{"send_bw", []string{"-n", "1000000000"}, "server", 17, ""},
		{"read_lat", []string{"-D", "30"}, "server", 17, ""},
		{"send_lat", []string{"-n", "1000000000"}, "client", 17, ""},
		{"send_lat", []string{"-D", "30"}, "server", 17, ""},
		{"write_lat", []string{"-D", "30"}, "client", 1, ""},
		{"write_bw", []string{"--run_infinitely", "-D", "1"}, "server", 1, " Error occurred while running infinitely! aborting ...\n"},
	} {
		if c.says == "" {
			c.says = "Failed to complete run_iter"
		}
		name := c.test
		if c.args[0] == "--run_infinitely" {
			name += "_infinitely"
		}
		t.Run(name+"/kill_"+c.kill, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			port := strconv.Itoa(freePort(t))
			server := start(t, ctx, c.test, append([]string{"-p", port}, c.args...)...)
			waitListening(t, ctx, server, port)
			client := start(t, ctx, c.test, append([]string{"-p", port}, append(c.args, "localhost")...)...)
			// Let the test run.
			time.Sleep(2 * time.Second)
			victim, survivor := server, client
			if c.kill == "client" {
				victim, survivor = client, server
			}
			if err := victim.cmd.Process.Kill(); err != nil {
				t.Fatal(err)
			}
			killed := time.Now()
			_, _ = victim.wait()
			reaped := time.Since(killed)
			code, err := survivor.wait()
			took := time.Since(killed)
			if err != nil {
				t.Fatal(err)
			}
			var said time.Duration
			if !survivor.said.IsZero() {
				said = survivor.said.Sub(killed)
			}
			t.Logf("victim reaped after %v; survivor wrote its error after %v and exited with %d after %v; stderr: %q",
				reaped, said, code, took, survivor.stderr.String())
			if code != c.want {
				t.Errorf("survivor exited with %d, want %d", code, c.want)
			}
			if survivor.stderr.Len() == 0 {
				t.Error("survivor printed no error")
			}
			if !strings.Contains(survivor.stderr.String(), c.says) {
				t.Errorf("survivor's stderr does not say its loop failed: %q", survivor.stderr.String())
			}
			if took > 5*time.Second {
				t.Errorf("survivor took %v to exit, want at most 5s", took)
			}
		})
	}
}

// TestUnreachable: a client with no server fails at once with perftest's
// message.
func TestUnreachable(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	port := strconv.Itoa(freePort(t))
	p := start(t, ctx, "write_bw", "-p", port, "localhost")
	code, err := p.wait()
	if err != nil {
		t.Fatal(err)
	}
	if code != 1 {
		t.Errorf("exit %d, want 1", code)
	}
	golden(t, "unreachable.stderr", strings.ReplaceAll(p.stderr.String(), ":"+port, ":PORT"))
}

// TestInvalidCombination: perftest's check for UD outside SEND.
func TestInvalidCombination(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p := start(t, ctx, "write_bw", "-c", "UD", "localhost")
	code, err := p.wait()
	if err != nil {
		t.Fatal(err)
	}
	if code != 1 || !strings.Contains(p.stdout.String()+p.stderr.String(), " UD connection only possible in SEND verb") {
		t.Errorf("exit %d, stdout %q, stderr %q", code, p.stdout.String(), p.stderr.String())
	}
}
