//go:build linux

package emu

import (
	"container/heap"
	"sync"
	"sync/atomic"
	"time"
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

type timerHeap []timer

func (t timerHeap) Len() int           { return len(t) }
func (t timerHeap) Less(i, j int) bool { return t[i].at.Before(t[j].at) }
func (t timerHeap) Swap(i, j int)      { t[i], t[j] = t[j], t[i] }
func (t *timerHeap) Push(x any)        { *t = append(*t, x.(timer)) }
func (t *timerHeap) Pop() any {
	old := *t
	x := old[len(old)-1]
	*t = old[:len(old)-1]
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
	heap.Push(&e.q, timer{at: at, qp: q, seq: seq})
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
			x := heap.Pop(&e.q).(timer)
			q := x.qp
			if q.wq != nil {
				// A network QP's ACK timer moves on with every ACK
				// that brings progress; until its deadline has come,
				// the timer waits for it without the send lock, which
				// a busy sender holds nearly all the time.
				if dl := q.wq.deadlineNs.Load(); dl > monoNs(now) {
					heap.Push(&e.q, timer{at: monoTime(dl), qp: q, seq: x.seq})
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
		if atomic.CompareAndSwapUint32(&q.sh.flush, 1, 0) {
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
