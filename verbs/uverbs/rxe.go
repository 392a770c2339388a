//go:build linux

package uverbs

import (
	"encoding/binary"
	"sync"
	"sync/atomic"

	"github.com/pvperf/pvperf/internal/ibabi"
	"github.com/pvperf/pvperf/internal/mmio"
	"github.com/pvperf/pvperf/internal/unix"
	"github.com/pvperf/pvperf/verbs"
)

// The rdma_rxe (Soft-RoCE) provider. The kernel allocates every queue and
// the program maps it: CREATE_CQ/QP/SRQ return an mminfo per queue. Work
// requests and completions use rxe's own formats (include/uapi/rdma/
// rdma_user_rxe.h): rxe_send_wqe, rxe_recv_wqe and ib_uverbs_wc. A post
// send is made visible to the kernel with a POST_SEND command that carries
// no work request (the doorbell); receives and polls are pure memory.

// rxe_queue_buf header.
const (
	rxeQLog2     = 0
	rxeQMask     = 4
	rxeQProducer = 128
	rxeQConsumer = 256
	rxeQData     = 384
)

// rxe_send_wqe.
const (
	rxeSendWRID       = 0
	rxeSendNumSGE     = 8
	rxeSendOpcode     = 12
	rxeSendFlags      = 16
	rxeSendEx         = 20
	rxeSendRemoteAddr = 24 // rdma and atomic
	rxeSendRKey       = 32 // rdma
	rxeSendCompareAdd = 32 // atomic
	rxeSendSwap       = 40 // atomic
	rxeSendAtomicRKey = 48 // atomic
	rxeSendRemoteQPN  = 24 // ud
	rxeSendRemoteQKey = 28 // ud
	rxeSendPKeyIndex  = 32 // ud
	rxeSendAHNum      = 36 // ud
	rxeSendStatus     = 144
	rxeSendIOVA       = 152
	rxeSendDMA        = 184 // length, resid, cur_sge, num_sge, sge_offset, reserved
	rxeSendSGE        = 208
	rxeSendWRSize     = 144 // the wr part, zeroed for each request
)

// rxe_recv_wqe.
const (
	rxeRecvWRID   = 0
	rxeRecvNumSGE = 8
	rxeRecvDMA    = 16
	rxeRecvSGE    = 40
)

const (
	rxeSGESize    = 16
	rxeWCSize     = 48  // ib_uverbs_wc
	mminfoSize    = 16  // offset u64, size u32, pad u32
	postSendWQE   = 128 // wqe_size of the doorbell: sizeof(struct ibv_send_wr)
	rxeMaxInline  = 512 // RXE_MAX_INLINE_DATA
	dbRequestSize = cmdHdrSize + 24
	// rxeDoorbellSize is a QP's piece of the context's slab: the
	// doorbell command and its 4-byte response, rounded up to a cache
	// line.
	rxeDoorbellSize = 64
	notifyCmdSize   = cmdHdrSize + 8
	rxeAHRespBytes  = 8 // rxe_create_ah_resp: ah_num, reserved
)

type rxe struct{}

func (rxe) contextOut() int                       { return 0 }
func (rxe) setup(c *Context, drvOut []byte) error { return nil }
func (rxe) pdOut() int                            { return 0 }
func (rxe) teardown(c *Context) error             { return nil }

func (rxe) deviceAttr(a *verbs.DeviceAttr) {
	a.QPTypes = []verbs.QPType{verbs.RC, verbs.UC, verbs.UD}
	a.MaxInlineData = rxeMaxInline
}

// rxeQueue is a queue the kernel shares through a mapping.
type rxeQueue struct {
	mem  []byte
	prod *uint32
	cons *uint32
	log2 uint
	mask uint32
}

