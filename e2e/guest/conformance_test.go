package guest

import (
	"context"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

var conformanceTimeout = flag.Duration("guest.conformance-timeout", 6*time.Minute, "how long the conformance suite may run")

// TestConformance runs the verbs conformance suite of verbs/uverbs (and
// its kernel tests) on the device, from the test binary built for it
// (uverbs.test next to pvperf's commands), and reports every leaf test
// that failed or skipped with the first lines it logged.
func TestConformance(t *testing.T) {
	needDevice(t)
	bin := filepath.Join(*pvperfDir, "uverbs.test")
	if !exists(bin) {
		t.Fatalf("%s not found: build it with go test -c ./verbs/uverbs", bin)
	}
	tmo, ok := budget(*conformanceTimeout)
	if !ok || tmo < 30*time.Second {
		t.Fatalf("not run: the time budget (%s) is spent", *budgetFlag)
	}
	s := runTestBinary(t, bin, "TestConformance|TestKernel", tmo, "RDMA_TEST_DEVICE="+*device)
	if s.status["TestConformance"] == "SKIP" {
		t.Errorf("TestConformance skipped although %s exists: %s", *device, s.reason["TestConformance"])
	}
}

// runTestBinary runs the tests of a test binary that match run, with env
// added to the environment and tmo to run, logs its output (prefixed by
// its name) and counts, and fails t for each failed leaf test, a time-out,
// a failure to run or an output without results. It returns the summary.
func runTestBinary(t *testing.T, bin, run string, tmo time.Duration, env ...string) summary {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), tmo)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "-test.run", run, "-test.v", "-test.timeout", (tmo - tmo/10).String())
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	// Its lines are prefixed, so that its own result lines are not taken
	// for this binary's.
	name := filepath.Base(bin)
	var b strings.Builder
	for _, l := range strings.Split(strings.TrimRight(string(out), "\n"), "\n") {
		b.WriteString("  " + name + "| " + l + "\n")
	}
	t.Logf("%s -test.run '%s' -test.v\n%s", bin, run, b.String())
	s := summarize(string(out))
	t.Logf("%s: %d passed, %d failed, %d skipped (tests without subtests)", name, s.count["PASS"], s.count["FAIL"], s.count["SKIP"])
	for _, l := range s.skipped {
		t.Log("  SKIP", l)
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
	return s
}

// summary is what a test binary's -test.v output says: every result, and
// for the leaf tests (those without subtests) the counts and the first
// lines each failed or skipped one logged.
type summary struct {
	order           []string
	status, reason  map[string]string
	count           map[string]int
	failed, skipped []string
}

var (
	resultLine = regexp.MustCompile(`^\s*--- (PASS|FAIL|SKIP): (\S+)`)
	runLine    = regexp.MustCompile(`^=== (RUN|CONT|NAME|PAUSE) +(\S+)`)
)

func summarize(out string) summary {
	s := summary{status: map[string]string{}, reason: map[string]string{}, count: map[string]int{}}
	logged := map[string][]string{}
	cur := ""
	for _, l := range strings.Split(out, "\n") {
		if m := runLine.FindStringSubmatch(l); m != nil {
			cur = m[2]
			continue
		}
		if m := resultLine.FindStringSubmatch(l); m != nil {
			s.status[m[2]] = m[1]
			s.order = append(s.order, m[2])
			cur = m[2]
			continue
		}
		if cur != "" && strings.HasPrefix(l, " ") && strings.TrimSpace(l) != "" && len(logged[cur]) < 3 {
			logged[cur] = append(logged[cur], strings.TrimSpace(l))
		}
	}
	parent := map[string]bool{}
	for _, name := range s.order {
		for i := strings.LastIndex(name, "/"); i > 0; i = strings.LastIndex(name[:i], "/") {
			parent[name[:i]] = true
		}
	}
	for _, name := range s.order {
		r := strings.Join(logged[name], " | ")
		if r == "" {
			r = "(no message)"
		}
		s.reason[name] = r
		if parent[name] {
			continue
		}
		st := s.status[name]
		s.count[st]++
		switch st {
		case "FAIL":
			s.failed = append(s.failed, name+": "+r)
		case "SKIP":
			s.skipped = append(s.skipped, name+": "+r)
		}
	}
	return s
}
