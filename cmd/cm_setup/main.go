// Command cm_setup times the setup of RDMA connections through the
// connection manager, step by step (see package cmbench).
package main

import (
	"os"

	"github.com/pvperf/pvperf/internal/setupcli"
)

func main() {
	os.Exit(setupcli.Main(os.Args[1:], os.Stdout, os.Stderr))
}