func mapQueue(k kernel, mi []byte) (*rxeQueue, error) {
	off := binary.LittleEndian.Uint64(mi[0:])
	size := int(binary.LittleEndian.Uint32(mi[8:]))
	if size < rxeQData {
		return nil, verbs.Errorf(unix.EINVAL, "kernel gave a queue of %d bytes", size)
	}
	b, err := k.mmap(int64(off), size, unix.ProtRead|unix.ProtWrite)
	if err != nil {
		return nil, err
	}
	q := &rxeQueue{
		mem:  b,
		prod: unix.Word32(b, rxeQProducer),
		cons: unix.Word32(b, rxeQConsumer),
		log2: uint(binary.LittleEndian.Uint32(b[rxeQLog2:])),
		mask: binary.LittleEndian.Uint32(b[rxeQMask:]),
	}
	slots := uint64(q.mask) + 1
	if q.log2 < 5 || q.log2 > 16 || slots&(slots-1) != 0 || rxeQData+slots<<q.log2 > uint64(size) {
		_ = munmap(b)
		return nil, verbs.Errorf(unix.EINVAL, "queue header log2_elem_size %d, index_mask %#x does not fit %d bytes", q.log2, q.mask, size)
	}
	return q, nil
}

func (q *rxeQueue) unmap() error { return munmap(q.mem) }

// elem returns slot i.
func (q *rxeQueue) elem(i uint32) []byte {
	off := rxeQData + int(i&q.mask)<<q.log2
	return q.mem[off : off+1<<q.log2 : off+1<<q.log2]
}

func (q *rxeQueue) size() int { return 1 << q.log2 }

// full reports whether the producer can add no element.
func (q *rxeQueue) full(prod uint32) bool { return (prod+1)&q.mask == mmio.Load32(q.cons) }

// Preallocated errors of the data path.
var (
	errRXECQClosed   = verbs.NewOpError("poll cq", "", verbs.ErrClosed)
	errRXENotify     = verbs.NewOpError("req notify cq", "", verbs.ErrClosed)
	errRXESendClosed = verbs.NewOpError("post send", "", verbs.ErrClosed)
	errRXERecvClosed = verbs.NewOpError("post recv", "", verbs.ErrClosed)
	errRXESendState  = verbs.NewOpError("post send", "", verbs.Errorf(unix.EINVAL, "qp is not ready to send"))
	errRXERecvState  = verbs.NewOpError("post recv", "", verbs.Errorf(unix.EINVAL, "qp is in the RESET state"))
	errRXERecvSRQ    = verbs.NewOpError("post recv", "", verbs.Errorf(unix.EINVAL, "qp receives from a shared receive queue"))
	errRXESendSGE    = verbs.NewOpError("post send", "", verbs.Errorf(unix.EINVAL, "too many scatter/gather elements"))
	errRXERecvSGE    = verbs.NewOpError("post recv", "", verbs.Errorf(unix.EINVAL, "too many scatter/gather elements"))
	errRXEOpcode     = verbs.NewOpError("post send", "", verbs.Errorf(unix.EINVAL, "opcode not valid for this qp type"))
	errRXEAtomicLen  = verbs.NewOpError("post send", "", verbs.Errorf(unix.EINVAL, "atomic operations need one 8-byte scatter/gather element and an 8-byte aligned remote address"))
	errRXESendFull   = verbs.NewOpError("post send", "", verbs.ErrQueueFull)
	errRXERecvFull   = verbs.NewOpError("post recv", "", verbs.ErrQueueFull)
	errRXEInline     = verbs.NewOpError("post send", "", verbs.Errorf(unix.EINVAL, "inline data larger than max_inline_data"))
	errRXEInlineAddr = verbs.NewOpError("post send", "", verbs.Errorf(unix.EFAULT, "inline data address not mapped"))
	errRXENoAH       = verbs.NewOpError("post send", "", verbs.Errorf(unix.EINVAL, "ud work request without an address handle of this device"))
)

// rxeCQ is an rxe completion queue.
type rxeCQ struct {
	cqBase
	mu     sync.Mutex
	q      *rxeQueue
	notify [2][notifyCmdSize]byte // REQ_NOTIFY_CQ: next completion, solicited only
}

var _ verbs.CQ = (*rxeCQ)(nil)

