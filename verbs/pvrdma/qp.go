package pvrdma

import (
	"encoding/binary"
	"math/bits"
	"sync/atomic"
	"unsafe"

	"github.com/pvperf/pvperf/internal/mmio"
	"github.com/pvperf/pvperf/internal/unix"
	"github.com/pvperf/pvperf/verbs"
)

// UAR is the doorbell page of a context. Write32 is one 32-bit store at a
// byte offset: an MMIO write on a real device, a call into the device model
// in the emulator.
type UAR interface {
	Write32(offset, value uint32)
}

// Resolver turns a virtual address into the bytes behind it. The driver
// needs it only to copy inline payloads into WQEs.
type Resolver interface {
	Resolve(addr uint64, n int) ([]byte, bool)
}

// AddressVector is implemented by the address handles of devices that use
// the pvrdma data path: a UD work request carries the handle's AV.
type AddressVector interface {
	verbs.AH
	AddressVector() *AV
}

// Queue is a ring together with the WQEs it indexes.
type Queue struct {
	Ring
	wqes   []byte
	base   unsafe.Pointer // &wqes[0]
	stride int
	shift  uint // log2(stride)
}

// NewQueue returns the queue whose ring state is at buf[ringOff] and whose
// n WQEs of stride bytes (a power of two) start at wqes[0].
func NewQueue(buf []byte, ringOff int, wqes []byte, n, stride int) Queue {
	if stride <= 0 || stride&(stride-1) != 0 {
		panic("pvrdma: WQE stride not a power of two")
	}
	w := wqes[: n*stride : n*stride]
	return Queue{Ring: NewRing(buf, ringOff, n), wqes: w, base: unsafe.Pointer(&w[0]), stride: stride, shift: uint(bits.TrailingZeros(uint(stride)))}
}

// WQE returns the WQE at ring index idx.
func (q *Queue) WQE(idx uint32) []byte {
	// idx&(n-1) < n, so the slot lies inside wqes.
	return (*[1 << 30]byte)(unsafe.Add(q.base, uintptr(idx&(q.n-1))<<q.shift))[:q.stride:q.stride]
}

// Stride returns the WQE size.
func (q *Queue) Stride() int { return q.stride }

// QPConfig is what a backend tells NewQP about a QP it created.
type QPConfig struct {
	Type     verbs.QPType
	Handle   uint32 // device handle, used in doorbells and CQEs
	Layout   QPLayout
	SendBuf  []byte // Layout.SendBufLen bytes, page-aligned, zeroed
	RecvBuf  []byte // Layout.RecvBufLen bytes; nil with an SRQ
	Cap      verbs.QPCap
	UAR      UAR
	Resolver Resolver // for inline sends; nil when the device has no inline data (ErrNotSupported)
	Atomics  bool     // the device executes atomic operations
}

// QP is the driver side of a pvrdma QP's work queues: it encodes work
// requests into the rings and rings the doorbells. It is safe for concurrent
// use: posts to the send queue are serialized by one lock and posts to the
// receive queue by another, as in rdma-core's provider.
type QP struct {
	_      pad
	smu    mmio.SpinLock
	sq     Queue
	uar    UAR
	res    Resolver
	handle uint32
	typ    verbs.QPType
	atom   bool
	srq    bool
	opMask uint8 // bit op set when this QP may post opcode op
	closed bool  // under both locks
	cap    verbs.QPCap
	_      pad
	rmu    mmio.SpinLock
	rq     Queue
	state  atomic.Uint32
	_      pad
}

// pad keeps the fields that one thread writes on the hot path (a lock and
// the ring it guards) off the cache lines of other objects: two QPs or CQs
// polled by two threads must not share a line.
type pad [64]byte

