//go:build linux

package emu

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/pvperf/pvperf/internal/unix"
	"github.com/pvperf/pvperf/verbs"
	"github.com/pvperf/pvperf/verbs/pvrdma"
)

// qp is an emulated queue pair: the pvrdma driver side (which encodes work
// requests into the rings) plus the device side (which executes them).
type qp struct {
	*pvrdma.QP
	c      *devContext
	pd     *pd
	idx    uint32
	handle uint32
	qpn    uint32
	gen    atomic.Uint32 // identity of the QP context; changes on reset
	typ    verbs.QPType
	scq    *cq
	rcq    *cq
	srq    *srq
	sigAll bool
	cap    verbs.QPCap
	sbuf   span
	rbuf   span
	sh     *qpCtx
	dsq    pvrdma.Queue // the device's view of the send queue
	drq    pvrdma.Queue // and of the receive queue (none with an SRQ)

	amu  sync.Mutex // guards attr and closed
	attr verbs.QPAttr
	dead bool

	// Requester state, guarded by the send lock (QP.LockSend).
	sqHead      uint32
	sqPSN       uint32
	rnrLeft     int
	retryLeft   int
	stalled     bool
	retryDone   bool // the last retransmission was lost too
	retriesUsed bool // retryLeft or rnrLeft is below its start value
	timerSeq    uint64
	rem         remote
	ud          remote  // last UD destination
	lmr         mrCache // last local memory region
	srcs        [64][]byte
	rwqe        [pvrdma.RecvHdrSize + 64*pvrdma.SGESize]byte
	grh         [40]byte

	// The network transport (wire*.go): wq is set at creation, and never
	// changed, on a device with a network port; wrc tells that an RC or UC
	// QP reaches its destination over the network (chosen at RTR).
	wq  *wireQP
	wrc bool
	// netUser: the QP counts among its port's users (setNetUser).
	netUser atomic.Bool
}

var _ verbs.QP = (*qp)(nil)

