package bench

import (
	"context"
	"errors"
	"fmt"

	"github.com/pvperf/pvperf/internal/clock"
	"github.com/pvperf/pvperf/perftest"
	"github.com/pvperf/pvperf/verbs"
)

// receiver is the receive side of a test with receive verbs: one chain of
// recv_post_list receive work requests per QP (perftest's ctx_set_recv_wqes).
type receiver struct {
	e      *endpoint
	m      *msgPlan
	wrs    [][]verbs.RecvWR
	sges   [][]verbs.SGE
	rxAddr []uint64
	posted []uint64 // receives posted per QP
	unused []uint64 // consumed receives not reposted yet, per QP
	rcnt   []uint64
	perQP  int // receives posted per QP up front
}

// postReceives prepares the receive work requests for messages of m's
// size and posts rx_depth of them (per QP, or split between QPs on an SRQ).
func (e *endpoint) postReceives(m *msgPlan) (*receiver, error) {
	cfg := e.cfg
	n, pl := cfg.NumQPs, cfg.RecvPostList
	r := &receiver{e: e, m: m, wrs: make([][]verbs.RecvWR, n), sges: make([][]verbs.SGE, n),
		rxAddr: make([]uint64, n), posted: make([]uint64, n), unused: make([]uint64, n), rcnt: make([]uint64, n)}
	length := m.recvLength
	perQP := cfg.RxDepth / pl
	if cfg.UseSRQ {
		perQP /= n
	}
	r.perQP = perQP
	bw := cfg.Test == perftest.Bandwidth
	for i := range n {
		addr := e.slot(n + i)
		if cfg.Connection == perftest.UD {
			addr += uint64(e.plan.cacheLine - UDAddition)
		}
		r.rxAddr[i] = addr
		r.wrs[i] = make([]verbs.RecvWR, pl)
		r.sges[i] = make([]verbs.SGE, pl)
		for j := range pl {
			sge := &r.sges[i][j]
			sge.Addr, sge.Length, sge.LKey = addr, uint32(length), e.mr.LKey()
			if j > 0 {
				sge.Addr = r.sges[i][j-1].Addr
				if bw && m.small {
					sge.Addr = nextAddr(sge.Addr, m.step, uint64(j-1), r.rxAddr[i], m.cycle)
				}
			}
			r.wrs[i][j] = verbs.RecvWR{ID: wrID(i*pl+j, i), SGL: r.sges[i][j : j+1 : j+1]}
		}
		for j := range perQP {
			if err := r.post(i); err != nil {
				return nil, fmt.Errorf("Couldn't post recv Qp = %d: counter=%d: %w", i, j, err)
			}
			if pl == 1 && bw && m.small {
				r.sges[i][0].Addr = nextAddr(r.sges[i][0].Addr, m.step, uint64(j), r.rxAddr[i], m.cycle)
			}
		}
		r.sges[i][0].Addr = r.rxAddr[i]
		r.posted[i] = uint64(perQP * pl)
	}
	return r, nil
}

func (r *receiver) post(i int) error {
	if r.e.cfg.UseSRQ {
		_, err := r.e.srq.PostRecv(r.wrs[i])
		return err
	}
	_, err := r.e.qps[i].PostRecv(r.wrs[i])
	return err
}

// consumed accounts for one receive completion of QP qi and reposts as
// perftest does: while more messages are expected (or in duration mode),
// once recv_post_list receives are free.
func (r *receiver) consumed(qi int, duration bool) error {
	cfg := r.e.cfg
	pl := uint64(cfg.RecvPostList)
	r.rcnt[qi]++
	r.unused[qi]++
	if (duration || r.posted[qi]+pl <= cfg.Iters) && r.unused[qi] >= pl {
		if err := r.post(qi); err != nil {
			return fmt.Errorf("Couldn't post recv Qp=%d rcnt=%d: %w", qi, r.rcnt[qi], err)
		}
		r.unused[qi] -= pl
		if r.m.recvSmall && pl == 1 {
			s := &r.sges[qi][0]
			s.Addr = nextAddr(s.Addr, r.m.step, r.posted[qi], r.rxAddr[qi], r.m.cycle)
		}
		r.posted[qi] += pl
	}
	return nil
}

