//go:build linux

package uverbs

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/pvperf/pvperf/internal/unix"
	"github.com/pvperf/pvperf/verbs"
)

// Where the kernel's interfaces are; tests point them at a copy.
var (
	sysfsRoot = "/sys"
	devRoot   = "/dev"
)

// Driver names.
const (
	DriverRXE    = "rdma_rxe"
	DriverPVRDMA = "vmw_pvrdma"
)

// The uverbs ABI versions this package speaks: the class version of the
// write() interface, and each provider's driver ABI.
const (
	classABIMin = 6 // ib_uverbs_cmd_hdr with in/out words as implemented here
	classABIMax = 6
	abiRXE      = 2
	abiPVRDMA   = 3
)

// Device is a kernel RDMA device with a uverbs character device.
type Device struct {
	name     string // ib device name, e.g. rxe0
	uverbs   string // uverbs device name, e.g. uverbs0
	index    int    // N of uverbsN
	driver   string // DriverRXE, DriverPVRDMA or the kernel driver's name
	abi      int    // driver ABI version (uverbsN/abi_version)
	major    uint32 // uverbsN/dev
	minor    uint32
	numaNode int
}

var _ verbs.Device = (*Device)(nil)

// Name returns the device's name, e.g. "rxe0" or "vmw_pvrdma0".
func (d *Device) Name() string { return d.name }

// Kind returns verbs.KindKernel.
func (d *Device) Kind() verbs.DeviceKind { return verbs.KindKernel }

// Driver returns the kernel driver: "rdma_rxe", "vmw_pvrdma", or the name
// of a driver this package has no provider for.
func (d *Device) Driver() string { return d.driver }

// Path returns the device's uverbs character device.
func (d *Device) Path() string { return filepath.Join(devRoot, "infiniband", d.uverbs) }

// BoardID is the device's board identifier from sysfs (board_id), as
// ibv_devinfo prints it, or "" when the driver gives none.
func (d *Device) BoardID() string {
	s, _ := readString(filepath.Join(sysfsRoot, "class", "infiniband", d.name, "board_id"))
	return s
}

// Open opens the device. It fails with verbs.ErrNotSupported for a driver
// without a provider in this package.
func (d *Device) Open() (verbs.Context, error) { return open(d) }

// Supported reports whether this package has a provider for the device's
// driver and driver ABI version, that is whether Open can succeed.
func (d *Device) Supported() bool {
	_, err := providerFor(d)
	return err == nil
}

func (d *Device) String() string { return d.name }

// Devices lists the kernel RDMA devices that have a uverbs character
// device (/sys/class/infiniband_verbs/uverbsN), in uverbs order. A machine
// without RDMA support has none: that is not an error.
func Devices() ([]verbs.Device, error) {
	dir := filepath.Join(sysfsRoot, "class", "infiniband_verbs")
	ents, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list rdma devices: %w", err)
	}
	if v, err := readInt(filepath.Join(dir, "abi_version")); err == nil && (v < classABIMin || v > classABIMax) {
		return nil, fmt.Errorf("list rdma devices: uverbs ABI version %d is not supported (want %d)", v, classABIMin)
	}
	var list []*Device
	for _, e := range ents {
		n, ok := strings.CutPrefix(e.Name(), "uverbs")
		idx, err := strconv.Atoi(n)
		if !ok || err != nil {
			continue
		}
		d, err := readDevice(filepath.Join(dir, e.Name()), e.Name(), idx)
		if err != nil {
			return nil, fmt.Errorf("list rdma devices: %w", err)
		}
		list = append(list, d)
	}
	sort.Slice(list, func(i, j int) bool { return list[i].index < list[j].index })
	out := make([]verbs.Device, len(list))
	for i, d := range list {
		out[i] = d
	}
	return out, nil
}

