package devices

import (
	"errors"
	"testing"

	"github.com/pvperf/pvperf/emu"
	"github.com/pvperf/pvperf/internal/unix"
	"github.com/pvperf/pvperf/verbs"
)

func TestDefaultFirstDeviceIsEmu0(t *testing.T) {
	t.Setenv(emu.EnvVar, "")
	list, err := List()
	if err != nil {
		t.Fatal(err)
	}
	if len(list) == 0 || list[0].Name() != "emu0" || list[0].Kind() != verbs.KindEmulated {
		t.Fatalf("first device %v, want emu0 (emulated)", list)
	}
	d, err := Find("")
	if err != nil {
		t.Fatal(err)
	}
	ctx, err := d.Open()
	if err != nil {
		t.Fatal(err)
	}
	if ctx.Device().Name() != "emu0" {
		t.Errorf("Find(\"\") found %s", ctx.Device().Name())
	}
	if err := ctx.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestConfiguredDevices(t *testing.T) {
	t.Setenv(emu.EnvVar, "profile=pvrdma-hw13;profile=pvrdma-hw14,roce=v1,mtu=4096")
	list, err := List()
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 2 || list[0].Name() != "emu0" || list[1].Name() != "emu1" {
		t.Fatalf("devices %v", list)
	}
	if list[1].Driver() != "emu/pvrdma-hw14" {
		t.Errorf("emu1 driver %q", list[1].Driver())
	}
	if _, err := Find("emu7"); !errors.Is(err, ErrNoDevice) || !errors.Is(err, unix.ENODEV) {
		t.Errorf("Find(emu7) = %v", err)
	}
}

func TestNoDevices(t *testing.T) {
	t.Setenv(emu.EnvVar, "off")
	if _, err := Find(""); !errors.Is(err, ErrNoDevice) {
		t.Errorf("Find with no devices = %v", err)
	}
}

func TestBadConfig(t *testing.T) {
	t.Setenv(emu.EnvVar, "profile=nope")
	if _, err := List(); err == nil {
		t.Error("List accepted an unknown profile")
	}
}

// kernelDev is a kernel device of the device list, supported or not.
type kernelDev struct {
	name      string
	supported bool
}

func (d kernelDev) Name() string                 { return d.name }
func (d kernelDev) Kind() verbs.DeviceKind       { return verbs.KindKernel }
func (d kernelDev) Driver() string               { return "mlx5_core" }
func (d kernelDev) Open() (verbs.Context, error) { return nil, verbs.ErrNotSupported }
func (d kernelDev) Supported() bool              { return d.supported }

func TestDefaultSkipsUnsupportedKernelDevices(t *testing.T) {
	t.Setenv(emu.EnvVar, "")
	old := kernelDevices
	t.Cleanup(func() { kernelDevices = old })
	kernelDevices = func() ([]verbs.Device, error) {
		return []verbs.Device{kernelDev{"mlx5_0", false}, kernelDev{"rxe0", true}}, nil
	}
	list, err := List()
	if err != nil || len(list) != 3 || list[0].Name() != "mlx5_0" || list[2].Name() != "emu0" {
		t.Fatalf("devices %v, %v: want the kernel devices first, then emu0", list, err)
	}
	if d, err := Find(""); err != nil || d.Name() != "rxe0" {
		t.Errorf("default device %v, %v; want rxe0, the first supported one", d, err)
	}
	if d, err := Find("mlx5_0"); err != nil || d.Name() != "mlx5_0" {
		t.Errorf("Find(mlx5_0) = %v, %v: a device asked for by name is found even unsupported", d, err)
	}
	kernelDevices = func() ([]verbs.Device, error) { return []verbs.Device{kernelDev{"mlx5_0", false}}, nil }
	if d, err := Find(""); err != nil || d.Name() != "emu0" {
		t.Errorf("default device %v, %v; want emu0 after an unsupported kernel device", d, err)
	}
}
