//go:build linux

package emu

import (
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/pvperf/pvperf/internal/mmio"
)

// The object table of a process. It is segment 0 of the process's slot and
// every peer maps it: it is how a requester in one process finds the
// responder's QP, memory regions, receive queue and completion queue in
// another. Nothing in it is a Go pointer; references are table indices and
// (segment, offset) pairs. All fields that another process may change are
// accessed atomically.
//
// Identifiers are unique per host and user: a process owns a slot (1..4095),
// its QP numbers are slot<<12 | index and its memory keys are
// slot<<20 | index<<8 | generation.
const (
	maxSlots    = 4096
	maxQPs      = 4096
	maxCQs      = 4096
	maxSRQs     = 1024
	maxMRs      = 4096
	maxChannels = 64
	maxContexts = 64
	maxEmuDevs  = maxContexts // one device entry per context
	maxGIDs     = 16

	chanRing  = 1024 // pending notifications per completion channel
	asyncRing = 256  // pending async events per context

	tableMagic   = 0x70767072 // "pvpr"
	tableVersion = 1
)

type tableHeader struct {
	magic       uint32
	version     uint32
	pid         uint32
	slot        uint32
	incarnation uint64 // random, tells a reused slot from its previous owner
	attention   uint32 // bumped by peers that left work for the owner (atomic)
	// owner is a robust futex word holding the thread ID of the process's
	// keeper thread: when the process dies the kernel sets FutexOwnerDied
	// in it, so peers learn of the death with one load, before any
	// socket tells them.
	owner uint32
	// The keeper thread's robust list: head {next, futex_offset,
	// list_op_pending} and one entry {next}, whose futex is owner.
	robustHead  [3]uint64
	robustEntry uint64
	_           [512 - 64]byte
}

// devInfo is what a peer needs to know about an emulated device to route
// packets to it: its GIDs, their RoCE version and the port MTU.
type devInfo struct {
	live uint32
	roce uint32 // GID type: 1 RoCE v1, 2 RoCE v2
	mtu  uint32 // active MTU enum
	ngid uint32
	gids [maxGIDs][16]byte
	// netOnly is 1 for a device whose transport is forced onto the
	// network (transport=roce or tcp): a peer in auto mode on this host
	// then reaches it over the network too, not by memory copy.
	netOnly uint32
	// qkeyViol counts the UD datagrams dropped for a wrong Q_Key, by
	// memory copy or from the network: the port's qkey_viol_cntr, 16 bits
	// that stop at 0xFFFF as rdma_rxe's do (atomic). Like the rest of
	// devInfo it belongs to one open context: each context is a device
	// of its own, with QPs and a port of its own, and another context
	// (devinfo's, another process's) counts its own datagrams.
	qkeyViol uint32
	_        [232]byte
}

// qkeyViolation counts a datagram dropped for its Q_Key.
func (d *devInfo) qkeyViolation() {
	for {
		v := load(&d.qkeyViol)
		if v >= 0xFFFF || atomic.CompareAndSwapUint32(&d.qkeyViol, v, v+1) {
			return
		}
	}
}

// qpCtx is the device's context of one QP.
type qpCtx struct {
	gen        uint32 // odd while the QP exists (atomic)
	state      uint32 // verbs.QPState (atomic)
	typ        uint32
	dev        uint32 // emulated device number
	pd         uint32
	access     uint32 // atomic
	qkey       uint32 // atomic
	mtu        uint32 // path MTU enum
	port       uint32
	minRNR     uint32
	destQPN    uint32
	recvCQ     uint32 // CQ index
	srq        uint32 // SRQ index + 1, 0 = none
	rqN        uint32
	rqStride   uint32
	rqSeg      uint32 // send buffer segment: RQ ring state at rqRing+8
	rqRing     uint64
	rqWQESeg   uint32
	_          uint32
	rqWQE      uint64
	maxRecvSGE uint32
	rqLock     uint32 // spin lock for consumers of the RQ (atomic)
	rqPSN      uint32 // next expected PSN (atomic)
	flush      uint32 // the owner must flush this QP (atomic)
	ctx        uint32 // context index for async events
	handle     uint32
	maxDestRd  uint32
	_          [132]byte
}

type cqCtx struct {
	gen      uint32
	lock     uint32
	seg      uint32
	n        uint32
	off      uint64 // buffer offset in seg
	notify   uint32 // 0 none, 1 next, 2 solicited only (atomic)
	channel  uint32 // channel index + 1, 0 = none
	overflow uint32 // atomic
	ctx      uint32
	handle   uint32
	tail     uint32 // the device's copy of prod_tail (written under lock; cqView.full reads it without)
	head     uint32 // cons_head as last read: the consumer only moves it forward (likewise)
	_        [76]byte
}

type srqCtx struct {
	gen    uint32
	lock   uint32
	seg    uint32
	n      uint32
	off    uint64
	stride uint32
	limit  uint32 // armed limit, 0 = disarmed (atomic)
	maxSGE uint32
	pd     uint32
	ctx    uint32
	handle uint32
	_      [80]byte
}

type mrEntry struct {
	// key (low half: the full key while valid, 0 otherwise) and serial
	// (high half: registration number, never reused) in one word, so a
	// requester's cache checks both with one load (atomic).
	keySerial uint64
	access    uint32
	pd        uint32
	seg       uint32
	_         uint32
	segOff    uint64
	addr      uint64
	length    uint64
	_         [16]byte
}

type chanCtx struct {
	lock uint32
	seq  uint32 // futex word, bumped for every notification (atomic)
	head uint32
	tail uint32
	_    [48]byte
	ring [chanRing]uint32 // CQ indices
}