func (p *pd) CreateQP(init verbs.QPInit) (verbs.QP, error) {
	c := p.c
	fail := func(err error) (verbs.QP, error) { return nil, c.err("create qp", err) }
	a := &c.attr
	if !a.Supports(init.Type) {
		return fail(verbs.Errorf(verbs.ErrNotSupported, "%v queue pairs on profile %s", init.Type, c.dev.cfg.Profile))
	}
	scq, ok1 := init.SendCQ.(*cq)
	rcq, ok2 := init.RecvCQ.(*cq)
	if !ok1 || !ok2 || scq.c != c || rcq.c != c {
		return fail(verbs.Errorf(unix.EINVAL, "send and receive completion queues must belong to this context"))
	}
	var s *srq
	if init.SRQ != nil {
		var ok bool
		s, ok = init.SRQ.(*srq)
		if !ok || s.p.c != c {
			return fail(verbs.Errorf(unix.EINVAL, "shared receive queue of another context"))
		}
		if init.Cap.MaxRecvWR != 0 || init.Cap.MaxRecvSGE != 0 {
			return fail(verbs.Errorf(unix.EINVAL, "max_recv_wr and max_recv_sge must be 0 with a shared receive queue"))
		}
	}
	cp := init.Cap
	switch {
	case cp.MaxSendWR < 0 || cp.MaxRecvWR < 0 || cp.MaxSendSGE < 0 || cp.MaxRecvSGE < 0 || cp.MaxInlineData < 0:
		return fail(verbs.Errorf(unix.EINVAL, "negative capability"))
	case cp.MaxSendWR > a.MaxQPWR || cp.MaxRecvWR > a.MaxQPWR:
		return fail(verbs.Errorf(unix.EINVAL, "%d send / %d receive work requests exceed the device limit %d", cp.MaxSendWR, cp.MaxRecvWR, a.MaxQPWR))
	case cp.MaxSendSGE > a.MaxSGE || cp.MaxRecvSGE > a.MaxSGE:
		return fail(verbs.Errorf(unix.EINVAL, "%d send / %d receive SGEs exceed the device limit %d", cp.MaxSendSGE, cp.MaxRecvSGE, a.MaxSGE))
	case cp.MaxInlineData > a.MaxInlineData:
		if a.MaxInlineData == 0 {
			return fail(verbs.Errorf(verbs.ErrNotSupported, "inline data on profile %s", c.dev.cfg.Profile))
		}
		return fail(verbs.Errorf(unix.EINVAL, "max_inline_data %d exceeds the device limit %d", cp.MaxInlineData, a.MaxInlineData))
	}
	cp.MaxSendSGE = max(cp.MaxSendSGE, 1)
	if s == nil {
		cp.MaxRecvSGE = max(cp.MaxRecvSGE, 1)
	}
	isUD := init.Type == verbs.UD
	c.mu.Lock()
	switch {
	case c.closed:
		c.mu.Unlock()
		return fail(verbs.ErrClosed)
	case c.nQP >= a.MaxQP:
		c.mu.Unlock()
		return fail(verbs.Errorf(unix.ENOMEM, "device limit of %d queue pairs reached", a.MaxQP))
	case isUD && a.MaxUDQP > 0 && c.nUDQP >= a.MaxUDQP:
		c.mu.Unlock()
		return fail(verbs.Errorf(unix.ENOMEM, "device limit of %d UD queue pairs reached", a.MaxUDQP))
	}
	c.nQP++
	if isUD {
		c.nUDQP++
	}
	c.mu.Unlock()
	undo := []func(){func() {
		c.mu.Lock()
		c.nQP--
		if isUD {
			c.nUDQP--
		}
		c.mu.Unlock()
	}}
	cleanup := func(err error) (verbs.QP, error) {
		for i := len(undo) - 1; i >= 0; i-- {
			undo[i]()
		}
		return fail(err)
	}
	if err := p.child("create qp"); err != nil {
		return cleanup(err)
	}
	undo = append(undo, p.unchild)
	for _, q := range []*cq{scq, rcq} {
		if err := q.use(); err != nil {
			return cleanup(err)
		}
		undo = append(undo, q.unuse)
	}
	if s != nil {
		if err := s.use(); err != nil {
			return cleanup(err)
		}
		undo = append(undo, s.unuse)
	}
	h := c.h
	layout := pvrdma.NewQPLayout(cp, s != nil)
	sbuf, err := h.arena.alloc(layout.SendBufLen)
	if err != nil {
		return cleanup(err)
	}
	undo = append(undo, func() { h.arena.free(sbuf) })
	var rbuf span
	if layout.RecvBufLen > 0 {
		if rbuf, err = h.arena.alloc(layout.RecvBufLen); err != nil {
			return cleanup(err)
		}
		undo = append(undo, func() { h.arena.free(rbuf) })
	}
	h.mu.Lock()
	idx, ok := pop(&h.freeQP)
	h.mu.Unlock()
	if !ok {
		return cleanup(verbs.Errorf(unix.ENOMEM, "too many queue pairs"))
	}
	cp.MaxSendWR = layout.SendWR
	cp.MaxRecvWR = layout.RecvWR
	q := &qp{
		c: c, pd: p, idx: idx, handle: idx + 1, qpn: h.slot<<12 | idx, typ: init.Type,
		scq: scq, rcq: rcq, srq: s, sigAll: init.SigAll, cap: cp, sbuf: sbuf, rbuf: rbuf,
		sh: &h.tab.qps[idx],
	}
	if c.wire != nil {
		q.wq = &wireQP{port: c.wire}
	}
	q.dsq = pvrdma.NewQueue(sbuf.bytes(), pvrdma.TxRingOffset, sbuf.bytes()[pvrdma.PageSize:], layout.SendWR, layout.SendStride)
	if s == nil {
		q.drq = pvrdma.NewQueue(sbuf.bytes(), pvrdma.RxRingOffset, rbuf.bytes(), layout.RecvWR, layout.RecvStride)
	}
	var res pvrdma.Resolver // none: the device has no inline data
	if a.MaxInlineData > 0 {
		res = c
	}
	q.QP = pvrdma.NewQP(pvrdma.QPConfig{
		Type: init.Type, Handle: q.handle, Layout: layout, SendBuf: sbuf.bytes(), RecvBuf: rbuf.bytes(),
		Cap: cp, UAR: c, Resolver: res, Atomics: a.AtomicCap != verbs.AtomicNone,
	})
	q.attr = verbs.QPAttr{State: verbs.StateReset, Cap: cp, SigAll: init.SigAll, Port: 1, PathMTU: verbs.MTU1024}

	sh := q.sh
	store(&sh.state, uint32(verbs.StateReset))
	sh.typ = uint32(init.Type)
	sh.dev = c.idx
	sh.pd = p.id
	store(&sh.access, 0)
	store(&sh.qkey, 0)
	sh.mtu = uint32(verbs.MTU1024)
	sh.port = 1
	sh.minRNR = 0
	sh.destQPN = 0
	sh.recvCQ = rcq.idx
	sh.srq = 0
	if s != nil {
		sh.srq = s.idx + 1
	}
	sh.rqN = uint32(layout.RecvWR)
	sh.rqStride = uint32(layout.RecvStride)
	sh.rqSeg = sbuf.seg.id
	sh.rqRing = uint64(sbuf.off)
	if s == nil {
		sh.rqWQESeg = rbuf.seg.id
		sh.rqWQE = uint64(rbuf.off)
	}
	sh.maxRecvSGE = uint32(cp.MaxRecvSGE)
	sh.maxDestRd = 0
	store(&sh.rqLock, 0)
	store(&sh.rqPSN, 0)
	store(&sh.flush, 0)
	sh.ctx = c.idx
	sh.handle = q.handle
	q.gen.Store(newGen(&sh.gen))
	c.qpt.Set(q.handle, q.qpn)
	h.qps[idx].Store(q)
	return q, nil
}

