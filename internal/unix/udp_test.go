//go:build linux

package unix

import (
	"bytes"
	"encoding/binary"
	"errors"
	"net"
	"net/netip"
	"sync"
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

// TestUDPReceiver: datagrams reach the handler once each, in order, with
// their own source and length (several are read at once), whether a
// polling thread or the serving goroutine reads them; Poll allocates
// nothing.
func TestUDPReceiver(t *testing.T) {
	rc, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.MustParseAddrPort("127.0.0.1:0")))
	if err != nil {
		t.Fatal(err)
	}
	var senders [2]*net.UDPConn
	for i := range senders {
		if senders[i], err = net.DialUDP("udp", nil, rc.LocalAddr().(*net.UDPAddr)); err != nil {
			rc.Close()
			t.Fatal(err)
		}
		defer senders[i].Close()
	}
	type datagram struct {
		from netip.AddrPort
		b    []byte
	}
	const n = 200
	var mu sync.Mutex
	got := make([]datagram, 0, n)
	arena := make([]byte, 0, 8*n) // the handler allocates nothing either
	r, err := NewUDPReceiver(rc, &mu, func(src netip.AddrPort, b, _ []byte) {
		arena = append(arena, b...)
		got = append(got, datagram{src, arena[len(arena)-len(b):]})
	})
	if err != nil {
		rc.Close()
		t.Fatal(err)
	}
	// Datagram i comes from sender i%2 and holds i%7+1 bytes of value i.
	want := func(i int) datagram {
		return datagram{senders[i%2].LocalAddr().(*net.UDPAddr).AddrPort(), bytes.Repeat([]byte{byte(i)}, i%7+1)}
	}
	for i := range n {
		if _, err := senders[i%2].Write(want(i).b); err != nil {
			t.Fatal(err)
		}
	}
	// A polling thread: 16 at a time, then 5 (fewer than a batch).
	for range 5 {
		r.Poll(16)
	}
	r.Poll(5)
	mu.Lock()
	if len(got) != 5*16+5 {
		t.Errorf("5 polls of 16 and one of 5 handled %d datagrams", len(got))
	}
	mu.Unlock()
	if allocs := testing.AllocsPerRun(100, func() { r.Poll(1) }); allocs != 0 {
		t.Errorf("Poll allocates %.1f times", allocs)
	}
	// The serving goroutine takes the rest.
	served := make(chan error, 1)
	go func() { served <- r.Serve() }()
	deadline := time.Now().Add(10 * time.Second)
	for {
		mu.Lock()
		k := len(got)
		mu.Unlock()
		if k == n || time.Now().After(deadline) {
			break
		}
		time.Sleep(time.Millisecond)
	}
	rc.Close()
	if err := <-served; !errors.Is(err, net.ErrClosed) {
		t.Errorf("Serve after close: %v, want net.ErrClosed", err)
	}
	for i, d := range got {
		if w := want(i); d.from != w.from || !bytes.Equal(d.b, w.b) {
			t.Fatalf("datagram %d is %x from %v, want %x from %v (%d handled)", i, d.b, d.from, w.b, w.from, len(got))
		}
	}
	if len(got) != n {
		t.Errorf("%d of %d datagrams handled", len(got), n)
	}
}

// TestMmsghdrLayout pins struct mmsghdr (recvmmsg(2)) as the kernel lays
// it out on 64-bit targets: a struct msghdr, then the length.
func TestMmsghdrLayout(t *testing.T) {
	if unsafe.Sizeof(uintptr(0)) != 8 {
		t.Skip("64-bit layout")
	}
	var m unix.Mmsghdr
	if s, o := unsafe.Sizeof(m), unsafe.Offsetof(m.Len); s != 64 || o != 56 {
		t.Errorf("mmsghdr: size %d, Len at %d; want 64 and 56", s, o)
	}
}