// runBWServer is perftest's run_iter_bw_server: count receive completions
// and repost, timing from the first to the last.
func (e *endpoint) runBWServer(ctx context.Context, r *receiver) (samples, error) {
	cfg := e.cfg
	tot := cfg.Iters * uint64(cfg.NumQPs)
	duration := cfg.Duration > 0
	sm := samples{tposted: make([]int64, 1), tcompleted: make([]int64, 1)}
	cqp := newPoller(cfg)
	imm := cfg.Verb == perftest.SendImm || cfg.Verb == perftest.WriteImm
	var rcnt uint64
	var dc *durationClock
	first := true
	st := stall{turn: e.turn, ctx: ctx}
	for rcnt < tot || (duration && (dc == nil || dc.state.Load() != stateEnd)) {
		if err := ctx.Err(); err != nil {
			return sm, err
		}
		if cfg.Events {
			if _, err := e.recvCh.Wait(ctx); err != nil {
				return sm, fmt.Errorf(" Failed to notify events to CQ: %w", err)
			}
			if err := e.rcq.ReqNotify(false); err != nil {
				return sm, fmt.Errorf(" Failed to notify events to CQ: %w", err)
			}
		}
		for !duration || dc == nil || dc.state.Load() != stateEnd {
			ne, err := cqp.poll(e.rcq, rcnt)
			if err != nil {
				return sm, fmt.Errorf("Poll Receive CQ failed %w", err)
			}
			if ne == 0 {
				if err := st.idle("waiting for receive completions"); err != nil {
					if errors.Is(err, ErrStalled) && !duration {
						// perftest's check_alive line: what came of
						// what was due (UD loses what finds no
						// receive posted).
						err = fmt.Errorf("%w\n Total Received=%d, Total Iters Required=%d", err, rcnt, tot)
					}
					return sm, err
				}
				break
			}
			st.busy()
			if first {
				first = false
				if duration {
					dc = startDuration(ctx, cfg.Duration, cfg.Margin, e.tick)
					defer dc.end()
				} else {
					// perftest times from the first completion polled.
					// Several at once were waiting when the loop
					// looked first (it started late, or was not
					// scheduled): their arrival is unknown, and
					// timing from the poll would report an absurd
					// rate. No message left before this side
					// entered the barrier that released the sender.
					sm.startCPU()
					sm.tposted[0] = clock.Now()
					if ne > 1 && e.syncAt != 0 {
						sm.tposted[0] = e.syncAt
					}
				}
			}
			for k := range ne {
				c := &cqp.wc[k]
				qi := wrQP(c.ID)
				if c.Status != verbs.WCSuccess {
					return sm, &errCompletion{wc: *c, server: true, ccnt: r.rcnt[qi]}
				}
				if imm && c.Flags&verbs.WCWithImm == 0 {
					return sm, fmt.Errorf(" Completion without immediate data at server: wr_id %d, rcnt=%d", int(uint32(c.ID)), rcnt)
				}
				rcnt++
				if duration && dc.state.Load() == stateSample {
					sm.iters++
				}
				if err := r.consumed(qi, duration); err != nil {
					return sm, err
				}
			}
			if duration && e.tick != nil {
				dc.count.Store(rcnt)
			}
		}
	}
	if err := ctx.Err(); err != nil {
		return sm, err
	}
	if duration {
		sm.tposted[0], sm.tcompleted[0] = dc.start.Load(), dc.stop.Load()
		sm.cpu = dc.cpuUtil()
		sm.setWindow(dc)
	} else {
		sm.tcompleted[0] = clock.Now()
		sm.iters = tot
		sm.endCPU(tot)
	}
	return sm, nil
}
