//go:build linux

package unix

import (
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// PrepareRoCESocket sets the options a socket carrying RoCE v2 packets
// needs: the don't-fragment bit with path MTU discovery off (IPv4
// IP_PMTUDISC_DO, IPv6 IPV6_PMTUDISC_DO), so that an unconnected socket's
// packets leave with IP ID 0 and DF as rdma_rxe's do (the ICRC covers both),
// and socket buffers of bufBytes each way (forced beyond the sysctl limits
// when the process may).
func PrepareRoCESocket(c *net.UDPConn, ipv6 bool, bufBytes int) error {
	rc, err := c.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	err = rc.Control(func(fd uintptr) {
		if ipv6 {
			serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_IPV6, unix.IPV6_MTU_DISCOVER, unix.IPV6_PMTUDISC_DO)
		} else {
			serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_IP, unix.IP_MTU_DISCOVER, unix.IP_PMTUDISC_DO)
		}
		if serr != nil {
			serr = fmt.Errorf("set don't-fragment: %w", serr)
			return
		}
		for _, o := range [][2]int{{unix.SO_RCVBUFFORCE, unix.SO_RCVBUF}, {unix.SO_SNDBUFFORCE, unix.SO_SNDBUF}} {
			if unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, o[0], bufBytes) != nil {
				_ = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, o[1], bufBytes)
			}
		}
	})
	if err != nil {
		return err
	}
	return serr
}

// EnableUDPGRO asks the kernel to coalesce consecutive datagrams of one
// flow into one read (UDP_GRO); UDPControl then reports the segment size. It
// reports whether the kernel accepted.
func EnableUDPGRO(c *net.UDPConn) bool { return setOption(c, unix.IPPROTO_UDP, unix.UDP_GRO) }

// UDPSegmentSpace is the room the control message of PutUDPSegment takes.
var UDPSegmentSpace = unix.CmsgSpace(2)

// PutUDPSegment writes into oob (at least UDPSegmentSpace bytes) the
// control message that makes one send a batch of datagrams of size bytes
// each, the last possibly shorter (UDP generic segmentation offload), and
// returns the message.
func PutUDPSegment(oob []byte, size uint16) []byte {
	h := (*unix.Cmsghdr)(unsafe.Pointer(&oob[0]))
	h.Level = unix.IPPROTO_UDP
	h.Type = unix.UDP_SEGMENT
	h.SetLen(unix.CmsgLen(2))
	*(*uint16)(unsafe.Pointer(&oob[unix.CmsgLen(0)])) = size
	return oob[:UDPSegmentSpace]
}

// EnableDropCount asks the kernel to report, with each datagram read, how
// many datagrams it has dropped for the socket so far: those that found its
// receive buffer full (SO_RXQ_OVFL). It reports whether the kernel
// accepted.
func EnableDropCount(c *net.UDPConn) bool {
	return setOption(c, unix.SOL_SOCKET, unix.SO_RXQ_OVFL)
}

// setOption sets the integer socket option opt of level to 1 and reports
// whether the kernel accepted.
func setOption(c *net.UDPConn, level, opt int) bool {
	rc, err := c.SyscallConn()
	if err != nil {
		return false
	}
	ok := false
	_ = rc.Control(func(fd uintptr) {
		ok = unix.SetsockoptInt(int(fd), level, opt, 1) == nil
	})
	return ok
}

// UDPControl reads the control messages of a datagram read: the segment
// size of a read the kernel coalesced (UDP_GRO; 0 if none), and the
// socket's drop count when the kernel gave it (EnableDropCount; it gives
// it only once non-zero). Malformed messages end the scan.
func UDPControl(oob []byte) (seg int, drops uint32, haveDrops bool) {
	const hdr = unix.SizeofCmsghdr // Len (a word), Level, Type (int32 each)
	for len(oob) >= hdr {
		var l uint64
		if hdr == 16 {
			l = binary.NativeEndian.Uint64(oob)
		} else {
			l = uint64(binary.NativeEndian.Uint32(oob))
		}
		if l < hdr || l > uint64(len(oob)) {
			break
		}
		level, typ := int32(binary.NativeEndian.Uint32(oob[hdr-8:])), int32(binary.NativeEndian.Uint32(oob[hdr-4:]))
		data := oob[unix.CmsgLen(0):l]
		switch {
		case level == unix.IPPROTO_UDP && typ == unix.UDP_GRO && len(data) >= 4:
			seg = int(int32(binary.NativeEndian.Uint32(data)))
		case level == unix.SOL_SOCKET && typ == unix.SO_RXQ_OVFL && len(data) >= 4:
			drops, haveDrops = binary.NativeEndian.Uint32(data), true
		}
		oob = oob[min(unix.CmsgSpace(int(l)-unix.CmsgLen(0)), len(oob)):]
	}
	return seg, drops, haveDrops
}

// ReadBatch is the most datagrams a DatagramReader reads at once.
const ReadBatch = 16

// DatagramReader reads datagrams from a socket without blocking and
// without allocating: up to ReadBatch of them in one recvmmsg(2) with
// MSG_DONTWAIT. Read must be called where the descriptor is known to be
// open (inside syscall.RawConn's Read or Control). A DatagramReader is not
// safe for concurrent use.
type DatagramReader struct {
	msgs  [ReadBatch]unix.Mmsghdr
	iovs  [ReadBatch]unix.Iovec
	names [ReadBatch]unix.RawSockaddrInet6
}