func (q *qp) Num() uint32        { return q.qpn }
func (q *qp) Type() verbs.QPType { return q.typ }

func (q *qp) state() verbs.QPState { return verbs.QPState(load(&q.sh.state)) }

func (q *qp) Query() (verbs.QPAttr, error) {
	q.amu.Lock()
	defer q.amu.Unlock()
	if q.dead {
		return verbs.QPAttr{}, q.c.err("query qp", verbs.ErrClosed)
	}
	a := q.attr
	a.State = q.state()
	a.CurState = a.State
	a.Cap = q.cap
	a.SigAll = q.sigAll
	return a, nil
}

// The attribute masks of ib_modify_qp_is_ok (IB spec tables 91-93):
// what a transition requires and what it may carry, per QP type.
type transition struct{ req, opt [5]verbs.QPAttrMask } // indexed by QP type (RC=2, UC=3, UD=4)

const (
	mState   = verbs.AttrState
	mCur     = verbs.AttrCurState
	mAccess  = verbs.AttrAccessFlags
	mPKey    = verbs.AttrPKeyIndex
	mPort    = verbs.AttrPort
	mQKey    = verbs.AttrQKey
	mAV      = verbs.AttrAV
	mMTU     = verbs.AttrPathMTU
	mTimeout = verbs.AttrTimeout
	mRetry   = verbs.AttrRetryCnt
	mRNR     = verbs.AttrRNRRetry
	mRQPSN   = verbs.AttrRQPSN
	mRdAtom  = verbs.AttrMaxQPRdAtomic
	mAlt     = verbs.AttrAltPath
	mMinRNR  = verbs.AttrMinRNRTimer
	mSQPSN   = verbs.AttrSQPSN
	mDestRd  = verbs.AttrMaxDestRdAtomic
	mMig     = verbs.AttrPathMigState
	mDestQPN = verbs.AttrDestQPN
	mSQDNote = verbs.AttrEnSQDAsyncNotify
)

