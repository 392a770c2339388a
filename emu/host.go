//go:build linux

package emu

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/netip"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/pvperf/pvperf/internal/unix"
)

// host is the emulated "hypervisor" of this process: the part of the
// device shared by every emulated device and context the process opens.
// It owns the process's slot (an abstract Unix socket that peers connect
// to, named after the user so that another user's processes cannot
// collide), the object table that peers map, and the segments.
//
// A process has at most one host; it exists while at least one emulated
// context is open. Nothing it creates outlives the process: segments are
// memfds and the socket is abstract.
type host struct {
	uid         int
	slot        uint32
	incarnation uint64
	ln          *net.UnixListener
	table       *segment
	tab         tables

	segs    segTable
	addrs   addrMap
	nextSeg atomic.Uint32
	arena   arena
	self    *peer

	peersMu sync.Mutex
	peers   [maxSlots]atomic.Pointer[peer]

	mu       sync.Mutex // guards the free lists and the janitor list
	freeQP   []uint32
	freeCQ   []uint32
	freeSRQ  []uint32
	freeMR   []uint32
	freeChan []uint32
	freeCtx  []uint32
	mrGen    [maxMRs]uint8
	mrSerial uint32
	nextPD   uint32

	qps   [maxQPs]atomic.Pointer[qp]
	cqs   [maxCQs]atomic.Pointer[cq]
	srqs  [maxSRQs]atomic.Pointer[srq]
	ctxs  [maxContexts]atomic.Pointer[devContext]
	chans [maxChannels]atomic.Pointer[compChannel]

	memMu sync.Mutex
	mems  map[*segment]*memory

	eng *engine

	wireMu sync.Mutex // guards wires
	wires  map[netip.Addr]*wirePort
	done   chan struct{}
	wg     sync.WaitGroup
}

var (
	hostMu   sync.Mutex
	theHost  *host
	hostRefs int
)

// socketName is the abstract socket of a slot (the leading @ makes it
// abstract in Go's net package).
func socketName(uid int, slot uint32) string { return fmt.Sprintf("@pvperf-emu.%d.%d", uid, slot) }

func acquireHost() (*host, error) {
	hostMu.Lock()
	defer hostMu.Unlock()
	if theHost == nil {
		h, err := newHost()
		if err != nil {
			return nil, err
		}
		theHost = h
	}
	hostRefs++
	return theHost, nil
}

func releaseHost() {
	hostMu.Lock()
	defer hostMu.Unlock()
	hostRefs--
	if hostRefs == 0 && theHost != nil {
		theHost.close()
		theHost = nil
	}
}

