package cli

import (
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/pvperf/pvperf/perftest"
)

// TestSyntax checks getopt's and perftest's ways of writing values: each
// command line must give the same configuration as the plain one.
func TestSyntax(t *testing.T) {
	cases := []struct {
		test, args, same string
	}{
		// Numbers: strtol(..., 0).
		{"write_bw", "-s 0x400 host", "-s 1024 host"},
		{"write_bw", "-s 0X400 host", "-s 1024 host"},
		{"write_bw", "-s 02000 host", "-s 1024 host"},
		{"write_bw", "-p 0x4853 host", "-p 18515 host"},
		{"write_bw", "-p 044123 host", "-p 18515 host"},
		{"write_bw", "-p +18515 host", "-p 18515 host"},
		{"write_bw", "-p ' 18515' host", "-p 18515 host"},
		{"write_bw", "--gid-index= host", "-x 0 host"},
		{"write_bw", "-q 0x10 host", "-q 16 host"},
		{"write_bw", "-n 0x2710 host", "-n 10000 host"},
		// Sizes: K and M suffixes, strtol ignoring what follows the digits.
		{"write_bw", "-s 64K host", "-s 65536 host"},
		{"write_bw", "-s 1M host", "-s 1048576 host"},
		{"write_bw", "-s 0x2K host", "-s 2048 host"},
		{"write_bw", "-s 64k host", "-s 64 host"},
		{"write_bw", "-s 4KB host", "-s 4 host"},
		{"write_bw", "-s 1KM host", "-s 1048576 host"},
		// Short options: bundles, attached values, a value that looks like
		// an option.
		{"write_bw", "-aF host", "-a -F host"},
		{"write_bw", "-Fas4096 host", "-F -a -s 4096 host"},
		{"write_bw", "-s4096 host", "-s 4096 host"},
		{"send_bw", "-bNe host", "-b -N -e host"},
		{"write_bw", "-d -s host", "--ib-dev=-s host"},
		// Long options: "=value" or the next word, abbreviations, '_' or '-'.
		{"write_bw", "--size=4096 host", "-s 4096 host"},
		{"write_bw", "--size 4096 host", "-s 4096 host"},
		{"write_bw", "--siz=4096 host", "-s 4096 host"},
		{"write_bw", "--siz 4096 host", "-s 4096 host"},
		{"write_bw", "--report_gbits host", "--report-gbits host"},
		{"write_bw", "--report_g host", "--report_gbits host"},
		{"write_bw", "--report-g host", "--report_gbits host"},
		{"write_bw", "--report-b host", "--report-both host"},
		{"write_bw", "--report_both host", "--report-both host"},
		{"write_bw", "--report-gbits host", "--report_gbits host"},
		{"write_bw", "--perform host", "--perform_warm_up host"},
		{"write_bw", "--tx_depth=10 host", "-t 10 host"},
		{"write_bw", "--ib_dev=emu0 host", "-d emu0 host"},
		{"write_bw", "--gid_index=2 --qp_timeout=3 host", "-x 2 -u 3 host"},
		{"write_bw", "--bidir host", "-b host"},
		{"write_bw", "--connection=UC host", "-c UC host"},
		{"write_bw", "--out-json-file=a.json host", "--out_json_file=a.json host"},
		{"write_bw", "--out_json host", "--out-json host"},
		{"write_bw", "--pe host", "--perform_warm_up host"},
		{"write_bw", "--pee=1s host", "--peer-timeout=1s host"},
		{"write_bw", "--peer_timeout=1s host", "--peer-timeout=1s host"},
		{"write_bw", "--loop", "--loopback"},
		{"write_lat", "--report-histogram", "-H"},
		{"write_lat", "--report_histogram", "-H"},
		{"write_lat", "--report-histogrm", "-H"},
		{"write_lat", "--report-histo", "-H"},
		{"write_lat", "--report-cy", "-C"},
		{"atomic_bw", "--atomic=CMP_AND_SWAP host", "-A CMP_AND_SWAP host"},
		{"write_bw", "--write_w host", "--write_with_imm host"},
		{"write_bw", "--CPU-freq host", "-F host"},
		{"write_bw", "--CPU_freq host", "-F host"},
		{"write_bw", "--noPeak host", "-N host"},
		// The host anywhere; "--" ends the options.
		{"write_bw", "host -s 4096", "-s 4096 host"},
		{"write_bw", "-s 4096 host -a", "-a -s 4096 host"},
		{"write_bw", "-a -- host", "-a host"},
		{"write_bw", "-- -host", "--ib-dev=x -- -host"},
		{"write_bw", "-", "--ib-dev=x -"},
	}
	for _, c := range cases {
		t.Run(c.test+" "+c.args, func(t *testing.T) {
			r := parseArgs(t, c.test, splitQuoted(c.args))
			if r.err != nil {
				t.Fatalf("%v\n%s%s", r.err, r.stdout, r.stderr)
			}
			w := parseArgs(t, c.test, splitQuoted(c.same))
			if w.err != nil {
				t.Fatalf("reference %q: %v", c.same, w.err)
			}
			got, want := r.opts, w.opts
			if strings.Contains(c.same, "--ib-dev=x") {
				got.Device = "x"
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("config\n%+v\nwant (as %q)\n%+v", got, c.same, want)
			}
			if r.stdout != w.stdout || r.stderr != w.stderr {
				t.Errorf("output %q %q, want %q %q", r.stdout, r.stderr, w.stdout, w.stderr)
			}
		})
	}
	// The operand after "--" that starts with '-' is the host.
	if r := mustParse(t, "write_bw", "-- -host"); r.opts.Server != "-host" {
		t.Errorf("server %q", r.opts.Server)
	}
	if r := mustParse(t, "write_bw", "-"); r.opts.Server != "-" {
		t.Errorf("server %q", r.opts.Server)
	}
	if r := mustParse(t, "write_bw", "-s 4096 host"); r.opts.Server != "host" || r.opts.Size != 4096 {
		t.Errorf("server %q size %d", r.opts.Server, r.opts.Size)
	}
	if r := mustParse(t, "write_bw", "-c UC host"); r.opts.Connection != perftest.UC {
		t.Errorf("connection %v", r.opts.Connection)
	}
}

