package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestMain runs main instead of the tests when the test binary is started
// by TestExitStatus below.
func TestMain(m *testing.M) {
	if os.Getenv("PVPERF_TEST_RUN_MAIN") == "1" {
		main()
		return
	}
	os.Exit(m.Run())
}

// TestExitStatus runs the program as perftest's users do, on command lines
// that end before the benchmark: -V and an invalid flag exit with status 1.
func TestExitStatus(t *testing.T) {
	for _, c := range []struct {
		args           []string
		stdout, stderr string // prefixes
	}{
		{[]string{"-V"}, "Version: 6.29 (pvperf devel)\n", ""},
		{[]string{"--bogus-flag"}, "Usage:\n  write_bw ", "write_bw: unrecognized option '--bogus-flag'\n"},
	} {
		cmd := exec.Command(os.Args[0], c.args...)
		cmd.Env = append(os.Environ(), "PVPERF_TEST_RUN_MAIN=1")
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 1 {
			t.Errorf("%v: %v, want exit status 1", c.args, err)
		}
		if !strings.HasPrefix(stdout.String(), c.stdout) || !strings.HasPrefix(stderr.String(), c.stderr) {
			t.Errorf("%v: stdout %q, stderr %q", c.args, stdout.String(), stderr.String())
		}
	}
}
