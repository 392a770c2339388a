//go:build linux

package uverbs

import (
	"sync"
	"sync/atomic"

	"github.com/pvperf/pvperf/internal/unix"
	"github.com/pvperf/pvperf/verbs"
)

// cqBase is what every provider's CQ shares: its handle and lifecycle.
type cqBase struct {
	c      *Context
	handle uint32
	user   uint64 // user handle, echoed in completion and async events
	ch     *compChannel
	n      int // entries
	users  int // QPs
	guard
}

// guard is a kernel object's lifecycle: closed once destroyed, and ops,
// held (shared) by the commands that name the object's handle outside
// c.mu and (exclusively) by destroy: the kernel may give a destroyed
// handle to a new object at once.
type guard struct {
	closed atomic.Bool
	ops    sync.RWMutex
}

// enter starts a command on the object's handle: false if it is closed.
// leave ends it.
func (g *guard) enter() bool {
	g.ops.RLock()
	if g.closed.Load() {
		g.ops.RUnlock()
		return false
	}
	return true
}

func (g *guard) leave() { g.ops.RUnlock() }

func (cq *cqBase) base() *cqBase { return cq }
func (cq *cqBase) Entries() int  { return cq.n }

// cqOf returns the cqBase of a CQ of context c.
func cqOf(c *Context, q verbs.CQ) (*cqBase, error) {
	b, ok := q.(interface{ base() *cqBase })
	if !ok || b.base().c != c {
		return nil, verbs.Errorf(unix.EINVAL, "CQ of another context or device")
	}
	if b.base().closed.Load() {
		return nil, verbs.ErrClosed
	}
	return b.base(), nil
}

// destroy destroys the CQ (DESTROY_CQ) unless QPs still use it; release
// then frees the provider's resources. It takes c.mu.
func (cq *cqBase) destroy(release func() error) error {
	c := cq.c
	c.mu.Lock()
	defer c.mu.Unlock()
	cq.ops.Lock()
	defer cq.ops.Unlock()
	if cq.closed.Load() {
		return nil
	}
	if cq.users > 0 {
		return c.err("destroy cq", verbs.Errorf(unix.EBUSY, "%d QPs use it", cq.users))
	}
	var r destroyCQResp
	if err := c.exec(cmdDestroyCQ, &destroyReq{Handle: cq.handle}, nil, &r, nil); err != nil {
		return c.err("destroy cq", err)
	}
	cq.closed.Store(true)
	delete(c.objs, cq.user)
	c.children--
	if cq.ch != nil {
		cq.ch.users--
	}
	return c.err("destroy cq", release())
}

// srqBase is what every provider's SRQ shares.
type srqBase struct {
	pd     *PD
	handle uint32
	srqn   uint32
	user   uint64
	maxWR  int
	maxSGE int
	users  int // QPs
	guard
}

func (s *srqBase) sbase() *srqBase { return s }
func (s *srqBase) Num() uint32     { return s.srqn }

func srqOf(c *Context, q verbs.SRQ) (*srqBase, error) {
	b, ok := q.(interface{ sbase() *srqBase })
	if !ok || b.sbase().pd.c != c {
		return nil, verbs.Errorf(unix.EINVAL, "SRQ of another context or device")
	}
	if b.sbase().closed.Load() {
		return nil, verbs.ErrClosed
	}
	return b.sbase(), nil
}

// Query returns the SRQ's attributes (QUERY_SRQ).
func (s *srqBase) Query() (verbs.SRQAttr, error) {
	c := s.pd.c
	if !s.enter() {
		return verbs.SRQAttr{}, c.err("query srq", verbs.ErrClosed)
	}
	defer s.leave()
	var r querySRQResp
	if err := c.exec(cmdQuerySRQ, &querySRQReq{SRQHandle: s.handle}, nil, &r, nil); err != nil {
		return verbs.SRQAttr{}, c.err("query srq", err)
	}
	return verbs.SRQAttr{MaxWR: int(r.MaxWR), MaxSGE: int(r.MaxSGE), Limit: int(r.SRQLimit)}, nil
}

// destroy destroys the SRQ (DESTROY_SRQ) unless QPs use it.
func (s *srqBase) destroy(release func() error) error {
	c := s.pd.c
	c.mu.Lock()
	defer c.mu.Unlock()
	s.ops.Lock()
	defer s.ops.Unlock()
	if s.closed.Load() {
		return nil
	}
	if s.users > 0 {
		return c.err("destroy srq", verbs.Errorf(unix.EBUSY, "%d QPs use it", s.users))
	}
	var r destroyQPResp
	if err := c.exec(cmdDestroySRQ, &destroyReq{Handle: s.handle}, nil, &r, nil); err != nil {
		return c.err("destroy srq", err)
	}
	s.closed.Store(true)
	delete(c.objs, s.user)
	s.pd.release()
	return c.err("destroy srq", release())
}

