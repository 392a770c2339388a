//go:build linux

package uverbs

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync"

	"github.com/pvperf/pvperf/internal/mmio"
	"github.com/pvperf/pvperf/internal/unix"
	"github.com/pvperf/pvperf/verbs"
	"github.com/pvperf/pvperf/verbs/pvrdma"
)

// The vmw_pvrdma provider. The program allocates every queue itself (page-
// aligned memory outside the Go heap, each page written before the kernel
// pins it) and hands it to the kernel with CREATE_CQ/QP/SRQ; the device
// then reads and writes those rings directly. Work requests, completions
// and doorbells are package pvrdma's data path, the same code the emulator
// executes: posts and polls are pure memory plus one 32-bit store into the
// context's doorbell page (the UAR), mapped from the uverbs descriptor.
// Address handles exist only in user space: an address vector with the
// destination MAC, resolved here.
//
// Locking: creation and destruction run under Context.mu. The data path
// takes only the lock of its queue: package pvrdma's spin locks, and for
// CQs a read lock that destruction takes exclusively before the ring
// buffer is unmapped.

// pvrdmaProvider is one context's vmw_pvrdma state.
type pvrdmaProvider struct {
	uar   *pvrdmaUAR
	qps   *pvrdma.QPTable // device QP handle -> QP number, for every CQ
	qpTab int             // qp_tab_size: the host's max_qp
	caps  pvrdmaCaps
}

// pvrdmaCaps are the host limits the provider checks itself (QUERY_DEVICE
// at context creation).
type pvrdmaCaps struct {
	maxQPWR   int
	maxSGE    int
	maxCQE    int
	maxSRQ    int
	maxSRQWR  int
	maxSRQSGE int
	ports     int
	atomics   bool
}

func newPVRDMA() provider { return &pvrdmaProvider{} }

func (*pvrdmaProvider) contextOut() int { return pvrdmaContextRespSize }
func (*pvrdmaProvider) pdOut() int      { return pvrdmaPDRespSize }

// pvrdmaUAR is the context's doorbell page: the QP doorbell at 0, the CQ
// doorbell at 4, the SRQ doorbell at 8. Each doorbell is a single 32-bit
// store, which the hypervisor traps.
type pvrdmaUAR struct {
	b     []byte
	words [3]*uint32
}

func newPVRDMAUAR(b []byte) *pvrdmaUAR {
	u := &pvrdmaUAR{b: b}
	for i := range u.words {
		u.words[i] = unix.Word32(b, 4*i)
	}
	return u
}

func (u *pvrdmaUAR) Write32(off, v uint32) { mmio.Store32(u.words[off/4], v) }

func (p *pvrdmaProvider) setup(c *Context, drvOut []byte) error {
	var r pvrdmaContextResp
	pvrdmaDecode(drvOut, &r)
	p.qpTab = int(r.QPTabSize)
	if unix.PageSize != pvrdma.PageSize {
		return verbs.Errorf(verbs.ErrNotSupported, "vmw_pvrdma needs pages of %d bytes, this system has %d", pvrdma.PageSize, unix.PageSize)
	}
	b, err := c.k.mmap(0, pvrdma.PageSize, unix.ProtWrite)
	if err != nil {
		return fmt.Errorf("map the doorbell page: %w", err)
	}
	if len(b) != pvrdma.PageSize {
		_ = munmap(b)
		return verbs.Errorf(unix.EINVAL, "doorbell page of %d bytes", len(b))
	}
	var a queryDeviceResp
	if err := c.exec(cmdQueryDevice, &respOnly{}, nil, &a, nil); err != nil {
		_ = munmap(b)
		return fmt.Errorf("query device: %w", err)
	}
	p.caps = pvrdmaCaps{
		maxQPWR:   int(a.MaxQPWR),
		maxSGE:    int(a.MaxSGE),
		maxCQE:    int(a.MaxCQE),
		maxSRQ:    int(a.MaxSRQ),
		maxSRQWR:  int(a.MaxSRQWR),
		maxSRQSGE: int(a.MaxSRQSGE),
		ports:     int(a.PhysPortCnt),
		atomics:   verbs.AtomicCap(a.AtomicCap) != verbs.AtomicNone,
	}
	p.uar = newPVRDMAUAR(b)
	p.qps = new(pvrdma.QPTable)
	return nil
}