func tr(rc, uc, ud [2]verbs.QPAttrMask) transition {
	var t transition
	t.req[verbs.RC], t.opt[verbs.RC] = rc[0], rc[1]
	t.req[verbs.UC], t.opt[verbs.UC] = uc[0], uc[1]
	t.req[verbs.UD], t.opt[verbs.UD] = ud[0], ud[1]
	return t
}

type m2 = [2]verbs.QPAttrMask

var transitions = map[[2]verbs.QPState]transition{
	{verbs.StateReset, verbs.StateInit}: tr(
		m2{mState | mPKey | mPort | mAccess, 0},
		m2{mState | mPKey | mPort | mAccess, 0},
		m2{mState | mPKey | mPort | mQKey, 0}),
	{verbs.StateInit, verbs.StateInit}: tr(
		m2{0, mPKey | mPort | mAccess},
		m2{0, mPKey | mPort | mAccess},
		m2{0, mPKey | mPort | mQKey}),
	{verbs.StateInit, verbs.StateRTR}: tr(
		m2{mState | mAV | mMTU | mDestQPN | mRQPSN | mDestRd | mMinRNR, mAlt | mAccess | mPKey},
		m2{mState | mAV | mMTU | mDestQPN | mRQPSN, mAlt | mAccess | mPKey},
		m2{mState, mPKey | mQKey}),
	{verbs.StateRTR, verbs.StateRTS}: tr(
		m2{mState | mTimeout | mRetry | mRNR | mSQPSN | mRdAtom, mCur | mAlt | mAccess | mMinRNR | mMig},
		m2{mState | mSQPSN, mCur | mAlt | mAccess | mMig},
		m2{mState | mSQPSN, mCur | mQKey}),
	{verbs.StateRTS, verbs.StateRTS}: tr(
		m2{0, mCur | mAccess | mAlt | mMig | mMinRNR},
		m2{0, mCur | mAccess | mAlt | mMig},
		m2{0, mCur | mQKey}),
	{verbs.StateRTS, verbs.StateSQD}: tr(m2{0, mSQDNote}, m2{0, mSQDNote}, m2{0, mSQDNote}),
	{verbs.StateSQD, verbs.StateRTS}: tr(
		m2{0, mCur | mAccess | mAlt | mMig | mMinRNR},
		m2{0, mCur | mAccess | mAlt | mMig},
		m2{0, mCur | mQKey}),
	{verbs.StateSQD, verbs.StateSQD}: tr(
		m2{0, mPKey | mQKey | mAV | mMTU | mTimeout | mRetry | mRNR | mRdAtom | mAlt | mAccess | mMinRNR | mDestRd | mMig | mPort},
		m2{0, mPKey | mAV | mMTU | mAlt | mAccess | mMig | mPort},
		m2{0, mPKey | mQKey}),
	{verbs.StateSQE, verbs.StateRTS}: tr(
		m2{^verbs.QPAttrMask(0), 0}, // RC has no SQE state
		m2{0, mCur | mAccess},
		m2{0, mCur | mQKey}),
}

var errModifyClosed = verbs.ErrClosed

