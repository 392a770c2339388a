//go:build linux

package emu

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pvperf/pvperf/emu/roce"
	"github.com/pvperf/pvperf/internal/unix"
	"github.com/pvperf/pvperf/verbs"
)

// This file is the device's network port: the RoCE v2 and TCP transports
// that carry its QPs' packets to other hosts. Both carry the same packets
// (the UDP payload of RoCE v2: BTH, extension headers, payload, ICRC); over
// TCP each packet is preceded by its length, two bytes big-endian. Packets
// from the network are untrusted: every one is parsed and its ICRC checked
// before anything acts on it, and drops are counted by reason.

// wireKind is a network transport.
type wireKind uint8

const (
	wireNone wireKind = iota
	wireRoCE
	wireTCP
	wireRoCEv1 // raw Ethernet frames, Ethertype 0x8915
)

func (k wireKind) String() string {
	switch k {
	case wireRoCE:
		return "RoCE v2"
	case wireRoCEv1:
		return "RoCE v1"
	case wireTCP:
		return "TCP"
	}
	return "memory copy"
}

// frameMax is the largest frame: two bytes of TCP length, then the largest
// packet (BTH, RETH and ImmDt, a 4096-byte payload, pad and ICRC).
const frameMax = 2 + 128 + 4096 + 8

// dropReason says why a packet from the network was dropped.
type dropReason uint8

const (
	dropMalformed dropReason = iota // does not parse
	dropICRC                        // ICRC mismatch
	dropPKey                        // P_Key is not the default
	dropQPN                         // no such QP on this device
	dropState                       // QP not in a state that receives it
	dropSource                      // RC/UC packet not from the QP's peer
	dropOpcode                      // opcode not valid for the QP type
	dropQKey                        // UD Q_Key mismatch
	dropNoRecv                      // UD: no receive posted
	dropSequence                    // PSN ahead of the expected one (NAKed once)
	dropDuplicate                   // duplicate request or stale response
	dropNAKed                       // request refused with a NAK (access, invalid)
	dropSend                        // the socket refused the packet, or the TCP link's queue was full
	numDropReasons
)

var dropNames = [numDropReasons]string{
	"malformed", "icrc", "pkey", "unknown_qpn", "qp_state", "wrong_source",
	"opcode", "qkey", "no_recv", "out_of_sequence", "duplicate", "naked", "send_error",
}

// wirePort is the network port of an address: the contexts of a process
// that have this address share it.
type wirePort struct {
	h    *host
	refs int // contexts using it, under h.wireMu
	kind wireKind
	addr netip.Addr
	udp  *net.UDPConn
	ln   *net.TCPListener

	mu         sync.Mutex
	links      map[netip.Addr]*tcpLink // the link in use per peer, under mu
	nLinks     atomic.Int32            // len(links)
	allLinks   map[*tcpLink]bool       // every open link, with a reader; under mu
	hellos     map[*net.TCPConn]bool   // accepted connections whose hello is awaited; under mu
	dialFailed map[netip.Addr]time.Time
	closed     bool
	shut       atomic.Bool // closed, for the receive goroutines
	dialMu     sync.Mutex  // one dial at a time
	wg         sync.WaitGroup

	// faults, in tests, decides the fate of each datagram sent: 0 sent,
	// 1 lost, 2 sent twice, 3 held back and sent after the next one.
	faults atomic.Pointer[func() int]
	held   []byte

	// RoCE v1: the raw socket, the device's GID and the MACs of peers
	// (learnt from their frames, else from the neighbour table).
	raw     *unix.PacketConn
	gid     [16]byte
	macs    map[netip.Addr][6]byte // under mu
	arpSent map[netip.Addr]time.Time
	rxGRH   []byte    // the GRH of the frame being handled (receive goroutine)
	rxSums  flowCache // UDP: of the datagram being handled, under rxMu

	rxMu           sync.Mutex        // held while a datagram is handled
	users          atomic.Int32      // QPs that may use the port (qp.setNetUser)
	rx             *unix.UDPReceiver // UDP: the socket's datagrams, to datagram
	gso            atomic.Bool       // UDP segmentation offload works
	gro            bool              // the kernel coalesces received datagrams
	rxPkts, txPkts atomic.Uint64
	txBatches      atomic.Uint64 // sends the packets left in (txBatch)
	udLost         atomic.Uint64 // UD datagrams missing in senders' PSN sequences
	bufDrops       atomic.Uint64 // datagrams or frames the kernel dropped, the receive buffer full
	drops          [numDropReasons]atomic.Uint64
}

