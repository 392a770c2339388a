package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
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
	// At least 5 runs, and fewer than the 12 allowed: the target is met
	// early (at 5 runs unless the machine is very noisy), and the client's
	// empty connection ends the server's series at the same count.
	m := regexp.MustCompile(` (\d+) runs: `).FindStringSubmatch(cli.stdout.String())
	n := 0
	if m != nil {
		n, _ = strconv.Atoi(m[1])
	}
	if n < 5 || n >= 12 || !strings.Contains(cli.stdout.String(), "±99% of the median, reached") {
		t.Errorf("client: %d runs, want 5 to 11 with the target reached:\n%s", n, cli.stdout.String())
	}
	if !strings.Contains(srv.stdout.String(), fmt.Sprintf(" %d runs: ", n)) {
		t.Errorf("server: not the client's %d runs:\n%s", n, srv.stdout.String())
	}
}

// TestRepeatMismatch: a client given more runs than its server says so
// when the server is gone, summarises the runs it made (in its text and
// its JSON, which says the series is incomplete) and exits 1; the server,
// whose runs all ran, exits 0.
func TestRepeatMismatch(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	port := strconv.Itoa(freePort(t))
	srv := start(t, ctx, "write_bw", "-d", "emu0", "-n", "200", "--repeat", "2", "-p", port)
	waitListening(t, ctx, srv, port)
	file := filepath.Join(t.TempDir(), "c.json")
	cli := start(t, ctx, "write_bw", "-d", "emu0", "-n", "200", "--repeat", "4", "--out_json", "--out_json_file", file, "-p", port, "localhost")
	ccode, scode := cli.exit(t), srv.exit(t)
	if ccode != 1 || scode != 0 {
		t.Errorf("exit %d (client) and %d (server), want 1 and 0", ccode, scode)
	}
	if !strings.Contains(cli.stderr.String(), " Run 3 of 4 found no server: was it given a smaller --repeat?") {
		t.Errorf("client's stderr does not say why:\n%s", cli.stderr.String())
	}
	if !strings.Contains(cli.stdout.String(), " 2 runs: median, range") {
		t.Errorf("client did not summarise its 2 runs:\n%s", cli.stdout.String())
	}
	b, err := os.ReadFile(file)
	if err != nil || !regexp.MustCompile(`"repeats": \{\s*"runs": 2,`).Match(b) {
		t.Errorf("client's JSON (%v) has no summary of its 2 runs:\n%s", err, b)
	}
	if !strings.Contains(string(b), `"incomplete": "run 3 of 4 found no server"`) {
		t.Errorf("client's JSON does not say the series is incomplete:\n%s", b)
	}
}

// TestRepeatServerMore: a server given more runs than its client is told,
// once the client's series is over, that no more come: it summarises the
// runs made and both exit 0, rather than the server waiting for ever.
func TestRepeatServerMore(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	port := strconv.Itoa(freePort(t))
	srv := start(t, ctx, "write_bw", "-d", "emu0", "-n", "200", "--repeat", "5", "-p", port)
	waitListening(t, ctx, srv, port)
	cli := start(t, ctx, "write_bw", "-d", "emu0", "-n", "200", "--repeat", "2", "-p", port, "localhost")
	if ccode, scode := cli.exit(t), srv.exit(t); ccode != 0 || scode != 0 {
		t.Errorf("exit %d (client) and %d (server), want 0 and 0:\n%s\n%s", ccode, scode, cli.stderr.String(), srv.stderr.String())
	}
	for _, p := range []*proc{cli, srv} {
		if !strings.Contains(p.stdout.String(), " 2 runs: median, range") {
			t.Errorf("%v did not summarise the 2 runs:\n%s", p.cmd.Args, p.stdout.String())
		}
	}
}

// TestRepeatClientFails: a client whose series stops after a run the
// server completed (its bandwidth limit failed) tells the server, which
// ends its own series instead of waiting for ever.
func TestRepeatClientFails(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	port := strconv.Itoa(freePort(t))
	srv := start(t, ctx, "write_bw", "-d", "emu0", "-n", "200", "--repeat", "3", "-p", port)
	waitListening(t, ctx, srv, port)
	cli := start(t, ctx, "write_bw", "-d", "emu0", "-n", "200", "--repeat", "3", "--limit_bw", "1000000", "-p", port, "localhost")
	ccode := cli.exit(t)
	began := time.Now()
	scode := srv.exit(t)
	if ccode != 1 || scode != 0 {
		t.Errorf("exit %d (client) and %d (server), want 1 and 0:\n%s\n%s", ccode, scode, cli.stderr.String(), srv.stderr.String())
	}
	if d := time.Since(began); d > 10*time.Second {
		t.Errorf("the server ended %v after its client", d)
	}
}

// TestRepeatOutputValue: with --output=bandwidth (or latency), a series
// prints the one number a script reads, as a single run does: the median
// of its runs, which its JSON lists.
func TestRepeatOutputValue(t *testing.T) {
	for _, c := range []struct{ test, output, metric string }{
		{"write_bw", "bandwidth", "average_MiB_per_s"},
		{"send_lat", "latency", "mean_us"},
	} {
		t.Run(c.test, func(t *testing.T) {
			js := filepath.Join(t.TempDir(), "r.json")
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			p := start(t, ctx, c.test, "--loopback", "-n", "500", "--repeat", "3", "--output", c.output, "--out_json", "--out_json_file", js)
			if code := p.exit(t); code != 0 {
				t.Fatalf("exit %d: %s", code, p.stderr.String())
			}
			var nums []string
			for l := range strings.SplitSeq(strings.TrimSpace(p.stdout.String()), "\n") {
				if _, err := strconv.ParseFloat(l, 64); err == nil {
					nums = append(nums, l)
				} else if !strings.HasPrefix(l, "Disabling") { // perftest's warning of -n with dynamic polling
					t.Errorf("stdout holds %q beside the number", l)
				}
			}
			var doc struct {
				Pvperf struct {
					Repeats struct {
						Rows []struct {
							Metric string  `json:"metric"`
							Median float64 `json:"median"`
						} `json:"rows"`
					} `json:"repeats"`
				} `json:"pvperf"`
			}
			b, err := os.ReadFile(js)
			if err != nil || json.Unmarshal(b, &doc) != nil {
				t.Fatalf("JSON (%v):\n%s", err, b)
			}
			want := ""
			for _, r := range doc.Pvperf.Repeats.Rows {
				if r.Metric == c.metric {
					want = fmt.Sprintf("%f", r.Median)
				}
			}
			if len(nums) != 1 || nums[0] != want {
				t.Errorf("stdout's numbers %q, want the median %s alone:\n%s", nums, want, p.stdout.String())
			}
		})
	}
}
