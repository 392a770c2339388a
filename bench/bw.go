package bench

import (
	"context"
	"errors"
	"fmt"

	"github.com/pvperf/pvperf/internal/clock"
	"github.com/pvperf/pvperf/perftest"
	"github.com/pvperf/pvperf/verbs"
)

// errCompletion reports a failed completion the way perftest does.
type errCompletion struct {
	wc     verbs.WC
	server bool
	scnt   uint64
	ccnt   uint64
}

func (e *errCompletion) Error() string {
	side := "client"
	if e.server {
		side = "server"
	}
	s := fmt.Sprintf(" Completion with error at %s\n Failed status-%s (%d): wr_id %d syndrom 0x%x\n",
		side, e.wc.Status, int(e.wc.Status), int(uint32(e.wc.ID)), e.wc.VendorErr)
	if e.server {
		return s + fmt.Sprintf(" rcnt=%d\n", e.ccnt)
	}
	return s + fmt.Sprintf(" scnt=%d, ccnt=%d\n", e.scnt, e.ccnt)
}

func (e *errCompletion) Unwrap() error { return e.wc.Err() }

// wrID is perftest's build_wr_id: the WR index in the low 32 bits, the QP
// index above.
func wrID(index, qp int) uint64 { return uint64(qp)<<32 | uint64(uint32(index)) }
func wrQP(id uint64) int        { return int(id >> 32 & 0xFFFF) }

// sender is the send side of a bandwidth run: one chain of post_list work
// requests per QP, as perftest's ctx_set_send_wqes prepares them.
type sender struct {
	e       *endpoint
	size    int
	wrs     [][]verbs.SendWR
	sges    [][]verbs.SGE
	myAddr  []uint64
	remAddr []uint64
	scnt    []uint64
	ccnt    []uint64
	mod     []uint64 // scnt % cq_mod, with a post list of one
	// listSig is how many work requests of a post list are signalled.
	listSig uint64
	// sig counts the signalled work requests posted.
	sig uint64
	// dv, with --data_validation, posts in place of wrs.
	dv *dvSender
}

// signalled is how many signalled work requests a post of QP chain wrs
// carries: those of the post list, or, with a list of one, whether its
// work request is signalled this time (the loops change its flag).
func (s *sender) signalled(wrs []verbs.SendWR) uint64 {
	if len(wrs) > 1 {
		return s.listSig
	}
	if wrs[0].Flags&verbs.SendSignaled != 0 {
		return 1
	}
	return 0
}

