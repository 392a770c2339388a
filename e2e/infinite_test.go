package e2e

import (
	"context"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestRunInfinitely runs the client of write_bw, read_bw and atomic_bw
// with --run_infinitely -D 1 against a server with the same options, stops
// the client with SIGINT after its first rows, as a user does with Ctrl-C,
// and checks both sides: a row each second with the peak at 0.00, "User
// stopped traffic" and status 0 on the client; "Client closed connection"
// in place of a result row (atomic_bw: the row of the client's report,
// zeros, as perftest's atomic_bw prints) and status 0 on the server. A
// server without the option refuses such a client, as perftest's
// negotiation does.
func TestRunInfinitely(t *testing.T) {
	row := regexp.MustCompile(`(?m)^ (65536|8) +[1-9][0-9]* +0\.00 +[0-9.]+ *\t+ +[0-9.]+\n`)
	zeros := regexp.MustCompile(`(?m)^ 0 +0 +0\.00 +0\.00 *\t+ +0\.000000\n`)
	for _, test := range []string{"write_bw", "read_bw", "atomic_bw"} {
		t.Run(test, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			port := strconv.Itoa(freePort(t))
			args := []string{"-p", port, "--run_infinitely", "-D", "1"}
			server := start(t, ctx, test, args...)
			waitListening(t, ctx, server, port)
			client := start(t, ctx, test, append(args, "localhost")...)
			select {
			case <-client.row:
			case <-ctx.Done():
				t.Fatal("no row from the client")
			}
			time.Sleep(1500 * time.Millisecond) // a second row
			if err := client.cmd.Process.Signal(os.Interrupt); err != nil {
				t.Fatal(err)
			}
			ccode, scode := client.exit(t), server.exit(t)
			cout, sout := client.stdout.String(), server.stdout.String()
			t.Logf("client (exit %d):\n%s%s", ccode, cout, client.stderr.String())
			t.Logf("server (exit %d):\n%s%s", scode, sout, server.stderr.String())
			if ccode != 0 || scode != 0 {
				t.Errorf("exit statuses %d (client) and %d (server), want 0", ccode, scode)
			}
			if n := len(row.FindAllString(cout, -1)); n < 2 {
				t.Errorf("client printed %d rows, want at least 2", n)
			}
			if !strings.Contains(cout, " WARNING: BW peak won't be measured in this run.\n") {
				t.Error("client did not warn that the peak is not measured")
			}
			if !strings.Contains(cout, "\n User stopped traffic\n-----") {
				t.Error("client did not say the traffic was stopped, before its result line")
			}
			switch {
			case test == "atomic_bw" && !zeros.MatchString(sout):
				t.Error("atomic_bw's server did not print the row of the client's report (zeros)")
			case test != "atomic_bw" && (!strings.Contains(sout, "MsgRate[Mpps]\n Client closed connection\n-----") || row.MatchString(sout)):
				t.Error(`server did not print "Client closed connection" in place of a row`)
			}
		})
	}
	t.Run("refused_by_a_plain_server", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		port := strconv.Itoa(freePort(t))
		server := start(t, ctx, "write_bw", "-p", port, "-D", "1")
		waitListening(t, ctx, server, port)
		client := start(t, ctx, "write_bw", "-p", port, "--run_infinitely", "-D", "1", "localhost")
		ccode, scode := client.exit(t), server.exit(t)
		cerr := client.stderr.String()
		t.Logf("client (exit %d): %q; server (exit %d): %q", ccode, cerr, scode, server.stderr.String())
		if ccode != 1 || scode != 1 {
			t.Errorf("exit statuses %d (client) and %d (server), want 1", ccode, scode)
		}
		if !strings.Contains(cerr, " test_method mismatch: local=RUN_INFINITELY, remote=RUN_REGULAR\n Failed to negotiate parameters\n") {
			t.Errorf("client's stderr %q does not name the mismatch", cerr)
		}
	})
}
