package e2e

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestRepeatTwoProcesses: with --repeat on both sides the server serves
// that many clients and both print the summary; a client whose
// --repeat_ci is met early ends the server's series, and both exit 0.
func TestRepeatTwoProcesses(t *testing.T) {
	server, client := runPair(t, "send_lat", "-d", "emu0", "-n", "200", "--repeat", "3")
	for _, p := range []*proc{server, client} {
		if !strings.Contains(p.stdout.String(), " 3 runs: median, range and 95% confidence interval") {
			t.Errorf("%v: no summary:\n%s", p.cmd.Args, p.stdout.String())
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	port := strconv.Itoa(freePort(t))
	srv := start(t, ctx, "write_bw", "-d", "emu0", "-n", "200", "--repeat", "12", "-p", port)
	waitListening(t, ctx, srv, port)
	cli := start(t, ctx, "write_bw", "-d", "emu0", "-n", "200", "--repeat", "12", "--repeat_ci", "99", "-p", port, "localhost")
	for _, p := range []*proc{cli, srv} {
		code, err := p.wait()
		if err != nil || code != 0 {
			t.Fatalf("%v: exit %d %v\n%s%s", p.cmd.Args, code, err, p.stdout.String(), p.stderr.String())
		}
	}
	if !strings.Contains(cli.stdout.String(), " 5 runs: ") || !strings.Contains(cli.stdout.String(), "±99% of the median, reached") {
		t.Errorf("client:\n%s", cli.stdout.String())
	}
	if !strings.Contains(srv.stdout.String(), " 5 runs: ") {
		t.Errorf("server:\n%s", srv.stdout.String())
	}
}