// A tcpLink is a connection to a peer's port. Its reader goroutine
// (readTCP) handles the frames that arrive, and its writer goroutine
// (writeTCP) writes the frames senders queue (sendTCP): a sender never
// waits for the socket. A reader that answers a request (an ACK) queues
// the answer too, so a reader never stops reading while its own link's
// socket is full; if it wrote itself, two ends (or one end's link to
// itself) whose readers each waited to write would wait for each other
// until the write deadline, and the link would be lost.
type tcpLink struct {
	c *net.TCPConn

	mu     sync.Mutex // guards queue, spare and dead
	queue  []byte     // frames for the writer, in order
	spare  []byte     // the writer's last buffer, for the next queue
	dead   bool       // the writer has stopped: frames are dropped
	wake   chan struct{}
	closed chan struct{} // closed when the reader ends

	// Each end of a link first sends a hello, a frame of one byte: 1 if
	// its port receives RoCE v2 over UDP as well, 0 if over TCP only.
	needTCP   atomic.Bool   // the peer's hello said TCP only
	hello     chan struct{} // closed when the peer's hello arrives
	helloOnce sync.Once
}

// hello frames (see tcpLink).
const (
	helloTCPOnly = 0
	helloUDP     = 1
)

var errAddrNotLocal = errors.New("address is on no interface of this host")

// acquireWire returns the network port of cfg's address, opening it for
// the first context that needs it.
func acquireWire(h *host, cfg Config) (*wirePort, error) {
	h.wireMu.Lock()
	defer h.wireMu.Unlock()
	if w := h.wires[cfg.Addr]; w != nil {
		if (cfg.Transport == TransportRoCE && w.kind != wireRoCE) || (cfg.Transport == TransportTCP && w.kind != wireTCP) {
			return nil, fmt.Errorf("%s is already open with transport %v", cfg.Addr, w.kind)
		}
		w.refs++
		return w, nil
	}
	w, err := openWire(h, cfg)
	if err != nil {
		return nil, err
	}
	if h.wires == nil {
		h.wires = map[netip.Addr]*wirePort{}
	}
	w.refs = 1
	h.wires[cfg.Addr] = w
	return w, nil
}

// release drops a context's use of the port; the last one closes it.
func (w *wirePort) release() {
	h := w.h
	h.wireMu.Lock()
	w.refs--
	last := w.refs == 0
	if last {
		delete(h.wires, w.addr)
	}
	h.wireMu.Unlock()
	if last {
		w.close()
	}
}

// openWire opens the network port of an address: UDP port 4791 for RoCE
// v2, else (transport=tcp, or auto with UDP 4791 taken) TCP port 4791.
func openWire(h *host, cfg Config) (*wirePort, error) {
	w := &wirePort{h: h, addr: cfg.Addr, links: map[netip.Addr]*tcpLink{}, allLinks: map[*tcpLink]bool{}, hellos: map[*net.TCPConn]bool{}, dialFailed: map[netip.Addr]time.Time{}}
	if cfg.RoCE == 1 && cfg.Transport != TransportTCP {
		err := w.openRaw(cfg)
		if err == nil {
			return w, nil
		}
		if cfg.Transport == TransportRoCE || !errors.Is(err, unix.EPERM) {
			return nil, err
		}
	} else if cfg.Transport != TransportTCP {
		u, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(cfg.Addr, roce.Port)))
		switch {
		case err == nil:
			if err := unix.PrepareRoCESocket(u, cfg.Addr.Is6(), 4<<20); err != nil {
				u.Close()
				return nil, fmt.Errorf("udp %s: %w", u.LocalAddr(), err)
			}
			w.kind, w.udp = wireRoCE, u
			if w.rx, err = unix.NewUDPReceiver(u, &w.rxMu, w.datagram); err != nil {
				u.Close()
				return nil, fmt.Errorf("udp %s: %w", u.LocalAddr(), err)
			}
			w.gso.Store(true)
			w.gro = unix.EnableUDPGRO(u)
			unix.EnableDropCount(u)
			w.wg.Add(1)
			go w.readUDP()
			if cfg.Transport != TransportRoCE {
				// auto: peers whose own UDP port 4791 is taken fall
				// back to TCP and connect here; packets to them go
				// over their link. Without the TCP port (taken) they
				// are not reached.
				if ln, err := net.ListenTCP("tcp", net.TCPAddrFromAddrPort(netip.AddrPortFrom(cfg.Addr, roce.Port))); err == nil {
					w.ln = ln
					w.wg.Add(1)
					go w.accept()
				}
			}
			return w, nil
		case cfg.Transport == TransportRoCE || !errors.Is(err, unix.EADDRINUSE):
			return nil, fmt.Errorf("roce: %w%s", err, inUse(err, "rdma_rxe, or by another process's emulated device with this address"))
		}
	}
	ln, err := net.ListenTCP("tcp", net.TCPAddrFromAddrPort(netip.AddrPortFrom(cfg.Addr, roce.Port)))
	if err != nil {
		return nil, fmt.Errorf("tcp: %w%s", err, inUse(err, "another process's emulated device with this address"))
	}
	w.kind, w.ln = wireTCP, ln
	w.wg.Add(1)
	go w.accept()
	return w, nil
}

func inUse(err error, by string) string {
	if errors.Is(err, unix.EADDRINUSE) {
		return " (port 4791 of this address is taken: by " + by + "; give each process an address of its own)"
	}
	return ""
}

