//go:build linux

package emu

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pvperf/pvperf/internal/unix"
	"github.com/pvperf/pvperf/verbs"
	"github.com/pvperf/pvperf/verbs/pvrdma"
)

// cq is an emulated completion queue: the pvrdma driver side plus the
// device's context in the object table.
type cq struct {
	*pvrdma.CQ
	c     *devContext
	idx   uint32
	gen   uint32
	n     int
	buf   span
	ch    *compChannel
	view  cqView
	users // QPs using this CQ
	// stuck is set when a purge found the CQ's lock held by a stopped
	// peer process: the CQ's memory is never reused (see Close).
	stuck atomic.Bool
}

var _ verbs.CQ = (*cq)(nil)

// cqView is the device's access to a CQ, local or in a peer process.
type cqView struct {
	p    *peer
	ctx  *cqCtx
	idx  uint32
	ring pvrdma.Ring
	cqes []byte
}

func (c *devContext) CreateCQ(init verbs.CQInit) (verbs.CQ, error) {
	if init.Entries < 1 || init.Entries > c.attr.MaxCQE {
		return nil, c.err("create cq", verbs.Errorf(unix.EINVAL, "%d entries (device maximum %d)", init.Entries, c.attr.MaxCQE))
	}
	if init.Vector < 0 || init.Vector >= c.attr.NumCompVectors {
		return nil, c.err("create cq", verbs.Errorf(unix.EINVAL, "completion vector %d (device has %d)", init.Vector, c.attr.NumCompVectors))
	}
	var ch *compChannel
	if init.Channel != nil {
		var ok bool
		ch, ok = init.Channel.(*compChannel)
		if !ok || ch.c != c {
			return nil, c.err("create cq", verbs.Errorf(unix.EINVAL, "completion channel of another context"))
		}
		if err := ch.child(); err != nil {
			return nil, c.err("create cq", err)
		}
	}
	fail := func(err error) (verbs.CQ, error) {
		if ch != nil {
			ch.unchild()
		}
		return nil, c.err("create cq", err)
	}
	if err := c.child("create cq", &c.nCQ, c.attr.MaxCQ); err != nil {
		if ch != nil {
			ch.unchild()
		}
		return nil, err
	}
	n := pvrdma.RoundPow2(init.Entries)
	h := c.h
	buf, err := h.arena.alloc(pvrdma.CQBufLen(n))
	if err != nil {
		c.unchild(&c.nCQ)
		return fail(err)
	}
	h.mu.Lock()
	idx, ok := pop(&h.freeCQ)
	h.mu.Unlock()
	if !ok {
		h.arena.free(buf)
		c.unchild(&c.nCQ)
		return fail(verbs.Errorf(unix.ENOMEM, "too many completion queues"))
	}
	ctx := &h.tab.cqs[idx]
	ctx.seg = buf.seg.id
	ctx.off = uint64(buf.off)
	ctx.n = uint32(n)
	store(&ctx.notify, 0)
	store(&ctx.overflow, 0)
	ctx.channel = 0
	if ch != nil {
		ctx.channel = ch.idx + 1
	}
	ctx.ctx = c.idx
	ctx.handle = idx + 1
	ctx.tail, ctx.head = 0, 0
	store(&ctx.lock, 0)
	gen := newGen(&ctx.gen)
	q := &cq{c: c, idx: idx, gen: gen, n: n, buf: buf, ch: ch}
	q.CQ = pvrdma.NewCQ(pvrdma.CQConfig{Handle: idx + 1, Entries: n, Buf: buf.bytes(), UAR: c, QPs: &c.qpt})
	q.view = cqView{p: h.self, ctx: ctx, idx: idx, ring: pvrdma.NewRing(buf.bytes(), pvrdma.RxRingOffset, n), cqes: buf.bytes()[pvrdma.PageSize:]}
	h.cqs[idx].Store(q)
	return q, nil
}

func (q *cq) Entries() int { return q.n }

func (q *cq) ReqNotify(solicitedOnly bool) error {
	if q.isClosed() {
		return q.c.err("req notify cq", verbs.ErrClosed)
	}
	q.CQ.ReqNotify(solicitedOnly)
	return nil
}

