package main

import (
	"os"

	"github.com/pvperf/pvperf/internal/cli"
)

func main() {
	os.Exit(cli.Main("write_bw", os.Args[1:], os.Stdout, os.Stderr))
}
