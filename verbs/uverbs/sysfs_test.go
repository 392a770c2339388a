//go:build linux

package uverbs

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/pvperf/pvperf/internal/unix"
	"github.com/pvperf/pvperf/verbs"
)

// fakeSysfs builds, under a temporary root, the sysfs files the kernel
// shows for an rxe device (uverbs0), a PVRDMA device (uverbs1) and a
// device of another driver (uverbs2), in the formats of the kernel's
// drivers/infiniband/core/sysfs.c.
func fakeSysfs(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	write := func(path, content string) {
		t.Helper()
		p := filepath.Join(root, path)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	link := func(path, target string) {
		t.Helper()
		p := filepath.Join(root, path)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(target, p); err != nil {
			t.Fatal(err)
		}
	}
	write("sys/class/infiniband_verbs/abi_version", "6\n")
	for i, d := range []struct{ ib, abi, dev string }{{"rxe0", "2", "231:192"}, {"vmw_pvrdma0", "3", "231:193"}, {"mlx5_0", "1", "231:194"}} {
		u := "sys/class/infiniband_verbs/uverbs" + string(rune('0'+i))
		write(u+"/ibdev", d.ib+"\n")
		write(u+"/abi_version", d.abi+"\n")
		write(u+"/dev", d.dev+"\n")
	}
	// rxe: a parent netdev, no PCI identity, RoCE v2 GIDs.
	rxe := "sys/class/infiniband/rxe0"
	write(rxe+"/parent", "v0\n")
	write(rxe+"/fw_ver", "\n")
	write(rxe+"/ports/1/gids/0", "fe80:0000:0000:0000:b4ad:e8ff:fe2c:41a6\n")
	write(rxe+"/ports/1/gids/1", "0000:0000:0000:0000:0000:ffff:0a4d:0001\n")
	write(rxe+"/ports/1/gids/2", "0000:0000:0000:0000:0000:0000:0000:0000\n")
	write(rxe+"/ports/1/gid_attrs/types/0", "RoCE v2\n")
	write(rxe+"/ports/1/gid_attrs/types/1", "RoCE v2\n")
	write(rxe+"/ports/1/gid_attrs/ndevs/0", "v0\n")
	write(rxe+"/ports/1/gid_attrs/ndevs/1", "v0\n")
	// PVRDMA: PCI function 15ad:0820 on NUMA node 0, RoCE v1 GIDs.
	pv := "sys/class/infiniband/vmw_pvrdma0"
	write(pv+"/device/vendor", "0x15ad\n")
	write(pv+"/device/device", "0x0820\n")
	write(pv+"/device/numa_node", "0\n")
	write(pv+"/fw_ver", "3.0.0\n\n")
	write(pv+"/ports/1/gids/0", "fe80:0000:0000:0000:0250:56ff:fe8a:1b2c\n")
	write(pv+"/ports/1/gid_attrs/types/0", "IB/RoCE v1\n")
	// mlx5: a driver without a provider.
	write("sys/devices/pci0000:00/0000:00:05.0/vendor", "0x15b3\n")
	link("sys/class/infiniband/mlx5_0/device", "../../../devices/pci0000:00/0000:00:05.0")
	link("sys/devices/pci0000:00/0000:00:05.0/driver", "../../../bus/pci/drivers/mlx5_core")
	return root
}

func withSysfs(t *testing.T, root string) {
	t.Helper()
	oldSys, oldDev := sysfsRoot, devRoot
	sysfsRoot, devRoot = filepath.Join(root, "sys"), filepath.Join(root, "dev")
	t.Cleanup(func() { sysfsRoot, devRoot = oldSys, oldDev })
}

func TestDevices(t *testing.T) {
	withSysfs(t, fakeSysfs(t))
	list, err := Devices()
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		name, driver string
		abi          int
		major, minor uint32
		numa         int
	}{
		{"rxe0", DriverRXE, 2, 231, 192, -1},
		{"vmw_pvrdma0", DriverPVRDMA, 3, 231, 193, 0},
		{"mlx5_0", "mlx5_core", 1, 231, 194, -1},
	}
	if len(list) != len(want) {
		t.Fatalf("%d devices, want %d: %v", len(list), len(want), list)
	}
	for i, w := range want {
		d := list[i].(*Device)
		if d.Name() != w.name || d.Driver() != w.driver || d.abi != w.abi || d.major != w.major || d.minor != w.minor || d.numaNode != w.numa {
			t.Errorf("device %d: %+v, want %+v", i, *d, w)
		}
		if d.Kind() != verbs.KindKernel {
			t.Errorf("%s: kind %v", d.Name(), d.Kind())
		}
		if d.Path() != filepath.Join(devRoot, "infiniband", "uverbs"+string(rune('0'+i))) {
			t.Errorf("%s: path %s", d.Name(), d.Path())
		}
	}
	// A driver without a provider fails to open, clearly.
	_, err = list[2].Open()
	if !errors.Is(err, verbs.ErrNotSupported) || err.Error() != "mlx5_0: open device: driver mlx5_core is not supported: not supported" {
		t.Errorf("open mlx5_0: %v", err)
	}
}

