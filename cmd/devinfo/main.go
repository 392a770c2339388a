// Command devinfo lists the RDMA devices pvperf can use, kernel and
// emulated, with their attributes, ports and GID tables, in the manner of
// ibv_devinfo -v and show_gids. -d selects a device, -v prints every
// attribute.
package main

import (
	"os"

	"github.com/pvperf/pvperf/internal/cli"
)

func main() {
	os.Exit(cli.DevInfo(os.Args[1:], os.Stdout, os.Stderr))
}