func (rxe) createCQ(c *Context, n, vector int, ch *compChannel) (verbs.CQ, error) {
	cq := &rxeCQ{cqBase: cqBase{c: c, ch: ch}}
	cq.user = c.track(cq)
	req := createCQReq{UserHandle: cq.user, CQE: uint32(n), CompVector: uint32(vector), CompChannel: -1}
	if ch != nil {
		req.CompChannel = ch.fd
	}
	var r createCQResp
	mi := make([]byte, mminfoSize)
	if err := c.exec(cmdCreateCQ, &req, nil, &r, mi); err != nil {
		delete(c.objs, cq.user)
		return nil, err
	}
	q, err := mapQueue(c.k, mi)
	if err == nil && q.size() < rxeWCSize {
		_ = q.unmap()
		err = verbs.Errorf(unix.EINVAL, "completion entries of %d bytes", q.size())
	}
	if err != nil {
		_ = c.exec(cmdDestroyCQ, &destroyReq{Handle: r.CQHandle}, nil, &destroyCQResp{}, nil)
		delete(c.objs, cq.user)
		return nil, err
	}
	cq.handle, cq.n, cq.q = r.CQHandle, int(r.CQE), q
	for i := range cq.notify {
		b := cq.notify[i][:]
		binary.LittleEndian.PutUint32(b[0:], cmdReqNotifyCQ)
		binary.LittleEndian.PutUint16(b[4:], notifyCmdSize/4)
		binary.LittleEndian.PutUint32(b[8:], r.CQHandle)
		binary.LittleEndian.PutUint32(b[12:], uint32(i))
	}
	return cq, nil
}

// Poll moves up to len(wc) completions into wc.
func (cq *rxeCQ) Poll(wc []verbs.WC) (int, error) {
	cq.mu.Lock()
	if cq.closed.Load() {
		cq.mu.Unlock()
		return 0, errRXECQClosed
	}
	q := cq.q
	cons := mmio.Load32(q.cons)
	prod := mmio.Load32(q.prod)
	n := 0
	for n < len(wc) && cons != prod {
		decodeUverbsWC(q.elem(cons), &wc[n])
		cons = (cons + 1) & q.mask
		n++
	}
	if n > 0 {
		mmio.Store32(q.cons, cons)
	}
	cq.mu.Unlock()
	return n, nil
}

// decodeUverbsWC decodes an ib_uverbs_wc.
func decodeUverbsWC(b []byte, wc *verbs.WC) {
	b = b[:rxeWCSize]
	wc.ID = binary.LittleEndian.Uint64(b[0:])
	wc.Status = verbs.WCStatus(binary.LittleEndian.Uint32(b[8:]))
	wc.Opcode = verbs.WCOpcode(binary.LittleEndian.Uint32(b[12:]))
	wc.VendorErr = binary.LittleEndian.Uint32(b[16:])
	wc.ByteLen = binary.LittleEndian.Uint32(b[20:])
	wc.Imm = binary.BigEndian.Uint32(b[24:])
	wc.QPNum = binary.LittleEndian.Uint32(b[28:])
	wc.SrcQP = binary.LittleEndian.Uint32(b[32:])
	wc.Flags = verbs.WCFlags(binary.LittleEndian.Uint32(b[36:])) & (verbs.WCWithGRH | verbs.WCWithImm)
	wc.PKeyIndex = binary.LittleEndian.Uint16(b[40:])
	wc.SLID = binary.LittleEndian.Uint16(b[42:])
	wc.SL = b[44]
	wc.DLIDPathBits = b[45]
	if wc.Flags&verbs.WCWithImm == 0 {
		wc.Imm = 0
	}
}

// ReqNotify arms the CQ (REQ_NOTIFY_CQ).
func (cq *rxeCQ) ReqNotify(solicitedOnly bool) error {
	if !cq.enter() {
		return errRXENotify
	}
	defer cq.leave()
	i := 0
	if solicitedOnly {
		i = 1
	}
	if _, err := cq.c.k.doorbell(cq.notify[i][:]); err != nil {
		return cq.c.err("req notify cq", err)
	}
	return nil
}

func (cq *rxeCQ) Close() error {
	return cq.destroy(func() error {
		cq.mu.Lock()
		defer cq.mu.Unlock()
		return cq.q.unmap()
	})
}

// rxeQP is an rxe queue pair.
type rxeQP struct {
	qpBase
	smu   sync.Mutex
	sq    *rxeQueue
	rmu   sync.Mutex
	rq    *rxeQueue // nil on an SRQ
	db    []byte    // off-heap: the POST_SEND doorbell command, then its response
	k     kernel
	res   *Context
	maxIn int
}

