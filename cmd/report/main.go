package main

import (
	"io"
	"os"

	"github.com/pvperf/pvperf/internal/reportcli"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int { return reportcli.Run(args, stdout, stderr) }