func (w *wirePort) close() {
	w.mu.Lock()
	w.closed = true
	w.shut.Store(true)
	links, hellos := w.allLinks, w.hellos
	w.links, w.allLinks, w.hellos = nil, nil, nil
	w.nLinks.Store(0)
	w.mu.Unlock()
	if w.udp != nil {
		w.udp.Close()
	}
	if w.raw != nil {
		w.raw.Close()
	}
	if w.ln != nil {
		w.ln.Close()
	}
	for l := range links {
		l.c.Close()
	}
	for c := range hellos {
		c.Close()
	}
	w.wg.Wait()
}

func (w *wirePort) drop(r dropReason) { w.drops[r].Add(1) }

// Counters returns the port's packet counters.
func (w *wirePort) counters() map[string]uint64 {
	m := map[string]uint64{"rx_packets": w.rxPkts.Load(), "tx_packets": w.txPkts.Load(),
		"tx_batches": w.txBatches.Load(), "ud_lost": w.udLost.Load()}
	for i := range w.drops {
		m["drop_"+dropNames[i]] = w.drops[i].Load()
	}
	if w.raw != nil {
		w.bufDrops.Add(w.raw.Drops())
	}
	m["drop_receive_buffer"] = w.bufDrops.Load()
	return m
}

// txBatch gathers the packets a thread sends to one destination, so that
// one system call sends many: over UDP, consecutive packets of one size
// (the last may be shorter) leave as one generic-segmentation-offload
// send, which the kernel cuts into datagrams; over TCP the frames leave in
// one write. Each packet is sealed as it is added: over UDP with the IPv4
// identification its datagram will carry (the kernel numbers a batch's
// datagrams from 0, on an unconnected socket with don't-fragment set).
type txBatch struct {
	buf   []byte
	n     int // bytes used
	seg   int // UDP: the size of the batch's datagrams
	nseg  int
	short bool // the last datagram is shorter than seg: nothing may follow
	dst   netip.Addr
	kind  wireKind // of the packets b holds (wirePort.kindTo)
	oob   [64]byte
	sums  flowCache
}

// flowCache holds the ICRC part of the last flow packets were sent or
// received in (see roce.FlowSum): one per send batch (a QP's requests, a
// QP's responses), per UDP socket and per TCP link, each used by one
// thread at a time (under the QP's send or responder lock, the receiver's
// lock, the link's reader); their packets mostly go to, or come from, one
// peer.
type flowCache struct {
	src, dst netip.Addr
	srcPort  uint16
	ok       bool
	sum      roce.FlowSum
}

// of returns the FlowSum of the flow from src:srcPort to dst.
func (c *flowCache) of(src, dst netip.Addr, srcPort uint16) *roce.FlowSum {
	if !c.ok || c.src != src || c.dst != dst || c.srcPort != srcPort {
		c.sum = roce.NewFlowSum(roce.Flow{Src: src, Dst: dst, SrcPort: srcPort})
		c.src, c.dst, c.srcPort, c.ok = src, dst, srcPort, true
	}
	return &c.sum
}

const (
	batchBytes = 63 * 1024 // below the 64 KiB of an IP datagram
	maxSegs    = 64        // the kernel's UDP_MAX_SEGMENTS
)

// reserve returns room in b for a packet of n bytes to dst (the last 4 for
// its ICRC), sending what b holds first when the packet cannot join it.
// The caller writes the packet there and calls commit before anything
// else is added to b: packets are built in place, not copied.
func (w *wirePort) reserve(b *txBatch, dst netip.Addr, n int) []byte {
	if b.buf == nil {
		b.buf = make([]byte, batchBytes+frameMax)
	}
	k := w.kindTo(dst)
	switch k {
	case wireRoCEv1:
		b.dst, b.kind = dst, k
		return b.buf[roce.GRHLen : roce.GRHLen+n]
	case wireTCP:
		if b.nseg > 0 && (b.kind != k || b.dst != dst || b.n+2+n > batchBytes) {
			w.flush(b)
		}
		b.dst, b.kind = dst, k
		binary.BigEndian.PutUint16(b.buf[b.n:], uint16(n))
		return b.buf[b.n+2 : b.n+2+n]
	}
	if b.nseg > 0 && (b.kind != k || !w.gso.Load() || b.dst != dst || b.short || n > b.seg || b.nseg == maxSegs || b.n+n > batchBytes) {
		w.flush(b)
	}
	if b.nseg == 0 {
		b.seg, b.dst, b.kind = n, dst, k
	}
	return b.buf[b.n : b.n+n]
}

// kindTo returns the transport of packets to dst: the port's, or TCP to
// a peer that fell back to it and connected to a RoCE v2 port in auto
// mode.
func (w *wirePort) kindTo(dst netip.Addr) wireKind {
	if w.kind != wireRoCE || w.nLinks.Load() == 0 {
		return w.kind
	}
	w.mu.Lock()
	l := w.links[dst]
	w.mu.Unlock()
	if l != nil && l.needTCP.Load() {
		return wireTCP
	}
	return w.kind
}

