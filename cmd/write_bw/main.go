package main

import (
	"os"

	"github.com/pvperf/pvperf/internal/cli"
)

func main() {
	os.Exit(cli.MainAs("write_bw", os.Args[0], os.Args[1:], os.Stdout, os.Stderr))
}
