//go:build linux

package unix

import (
	"encoding/binary"
	"net"
	"net/netip"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// cmsg builds one control message as the kernel lays it out.
func cmsg(level, typ int32, data []byte) []byte {
	b := make([]byte, unix.CmsgSpace(len(data)))
	h := (*unix.Cmsghdr)(unsafe.Pointer(&b[0]))
	h.Level, h.Type = level, typ
	h.SetLen(unix.CmsgLen(len(data)))
	copy(b[unix.CmsgLen(0):], data)
	return b
}

func u32(v uint32) []byte { return binary.NativeEndian.AppendUint32(nil, v) }

func TestUDPControl(t *testing.T) {
	gro := cmsg(unix.IPPROTO_UDP, unix.UDP_GRO, u32(1076))
	ovfl := cmsg(unix.SOL_SOCKET, unix.SO_RXQ_OVFL, u32(42))
	other := cmsg(unix.IPPROTO_IP, unix.IP_TOS, []byte{0})
	for _, c := range []struct {
		name      string
		oob       []byte
		seg       int
		drops     uint32
		haveDrops bool
	}{
		{"none", nil, 0, 0, false},
		{"gro", gro, 1076, 0, false},
		{"drops", ovfl, 0, 42, true},
		{"both", append(append(append([]byte{}, other...), ovfl...), gro...), 1076, 42, true},
		{"truncated", gro[:unix.CmsgLen(0)+2], 0, 0, false},
		{"length past the end", append(append([]byte{}, ovfl...), cmsg(unix.IPPROTO_UDP, unix.UDP_GRO, u32(9))[:unix.CmsgLen(0)]...), 0, 42, true},
	} {
		seg, drops, have := UDPControl(c.oob)
		if seg != c.seg || drops != c.drops || have != c.haveDrops {
			t.Errorf("%s: UDPControl = %d, %d, %v; want %d, %d, %v", c.name, seg, drops, have, c.seg, c.drops, c.haveDrops)
		}
	}
}

// TestDropCount: a socket whose receive buffer overflowed hears, with the
// next datagram queued after the drops, how many the kernel dropped.
func TestDropCount(t *testing.T) {
	rc, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.MustParseAddrPort("127.0.0.1:0")))
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	if !EnableDropCount(rc) {
		t.Fatal("SO_RXQ_OVFL refused")
	}
	_ = rc.SetReadBuffer(4096) // the kernel doubles it, and has a minimum
	sc, err := net.DialUDP("udp", nil, rc.LocalAddr().(*net.UDPAddr))
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()
	msg := make([]byte, 1000)
	const sent = 200
	for range sent {
		if _, err := sc.Write(msg); err != nil {
			t.Fatal(err)
		}
	}
	buf := make([]byte, 2000)
	oob := make([]byte, 64)
	var last uint32
	read := 0
	for {
		_ = rc.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
		_, oobn, _, _, err := rc.ReadMsgUDPAddrPort(buf, oob)
		if err != nil {
			break
		}
		read++
		if _, d, ok := UDPControl(oob[:oobn]); ok {
			last = d
		}
	}
	if read == 0 || read == sent {
		t.Fatalf("read %d of %d datagrams: the receive buffer did not overflow", read, sent)
	}
	// The count comes with datagrams queued after the drops.
	if _, err := sc.Write(msg); err != nil {
		t.Fatal(err)
	}
	_ = rc.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, oobn, _, _, err := rc.ReadMsgUDPAddrPort(buf, oob)
	if err != nil {
		t.Fatal(err)
	}
	if _, d, ok := UDPControl(oob[:oobn]); ok {
		last = d
	}
	if int(last)+read != sent {
		t.Errorf("read %d datagrams and the kernel counted %d drops; %d were sent", read, last, sent)
	}
}

func FuzzUDPControl(f *testing.F) {
	f.Add(cmsg(unix.IPPROTO_UDP, unix.UDP_GRO, u32(1076)))
	f.Add(append(cmsg(unix.SOL_SOCKET, unix.SO_RXQ_OVFL, u32(7)), cmsg(unix.IPPROTO_UDP, unix.UDP_GRO, u32(1076))...))
	f.Fuzz(func(t *testing.T, oob []byte) {
		UDPControl(oob)
	})
}
