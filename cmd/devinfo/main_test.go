package main

import (
	"strings"
	"testing"

	"github.com/pvperf/pvperf/internal/cli/clitest"
)

func TestMain(m *testing.M) { clitest.Main(m, main) }

func TestExitStatus(t *testing.T) {
	run := func(emuConfig string, args ...string) (int, string, string) {
		t.Setenv("PVPERF_EMU", emuConfig)
		stdout, stderr, status := clitest.Run(t, args...)
		return status, stdout, stderr
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
