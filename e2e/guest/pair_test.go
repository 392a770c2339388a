package guest

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// pair is one client/server run: the two commands (paths), the arguments
// both get (the client adds the server's address), and what the run must
// show.
type pair struct {
	server, client string
	args           []string
	// serverRow: the server must print a result row too.
	serverRow bool
	// serverDir and clientDir are the working directories (where the
	// result files go); "" is the test binary's.
	serverDir, clientDir string
	// timeout bounds each side; 0 is -guest.run-timeout.
	timeout time.Duration
	// stopClient, when not 0, is when the client gets SIGINT (the Ctrl-C
	// that ends --run_infinitely); it must then exit 0 all the same.
	stopClient time.Duration
}

// pairResult is how a pair ended: err is nil when both sides exited 0 and
// printed what they must; its text is the reason otherwise.
type pairResult struct {
	err            error
	server, client string // the outputs, stdout and stderr together
	took           time.Duration
}

// run runs the pair: the server first, the client once the server
// listens on -guest.port (see runSides).
func (p pair) run() pairResult {
	return runSides(sideCmds{
		server: append([]string{p.server}, p.args...), client: append(append([]string{p.client}, p.args...), *addr),
		serverDir: p.serverDir, clientDir: p.clientDir,
		ready: func(int) bool { return p.ready() }, serverRow: p.serverRow, timeout: p.timeout, stopClient: p.stopClient,
	})
}

// sideCmds is one server and one client command line (argv, each with its
// program first), and what their run must show.
type sideCmds struct {
	server, client       []string
	serverDir, clientDir string
	// ready tells whether the server, of process id pid, listens.
	ready      func(pid int) bool
	serverRow  bool
	timeout    time.Duration // 0 is -guest.run-timeout
	stopClient time.Duration // see pair
}

// runSides runs the server first, the client once the server is ready. A
// side still running at its timeout is interrupted, then killed 2 s
// later; the server gets 10 s to end after a client that succeeded, 2 s
// after one that failed (perftest's server may then wait for ever).
func runSides(p sideCmds) pairResult {
	tmo := p.timeout
	if tmo == 0 {
		tmo = *runTimeout
	}
	tmo, ok := budget(tmo)
	if !ok {
		return pairResult{err: fmt.Errorf("not run: the time budget (%s) is spent", *budgetFlag)}
	}
	start := time.Now()
	var sout, cout bytes.Buffer
	sctx, scancel := context.WithTimeout(context.Background(), tmo)
	defer scancel()
	srv := command(sctx, p.server[0], p.server[1:], p.serverDir, &sout)
	if err := srv.Start(); err != nil {
		return pairResult{err: fmt.Errorf("server did not start: %w", err)}
	}
	// sdone is closed when the server has ended, with serr its error.
	sdone := make(chan struct{})
	var serr error
	go func() { serr = srv.Wait(); close(sdone) }()
	res := pairResult{}
	sended := false
	// Wait for the server to listen.
	deadline := time.Now().Add(*listenTimeout)
	for !p.ready(srv.Process.Pid) {
		if time.Now().After(deadline) {
			res.err = fmt.Errorf("server not listening on port %d after %s", *port, *listenTimeout)
			break
		}
		select {
		case <-sdone:
			sended = true
			res.err = fmt.Errorf("server exited (%v) before listening: %s", exitText(serr), lastLine(sout.String()))
		case <-time.After(100 * time.Millisecond):
		}
		if sended {
			break
		}
	}
	if res.err == nil {
		cctx, ccancel := context.WithTimeout(context.Background(), tmo)
		cli := command(cctx, p.client[0], p.client[1:], p.clientDir, &cout)
		var cerr error
		if p.stopClient > 0 {
			if cerr = cli.Start(); cerr == nil {
				stop := time.AfterFunc(p.stopClient, func() { _ = cli.Process.Signal(os.Interrupt) })
				cerr = cli.Wait()
				stop.Stop()
			}
		} else {
			cerr = cli.Run()
		}
		timedOut := cctx.Err() != nil
		ccancel()
		grace := 10 * time.Second
		if cerr != nil {
			grace = 2 * time.Second
		}
		killed := false
		select {
		case <-sdone:
		case <-time.After(grace):
			_ = srv.Process.Kill()
			<-sdone
			killed = true
		}
		sended = true
		switch {
		case timedOut:
			res.err = fmt.Errorf("client timed out after %s", tmo)
		case cerr != nil:
			res.err = fmt.Errorf("client %s: %s", exitText(cerr), lastLine(cout.String()))
		case killed:
			res.err = fmt.Errorf("server still running %s after its client ended", grace)
		case sctx.Err() != nil:
			res.err = fmt.Errorf("server timed out after %s", tmo)
		case serr != nil:
			res.err = fmt.Errorf("server %s: %s", exitText(serr), lastLine(sout.String()))
		case !hasRow(cout.String()):
			res.err = errors.New("client printed no result row")
		case p.serverRow && !hasRow(sout.String()):
			res.err = errors.New("server printed no result row")
		}
	}
	if !sended {
		_ = srv.Process.Kill()
		<-sdone
	}
	res.server, res.client, res.took = sout.String(), cout.String(), time.Since(start).Round(10*time.Millisecond)
	return res
}

