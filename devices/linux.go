//go:build linux

package devices

import (
	"github.com/pvperf/pvperf/emu"
	"github.com/pvperf/pvperf/verbs/uverbs"
)

// kernelDevices lists the kernel's RDMA devices (sysfs discovery; a
// variable so that tests can replace it), emuDevices the emulated ones.
var (
	kernelDevices = uverbs.Devices
	emuDevices    = emu.Devices
)
