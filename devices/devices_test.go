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
	ctx, err := Open("")
	if err != nil {
		t.Fatal(err)
	}
	if ctx.Device().Name() != "emu0" {
		t.Errorf("Open(\"\") opened %s", ctx.Device().Name())
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
	if _, err := Open(""); !errors.Is(err, ErrNoDevice) {
		t.Errorf("Open with no devices = %v", err)
	}
}

func TestBadConfig(t *testing.T) {
	t.Setenv(emu.EnvVar, "profile=nope")
	if _, err := List(); err == nil {
		t.Error("List accepted an unknown profile")
	}
}
