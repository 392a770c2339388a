package guest

import (
	"reflect"
	"regexp"
	"testing"
)

// The summary of a test binary's -test.v output: leaf tests only, with the
// first lines each failed or skipped one logged.
func TestSummarize(t *testing.T) {
	out := `=== RUN   TestConformance
=== RUN   TestConformance/rc
=== RUN   TestConformance/rc/send
--- PASS: TestConformance/rc/send (0.01s)
=== RUN   TestConformance/rc/atomic
    suite.go:12: atomics: not supported
    suite.go:13: by the device
--- SKIP: TestConformance/rc/atomic (0.00s)
=== RUN   TestConformance/ud
    ud.go:40: got 3 completions, want 4
--- FAIL: TestConformance/ud (0.20s)
--- FAIL: TestConformance/rc (0.02s)
--- FAIL: TestConformance (0.30s)
=== RUN   TestKernelGIDTable
--- PASS: TestKernelGIDTable (0.01s)
FAIL
`
	s := summarize(out)
	if want := map[string]int{"PASS": 2, "SKIP": 1, "FAIL": 1}; !reflect.DeepEqual(s.count, want) {
		t.Errorf("counts %v, want %v", s.count, want)
	}
	if want := []string{"TestConformance/ud: ud.go:40: got 3 completions, want 4"}; !reflect.DeepEqual(s.failed, want) {
		t.Errorf("failed %q, want %q", s.failed, want)
	}
	if want := []string{"TestConformance/rc/atomic: suite.go:12: atomics: not supported | suite.go:13: by the device"}; !reflect.DeepEqual(s.skipped, want) {
		t.Errorf("skipped %q, want %q", s.skipped, want)
	}
	if s.status["TestConformance"] != "FAIL" || s.status["TestKernelGIDTable"] != "PASS" {
		t.Errorf("status %v", s.status)
	}
	if s := summarize(""); len(s.order) != 0 || len(s.count) != 0 {
		t.Errorf("empty output: %+v", s)
	}
}

// Result rows of a perftest output: after the column header, a size and
// at least three more fields.
func TestRows(t *testing.T) {
	out := ` RDMA_Write BW Test
 Number of qps   : 1
---------------------------------------------------------------------------------------
 #bytes     #iterations    BW peak[MiB/sec]    BW average[MiB/sec]   MsgRate[Mpps]
 65536      200              120.50             118.25               0.001892
---------------------------------------------------------------------------------------
`
	if !hasRow(out) {
		t.Fatal("no row found")
	}
	if got := field(out, 4); got != "118.25" {
		t.Errorf("field 4 = %q", got)
	}
	if got := field(out, 9); got != "" {
		t.Errorf("field 9 = %q, want none", got)
	}
	if hasRow(" #bytes #iterations\n") || hasRow(" 1024 200\n") {
		t.Error("a header alone, or numbers without a header, are not rows")
	}
	if got := lastLine("a\n b \n\n"); got != "b" {
		t.Errorf("lastLine = %q", got)
	}
}

func TestMedian(t *testing.T) {
	for _, c := range []struct {
		v    []float64
		want float64
	}{{nil, 0}, {[]float64{3}, 3}, {[]float64{3, 1, 2}, 2}, {[]float64{4, 1, 3, 2}, 2.5}} {
		if got := median(c.v); got != c.want {
			t.Errorf("median(%v) = %v, want %v", c.v, got, c.want)
		}
	}
}

// A pair whose server never listens fails with that reason, within the
// listen timeout, and leaves no process behind.
func TestPairServerExits(t *testing.T) {
	defer func(p int) { *port = p }(*port)
	*port = 1 // nothing listens on port 1 of a test machine
	r := pair{server: "/bin/false", client: "/bin/true"}.run()
	if r.err == nil || !regexpMatch(`server exited \(exit 1\) before listening`, r.err.Error()) {
		t.Errorf("error %v, want the server's early exit", r.err)
	}
}

func regexpMatch(pattern, s string) bool { return regexp.MustCompile(pattern).MatchString(s) }

// ibv_devinfo -v's lines as devinfoAttrs keys them: per port, blanks out
// of keys, values with colons kept whole.
func TestDevinfoAttrs(t *testing.T) {
	out := `hca_id:	vmw_pvrdma0
	transport:			InfiniBand (0)
	node_guid:			5054:00ff:fe77:0002
	max_qp:				32768
		port:	1
			state:			PORT_ACTIVE (4)
			GID[  0]:		fe80:0000:0000:0000:5054:00ff:fe77:0002, RoCE v2
`
	want := map[string]string{
		"transport":     "InfiniBand (0)",
		"node_guid":     "5054:00ff:fe77:0002",
		"max_qp":        "32768",
		"port 1/state":  "PORT_ACTIVE (4)",
		"port 1/GID[0]": "fe80:0000:0000:0000:5054:00ff:fe77:0002, RoCE v2",
	}
	if got := devinfoAttrs(out); !reflect.DeepEqual(got, want) {
		t.Errorf("got %q\nwant %q", got, want)
	}
}