// Modify changes the QP's attributes and state, checking the transition
// and its attribute mask as the kernel does.
func (q *qp) Modify(attr *verbs.QPAttr, mask verbs.QPAttrMask) error {
	c := q.c
	op := "modify qp"
	if mask&verbs.AttrState != 0 {
		op = "modify qp to " + attr.State.String()
	}
	bad := func(format string, args ...any) error {
		return c.err(op, verbs.Errorf(unix.EINVAL, format, args...))
	}
	q.amu.Lock()
	defer q.amu.Unlock()
	if q.dead {
		return c.err(op, errModifyClosed)
	}
	cur := q.state()
	if mask&verbs.AttrCurState != 0 && attr.CurState != cur && cur != verbs.StateErr && cur != verbs.StateSQE {
		return bad("current state is %v, not %v", cur, attr.CurState)
	}
	next := cur
	if mask&verbs.AttrState != 0 {
		next = attr.State
		if next > verbs.StateErr {
			return bad("invalid state %d", next)
		}
	}
	if next == verbs.StateErr && cur == verbs.StateReset {
		// As the kernel's transition table has it (ib_modify_qp_is_ok):
		// RESET leads only to INIT.
		return bad("transition %v to %v is not allowed", cur, next)
	}
	if next != verbs.StateReset && next != verbs.StateErr {
		t, ok := transitions[[2]verbs.QPState{cur, next}]
		if !ok {
			return bad("transition %v to %v is not allowed", cur, next)
		}
		req, opt := t.req[q.typ], t.opt[q.typ]
		if req == ^verbs.QPAttrMask(0) {
			return bad("transition %v to %v is not allowed for %v", cur, next, q.typ)
		}
		if cur != next {
			req |= verbs.AttrState
		}
		if missing := req &^ mask; missing != 0 {
			return bad("attribute mask %#x lacks required attributes %#x", uint32(mask), uint32(missing))
		}
		if extra := mask &^ (req | opt | verbs.AttrState); extra != 0 {
			return bad("attribute mask %#x has attributes %#x not valid for %v to %v", uint32(mask), uint32(extra), cur, next)
		}
	}
	if err := q.checkValues(attr, mask); err != nil {
		return c.err(op, err)
	}

	// Apply, under the send lock: the executor reads these attributes.
	q.LockSend()
	a := &q.attr
	if mask&verbs.AttrAccessFlags != 0 {
		a.Access = attr.Access
	}
	if mask&verbs.AttrPKeyIndex != 0 {
		a.PKeyIndex = attr.PKeyIndex
	}
	if mask&verbs.AttrPort != 0 {
		a.Port = attr.Port
	}
	if mask&verbs.AttrQKey != 0 {
		a.QKey = attr.QKey
	}
	if mask&verbs.AttrAV != 0 {
		a.AH = attr.AH
	}
	if mask&verbs.AttrPathMTU != 0 {
		a.PathMTU = attr.PathMTU
	}
	if mask&verbs.AttrTimeout != 0 {
		a.Timeout = attr.Timeout
	}
	if mask&verbs.AttrRetryCnt != 0 {
		a.RetryCnt = attr.RetryCnt
	}
	if mask&verbs.AttrRNRRetry != 0 {
		a.RNRRetry = attr.RNRRetry
	}
	if mask&verbs.AttrRQPSN != 0 {
		a.RQPSN = attr.RQPSN & 0xFFFFFF
	}
	if mask&verbs.AttrSQPSN != 0 {
		a.SQPSN = attr.SQPSN & 0xFFFFFF
	}
	if mask&verbs.AttrMaxQPRdAtomic != 0 {
		a.MaxRdAtomic = attr.MaxRdAtomic
	}
	if mask&verbs.AttrMaxDestRdAtomic != 0 {
		a.MaxDestRdAtomic = attr.MaxDestRdAtomic
	}
	if mask&verbs.AttrMinRNRTimer != 0 {
		a.MinRNRTimer = attr.MinRNRTimer
	}
	if mask&verbs.AttrDestQPN != 0 {
		a.DestQPN = attr.DestQPN & 0xFFFFFF
	}
	if mask&verbs.AttrEnSQDAsyncNotify != 0 {
		a.SQDrainNotify = attr.SQDrainNotify
	}
	sh := q.sh
	store(&sh.access, uint32(a.Access))
	store(&sh.qkey, a.QKey)
	sh.mtu = uint32(a.PathMTU)
	sh.port = uint32(a.Port)
	sh.minRNR = uint32(a.MinRNRTimer)
	sh.destQPN = a.DestQPN
	sh.maxDestRd = uint32(a.MaxDestRdAtomic)

	switch next {
	case verbs.StateReset:
		q.UnlockSend()
		q.reset()
		return nil
	case verbs.StateRTR:
		if mask&verbs.AttrRQPSN != 0 {
			store(&sh.rqPSN, a.RQPSN)
		}
		q.rem = remote{}
		q.chooseTransport()
	case verbs.StateRTS:
		if mask&verbs.AttrSQPSN != 0 {
			q.sqPSN = a.SQPSN
		}
		if q.wrc && cur == verbs.StateRTR {
			q.wq.resetReq(q)
		}
		if cur != verbs.StateRTS {
			// Retries count afresh when the QP (re)enters RTS; a
			// modify within RTS leaves a retry in progress alone.
			q.rnrLeft, q.retryLeft = int(a.RNRRetry), int(a.RetryCnt)
			q.unstall()
		}
	case verbs.StateSQD:
		if cur == verbs.StateRTS {
			notify := a.SQDrainNotify
			if q.wrc {
				// Over the network, the messages begun finish first.
				notify = q.drain(a.SQDrainNotify)
			}
			if notify {
				c.h.raiseEvent(c.h.self, c.idx, verbs.EventSQDrained, objQP, q.idx, q.gen.Load())
			}
		}
	}
	store(&sh.state, uint32(next))
	q.QP.SetState(next)
	switch next {
	case verbs.StateRTS:
		q.execute() // resume work posted while in SQD or SQE
	case verbs.StateErr:
		q.flushAll()
	}
	q.UnlockSend()
	return nil
}