func newHost() (*host, error) {
	h := &host{uid: unix.Getuid(), done: make(chan struct{}), mems: map[*segment]*memory{}}
	h.arena.h = h
	var inc [8]byte
	_, _ = rand.Read(inc[:])
	h.incarnation = binary.LittleEndian.Uint64(inc[:])

	start, _ := rand.Int(rand.Reader, big.NewInt(maxSlots-1))
	for i := range maxSlots - 1 {
		s := uint32((start.Int64()+int64(i))%(maxSlots-1)) + 1
		ln, err := net.ListenUnix("unixpacket", &net.UnixAddr{Name: socketName(h.uid, s), Net: "unixpacket"})
		if err == nil {
			h.ln, h.slot = ln, s
			break
		}
		if !errors.Is(err, unix.EADDRINUSE) {
			return nil, fmt.Errorf("emu: listen on slot socket: %w", err)
		}
	}
	if h.ln == nil {
		return nil, fmt.Errorf("emu: no free slot: %w", unix.EBUSY)
	}
	table, err := newSegment(0, tableSize)
	if err != nil {
		h.ln.Close()
		return nil, fmt.Errorf("emu: object table: %w", err)
	}
	h.table = table
	h.tab = viewTables(table.mem)
	h.tab.hdr.magic = tableMagic
	h.tab.hdr.version = tableVersion
	h.tab.hdr.pid = uint32(os.Getpid())
	h.tab.hdr.slot = h.slot
	h.tab.hdr.incarnation = h.incarnation
	h.segs.put(table)
	h.nextSeg.Store(1)
	h.wg.Add(1)
	keeper := make(chan error)
	go h.keep(keeper)
	if err := <-keeper; err != nil {
		h.ln.Close()
		table.release()
		return nil, fmt.Errorf("emu: liveness word: %w", err)
	}
	h.self = &peer{h: h, slot: h.slot, tab: h.tab, segs: &h.segs, self: true}

	for i := maxQPs - 1; i >= 0; i-- {
		h.freeQP = append(h.freeQP, uint32(i))
	}
	for i := maxCQs - 1; i >= 0; i-- {
		h.freeCQ = append(h.freeCQ, uint32(i))
	}
	for i := maxSRQs - 1; i >= 0; i-- {
		h.freeSRQ = append(h.freeSRQ, uint32(i))
	}
	for i := maxMRs - 1; i >= 0; i-- {
		h.freeMR = append(h.freeMR, uint32(i))
	}
	for i := maxChannels - 1; i >= 0; i-- {
		h.freeChan = append(h.freeChan, uint32(i))
	}
	for i := maxContexts - 1; i >= 0; i-- {
		h.freeCtx = append(h.freeCtx, uint32(i))
	}
	h.eng = newEngine(h)
	h.eng.start()
	h.wg.Add(1)
	go h.serve()
	return h, nil
}

// keep runs on a thread of its own for the host's lifetime and registers
// the table's owner word as a robust futex of that thread, so that the
// kernel marks it when the process dies.
func (h *host) keep(ready chan<- error) {
	defer h.wg.Done()
	runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
	hdr := h.tab.hdr
	store(&hdr.owner, uint32(unix.Gettid()))
	head := uintptr(unsafe.Pointer(&hdr.robustHead))
	entry := uintptr(unsafe.Pointer(&hdr.robustEntry))
	hdr.robustHead[0] = uint64(entry)
	hdr.robustHead[1] = uint64(uintptr(unsafe.Pointer(&hdr.owner)) - entry)
	hdr.robustEntry = uint64(head)
	if err := unix.SetRobustList(head); err != nil {
		ready <- err
		return
	}
	ready <- nil
	<-h.done
	_ = unix.SetRobustList(0)
	store(&hdr.owner, unix.FutexOwnerDied)
}

// alive reports whether the process owning a mapped table still runs.
func alive(t tables) bool { return load(&t.hdr.owner)&unix.FutexOwnerDied == 0 }

func (h *host) close() {
	close(h.done)
	h.ln.Close()
	h.eng.stop()
	for i := range h.peers {
		if p := h.peers[i].Load(); p != nil {
			p.close() // ends its watcher goroutine
		}
	}
	h.wg.Wait()
	h.arena.release()
	for _, s := range h.segs.all() {
		s.release()
	}
}

func (h *host) newSegment(n int) (*segment, error) {
	id := h.nextSeg.Add(1) - 1
	s, err := newSegment(id, n)
	if err != nil {
		return nil, err
	}
	h.segs.put(s)
	h.addrs.add(s)
	return s, nil
}

// dropSegment forgets a local segment and releases it once no executor of
// this process can still be using it.
func (h *host) dropSegment(s *segment) {
	h.segs.remove(s.id)
	h.addrs.del(s)
	h.quiesce()
	s.release()
}

// quiesce waits until every work request being executed in this process
// when it was called has finished. Every execution runs under the send lock
// of the QP it belongs to, so taking each lock once is enough.
func (h *host) quiesce() {
	for i := range h.qps {
		if q := h.qps[i].Load(); q != nil {
			q.LockSend()
			q.UnlockSend()
			if q.wq != nil {
				// The network port's receive goroutine responds
				// under rmu.
				q.wq.barrier()
			}
		}
	}
}

