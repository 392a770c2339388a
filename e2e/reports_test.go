package e2e

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pvperf/pvperf/reports"
)

// sweepSizes is the number of sizes of an -a run: 2 B to 8 MiB.
const sweepSizes = 23

// runFiles runs a server and a client of test with args, each writing its
// JSON, CSV and HTML files into dir with its role as prefix.
func runFiles(t *testing.T, dir, test string, args ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	port := strconv.Itoa(freePort(t))
	files := func(role string) []string {
		p := filepath.Join(dir, role)
		return []string{"-p", port, "--out_json", "--out_json_file", p + ".json", "--out_csv", p + ".csv", "--out_html=" + p + ".html"}
	}
	server := start(t, ctx, test, append(files("server"), args...)...)
	waitListening(t, ctx, server, port)
	client := start(t, ctx, test, append(append(files("client"), args...), "localhost")...)
	for _, p := range []*proc{client, server} {
		if code, err := p.wait(); err != nil || code != 0 {
			t.Fatalf("%v: exit %d, %v\nstdout:\n%s\nstderr:\n%s", p.cmd.Args, code, err, p.stdout.String(), p.stderr.String())
		}
	}
}

// readCSV reads a CSV file into maps keyed by column name.
func readCSV(t *testing.T, name string) []map[string]string {
	t.Helper()
	f, err := os.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if len(rows) == 0 || !slices.Equal(rows[0], reports.CSVColumns) {
		t.Fatalf("%s: header %q", name, rows)
	}
	var out []map[string]string
	for _, row := range rows[1:] {
		m := map[string]string{}
		for i, v := range row {
			m[rows[0][i]] = v
		}
		out = append(out, m)
	}
	return out
}

func readRun(t *testing.T, name string) reports.Run {
	t.Helper()
	data, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	run, err := reports.ParseRun(data, name)
	if err != nil {
		t.Fatal(err)
	}
	return run
}

// TestSweepFiles runs write_bw -a as two processes: each side writes its
// CSV rows (the client one per size with its own numbers, the server the
// client's last, received over the out-of-band connection), an HTML page
// with charts and a JSON file whose "pvperf" object has the same numbers.
func TestSweepFiles(t *testing.T) {
	dir := t.TempDir()
	runFiles(t, dir, "write_bw", "-a", "-n", "50")
	// As in perftest, the server of an RDMA write sweep receives only the
	// client's last row.
	for role, side := range map[string]string{"client": reports.SideLocal, "server": reports.SideRemote} {
		rows := readCSV(t, filepath.Join(dir, role+".csv"))
		first := 0
		if role == "server" {
			first = sweepSizes - 1
		}
		if len(rows) != sweepSizes-first {
			t.Fatalf("%s: %d rows, want %d", role, len(rows), sweepSizes-first)
		}
		run := readRun(t, filepath.Join(dir, role+".json"))
		for i, row := range rows {
			want := strconv.Itoa(2 << (first + i))
			if row["msg_size_bytes"] != want || row["side"] != side || row["test"] != "write_bw" || row["role"] != role {
				t.Errorf("%s row %d: size %s side %s test %s role %s", role, i, row["msg_size_bytes"], row["side"], row["test"], row["role"])
			}
			avg, err := strconv.ParseFloat(row["bw_average_MiB_per_s"], 64)
			if err != nil || avg <= 0 {
				t.Errorf("%s row %d: BW average %q", role, i, row["bw_average_MiB_per_s"])
			}
			if got := float64(run.Results[i].BW.AverageMiBps); got != avg {
				t.Errorf("%s row %d: JSON says %v MiB/s, CSV %v", role, i, got, avg)
			}
		}
		html, err := os.ReadFile(filepath.Join(dir, role+".html"))
		if err != nil {
			t.Fatal(err)
		}
		if n := strings.Count(string(html), "<svg"); n < 2 {
			t.Errorf("%s.html has %d charts", role, n)
		}
	}
	client := readRun(t, filepath.Join(dir, "client.json"))
	if client.Info.Driver != "emu/unrestricted" || client.Info.Role != "client" || client.Info.Iterations != 50 ||
		client.Info.Peer != "localhost" || client.Info.Time.IsZero() {
		t.Errorf("client info: %+v", client.Info)
	}
}

