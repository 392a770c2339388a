package pvrdma

import (
	"encoding/binary"
	"sync/atomic"

	"sync"

	"github.com/pvperf/pvperf/internal/mmio"
	"github.com/pvperf/pvperf/internal/unix"
	"github.com/pvperf/pvperf/verbs"
)

// QPTable maps the device QP handles found in CQEs (low 16 bits) to QP
// numbers, as the driver's qp_tbl does. A context has one, shared by its CQs.
type QPTable struct {
	qpn [1 << 16]atomic.Uint32
}

// Set records the QP number of a handle; Clear forgets it.
func (t *QPTable) Set(handle, qpn uint32) { t.qpn[handle&0xFFFF].Store(qpn | 1<<31) }
func (t *QPTable) Clear(handle uint32)    { t.qpn[handle&0xFFFF].Store(0) }

func (t *QPTable) lookup(handle uint64) (uint32, bool) {
	v := t.qpn[handle&0xFFFF].Load()
	return v &^ (1 << 31), v != 0
}

// CQConfig is what a backend tells NewCQ about a CQ it created.
type CQConfig struct {
	Handle  uint32 // cqn, used in CQ doorbells
	Entries int    // ring size, a power of two
	Buf     []byte // CQBufLen(Entries) bytes, page-aligned, zeroed
	UAR     UAR
	QPs     *QPTable
}

// CQ is the driver side of a pvrdma CQ: it consumes CQEs the device wrote.
// Poll is safe for concurrent use.
type CQ struct {
	_      pad
	mu     mmio.SpinLock
	ring   Ring
	cqes   []byte
	handle uint32
	closed atomic.Bool
	uar    UAR
	qps    *QPTable
	_      pad
}

// NewCQ builds the driver side of a CQ over its buffer.
func NewCQ(c CQConfig) *CQ {
	return &CQ{
		ring:   NewRing(c.Buf, RxRingOffset, c.Entries),
		cqes:   c.Buf[PageSize : PageSize+c.Entries*CQESize],
		handle: c.Handle,
		uar:    c.UAR,
		qps:    c.QPs,
	}
}

var (
	errCQCorrupt = verbs.NewOpError("poll cq", "", verbs.Errorf(unix.EINVAL, "ring indices corrupt"))
	errCQUnknown = verbs.NewOpError("poll cq", "", verbs.Errorf(unix.EINVAL, "completion for an unknown qp"))
	errCQClosed  = verbs.NewOpError("poll cq", "", verbs.ErrClosed)
	errSRQClosed = verbs.NewOpError("post srq recv", "", verbs.ErrClosed)
)

// Shutdown makes every later Poll fail with ErrClosed, after polls in
// progress have returned.
func (c *CQ) Shutdown() {
	c.mu.Lock()
	c.closed.Store(true)
	c.mu.Unlock()
}

// Poll moves up to len(wc) completions into wc. When the ring is empty it
// rings the POLL doorbell, giving the device a chance to produce more, and
// looks again once, exactly as the rdma-core provider does for each entry.
func (c *CQ) Poll(wc []verbs.WC) (int, error) {
	// An empty ring is seen without taking the lock, so that a thread
	// spinning on an empty CQ does not pay a locked instruction per look.
	if len(wc) > 0 && c.ring.Producer() == c.ring.Consumer() {
		c.uar.Write32(UARCQOffset, c.handle|UARCQPoll)
		if c.ring.Producer() == c.ring.Consumer() {
			if c.closed.Load() {
				return 0, errCQClosed
			}
			return 0, nil
		}
	}
	c.mu.Lock()
	if c.closed.Load() {
		c.mu.Unlock()
		return 0, errCQClosed
	}
	head := c.ring.Consumer()
	n := 0
	tried := false
	for n < len(wc) {
		tail := c.ring.Producer()
		if !c.ring.Valid(tail) || !c.ring.Valid(head) {
			if n > 0 {
				c.ring.SetConsumer(head)
			}
			c.mu.Unlock()
			return n, errCQCorrupt
		}
		if tail == head {
			if tried {
				break
			}
			tried = true
			c.uar.Write32(UARCQOffset, c.handle|UARCQPoll)
			continue
		}
		off := c.ring.Slot(head) * CQESize
		if err := c.decode(c.cqes[off:off+CQESize:off+CQESize], &wc[n]); err != nil {
			c.ring.SetConsumer(head)
			c.mu.Unlock()
			return n, err
		}
		head = c.ring.Next(head)
		n++
		tried = false // as rdma-core: each entry may ring POLL once
	}
	if n > 0 {
		c.ring.SetConsumer(head)
	}
	c.mu.Unlock()
	return n, nil
}

func (c *CQ) decode(b []byte, wc *verbs.WC) error {
	b = b[:CQESize]
	qpn, ok := c.qps.lookup(binary.LittleEndian.Uint64(b[cqeQP:]))
	if !ok {
		return errCQUnknown
	}
	wc.ID = binary.LittleEndian.Uint64(b[cqeWRID:])
	wc.QPNum = qpn
	wc.Opcode = verbs.WCOpcode(binary.LittleEndian.Uint32(b[cqeOpcode:]))
	wc.Status = verbs.WCStatus(binary.LittleEndian.Uint32(b[cqeStatus:]))
	wc.ByteLen = binary.LittleEndian.Uint32(b[cqeByteLen:])
	wc.Imm = binary.BigEndian.Uint32(b[cqeImm:])
	wc.SrcQP = binary.LittleEndian.Uint32(b[cqeSrcQP:])
	wc.Flags = verbs.WCFlags(binary.LittleEndian.Uint32(b[cqeFlags:]))
	wc.VendorErr = binary.LittleEndian.Uint32(b[cqeVendorErr:])
	wc.PKeyIndex = binary.LittleEndian.Uint16(b[cqePKeyIndex:])
	wc.SLID = binary.LittleEndian.Uint16(b[cqeSLID:])
	wc.SL = b[cqeSL]
	wc.DLIDPathBits = b[cqeDLIDPath]
	return nil
}