// encode reserves room in b for p with n payload bytes to dst, writes its
// headers and clears its pad. It returns the packet and its payload, which
// the caller fills before it calls commit with the packet.
func (w *wirePort) encode(b *txBatch, dst netip.Addr, p *roce.Packet, n int) (pkt, payload []byte) {
	total := roce.Len(p.Opcode, n)
	pkt = w.reserve(b, dst, total)
	hl := roce.Encode(pkt, p, n)
	clear(pkt[hl+n : total-4])
	return pkt, pkt[hl : hl+n]
}

// commit seals pkt, the packet written where reserve said, and adds it to
// b (a RoCE v1 frame goes at once).
func (w *wirePort) commit(b *txBatch, pkt []byte) {
	switch b.kind {
	case wireRoCEv1:
		w.sendV1(b.buf[:roce.GRHLen+len(pkt)], b.dst)
		return
	case wireTCP:
		b.sums.of(w.addr, b.dst, roce.Port).Seal(0, pkt)
		b.n += 2 + len(pkt)
		b.nseg++
		return
	}
	b.sums.of(w.addr, b.dst, roce.Port).Seal(uint16(b.nseg), pkt)
	b.short = len(pkt) < b.seg
	b.n += len(pkt)
	b.nseg++
}

// flush sends what b holds.
func (w *wirePort) flush(b *txBatch) {
	if b.nseg == 0 {
		return
	}
	w.txPkts.Add(uint64(b.nseg))
	w.txBatches.Add(1)
	defer func() { b.n, b.nseg, b.short = 0, 0, false }()
	if b.kind == wireTCP {
		w.sendTCP(b.dst, b.buf[:b.n], b.nseg)
		return
	}
	to := netip.AddrPortFrom(b.dst, roce.Port)
	if w.faults.Load() != nil {
		w.faultySend(b, to)
		return
	}
	if b.nseg == 1 {
		if _, err := w.udp.WriteToUDPAddrPort(b.buf[:b.n], to); err != nil {
			w.drops[dropSend].Add(1)
		}
		return
	}
	if _, _, err := w.udp.WriteMsgUDPAddrPort(b.buf[:b.n], unix.PutUDPSegment(b.oob[:], uint16(b.seg)), to); err == nil {
		return
	} else if !errors.Is(err, unix.EIO) && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOTSUP) {
		w.drops[dropSend].Add(uint64(b.nseg))
		return
	}
	// No segmentation offload on this path: one datagram at a time,
	// sealed again with identification 0.
	w.gso.Store(false)
	for off := 0; off < b.n; off += b.seg {
		p := b.buf[off:min(off+b.seg, b.n)]
		b.sums.of(w.addr, b.dst, roce.Port).Seal(0, p)
		if _, err := w.udp.WriteToUDPAddrPort(p, to); err != nil {
			w.drops[dropSend].Add(1)
		}
	}
}

// sendTCP queues frames (nseg of them) on the link to dst, connecting
// first if need be. A link whose queue holds tcpQueueMax bytes drops them,
// as a full network queue would.
func (w *wirePort) sendTCP(dst netip.Addr, frames []byte, nseg int) {
	w.mu.Lock()
	l := w.links[dst]
	w.mu.Unlock()
	if l == nil {
		if l = w.dial(dst); l == nil {
			w.drops[dropSend].Add(uint64(nseg)) // lost, as on a network without a route
			return
		}
	}
	if !l.enqueue(frames) {
		w.drops[dropSend].Add(uint64(nseg))
	}
}

// tcpQueueMax bounds the bytes queued on a link: the peer stopped reading.
const tcpQueueMax = 32 << 20

// The writer writes at most tcpWriteChunk bytes at a time, and takes the
// link for lost when the peer takes none of a chunk for tcpWriteTimeout.
const (
	tcpWriteChunk   = 1 << 20
	tcpWriteTimeout = 5 * time.Second
)

// enqueue appends frames to l's queue for its writer.
func (l *tcpLink) enqueue(frames []byte) bool {
	l.mu.Lock()
	if l.dead || len(l.queue)+len(frames) > tcpQueueMax {
		l.mu.Unlock()
		return false
	}
	wasEmpty := len(l.queue) == 0
	l.queue = append(l.queue, frames...)
	l.mu.Unlock()
	if wasEmpty {
		select {
		case l.wake <- struct{}{}:
		default:
		}
	}
	return true
}

// write writes b a chunk at a time, each within tcpWriteTimeout.
func (l *tcpLink) write(b []byte) bool {
	for len(b) > 0 {
		n := min(len(b), tcpWriteChunk)
		_ = l.c.SetWriteDeadline(time.Now().Add(tcpWriteTimeout))
		if _, err := l.c.Write(b[:n]); err != nil {
			return false
		}
		b = b[n:]
	}
	return true
}

