//go:build linux

package emu

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/pvperf/pvperf/verbs"
)

// engine is the part of the device that acts on its own: it retries
// stalled send queues when their RNR or ACK timer expires, and flushes QPs
// that a peer put in the error state.
type engine struct {
	h    *host
	mu   sync.Mutex
	q    timerHeap
	wake chan struct{}
	quit chan struct{}
	done chan struct{}
	seen atomic.Uint32 // last attention count handled
}

type timer struct {
	at  time.Time
	qp  *qp
	seq uint64
}

// timerHeap is a min-heap of timers by time. It is not container/heap,
// whose interface boxes every timer pushed or popped: scheduling a timer
// happens while posting, which must not allocate.
type timerHeap []timer

func (t *timerHeap) push(x timer) {
	*t = append(*t, x)
	h := *t
	for i := len(h) - 1; i > 0; {
		p := (i - 1) / 2
		if !h[i].at.Before(h[p].at) {
			break
		}
		h[i], h[p] = h[p], h[i]
		i = p
	}
}

func (t *timerHeap) pop() timer {
	h := *t
	x := h[0]
	n := len(h) - 1
	h[0] = h[n]
	h[n] = timer{} // drop the reference to the QP
	h = h[:n]
	for i := 0; ; {
		l, m := 2*i+1, i
		if l < n && h[l].at.Before(h[m].at) {
			m = l
		}
		if r := l + 1; r < n && h[r].at.Before(h[m].at) {
			m = r
		}
		if m == i {
			break
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
	*t = h
	return x
}

const housekeepingPeriod = 20 * time.Millisecond

func newEngine(h *host) *engine {
	return &engine{h: h, wake: make(chan struct{}, 1), quit: make(chan struct{}), done: make(chan struct{})}
}

// start runs the engine; h.eng must be set first.
func (e *engine) start() { go e.run() }

func (e *engine) stop() {
	close(e.quit)
	<-e.done
}

// schedule runs q's send queue at time at, unless q's timer sequence has
// moved on by then. It is called with q's send lock held.
func (e *engine) schedule(q *qp, at time.Time, seq uint64) {
	e.mu.Lock()
	e.q.push(timer{at: at, qp: q, seq: seq})
	e.mu.Unlock()
	select {
	case e.wake <- struct{}{}:
	default:
	}
}

func (e *engine) run() {
	defer close(e.done)
	t := time.NewTimer(housekeepingPeriod)
	defer t.Stop()
	for {
		e.mu.Lock()
		d := housekeepingPeriod
		if len(e.q) > 0 {
			d = min(d, time.Until(e.q[0].at))
		}
		e.mu.Unlock()
		t.Reset(max(d, 0))
		select {
		case <-e.quit:
			return
		case <-e.wake:
		case <-t.C:
		}
		now := time.Now()
		for {
			e.mu.Lock()
			if len(e.q) == 0 || e.q[0].at.After(now) {
				e.mu.Unlock()
				break
			}
			x := e.q.pop()
			q := x.qp
			if q.wq != nil {
				// A network QP's ACK timer moves on with every ACK
				// that brings progress; until its deadline has come,
				// the timer waits for it without the send lock, which
				// a busy sender holds nearly all the time.
				if dl := q.wq.deadlineNs.Load(); dl > monoNs(now) {
					e.q.push(timer{at: monoTime(dl), qp: q, seq: x.seq})
					e.mu.Unlock()
					continue
				}
			}
			e.mu.Unlock()
			q.LockSend()
			if q.timerSeq == x.seq && q.stalled {
				q.stalled = false
				q.execute()
			}
			q.UnlockSend()
		}
		e.h.housekeeping()
	}
}

// housekeeping flushes the QPs that peers put in the error state. It runs
// in the engine and on every CQ POLL doorbell, and costs one load when
// there is nothing to do.
func (h *host) housekeeping() {
	a := load(&h.tab.hdr.attention)
	seen := h.eng.seen.Load()
	if a == seen || !h.eng.seen.CompareAndSwap(seen, a) {
		return
	}
	for i := range h.qps {
		q := h.qps[i].Load()
		if q == nil || load(&q.sh.flush) == 0 {
			continue
		}
		q.LockSend()
		// A QP being reset is left to the reset, which empties its
		// rings (SetState(RESET) takes the send lock, held here).
		if atomic.CompareAndSwapUint32(&q.sh.flush, 1, 0) && q.state() != verbs.StateReset {
			q.QP.SetState(q.state())
			q.flushAll()
		}
		q.UnlockSend()
	}
}

// monoBase is the origin of monoNs: times kept in an integer, for atomic
// access, count from it on the monotonic clock, which a step of the wall
// clock does not move.
var monoBase = time.Now()

// monoNs returns t in nanoseconds since monoBase (t must come from
// time.Now, or be derived from such a time, to carry a monotonic reading).
func monoNs(t time.Time) int64 { return int64(t.Sub(monoBase)) }

// monoTime is the inverse of monoNs.
func monoTime(ns int64) time.Time { return monoBase.Add(time.Duration(ns)) }