func (q *qp) checkValues(attr *verbs.QPAttr, mask verbs.QPAttrMask) error {
	c := q.c
	inval := func(format string, args ...any) error { return verbs.Errorf(unix.EINVAL, format, args...) }
	if mask&verbs.AttrPort != 0 && attr.Port != 1 {
		return inval("no port %d", attr.Port)
	}
	if mask&verbs.AttrPKeyIndex != 0 && int(attr.PKeyIndex) >= int(c.port.PKeyTblLen) {
		return inval("pkey index %d out of range", attr.PKeyIndex)
	}
	if mask&verbs.AttrPathMTU != 0 && (attr.PathMTU < verbs.MTU256 || attr.PathMTU > c.port.MaxMTU) {
		return inval("path MTU %d invalid", attr.PathMTU)
	}
	if mask&verbs.AttrAV != 0 {
		ah := &attr.AH
		if !ah.IsGlobal {
			return inval("RoCE needs a global route header (is_global)")
		}
		if int(ah.GRH.SGIDIndex) >= len(c.gids) {
			return inval("sgid index %d is not in use", ah.GRH.SGIDIndex)
		}
		if ah.Port != 0 && ah.Port != 1 {
			return inval("no port %d", ah.Port)
		}
	}
	if mask&verbs.AttrTimeout != 0 && attr.Timeout > 31 {
		return inval("timeout %d out of range", attr.Timeout)
	}
	if mask&verbs.AttrRetryCnt != 0 && attr.RetryCnt > 7 {
		return inval("retry count %d out of range", attr.RetryCnt)
	}
	if mask&verbs.AttrRNRRetry != 0 && attr.RNRRetry > 7 {
		return inval("rnr retry %d out of range", attr.RNRRetry)
	}
	if mask&verbs.AttrMinRNRTimer != 0 && attr.MinRNRTimer > 31 {
		return inval("min rnr timer %d out of range", attr.MinRNRTimer)
	}
	if mask&verbs.AttrMaxQPRdAtomic != 0 && int(attr.MaxRdAtomic) > c.attr.MaxQPInitRdAtom {
		return inval("max_rd_atomic %d exceeds %d", attr.MaxRdAtomic, c.attr.MaxQPInitRdAtom)
	}
	if mask&verbs.AttrMaxDestRdAtomic != 0 && int(attr.MaxDestRdAtomic) > c.attr.MaxQPRdAtom {
		return inval("max_dest_rd_atomic %d exceeds %d", attr.MaxDestRdAtomic, c.attr.MaxQPRdAtom)
	}
	if mask&verbs.AttrAltPath != 0 {
		return verbs.Errorf(verbs.ErrNotSupported, "alternate paths")
	}
	return nil
}