// writeTCP writes what senders queue on l until its reader ends or a
// write fails (the link is then closed, and its reader ends).
func (w *wirePort) writeTCP(l *tcpLink) {
	defer w.wg.Done()
	var buf []byte
	for {
		l.mu.Lock()
		buf, l.queue, l.spare = l.queue, l.spare[:0], nil
		l.mu.Unlock()
		if len(buf) == 0 {
			l.mu.Lock()
			l.spare = buf
			l.mu.Unlock()
			select {
			case <-l.wake:
				continue
			case <-l.closed:
			}
			break
		}
		if !l.write(buf) {
			l.c.Close()
			break
		}
		l.mu.Lock()
		l.spare = buf[:0]
		l.mu.Unlock()
	}
	l.mu.Lock()
	l.dead, l.queue, l.spare = true, nil, nil
	l.mu.Unlock()
}

// readUDP handles the datagrams that arrive while no thread polls the
// port. Threads that poll a CQ of the device handle them too (pollRx); the
// receiver hands over one datagram at a time, in the order they arrived.
func (w *wirePort) readUDP() {
	defer w.wg.Done()
	for !w.isClosed() {
		if err := w.rx.Serve(); err != nil {
			if errors.Is(err, net.ErrClosed) || w.isClosed() {
				return
			}
			time.Sleep(time.Millisecond)
		}
	}
}

// pollRx handles what the socket holds, in the calling thread, unless
// another thread is at it: a thread spinning on a CQ then needs no other
// thread to wake up for the packets it waits for.
func (w *wirePort) pollRx() {
	if w.rx != nil && w.users.Load() > 0 && !w.shut.Load() {
		w.rx.Poll(16)
	}
}

// datagram handles one read of the UDP socket.
func (w *wirePort) datagram(src netip.AddrPort, b, oob []byte) {
	from, port := src.Addr().Unmap(), src.Port()
	seg, kd, ok := unix.UDPControl(oob)
	if ok {
		w.bufDrops.Store(uint64(kd))
	}
	if !w.gro {
		seg = 0
	}
	if seg <= 0 || seg >= len(b) {
		w.input(from, port, b, 0, &w.rxSums)
		return
	}
	// Datagrams the kernel coalesced: most likely one batch of the
	// sender, whose identifications count from 0.
	for i, off := 0, 0; off < len(b); i, off = i+1, off+seg {
		w.input(from, port, b[off:min(off+seg, len(b))], uint16(i), &w.rxSums)
	}
}

func (w *wirePort) accept() {
	defer w.wg.Done()
	for {
		c, err := w.ln.AcceptTCP()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			time.Sleep(10 * time.Millisecond)
			continue
		}
		w.wg.Add(1)
		go func() {
			defer w.wg.Done()
			w.addLink(c, true)
		}()
	}
}

// dial connects to dst's TCP port, in the sender's thread: the first
// packet to a peer waits for the connection (at most dialTimeout). A peer
// that could not be reached is not dialled again for dialBackoff.
func (w *wirePort) dial(dst netip.Addr) *tcpLink {
	w.dialMu.Lock()
	defer w.dialMu.Unlock()
	w.mu.Lock()
	l, failed, closed := w.links[dst], w.dialFailed[dst], w.closed
	w.mu.Unlock()
	if l != nil || closed || time.Since(failed) < dialBackoff {
		return l
	}
	d := net.Dialer{Timeout: dialTimeout, LocalAddr: net.TCPAddrFromAddrPort(netip.AddrPortFrom(w.addr, 0))}
	c, err := d.Dial("tcp", netip.AddrPortFrom(dst, roce.Port).String())
	if err != nil {
		w.mu.Lock()
		w.dialFailed[dst] = time.Now()
		w.mu.Unlock()
		return nil
	}
	w.addLink(c.(*net.TCPConn), false)
	// Send on the link in use: one link per peer keeps packets in order
	// (when both ends dial at once, or a port dials itself, the other
	// connection may have been stored first).
	w.mu.Lock()
	l = w.links[dst]
	w.mu.Unlock()
	return l
}

// connect makes sure, for a TCP port, that a link to dst exists before
// the first packet: the peer, when its own port is RoCE v2 in auto mode,
// then sends over it too (kindTo), even before this side sends anything.
func (w *wirePort) connect(dst netip.Addr) {
	if w.kind == wireTCP && dst != w.addr {
		w.awaitHello(w.dial(dst))
	}
}

// awaitHello waits for the peer's hello on l (nil: none), at most
// dialTimeout.
func (w *wirePort) awaitHello(l *tcpLink) {
	if l == nil {
		return
	}
	t := time.NewTimer(dialTimeout)
	defer t.Stop()
	select {
	case <-l.hello:
	case <-t.C:
	}
}

