package unix

import (
	"encoding/binary"
	"net/netip"
	"testing"

	"golang.org/x/sys/unix"
)

// TestNeighbours dumps both neighbour tables of this machine: the dump
// must succeed (it needs no privilege) and every entry must be of the
// family asked for.
func TestNeighbours(t *testing.T) {
	for _, v6 := range []bool{false, true} {
		ns, err := Neighbours(v6)
		if err != nil {
			t.Fatalf("neighbours (ipv6 %v): %v", v6, err)
		}
		for _, n := range ns {
			if n.Addr.Is6() != v6 || n.Ifindex <= 0 {
				t.Errorf("ipv6 %v: entry %+v", v6, n)
			}
			if n.Usable() && len(n.MAC) == 0 {
				t.Errorf("usable entry without an address: %+v", n)
			}
		}
	}
}

// TestParseNeighbour decodes a hand-built RTM_NEWNEIGH body.
func TestParseNeighbour(t *testing.T) {
	ne := binary.NativeEndian
	attr := func(typ uint16, v []byte) []byte {
		b := make([]byte, 4, (4+len(v)+3)&^3)
		ne.PutUint16(b[0:], uint16(4+len(v)))
		ne.PutUint16(b[2:], typ)
		b = append(b, v...)
		return b[:cap(b)]
	}
	msg := make([]byte, 12)
	msg[0] = unix.AF_INET6
	ne.PutUint32(msg[4:], 3)
	ne.PutUint16(msg[8:], unix.NUD_REACHABLE)
	dst := netip.MustParseAddr("fd00::7")
	a16 := dst.As16()
	msg = append(msg, attr(unix.NDA_DST, a16[:])...)
	msg = append(msg, attr(unix.NDA_LLADDR, []byte{2, 0, 0, 0, 0, 9})...)
	n, ok := parseNeighbour(msg, unix.AF_INET6)
	if !ok || n.Addr != dst || n.Ifindex != 3 || !n.Usable() || string(n.MAC) != string([]byte{2, 0, 0, 0, 0, 9}) {
		t.Errorf("parsed %+v, %v", n, ok)
	}
	if _, ok := parseNeighbour(msg, unix.AF_INET); ok {
		t.Errorf("an IPv6 entry parsed as IPv4")
	}
	if _, ok := parseNeighbour(msg[:11], unix.AF_INET6); ok {
		t.Errorf("a truncated ndmsg parsed")
	}
	ne.PutUint16(msg[8:], unix.NUD_INCOMPLETE)
	if n, _ := parseNeighbour(msg, unix.AF_INET6); n.Usable() {
		t.Errorf("an incomplete entry is usable")
	}
}
