//go:build !linux

package devices

import (
	"fmt"

	"github.com/pvperf/pvperf/verbs"
)

// Kernel RDMA devices and the emulator (which shares memory between
// processes with Linux futexes) exist on Linux only: elsewhere there is no
// device, and the commands say so.
var (
	kernelDevices = func() ([]verbs.Device, error) { return nil, nil }
	emuDevices    = func() ([]verbs.Device, error) { return nil, nil }
)

// CM fails: there is no connection manager but on Linux.
func CM(dev verbs.Device) (verbs.CM, error) {
	return nil, fmt.Errorf("devices: connection manager for %s: %w", dev.Name(), verbs.ErrNotSupported)
}