// teardown unmaps the doorbell page; no object of the context is left.
func (p *pvrdmaProvider) teardown(c *Context) error {
	if p.uar == nil {
		return nil
	}
	b := p.uar.b
	p.uar.b = nil
	return munmap(b)
}

func (*pvrdmaProvider) deviceAttr(a *verbs.DeviceAttr) {
	a.QPTypes = []verbs.QPType{verbs.RC, verbs.UD}
	a.MaxInlineData = 0
	// Only the SRQ limit can be modified.
	a.Flags &^= verbs.DeviceSRQResize
	if a.MaxSRQ == 0 {
		a.MaxSRQWR, a.MaxSRQSGE = 0, 0
	}
}

// pvrdmaBuffer returns n bytes of zeroed memory outside the Go heap for a
// ring buffer, every page of it written: the kernel pins ring buffers
// without asking for write access, and a page never written would be
// pinned as the shared zero page, which the device's writes never reach.
func pvrdmaBuffer(n int) ([]byte, error) {
	b, err := mmapAnon(n)
	if err != nil {
		return nil, err
	}
	if err := unix.MadviseDontFork(b); err != nil {
		_ = munmap(b)
		return nil, err
	}
	clear(b)
	return b, nil
}

// pvrdmaPages checks that buffers of these lengths fit in one page
// directory, and returns an error naming what for.
func pvrdmaPages(what string, lens ...int) error {
	pages := 0
	for _, n := range lens {
		pages += n / pvrdma.PageSize
	}
	if pages > pvrdmaPageDirMaxPages {
		return verbs.Errorf(unix.EINVAL, "%s of %d pages exceeds the device's page directory of %d pages", what, pages, pvrdmaPageDirMaxPages)
	}
	return nil
}

// pvrdmaCreateErr explains a failed creation of pinned ring memory.
func pvrdmaCreateErr(err error) error {
	switch {
	case errors.Is(err, unix.ENOMEM):
		if lim, ok := unix.MemlockLimit(); ok {
			return fmt.Errorf("%w (ring buffers are pinned memory: the locked-memory limit is %d bytes; raise it with ulimit -l or run with CAP_IPC_LOCK)", err, lim)
		}
	case errors.Is(err, unix.EOPNOTSUPP):
		return pvrdmaUnsupported{err}
	}
	return err
}

// pvrdmaUnsupported is an EOPNOTSUPP from the kernel, which also matches
// verbs.ErrNotSupported.
type pvrdmaUnsupported struct{ error }

func (e pvrdmaUnsupported) Unwrap() []error { return []error{e.error, verbs.ErrNotSupported} }

// pvrdmaHandle checks that a device handle fits the doorbell's handle
// field.
func pvrdmaHandle(what string, h uint32) error {
	if h&^pvrdma.UARHandleMask != 0 {
		return verbs.Errorf(unix.EINVAL, "the kernel gave %s %#x, which does not fit a doorbell", what, h)
	}
	return nil
}

// pvrdmaNoDevice stands for the device's lock on a CQ, which a real device
// does not have: it keeps producing CQEs at the ring's tail while a purge
// compacts the entries before it.
type pvrdmaNoDevice struct{}

func (pvrdmaNoDevice) Lock()   {}
func (pvrdmaNoDevice) Unlock() {}

// Preallocated errors of the data path.
var (
	errPVRDMAPollClosed   = verbs.NewOpError("poll cq", "", verbs.ErrClosed)
	errPVRDMANotifyClosed = verbs.NewOpError("req notify cq", "", verbs.ErrClosed)
	errPVRDMASendClosed   = verbs.NewOpError("post send", "", verbs.ErrClosed)
	errPVRDMARecvClosed   = verbs.NewOpError("post recv", "", verbs.ErrClosed)
	errPVRDMASRQClosed    = verbs.NewOpError("post srq recv", "", verbs.ErrClosed)
	errPVRDMANoAH         = verbs.NewOpError("post send", "", verbs.Errorf(unix.EINVAL, "ud work request without an address handle of this context"))
)

// pvrdmaCQ is a vmw_pvrdma completion queue.
type pvrdmaCQ struct {
	cqBase
	// mu is held shared by Poll, ReqNotify and purges, and exclusively
	// while the ring goes away.
	mu  sync.RWMutex
	dp  *pvrdma.CQ
	buf []byte
}

