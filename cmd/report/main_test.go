package main

import (
	"bytes"
	"encoding/csv"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pvperf/pvperf/internal/reportcli"
	"github.com/pvperf/pvperf/reports"
)

// writeRun writes a run of test with one BW row per size as a JSON file
// in dir.
func writeRun(t *testing.T, dir, name string, roce int, sizes ...uint64) string {
	t.Helper()
	run := reports.Run{Info: reports.RunInfo{Test: "write_bw", Title: "RDMA_Write_BW_Test", Kind: reports.KindBW,
		Device: "emu0", Driver: "emu/unrestricted", LinkLayer: "Ethernet", RoCEVersion: roce, Connection: "RC",
		QPs: 1, MTU: 1024, Iterations: 100, Time: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}}
	var rec reports.Record
	for _, s := range sizes {
		rec.AddBW(reports.SideLocal, reports.BWResult{Size: s, Iters: 100, Average: float64(s) / 10, MsgRate: 1})
	}
	run.Results = rec.Results(false, reports.Nanoseconds)
	b, err := reports.MarshalRun(&run)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func runReport(args ...string) (int, string, string) {
	var stdout, stderr bytes.Buffer
	code := run(args, &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

func TestReportOutputs(t *testing.T) {
	dir := t.TempDir()
	v1 := writeRun(t, dir, "v1.json", 1, 2, 64, 65536)
	v2 := writeRun(t, dir, "v2.json", 2, 2, 64, 65536)

	html := filepath.Join(dir, "both.html")
	if code, _, stderr := runReport("--html", html, v1, v2); code != reportcli.ExitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	page, err := os.ReadFile(html)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(page), "RoCE v1") || !strings.Contains(string(page), "RoCE v2") || strings.Count(string(page), "<svg") < 2 {
		t.Errorf("the overlay has no legend of both runs or no charts")
	}

	code, stdout, _ := runReport("--csv", "-", v1, v2)
	rows, err := csv.NewReader(strings.NewReader(stdout)).ReadAll()
	if code != reportcli.ExitOK || err != nil || len(rows) != 1+6 {
		t.Errorf("--csv -: exit %d, %v, %d rows", code, err, len(rows))
	}

	// Files of one setup with different sizes are one run, unless
	// --no-merge.
	a := writeRun(t, dir, "a.json", 2, 2)
	b := writeRun(t, dir, "b.json", 2, 64)
	_, merged, _ := runReport("--benchfmt", "-", a, b)
	_, apart, _ := runReport("--no-merge", "--benchfmt", "-", a, b)
	if strings.Count(merged, "pvperf-test: write_bw") != 1 || strings.Count(apart, "pvperf-test: write_bw") != 2 {
		t.Errorf("merge: %d and %d runs, want 1 and 2", strings.Count(merged, "pvperf-test:"), strings.Count(apart, "pvperf-test:"))
	}

	code, stdout, _ = runReport(a)
	if code != reportcli.ExitOK || !strings.Contains(stdout, "a.json") || !strings.Contains(stdout, "BW avg [MiB/s]") {
		t.Errorf("summary: exit %d\n%s", code, stdout)
	}
}

func TestReportUsage(t *testing.T) {
	if code, _, stderr := runReport("--help"); code != reportcli.ExitOK || !strings.Contains(stderr, "Usage: report") {
		t.Errorf("--help: exit %d, %q", code, stderr)
	}
	for _, args := range [][]string{nil, {"--bogus", "x.json"}, {"--html"}, {"--csv", "-", "--benchfmt", "-", "x.json"}} {
		if code, _, stderr := runReport(args...); code != reportcli.ExitUsage || stderr == "" {
			t.Errorf("%q: exit %d, stderr %q", args, code, stderr)
		}
	}
	dir := t.TempDir()
	out := filepath.Join(dir, "out.csv")
	code, _, stderr := runReport("--csv", out, filepath.Join(dir, "missing.json"))
	if code != reportcli.ExitError || !strings.Contains(stderr, "missing.json") {
		t.Errorf("missing file: exit %d, %q", code, stderr)
	}
	if _, err := os.Stat(out); err == nil {
		t.Error("output written for a failed report")
	}
	// An output that cannot be written: a directory that does not exist.
	good := writeRun(t, dir, "g.json", 2, 2)
	code, _, stderr = runReport("--csv", filepath.Join(dir, "no", "such", "dir.csv"), good)
	if code != reportcli.ExitError || !strings.Contains(stderr, "report: ") {
		t.Errorf("unwritable output: exit %d, %q", code, stderr)
	}
}

// TestReportOutputClash: an output that is an input (by name, by another
// path or by a link) or two outputs that are one file are refused before
// anything is written: the input keeps its results.
func TestReportOutputClash(t *testing.T) {
	dir := t.TempDir()
	in := writeRun(t, dir, "a.json", 2, 2)
	link := filepath.Join(dir, "link.json")
	if err := os.Symlink(in, link); err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(in)
	same := filepath.Join(dir, "same.out")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--html", in, in}, "--html " + in + " is also an input"},
		{[]string{"--csv", filepath.Join(dir, ".", "a.json"), in}, "is also an input"},
		{[]string{"--benchfmt", link, in}, "is also an input"},
		{[]string{"--html", same, "--csv", same, in}, "--csv and --html name the same file"},
	} {
		code, _, stderr := runReport(c.args...)
		if code != reportcli.ExitUsage || !strings.Contains(stderr, c.want) {
			t.Errorf("%q: exit %d, stderr %q, want %q", c.args, code, stderr, c.want)
		}
	}
	if after, _ := os.ReadFile(in); !bytes.Equal(after, before) {
		t.Error("the input was changed")
	}
	if _, err := os.Stat(same); err == nil {
		t.Error("an output was written")
	}
}
