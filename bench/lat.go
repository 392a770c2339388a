package bench

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/pvperf/pvperf/internal/clock"
	"github.com/pvperf/pvperf/internal/mmio"
	"github.com/pvperf/pvperf/perftest"
	"github.com/pvperf/pvperf/reports/hdr"
	"github.com/pvperf/pvperf/verbs"
)

// latRun holds what the latency loops share.
type latRun struct {
	e        *endpoint
	ctx      context.Context
	wr       []verbs.SendWR
	server   bool
	iters    uint64
	duration bool
	dc       *durationClock
	sm       samples
	wc       [1]verbs.WC
	// ccnt counts the send completions reaped by reapSend.
	ccnt uint64
	// hist holds the time between consecutive posts (perftest's latency
	// samples): recorded in the loop in a duration run (which keeps no
	// timestamps), filled from the timestamps of a complete run in
	// iteration mode (see session.latReport); prev is the last post's
	// time, 0 before the first and outside the sample window.
	hist *hdr.Histogram
	prev int64
	// stopped is set when ctx ends (an interrupt): the loop reads it
	// before every post, a load where ctx.Err() would take a lock.
	stopped atomic.Bool
	unwatch func() bool
}

func (e *endpoint) newLatRun(ctx context.Context, m *msgPlan, server bool) (*latRun, error) {
	cfg := e.cfg
	s := e.newSender(m)
	l := &latRun{e: e, ctx: ctx, wr: s.wrs[0][:1], server: server, iters: cfg.Iters, duration: cfg.Duration > 0}
	l.unwatch = context.AfterFunc(ctx, func() { l.stopped.Store(true) })
	if !cfg.NoLatencyHistogram {
		l.hist = hdr.New()
	}
	w := &l.wr[0]
	w.SGL[0].Length = uint32(m.size)
	w.Flags = 0
	if m.inline {
		w.Flags |= verbs.SendInline
	}
	if l.duration {
		l.dc = startDuration(ctx, cfg.Duration, cfg.Margin, e.tick)
		l.iters = 0
		l.sm.tposted = make([]int64, 1)
		l.sm.tcompleted = make([]int64, 1)
	} else {
		var err error
		if l.sm.tposted, l.sm.free, err = stamps(cfg.Iters); err != nil {
			l.unwatch()
			return nil, err
		}
	}
	return l, nil
}

func (l *latRun) ended() bool { return l.duration && l.dc.state.Load() == stateEnd }

func (l *latRun) sampling() bool { return l.duration && l.dc.state.Load() == stateSample }

func (l *latRun) finish() samples {
	l.unwatch()
	if l.duration {
		l.dc.end()
		l.sm.tposted[0], l.sm.tcompleted[0] = l.dc.start.Load(), l.dc.stop.Load()
		l.sm.cpu = l.dc.cpuUtil()
		l.sm.setWindow(l.dc)
	} else {
		l.sm.iters = l.e.cfg.Iters
	}
	l.sm.hist = l.hist
	return l.sm
}

// stall is a stall detector for the loop: the peer's --latency_gap (the
// same as ours) is part of every wait for it.
func (l *latRun) stall() stall {
	return stall{grace: time.Duration(l.e.cfg.LatencyGap) * time.Microsecond, turn: l.e.turn, ctx: l.ctx}
}

// gap busy-waits the --latency_gap before a post.
func (l *latRun) gap() {
	if g := l.e.cfg.LatencyGap; g > 0 {
		end := clock.Now() + int64(g)*1000
		for clock.Now() < end {
		}
	}
}

// next is the start of message scnt+1: the --latency_gap wait, then its
// timestamp: kept in iteration mode (the histogram is filled from them
// after the loop), recorded in the histogram as the time since the
// previous post in a duration run's sample window. It returns scnt+1.
func (l *latRun) next(scnt uint64) uint64 {
	l.gap()
	if !l.duration {
		l.sm.tposted[scnt] = clock.Now()
		return scnt + 1
	}
	if l.e.tick != nil {
		l.dc.count.Store(scnt)
	}
	if l.hist == nil {
		return scnt + 1
	}
	if l.dc.state.Load() != stateSample {
		l.prev = 0
		return scnt + 1
	}
	now := clock.Now()
	if l.prev != 0 {
		l.hist.Record(now - l.prev)
	}
	l.prev = now
	return scnt + 1
}

func (l *latRun) post(scnt uint64) error {
	// A loop whose completions come at once never waits long enough
	// for its waits to check the context (and on a loaded machine a
	// message may take milliseconds): every post checks it.
	if l.stopped.Load() {
		return l.ctx.Err()
	}
	if _, err := l.e.qps[0].PostSend(l.wr); err != nil {
		return fmt.Errorf("Couldn't post send: scnt=%d: %w", scnt, err)
	}
	return nil
}