// qpBase is what every provider's QP shares: the control path.
type qpBase struct {
	pd     *PD
	handle uint32
	qpn    uint32
	typ    verbs.QPType
	user   uint64
	scq    *cqBase
	rcq    *cqBase
	srq    *srqBase
	cap    verbs.QPCap
	sigAll bool
	state  atomic.Uint32 // verbs.QPState, as last set by Modify
	guard
	// onModify lets the provider follow state changes (after the kernel
	// accepted them); may be nil.
	onModify func(verbs.QPState)
}

func (q *qpBase) Num() uint32            { return q.qpn }
func (q *qpBase) Type() verbs.QPType     { return q.typ }
func (q *qpBase) qpState() verbs.QPState { return verbs.QPState(q.state.Load()) }

// createQPReq fills the core CREATE_QP request of init and takes the
// users of the CQs and SRQ, checking them. Called with c.mu held; undo
// with unuse on failure.
func (q *qpBase) prepare(pd *PD, init verbs.QPInit) (createQPReq, error) {
	c := pd.c
	var err error
	if init.SendCQ == nil || init.RecvCQ == nil {
		return createQPReq{}, verbs.Errorf(unix.EINVAL, "a QP needs a send CQ and a receive CQ")
	}
	if q.scq, err = cqOf(c, init.SendCQ); err != nil {
		return createQPReq{}, err
	}
	if q.rcq, err = cqOf(c, init.RecvCQ); err != nil {
		return createQPReq{}, err
	}
	if init.SRQ != nil {
		if q.srq, err = srqOf(c, init.SRQ); err != nil {
			return createQPReq{}, err
		}
		if init.Cap.MaxRecvWR != 0 {
			return createQPReq{}, verbs.Errorf(unix.EINVAL, "a QP on an SRQ has no receive queue (max_recv_wr %d)", init.Cap.MaxRecvWR)
		}
	}
	q.pd, q.typ, q.sigAll = pd, init.Type, init.SigAll
	req := createQPReq{
		PDHandle:      pd.handle,
		SendCQHandle:  q.scq.handle,
		RecvCQHandle:  q.rcq.handle,
		MaxSendWR:     uint32(init.Cap.MaxSendWR),
		MaxRecvWR:     uint32(init.Cap.MaxRecvWR),
		MaxSendSGE:    uint32(init.Cap.MaxSendSGE),
		MaxRecvSGE:    uint32(init.Cap.MaxRecvSGE),
		MaxInlineData: uint32(init.Cap.MaxInlineData),
		QPType:        uint8(init.Type),
	}
	if init.SigAll {
		req.SQSigAll = 1
	}
	if q.srq != nil {
		req.SRQHandle, req.IsSRQ = q.srq.handle, 1
	}
	return req, nil
}

// created records a QP the kernel made. Called with c.mu held.
func (q *qpBase) created(r *createQPResp) {
	q.handle, q.qpn = r.QPHandle, r.QPN
	q.cap = verbs.QPCap{MaxSendWR: int(r.MaxSendWR), MaxRecvWR: int(r.MaxRecvWR), MaxSendSGE: int(r.MaxSendSGE),
		MaxRecvSGE: int(r.MaxRecvSGE), MaxInlineData: int(r.MaxInlineData)}
	q.scq.users++
	q.rcq.users++
	if q.srq != nil {
		q.srq.users++
	}
}

// Modify changes the attributes selected by mask (MODIFY_QP).
func (q *qpBase) Modify(attr *verbs.QPAttr, mask verbs.QPAttrMask) error {
	c := q.pd.c
	op := "modify qp"
	if mask&verbs.AttrState != 0 {
		op = "modify qp to " + attr.State.String()
	}
	if !q.enter() {
		return c.err(op, verbs.ErrClosed)
	}
	defer q.leave()
	m := modifyQP{
		Dest:            dest(&attr.AH),
		QPHandle:        q.handle,
		AttrMask:        uint32(mask),
		QKey:            attr.QKey,
		RQPSN:           attr.RQPSN,
		SQPSN:           attr.SQPSN,
		DestQPNum:       attr.DestQPN,
		QPAccessFlags:   uint32(attr.Access),
		PKeyIndex:       attr.PKeyIndex,
		QPState:         uint8(attr.State),
		CurQPState:      uint8(attr.CurState),
		PathMTU:         uint8(attr.PathMTU),
		MaxRdAtomic:     attr.MaxRdAtomic,
		MaxDestRdAtomic: attr.MaxDestRdAtomic,
		MinRNRTimer:     attr.MinRNRTimer,
		PortNum:         attr.Port,
		Timeout:         attr.Timeout,
		RetryCnt:        attr.RetryCnt,
		RNRRetry:        attr.RNRRetry,
	}
	if attr.SQDrainNotify {
		m.EnSQDAsyncNotify = 1
	}
	if err := c.exec(cmdModifyQP, &m, nil, nil, nil); err != nil {
		return c.err(op, err)
	}
	if mask&verbs.AttrState != 0 {
		q.state.Store(uint32(attr.State))
		if q.onModify != nil {
			q.onModify(attr.State)
		}
	}
	return nil
}