// reset returns the QP to its state after creation: no work queued, no
// completions left in its CQs (but for those of a peer process stopped
// in the middle of a delivery: see purgeBound).
func (q *qp) reset() {
	h := q.c.h
	q.LockSend()
	store(&q.sh.state, uint32(verbs.StateReset))
	q.sqHead = 0
	q.unstall()
	q.rem = remote{}
	q.ud = remote{}
	if q.wq != nil {
		q.wq.resetReq(q)
		q.wq.rmu.Lock()
		q.wq.resetResp()
		q.wq.rmu.Unlock()
	}
	q.setWRC(false)
	q.setNetUser(false)
	q.UnlockSend()
	l := spinLock{&q.sh.rqLock}
	l.lock(h)
	q.QP.SetState(verbs.StateReset) // empties both rings
	store(&q.sh.rqPSN, 0)
	store(&q.sh.flush, 0)
	q.gen.Store(newGen(&q.sh.gen)) // requesters' cached view of the queues is stale
	l.unlock()
	q.purgeCQs()
}

// purgeCQs removes this QP's completions from its CQs, and reports
// whether it could. A CQ whose lock a stopped peer process holds (it was
// delivering a completion when it stopped) keeps them: see purgeBound.
func (q *qp) purgeCQs() bool {
	h := q.c.h
	ok := true
	for _, c := range []*cq{q.scq, q.rcq} {
		if !c.CQ.Purge(q.handle, lockerOf(h, &c.view.ctx.lock)) {
			ok = false
			c.stuck.Store(true)
		}
		if q.scq == q.rcq {
			break
		}
	}
	return ok
}

func (q *qp) Close() error {
	q.amu.Lock()
	if q.dead {
		q.amu.Unlock()
		return nil
	}
	q.dead = true
	q.amu.Unlock()
	c, h := q.c, q.c.h
	q.QP.Shutdown()
	q.LockSend()
	q.timerSeq++
	q.stalled = false
	store(&q.sh.state, uint32(verbs.StateReset))
	store(&q.sh.gen, q.gen.Load()+1)
	q.UnlockSend()
	q.setNetUser(false)
	h.qps[q.idx].Store(nil)
	if q.wq != nil {
		// A packet for q found before the Store may still be handled.
		q.wq.barrier()
		q.LockSend()
		q.UnlockSend()
	}
	h.quiesce()
	if q.purgeCQs() {
		c.qpt.Clear(q.handle)
		h.arena.free(q.sbuf)
		h.arena.free(q.rbuf)
		h.mu.Lock()
		h.freeQP = append(h.freeQP, q.idx)
		h.mu.Unlock()
	}
	// Else a stopped peer process is in the middle of a delivery to
	// this QP: its completions may still come, and its queues may
	// still be written when that process goes on. The QP's handle,
	// table entry and queues stay as they are, never used again, so
	// that its completions are still those of this QP.
	q.scq.unuse()
	q.rcq.unuse()
	if q.srq != nil {
		q.srq.unuse()
	}
	q.pd.unchild()
	c.mu.Lock()
	c.nQP--
	if q.typ == verbs.UD {
		c.nUDQP--
	}
	c.mu.Unlock()
	return nil
}

// timeout is the local ACK timeout: 4.096 us * 2^t, 0 = infinite.
func ackTimeout(t uint8) time.Duration {
	if t == 0 {
		return 0
	}
	return time.Duration(4096<<t) * time.Nanosecond
}

// rnrTimer maps the RNR NAK timer code to its duration (IB spec table 45).
var rnrTimer = [32]time.Duration{
	655360, 10, 20, 30, 40, 60, 80, 120, 160, 240, 320, 480, 640, 960, 1280, 1920,
	2560, 3840, 5120, 7680, 10240, 15360, 20480, 30720, 40960, 61440, 81920, 122880,
	163840, 245760, 327680, 491520,
}

func init() {
	for i := range rnrTimer {
		rnrTimer[i] *= time.Microsecond
	}
}
