package main

import (
	"os"

	"github.com/pvperf/pvperf/internal/cli"
)

func main() {
	os.Exit(cli.Main("atomic_lat", os.Args[1:], os.Stdout, os.Stderr))
}