type asyncEvent struct {
	typ     uint32
	objKind uint32 // 1 QP, 2 CQ, 3 SRQ, 4 port
	index   uint32
	gen     uint32
}

type asyncCtx struct {
	gen  uint32
	lock uint32
	seq  uint32
	head uint32
	tail uint32
	lost uint32
	_    [40]byte
	ring [asyncRing]asyncEvent
}

// Offsets of the tables inside segment 0. Each table starts at a different
// cache-line offset within its page ("colouring"): page-aligned tables would
// put entry 0 of every table, the ring states and page-aligned user buffers
// in the same L1 set, and the hot path touches all of them.
var (
	offHeader   = 0
	offDevs     = pageSize + 1*64
	offQPs      = align(offDevs+maxEmuDevs*int(unsafe.Sizeof(devInfo{})), pageSize) + 3*64
	offCQs      = align(offQPs+maxQPs*int(unsafe.Sizeof(qpCtx{})), pageSize) + 9*64
	offSRQs     = align(offCQs+maxCQs*int(unsafe.Sizeof(cqCtx{})), pageSize) + 15*64
	offMRs      = align(offSRQs+maxSRQs*int(unsafe.Sizeof(srqCtx{})), pageSize) + 21*64
	offChannels = align(offMRs+maxMRs*int(unsafe.Sizeof(mrEntry{})), pageSize) + 27*64
	offAsync    = align(offChannels+maxChannels*int(unsafe.Sizeof(chanCtx{})), pageSize) + 33*64
	tableSize   = align(offAsync+maxContexts*int(unsafe.Sizeof(asyncCtx{})), pageSize)
)

const pageSize = 4096

func align(n, a int) int { return (n + a - 1) &^ (a - 1) }

// tables is a typed view of a mapped segment 0.
type tables struct {
	hdr   *tableHeader
	devs  *[maxEmuDevs]devInfo
	qps   *[maxQPs]qpCtx
	cqs   *[maxCQs]cqCtx
	srqs  *[maxSRQs]srqCtx
	mrs   *[maxMRs]mrEntry
	chans *[maxChannels]chanCtx
	async *[maxContexts]asyncCtx
}

func viewTables(mem []byte) tables {
	if len(mem) < tableSize {
		panic("emu: object table too small")
	}
	at := func(off int) unsafe.Pointer { return unsafe.Pointer(&mem[off]) }
	return tables{
		hdr:   (*tableHeader)(at(offHeader)),
		devs:  (*[maxEmuDevs]devInfo)(at(offDevs)),
		qps:   (*[maxQPs]qpCtx)(at(offQPs)),
		cqs:   (*[maxCQs]cqCtx)(at(offCQs)),
		srqs:  (*[maxSRQs]srqCtx)(at(offSRQs)),
		mrs:   (*[maxMRs]mrEntry)(at(offMRs)),
		chans: (*[maxChannels]chanCtx)(at(offChannels)),
		async: (*[maxContexts]asyncCtx)(at(offAsync)),
	}
}

func load(p *uint32) uint32     { return atomic.LoadUint32(p) }
func store(p *uint32, v uint32) { atomic.StoreUint32(p, v) }

// spinLock is a lock word in shared memory. The holder stores its slot, so
// that a waiter can take over a lock whose holder process died.
type spinLock struct{ w *uint32 }

func (l spinLock) lock(h *host) { l.lockWithin(h, 0) }

// lockWithin takes the lock, or gives up after bound (0: never) and
// returns false. A holder keeps the lock for the few instructions of a
// delivery, so only a stopped process (SIGSTOP, a debugger) holds it
// longer: one that died has it taken over, but a stopped one may go on.
func (l spinLock) lockWithin(h *host, bound time.Duration) bool {
	me := h.slot
	if atomic.CompareAndSwapUint32(l.w, 0, me) {
		return true
	}
	start := time.Time{}
	for i := 0; ; i++ {
		v := atomic.LoadUint32(l.w)
		if v == 0 {
			if atomic.CompareAndSwapUint32(l.w, 0, me) {
				return true
			}
			continue
		}
		mmio.Backoff(i)
		if i%1024 == 1023 {
			if start.IsZero() {
				start = time.Now()
				continue
			}
			waited := time.Since(start)
			if waited > 100*time.Millisecond && v != me && h.slotDead(v) {
				if atomic.CompareAndSwapUint32(l.w, v, me) {
					return true
				}
			}
			if bound > 0 && waited > bound {
				return false
			}
		}
	}
}

func (l spinLock) unlock() { atomic.StoreUint32(l.w, 0) }

// newGen makes a table entry's generation odd (live) and different from
// every earlier one, so stale references to the entry can be detected.
func newGen(p *uint32) uint32 {
	g := load(p)
	if g%2 == 0 {
		g++
	} else {
		g += 2
	}
	store(p, g)
	return g
}

// locker adapts a shared lock word to sync.Locker.
type locker struct {
	h *host
	l spinLock
}

func (k *locker) Lock()   { k.l.lock(k.h) }
func (k *locker) Unlock() { k.l.unlock() }

// LockBounded takes the lock unless its holder keeps it past
// purgeBound (see pvrdma.BoundedLocker).
func (k *locker) LockBounded() bool { return k.l.lockWithin(k.h, purgeBound) }

// purgeBound is how long the removal of a QP's completions waits for
// the lock of its CQ before leaving them: only a stopped peer process
// holds that lock so long, and a QP closed because its peer stopped
// answering must not wait for it for ever.
const purgeBound = time.Second

func lockerOf(h *host, w *uint32) *locker { return &locker{h: h, l: spinLock{w}} }