func dest(a *verbs.AHAttr) qpDest {
	d := qpDest{
		DGID:         a.GRH.DGID,
		FlowLabel:    a.GRH.FlowLabel,
		DLID:         a.DLID,
		SGIDIndex:    a.GRH.SGIDIndex,
		HopLimit:     a.GRH.HopLimit,
		TrafficClass: a.GRH.TrafficClass,
		SL:           a.SL,
		SrcPathBits:  a.SrcPathBits,
		StaticRate:   a.StaticRate,
		PortNum:      a.Port,
	}
	if a.IsGlobal {
		d.IsGlobal = 1
	}
	return d
}

func ahFromDest(d *qpDest) verbs.AHAttr {
	return verbs.AHAttr{
		GRH:         verbs.GRH{DGID: d.DGID, FlowLabel: d.FlowLabel, SGIDIndex: d.SGIDIndex, HopLimit: d.HopLimit, TrafficClass: d.TrafficClass},
		DLID:        d.DLID,
		SL:          d.SL,
		SrcPathBits: d.SrcPathBits,
		StaticRate:  d.StaticRate,
		IsGlobal:    d.IsGlobal != 0,
		Port:        d.PortNum,
	}
}

// allQPAttrs asks QUERY_QP for every attribute.
const allQPAttrs = 1<<21 - 1

// Query returns the QP's current attributes (QUERY_QP).
func (q *qpBase) Query() (verbs.QPAttr, error) {
	c := q.pd.c
	if !q.enter() {
		return verbs.QPAttr{}, c.err("query qp", verbs.ErrClosed)
	}
	defer q.leave()
	var r queryQPResp
	if err := c.exec(cmdQueryQP, &queryQPReq{QPHandle: q.handle, AttrMask: allQPAttrs}, nil, &r, nil); err != nil {
		return verbs.QPAttr{}, c.err("query qp", err)
	}
	a := verbs.QPAttr{
		State:           verbs.QPState(r.QPState),
		CurState:        verbs.QPState(r.CurQPState),
		PathMTU:         verbs.MTU(r.PathMTU),
		QKey:            r.QKey,
		RQPSN:           r.RQPSN,
		SQPSN:           r.SQPSN,
		DestQPN:         r.DestQPNum,
		Access:          verbs.Access(r.QPAccessFlags),
		Cap:             verbs.QPCap{MaxSendWR: int(r.MaxSendWR), MaxRecvWR: int(r.MaxRecvWR), MaxSendSGE: int(r.MaxSendSGE), MaxRecvSGE: int(r.MaxRecvSGE), MaxInlineData: int(r.MaxInlineData)},
		AH:              ahFromDest(&r.Dest),
		PKeyIndex:       r.PKeyIndex,
		SQDraining:      r.SQDraining != 0,
		MaxRdAtomic:     r.MaxRdAtomic,
		MaxDestRdAtomic: r.MaxDestRdAtomic,
		MinRNRTimer:     r.MinRNRTimer,
		Port:            r.PortNum,
		Timeout:         r.Timeout,
		RetryCnt:        r.RetryCnt,
		RNRRetry:        r.RNRRetry,
		SigAll:          r.SQSigAll != 0,
	}
	return a, nil
}

// destroy destroys the QP (DESTROY_QP); release then frees the provider's
// resources. The caller holds whatever keeps the data path off the QP.
func (q *qpBase) destroy(release func() error) error {
	c := q.pd.c
	c.mu.Lock()
	defer c.mu.Unlock()
	q.ops.Lock()
	defer q.ops.Unlock()
	if q.closed.Load() {
		return nil
	}
	var r destroyQPResp
	if err := c.exec(cmdDestroyQP, &destroyReq{Handle: q.handle}, nil, &r, nil); err != nil {
		return c.err("destroy qp", err)
	}
	q.closed.Store(true)
	delete(c.objs, q.user)
	q.scq.users--
	q.rcq.users--
	if q.srq != nil {
		q.srq.users--
	}
	q.pd.release()
	return c.err("destroy qp", release())
}