func (h *host) newPD() uint32 {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.nextPD++
	return h.nextPD
}

func pop(l *[]uint32) (uint32, bool) {
	if len(*l) == 0 {
		return 0, false
	}
	v := (*l)[len(*l)-1]
	*l = (*l)[:len(*l)-1]
	return v, true
}

// serve answers peers: "W" keeps a connection open as a liveness watch,
// "S" + segment id returns the segment's memfd.
func (h *host) serve() {
	defer h.wg.Done()
	for {
		c, err := h.ln.AcceptUnix()
		if err != nil {
			select {
			case <-h.done:
				return
			default:
			}
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				continue
			}
			time.Sleep(10 * time.Millisecond)
			continue
		}
		uid, err := unix.PeerUID(c)
		if err != nil || uid != h.uid {
			c.Close() // another user may not reach this process's memory
			continue
		}
		h.wg.Add(1)
		go h.handle(c)
	}
}

func (h *host) handle(c *net.UnixConn) {
	defer h.wg.Done()
	defer c.Close()
	go func() {
		<-h.done
		c.Close()
	}()
	buf := make([]byte, 64)
	n, err := c.Read(buf)
	if err != nil || n == 0 {
		return
	}
	switch buf[0] {
	case 'W':
		for {
			if _, err := c.Read(buf); err != nil {
				return
			}
		}
	case 'S':
		if n < 5 {
			return
		}
		id := binary.LittleEndian.Uint32(buf[1:5])
		var reply [9]byte
		s := h.segs.get(id)
		if s == nil {
			reply[0] = 1
			_, _ = c.Write(reply[:])
			return
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.fd < 0 {
			reply[0] = 1
			_, _ = c.Write(reply[:])
			return
		}
		binary.LittleEndian.PutUint64(reply[1:], uint64(len(s.mem)))
		_, _, _ = c.WriteMsgUnix(reply[:], unix.UnixRights(s.fd), nil)
	}
}

// slotDead reports whether the process owning slot is known to be gone.
func (h *host) slotDead(slot uint32) bool {
	if slot == h.slot || slot >= maxSlots {
		return false
	}
	p := h.peers[slot].Load()
	return p != nil && p.dead.Load()
}

var errUnreachable = errors.New("peer unreachable")

// peer returns the process owning slot, connecting to it the first time.
// It fails when no live process owns the slot.
func (h *host) peer(slot uint32) (*peer, error) {
	if slot == h.slot {
		return h.self, nil
	}
	if slot == 0 || slot >= maxSlots {
		return nil, errUnreachable
	}
	if p := h.peers[slot].Load(); p != nil && !p.dead.Load() {
		if alive(p.tab) {
			return p, nil
		}
		p.dead.Store(true)
	}
	h.peersMu.Lock()
	defer h.peersMu.Unlock()
	old := h.peers[slot].Load()
	if old != nil {
		if !old.dead.Load() {
			return old, nil
		}
		if time.Since(time.Unix(0, old.diedAt.Load())) < 20*time.Millisecond {
			return nil, errUnreachable // do not hammer a slot that just failed
		}
	}
	p, err := h.dial(slot)
	if err != nil {
		dead := &peer{h: h, slot: slot}
		dead.diedAt.Store(time.Now().UnixNano())
		dead.dead.Store(true)
		h.peers[slot].Store(dead)
		if old != nil {
			h.retire(old)
		}
		return nil, errUnreachable
	}
	h.peers[slot].Store(p)
	if old != nil {
		h.retire(old)
	}
	return p, nil
}

func (h *host) dialSlot(slot uint32) (*net.UnixConn, error) {
	c, err := net.DialUnix("unixpacket", nil, &net.UnixAddr{Name: socketName(h.uid, slot), Net: "unixpacket"})
	if err != nil {
		return nil, err
	}
	if uid, err := unix.PeerUID(c); err != nil || uid != h.uid {
		c.Close()
		return nil, fmt.Errorf("emu: slot %d is owned by another user", slot)
	}
	return c, nil
}

func (h *host) dial(slot uint32) (*peer, error) {
	w, err := h.dialSlot(slot)
	if err != nil {
		return nil, err
	}
	if _, err := w.Write([]byte{'W'}); err != nil {
		w.Close()
		return nil, err
	}
	p := &peer{h: h, slot: slot, watch: w, segs: &segTable{}}
	table, err := p.fetch(0)
	if err != nil || len(table.mem) < tableSize {
		w.Close()
		if table != nil {
			table.release()
		}
		return nil, errUnreachable
	}
	p.tab = viewTables(table.mem)
	if p.tab.hdr.magic != tableMagic || p.tab.hdr.version != tableVersion || p.tab.hdr.slot != slot || !alive(p.tab) {
		w.Close()
		table.release()
		return nil, errUnreachable
	}
	p.segs.put(table)
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		var b [1]byte
		_, _ = w.Read(b[:]) // returns when the peer process exits
		p.diedAt.Store(time.Now().UnixNano())
		p.dead.Store(true)
	}()
	return p, nil
}

