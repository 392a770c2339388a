//go:build linux

package devices

import (
	"github.com/pvperf/pvperf/emu"
	"github.com/pvperf/pvperf/verbs"
	"github.com/pvperf/pvperf/verbs/rdmacm"
	"github.com/pvperf/pvperf/verbs/uverbs"
)

// kernelDevices lists the kernel's RDMA devices (sysfs discovery; a
// variable so that tests can replace it), emuDevices the emulated ones.
var (
	kernelDevices = uverbs.Devices
	emuDevices    = emu.Devices
)

// CM returns the connection manager that serves dev: the kernel's
// (/dev/infiniband/rdma_cm) for a kernel device, the emulator's for an
// emulated one. Close it after the ids it made.
func CM(dev verbs.Device) (verbs.CM, error) {
	if dev.Kind() == verbs.KindEmulated {
		return emu.NewCM()
	}
	m, err := rdmacm.NewCM()
	if err != nil {
		return nil, err
	}
	return m, nil
}
