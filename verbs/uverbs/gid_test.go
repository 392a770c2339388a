//go:build linux

package uverbs

import (
	"net"
	"net/netip"
	"testing"

	"github.com/pvperf/pvperf/verbs"
)

func TestGIDTableIoctl(t *testing.T) {
	c, k := rxeContext(t)
	lo, err := net.InterfaceByIndex(1)
	if err != nil {
		t.Skipf("no interface 1 to name GIDs after: %v", err)
	}
	ll := verbs.GID{0xfe, 0x80, 8: 0xb4, 0xad, 0xe8, 0xff, 0xfe, 0x2c, 0x41, 0xa6}
	v4 := verbs.GID(netip.MustParseAddr("::ffff:10.77.0.1").As16())
	k.gids = []gidEntryABI{
		{GID: ll, GIDIndex: 0, PortNum: 1, GIDType: 1, NetdevIfindex: 1},
		{GID: ll, GIDIndex: 1, PortNum: 1, GIDType: 2, NetdevIfindex: 1},
		{GID: v4, GIDIndex: 3, PortNum: 1, GIDType: 2},
		{GID: v4, GIDIndex: 0, PortNum: 2, GIDType: 2, NetdevIfindex: 1}, // another port
	}
	got, err := c.GIDTable(1)
	if err != nil {
		t.Fatal(err)
	}
	want := []verbs.GIDEntry{
		{Index: 0, GID: ll, Type: verbs.GIDTypeRoCEv1, Netdev: lo.Name},
		{Index: 1, GID: ll, Type: verbs.GIDTypeRoCEv2, Netdev: lo.Name},
		{Index: 3, GID: v4, Type: verbs.GIDTypeRoCEv2},
	}
	if len(got) != len(want) {
		t.Fatalf("gid table %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("entry %d: %+v, want %+v", i, got[i], want[i])
		}
	}
	// More used entries than the ports' tables hold: the kernel's EINVAL.
	k.gids = make([]gidEntryABI, 1025)
	if _, err := c.GIDTable(1); err == nil {
		t.Errorf("gid table of 1025 entries in a table of 1024: no error")
	}
}

func TestGIDTableSysfsFallback(t *testing.T) {
	withSysfs(t, fakeSysfs(t))
	c, k := rxeContext(t) // k.gids nil: a kernel before 5.10
	for range 2 {
		tbl, err := c.GIDTable(1)
		if err != nil || len(tbl) != 2 || tbl[1].Netdev != "v0" || tbl[1].Type != verbs.GIDTypeRoCEv2 {
			t.Fatalf("gid table from sysfs: %+v, %v", tbl, err)
		}
	}
	if k.ioctls != 1 {
		t.Errorf("%d ioctls; want 1: a kernel without the method is asked once", k.ioctls)
	}
}