func readDevice(dir, uverbs string, idx int) (*Device, error) {
	d := &Device{uverbs: uverbs, index: idx, numaNode: -1}
	var err error
	if d.name, err = readString(filepath.Join(dir, "ibdev")); err != nil {
		return nil, err
	}
	if d.abi, err = readInt(filepath.Join(dir, "abi_version")); err != nil {
		return nil, err
	}
	dev, err := readString(filepath.Join(dir, "dev"))
	if err != nil {
		return nil, err
	}
	maj, min, ok := strings.Cut(dev, ":")
	ma, err1 := strconv.ParseUint(maj, 10, 32)
	mi, err2 := strconv.ParseUint(min, 10, 32)
	if !ok || err1 != nil || err2 != nil {
		return nil, fmt.Errorf("%s/dev: %q is not major:minor", dir, dev)
	}
	d.major, d.minor = uint32(ma), uint32(mi)
	ib := filepath.Join(sysfsRoot, "class", "infiniband", d.name)
	d.driver = driverOf(ib)
	if n, err := readInt(filepath.Join(ib, "device", "numa_node")); err == nil {
		d.numaNode = n
	}
	return d, nil
}

// driverOf tells which kernel driver runs the ib device at dir: a PVRDMA
// PCI function, an rxe device (the only driver with a "parent" netdev
// attribute; it has no PCI identity of its own, and on older kernels its
// "device" link leads to the NIC under it), or whatever driver the
// device's "device/driver" link names.
func driverOf(dir string) string {
	vendor, _ := readString(filepath.Join(dir, "device", "vendor"))
	device, _ := readString(filepath.Join(dir, "device", "device"))
	if vendor == "0x15ad" && device == "0x0820" {
		return DriverPVRDMA
	}
	if _, err := os.Stat(filepath.Join(dir, "parent")); err == nil {
		return DriverRXE
	}
	if l, err := os.Readlink(filepath.Join(dir, "device", "driver")); err == nil {
		return filepath.Base(l)
	}
	return "unknown"
}

// gidEntry reads entry index of port's GID table from sysfs. An unused
// entry fails with EINVAL, as the kernel's gid_attrs files do.
func gidEntry(name string, port, index int) (verbs.GIDEntry, error) {
	p := filepath.Join(sysfsRoot, "class", "infiniband", name, "ports", strconv.Itoa(port))
	s, err := readString(filepath.Join(p, "gids", strconv.Itoa(index)))
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return verbs.GIDEntry{}, verbs.Errorf(unix.EINVAL, "no gid index %d on port %d", index, port)
		}
		return verbs.GIDEntry{}, err
	}
	g, err := verbs.ParseGID(s)
	if err != nil {
		return verbs.GIDEntry{}, err
	}
	e := verbs.GIDEntry{Index: index, GID: g}
	typ, err := readString(filepath.Join(p, "gid_attrs", "types", strconv.Itoa(index)))
	if err != nil || g.IsZero() {
		// The kernel refuses to read the type of an unused entry.
		return verbs.GIDEntry{}, verbs.Errorf(unix.EINVAL, "gid index %d on port %d is not in use", index, port)
	}
	switch typ {
	case "RoCE v2":
		e.Type = verbs.GIDTypeRoCEv2
	case "IB/RoCE v1":
		e.Type = verbs.GIDTypeRoCEv1
	default:
		return verbs.GIDEntry{}, fmt.Errorf("gid index %d on port %d: unknown type %q", index, port, typ)
	}
	e.Netdev, _ = readString(filepath.Join(p, "gid_attrs", "ndevs", strconv.Itoa(index)))
	return e, nil
}

// gidTable returns the used entries of port's GID table.
func gidTable(name string, port, size int) ([]verbs.GIDEntry, error) {
	var out []verbs.GIDEntry
	for i := range size {
		e, err := gidEntry(name, port, i)
		if errors.Is(err, unix.EINVAL) {
			continue
		}
		if err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, nil
}

func readString(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(b)), nil
}

func readInt(path string) (int, error) {
	s, err := readString(path)
	if err != nil {
		return 0, err
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		return 0, fmt.Errorf("%s: %q is not a number", path, s)
	}
	return n, nil
}