// pollOne waits for one completion on cq (through its channel in event
// mode) and returns it, or false when a duration run ended meanwhile.
func (l *latRun) pollOne(cq verbs.CQ, ch verbs.CompChannel, events bool) (*verbs.WC, bool, error) {
	if events {
		if _, err := ch.Wait(l.ctx); err != nil {
			return nil, false, fmt.Errorf(" Failed to notify events to CQ: %w", err)
		}
		if err := cq.ReqNotify(false); err != nil {
			return nil, false, fmt.Errorf(" Failed to notify events to CQ: %w", err)
		}
	}
	st := l.stall()
	for {
		n, err := cq.Poll(l.wc[:])
		if err != nil {
			return nil, false, fmt.Errorf("poll CQ failed %w", err)
		}
		if n > 0 {
			return &l.wc[0], true, nil
		}
		if l.ended() {
			return nil, false, nil
		}
		if err := st.idle("waiting for a completion"); err != nil {
			return nil, false, err
		}
	}
}

// runLatSend is perftest's run_iter_lat_send: the client sends first; each
// side waits for a message, reposts the receive, then sends.
func (e *endpoint) runLatSend(ctx context.Context, r *receiver, m *msgPlan, server bool) (samples, error) {
	cfg := e.cfg
	l, lerr := e.newLatRun(ctx, m, server)
	if lerr != nil {
		return samples{}, lerr
	}
	w := &l.wr[0]
	imm := cfg.Verb == perftest.SendImm
	sizePerQP := uint64(cfg.RxDepth)
	if cfg.UseSRQ {
		sizePerQP /= uint64(cfg.NumQPs)
	}
	var scnt, rcnt uint64
	cqMod, mod := uint64(cfg.CQMod), uint64(0) // mod = scnt % cqMod
	for scnt < l.iters || rcnt < l.iters || (l.duration && !l.ended()) {
		if (rcnt < l.iters || l.duration) && !(scnt < 1 && !server) {
			c, got, err := l.pollOne(e.rcq, e.recvCh, cfg.Events)
			if err != nil {
				return l.finish(), err
			}
			if got {
				if c.Status != verbs.WCSuccess {
					return l.finish(), &errCompletion{wc: *c, server: true, ccnt: rcnt}
				}
				if imm && c.Flags&verbs.WCWithImm == 0 {
					return l.finish(), fmt.Errorf(" Completion without immediate data: wr_id %d, rcnt=%d", int(uint32(c.ID)), rcnt)
				}
				rcnt++
				if l.sampling() {
					l.sm.iters++
				}
				if l.duration || rcnt+sizePerQP <= cfg.Iters {
					if err := r.post(wrQP(c.ID)); err != nil {
						return l.finish(), fmt.Errorf("Couldn't post recv: rcnt=%d: %w", rcnt, err)
					}
				}
			}
		}
		if scnt < l.iters || (l.duration && !l.ended()) {
			scnt = l.next(scnt)
			if mod++; mod == cqMod {
				mod = 0
			}
			signal := mod == 0 || (!l.duration && scnt == cfg.Iters)
			if signal {
				w.Flags |= verbs.SendSignaled
			}
			if l.ended() {
				break
			}
			if err := l.post(scnt); err != nil {
				return l.finish(), err
			}
			if signal {
				c, got, err := l.pollOne(e.scq, e.sendCh, cfg.Events)
				if err != nil {
					return l.finish(), err
				}
				if got && c.Status != verbs.WCSuccess {
					return l.finish(), &errCompletion{wc: *c, scnt: scnt, ccnt: scnt}
				}
				w.Flags &^= verbs.SendSignaled
			}
		}
	}
	return l.finish(), l.ctx.Err()
}

// reapSend polls the send CQ once and counts a completion in l.ccnt (and,
// while a duration run samples, in its iterations).
func (l *latRun) reapSend(scnt uint64, events bool) error {
	c, got, err := l.pollOne(l.e.scq, l.e.sendCh, events)
	if err != nil || !got {
		return err
	}
	if c.Status != verbs.WCSuccess {
		return &errCompletion{wc: *c, scnt: scnt, ccnt: l.ccnt}
	}
	l.ccnt++
	if l.sampling() {
		l.sm.iters++
	}
	return nil
}