// newSender prepares the send work requests for messages of m's size.
func (e *endpoint) newSender(m *msgPlan) *sender {
	cfg, size := e.cfg, m.size
	n, pl := cfg.NumQPs, cfg.PostList
	s := &sender{e: e, size: size, wrs: make([][]verbs.SendWR, n), sges: make([][]verbs.SGE, n),
		myAddr: make([]uint64, n), remAddr: make([]uint64, n), scnt: make([]uint64, n), ccnt: make([]uint64, n), mod: make([]uint64, n)}
	bw := cfg.Test == perftest.Bandwidth
	for i := range n {
		s.myAddr[i] = e.slot(i)
		s.remAddr[i] = e.rem[i].VAddr
		s.wrs[i] = make([]verbs.SendWR, pl)
		s.sges[i] = make([]verbs.SGE, pl)
		for j := range pl {
			sge := &s.sges[i][j]
			sge.Addr, sge.Length, sge.LKey = s.myAddr[i], uint32(size), e.mr.LKey()
			w := &s.wrs[i][j]
			w.ID = wrID(i*pl+j, i)
			w.SGL = s.sges[i][j : j+1 : j+1]
			w.RemoteAddr = s.remAddr[i]
			if j > 0 {
				prev := &s.wrs[i][j-1]
				sge.Addr = s.sges[i][j-1].Addr
				w.RemoteAddr = prev.RemoteAddr
				if bw && m.small {
					sge.Addr = nextAddr(sge.Addr, m.step, uint64(j-1), s.myAddr[i], m.cycle)
				}
				if bw && m.listStepRemote {
					w.RemoteAddr = nextAddr(w.RemoteAddr, m.step, uint64(j-1), s.remAddr[i], m.cycle)
				}
			}
			if (j+1)%cfg.CQMod == 0 {
				w.Flags = verbs.SendSignaled
			}
			switch cfg.Verb {
			case perftest.Send:
				w.Opcode = verbs.OpSend
			case perftest.SendImm:
				w.Opcode = verbs.OpSendImm
			case perftest.Write:
				w.Opcode = verbs.OpRDMAWrite
			case perftest.WriteImm:
				w.Opcode = verbs.OpRDMAWriteImm
			case perftest.Read:
				w.Opcode = verbs.OpRDMARead
			case perftest.Atomic:
				w.Opcode = verbs.OpAtomicFetchAdd
				w.CompareAdd = atomicAdd
				if cfg.AtomicType == perftest.CmpAndSwap {
					w.Opcode = verbs.OpAtomicCmpSwap
					w.CompareAdd, w.Swap = 0, atomicSwap
				}
			}
			if cfg.Verb == perftest.Write || cfg.Verb == perftest.WriteImm || cfg.Verb == perftest.Read || cfg.Verb == perftest.Atomic {
				w.RKey = e.rem[i].RKey
			}
			if cfg.Connection == perftest.UD {
				w.AH = e.ahs[i]
				w.RemoteQPN = e.rem[i].QPN
				w.RemoteQKey = defQKey
				if e.udQPN != nil {
					w.RemoteQPN, w.RemoteQKey = e.udQPN[i], e.udQKey[i]
				}
			}
			if m.inline {
				w.Flags |= verbs.SendInline
			}
		}
	}
	for j := range s.wrs[0] {
		if s.wrs[0][j].Flags&verbs.SendSignaled != 0 {
			s.listSig++
		}
	}
	if e.plan.dv != nil {
		e.newDVSender(s)
	}
	return s
}

// nextAddr is perftest's increase_loc_addr / increase_rem_addr: step to the
// next message slot, and back to the start after cycle bytes.
func nextAddr(addr, step, cnt, prim, cycle uint64) uint64 {
	addr += step
	if (cnt+1)%(cycle/step) == 0 {
		addr = prim
	}
	return addr
}

// stepAddr is nextAddr for a sender whose count and address advance
// together from prim: the wrap comes after wrap = (cycle/step)*step bytes,
// found without nextAddr's two divisions.
func stepAddr(addr, step, prim, wrap uint64) uint64 {
	addr += step
	if addr-prim >= wrap {
		addr = prim
	}
	return addr
}