// splitQuoted splits on spaces, keeping 'single quoted' words whole.
func splitQuoted(s string) []string {
	var out []string
	for s != "" {
		s = strings.TrimLeft(s, " ")
		if s == "" {
			break
		}
		if s[0] == '\'' {
			end := strings.IndexByte(s[1:], '\'') + 1
			out = append(out, s[1:end])
			s = s[end+1:]
			continue
		}
		w, rest, _ := strings.Cut(s, " ")
		out = append(out, w)
		s = rest
	}
	return out
}

func TestStrtol(t *testing.T) {
	cases := []struct {
		in   string
		v    int64
		rest string
	}{
		{"0", 0, ""}, {"42", 42, ""}, {"-42", -42, ""}, {"+7", 7, ""}, {"  \t12", 12, ""},
		{"0x1f", 31, ""}, {"0X1F", 31, ""}, {"-0x10", -16, ""}, {"017", 15, ""}, {"08", 0, "8"},
		{"0x", 0, "x"}, {"0xg", 0, "xg"}, {"12ab", 12, "ab"}, {"", 0, ""}, {"abc", 0, "abc"},
		{"-", 0, "-"}, {" ", 0, " "}, {"9223372036854775807", math.MaxInt64, ""},
		{"9223372036854775808", math.MaxInt64, ""}, {"-9223372036854775808", math.MinInt64, ""},
		{"-9223372036854775809", math.MinInt64, ""}, {"99999999999999999999x", math.MaxInt64, "x"},
	}
	for _, c := range cases {
		v, rest := strtol(c.in)
		if v != c.v || rest != c.rest {
			t.Errorf("strtol(%q) = %d, %q; want %d, %q", c.in, v, rest, c.v, c.rest)
		}
	}
	for in, want := range map[string]float64{"1.5": 1.5, "2e3x": 2000, " 7": 7, "x": 0, "": 0, "-1": -1, "1_0": 1} {
		if got := strtof(in); got != want {
			t.Errorf("strtof(%q) = %v, want %v", in, got, want)
		}
	}
}

// TestOptionTable checks the option table against perftest's getopt string
// and pflag's needs.
func TestOptionTable(t *testing.T) {
	tbl := options()
	seen := map[string]string{}
	for _, n := range tbl.names {
		norm := normalizeName(n.name)
		if prev, ok := seen[norm]; ok && tbl.byKey[prev] != n.o {
			t.Errorf("%s and %s are the same name once normalised", prev, n.name)
		}
		seen[norm] = n.name
	}
	for i := 0; i < len(shortOpts); i++ {
		c := shortOpts[i]
		if c == ':' {
			continue
		}
		o := tbl.short[c]
		if o == nil {
			t.Errorf("-%c has no option", c)
			continue
		}
		takes := i+1 < len(shortOpts) && shortOpts[i+1] == ':'
		if o.arg != takes {
			t.Errorf("-%c/--%s: arg %v, getopt says %v", c, o.long, o.arg, takes)
		}
	}
	for _, o := range tbl.opts {
		if (o.set == nil) == (o.unsupported == "") {
			t.Errorf("--%s: set and unsupported", o.long)
		}
		if o.short != 0 && !strings.ContainsRune(shortOpts, rune(o.short)) {
			t.Errorf("--%s: short -%c is not in perftest's getopt string", o.long, o.short)
		}
	}
	if len(tbl.opts) < 155 {
		t.Errorf("%d options: perftest has 156", len(tbl.opts))
	}
	// Parsing the same table twice is independent (no state in it).
	a := mustParse(t, "write_bw", "-s 8 host")
	b := mustParse(t, "write_bw", "-s 8 host")
	if !reflect.DeepEqual(a.opts, b.opts) {
		t.Error("two parses differ")
	}
}

func TestUnknownTest(t *testing.T) {
	if _, err := Parse("ping", nil, nil, nil); err == nil || !strings.Contains(err.Error(), "unknown test") {
		t.Errorf("Parse(ping) = %v", err)
	}
	if got := Tests(); len(got) != 8 || got[0] != "send_bw" {
		t.Errorf("Tests() = %v", got)
	}
}