// NewQP builds the driver side of a QP over its buffers.
func NewQP(c QPConfig) *QP {
	q := &QP{handle: c.Handle, typ: c.Type, cap: c.Cap, srq: c.Layout.RecvWR == 0, atom: c.Atomics, uar: c.UAR, res: c.Resolver}
	for op := verbs.OpRDMAWrite; op <= verbs.OpAtomicFetchAdd; op++ {
		if opcodeAllowed(q.typ, op) && (q.atom || op < verbs.OpAtomicCmpSwap) {
			q.opMask |= 1 << op
		}
	}
	q.sq = NewQueue(c.SendBuf, TxRingOffset, c.SendBuf[PageSize:], c.Layout.SendWR, c.Layout.SendStride)
	if !q.srq {
		q.rq = NewQueue(c.SendBuf, RxRingOffset, c.RecvBuf, c.Layout.RecvWR, c.Layout.RecvStride)
	}
	return q
}

// Handle returns the device QP handle.
func (q *QP) Handle() uint32 { return q.handle }

// State returns the state the driver believes the QP is in.
func (q *QP) State() verbs.QPState { return verbs.QPState(q.state.Load()) }

// SetState records a state change made by a successful modify. Moving to
// RESET empties both rings, as the driver must after MODIFY_QP(RESET).
// The state changes with both rings' locks held, so no post slips into a
// ring between its reset and the new state.
func (q *QP) SetState(s verbs.QPState) {
	if s != verbs.StateReset {
		q.state.Store(uint32(s))
		return
	}
	q.smu.Lock()
	q.rmu.Lock()
	q.state.Store(uint32(s))
	q.sq.Reset()
	if !q.srq {
		q.rq.Reset()
	}
	q.rmu.Unlock()
	q.smu.Unlock()
}

// Shutdown makes every later post fail with ErrClosed. It waits for posts
// in progress, so the buffers can be released once it returns.
func (q *QP) Shutdown() {
	q.smu.Lock()
	q.rmu.Lock()
	q.closed = true
	q.rmu.Unlock()
	q.smu.Unlock()
}

// LockSend and UnlockSend take the send-queue lock, for a device model that
// executes the send queue outside a doorbell.
func (q *QP) LockSend()   { q.smu.Lock() }
func (q *QP) UnlockSend() { q.smu.Unlock() }

// Preallocated errors of the post path, so that posting never allocates.
var (
	errSendState   = verbs.NewOpError("post send", "", verbs.Errorf(unix.EINVAL, "qp is not ready to send"))
	errRecvState   = verbs.NewOpError("post recv", "", verbs.Errorf(unix.EINVAL, "qp is in the RESET state"))
	errRecvSRQ     = verbs.NewOpError("post recv", "", verbs.Errorf(unix.EINVAL, "qp receives from a shared receive queue"))
	errSendSGE     = verbs.NewOpError("post send", "", verbs.Errorf(unix.EINVAL, "too many scatter/gather elements"))
	errRecvSGE     = verbs.NewOpError("post recv", "", verbs.Errorf(unix.EINVAL, "too many scatter/gather elements"))
	errOpcode      = verbs.NewOpError("post send", "", verbs.Errorf(unix.EINVAL, "opcode not valid for this qp type"))
	errAtomics     = verbs.NewOpError("post send", "", verbs.Errorf(verbs.ErrNotSupported, "atomic operations"))
	errInline      = verbs.NewOpError("post send", "", verbs.Errorf(verbs.ErrNotSupported, "inline data"))
	errInlineSize  = verbs.NewOpError("post send", "", verbs.Errorf(unix.EINVAL, "inline data larger than max_inline_data"))
	errInlineAddr  = verbs.NewOpError("post send", "", verbs.Errorf(unix.EFAULT, "inline data address not mapped"))
	errNoAH        = verbs.NewOpError("post send", "", verbs.Errorf(unix.EINVAL, "ud work request without an address handle of this device"))
	errRingCorrupt = verbs.NewOpError("post", "", verbs.Errorf(unix.EINVAL, "ring indices corrupt"))
	errSendFull    = verbs.NewOpError("post send", "", verbs.ErrQueueFull)
	errRecvFull    = verbs.NewOpError("post recv", "", verbs.ErrQueueFull)
	errSendClosed  = verbs.NewOpError("post send", "", verbs.ErrClosed)
	errRecvClosed  = verbs.NewOpError("post recv", "", verbs.ErrClosed)
)

func sendAllowed(s verbs.QPState) bool {
	return s == verbs.StateRTS || s == verbs.StateSQD || s == verbs.StateSQE || s == verbs.StateErr
}

