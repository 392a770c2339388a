package bench

import (
	"context"
	"fmt"

	"github.com/pvperf/pvperf/internal/clock"
	"github.com/pvperf/pvperf/perftest"
	"github.com/pvperf/pvperf/verbs"
)

// runBi is perftest's run_iter_bi, for the bidirectional tests of receive
// verbs: each side posts sends as in runBW and, in the same loop, reaps and
// reposts its receives. The server starts sending only after its first
// receive, so that the client's receives are posted first.
func (e *endpoint) runBi(ctx context.Context, r *receiver, m *msgPlan, peak, server bool) (samples, error) {
	cfg := e.cfg
	s := e.newSender(m)
	nq := cfg.NumQPs
	duration := cfg.Duration > 0
	iters := cfg.Iters
	var dc *durationClock
	beforeFirstRx := server
	if !server && duration {
		dc = startDuration(ctx, cfg.Duration, cfg.Margin, e.tick)
		defer dc.end()
	}
	tot := iters * uint64(nq)
	if duration {
		tot = 0
	}
	sm, serr := newSamples(peak && !duration, tot)
	if serr != nil {
		return sm, serr
	}
	if !duration {
		sm.startCPU()
	}
	if !(peak && !duration) {
		sm.tposted[0] = clock.Now()
	}
	rwc := make([]verbs.WC, max(cfg.RxDepth, 1))
	swc := make([]verbs.WC, cfg.pollBatch())
	cqMod := uint64(cfg.CQMod)
	pl := uint64(cfg.PostList)
	step, wrap := m.step, m.wrap
	imm := cfg.Verb == perftest.SendImm || cfg.Verb == perftest.WriteImm
	var totS, totC, totR uint64
	var sentCQ uint64 // cq_mod per send completion, for the intervals
	ended := func() bool { return duration && dc != nil && dc.state.Load() == stateEnd }
	sampling := func() bool { return duration && dc != nil && dc.state.Load() == stateSample }
	st := stall{turn: e.turn, ctx: ctx}
	var sig, cqes uint64 // as in runBW
	for n := 0; (duration && !ended()) || totC < tot || totR < tot; n++ {
		if n&0x3FF == 0 {
			if err := ctx.Err(); err != nil {
				return sm, err
			}
		}
		for i := range nq {
			w := &s.wrs[i][0]
			for !beforeFirstRx && (s.scnt[i] < iters || duration) && s.scnt[i]-s.ccnt[i]+pl <= uint64(cfg.TxDepth) {
				if pl == 1 && s.scnt[i]%cqMod == 0 && cqMod > 1 && !(s.scnt[i] == iters-1 && !duration) {
					w.Flags &^= verbs.SendSignaled
				}
				if peak && !duration {
					sm.tposted[totS] = clock.Now()
				}
				if ended() {
					break
				}
				if _, err := e.qps[i].PostSend(s.wrs[i]); err != nil {
					return sm, fmt.Errorf("Couldn't post send: qp %d scnt=%d: %w", i, s.scnt[i], err)
				}
				sig += s.signalled(s.wrs[i])
				if pl == 1 && m.small {
					w.SGL[0].Addr = stepAddr(w.SGL[0].Addr, step, s.myAddr[i], wrap)
				}
				s.scnt[i] += pl
				totS += pl
				if pl == 1 && (s.scnt[i]%cqMod == cqMod-1 || (!duration && s.scnt[i] == iters-1)) {
					w.Flags |= verbs.SendSignaled
				}
			}
		}
		ne, err := e.rcq.Poll(rwc)
		if err != nil {
			return sm, fmt.Errorf("poll CQ failed %w", err)
		}
		if ne > 0 && beforeFirstRx {
			beforeFirstRx = false
			if duration {
				dc = startDuration(ctx, cfg.Duration, cfg.Margin, e.tick)
				defer dc.end()
			}
		}
		for k := range ne {
			c := &rwc[k]
			qi := wrQP(c.ID)
			if c.Status != verbs.WCSuccess {
				return sm, &errCompletion{wc: *c, server: true, ccnt: totR}
			}
			if imm && c.Flags&verbs.WCWithImm == 0 {
				return sm, fmt.Errorf(" Completion without immediate data: wr_id %d, rcnt=%d", int(uint32(c.ID)), totR)
			}
			totR++
			if sampling() {
				sm.iters++
			}
			if err := r.consumed(qi, duration); err != nil {
				return sm, err
			}
		}
		nr := ne
		ne, err = e.scq.Poll(swc)
		if err != nil {
			return sm, fmt.Errorf("poll CQ failed %w", err)
		}
		if ne+nr == 0 && (totC < tot || totR < tot) {
			if err := st.idle("waiting for completions"); err != nil {
				return sm, err
			}
		} else {
			st.busy()
		}
		for k := range ne {
			c := &swc[k]
			qi := wrQP(c.ID)
			if c.Status != verbs.WCSuccess {
				return sm, &errCompletion{wc: *c, scnt: totS, ccnt: totC}
			}
			if cqes++; cqes > sig {
				return sm, unsignaledError(cqes, sig)
			}
			f := cqMod
			if cfg.fillCount() && s.ccnt[qi]+cqMod > iters {
				f = iters - s.ccnt[qi]
			}
			s.ccnt[qi] += f
			totC += f
			if peak && !duration {
				sm.completedAt(totC, tot)
			}
			sentCQ += cqMod
			if sampling() {
				sm.iters += cqMod
			}
		}
		if dc != nil && e.tick != nil {
			// The intervals count as the row does (perftest's
			// run_iter_bi): messages received, and cq_mod for each
			// send completion.
			dc.count.Store(totR + sentCQ)
		}
	}
	if err := ctx.Err(); err != nil {
		return sm, err
	}
	sm.end(dc, tot, peak)
	return sm, nil
}

// warmUp is perftest's perform_warm_up: per QP, a burst of tx_depth
// signalled work requests or, with a post list, one list whose last work
// request is signalled, all completed before the measurement.
func (e *endpoint) warmUp(ctx context.Context, m *msgPlan) error {
	cfg := e.cfg
	s := e.newSender(m)
	wc := make([]verbs.WC, 16)
	bursts := cfg.TxDepth
	if cfg.PostList > 1 {
		bursts = 1
	}
	for i := range cfg.NumQPs {
		wrs := s.wrs[i]
		for j := range wrs {
			wrs[j].Flags &^= verbs.SendSignaled
		}
		wrs[len(wrs)-1].Flags |= verbs.SendSignaled
		posted := 0 // signalled work requests
		for n := 0; n < bursts; n++ {
			if _, err := e.qps[i].PostSend(wrs); err != nil {
				return fmt.Errorf("Couldn't post send during warm up: qp index %d scnt=%d: %w", i, n*cfg.PostList, err)
			}
			posted++
		}
		st := stall{turn: e.turn, ctx: ctx}
		for done := 0; done < posted; {
			if err := ctx.Err(); err != nil {
				return err
			}
			k, err := e.scq.Poll(wc)
			if err != nil {
				return err
			}
			if k == 0 {
				if err := st.idle("waiting for warm-up completions"); err != nil {
					return err
				}
			} else {
				st.busy()
			}
			for j := range k {
				if err := wc[j].Err(); err != nil {
					return err
				}
			}
			done += k
		}
	}
	return nil
}