var _ verbs.QP = (*rxeQP)(nil)

func (rxe) createQP(pd *PD, init verbs.QPInit) (verbs.QP, error) {
	c := pd.c
	switch init.Type {
	case verbs.RC, verbs.UC, verbs.UD:
	default:
		return nil, verbs.Errorf(verbs.ErrNotSupported, "qp type %v", init.Type)
	}
	q := &rxeQP{k: c.k, res: c}
	req, err := q.prepare(pd, init)
	if err != nil {
		return nil, err
	}
	q.user = c.track(q)
	req.UserHandle = q.user
	var r createQPResp
	mi := make([]byte, 2*mminfoSize) // rq_mi, sq_mi
	if err := c.exec(cmdCreateQP, &req, nil, &r, mi); err != nil {
		delete(c.objs, q.user)
		return nil, err
	}
	fail := func(err error) (verbs.QP, error) {
		q.unmap()
		_ = c.exec(cmdDestroyQP, &destroyReq{Handle: r.QPHandle}, nil, &destroyQPResp{}, nil)
		delete(c.objs, q.user)
		return nil, err
	}
	if q.sq, err = mapQueue(c.k, mi[mminfoSize:]); err != nil {
		return fail(err)
	}
	if binary.LittleEndian.Uint32(mi[8:]) != 0 {
		if q.rq, err = mapQueue(c.k, mi[:mminfoSize]); err != nil {
			return fail(err)
		}
	}
	if q.db, err = c.db.alloc(); err != nil {
		return fail(err)
	}
	binary.LittleEndian.PutUint32(q.db[0:], cmdPostSend)
	binary.LittleEndian.PutUint16(q.db[4:], dbRequestSize/4)
	binary.LittleEndian.PutUint16(q.db[6:], 1) // the 4-byte bad_wr response
	binary.LittleEndian.PutUint64(q.db[8:], unix.Addr(q.db[dbRequestSize:]))
	binary.LittleEndian.PutUint32(q.db[16:], r.QPHandle)
	binary.LittleEndian.PutUint32(q.db[28:], postSendWQE)
	q.created(&r)
	q.maxIn = min(q.cap.MaxInlineData, q.sq.size()-rxeSendSGE)
	return q, nil
}

func (q *rxeQP) unmap() {
	if q.sq != nil {
		_ = q.sq.unmap()
	}
	if q.rq != nil {
		_ = q.rq.unmap()
	}
	if q.db != nil {
		q.res.db.put(q.db)
		q.db = nil
	}
}

func rxeSendAllowed(s verbs.QPState) bool {
	return s == verbs.StateRTS || s == verbs.StateSQD || s == verbs.StateSQE || s == verbs.StateErr
}