// TestLatencyFiles: a latency sweep in one process writes percentiles in
// microseconds, in order.
func TestLatencyFiles(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	csvFile := filepath.Join(dir, "lat.csv")
	p := start(t, ctx, "send_lat", "--loopback", "-a", "-n", "100", "--out_csv", csvFile)
	if code, err := p.wait(); err != nil || code != 0 {
		t.Fatalf("exit %d, %v\n%s%s", code, err, p.stdout.String(), p.stderr.String())
	}
	rows := readCSV(t, csvFile)
	if len(rows) != sweepSizes {
		t.Fatalf("%d rows, want %d", len(rows), sweepSizes)
	}
	for i, row := range rows {
		var prev float64
		for _, col := range []string{"lat_min_us", "lat_p50_us", "lat_p90_us", "lat_p99_us", "lat_max_us"} {
			v, err := strconv.ParseFloat(row[col], 64)
			if err != nil || v <= 0 || v < prev {
				t.Errorf("row %d: %s = %q after %v", i, col, row[col], prev)
			}
			prev = v
		}
		if row["bw_average_MiB_per_s"] != "" || row["loopback"] != "true" {
			t.Errorf("row %d: BW %q loopback %q", i, row["bw_average_MiB_per_s"], row["loopback"])
		}
	}
}

// TestReportCommand turns the files of two runs into one report, and checks
// that bad inputs fail with a message and leave no output file behind.
func TestReportCommand(t *testing.T) {
	dir := t.TempDir()
	runFiles(t, dir, "send_bw", "-a", "-n", "20")
	client, server := filepath.Join(dir, "client.json"), filepath.Join(dir, "server.json")

	report := func(args ...string) (int, string, string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		p := start(t, ctx, "report", args...)
		code, err := p.wait()
		if err != nil {
			t.Fatal(err)
		}
		return code, p.stdout.String(), p.stderr.String()
	}

	both := filepath.Join(dir, "both.html")
	if code, _, stderr := report("--html", both, client, server); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	html, err := os.ReadFile(both)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"<svg", "client.json", "server.json"} {
		if !strings.Contains(string(html), want) {
			t.Errorf("both.html lacks %q", want)
		}
	}
	code, stdout, stderr := report("--csv", "-", client, server)
	if code != 0 || strings.Count(stdout, "\n") != 1+2*sweepSizes {
		t.Errorf("--csv -: exit %d, %d lines (want %d), stderr %q", code, strings.Count(stdout, "\n"), 1+2*sweepSizes, stderr)
	}
	code, stdout, _ = report("--benchfmt", "-", client)
	if code != 0 || strings.Count(stdout, "BenchmarkSendBW/qp=1/size=") != sweepSizes || !strings.Contains(stdout, "Unit Mpps better=higher") {
		t.Errorf("--benchfmt -: exit %d:\n%s", code, stdout)
	}
	code, stdout, _ = report(client)
	if code != 0 || !strings.Contains(stdout, "BW avg [MiB/s]") || strings.Count(stdout, "send_bw") != sweepSizes {
		t.Errorf("summary: exit %d:\n%s", code, stdout)
	}

	write := func(name, data string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	perftest := write("perftest.json", "{\n\"test_info\": {\n\"test\": \"RDMA_Write_BW_Test\"\n},\n\"results\": {\n\"MsgSize\": 65536\n}\n}\n")
	for _, c := range []struct {
		name  string
		args  []string
		code  int
		error string
	}{
		{"missing", []string{filepath.Join(dir, "nope.json")}, 1, "nope.json: no such file or directory"},
		{"empty", []string{write("empty.json", "")}, 1, "empty.json: empty input"},
		{"malformed", []string{client, write("bad.json", "{\"pvperf\": {\"schema_version\": 1,")}, 1, "bad.json: malformed JSON: "},
		{"perftest's JSON", []string{client, perftest}, 1, "perftest.json: no pvperf results: perftest's JSON"},
		{"newer schema", []string{write("v4.json", `{"pvperf": {"schema_version": 4}}`), client}, 1, "v4.json: unsupported schema: schema_version 4"},
		{"no results", []string{write("none.json", `{"pvperf": {"schema_version": 1, "info": {"test": "write_bw", "kind": "bw"}, "results": []}}`)}, 1, "none.json: no results"},
		{"no files", nil, 2, "report: no result files given"},
		{"bad flag", []string{"--pdf", "x.pdf", client}, 2, "unknown flag: --pdf"},
		{"two stdouts", []string{"--csv", "-", "--html", "-", client}, 2, "only one output"},
	} {
		t.Run(c.name, func(t *testing.T) {
			out := filepath.Join(dir, "out.html")
			code, _, stderr := report(append([]string{"--html", out}, c.args...)...)
			if code != c.code || !strings.Contains(stderr, c.error) {
				t.Errorf("exit %d, stderr %q; want %d and %q", code, stderr, c.code, c.error)
			}
			if _, err := os.Stat(out); err == nil {
				t.Errorf("%s written despite the error", out)
				os.Remove(out)
			}
			if matches, _ := filepath.Glob(filepath.Join(dir, ".out.html.*")); len(matches) > 0 {
				t.Errorf("temporary files left: %v", matches)
			}
		})
	}
	// An output in a directory that does not exist is named as given,
	// not by the temporary file it would have been written to first.
	out := filepath.Join(dir, "nodir", "o.html")
	if code, _, stderr := report("--html", out, client); code != 1 || !strings.Contains(stderr, out+": no such file or directory") {
		t.Errorf("--html %s: exit %d, stderr %q", out, code, stderr)
	}
}

