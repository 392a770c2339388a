package guest

import (
	"flag"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var rdmacmAddr = flag.String("guest.rdmacm", "", "an IP address of the device's network device: the kernel tests of verbs/rdmacm connect to it (none: TestRDMACM skips)")

// TestRDMACM runs the kernel tests of verbs/rdmacm (rdmacm.test next to
// pvperf's commands): connections through the kernel's connection manager
// to -guest.rdmacm, both ends in that process.
func TestRDMACM(t *testing.T) {
	needDevice(t)
	if *rdmacmAddr == "" {
		t.Skip("-guest.rdmacm is not set")
	}
	bin := filepath.Join(*pvperfDir, "rdmacm.test")
	if !exists(bin) {
		t.Fatalf("%s not found: build it with go test -c ./verbs/rdmacm", bin)
	}
	tmo, ok := budget(2 * time.Minute)
	if !ok {
		t.Fatalf("not run: the time budget (%s) is spent", *budgetFlag)
	}
	s := runTestBinary(t, bin, "TestKernel", tmo, "RDMACM_TEST_ADDR="+*rdmacmAddr)
	for _, name := range s.order {
		if s.status[name] == "SKIP" {
			t.Errorf("%s skipped: %s", name, s.reason[name])
		}
	}
}

// cmInterop are the -R and -z configurations pvperf and perftest run against
// each other.
var cmInterop = []struct{ test, opts string }{
	{"write_bw", "-R"}, {"send_bw", "-R"}, {"read_bw", "-R"}, {"send_lat", "-R"}, {"write_lat", "-R"},
	{"send_bw", "-R -c UD"}, {"write_bw", "-R -q 4"},
	// -z: only the out-of-band exchange over rdma_cm (its key layout is
	// the peer version's).
	{"write_bw", "-z"}, {"read_lat", "-z"},
}

// TestRDMACMInterop runs pvperf against perftest with -R, both ways (and
// against -guest.perftest-new's when given), and pvperf against itself,
// then checks that the kernel keeps no id of
// theirs.
func TestRDMACMInterop(t *testing.T) {
	needDevice(t)
	for _, c := range cmInterop {
		for _, dir := range []struct {
			name           string
			server, client string
		}{
			{"pvperf", pv(c.test), pv(c.test)},
			{"pvperf_server", pv(c.test), pt(c.test)},
			{"perftest_server", pt(c.test), pv(c.test)},
			{"pvperf_server_new", pv(c.test), ptNew(c.test)},
			{"perftest_new_server", ptNew(c.test), pv(c.test)},
		} {
			if dir.server == "" || dir.client == "" {
				continue
			}
			t.Run(interopName(c.test, c.opts)+"/"+dir.name, func(t *testing.T) {
				pair{server: dir.server, client: dir.client, args: args(c.opts), serverRow: serverReports(c.test)}.check(t)
			})
		}
	}
	t.Run("no_ids_left", func(t *testing.T) {
		out, err := exec.Command("rdma", "resource", "show", "cm_id").CombinedOutput()
		if err != nil {
			t.Fatalf("rdma resource show cm_id: %v: %s", err, out)
		}
		if s := strings.TrimSpace(string(out)); s != "" {
			t.Errorf("ids left behind:\n%s", s)
		}
	})
}
