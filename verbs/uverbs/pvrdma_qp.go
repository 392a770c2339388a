//go:build linux

package uverbs

import (
	"errors"
	"sync"

	"github.com/pvperf/pvperf/internal/unix"
	"github.com/pvperf/pvperf/verbs"
	"github.com/pvperf/pvperf/verbs/pvrdma"
)

// pvrdmaQP is a vmw_pvrdma queue pair. Its send buffer holds the ring state
// page (send ring at 0, receive ring at 8) and the send WQEs; its receive
// buffer holds the receive WQEs (none on an SRQ).
type pvrdmaQP struct {
	qpBase
	dp     *pvrdma.QP
	prov   *pvrdmaProvider
	devQP  uint32 // device QP handle: doorbells and CQEs name the QP by it
	sendCQ *pvrdmaCQ
	recvCQ *pvrdmaCQ
	// ctl orders what follows an accepted MODIFY_QP (ring resets, purges)
	// against the release of the buffers.
	ctl  sync.Mutex
	sbuf []byte
	rbuf []byte
}

var _ verbs.QP = (*pvrdmaQP)(nil)

func (p *pvrdmaProvider) createQP(pd *PD, init verbs.QPInit) (verbs.QP, error) {
	c := pd.c
	switch init.Type {
	case verbs.RC, verbs.UD:
	default:
		return nil, verbs.Errorf(verbs.ErrNotSupported, "%v queue pairs (vmw_pvrdma has RC and UD)", init.Type)
	}
	cp := init.Cap
	if cp.MaxInlineData > 0 {
		return nil, verbs.Errorf(verbs.ErrNotSupported, "inline data (max_inline_data %d): vmw_pvrdma has none", cp.MaxInlineData)
	}
	if cp.MaxSendWR < 0 || cp.MaxRecvWR < 0 || cp.MaxSendSGE < 0 || cp.MaxRecvSGE < 0 || cp.MaxInlineData < 0 {
		return nil, verbs.Errorf(unix.EINVAL, "negative capability %+v", cp)
	}
	if m := p.caps.maxQPWR; m > 0 && (cp.MaxSendWR > m || cp.MaxRecvWR > m) {
		return nil, verbs.Errorf(unix.EINVAL, "%d send / %d receive work requests exceed the device limit %d", cp.MaxSendWR, cp.MaxRecvWR, m)
	}
	if m := p.caps.maxSGE; m > 0 && (cp.MaxSendSGE > m || cp.MaxRecvSGE > m) {
		return nil, verbs.Errorf(unix.EINVAL, "%d send / %d receive SGEs exceed the device limit %d", cp.MaxSendSGE, cp.MaxRecvSGE, m)
	}
	const most = 1 << 24 // beyond any page directory
	if cp.MaxSendWR > most || cp.MaxRecvWR > most || cp.MaxSendSGE > most || cp.MaxRecvSGE > most {
		return nil, verbs.Errorf(unix.EINVAL, "capabilities %+v exceed what a page directory holds", cp)
	}
	q := &pvrdmaQP{prov: p}
	req, err := q.prepare(pd, init)
	if err != nil {
		return nil, err
	}
	var ok bool
	if q.sendCQ, ok = init.SendCQ.(*pvrdmaCQ); !ok {
		return nil, verbs.Errorf(unix.EINVAL, "send CQ of another device")
	}
	if q.recvCQ, ok = init.RecvCQ.(*pvrdmaCQ); !ok {
		return nil, verbs.Errorf(unix.EINVAL, "receive CQ of another device")
	}
	onSRQ := init.SRQ != nil
	cp.MaxSendSGE = max(cp.MaxSendSGE, 1)
	if onSRQ {
		cp.MaxRecvWR, cp.MaxRecvSGE = 0, 0
	} else {
		cp.MaxRecvSGE = max(cp.MaxRecvSGE, 1)
	}
	l := pvrdma.NewQPLayout(cp, onSRQ)
	cp.MaxSendWR, cp.MaxRecvWR = l.SendWR, l.RecvWR
	if err := pvrdmaPages("queue pair", l.SendBufLen, l.RecvBufLen); err != nil {
		return nil, err
	}
	if q.sbuf, err = pvrdmaBuffer(l.SendBufLen); err != nil {
		return nil, err
	}
	if l.RecvBufLen > 0 {
		if q.rbuf, err = pvrdmaBuffer(l.RecvBufLen); err != nil {
			q.unmap()
			return nil, err
		}
	}
	req.MaxSendWR, req.MaxRecvWR = uint32(cp.MaxSendWR), uint32(cp.MaxRecvWR)
	req.MaxSendSGE, req.MaxRecvSGE = uint32(cp.MaxSendSGE), uint32(cp.MaxRecvSGE)
	req.MaxInlineData = 0
	q.user = c.track(q)
	req.UserHandle = q.user
	drv := pvrdmaCreateQP{SBufAddr: unix.Addr(q.sbuf), SBufSize: uint32(len(q.sbuf))}
	if q.rbuf != nil {
		drv.RBufAddr, drv.RBufSize = unix.Addr(q.rbuf), uint32(len(q.rbuf))
	}
	var r createQPResp
	out := make([]byte, pvrdmaQPRespSize)
	if err := c.exec(cmdCreateQP, &req, pvrdmaEncode(&drv), &r, out); err != nil {
		delete(c.objs, q.user)
		q.unmap()
		return nil, pvrdmaCreateErr(err)
	}
	var d pvrdmaCreateQPResp
	pvrdmaDecode(out, &d)
	// Kernels before 5.5 leave the driver data alone: the QP number is
	// then also the device handle.
	q.devQP = d.QPHandle
	if q.devQP == 0 {
		q.devQP = r.QPN
	}
	if err := pvrdmaHandle("qp handle", q.devQP); err != nil {
		_ = c.exec(cmdDestroyQP, &destroyReq{Handle: r.QPHandle}, nil, &destroyQPResp{}, nil)
		delete(c.objs, q.user)
		q.unmap()
		return nil, err
	}
	q.created(&r)
	q.cap = cp // what the rings hold
	q.dp = pvrdma.NewQP(pvrdma.QPConfig{
		Type: init.Type, Handle: q.devQP, Layout: l, SendBuf: q.sbuf, RecvBuf: q.rbuf,
		Cap: cp, UAR: p.uar, Atomics: p.caps.atomics,
	})
	q.onModify = q.stateChanged
	p.qps.Set(q.devQP, q.qpn)
	return q, nil
}

