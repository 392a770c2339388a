package comparecli

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Result rows as perftest 6.06 and pvperf print them.
const (
	bwText = ` #bytes     #iterations    BW peak[MiB/sec]    BW average[MiB/sec]   MsgRate[Mpps]
 65536      1000             47.90               47.46  		   0.000759
---------------------------------------------------------------------------------------
`
	latText = ` #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec] 
 2       5000          9.81           120.15       13.01    	       13.70       	4.08   		29.42   		96.33   
---------------------------------------------------------------------------------------
`
	durText = ` #bytes        #iterations       t_avg[usec]    tps     
 2             2302411          0.65                1534936.52
`
	// pvperf's -D output: a line per second before the result row.
	bwDurText = ` #bytes     #iterations    BW peak[MiB/sec]    BW average[MiB/sec]   MsgRate[Mpps]
   0.00-  1.00 sec  4096          14496400 messages      56626.56 MiB/sec   14.496400 Mpps
   1.00-  2.00 sec  4096          14400000 messages      56250.00 MiB/sec   14.400000 Mpps  (margin, not measured)
 4096       14496400         0.00               56626.56		     14.496400
`
	latDurText = ` #bytes        #iterations       t_avg[usec]    tps     
   0.00-  1.00 sec  2              222039 iterations  t_avg      2.25 usec        222039 tps
 2             222039          2.25                444078.00
`
	infText = ` #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec] 
 2       5000          0.00           inf       inf    	       inf       	-nan   		inf   		inf   
`
)

func TestValue(t *testing.T) {
	for _, c := range []struct {
		text, metric string
		want         float64
		label        string
	}{
		{bwText, "auto", 47.46, "BW average[MiB/sec]"},
		{bwText, "rate", 0.000759, "MsgRate[Mpps]"},
		{latText, "auto", 13.01, "t_typical[usec]"},
		{latText, "avg", 13.70, "t_avg[usec]"},
		{durText, "auto", 0.65, "t_avg[usec]"},
		{durText, "tps", 1534936.52, "tps"},
		{bwDurText, "auto", 56626.56, "BW average[MiB/sec]"},
		{bwDurText, "rate", 14.4964, "MsgRate[Mpps]"},
		{latDurText, "auto", 2.25, "t_avg[usec]"},
	} {
		v, l, err := value("header\n"+c.text, c.metric)
		if err != nil || v != c.want || l != c.label {
			t.Errorf("%s of %q: %v %q %v, want %v %q", c.metric, c.text[:20], v, l, err, c.want, c.label)
		}
	}
	if _, _, err := value(infText, "auto"); !errors.Is(err, errUnusable) {
		t.Errorf("inf: %v, want errUnusable", err)
	}
	if _, _, err := value(bwText, "typical"); err == nil || errors.Is(err, errUnusable) {
		t.Errorf("t_typical of a BW row: %v", err)
	}
	if _, _, err := value("Couldn't connect to 127.0.0.1:18515\n", "auto"); err == nil {
		t.Error("no row: no error")
	}
}

func TestUsage(t *testing.T) {
	for _, args := range [][]string{
		{},
		{"a"},
		{"a", "b", "c", "--", "-s", "2"},
		{"--metric", "speed", "a", "b"},
		{"--rounds", "1", "a", "b"},
		{"--ci", "100", "a", "b"},
		{"a", "b", "--", "-p", "port"},
	} {
		var e bytes.Buffer
		if rc := Main(args, &bytes.Buffer{}, &e); rc != 2 || !strings.Contains(e.String(), "compare: ") {
			t.Errorf("%q: exit %d, stderr %q", args, rc, e.String())
		}
	}
	o, err := parse([]string{"--rounds", "3", "ib_send_lat", "pvperf send_lat", "--", "-s", "2", "-p", "20000"}, &bytes.Buffer{})
	if err != nil || o.port != 20000 || len(o.cand) != 2 || strings.Join(o.args, " ") != "-s 2 -p 20000" {
		t.Errorf("parse: %+v %v", o, err)
	}
}

// TestFailingCommand: a command that fails ends the comparison with
// status 1 and says which.
func TestFailingCommand(t *testing.T) {
	var out, e bytes.Buffer
	rc := Main([]string{"--rounds", "2", "--listen-timeout", "1s", "-p", "1", "/bin/false", "/bin/true", "--", "-x"}, &out, &e)
	if rc != 1 || !strings.Contains(e.String(), "round 1, /bin/false: server exited before listening") {
		t.Errorf("exit %d, stderr %q", rc, e.String())
	}
}