// runBW is perftest's run_iter_bw: post on every QP up to tx_depth
// outstanding, every cq_mod-th and the last work request signalled,
// and count completions.
func (e *endpoint) runBW(ctx context.Context, m *msgPlan, peak bool) (samples, error) {
	cfg := e.cfg
	s := e.newSender(m)
	nq := cfg.NumQPs
	iters := cfg.Iters
	duration := cfg.Duration > 0 || e.endless != nil
	var dc *durationClock
	if duration {
		if e.endless != nil {
			dc = startEndless(ctx, e.endless, e.tick)
		} else {
			dc = startDuration(ctx, cfg.Duration, cfg.Margin, e.tick)
		}
		defer dc.end()
		iters = 0
	}
	tot := iters * uint64(nq)
	sm, serr := newSamples(peak && !duration, tot)
	if serr != nil {
		return sm, serr
	}
	fill := cfg.fillCount()
	cqp := newPoller(cfg)
	cqMod := uint64(cfg.CQMod)
	pl := uint64(cfg.PostList)
	step, wrap := m.step, m.wrap
	var totS, totC uint64
	if !duration {
		sm.startCPU()
	}
	if !peak && !duration {
		sm.tposted[0] = clock.Now()
	}
	ne := 0
	st := stall{turn: e.turn, ctx: ctx}
	// s.sig counts the signalled work requests posted, cqes the
	// completions: a device that completes unsignalled ones (QEMU's pvrdma
	// device model does) would make every completion count as cq_mod
	// messages too many.
	var cqes uint64
	for totS < tot || totC < tot || (duration && dc.state.Load() != stateEnd) {
		if err := ctx.Err(); err != nil {
			return sm, err
		}
		for i := range nq {
			wrs := s.wrs[i]
			w := &wrs[0]
			sge := &w.SGL[0]
			qp := e.qps[i]
			// scnt%cqMod is kept in mod rather than divided for each
			// message.
			scnt, mod := s.scnt[i], s.mod[i]
			limit := uint64(cfg.TxDepth) + s.ccnt[i]
			if pl == 1 && !duration && !peak && s.dv == nil {
				// The common case, in a loop of its own.
				n, err := s.postSingles(i, min(cfg.Iters, limit), cfg.Iters-1, cqMod, m)
				totS += n
				if err != nil {
					return sm, fmt.Errorf("Couldn't post send: qp %d scnt=%d || err=%w tx_depth=%d", i, s.scnt[i], err, cfg.TxDepth)
				}
				continue
			}
			for (scnt < cfg.Iters || duration) && scnt+pl <= limit {
				if pl == 1 && mod == 0 && cqMod > 1 && !(scnt == cfg.Iters-1 && !duration) {
					w.Flags &^= verbs.SendSignaled
				}
				if peak && !duration {
					sm.tposted[totS] = clock.Now()
				}
				if duration && dc.state.Load() == stateEnd {
					break
				}
				var err error
				if s.dv != nil {
					err = s.dv.post(qp, i)
				} else {
					_, err = qp.PostSend(wrs)
				}
				if err != nil {
					s.scnt[i], s.mod[i] = scnt, mod
					if e.endless != nil {
						// run_iter_bw_infinitely's words.
						return sm, fmt.Errorf("Couldn't post send: %d scnt=%d (%w)", i, scnt, err)
					}
					return sm, fmt.Errorf("Couldn't post send: qp %d scnt=%d || err=%w tx_depth=%d", i, scnt, err, cfg.TxDepth)
				}
				s.sig += s.signalled(wrs)
				if pl == 1 && m.small && s.dv == nil {
					sge.Addr = stepAddr(sge.Addr, step, s.myAddr[i], wrap)
					if m.stepRemote {
						w.RemoteAddr = stepAddr(w.RemoteAddr, step, s.remAddr[i], wrap)
					}
				}
				scnt += pl
				totS += pl
				if pl == 1 {
					if mod++; mod == cqMod {
						mod = 0
					}
					if mod == cqMod-1 || (!duration && scnt == cfg.Iters-1) {
						w.Flags |= verbs.SendSignaled
					}
				}
			}
			s.scnt[i], s.mod[i] = scnt, mod
		}
		if totC < tot || (duration && totC < totS) {
			if cfg.Events && ne == 0 {
				if _, err := e.sendCh.Wait(ctx); err != nil {
					return sm, fmt.Errorf("Couldn't request CQ notification: %w", err)
				}
				if err := e.scq.ReqNotify(false); err != nil {
					return sm, fmt.Errorf("Couldn't request CQ notification: %w", err)
				}
			}
			var err error
			ne, err = cqp.poll(e.scq, totC)
			if err != nil {
				return sm, fmt.Errorf("poll CQ failed %w", err)
			}
			if ne == 0 {
				if err := st.idle("waiting for send completions"); err != nil {
					return sm, err
				}
			} else {
				st.busy()
			}
			for k := range ne {
				c := &cqp.wc[k]
				qi := wrQP(c.ID)
				if c.Status != verbs.WCSuccess {
					if e.endless != nil {
						// run_iter_bw_infinitely prints the QP's send
						// count as both counts.
						return sm, &errCompletion{wc: *c, scnt: s.scnt[qi], ccnt: s.scnt[qi]}
					}
					return sm, &errCompletion{wc: *c, scnt: totS, ccnt: totC}
				}
				if s.dv != nil && uint32(c.ID) != uint32(qi) {
					// A marker's fetch-and-add (unsignalled), from a
					// device that completes every work request.
					continue
				}
				if cqes++; cqes > s.sig {
					return sm, unsignaledError(cqes, s.sig)
				}
				f := cqMod
				if fill && s.ccnt[qi]+cqMod > cfg.Iters {
					f = cfg.Iters - s.ccnt[qi]
				}
				s.ccnt[qi] += f
				totC += f
				if peak && !duration {
					sm.completedAt(totC, tot)
				}
				if duration && dc.state.Load() == stateSample {
					sm.iters += cqMod
				}
			}
			if duration && e.tick != nil {
				dc.count.Store(totC)
			}
		}
	}
	if err := ctx.Err(); err != nil {
		return sm, err
	}
	sm.end(dc, tot, peak)
	return sm, nil
}