// tcpPeers returns, for a RoCE v2 port, the peers reached over TCP.
func (w *wirePort) tcpPeers() []netip.Addr {
	if w.kind != wireRoCE {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	var peers []netip.Addr
	for a, l := range w.links {
		if l.needTCP.Load() {
			peers = append(peers, a)
		}
	}
	slices.SortFunc(peers, netip.Addr.Compare)
	return peers
}

// probe asks, for a RoCE v2 port in auto mode, whether dst has fallen back
// to TCP: it connects to dst's TCP port and waits for its hello (at most
// dialTimeout). A kernel RDMA device has no TCP port: the connection is
// refused, and UDP it is. For UD address handles, whose peer may never
// send first.
func (w *wirePort) probe(dst netip.Addr) {
	if w.kind != wireRoCE || w.ln == nil || dst == w.addr {
		return
	}
	w.mu.Lock()
	failed := w.dialFailed[dst]
	w.mu.Unlock()
	if time.Since(failed) < probeBackoff {
		return // a peer that refused lately is asked again later
	}
	w.awaitHello(w.dial(dst))
}

const (
	dialTimeout = time.Second
	dialBackoff = 200 * time.Millisecond
	// probeBackoff is how long a probe's failure (a peer without a TCP
	// port, or silent) holds: address handles made meanwhile do not wait.
	probeBackoff = 10 * time.Second
)

// addLink starts using c, a connection to a peer's port (accepted: from
// it). The ends exchange hellos first: the accepting end reads the
// dialler's, then stores the link and sends its own, so that a dialler
// that has the answer (connect) knows the peer uses the link.
func (w *wirePort) addLink(c *net.TCPConn, accepted bool) *tcpLink {
	_ = c.SetNoDelay(true)
	peer := c.RemoteAddr().(*net.TCPAddr).AddrPort().Addr().Unmap()
	l := &tcpLink{c: c, hello: make(chan struct{}), wake: make(chan struct{}, 1), closed: make(chan struct{})}
	if accepted {
		w.mu.Lock()
		if w.closed {
			w.mu.Unlock()
			c.Close()
			return nil
		}
		w.hellos[c] = true // closing the port closes it
		w.mu.Unlock()
		var h [3]byte
		_ = c.SetReadDeadline(time.Now().Add(dialTimeout))
		_, err := io.ReadFull(c, h[:])
		w.mu.Lock()
		delete(w.hellos, c)
		w.mu.Unlock()
		if err != nil || h[0] != 0 || h[1] != 1 || h[2] > helloUDP {
			c.Close() // not a peer of ours
			return nil
		}
		_ = c.SetReadDeadline(time.Time{})
		l.needTCP.Store(h[2] == helloTCPOnly)
		close(l.hello)
	}
	mode := byte(helloUDP)
	if w.kind == wireTCP {
		mode = helloTCPOnly
	}
	// The hello is queued first: nothing is sent on the link before it.
	l.queue = append(l.queue, 0, 1, mode)
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		c.Close()
		return nil
	}
	if old := w.links[peer]; old == nil {
		w.links[peer] = l // else keep the link in use; read from both
		w.nLinks.Store(int32(len(w.links)))
	}
	w.allLinks[l] = true
	w.wg.Add(2)
	w.mu.Unlock()
	go w.readTCP(peer, l)
	go w.writeTCP(l) // its first pass writes the hello
	return l
}

func (w *wirePort) readTCP(peer netip.Addr, l *tcpLink) {
	defer w.wg.Done()
	defer func() {
		l.c.Close()
		close(l.closed)
		w.mu.Lock()
		if w.links != nil && w.links[peer] == l {
			delete(w.links, peer)
			w.nLinks.Store(int32(len(w.links)))
		}
		delete(w.allLinks, l)
		w.mu.Unlock()
	}()
	// Reads take what the stream holds, up to 64 KiB: the frames a read
	// completes are handled where they lie, and a partial one moves to
	// the front to wait for the rest.
	buf := make([]byte, 1<<16+2+frameMax)
	have := 0
	var sums flowCache
	for {
		off := 0
		for have-off >= 2 {
			n := int(binary.BigEndian.Uint16(buf[off:]))
			if n > frameMax {
				return // not a peer of ours
			}
			if have-off < 2+n {
				break
			}
			if n == 1 {
				l.needTCP.Store(buf[off+2] == helloTCPOnly)
				l.helloOnce.Do(func() { close(l.hello) })
				off += 3
				continue
			}
			w.input(peer, roce.Port, buf[off+2:off+2+n], 0, &sums)
			off += 2 + n
		}
		have = copy(buf, buf[off:have])
		k, err := l.c.Read(buf[have:])
		if err != nil {
			return
		}
		have += k
	}
}

// input handles one packet from src; id is the likeliest IPv4
// identification of its datagram. sums is the calling thread's cache of
// flows (nil for RoCE v1).
func (w *wirePort) input(src netip.Addr, srcPort uint16, b []byte, id uint16, sums *flowCache) {
	w.rxPkts.Add(1)
	var p roce.Packet
	if roce.Parse(b, &p) != nil {
		w.drop(dropMalformed)
		return
	}
	if sums == nil {
		if !roce.CheckICRCv1(w.rxGRH, b) {
			w.drop(dropICRC)
			return
		}
		w.dispatch(src, &p)
		return
	}
	// The ICRC covers the IPv4 header's Identification, which a UDP
	// socket does not report: from emulated devices 0, or the datagram's
	// place in a segmented batch (id); a hashed value from rdma_rxe.
	if _, ok := sums.of(src, w.addr, srcPort).CheckAnyID(id, b); !ok {
		w.drop(dropICRC)
		return
	}
	w.dispatch(src, &p)
}