func (q *pvrdmaQP) unmap() {
	for _, b := range [][]byte{q.sbuf, q.rbuf} {
		if b != nil {
			_ = munmap(b)
		}
	}
	q.sbuf, q.rbuf = nil, nil
}

// stateChanged follows a state change the kernel accepted: the data path
// checks posts against it, and a QP back in RESET starts over with empty
// rings and none of its completions left in its CQs.
func (q *pvrdmaQP) stateChanged(s verbs.QPState) {
	q.ctl.Lock()
	defer q.ctl.Unlock()
	if q.closed.Load() {
		return
	}
	q.dp.SetState(s)
	if s == verbs.StateReset {
		q.purge()
	}
}

// purge removes the QP's completions from its CQs.
func (q *pvrdmaQP) purge() {
	q.recvCQ.purge(q.devQP)
	if q.sendCQ != q.recvCQ {
		q.sendCQ.purge(q.devQP)
	}
}

// PostSend writes wrs into the send ring and rings the send doorbell once.
func (q *pvrdmaQP) PostSend(wrs []verbs.SendWR) (int, error) {
	if q.closed.Load() {
		return 0, errPVRDMASendClosed
	}
	if q.typ == verbs.UD {
		for i := range wrs {
			if !q.ownAH(wrs[i].AH) {
				if i == 0 {
					return 0, errPVRDMANoAH
				}
				n, err := q.dp.PostSend(wrs[:i])
				if err == nil {
					err = errPVRDMANoAH
				}
				return n, err
			}
		}
	}
	return q.dp.PostSend(wrs)
}

// ownAH reports whether ah is a live address handle of the QP's context.
func (q *pvrdmaQP) ownAH(ah verbs.AH) bool {
	a, ok := ah.(*pvrdmaAH)
	return ok && a.pd.c == q.pd.c && !a.closed.Load()
}

// PostRecv writes wrs into the receive ring and rings the receive doorbell.
func (q *pvrdmaQP) PostRecv(wrs []verbs.RecvWR) (int, error) {
	if q.closed.Load() {
		return 0, errPVRDMARecvClosed
	}
	return q.dp.PostRecv(wrs)
}

// Close destroys the QP (DESTROY_QP), then drops its completions from its
// CQs and frees its rings.
func (q *pvrdmaQP) Close() error {
	return q.destroy(func() error {
		q.ctl.Lock()
		defer q.ctl.Unlock()
		q.dp.Shutdown()
		q.purge()
		q.prov.qps.Clear(q.devQP)
		var errs []error
		for _, b := range [][]byte{q.sbuf, q.rbuf} {
			if b != nil {
				errs = append(errs, munmap(b))
			}
		}
		q.sbuf, q.rbuf = nil, nil
		return errors.Join(errs...)
	})
}

// pvrdmaSRQ is a vmw_pvrdma shared receive queue: a buffer with the ring
// state page (the ring at offset 8) followed by the WQEs.
type pvrdmaSRQ struct {
	srqBase
	dp  *pvrdma.SRQ
	buf []byte
}

var _ verbs.SRQ = (*pvrdmaSRQ)(nil)

