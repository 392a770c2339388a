package guest

import (
	"context"
	"flag"
	"os"
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
	ctx, cancel := context.WithTimeout(context.Background(), tmo)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "-test.run", "TestKernel", "-test.v", "-test.timeout", (tmo - 10*time.Second).String())
	cmd.Env = append(os.Environ(), "RDMACM_TEST_ADDR="+*rdmacmAddr)
	out, err := cmd.CombinedOutput()
	var b strings.Builder
	for _, l := range strings.Split(strings.TrimRight(string(out), "\n"), "\n") {
		b.WriteString("  rdmacm.test| " + l + "\n")
	}
	t.Logf("%s -test.run TestKernel -test.v\n%s", bin, b.String())
	s := summarize(string(out))
	for name, st := range s.status {
		if st == "SKIP" {
			t.Errorf("%s skipped: %s", name, s.reason[name])
		}
	}
	for _, l := range s.failed {
		t.Error("FAIL", l)
	}
	switch {
	case ctx.Err() != nil:
		t.Errorf("timed out after %s", tmo)
	case err != nil && len(s.failed) == 0:
		t.Errorf("%s: %v", bin, err)
	case len(s.order) == 0:
		t.Error("no test result in the output")
	}
}