func opcodeAllowed(t verbs.QPType, op verbs.WROpcode) bool {
	switch t {
	case verbs.RC:
		return op <= verbs.OpAtomicFetchAdd
	case verbs.UC:
		return op <= verbs.OpSendImm
	case verbs.UD:
		return op == verbs.OpSend || op == verbs.OpSendImm
	}
	return false
}

// PostSend encodes wrs into the send queue and rings the send doorbell once.
func (q *QP) PostSend(wrs []verbs.SendWR) (int, error) {
	q.smu.Lock()
	if q.closed {
		q.smu.Unlock()
		return 0, errSendClosed
	}
	if !sendAllowed(verbs.QPState(q.state.Load())) {
		q.smu.Unlock()
		return 0, errSendState
	}
	tail := q.sq.Producer()
	head := q.sq.Consumer()
	if !q.sq.Valid(tail) || !q.sq.Valid(head) {
		q.smu.Unlock()
		return 0, errRingCorrupt
	}
	n := 0
	var err error
	for i := range wrs {
		if q.sq.Full(tail, head) {
			head = q.sq.Consumer()
			if !q.sq.Valid(head) {
				err = errRingCorrupt
				break
			}
			if q.sq.Full(tail, head) {
				err = errSendFull
				break
			}
		}
		if err = q.encodeSend(q.sq.WQE(tail), &wrs[i]); err != nil {
			break
		}
		tail = q.sq.Next(tail)
		n++
	}
	if n > 0 {
		q.sq.SetProducer(tail)
		q.uar.Write32(UARQPOffset, q.handle|UARQPSend)
	}
	q.smu.Unlock()
	return n, err
}

func (q *QP) encodeSend(w []byte, wr *verbs.SendWR) error {
	if wr.Opcode > verbs.OpAtomicFetchAdd || q.opMask>>wr.Opcode&1 == 0 {
		if wr.Opcode <= verbs.OpAtomicFetchAdd && opcodeAllowed(q.typ, wr.Opcode) {
			return errAtomics
		}
		return errOpcode
	}
	w = w[: SendHdrSize+SGESize : len(w)] // every send WQE holds at least one SGE
	nsge := uint32(len(wr.SGL))
	var total uint32
	switch {
	case wr.Flags&verbs.SendInline != 0:
		if q.res == nil {
			return errInline // the device has no inline data
		}
		for i := range wr.SGL {
			total += wr.SGL[i].Length
		}
		if int(total) > q.cap.MaxInlineData || q.cap.MaxInlineData == 0 {
			return errInlineSize // a QP without inline data refuses even 0 bytes
		}
		body := w[SendHdrSize:cap(w)][:total]
		for i := range wr.SGL {
			s := &wr.SGL[i]
			src, ok := q.res.Resolve(s.Addr, int(s.Length))
			if !ok {
				return errInlineAddr
			}
			body = body[copy(body, src):]
		}
		nsge = 0
	case nsge == 1:
		s := &wr.SGL[0]
		binary.LittleEndian.PutUint64(w[SendHdrSize:], s.Addr)
		binary.LittleEndian.PutUint32(w[SendHdrSize+8:], s.Length)
		binary.LittleEndian.PutUint32(w[SendHdrSize+12:], s.LKey)
	default:
		if len(wr.SGL) > q.cap.MaxSendSGE {
			return errSendSGE
		}
		sges := w[SendHdrSize:cap(w)][:len(wr.SGL)*SGESize]
		for i := range wr.SGL {
			encodeSGE(sges[i*SGESize:], &wr.SGL[i])
		}
	}
	binary.LittleEndian.PutUint64(w[sqWRID:], wr.ID)
	binary.LittleEndian.PutUint32(w[sqNumSGE:], nsge)
	binary.LittleEndian.PutUint32(w[sqTotalLen:], total)
	binary.LittleEndian.PutUint32(w[sqOpcode:], uint32(wr.Opcode))
	binary.LittleEndian.PutUint32(w[sqFlags:], uint32(wr.Flags))
	var imm uint32
	if wr.Opcode == verbs.OpRDMAWriteImm || wr.Opcode == verbs.OpSendImm {
		imm = wr.Imm
	}
	binary.BigEndian.PutUint32(w[sqImm:], imm)
	binary.LittleEndian.PutUint32(w[sqReserved:], 0)
	switch wr.Opcode {
	case verbs.OpRDMAWrite, verbs.OpRDMAWriteImm, verbs.OpRDMARead:
		binary.LittleEndian.PutUint64(w[sqRemoteAddr:], wr.RemoteAddr)
		binary.LittleEndian.PutUint64(w[sqRKey:], uint64(wr.RKey)) // rkey and its 4 reserved bytes
		clear(w[48:SendHdrSize])
	case verbs.OpAtomicCmpSwap, verbs.OpAtomicFetchAdd:
		binary.LittleEndian.PutUint64(w[sqAtomicAddr:], wr.RemoteAddr)
		binary.LittleEndian.PutUint64(w[sqCompareAdd:], wr.CompareAdd)
		binary.LittleEndian.PutUint64(w[sqSwap:], wr.Swap)
		binary.LittleEndian.PutUint64(w[sqAtomicRKey:], uint64(wr.RKey))
		clear(w[64:SendHdrSize])
	default:
		clear(w[sqUnion:SendHdrSize])
		if q.typ == verbs.UD {
			ah, ok := wr.AH.(AddressVector)
			if !ok {
				return errNoAH
			}
			binary.LittleEndian.PutUint32(w[sqRemoteQPN:], wr.RemoteQPN)
			binary.LittleEndian.PutUint32(w[sqRemoteQKey:], wr.RemoteQKey)
			ah.AddressVector().Encode(w[sqAV:])
		}
	}
	return nil
}

