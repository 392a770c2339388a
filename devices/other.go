//go:build !linux

package devices

import "github.com/pvperf/pvperf/verbs"

// Kernel RDMA devices and the emulator (which shares memory between
// processes with Linux futexes) exist on Linux only: elsewhere there is no
// device, and the commands say so.
var (
	kernelDevices = func() ([]verbs.Device, error) { return nil, nil }
	emuDevices    = func() ([]verbs.Device, error) { return nil, nil }
)