func rxeOpcodeAllowed(t verbs.QPType, op verbs.WROpcode) bool {
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

// PostSend writes wrs into the send queue and rings the doorbell once.
func (q *rxeQP) PostSend(wrs []verbs.SendWR) (int, error) {
	q.smu.Lock()
	defer q.smu.Unlock()
	if q.closed.Load() {
		return 0, errRXESendClosed
	}
	if !rxeSendAllowed(q.qpState()) {
		return 0, errRXESendState
	}
	n := 0
	var err error
	for i := range wrs {
		if err = q.postOne(&wrs[i]); err != nil {
			break
		}
		n++
	}
	if n > 0 {
		if _, werr := q.k.doorbell(q.db[:dbRequestSize]); werr != nil && err == nil {
			err = q.pd.c.err("post send", werr)
		}
	}
	return n, err
}

func (q *rxeQP) postOne(wr *verbs.SendWR) error {
	if len(wr.SGL) > q.cap.MaxSendSGE {
		return errRXESendSGE
	}
	if !rxeOpcodeAllowed(q.typ, wr.Opcode) {
		return errRXEOpcode
	}
	atomic := wr.Opcode == verbs.OpAtomicCmpSwap || wr.Opcode == verbs.OpAtomicFetchAdd
	if atomic && (len(wr.SGL) != 1 || wr.SGL[0].Length != 8 || wr.RemoteAddr%8 != 0) {
		return errRXEAtomicLen
	}
	var total uint32
	for i := range wr.SGL {
		total += wr.SGL[i].Length
	}
	inline := wr.Flags&verbs.SendInline != 0 && !atomic && wr.Opcode != verbs.OpRDMARead
	if inline && int(total) > q.maxIn {
		return errRXEInline
	}
	var ahNum uint32
	if q.typ == verbs.UD {
		ah, ok := wr.AH.(*rxeAH)
		if !ok || ah.pd.c != q.pd.c || ah.closed.Load() {
			return errRXENoAH
		}
		ahNum = ah.num
	}
	sq := q.sq
	prod := mmio.Load32(sq.prod)
	if sq.full(prod) {
		return errRXESendFull
	}
	e := sq.elem(prod)
	clear(e[:rxeSendSGE])
	binary.LittleEndian.PutUint64(e[rxeSendWRID:], wr.ID)
	binary.LittleEndian.PutUint32(e[rxeSendNumSGE:], uint32(len(wr.SGL)))
	binary.LittleEndian.PutUint32(e[rxeSendOpcode:], uint32(wr.Opcode))
	flags := wr.Flags & (verbs.SendFence | verbs.SendSignaled | verbs.SendSolicited)
	if inline {
		flags |= verbs.SendInline
	}
	binary.LittleEndian.PutUint32(e[rxeSendFlags:], uint32(flags))
	if wr.Opcode == verbs.OpSendImm || wr.Opcode == verbs.OpRDMAWriteImm {
		binary.BigEndian.PutUint32(e[rxeSendEx:], wr.Imm)
	}
	switch {
	case q.typ == verbs.UD:
		binary.LittleEndian.PutUint32(e[rxeSendRemoteQPN:], wr.RemoteQPN)
		binary.LittleEndian.PutUint32(e[rxeSendRemoteQKey:], wr.RemoteQKey)
		binary.LittleEndian.PutUint32(e[rxeSendAHNum:], ahNum)
	case atomic:
		binary.LittleEndian.PutUint64(e[rxeSendRemoteAddr:], wr.RemoteAddr)
		binary.LittleEndian.PutUint64(e[rxeSendCompareAdd:], wr.CompareAdd)
		binary.LittleEndian.PutUint64(e[rxeSendSwap:], wr.Swap)
		binary.LittleEndian.PutUint32(e[rxeSendAtomicRKey:], wr.RKey)
		binary.LittleEndian.PutUint64(e[rxeSendIOVA:], wr.RemoteAddr)
	case wr.Opcode == verbs.OpRDMAWrite || wr.Opcode == verbs.OpRDMAWriteImm || wr.Opcode == verbs.OpRDMARead:
		binary.LittleEndian.PutUint64(e[rxeSendRemoteAddr:], wr.RemoteAddr)
		binary.LittleEndian.PutUint32(e[rxeSendRKey:], wr.RKey)
		binary.LittleEndian.PutUint64(e[rxeSendIOVA:], wr.RemoteAddr)
	}
	dma := e[rxeSendDMA:]
	binary.LittleEndian.PutUint32(dma[0:], total) // length
	binary.LittleEndian.PutUint32(dma[4:], total) // resid
	binary.LittleEndian.PutUint32(dma[8:], 0)     // cur_sge
	binary.LittleEndian.PutUint32(dma[12:], 0)    // num_sge, below
	binary.LittleEndian.PutUint32(dma[16:], 0)    // sge_offset
	binary.LittleEndian.PutUint32(dma[20:], 0)    // reserved
	if inline {
		p := rxeSendSGE
		for i := range wr.SGL {
			s := &wr.SGL[i]
			b, ok := q.res.resolve(s.Addr, int(s.Length))
			if !ok {
				return errRXEInlineAddr
			}
			p += copy(e[p:], b)
		}
	} else {
		binary.LittleEndian.PutUint32(dma[12:], uint32(len(wr.SGL)))
		for i := range wr.SGL {
			s := &wr.SGL[i]
			g := e[rxeSendSGE+i*rxeSGESize:]
			binary.LittleEndian.PutUint64(g[0:], s.Addr)
			binary.LittleEndian.PutUint32(g[8:], s.Length)
			binary.LittleEndian.PutUint32(g[12:], s.LKey)
		}
	}
	mmio.Store32(sq.prod, (prod+1)&sq.mask)
	return nil
}

// PostRecv writes wrs into the receive queue; the kernel takes them as
// messages arrive.
func (q *rxeQP) PostRecv(wrs []verbs.RecvWR) (int, error) {
	q.rmu.Lock()
	defer q.rmu.Unlock()
	if q.closed.Load() {
		return 0, errRXERecvClosed
	}
	if q.rq == nil {
		return 0, errRXERecvSRQ
	}
	if q.qpState() == verbs.StateReset {
		return 0, errRXERecvState
	}
	for i := range wrs {
		if err := postRecv(q.rq, &wrs[i], q.cap.MaxRecvSGE); err != nil {
			return i, err
		}
	}
	return len(wrs), nil
}

// postRecv writes one rxe_recv_wqe.
func postRecv(rq *rxeQueue, wr *verbs.RecvWR, maxSGE int) error {
	if len(wr.SGL) > maxSGE {
		return errRXERecvSGE
	}
	prod := mmio.Load32(rq.prod)
	if rq.full(prod) {
		return errRXERecvFull
	}
	e := rq.elem(prod)
	var total uint32
	for i := range wr.SGL {
		s := &wr.SGL[i]
		g := e[rxeRecvSGE+i*rxeSGESize:]
		binary.LittleEndian.PutUint64(g[0:], s.Addr)
		binary.LittleEndian.PutUint32(g[8:], s.Length)
		binary.LittleEndian.PutUint32(g[12:], s.LKey)
		total += s.Length
	}
	binary.LittleEndian.PutUint64(e[rxeRecvWRID:], wr.ID)
	binary.LittleEndian.PutUint32(e[rxeRecvNumSGE:], uint32(len(wr.SGL)))
	binary.LittleEndian.PutUint32(e[12:], 0)
	dma := e[rxeRecvDMA:]
	binary.LittleEndian.PutUint32(dma[0:], total)                // length
	binary.LittleEndian.PutUint32(dma[4:], total)                // resid
	binary.LittleEndian.PutUint32(dma[8:], 0)                    // cur_sge
	binary.LittleEndian.PutUint32(dma[12:], uint32(len(wr.SGL))) // num_sge
	binary.LittleEndian.PutUint32(dma[16:], 0)                   // sge_offset
	binary.LittleEndian.PutUint32(dma[20:], 0)                   // reserved
	mmio.Store32(rq.prod, (prod+1)&rq.mask)
	return nil
}

func (q *rxeQP) Close() error {
	return q.destroy(func() error {
		q.smu.Lock()
		q.rmu.Lock()
		defer q.smu.Unlock()
		defer q.rmu.Unlock()
		q.unmap()
		return nil
	})
}

// rxeSRQ is an rxe shared receive queue.
type rxeSRQ struct {
	srqBase
	mu  sync.Mutex
	q   *rxeQueue
	mi  []byte // off-heap mminfo that MODIFY_SRQ fills on a resize
	ctx *Context
}

var _ verbs.SRQ = (*rxeSRQ)(nil)

func (rxe) createSRQ(pd *PD, init verbs.SRQInit) (verbs.SRQ, error) {
	c := pd.c
	if init.MaxWR <= 0 || init.MaxSGE <= 0 || init.Limit < 0 {
		return nil, verbs.Errorf(unix.EINVAL, "max_wr %d, max_sge %d, limit %d", init.MaxWR, init.MaxSGE, init.Limit)
	}
	s := &rxeSRQ{srqBase: srqBase{pd: pd}, ctx: c}
	s.user = c.track(s)
	req := createSRQReq{UserHandle: s.user, PDHandle: pd.handle, MaxWR: uint32(init.MaxWR), MaxSGE: uint32(init.MaxSGE), SRQLimit: uint32(init.Limit)}
	var r createSRQResp
	drv := make([]byte, mminfoSize+8) // mi, srq_num, reserved
	if err := c.exec(cmdCreateSRQ, &req, nil, &r, drv); err != nil {
		delete(c.objs, s.user)
		return nil, err
	}
	var err error
	if s.q, err = mapQueue(c.k, drv[:mminfoSize]); err == nil {
		if s.mi, err = mmapAnon(mminfoSize); err != nil {
			_ = s.q.unmap()
		}
	}
	if err != nil {
		_ = c.exec(cmdDestroySRQ, &destroyReq{Handle: r.SRQHandle}, nil, &destroyQPResp{}, nil)
		delete(c.objs, s.user)
		return nil, err
	}
	s.handle, s.maxWR, s.maxSGE = r.SRQHandle, int(r.MaxWR), int(r.MaxSGE)
	s.srqn = binary.LittleEndian.Uint32(drv[mminfoSize:])
	if s.srqn == 0 {
		s.srqn = r.SRQN
	}
	return s, nil
}

// PostRecv writes wrs into the shared receive queue.
func (s *rxeSRQ) PostRecv(wrs []verbs.RecvWR) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed.Load() {
		return 0, errRXERecvClosed
	}
	for i := range wrs {
		if err := postRecv(s.q, &wrs[i], s.maxSGE); err != nil {
			return i, err
		}
	}
	return len(wrs), nil
}