// ReqNotify rings the ARM doorbell: the next completion (or the next
// solicited one) produces a notification. No system call is involved.
func (c *CQ) ReqNotify(solicitedOnly bool) {
	v := UARCQArm
	if solicitedOnly {
		v = UARCQArmSol
	}
	c.uar.Write32(UARCQOffset, c.handle|v)
}

// A BoundedLocker is a device lock that may be given up on: LockBounded
// reports whether it took the lock (which Unlock then releases).
type BoundedLocker interface {
	sync.Locker
	LockBounded() bool
}

// Purge removes the CQEs of one QP handle from the ring, compacting it, as
// the driver does after destroying or resetting a QP. The device must not
// write CQEs meanwhile: Purge holds device, the device's lock for this CQ,
// while it works (taken after the driver's own lock). A BoundedLocker
// that gives up leaves the ring as it is, and Purge returns false.
func (c *CQ) Purge(handle uint32, device sync.Locker) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if b, ok := device.(BoundedLocker); ok {
		if !b.LockBounded() {
			return false
		}
	} else {
		device.Lock()
	}
	defer device.Unlock()
	head := c.ring.Consumer()
	tail := c.ring.Producer()
	if !c.ring.Valid(head) || !c.ring.Valid(tail) {
		return true
	}
	// Walk from newest to oldest, moving kept CQEs towards the tail.
	keep := tail
	for idx := tail; idx != head; {
		idx = (idx - 1) & c.ring.mask
		off := c.ring.Slot(idx) * CQESize
		if uint32(binary.LittleEndian.Uint64(c.cqes[off+cqeQP:]))&0xFFFF == handle&0xFFFF {
			continue
		}
		keep = (keep - 1) & c.ring.mask
		if keep != idx {
			dst := c.ring.Slot(keep) * CQESize
			copy(c.cqes[dst:dst+CQESize], c.cqes[off:off+CQESize])
		}
	}
	c.ring.SetConsumer(keep)
	return true
}

// SRQConfig is what a backend tells NewSRQ about an SRQ it created.
type SRQConfig struct {
	Handle  uint32 // srqn, used in SRQ doorbells
	Entries int    // ring size, a power of two
	Stride  int    // RecvStride(MaxSGE)
	MaxSGE  int
	Buf     []byte // SRQBufLen(Entries, Stride) bytes, page-aligned, zeroed
	UAR     UAR
}

// SRQ is the driver side of a pvrdma shared receive queue.
type SRQ struct {
	_      pad
	mu     mmio.SpinLock
	q      Queue
	handle uint32
	maxSGE int
	uar    UAR
	closed bool
	_      pad
}

// NewSRQ builds the driver side of an SRQ over its buffer.
func NewSRQ(c SRQConfig) *SRQ {
	return &SRQ{
		q:      NewQueue(c.Buf, RxRingOffset, c.Buf[PageSize:], c.Entries, c.Stride),
		handle: c.Handle,
		maxSGE: c.MaxSGE,
		uar:    c.UAR,
	}
}

// PostRecv encodes wrs into the SRQ and rings the SRQ doorbell.
func (s *SRQ) PostRecv(wrs []verbs.RecvWR) (int, error) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return 0, errSRQClosed
	}
	n, err := postRecv(&s.q, wrs, s.maxSGE)
	if n > 0 {
		s.uar.Write32(UARSRQOffset, s.handle|UARSRQRecv)
	}
	s.mu.Unlock()
	return n, err
}

// Shutdown makes every later post fail with ErrClosed.
func (s *SRQ) Shutdown() {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
}

// AH is an address handle of the pvrdma data path: nothing but an address
// vector built in user space (vmw_pvrdma makes no system call for it).
type AH struct {
	attr verbs.AHAttr
	av   AV
}

// NewAH builds the AV of attr for a PD number and a destination MAC.
func NewAH(attr verbs.AHAttr, pdn uint32, dmac [6]byte) *AH {
	h := &AH{attr: attr}
	h.av = AV{
		PortPD:            pdn | uint32(attr.Port)<<24,
		SLTClassFlowLabel: uint32(attr.GRH.TrafficClass)<<20 | attr.GRH.FlowLabel&0xFFFFF,
		DGID:              attr.GRH.DGID,
		SrcPathBits:       attr.SrcPathBits | 0x80,
		GIDIndex:          attr.GRH.SGIDIndex,
		StatRate:          0,
		HopLimit:          attr.GRH.HopLimit,
		DMAC:              dmac,
	}
	return h
}

// Attr returns the attributes the handle was created with.
func (h *AH) Attr() verbs.AHAttr { return h.attr }

// AddressVector returns the handle's AV.
func (h *AH) AddressVector() *AV { return &h.av }

// MACFromGID derives the MAC address embedded in a link-local EUI-64 GID.
func MACFromGID(g verbs.GID) [6]byte {
	return [6]byte{g[8] ^ 0x02, g[9], g[10], g[13], g[14], g[15]}
}