func TestNoDevices(t *testing.T) {
	withSysfs(t, t.TempDir())
	list, err := Devices()
	if err != nil || len(list) != 0 {
		t.Errorf("Devices() on a machine without RDMA = %v, %v", list, err)
	}
}

func TestBadABI(t *testing.T) {
	root := fakeSysfs(t)
	if err := os.WriteFile(filepath.Join(root, "sys/class/infiniband_verbs/abi_version"), []byte("5\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	withSysfs(t, root)
	if _, err := Devices(); err == nil {
		t.Error("uverbs ABI 5 accepted")
	}
}

func TestGIDs(t *testing.T) {
	withSysfs(t, fakeSysfs(t))
	e, err := gidEntry("rxe0", 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	if e.Index != 1 || e.GID.String() != "0000:0000:0000:0000:0000:ffff:0a4d:0001" || e.Type != verbs.GIDTypeRoCEv2 || e.Netdev != "v0" {
		t.Errorf("gid 1: %+v", e)
	}
	if !e.GID.IsV4Mapped() || e.GID.Addr().String() != "10.77.0.1" {
		t.Errorf("gid 1 address %v", e.GID.Addr())
	}
	for _, idx := range []int{2, 3, 1000} {
		if _, err := gidEntry("rxe0", 1, idx); !errors.Is(err, unix.EINVAL) {
			t.Errorf("unused gid %d: %v, want EINVAL", idx, err)
		}
	}
	tbl, err := gidTable("rxe0", 1, 1024)
	if err != nil || len(tbl) != 2 || tbl[0].Index != 0 || tbl[1].Index != 1 {
		t.Errorf("gid table: %+v, %v", tbl, err)
	}
	pv, err := gidEntry("vmw_pvrdma0", 1, 0)
	if err != nil || pv.Type != verbs.GIDTypeRoCEv1 || !pv.GID.IsLinkLocal() {
		t.Errorf("pvrdma gid 0: %+v, %v", pv, err)
	}
}

// TestFWVersion: QUERY_DEVICE's raw firmware version, formatted as each
// driver's rdma-core provider does (ibv_devinfo shows vmw_pvrdma's 14 as
// 0.0.014, rdma_rxe's 0 as 0.0.0).
func TestFWVersion(t *testing.T) {
	for _, c := range []struct {
		driver string
		raw    uint64
		want   string
	}{
		{DriverPVRDMA, 14, "0.0.014"},
		{DriverPVRDMA, 3<<32 | 1<<16 | 2, "3.1.002"},
		{DriverRXE, 0, "0.0.0"},
		{DriverRXE, 1<<32 | 2<<16 | 30, "1.2.30"},
	} {
		if got := fwVersion(c.driver, c.raw); got != c.want {
			t.Errorf("fwVersion(%s, %#x) = %q, want %q", c.driver, c.raw, got, c.want)
		}
	}
}