func (q *cq) Close() error {
	if first, err := q.close("queue pairs use the completion queue"); !first {
		return q.c.errOrNil("destroy cq", err)
	}
	h := q.c.h
	q.CQ.Shutdown()
	ctx := &h.tab.cqs[q.idx]
	store(&ctx.gen, q.gen+1)
	h.cqs[q.idx].Store(nil)
	h.quiesce()
	// A peer process stopped in the middle of a delivery holds the
	// CQ's lock and writes the CQE when it goes on: then the CQ's
	// memory and table entry are left to it, never reused.
	l := spinLock{&ctx.lock}
	if !q.stuck.Load() && l.lockWithin(h, purgeBound) {
		l.unlock()
		h.arena.free(q.buf)
		h.mu.Lock()
		h.freeCQ = append(h.freeCQ, q.idx)
		h.mu.Unlock()
	}
	if q.ch != nil {
		q.ch.unchild()
	}
	q.c.unchild(&q.c.nCQ)
	return nil
}

// postCQE writes one completion into a CQ, local or remote, and delivers
// the notification the CQ is armed for. It reports false when the CQ is
// full: the completion is lost and the CQ's owner gets a CQ_ERR event.
//
// The device keeps its own copy of prod_tail and of the last cons_head it
// saw, so that writing a CQE does not read the ring state line, which the
// consumer keeps writing: a producer in another thread only stores to it.
func (h *host) postCQE(v *cqView, e *pvrdma.CQE, solicited bool) bool {
	return h.postCQEIf(v, e, solicited, nil, 0) == cqePosted
}

// postRecvCQE posts a receive-side completion for the destination r, unless
// r's QP was reset or destroyed since r was resolved. The check is made
// under the CQ's lock, which the owner's purge of the CQ also takes after
// changing the generation: a delivery that took its receive WQE before a
// reset either completes before the purge, which removes it, or finds the
// new generation and leaves nothing behind (a purge that gave up on a
// stopped peer's lock leaves its completion: see purgeBound). It reports whether the CQ
// had no room for the completion (the CQ has then raised CQ_ERR).
func (h *host) postRecvCQE(r *remote, e *pvrdma.CQE, solicited bool) (overflow bool) {
	return h.postCQEIf(&r.cq, e, solicited, &r.ctx.gen, r.gen) == cqeFull
}

// What became of a completion.
type cqeResult uint8

const (
	cqePosted cqeResult = iota
	cqeStale            // its QP was reset or destroyed: dropped
	cqeFull             // the CQ had no room: lost, CQ_ERR raised once
)

// full tells, without the CQ's lock, that the CQ may have no room: the
// device's copies of its indices say so (the consumer may have freed
// room since; postCQEIf looks again under the lock).
func (v *cqView) full() bool { return v.ring.Full(load(&v.ctx.tail), load(&v.ctx.head)) }

func (h *host) postCQEIf(v *cqView, e *pvrdma.CQE, solicited bool, gen *uint32, want uint32) cqeResult {
	ctx := v.ctx
	l := spinLock{&ctx.lock}
	l.lock(h)
	if gen != nil && load(gen) != want {
		l.unlock()
		return cqeStale
	}
	tail := ctx.tail
	if v.ring.Full(tail, ctx.head) {
		ctx.head = v.ring.Consumer()
	}
	if !v.ring.Valid(tail) || !v.ring.Valid(ctx.head) || v.ring.Full(tail, ctx.head) {
		first := atomic.SwapUint32(&ctx.overflow, 1) == 0
		l.unlock()
		if first {
			h.raiseEvent(v.p, ctx.ctx, verbs.EventCQErr, objCQ, v.idx, load(&ctx.gen))
		}
		return cqeFull
	}
	off := v.ring.Slot(tail) * pvrdma.CQESize
	e.Encode(v.cqes[off : off+pvrdma.CQESize])
	tail = v.ring.Next(tail)
	ctx.tail = tail
	v.ring.SetProducer(tail)
	l.unlock()
	if n := load(&ctx.notify); n != 0 && (n == 1 || solicited || e.Status != 0) {
		if atomic.CompareAndSwapUint32(&ctx.notify, n, 0) {
			h.notify(v)
		}
	}
	return cqePosted
}

