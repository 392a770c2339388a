// Command send_bw is pvperf's drop-in replacement for perftest's ib_send_bw: the
// same options, defaults, messages and output. Run it without a host to
// start a server, with the server's host to run the test against it.
package main

import (
	"os"

	"github.com/pvperf/pvperf/internal/cli"
)

func main() {
	os.Exit(cli.Main("send_bw", os.Args[1:], os.Stdout, os.Stderr))
}