// Modify changes the SRQ's limit or size (MODIFY_SRQ); after a resize
// the kernel hands over a new queue, which replaces the mapped one.
func (s *rxeSRQ) Modify(attr verbs.SRQAttr, mask verbs.SRQAttrMask) error {
	c := s.ctx
	if !s.enter() {
		return c.err("modify srq", verbs.ErrClosed)
	}
	defer s.leave()
	s.mu.Lock()
	defer s.mu.Unlock()
	clear(s.mi)
	req := modifySRQ{SRQHandle: s.handle, AttrMask: uint32(mask), MaxWR: uint32(attr.MaxWR), SRQLimit: uint32(attr.Limit)}
	var drv [8]byte
	binary.LittleEndian.PutUint64(drv[:], unix.Addr(s.mi))
	if err := c.exec(cmdModifySRQ, &req, drv[:], nil, nil); err != nil {
		return c.err("modify srq", err)
	}
	if mask&verbs.SRQMaxWR != 0 && binary.LittleEndian.Uint32(s.mi[8:]) != 0 {
		q, err := mapQueue(s.ctx.k, s.mi)
		if err != nil {
			return c.err("modify srq", err)
		}
		_ = s.q.unmap()
		s.q = q
		s.maxWR = int(q.mask)
	}
	return nil
}

