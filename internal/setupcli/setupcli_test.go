package setupcli

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/pvperf/pvperf/internal/version"
)

func call(args ...string) (int, string, string) {
	var o, e bytes.Buffer
	rc := Main(args, &o, &e)
	return rc, o.String(), e.String()
}

func TestUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--no-such-flag"}, "unknown flag"},
		{[]string{"-c", "0", "10.0.0.1"}, "--connections 0"},
		{[]string{"-p", "70000", "10.0.0.1"}, "--port 70000"},
		{[]string{"-p", "0", "10.0.0.1"}, "--port 0"},
		{[]string{"-t", "0", "10.0.0.1"}, "--timeout 0"},
		{[]string{"-r", "-1", "10.0.0.1"}, "--retries -1"},
		{[]string{"--peer-timeout", "0s", "10.0.0.1"}, "--peer-timeout"},
		{[]string{"a", "b"}, "more than one server"},
		{[]string{"--loopback", "10.0.0.1"}, "--loopback takes no server"},
		{[]string{"--out_json_file", "-", "--out_csv", "-", "--loopback"}, "only one output"},
		// Before any connection is made, not after the benchmark.
		{[]string{"--out_csv", "/nonexistent/x.csv", "--loopback"}, "/nonexistent/x.csv: no such file or directory"},
	} {
		rc, out, errOut := call(tc.args...)
		if rc != ExitUsage || !strings.Contains(errOut, tc.want) || out != "" {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want exit %d and %q", tc.args, rc, out, errOut, ExitUsage, tc.want)
		}
	}
}

func TestHelpAndVersion(t *testing.T) {
	if rc, out, _ := call("-h"); rc != ExitOK || !strings.Contains(out, "Usage: cm_setup") || !strings.Contains(out, "--connections") {
		t.Errorf("-h: exit %d, stdout %q", rc, out)
	}
	if rc, out, _ := call("-V"); rc != ExitOK || out != "cm_setup (pvperf) "+version.Version+"\n" {
		t.Errorf("-V: exit %d, stdout %q", rc, out)
	}
}

func TestUnknownDevice(t *testing.T) {
	rc, out, errOut := call("-d", "nosuchdev0", "--loopback", "-p", "0")
	if rc != ExitError || !strings.Contains(errOut, "nosuchdev0") || out != "" {
		t.Errorf("exit %d, stdout %q, stderr %q", rc, out, errOut)
	}
}

// The loopback run on the emulator prints both sides' tables; with JSON on
// the standard output it prints the JSON alone, both sides in it.
func TestLoopbackOutputs(t *testing.T) {
	rc, out, errOut := call("-d", "emu0", "--loopback", "-p", "0", "-c", "8")
	if rc != ExitOK {
		t.Fatalf("exit %d: %s", rc, errOut)
	}
	for _, want := range []string{"Role           : client", "Role           : server", "full connect", "8 connections set up in"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}

	csvFile := filepath.Join(t.TempDir(), "setup.csv")
	prof := filepath.Join(t.TempDir(), "cpu.pprof")
	rc, out, errOut = call("-d", "emu0", "--loopback", "-p", "0", "-c", "5", "--out_json_file", "-", "--out_csv", csvFile, "--cpuprofile", prof)
	if rc != ExitOK {
		t.Fatalf("exit %d: %s", rc, errOut)
	}
	var doc struct {
		Test    string
		Results []struct {
			Role        string
			Connections int
			Steps       []struct {
				Step  string
				P50US float64 `json:"p50_us"`
			}
		}
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("stdout is not JSON (%v):\n%s", err, out)
	}
	if doc.Test != Name || len(doc.Results) != 2 || doc.Results[0].Role != "client" || doc.Results[1].Role != "server" {
		t.Fatalf("JSON: %+v", doc)
	}
	for _, r := range doc.Results {
		if r.Connections != 5 || len(r.Steps) == 0 {
			t.Errorf("JSON result %+v", r)
		}
	}
	if fi, err := os.Stat(prof); err != nil || fi.Size() == 0 {
		t.Errorf("--cpuprofile wrote no profile: %v", err)
	}
	f, err := os.Open(csvFile)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatalf("CSV: %v", err)
	}
	steps := len(doc.Results[0].Steps) + len(doc.Results[1].Steps)
	if len(rows) != 1+steps || rows[0][0] != "role" || rows[1][0] != "client" || rows[len(rows)-1][0] != "server" {
		t.Errorf("CSV has %d rows (want a header and %d): %q", len(rows), steps, rows)
	}
}

// A client with nobody listening on its port fails with the peer's
// rejection, not a hang.
func TestNoServer(t *testing.T) {
	rc, out, errOut := call("-d", "emu0", "-p", "1", "-c", "2", "--peer-timeout", "5s", "127.0.0.1")
	if rc != ExitError || out != "" || !strings.Contains(errOut, "reject") {
		t.Errorf("exit %d, stdout %q, stderr %q", rc, out, errOut)
	}
}

// TestEmulatorKeepsProcs: a run on the emulator leaves the process's
// GOMAXPROCS as it was (the choice for kernel devices is cli.Procs's,
// tested there).
func TestEmulatorKeepsProcs(t *testing.T) {
	t.Setenv("GOMAXPROCS", "")
	before := runtime.GOMAXPROCS(0)
	if rc, _, errOut := call("--loopback", "-c", "2"); rc != ExitOK {
		t.Fatalf("loopback: exit %d: %s", rc, errOut)
	}
	if got := runtime.GOMAXPROCS(0); got != before {
		t.Errorf("GOMAXPROCS %d after an emulator run, was %d", got, before)
	}
}
