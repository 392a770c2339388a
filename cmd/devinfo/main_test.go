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

func TestExitStatus(t *testing.T) {
	run := func(emuConfig string, args ...string) (int, string, string) {
		cmd := exec.Command(os.Args[0], args...)
		cmd.Env = append(os.Environ(), "PVPERF_TEST_RUN_MAIN=1", "PVPERF_EMU="+emuConfig)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		var ee *exec.ExitError
		switch {
		case err == nil:
			return 0, stdout.String(), stderr.String()
		case errors.As(err, &ee):
			return ee.ExitCode(), stdout.String(), stderr.String()
		}
		t.Fatal(err)
		return 0, "", ""
	}
	if s, out, _ := run("netdev=lo"); s != 0 || !strings.HasPrefix(out, "hca_id:\temu0\n") {
		t.Errorf("devinfo: status %d, output %q", s, out)
	}
	if s, _, errOut := run("off"); s != 1 || errOut != "No IB devices found\n" {
		t.Errorf("no device: status %d, stderr %q", s, errOut)
	}
	if s, _, errOut := run("netdev=lo", "-d", "nope"); s != 1 || errOut != "IB device 'nope' wasn't found\n" {
		t.Errorf("-d nope: status %d, stderr %q", s, errOut)
	}
}