func (s *rxeSRQ) Close() error {
	return s.destroy(func() error {
		s.mu.Lock()
		defer s.mu.Unlock()
		_ = munmap(s.mi)
		return s.q.unmap()
	})
}

// rxeAH is an rxe address handle: the kernel keeps the address vector and
// work requests name it by its number (kernels 5.16 and later).
type rxeAH struct {
	pd     *PD
	handle uint32
	num    uint32
	attr   verbs.AHAttr
	closed atomic.Bool
}

func (rxe) createAH(pd *PD, attr verbs.AHAttr) (verbs.AH, error) {
	c := pd.c
	if !attr.IsGlobal {
		return nil, verbs.Errorf(unix.EINVAL, "RoCE address handles need a GRH (is_global)")
	}
	req := createAHReq{PDHandle: pd.handle, Attr: ibabi.FromVerbs(&attr)}
	var r handleOnly
	drv := make([]byte, rxeAHRespBytes)
	if err := c.exec(cmdCreateAH, &req, nil, &r, drv); err != nil {
		return nil, err
	}
	ah := &rxeAH{pd: pd, handle: r.Handle, num: binary.LittleEndian.Uint32(drv), attr: attr}
	if ah.num == 0 {
		_ = c.exec(cmdDestroyAH, &handleOnly{r.Handle}, nil, nil, nil)
		return nil, verbs.Errorf(verbs.ErrNotSupported, "this kernel's rdma_rxe gives no address handle number (kernels before 5.16)")
	}
	return ah, nil
}

func (ah *rxeAH) Attr() verbs.AHAttr { return ah.attr }

func (ah *rxeAH) Close() error {
	c := ah.pd.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if ah.closed.Load() {
		return nil
	}
	if err := c.exec(cmdDestroyAH, &handleOnly{ah.handle}, nil, nil, nil); err != nil {
		return c.err("destroy ah", err)
	}
	ah.closed.Store(true)
	ah.pd.release()
	return nil
}
