package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func call(argv ...string) (int, string, string) {
	var o, e bytes.Buffer
	rc := run(argv, &o, &e)
	return rc, o.String(), e.String()
}

func TestDispatchByName(t *testing.T) {
	// -V prints the perftest protocol version of the test that runs.
	for _, argv := range [][]string{
		{"/usr/bin/ib_send_lat", "-V"},
		{"send_lat", "-V"},
		{"pvperf", "send_lat", "-V"},
		{"pvperf", "ib_send_lat", "-V"},
	} {
		_, out, errOut := call(argv...)
		if !strings.Contains(out+errOut, "Version: 6.29") {
			t.Errorf("%q: no perftest version in %q", argv, out+errOut)
		}
	}
	// Under perftest's name, perftest's version line alone, as perftest
	// prints it (and with its exit status, 1).
	if rc, out, _ := call("/usr/bin/ib_write_bw", "-V"); rc != 1 || out != "Version: 6.29\n" {
		t.Errorf("ib_write_bw -V: exit %d, stdout %q, want 1 and %q", rc, out, "Version: 6.29\n")
	}
	// A test's usage and its parser's messages name the program as it
	// was invoked, as perftest's name their argv[0].
	_, out, errOut := call("./ib/ib_read_bw", "-h")
	if !strings.HasPrefix(out, "Usage:\n  ./ib/ib_read_bw            start a server and wait for connection\n  ./ib/ib_read_bw <host>     connect to server at <host>\n") {
		t.Errorf("./ib/ib_read_bw -h does not name itself:\n%s%s", out, errOut)
	}
	_, out, _ = call("pvperf", "send_lat", "-h")
	if !strings.HasPrefix(out, "Usage:\n  pvperf send_lat            start a server") {
		t.Errorf("pvperf send_lat -h does not name itself:\n%s", out)
	}
	if rc, _, e := call("pvperf", "write_bw", "--no-such-option"); rc == 0 || !strings.HasPrefix(e, "pvperf write_bw: unrecognized option '--no-such-option'\n") {
		t.Errorf("bad option: exit %d, stderr %q", rc, e)
	}
	// Every other command prints pvperf's version with -V and
	// --version, on stdout, and exits 0.
	for _, c := range []struct{ argv, want string }{
		{"pvperf cm_setup", "cm_setup (pvperf) devel\n"},
		{"pvperf devinfo", "devinfo (pvperf) devel\n"},
		{"/usr/bin/devinfo", "devinfo (pvperf) devel\n"},
		{"pvperf report", "report (pvperf) devel\n"},
		{"pvperf cluster", "pvperf devel\n"},
		{"pvperf compare", "pvperf devel\n"},
		{"pvperf", "pvperf devel\n"},
	} {
		for _, v := range []string{"-V", "--version"} {
			argv := append(strings.Fields(c.argv), v)
			if rc, o, e := call(argv...); rc != 0 || o != c.want || e != "" {
				t.Errorf("%q: exit %d, stdout %q, stderr %q, want 0 and %q", argv, rc, o, e, c.want)
			}
		}
	}
	if rc, _, e := call("pvperf", "report", "/nonexistent.json"); rc == 0 || !strings.Contains(e, "nonexistent.json") {
		t.Errorf("report of a missing file: exit %d, stderr %q", rc, e)
	}
}

func TestUnknownAndMissingCommand(t *testing.T) {
	if rc, _, e := call("pvperf", "write_bandwidth"); rc != 2 || !strings.Contains(e, `unknown command "write_bandwidth"`) {
		t.Errorf("unknown command: exit %d, stderr %q", rc, e)
	}
	if rc, _, e := call("pvperf"); rc != 2 || !strings.Contains(e, "Usage: pvperf") {
		t.Errorf("no command: exit %d, stderr %q", rc, e)
	}
	if rc, o, _ := call("pvperf", "--help"); rc != 0 || !strings.Contains(o, "atomic_lat") {
		t.Errorf("--help: exit %d, stdout %q", rc, o)
	}
	// Under a name that is no command, the name is blamed.
	if rc, _, e := call("/opt/bin/ib_write_bw.sh", "--loopback"); rc != 2 || !strings.Contains(e, `run as "ib_write_bw.sh", which is no command's name`) {
		t.Errorf("unknown program name: exit %d, stderr %q", rc, e)
	}
}

