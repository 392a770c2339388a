package guest

import (
	"flag"
	"path/filepath"
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