// postSingles is runBW's posting on QP i with a post list of one, a count
// of iterations and no peak: it posts one work request at a time while
// the QP's count is under end, signals every cq_mod-th and the one whose
// count is last, and returns how many it posted. It does what runBW's
// general loop does in that case, without the tests of the other cases.
func (s *sender) postSingles(i int, end, last, cqMod uint64, m *msgPlan) (uint64, error) {
	qp := s.e.qps[i]
	wrs := s.wrs[i]
	w := &wrs[0]
	sge := &w.SGL[0]
	scnt, mod := s.scnt[i], s.mod[i]
	start := scnt
	myAddr, remAddr := s.myAddr[i], s.remAddr[i]
	step, wrap := m.step, m.wrap
	small, stepRemote := m.small, m.stepRemote
	var err error
	for scnt < end {
		if mod == 0 && cqMod > 1 && scnt != last {
			w.Flags &^= verbs.SendSignaled
		}
		if _, err = qp.PostSend(wrs); err != nil {
			break
		}
		if w.Flags&verbs.SendSignaled != 0 {
			s.sig++
		}
		if small {
			sge.Addr = stepAddr(sge.Addr, step, myAddr, wrap)
			if stepRemote {
				w.RemoteAddr = stepAddr(w.RemoteAddr, step, remAddr, wrap)
			}
		}
		scnt++
		if mod++; mod == cqMod {
			mod = 0
		}
		if mod == cqMod-1 || scnt == last {
			w.Flags |= verbs.SendSignaled
		}
	}
	s.scnt[i], s.mod[i] = scnt, mod
	return scnt - start, err
}

// fillCount is perftest's fill_count: whether the last completion of a QP
// may stand for fewer than cq_mod messages.
func (cfg *Config) fillCount() bool {
	if cfg.Duration > 0 {
		return false
	}
	if cfg.CQMod >= cfg.TxDepth {
		return cfg.Iters%uint64(cfg.TxDepth) != 0
	}
	return cfg.Iters%uint64(cfg.CQMod) != 0
}

// ErrUnsignaledCompletion means the device completed more work requests than
// were signalled. The loops count a completion as cq_mod messages, as
// perftest does, so the test cannot go on with a right count.
var ErrUnsignaledCompletion = errors.New("the device completes unsignalled work requests")

func unsignaledError(cqes, sig uint64) error {
	return fmt.Errorf("%w: %d completions for %d signalled work requests; counting each as cq_mod messages would be wrong: run with -Q 1 (every work request signalled)",
		ErrUnsignaledCompletion, cqes, sig)
}