func TestLinks(t *testing.T) {
	// An option is no directory: nothing is linked in "./-V".
	if rc, _, e := call("pvperf", "links", "-V"); rc != 2 || !strings.Contains(e, `unknown option "-V"`) {
		t.Errorf("links -V: exit %d, stderr %q", rc, e)
	}
	if rc, o, _ := call("pvperf", "links", "--help"); rc != 0 || o != "usage: pvperf links DIR\n" {
		t.Errorf("links --help: exit %d, stdout %q", rc, o)
	}
	dir := t.TempDir()
	if rc, _, e := call("pvperf", "links", dir); rc != 0 {
		t.Fatalf("links: exit %d: %s", rc, e)
	}
	self, _ := os.Executable()
	self, _ = filepath.EvalSymlinks(self)
	for _, n := range []string{"ib_write_bw", "ib_atomic_lat", "send_bw", "devinfo", "report"} {
		got, err := os.Readlink(filepath.Join(dir, n))
		if err != nil || got != self {
			t.Errorf("%s -> %q (%v), want %s", n, got, err, self)
		}
	}
	// Again: links are replaced, other files are left alone.
	if rc, _, e := call("pvperf", "links", dir); rc != 0 {
		t.Fatalf("links again: exit %d: %s", rc, e)
	}
	f := filepath.Join(dir, "ib_read_bw")
	if err := os.Remove(f); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(f, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	// Another tool's link is a conflict too; with one, nothing is
	// linked.
	if err := os.Remove(filepath.Join(dir, "devinfo")); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, "report")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/bin/true", filepath.Join(dir, "report")); err != nil {
		t.Fatal(err)
	}
	if rc, _, e := call("pvperf", "links", dir); rc == 0 || !strings.Contains(e, "not a link to pvperf") ||
		!strings.Contains(e, "ib_read_bw") || !strings.Contains(e, "report") {
		t.Errorf("links over a file and another tool's link: exit %d, stderr %q", rc, e)
	}
	if _, err := os.Lstat(filepath.Join(dir, "devinfo")); err == nil {
		t.Error("links with conflicts linked devinfo")
	}
	if got, _ := os.Readlink(filepath.Join(dir, "report")); got != "/bin/true" {
		t.Errorf("another tool's link replaced: report -> %q", got)
	}
}

// TestLinksBesideOwnCommands: in a directory of the separate commands
// (go build -o bin/ ./cmd/...), links leaves each command as it is and
// links the names that are free.
func TestLinksBesideOwnCommands(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a command")
	}
	dir := t.TempDir()
	cmd := exec.Command("go", "build", "-o", filepath.Join(dir, "devinfo"), "../devinfo")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/devinfo: %v\n%s", err, out)
	}
	// A command built from another module under that name is not ours.
	if err := os.WriteFile(filepath.Join(dir, "report"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if rc, _, e := call("pvperf", "links", dir); rc == 0 || !strings.Contains(e, "report") || strings.Contains(e, "devinfo") {
		t.Errorf("links beside another tool's report: exit %d, stderr %q", rc, e)
	}
	if err := os.Remove(filepath.Join(dir, "report")); err != nil {
		t.Fatal(err)
	}
	rc, o, e := call("pvperf", "links", dir)
	if rc != 0 || !strings.Contains(e, "pvperf's own commands, left as they are: devinfo\n") || strings.Contains(o, "devinfo") {
		t.Fatalf("links beside devinfo: exit %d, stdout %q, stderr %q", rc, o, e)
	}
	if fi, err := os.Lstat(filepath.Join(dir, "devinfo")); err != nil || !fi.Mode().IsRegular() {
		t.Errorf("devinfo replaced: %v %v", fi, err)
	}
	if _, err := os.Readlink(filepath.Join(dir, "ib_write_bw")); err != nil {
		t.Errorf("ib_write_bw not linked: %v", err)
	}
}

// TestPerftestNameText: under a perftest name the text is perftest's
// alone; under pvperf's, pvperf's additions follow it.
func TestPerftestNameText(t *testing.T) {
	t.Chdir(t.TempDir())
	rc, ib, e := call("/usr/local/bin/ib_send_lat", "--loopback", "-n", "200")
	if rc != 0 {
		t.Fatalf("ib_send_lat: exit %d: %s", rc, e)
	}
	rc, pv, e := call("send_lat", "--loopback", "-n", "200")
	if rc != 0 {
		t.Fatalf("send_lat: exit %d: %s", rc, e)
	}
	const extra = "Latency percentiles[usec]"
	if strings.Contains(ib, extra) || !strings.Contains(pv, extra) {
		t.Errorf("percentiles under ib_send_lat: %v, under send_lat: %v; want false, true",
			strings.Contains(ib, extra), strings.Contains(pv, extra))
	}
}
