package devices

import (
	"errors"
	"fmt"

	"github.com/pvperf/pvperf/internal/unix"
	"github.com/pvperf/pvperf/verbs"
)

// ErrNoDevice is returned when there is no device at all, or none with the
// requested name.
var ErrNoDevice = errors.New("no such RDMA device")

// List returns every device: kernel devices, then emulated ones.
func List() ([]verbs.Device, error) {
	k, err := kernelDevices()
	if err != nil {
		return nil, fmt.Errorf("list kernel rdma devices: %w", err)
	}
	e, err := emuDevices()
	if err != nil {
		return nil, fmt.Errorf("list emulated rdma devices: %w", err)
	}
	return append(k, e...), nil
}

// Find returns the device called name, or the first device when name is
// empty, skipping kernel devices of drivers that pvperf has no provider
// for (they are listed, but cannot be opened).
func Find(name string) (verbs.Device, error) {
	list, err := List()
	if err != nil {
		return nil, err
	}
	if len(list) == 0 {
		return nil, fmt.Errorf("find rdma device: %w: %w", ErrNoDevice, unix.ENODEV)
	}
	if name == "" {
		for _, d := range list {
			if s, ok := d.(interface{ Supported() bool }); ok && !s.Supported() {
				continue
			}
			return d, nil
		}
		return nil, fmt.Errorf("find rdma device: %w: no device has a supported driver: %w", ErrNoDevice, unix.ENODEV)
	}
	for _, d := range list {
		if d.Name() == name {
			return d, nil
		}
	}
	return nil, fmt.Errorf("find rdma device %q: %w: %w", name, ErrNoDevice, unix.ENODEV)
}