// notify queues a completion event on the CQ's channel.
func (h *host) notify(v *cqView) {
	ci := v.ctx.channel
	if ci == 0 || ci > maxChannels {
		return
	}
	ch := &v.p.tab.chans[ci-1]
	l := spinLock{&ch.lock}
	l.lock(h)
	if ch.tail-ch.head < chanRing {
		ch.ring[ch.tail%chanRing] = v.idx
		ch.tail++
	}
	atomic.AddUint32(&ch.seq, 1)
	l.unlock()
	unix.FutexWake(&ch.seq, 1<<30)
}

// compChannel is a completion channel.
type compChannel struct {
	c       *devContext
	idx     uint32
	mu      sync.Mutex
	n       int
	closed  bool
	waiters sync.WaitGroup // Wait calls in progress
}

func (c *devContext) CreateCompChannel() (verbs.CompChannel, error) {
	if err := c.child("create comp channel", &c.nChan, 0); err != nil {
		return nil, err
	}
	h := c.h
	h.mu.Lock()
	idx, ok := pop(&h.freeChan)
	h.mu.Unlock()
	if !ok {
		c.unchild(&c.nChan)
		return nil, c.err("create comp channel", verbs.Errorf(unix.ENOMEM, "too many completion channels"))
	}
	ctx := &h.tab.chans[idx]
	store(&ctx.lock, 0)
	ctx.head, ctx.tail = 0, 0
	ch := &compChannel{c: c, idx: idx}
	h.chans[idx].Store(ch)
	return ch, nil
}

func (ch *compChannel) child() error {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	if ch.closed {
		return verbs.ErrClosed
	}
	if ch.n >= chanRing {
		return verbs.Errorf(unix.ENOMEM, "too many completion queues on one channel")
	}
	ch.n++
	return nil
}

func (ch *compChannel) unchild() {
	ch.mu.Lock()
	ch.n--
	ch.mu.Unlock()
}

// Wait blocks until a CQ of the channel has a notification.
func (ch *compChannel) Wait(ctx context.Context) (verbs.CQ, error) {
	ch.mu.Lock()
	if ch.closed {
		ch.mu.Unlock()
		return nil, ch.c.err("get cq event", verbs.ErrClosed)
	}
	ch.waiters.Add(1) // Close waits for us before the entry is reused
	ch.mu.Unlock()
	defer ch.waiters.Done()
	h := ch.c.h
	t := &h.tab.chans[ch.idx]
	l := spinLock{&t.lock}
	for {
		ch.mu.Lock()
		closed := ch.closed
		ch.mu.Unlock()
		if closed {
			return nil, ch.c.err("get cq event", verbs.ErrClosed)
		}
		seq := load(&t.seq)
		l.lock(h)
		if t.head != t.tail {
			idx := t.ring[t.head%chanRing]
			t.head++
			l.unlock()
			if q := h.cqs[idx%maxCQs].Load(); q != nil && q.ch == ch {
				return q, nil
			}
			continue
		}
		l.unlock()
		if err := ctx.Err(); err != nil {
			return nil, ch.c.err("get cq event", err)
		}
		_ = unix.FutexWait(&t.seq, seq, 50*time.Millisecond)
	}
}

func (ch *compChannel) Close() error {
	ch.mu.Lock()
	if ch.closed {
		ch.mu.Unlock()
		return nil
	}
	if ch.n > 0 {
		ch.mu.Unlock()
		return ch.c.err("destroy comp channel", verbs.Errorf(unix.EBUSY, "%d completion queues use the channel", ch.n))
	}
	ch.closed = true
	ch.mu.Unlock()
	h := ch.c.h
	unix.FutexWake(&h.tab.chans[ch.idx].seq, 1<<30)
	ch.waiters.Wait()
	h.chans[ch.idx].Store(nil)
	h.mu.Lock()
	h.freeChan = append(h.freeChan, ch.idx)
	h.mu.Unlock()
	ch.c.unchild(&ch.c.nChan)
	return nil
}
