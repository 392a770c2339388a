package main

import (
	"testing"

	"github.com/pvperf/pvperf/internal/cli/clitest"
)

func TestMain(m *testing.M) { clitest.Main(m, main) }

// TestExitStatus: -V and an invalid flag exit with status 1, as perftest's.
func TestExitStatus(t *testing.T) { clitest.ExitStatus(t, "atomic_lat") }