// dispatch hands a parsed and checked packet to its QP.
func (w *wirePort) dispatch(src netip.Addr, p *roce.Packet) {
	if p.Opcode == roce.CNP {
		return
	}
	if p.PKey&0x7FFF != 0x7FFF {
		w.drop(dropPKey)
		return
	}
	h := w.h
	qpn := p.DestQPN
	if qpn>>12 != h.slot {
		w.drop(dropQPN)
		return
	}
	q := h.qps[qpn&(maxQPs-1)].Load()
	if q == nil || q.qpn != qpn || q.wq == nil || q.wq.port != w {
		w.drop(dropQPN)
		return
	}
	q.wireInput(src, p)
}

// wireAddr is the IP address of a RoCE v2 GID.
func wireAddr(g verbs.GID) netip.Addr { return netip.AddrFrom16(g).Unmap() }

// psnAdd and psnDiff do PSN arithmetic modulo 2^24; psnDiff(a, b) is a-b
// as a signed distance.
func psnAdd(a, n uint32) uint32 { return (a + n) & 0xFFFFFF }
func psnDiff(a, b uint32) int32 { return int32((a-b)<<8) >> 8 }

// Transports describes the context's transports, for devinfo.
func (c *devContext) Transports() string {
	cfg := c.dev.cfg
	w := c.wire
	switch {
	case w == nil && c.noWire != nil:
		return fmt.Sprintf("memory copy on this host only (no network port: %v)", c.noWire)
	case w == nil && cfg.Addr.IsValid():
		return "memory copy (transport=copy; address " + cfg.Addr.String() + " unused)"
	case w == nil:
		return "memory copy (no address configured)"
	case w.kind == wireRoCEv1:
		if cfg.Transport == TransportRoCE {
			return fmt.Sprintf("RoCE v1 (Ethertype 0x8915) from %v", w.addr)
		}
		return fmt.Sprintf("memory copy on this host, else RoCE v1 (Ethertype 0x8915) from %v", w.addr)
	case w.kind == wireRoCE:
		if cfg.Transport == TransportRoCE {
			return fmt.Sprintf("RoCE v2 on UDP %v", netip.AddrPortFrom(w.addr, roce.Port))
		}
		if w.ln == nil {
			return fmt.Sprintf("memory copy on this host, else RoCE v2 on UDP %v (TCP %d taken: peers that fall back to TCP are not reached)", netip.AddrPortFrom(w.addr, roce.Port), roce.Port)
		}
		return fmt.Sprintf("memory copy on this host, else RoCE v2 on UDP %v, or TCP with peers that fall back to it (TCP %d)", netip.AddrPortFrom(w.addr, roce.Port), roce.Port)
	}
	if cfg.Transport == TransportTCP {
		return fmt.Sprintf("TCP on %v", netip.AddrPortFrom(w.addr, roce.Port))
	}
	if cfg.RoCE == 1 {
		return fmt.Sprintf("memory copy on this host, else TCP on %v (no raw Ethernet frames without CAP_NET_RAW; the peer must use TCP too)", netip.AddrPortFrom(w.addr, roce.Port))
	}
	return fmt.Sprintf("memory copy on this host, else TCP on %v (UDP %d taken; an emulated peer in auto mode answers over TCP, a kernel RDMA device does not)", netip.AddrPortFrom(w.addr, roce.Port), roce.Port)
}

// WireCounters returns the packet counters of the context's network port
// (nil without one): packets received and sent, the batches the sent
// packets left in (over UDP with segmentation offload, one system call
// each), and drops by reason.
func (c *devContext) WireCounters() map[string]uint64 {
	if c.wire == nil {
		return nil
	}
	return c.wire.counters()
}

// faultySend sends b's datagrams one by one as w.faults decides (tests).
func (w *wirePort) faultySend(b *txBatch, to netip.AddrPort) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for off := 0; off < b.n; off += b.seg {
		p := b.buf[off:min(off+b.seg, b.n)]
		b.sums.of(w.addr, b.dst, roce.Port).Seal(0, p)
		switch (*w.faults.Load())() {
		case 1:
			continue
		case 2:
			_, _ = w.udp.WriteToUDPAddrPort(p, to)
		case 3:
			if w.held == nil {
				w.held = append([]byte(nil), p...)
				continue
			}
		}
		_, _ = w.udp.WriteToUDPAddrPort(p, to)
		if w.held != nil {
			_, _ = w.udp.WriteToUDPAddrPort(w.held, to)
			w.held = nil
		}
	}
}