// TestOutputFileChecked: an output file that cannot be written is found
// before the test runs (exit 1, perftest's words, no result row), not
// after a measurement that would then be lost; a pipe is written in place
// and not opened before.
func TestOutputFileChecked(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dangling := filepath.Join(dir, "dangling.csv")
	if err := os.Symlink(filepath.Join(dir, "no", "x.csv"), dangling); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--out_csv", dangling}, " Couldn't open CSV output file " + dangling + ": no such file or directory\n"},
		{[]string{"--out_html", filepath.Join(dir, "no", "x.html")}, " Couldn't open HTML output file " + filepath.Join(dir, "no", "x.html") + ": no such file or directory\n"},
		{[]string{"--out_csv", dir}, " Couldn't open CSV output file " + dir + ": is a directory\n"},
		{[]string{"--out_json", "--out_json_file", filepath.Join(dir, "no", "x.json")}, " Couldn't open JSON output file"},
	} {
		p := start(t, ctx, "write_bw", append([]string{"--loopback", "-D", "30"}, c.args...)...)
		code := p.exit(t)
		if code != 1 || !strings.Contains(p.stderr.String(), c.want) || strings.Contains(p.stdout.String(), "#bytes") {
			t.Errorf("%q: exit %d, stderr %q, want %q before any result\n%s", c.args, code, p.stderr.String(), c.want, p.stdout.String())
		}
	}
	fifo := filepath.Join(dir, "fifo")
	if out, err := exec.Command("mkfifo", fifo).CombinedOutput(); err != nil {
		t.Fatalf("mkfifo: %v %s", err, out)
	}
	got := make(chan []byte, 1)
	go func() { b, _ := os.ReadFile(fifo); got <- b }()
	p := start(t, ctx, "write_bw", "--loopback", "-n", "100", "--out_csv", fifo)
	if code := p.exit(t); code != 0 {
		t.Fatalf("CSV to a FIFO: exit %d\n%s", code, p.stderr.String())
	}
	if b := <-got; !strings.Contains(string(b), "bw_average_MiB_per_s") {
		t.Errorf("the FIFO got %q", b)
	}
}

// TestPerftestJSON: the perftest part of --out_json is perftest's file as
// it ends: "results" is one object, the last row printed (here the last
// size of a sweep), so that scripts written for perftest read it; a side
// that prints no row (the server of read_lat) writes no JSON file, as
// perftest's.
func TestPerftestJSON(t *testing.T) {
	dir := t.TempDir()
	runFiles(t, dir, "read_lat", "-a", "-n", "20")
	if _, err := os.Stat(filepath.Join(dir, "server.json")); !os.IsNotExist(err) {
		t.Errorf("the read_lat server wrote a JSON file (%v)", err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "client.json"))
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		TestInfo struct {
			Test string `json:"test"`
		} `json:"test_info"`
		Results map[string]any `json:"results"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatalf("%v:\n%s", err, b)
	}
	if doc.TestInfo.Test != "RDMA_Read_Latency_Test" || doc.Results["MsgSize"] != float64(1<<23) || doc.Results["t_typical"] == nil {
		t.Errorf("test_info.test %q, results %v: want the 8 MiB row", doc.TestInfo.Test, doc.Results)
	}
	if run := readRun(t, filepath.Join(dir, "client.json")); len(run.Results) != sweepSizes {
		t.Errorf("pvperf's results: %d rows, want %d", len(run.Results), sweepSizes)
	}
}