var _ verbs.CQ = (*pvrdmaCQ)(nil)

func (p *pvrdmaProvider) createCQ(c *Context, n, vector int, ch *compChannel) (verbs.CQ, error) {
	if p.caps.maxCQE > 0 && n > p.caps.maxCQE {
		return nil, verbs.Errorf(unix.EINVAL, "%d entries (device maximum %d)", n, p.caps.maxCQE)
	}
	const most = 1 << 23 // the largest power of two whose ring fits a page directory
	if n > most {
		return nil, verbs.Errorf(unix.EINVAL, "%d entries exceed the %d a page directory holds", n, most)
	}
	entries := pvrdma.RoundPow2(n)
	buf, err := pvrdmaBuffer(pvrdma.CQBufLen(entries))
	if err != nil {
		return nil, err
	}
	cq := &pvrdmaCQ{cqBase: cqBase{c: c, ch: ch}, buf: buf}
	cq.user = c.track(cq)
	req := createCQReq{UserHandle: cq.user, CQE: uint32(entries), CompVector: uint32(vector), CompChannel: -1}
	if ch != nil {
		req.CompChannel = ch.fd
	}
	in := pvrdmaEncode(&pvrdmaCreateCQ{BufAddr: unix.Addr(buf), BufSize: uint32(len(buf))})
	var r createCQResp
	out := make([]byte, pvrdmaCQRespSize)
	if err := c.exec(cmdCreateCQ, &req, in, &r, out); err != nil {
		delete(c.objs, cq.user)
		_ = munmap(buf)
		return nil, pvrdmaCreateErr(err)
	}
	var d pvrdmaCreateCQResp
	pvrdmaDecode(out, &d)
	got := int(r.CQE)
	err = pvrdmaHandle("cqn", d.CQN)
	if err == nil && (got < 1 || got > entries || got&(got-1) != 0) {
		err = verbs.Errorf(unix.EINVAL, "the kernel made a ring of %d entries for a buffer of %d", got, entries)
	}
	if err != nil {
		_ = c.exec(cmdDestroyCQ, &destroyReq{Handle: r.CQHandle}, nil, &destroyCQResp{}, nil)
		delete(c.objs, cq.user)
		_ = munmap(buf)
		return nil, err
	}
	cq.handle, cq.n = r.CQHandle, got
	cq.dp = pvrdma.NewCQ(pvrdma.CQConfig{Handle: d.CQN, Entries: got, Buf: buf, UAR: p.uar, QPs: p.qps})
	return cq, nil
}

// Poll moves up to len(wc) completions into wc. On an empty ring it rings
// the POLL doorbell once, so that the host looks at the physical CQ.
func (cq *pvrdmaCQ) Poll(wc []verbs.WC) (int, error) {
	cq.mu.RLock()
	if cq.closed.Load() {
		cq.mu.RUnlock()
		return 0, errPVRDMAPollClosed
	}
	n, err := cq.dp.Poll(wc)
	cq.mu.RUnlock()
	return n, err
}

// ReqNotify arms the CQ with a doorbell: no system call.
func (cq *pvrdmaCQ) ReqNotify(solicitedOnly bool) error {
	if !cq.enter() {
		return errPVRDMANotifyClosed
	}
	cq.mu.RLock()
	cq.dp.ReqNotify(solicitedOnly)
	cq.mu.RUnlock()
	cq.leave()
	return nil
}

// purge removes the CQEs of a device QP handle from the ring.
func (cq *pvrdmaCQ) purge(handle uint32) {
	cq.mu.RLock()
	defer cq.mu.RUnlock()
	if cq.closed.Load() {
		return
	}
	cq.dp.Purge(handle, pvrdmaNoDevice{})
}

func (cq *pvrdmaCQ) Close() error {
	return cq.destroy(func() error {
		cq.mu.Lock()
		defer cq.mu.Unlock()
		cq.dp.Shutdown()
		b := cq.buf
		cq.buf = nil
		return munmap(b)
	})
}

// pvrdmaPDN returns the PD number ALLOC_PD's driver data gave.
func pvrdmaPDN(pd *PD) uint32 {
	if len(pd.drv) < 4 {
		return 0
	}
	return binary.LittleEndian.Uint32(pd.drv)
}