// openRaw opens the RoCE v1 port: a link-layer socket for Ethertype 0x8915
// on the interface that holds cfg.Addr.
func (w *wirePort) openRaw(cfg Config) error {
	nd, err := netdevOf(cfg.Addr)
	if err != nil {
		return err
	}
	ifc, err := net.InterfaceByName(nd.name)
	if err != nil {
		return fmt.Errorf("roce v1: %w", err)
	}
	raw, err := unix.ListenPacket(ifc.Index, roce.EtherTypeRoCEv1)
	if err != nil {
		hint := ""
		if errors.Is(err, unix.EPERM) {
			hint = " (RoCE v1 frames are raw Ethernet: they need CAP_NET_RAW; use roce=v2, or transport=tcp)"
		}
		return fmt.Errorf("roce v1: Ethertype 0x8915 on %s: %w%s", nd.name, err, hint)
	}
	w.kind, w.raw = wireRoCEv1, raw
	w.gid = verbs.GIDFromAddr(cfg.Addr)
	w.macs = map[netip.Addr][6]byte{}
	w.arpSent = map[netip.Addr]time.Time{}
	w.wg.Add(1)
	go w.readRaw()
	return nil
}

func (w *wirePort) readRaw() {
	defer w.wg.Done()
	buf := make([]byte, 1<<16)
	for {
		n, mac, err := w.raw.ReadFrom(buf)
		if w.isClosed() {
			return
		}
		if err != nil {
			if w.isClosed() {
				return
			}
			time.Sleep(time.Millisecond) // an error of the moment (ENOBUFS)
			continue
		}
		f := buf[:n]
		if n < roce.GRHLen || f[0]>>4 != 6 || f[6] != 0x1B || [16]byte(f[24:40]) != w.gid {
			w.rxPkts.Add(1)
			w.drop(dropMalformed)
			continue
		}
		pkt := f[roce.GRHLen:]
		if l := int(binary.BigEndian.Uint16(f[4:])); l <= len(pkt) {
			pkt = pkt[:l] // frames are padded to the Ethernet minimum
		}
		src := netip.AddrFrom16([16]byte(f[8:24])).Unmap()
		w.mu.Lock()
		w.macs[src] = mac
		w.mu.Unlock()
		w.rxGRH = f[:roce.GRHLen]
		w.input(src, 0, pkt, 0, nil)
	}
}

// sendV1 sends frame, a packet behind room for its GRH, to dst as a RoCE
// v1 frame.
func (w *wirePort) sendV1(frame []byte, dst netip.Addr) {
	w.txPkts.Add(1)
	w.txBatches.Add(1)
	mac, ok := w.macOf(dst)
	if !ok {
		w.drop(dropSend) // lost until the neighbour is known; retransmitted
		return
	}
	roce.PutGRH(frame, w.gid, dst.As16(), 0, 64, len(frame)-roce.GRHLen)
	roce.SealV1(frame[:roce.GRHLen], frame[roce.GRHLen:])
	// A full queue of the interface refuses the frame (ENOBUFS) where a
	// UDP socket's send would wait: wait a little for it to drain, as
	// that would, rather than lose what the next packets need.
	for wait := time.Duration(0); ; wait += v1Backoff {
		err := w.raw.WriteTo(frame, mac)
		if err == nil {
			return
		}
		if !errors.Is(err, unix.ENOBUFS) || wait >= v1MaxWait || w.isClosed() {
			w.drop(dropSend)
			return
		}
		time.Sleep(v1Backoff)
	}
}

// How long a RoCE v1 frame waits for room in the interface's queue.
const (
	v1Backoff = 50 * time.Microsecond
	v1MaxWait = 20 * time.Millisecond
)

// macOf returns the MAC of dst: learnt from its frames, else from the
// kernel's neighbour table. An unknown neighbour is asked for (a UDP
// datagram to its discard port makes the kernel resolve it), at most every
// 100 ms.
func (w *wirePort) macOf(dst netip.Addr) ([6]byte, bool) {
	w.mu.Lock()
	mac, ok := w.macs[dst]
	w.mu.Unlock()
	if ok {
		return mac, true
	}
	if ns, err := unix.Neighbours(dst.Is6()); err == nil {
		for _, n := range ns {
			if n.Addr.Unmap() == dst && n.Usable() && len(n.MAC) == 6 {
				copy(mac[:], n.MAC)
				w.mu.Lock()
				w.macs[dst] = mac
				w.mu.Unlock()
				return mac, true
			}
		}
	}
	w.mu.Lock()
	ask := time.Since(w.arpSent[dst]) > 100*time.Millisecond
	if ask {
		w.arpSent[dst] = time.Now()
	}
	w.mu.Unlock()
	if ask {
		if c, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(netip.AddrPortFrom(dst, 9))); err == nil {
			_, _ = c.Write([]byte{0})
			c.Close()
		}
	}
	return mac, false
}

func (w *wirePort) isClosed() bool { return w.shut.Load() }