// runLatWrite is perftest's run_iter_lat_write: each side writes a message
// whose last byte is a counter and spins on the last byte of its own
// receive buffer for the peer's; the server writes first.
func (e *endpoint) runLatWrite(ctx context.Context, m *msgPlan, server bool) (samples, error) {
	cfg := e.cfg
	l, lerr := e.newLatRun(ctx, m, server)
	if lerr != nil {
		return samples{}, lerr
	}
	l.wr[0].Flags |= verbs.SendSignaled
	n := cfg.NumQPs
	postBuf := e.buf[m.size-1:]
	pollBuf := e.buf[n*e.plan.bufSize+m.size-1:]
	var scnt, rcnt uint64
	for scnt < l.iters || l.ccnt < l.iters || rcnt < l.iters || (l.duration && !l.ended()) {
		if (rcnt < l.iters || l.duration) && !(scnt < 1 && server) {
			rcnt++
			st := l.stall()
			for mmio.LoadByte(pollBuf) != byte(rcnt) && !l.ended() {
				if err := st.idle("waiting for the peer's write"); err != nil {
					return l.finish(), err
				}
			}
		}
		if scnt < l.iters || l.duration {
			scnt = l.next(scnt)
			postBuf[0] = byte(scnt)
			if err := l.post(scnt); err != nil {
				return l.finish(), err
			}
		}
		if l.ended() {
			break
		}
		if l.ccnt < l.iters || l.duration {
			if err := l.reapSend(scnt, false); err != nil {
				return l.finish(), err
			}
		}
	}
	return l.finish(), l.ctx.Err()
}

// runLatWriteImm is perftest's run_iter_lat_write_imm: like runLatWrite,
// but each side waits for the receive completion of the peer's write with
// immediate instead of polling memory.
func (e *endpoint) runLatWriteImm(ctx context.Context, r *receiver, m *msgPlan, server bool) (samples, error) {
	cfg := e.cfg
	l, lerr := e.newLatRun(ctx, m, server)
	if lerr != nil {
		return samples{}, lerr
	}
	l.wr[0].Flags |= verbs.SendSignaled
	sizePerQP := uint64(cfg.RxDepth)
	if cfg.UseSRQ {
		sizePerQP /= uint64(cfg.NumQPs)
	}
	var scnt, rcnt uint64
	for scnt < l.iters || l.ccnt < l.iters || rcnt < l.iters || (l.duration && !l.ended()) {
		if (rcnt < l.iters || l.duration) && !(scnt < 1 && server) {
			rcnt++
			c, got, err := l.pollOne(e.rcq, e.recvCh, cfg.Events)
			if err != nil {
				return l.finish(), err
			}
			if got {
				if c.Status != verbs.WCSuccess {
					return l.finish(), &errCompletion{wc: *c, scnt: scnt, ccnt: l.ccnt}
				}
				if c.Flags&verbs.WCWithImm == 0 {
					return l.finish(), fmt.Errorf(" Completion without immediate data: wr_id %d, rcnt=%d", int(uint32(c.ID)), rcnt)
				}
				if l.duration || rcnt+sizePerQP <= cfg.Iters {
					if err := r.post(wrQP(c.ID)); err != nil {
						return l.finish(), fmt.Errorf("Couldn't post recv: rcnt=%d: %w", rcnt, err)
					}
				}
			}
		}
		if scnt < l.iters || l.duration {
			scnt = l.next(scnt)
			if err := l.post(scnt); err != nil {
				return l.finish(), err
			}
		}
		if l.ended() {
			break
		}
		if l.ccnt < l.iters || l.duration {
			if err := l.reapSend(scnt, cfg.Events); err != nil {
				return l.finish(), err
			}
		}
	}
	return l.finish(), l.ctx.Err()
}

// runLatReadAtomic is perftest's run_iter_lat: the client posts one READ or
// atomic at a time and waits for its completion; a full round trip each.
func (e *endpoint) runLatReadAtomic(ctx context.Context, m *msgPlan) (samples, error) {
	cfg := e.cfg
	l, lerr := e.newLatRun(ctx, m, false)
	if lerr != nil {
		return samples{}, lerr
	}
	l.wr[0].Flags |= verbs.SendSignaled
	var scnt uint64
	for scnt < l.iters || (l.duration && !l.ended()) {
		scnt = l.next(scnt)
		if err := l.post(scnt); err != nil {
			return l.finish(), err
		}
		if l.ended() {
			break
		}
		c, got, err := l.pollOne(e.scq, e.sendCh, cfg.Events)
		if err != nil {
			return l.finish(), err
		}
		if got {
			if c.Status != verbs.WCSuccess {
				return l.finish(), &errCompletion{wc: *c, scnt: scnt, ccnt: scnt}
			}
			if l.sampling() {
				l.sm.iters++
			}
		}
	}
	return l.finish(), l.ctx.Err()
}
