//go:build linux

package emu

import (
	"sync"

	"github.com/pvperf/pvperf/internal/unix"
	"github.com/pvperf/pvperf/verbs"
	"github.com/pvperf/pvperf/verbs/pvrdma"
)

// srq is an emulated shared receive queue.
type srq struct {
	*pvrdma.SRQ
	p      *pd
	idx    uint32
	gen    uint32
	n      int
	maxSGE int
	buf    span
	sh     *srqCtx
	users  // QPs using this SRQ
}

var _ verbs.SRQ = (*srq)(nil)

func (p *pd) CreateSRQ(init verbs.SRQInit) (verbs.SRQ, error) {
	c := p.c
	a := &c.attr
	fail := func(err error) (verbs.SRQ, error) { return nil, c.err("create srq", err) }
	if a.MaxSRQ == 0 {
		return fail(verbs.Errorf(verbs.ErrNotSupported, "shared receive queues on profile %s", c.dev.cfg.Profile))
	}
	if init.MaxWR < 1 || init.MaxWR > a.MaxSRQWR {
		return fail(verbs.Errorf(unix.EINVAL, "max_wr %d (device maximum %d)", init.MaxWR, a.MaxSRQWR))
	}
	if init.MaxSGE < 0 || init.MaxSGE > a.MaxSRQSGE {
		return fail(verbs.Errorf(unix.EINVAL, "max_sge %d (device maximum %d)", init.MaxSGE, a.MaxSRQSGE))
	}
	if init.Limit < 0 || init.Limit > init.MaxWR {
		return fail(verbs.Errorf(unix.EINVAL, "limit %d above max_wr %d", init.Limit, init.MaxWR))
	}
	if err := c.child("create srq", &c.nSRQ, a.MaxSRQ); err != nil {
		return nil, err
	}
	if err := p.child("create srq"); err != nil {
		c.unchild(&c.nSRQ)
		return nil, err
	}
	n := pvrdma.RoundPow2(init.MaxWR)
	sge := max(init.MaxSGE, 1)
	stride := pvrdma.RecvStride(sge)
	h := c.h
	buf, err := h.arena.alloc(pvrdma.SRQBufLen(n, stride))
	if err != nil {
		p.unchild()
		c.unchild(&c.nSRQ)
		return fail(err)
	}
	h.mu.Lock()
	idx, ok := pop(&h.freeSRQ)
	h.mu.Unlock()
	if !ok {
		h.arena.free(buf)
		p.unchild()
		c.unchild(&c.nSRQ)
		return fail(verbs.Errorf(unix.ENOMEM, "too many shared receive queues"))
	}
	sh := &h.tab.srqs[idx]
	store(&sh.lock, 0)
	sh.seg = buf.seg.id
	sh.off = uint64(buf.off)
	sh.n = uint32(n)
	sh.stride = uint32(stride)
	sh.maxSGE = uint32(sge)
	sh.pd = p.id
	sh.ctx = c.idx
	sh.handle = idx + 1
	store(&sh.limit, uint32(init.Limit))
	s := &srq{p: p, idx: idx, n: n, maxSGE: sge, buf: buf, sh: sh}
	s.gen = newGen(&sh.gen)
	s.SRQ = pvrdma.NewSRQ(pvrdma.SRQConfig{Handle: idx + 1, Entries: n, Stride: stride, MaxSGE: sge, Buf: buf.bytes(), UAR: c})
	h.srqs[idx].Store(s)
	return s, nil
}

func (s *srq) Num() uint32 { return s.idx + 1 }

func (s *srq) Modify(attr verbs.SRQAttr, mask verbs.SRQAttrMask) error {
	c := s.p.c
	if s.isClosed() {
		return c.err("modify srq", verbs.ErrClosed)
	}
	if mask&verbs.SRQMaxWR != 0 {
		return c.err("modify srq", verbs.Errorf(verbs.ErrNotSupported, "resizing a shared receive queue"))
	}
	if mask&verbs.SRQLimit != 0 {
		if attr.Limit < 0 || attr.Limit > s.n {
			return c.err("modify srq", verbs.Errorf(unix.EINVAL, "limit %d above max_wr %d", attr.Limit, s.n))
		}
		store(&s.sh.limit, uint32(attr.Limit))
	}
	return nil
}

func (s *srq) Query() (verbs.SRQAttr, error) {
	if s.isClosed() {
		return verbs.SRQAttr{}, s.p.c.err("query srq", verbs.ErrClosed)
	}
	return verbs.SRQAttr{MaxWR: s.n, MaxSGE: s.maxSGE, Limit: int(load(&s.sh.limit))}, nil
}

func (s *srq) Close() error {
	if first, err := s.close("queue pairs use the shared receive queue"); !first {
		return s.p.c.errOrNil("destroy srq", err)
	}
	c, h := s.p.c, s.p.c.h
	s.SRQ.Shutdown()
	store(&s.sh.gen, s.gen+1)
	h.srqs[s.idx].Store(nil)
	h.quiesce()
	h.arena.free(s.buf)
	h.mu.Lock()
	h.freeSRQ = append(h.freeSRQ, s.idx)
	h.mu.Unlock()
	s.p.unchild()
	c.unchild(&c.nSRQ)
	return nil
}

// ah is an address handle: a pvrdma AV built in user space.
type ah struct {
	*pvrdma.AH
	p    *pd
	once sync.Once
}

var _ pvrdma.AddressVector = (*ah)(nil)

func (p *pd) CreateAH(attr verbs.AHAttr) (verbs.AH, error) {
	c := p.c
	if !attr.IsGlobal {
		return nil, c.err("create ah", verbs.Errorf(unix.EINVAL, "RoCE needs a global route header (is_global)"))
	}
	if int(attr.GRH.SGIDIndex) >= len(c.gids) {
		return nil, c.err("create ah", verbs.Errorf(unix.EINVAL, "sgid index %d is not in use", attr.GRH.SGIDIndex))
	}
	if attr.Port == 0 {
		attr.Port = 1
	}
	if attr.Port != 1 {
		return nil, c.err("create ah", verbs.Errorf(unix.EINVAL, "no port %d", attr.Port))
	}
	if err := p.child("create ah"); err != nil {
		return nil, err
	}
	if c.wire != nil && !attr.GRH.DGID.IsLinkLocal() {
		// The peer of a UD QP may never send first: a TCP port
		// connects, a RoCE v2 port asks whether the peer is on TCP.
		c.wire.connect(wireAddr(attr.GRH.DGID))
		c.wire.probe(wireAddr(attr.GRH.DGID))
	}
	return &ah{AH: pvrdma.NewAH(attr, p.id, c.resolveMAC(attr.GRH.DGID)), p: p}, nil
}

// resolveMAC finds the destination MAC of a GID as the pvrdma user library
// does: from the GID itself when it is a link-local EUI-64, from this
// device when it is one of its own addresses, else from the ARP table.
func (c *devContext) resolveMAC(g verbs.GID) [6]byte {
	if g.IsLinkLocal() {
		return pvrdma.MACFromGID(g)
	}
	for _, e := range c.gids {
		if e.GID == g {
			return c.mac
		}
	}
	if g.IsV4Mapped() {
		if mac, ok := readARP(g.Addr()); ok {
			return mac
		}
	}
	return [6]byte{}
}

func (a *ah) Close() error {
	a.once.Do(a.p.unchild)
	return nil
}