// retire unmaps a dead peer's memory once no execution can touch it.
func (h *host) retire(p *peer) {
	go func() {
		h.quiesce()
		p.close()
	}()
}

// peer is another process (or this one) seen through its mapped table and
// segments.
type peer struct {
	h         *host
	slot      uint32
	self      bool
	tab       tables
	segs      *segTable
	watch     *net.UnixConn
	dead      atomic.Bool
	diedAt    atomic.Int64 // time.Now().UnixNano() when it was found dead (written by the watch goroutine)
	fetchMu   sync.Mutex
	closeOnce sync.Once
}

func (p *peer) close() {
	if p.self {
		return
	}
	p.closeOnce.Do(func() {
		p.dead.Store(true)
		if p.watch != nil {
			p.watch.Close()
		}
		if p.segs != nil {
			for _, s := range p.segs.all() {
				s.release()
			}
		}
	})
}

// seg returns segment id of the peer, mapping it on first use.
func (p *peer) seg(id uint32) *segment {
	if s := p.segs.get(id); s != nil {
		return s
	}
	if p.self || p.dead.Load() {
		return nil
	}
	p.fetchMu.Lock()
	defer p.fetchMu.Unlock()
	if s := p.segs.get(id); s != nil {
		return s
	}
	s, err := p.fetch(id)
	if err != nil {
		return nil
	}
	p.segs.put(s)
	return s
}

// bytes returns n bytes at offset off of segment id, or nil.
func (p *peer) bytes(id uint32, off uint64, n int) []byte {
	s := p.seg(id)
	if s == nil || off > uint64(len(s.mem)) || uint64(n) > uint64(len(s.mem))-off {
		return nil
	}
	return s.mem[off : off+uint64(n) : off+uint64(n)]
}

func (p *peer) fetch(id uint32) (*segment, error) {
	c, err := p.h.dialSlot(p.slot)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	var req [5]byte
	req[0] = 'S'
	binary.LittleEndian.PutUint32(req[1:], id)
	if _, err := c.Write(req[:]); err != nil {
		return nil, err
	}
	var reply [9]byte
	oob := make([]byte, unix.CmsgSpace(1))
	n, oobn, _, _, err := c.ReadMsgUnix(reply[:], oob)
	if err != nil {
		return nil, err
	}
	fds, err := unix.ParseUnixRights(oob[:oobn])
	if err != nil {
		return nil, err
	}
	if n != len(reply) || reply[0] != 0 || len(fds) != 1 {
		for _, fd := range fds {
			_ = unix.Close(fd)
		}
		return nil, errUnreachable
	}
	size := binary.LittleEndian.Uint64(reply[1:])
	if size == 0 || size > 1<<40 {
		_ = unix.Close(fds[0])
		return nil, errUnreachable
	}
	return mapSegment(id, fds[0], int(size))
}