// TestJSONFileChecked: a --json file that cannot be written stops the
// comparison before its first round (the commands would fail: /bin/false),
// with status 2.
func TestJSONFileChecked(t *testing.T) {
	var out, e bytes.Buffer
	bad := filepath.Join(t.TempDir(), "no", "such", "dir", "c.json")
	rc := Main([]string{"--json", bad, "--rounds", "2", "--listen-timeout", "1s", "-p", "1", "/bin/false", "/bin/false"}, &out, &e)
	if rc != 2 || !strings.Contains(e.String(), "compare: --json: open "+bad+": no such file or directory") || strings.Contains(e.String(), "round") {
		t.Errorf("exit %d, stderr %q", rc, e.String())
	}
}

// TestFailingCommandSaysWhy: the message of a command that fails keeps
// its diagnostic, not only perftest's closing line after it.
func TestFailingCommandSaysWhy(t *testing.T) {
	script := filepath.Join(t.TempDir(), "fails")
	body := "#!/bin/sh\necho ' Size 70000000000 is out of range' >&2\necho ' Parser function exited with Error' >&2\nexit 1\n"
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	var out, e bytes.Buffer
	rc := Main([]string{"--rounds", "2", "--listen-timeout", "1s", "-p", "1", script, "/bin/true"}, &out, &e)
	if rc != 1 || !strings.Contains(e.String(), "Size 70000000000 is out of range; Parser function exited with Error") {
		t.Errorf("exit %d, stderr %q", rc, e.String())
	}
}

// TestBadOptionSaysWhich: a command refusing an option names it on its
// standard error and prints its usage on standard output, as perftest's
// tests and pvperf's do: the message keeps the option's line.
func TestBadOptionSaysWhich(t *testing.T) {
	script := filepath.Join(t.TempDir(), "refuses")
	body := "#!/bin/sh\n" +
		"echo \"$0: unrecognized option '--bogus'\" >&2\n" +
		"echo ' Invalid Command or flag.' >&2\n" +
		"echo ' Please check command line and run again.' >&2\n" +
		"echo >&2\n" +
		"echo ' Parser function exited with Error' >&2\n" +
		"echo 'Usage:'; echo '  refuses <host>     connect to server at <host>'; echo ' -a, --all  Run sizes from 2 till 2^23'\n" +
		"exit 1\n"
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	var out, e bytes.Buffer
	rc := Main([]string{"--rounds", "2", "--listen-timeout", "1s", "-p", "1", script, "/bin/true", "--", "--bogus"}, &out, &e)
	want := "unrecognized option '--bogus'; Invalid Command or flag.; Please check command line and run again.; Parser function exited with Error"
	if rc != 1 || !strings.Contains(e.String(), want) || strings.Contains(e.String(), "Usage") {
		t.Errorf("exit %d, stderr %q", rc, e.String())
	}
}

// FuzzValue: any text gives a positive finite value with its label, or an
// error; never a panic.
func FuzzValue(f *testing.F) {
	for _, s := range []string{bwText, latText, durText, infText, " #bytes\n 2\n", " #bytes BW average\n 1 2\n"} {
		f.Add(s, "auto")
	}
	f.Add(bwText, "rate")
	f.Add(bwDurText, "auto")
	f.Fuzz(func(t *testing.T, text, metric string) {
		v, label, err := value(text, metric)
		if err == nil && (!(v > 0) || v > 1e300 || label == "") {
			t.Fatalf("value %v %q from %q", v, label, text)
		}
	})
}

// TestDiagnosticLong: a long standard error keeps its first line (the
// problem) and its last three (perftest's closing lines).
func TestDiagnosticLong(t *testing.T) {
	var errb, outb bytes.Buffer
	for i := 1; i <= 7; i++ {
		fmt.Fprintf(&errb, " line %d\n", i)
	}
	outb.WriteString("Usage: x\n")
	if got, want := diagnostic(&errb, &outb), "line 1; ...; line 5; line 6; line 7"; got != want {
		t.Errorf("diagnostic = %q, want %q", got, want)
	}
	errb.Reset()
	outb.WriteString(" a\n b\n c\n d\n")
	if got, want := diagnostic(&errb, &outb), "b; c; d"; got != want {
		t.Errorf("diagnostic without stderr = %q, want %q", got, want)
	}
}