// Read reads up to min(len(bufs), ReadBatch) queued datagrams, the i-th
// into bufs[i] and its control messages into oobs[i] (none may be empty),
// and returns how many it read; Datagram tells their lengths and sources.
// It returns unix.EAGAIN when none is queued.
func (r *DatagramReader) Read(fd uintptr, bufs, oobs [][]byte) (int, error) {
	n := min(len(bufs), len(oobs), ReadBatch)
	for i := range n {
		r.iovs[i].Base = &bufs[i][0]
		r.iovs[i].SetLen(len(bufs[i]))
		m := &r.msgs[i]
		m.Hdr.Name = (*byte)(unsafe.Pointer(&r.names[i]))
		m.Hdr.Namelen = unix.SizeofSockaddrInet6
		m.Hdr.Iov = &r.iovs[i]
		m.Hdr.SetIovlen(1)
		m.Hdr.Control = &oobs[i][0]
		m.Hdr.SetControllen(len(oobs[i]))
		m.Hdr.Flags = 0
		m.Len = 0
	}
	k, _, e := unix.Syscall6(unix.SYS_RECVMMSG, fd, uintptr(unsafe.Pointer(&r.msgs[0])), uintptr(n), unix.MSG_DONTWAIT, 0, 0)
	if e != 0 {
		return 0, e
	}
	return int(k), nil
}

// Datagram returns the length, the length of the control messages and the
// source of the i-th datagram of the last Read.
func (r *DatagramReader) Datagram(i int) (n, oobn int, from netip.AddrPort) {
	m := &r.msgs[i]
	name := &r.names[i]
	switch name.Family {
	case unix.AF_INET:
		sa := (*unix.RawSockaddrInet4)(unsafe.Pointer(name))
		p := (*[2]byte)(unsafe.Pointer(&sa.Port))
		from = netip.AddrPortFrom(netip.AddrFrom4(sa.Addr), uint16(p[0])<<8|uint16(p[1]))
	case unix.AF_INET6:
		p := (*[2]byte)(unsafe.Pointer(&name.Port))
		from = netip.AddrPortFrom(netip.AddrFrom16(name.Addr), uint16(p[0])<<8|uint16(p[1]))
	}
	return int(m.Len), int(m.Hdr.Controllen), from
}

// UDPReceiver hands the datagrams of a UDP socket to a handler, one at a
// time, from a goroutine that waits for them (Serve) and from threads that
// look for them as they go (Poll): mu, held while datagrams are read and
// handled, keeps them in the order they arrived.
type UDPReceiver struct {
	rc      syscall.RawConn
	mu      *sync.Mutex
	handle  func(from netip.AddrPort, b, oob []byte)
	rd      DatagramReader
	bufs    [ReadBatch][]byte
	oobs    [ReadBatch][]byte
	limit   int
	big     bool // the last read held a big datagram (see drain)
	serveFn func(uintptr) bool
	pollFn  func(uintptr)
}

// NewUDPReceiver returns a receiver of c's datagrams that calls handle
// with each (the slices are reused after it returns).
func NewUDPReceiver(c *net.UDPConn, mu *sync.Mutex, handle func(from netip.AddrPort, b, oob []byte)) (*UDPReceiver, error) {
	rc, err := c.SyscallConn()
	if err != nil {
		return nil, err
	}
	r := &UDPReceiver{rc: rc, mu: mu, handle: handle}
	mem := make([]byte, ReadBatch*(1<<16+oobLen))
	for i := range ReadBatch {
		r.bufs[i] = mem[: 1<<16 : 1<<16]
		r.oobs[i] = mem[1<<16 : 1<<16+oobLen : 1<<16+oobLen]
		mem = mem[1<<16+oobLen:]
	}
	r.serveFn = func(fd uintptr) bool {
		r.mu.Lock()
		r.drain(fd, 0)
		r.mu.Unlock()
		return false
	}
	r.pollFn = func(fd uintptr) { r.drain(fd, r.limit) }
	return r, nil
}

// Serve handles datagrams as they arrive until the socket is closed; it
// returns the error that ended the wait (net.ErrClosed once closed).
func (r *UDPReceiver) Serve() error { return r.rc.Read(r.serveFn) }

// Poll handles up to limit datagrams already queued, unless another
// thread is handling datagrams. It allocates nothing.
func (r *UDPReceiver) Poll(limit int) {
	if !r.mu.TryLock() {
		return
	}
	r.limit = limit
	_ = r.rc.Control(r.pollFn)
	r.mu.Unlock()
}

// oobLen is the room for a datagram's control messages: UDP_GRO's segment
// size and SO_RXQ_OVFL's drop count.
const oobLen = 64

// bigDatagram is the size from which a datagram is taken for several the
// kernel coalesced (UDP GRO).
const bigDatagram = 8192

// drain reads and handles datagrams until none is queued, or limit of
// them if limit > 0. It reads again even after a read that returned fewer
// than it asked for: more may have come while those were handled, and
// the serving goroutine would otherwise go to sleep and be woken for them.
//
// Small datagrams are read many at a time, which saves system calls. After
// a big one (coalesced by the kernel, up to 64 KiB) they are read one at a
// time: a datagram is then handled as soon as it is read, rather than
// after the next ones are copied too, and the reads stay in one buffer
// that the cache holds.
func (r *UDPReceiver) drain(fd uintptr, limit int) {
	for done := 0; limit <= 0 || done < limit; {
		want := ReadBatch
		if r.big {
			want = 1
		}
		if limit > 0 {
			want = min(want, limit-done)
		}
		k, err := r.rd.Read(fd, r.bufs[:want], r.oobs[:want])
		if err != nil {
			return // EAGAIN: none queued; else an error of the moment (ENOBUFS)
		}
		big := false
		for i := range k {
			n, oobn, from := r.rd.Datagram(i)
			big = big || n >= bigDatagram
			r.handle(from, r.bufs[i][:n], r.oobs[i][:oobn])
		}
		r.big = big
		done += k
	}
}