// command is name with args in dir, its output into out, interrupted when
// ctx ends and killed 2 s later. A command of pvperf gets
// -guest.peer-timeout when set.
func command(ctx context.Context, name string, args []string, dir string, out *bytes.Buffer) *exec.Cmd {
	if *peerTimeout != 0 && strings.HasPrefix(name, *pvperfDir+"/") {
		args = append([]string{"--peer-timeout=" + peerTimeout.String()}, args...)
	}
	c := exec.CommandContext(ctx, name, args...)
	c.Dir = dir
	c.Stdout, c.Stderr = out, out
	c.Cancel = func() error { return c.Process.Signal(os.Interrupt) }
	c.WaitDelay = 2 * time.Second
	return c
}

// exitText says how a command ended: "exit 1", "signal: killed".
func exitText(err error) string {
	var ee *exec.ExitError
	if errors.As(err, &ee) && ee.Exited() {
		return "exit " + strconv.Itoa(ee.ExitCode())
	}
	if errors.As(err, &ee) {
		return ee.String()
	}
	if err == nil {
		return "exit 0"
	}
	return err.Error()
}

// log writes both outputs of a run into the test's log; with rowsOnly,
// just the client's result rows.
func (r pairResult) log(t *testing.T, p pair, rowsOnly bool) {
	t.Helper()
	var b strings.Builder
	if rowsOnly && r.err == nil {
		for _, l := range rows(r.client) {
			fmt.Fprintf(&b, "  client| %s\n", l)
		}
	} else {
		fmt.Fprintf(&b, "server: %s %s\n", p.server, strings.Join(p.args, " "))
		fmt.Fprintf(&b, "client: %s %s %s\n", p.client, strings.Join(p.args, " "), *addr)
		for _, side := range []struct{ name, out string }{{"server", r.server}, {"client", r.client}} {
			for _, l := range strings.Split(strings.TrimRight(side.out, "\n"), "\n") {
				fmt.Fprintf(&b, "  %s| %s\n", side.name, l)
			}
		}
	}
	fmt.Fprintf(&b, "(%s)", r.took)
	t.Log(b.String())
}

// check runs p as one check: it fails the test with the reason when the
// pair fails.
func (p pair) check(t *testing.T) {
	t.Helper()
	r := p.run()
	r.log(t, p, false)
	if r.err != nil {
		t.Fatal(r.err)
	}
}

// listening reports whether a TCP socket of this host listens on port:
// a line of /proc/net/tcp or tcp6 whose local port is port and whose state
// is 0A (LISTEN).
// ready tells whether the server listens: on TCP, or with rdma_cm (-z,
// -R) in the connection manager.
func (p pair) ready() bool {
	for _, a := range p.args {
		if a == "-R" || a == "-z" || a == "--rdma_cm" || a == "--comm_rdma_cm" {
			return cmListening(*port)
		}
	}
	return listening(*port)
}

// cmListening tells whether an rdma_cm id listens on port, from iproute2's
// "rdma resource show cm_id".
func cmListening(port int) bool {
	out, err := exec.Command("rdma", "resource", "show", "cm_id").CombinedOutput()
	if err != nil {
		return false
	}
	suffix := fmt.Sprintf(":%d", port)
	for _, line := range strings.Split(string(out), "\n") {
		if strings.Contains(line, "LISTEN") && (strings.Contains(line, suffix+" ") || strings.HasSuffix(line, suffix)) {
			return true
		}
	}
	return false
}

func listening(port int) bool {
	suffix := fmt.Sprintf(":%04X", port)
	for _, name := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		f, err := os.Open(name)
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

// rows returns the column headers ("#bytes ...") and result rows (a size,
// then at least three more fields) of a perftest output.
func rows(out string) []string {
	var r []string
	header := false
	for _, l := range strings.Split(out, "\n") {
		f := strings.Fields(l)
		switch {
		case len(f) > 0 && f[0] == "#bytes":
			header = true
			r = append(r, strings.TrimSpace(l))
		case header && len(f) >= 4 && isUint(f[0]):
			r = append(r, strings.TrimSpace(l))
		}
	}
	return r
}

func isUint(s string) bool {
	_, err := strconv.ParseUint(s, 10, 64)
	return err == nil
}

// hasRow reports whether out holds a result row.
func hasRow(out string) bool {
	for _, l := range rows(out) {
		if !strings.HasPrefix(l, "#bytes") {
			return true
		}
	}
	return false
}

// field returns field n (1-based) of the first result row of out, or "".
func field(out string, n int) string {
	for _, l := range rows(out) {
		if f := strings.Fields(l); f[0] != "#bytes" && len(f) >= n {
			return f[n-1]
		}
	}
	return ""
}

// lastLine is the last non-empty line of out, trimmed: a failure's reason.
func lastLine(out string) string {
	lines := strings.Split(strings.TrimSpace(out), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}

// pv and pt are the paths of pvperf's and perftest's command for test.
func pv(test string) string { return filepath.Join(*pvperfDir, test) }
func pt(test string) string { return filepath.Join(*perftestDir, "ib_"+test) }

// ptNew is test's command of the newer perftest (-guest.perftest-new),
// "" when none was given.
func ptNew(test string) string {
	if *perftestNew == "" {
		return ""
	}
	return filepath.Join(*perftestNew, "ib_"+test)
}