func (p *pvrdmaProvider) createSRQ(pd *PD, init verbs.SRQInit) (verbs.SRQ, error) {
	c := pd.c
	if p.caps.maxSRQ == 0 {
		return nil, verbs.Errorf(verbs.ErrNotSupported, "shared receive queues (the host reports max_srq 0)")
	}
	if init.MaxWR < 1 || init.MaxSGE < 0 || init.Limit < 0 || init.Limit > init.MaxWR {
		return nil, verbs.Errorf(unix.EINVAL, "max_wr %d, max_sge %d, limit %d", init.MaxWR, init.MaxSGE, init.Limit)
	}
	if init.MaxWR > 1<<24 || init.MaxSGE > 1<<24 {
		return nil, verbs.Errorf(unix.EINVAL, "max_wr %d, max_sge %d exceed what a page directory holds", init.MaxWR, init.MaxSGE)
	}
	n := pvrdma.RoundPow2(init.MaxWR)
	sge := max(init.MaxSGE, 1)
	if m := p.caps.maxSRQWR; m > 0 && n > m {
		return nil, verbs.Errorf(unix.EINVAL, "max_wr %d, rounded to %d, exceeds the device limit %d", init.MaxWR, n, m)
	}
	if m := p.caps.maxSRQSGE; m > 0 && sge > m {
		return nil, verbs.Errorf(unix.EINVAL, "max_sge %d exceeds the device limit %d", init.MaxSGE, m)
	}
	stride := pvrdma.RecvStride(sge)
	size := pvrdma.SRQBufLen(n, stride)
	if err := pvrdmaPages("shared receive queue", size); err != nil {
		return nil, err
	}
	buf, err := pvrdmaBuffer(size)
	if err != nil {
		return nil, err
	}
	s := &pvrdmaSRQ{srqBase: srqBase{pd: pd}, buf: buf}
	s.user = c.track(s)
	req := createSRQReq{UserHandle: s.user, PDHandle: pd.handle, MaxWR: uint32(n), MaxSGE: uint32(sge), SRQLimit: uint32(init.Limit)}
	in := pvrdmaEncode(&pvrdmaCreateSRQ{BufAddr: unix.Addr(buf), BufSize: uint32(len(buf))})
	var r createSRQResp
	out := make([]byte, pvrdmaSRQRespSize)
	if err := c.exec(cmdCreateSRQ, &req, in, &r, out); err != nil {
		delete(c.objs, s.user)
		_ = munmap(buf)
		return nil, pvrdmaCreateErr(err)
	}
	var d pvrdmaCreateSRQResp
	pvrdmaDecode(out, &d)
	if err := pvrdmaHandle("srqn", d.SRQN); err != nil {
		_ = c.exec(cmdDestroySRQ, &destroyReq{Handle: r.SRQHandle}, nil, &destroyQPResp{}, nil)
		delete(c.objs, s.user)
		_ = munmap(buf)
		return nil, err
	}
	s.handle, s.srqn, s.maxWR, s.maxSGE = r.SRQHandle, d.SRQN, n, sge
	s.dp = pvrdma.NewSRQ(pvrdma.SRQConfig{Handle: d.SRQN, Entries: n, Stride: stride, MaxSGE: sge, Buf: buf, UAR: p.uar})
	return s, nil
}

// PostRecv writes wrs into the SRQ and rings the SRQ doorbell.
func (s *pvrdmaSRQ) PostRecv(wrs []verbs.RecvWR) (int, error) {
	if s.closed.Load() {
		return 0, errPVRDMASRQClosed
	}
	return s.dp.PostRecv(wrs)
}

// Modify sets the SRQ limit (MODIFY_SRQ); vmw_pvrdma cannot resize an SRQ.
func (s *pvrdmaSRQ) Modify(attr verbs.SRQAttr, mask verbs.SRQAttrMask) error {
	c := s.pd.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if s.closed.Load() {
		return c.err("modify srq", verbs.ErrClosed)
	}
	switch {
	case mask&verbs.SRQMaxWR != 0:
		return c.err("modify srq", verbs.Errorf(verbs.ErrNotSupported, "resizing a shared receive queue"))
	case mask != verbs.SRQLimit:
		return c.err("modify srq", verbs.Errorf(unix.EINVAL, "attribute mask %#x (only the limit can be modified)", uint32(mask)))
	case attr.Limit < 0 || attr.Limit > s.maxWR:
		return c.err("modify srq", verbs.Errorf(unix.EINVAL, "limit %d above max_wr %d", attr.Limit, s.maxWR))
	}
	req := modifySRQ{SRQHandle: s.handle, AttrMask: uint32(mask), SRQLimit: uint32(attr.Limit)}
	if err := c.exec(cmdModifySRQ, &req, nil, nil, nil); err != nil {
		return c.err("modify srq", err)
	}
	return nil
}

func (s *pvrdmaSRQ) Close() error {
	return s.destroy(func() error {
		s.dp.Shutdown()
		b := s.buf
		s.buf = nil
		return munmap(b)
	})
}