// PostRecv encodes wrs into the receive queue and rings the receive doorbell.
func (q *QP) PostRecv(wrs []verbs.RecvWR) (int, error) {
	if q.srq {
		return 0, errRecvSRQ
	}
	q.rmu.Lock()
	if q.closed {
		q.rmu.Unlock()
		return 0, errRecvClosed
	}
	if verbs.QPState(q.state.Load()) == verbs.StateReset {
		q.rmu.Unlock()
		return 0, errRecvState
	}
	n, err := postRecv(&q.rq, wrs, q.cap.MaxRecvSGE)
	if n > 0 {
		q.uar.Write32(UARQPOffset, q.handle|UARQPRecv)
	}
	q.rmu.Unlock()
	return n, err
}

func postRecv(rq *Queue, wrs []verbs.RecvWR, maxSGE int) (int, error) {
	tail := rq.Producer()
	head := rq.Consumer()
	if !rq.Valid(tail) || !rq.Valid(head) {
		return 0, errRingCorrupt
	}
	n := 0
	var err error
	for i := range wrs {
		wr := &wrs[i]
		if rq.Full(tail, head) {
			head = rq.Consumer()
			if !rq.Valid(head) {
				err = errRingCorrupt
				break
			}
			if rq.Full(tail, head) {
				err = errRecvFull
				break
			}
		}
		if len(wr.SGL) > maxSGE {
			err = errRecvSGE
			break
		}
		w := rq.WQE(tail)
		w = w[: RecvHdrSize+SGESize : len(w)] // every receive WQE holds one SGE at least
		binary.LittleEndian.PutUint64(w[0:], wr.ID)
		binary.LittleEndian.PutUint32(w[8:], uint32(len(wr.SGL)))
		binary.LittleEndian.PutUint32(w[12:], 0)
		if len(wr.SGL) == 1 {
			s := &wr.SGL[0]
			binary.LittleEndian.PutUint64(w[RecvHdrSize:], s.Addr)
			binary.LittleEndian.PutUint32(w[RecvHdrSize+8:], s.Length)
			binary.LittleEndian.PutUint32(w[RecvHdrSize+12:], s.LKey)
		} else {
			sges := w[RecvHdrSize:cap(w)][:len(wr.SGL)*SGESize]
			for j := range wr.SGL {
				encodeSGE(sges[j*SGESize:], &wr.SGL[j])
			}
		}
		tail = rq.Next(tail)
		n++
	}
	if n > 0 {
		rq.SetProducer(tail)
	}
	return n, err
}
