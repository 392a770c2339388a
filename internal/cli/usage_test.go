package cli

import (
	"errors"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/pvperf/pvperf/internal/version"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata")

// TestHelp checks -h for every test against testdata/usage_<test>.golden
// (go test -run TestHelp -update rewrites them), and that it names every
// option relevant to the test and none of the others.
func TestHelp(t *testing.T) {
	for _, spec := range testSpecs {
		t.Run(spec.name, func(t *testing.T) {
			r := parse(t, spec.name, "-h")
			if !errors.Is(r.err, ErrHelp) || r.stderr != "" {
				t.Fatalf("-h: err %v, stderr %q", r.err, r.stderr)
			}
			for _, args := range []string{"--help", "--he", "-ah", "host -h"} {
				if o := parse(t, spec.name, args); !errors.Is(o.err, ErrHelp) || o.stdout != r.stdout {
					t.Errorf("%s: err %v, or another text", args, o.err)
				}
			}
			golden := filepath.Join("testdata", "usage_"+spec.name+".golden")
			if *update {
				if err := os.WriteFile(golden, []byte(r.stdout), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test -run TestHelp -update)", err)
			}
			if r.stdout != string(want) {
				t.Errorf("usage differs from %s (go test -run TestHelp -update rewrites it):\n%s", golden, r.stdout)
			}
			if !strings.HasPrefix(r.stdout, "Usage:\n  "+spec.name+"            start a server and wait for connection\n  "+
				spec.name+" <host>     connect to server at <host>\n\nNote: Some options must match") {
				t.Errorf("usage does not start like perftest's:\n%s", r.stdout)
			}

			for _, o := range options().opts {
				long := mentions(r.stdout, "--"+o.long)
				switch {
				case o.other || o.relevant(spec):
					if !long {
						t.Errorf("usage does not mention --%s", o.long)
					}
					if o.short != 0 && !strings.Contains(r.stdout, "-"+string(o.short)+",") &&
						!strings.Contains(r.stdout, "-"+string(o.short)+"/--") {
						t.Errorf("usage does not mention -%c", o.short)
					}
					if o.unsupported != "" && !o.other && !lineHas(r.stdout, "--"+o.long, "[not supported by pvperf: "+o.unsupported+"]") {
						t.Errorf("usage does not mark --%s as unsupported", o.long)
					}
					if o.noop != "" && !lineHas(r.stdout, "--"+o.long, "[no effect in pvperf") {
						t.Errorf("usage does not mark --%s as ignored", o.long)
					}
				case long:
					t.Errorf("usage mentions --%s, which is not for %s", o.long, spec.name)
				}
			}
			for _, s := range []string{"--loopback", "--peer-timeout", "pvperf options:"} {
				if !strings.Contains(r.stdout, s) {
					t.Errorf("usage lacks %q", s)
				}
			}
		})
	}
}

// mentions reports whether text names the option s (not merely a longer
// option that starts with s).
func mentions(text, s string) bool {
	re := regexp.MustCompile(regexp.QuoteMeta(s) + `([^A-Za-z0-9_-]|$)`)
	return re.MatchString(text)
}

// lineHas reports whether a line naming option s contains mark.
func lineHas(text, s, mark string) bool {
	for line := range strings.Lines(text) {
		if mentions(line, s) && strings.Contains(line, mark) {
			return true
		}
	}
	return false
}

func TestVersion(t *testing.T) {
	for _, args := range []string{"-V", "--version", "--vers", "-aV", "host -V"} {
		r := parse(t, "send_lat", args)
		if !errors.Is(r.err, ErrVersion) || r.stderr != "" {
			t.Errorf("%s: err %v, stderr %q", args, r.err, r.stderr)
		}
		if want := "Version: 6.29 (pvperf devel)\n"; r.stdout != want {
			t.Errorf("%s: %q, want %q", args, r.stdout, want)
		}
		// A script reading perftest's "Version: 6.29" finds it.
		if f := strings.Fields(r.stdout); len(f) < 2 || f[0] != "Version:" || f[1] != "6.29" {
			t.Errorf("%s: fields %q", args, f)
		}
	}
	// With perftest's text alone, perftest's line alone.
	if r := parse(t, "write_bw", "--perftest_output -V"); !errors.Is(r.err, ErrVersion) || r.stdout != "Version: 6.29\n" {
		t.Errorf("--perftest_output -V: err %v, %q, want %q", r.err, r.stdout, "Version: 6.29\n")
	}
	old := version.Version
	version.Version = "1.2.3"
	defer func() { version.Version = old }()
	if r := parse(t, "write_bw", "-V"); r.stdout != "Version: 6.29 (pvperf 1.2.3)\n" {
		t.Errorf("with Version set: %q", r.stdout)
	}
}
