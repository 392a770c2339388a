package clitest

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
)

const envRunMain = "PVPERF_TEST_RUN_MAIN"

// Main is a command's TestMain: it runs main when the binary was started
// by [Run], the tests otherwise.
func Main(m *testing.M, main func()) {
	if os.Getenv(envRunMain) == "1" {
		main()
		return
	}
	os.Exit(m.Run())
}

// Run runs the command under test with args and returns its output and
// exit status (-1 when it could not be started or was killed).
func Run(t *testing.T, args ...string) (stdout, stderr string, status int) {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), envRunMain+"=1")
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		status = 0
	case errors.As(err, &ee):
		status = ee.ExitCode()
	default:
		t.Fatalf("run %v: %v", args, err)
	}
	return out.String(), errOut.String(), status
}

// ExitStatus checks a perftest test command (name is "write_bw", ...) on
// command lines that end before the benchmark, as perftest's users run
// them: -V and an invalid flag exit with status 1; the usage text and the
// parser's message name the program as it was invoked (its argv[0], here
// the test binary's path), as perftest's do.
func ExitStatus(t *testing.T, name string) {
	t.Helper()
	prog := os.Args[0]
	for _, c := range []struct {
		args           []string
		stdout, stderr string // prefixes
	}{
		{[]string{"-V"}, "Version: 6.29 (pvperf devel)\n", ""},
		{[]string{"--bogus-flag"}, "Usage:\n  " + prog + "            start a server", prog + ": unrecognized option '--bogus-flag'\n"},
	} {
		stdout, stderr, status := Run(t, c.args...)
		if status != 1 {
			t.Errorf("%s %v: exit status %d, want 1", name, c.args, status)
		}
		if !strings.HasPrefix(stdout, c.stdout) || !strings.HasPrefix(stderr, c.stderr) {
			t.Errorf("%s %v: stdout %q, stderr %q", name, c.args, stdout, stderr)
		}
	}
}
