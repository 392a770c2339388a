package bench

import (
	"context"
	"io"
	"time"

	"github.com/pvperf/pvperf/bench/oob"
	"github.com/pvperf/pvperf/perftest"
	"github.com/pvperf/pvperf/reports"
)

// cpuOf is the CPU use of a run when --cpu_util asked for it.
func (s *session) cpuOf(sm samples) float32 {
	if !s.cfg.CPUUtil {
		return 0
	}
	return sm.cpu
}

// bwResult turns the samples of a bandwidth run into perftest's numbers.
func (s *session) bwResult(size int, sm samples, peak bool) (reports.BWResult, error) {
	cfg := &s.cfg
	in := reports.BWInput{
		Size: uint64(size), Iters: sm.iters, NumQPs: cfg.NumQPs, Duration: cfg.Duration > 0,
		NoPeak: !peak, CQMod: cfg.CQMod, PostList: cfg.PostList,
		Posted: sm.tposted, Completed: sm.tcompleted, Gbits: cfg.ReportGbits,
	}
	in.CPUUtil = s.cpuOf(sm)
	if cfg.Duration == 0 {
		in.Iters = cfg.Iters
	}
	r, err := reports.ComputeBW(in)
	if err != nil {
		return r, fail(err, " "+err.Error()+"\n")
	}
	return r, nil
}

func (s *session) reportOf(r reports.BWResult) oob.BWReport {
	return oob.BWReport{Size: r.Size, Iters: r.Iters, BWPeak: r.Peak, BWAvg: r.Average, MsgRateAvg: r.MsgRate}
}

func fromReport(r oob.BWReport) reports.BWResult {
	return reports.BWResult{Size: r.Size, Iters: r.Iters, Peak: r.BWPeak, Average: r.BWAvg, MsgRate: r.MsgRateAvg}
}

// exchangeReports swaps BW results with the peer.
func (s *session) exchangeReports(local reports.BWResult) (reports.BWResult, error) {
	r, err := s.conn.ExchangeReports(s.reportOf(local), false)
	if err != nil {
		return reports.BWResult{}, fail(err, oob.PerftestMessage(err), " Failed to exchange data between server and clients\n")
	}
	return fromReport(r), nil
}

// peakOn tells whether the BW peak is measured on this side.
func (s *session) peakOn() bool {
	cfg := &s.cfg
	return !cfg.NoPeak && cfg.Duration == 0 && cfg.Iters <= 20000
}

// runRDMABW is write_bw, read_bw and atomic_bw (and write_bw with
// --write_with_imm): the client measures, the server waits and prints the
// client's numbers, except that the server of WRITE with immediate counts
// its receive completions itself.
func (s *session) runRDMABW(ctx context.Context) error {
	cfg := &s.cfg
	writeImm := cfg.Verb == perftest.WriteImm
	sends := !s.server || cfg.Bidirectional
	if err := s.exchangeKeys(sends); err != nil {
		return err
	}
	if err := s.barrier(); err != nil {
		return err
	}
	if s.full() {
		_ = reports.WriteBWHeader(s.out, &s.ti)
	}
	// With --data_validation, WRITE's server and READ's client check
	// what lands (validates says which of them this side is); both sides
	// of a bidirectional run.
	validates := s.plan.dv != nil && (cfg.Bidirectional || s.server == (cfg.Verb == perftest.Write))
	var v *dvValidator
	// The validator reads the buffer, which goes when the test ends: it
	// stops first, whatever ends the test.
	defer func() {
		if v != nil {
			v.stop()
		}
	}()
	if s.server && !cfg.Bidirectional && !writeImm {
		// The client runs the test; wait for it, then print its results.
		if validates {
			v = s.ep.startValidator()
		}
		stop := s.watchPeer(ctx)
		m0 := markCPU()
		err := s.waitingBarrier()
		stop()
		if err != nil {
			return s.peerErr(ctx, err)
		}
		span := m0.spanTo(markCPU(), 0)
		rem, err := s.exchangeReports(reports.BWResult{})
		if err != nil {
			return err
		}
		// This side's CPU is known over the whole wait only: it is the
		// size's when there is one size, and no size's in a sweep (-a),
		// where the client measured every size meanwhile.
		if !cfg.AllSizes {
			s.recordCPU(int(rem.Size), span)
		}
		if cfg.RunInfinitely && cfg.Verb != perftest.Atomic {
			// The client sent no results of its own: its rows came
			// as it ran. (perftest's atomic_bw prints the report it
			// got, zeros.)
			s.printf(" Client closed connection\n")
		} else {
			s.rec.AddBW(reports.SideRemote, rem)
			s.writeLastRow()
		}
		if err := s.closeConn(); err != nil {
			return err
		}
		s.resultLine()
		if v != nil {
			return s.reportValidation(v)
		}
		return nil
	}
	if s.plan.dv != nil && cfg.Verb == perftest.Write {
		// perftest's client gives the server's validator time to start.
		if err := sleepCtx(ctx, dvStartDelay); err != nil {
			return err
		}
	}
	var last reports.BWResult
	for i := range s.plan.msgs {
		m := &s.plan.msgs[i]
		var r *receiver
		if writeImm && (s.server || cfg.Bidirectional) {
			var err error
			if r, err = s.postReceives(m); err != nil {
				return err
			}
		}
		if cfg.WarmUp && writeImm && cfg.AllSizes {
			// perftest's run of all sizes says so on both sides, for
			// each size; a single size skips the warm-up silently.
			_, _ = io.WriteString(s.errOut, "Warm up not supported for WRITE_IMM verb.\nSkipping\n")
		}
		// perftest warms up before the loops of -a and of a plain run,
		// not before the endless one.
		if cfg.WarmUp && !writeImm && !cfg.RunInfinitely && (!s.server || cfg.Bidirectional) {
			if err := s.ep.warmUp(ctx, m); err != nil {
				return fail(err, " "+err.Error()+"\n", "Problems with warm up\n")
			}
		}
		if validates {
			v = s.ep.startValidator()
		}
		if cfg.Bidirectional || writeImm {
			if err := s.barrier(); err != nil {
				return err
			}
		}
		if cfg.RunInfinitely {
			// One size, rows as it runs, and nothing to report after.
			if err := s.endless(ctx, m); err != nil {
				return err
			}
			break
		}
		res, err := s.measure(ctx, m, r, cfg.Bidirectional && writeImm, writeImm)
		if err != nil {
			return err
		}
		if cfg.Bidirectional && cfg.Duration == 0 && !writeImm {
			// This side's loop waited for its own operations only:
			// the peer's, in the other direction, may take longer
			// (a slower path), and the next exchange waits for them
			// as perftest's does, without the peer timeout (the
			// peer's death or its host's still ends it).
			s.conn.SetTimeout(oob.NoTimeout)
		}
		if v != nil && cfg.Bidirectional {
			// Both sides are done sending; give the validators time to
			// catch up (perftest's 100 ms).
			if err := s.barrier(); err != nil {
				return err
			}
			time.Sleep(dvDrain)
		}
		// perftest syncs after each size of -a only (write_bw.c's
		// RUN_ALL branch); a single size ends without it.
		if cfg.AllSizes && (writeImm || cfg.Bidirectional) {
			if err := s.barrier(); err != nil {
				return err
			}
		}
		last = res
		err = s.reportBW(res, cfg.Bidirectional && (!writeImm || cfg.Duration == 0))
		s.conn.SetTimeout(cfg.PeerTimeout)
		if err != nil {
			return err
		}
	}
	s.resultLine()
	// A failed validation is reported once the peer is let go.
	var verr error
	if v != nil {
		verr = s.reportValidation(v)
	}
	if !s.server && !cfg.Bidirectional && !writeImm {
		if err := s.barrier(); err != nil {
			return err
		}
		if _, err := s.exchangeReports(last); err != nil {
			return err
		}
	}
	if err := s.closeConn(); err != nil {
		return err
	}
	return verr
}

// reportValidation stops the validator and prints its verdict.
func (s *session) reportValidation(v *dvValidator) error {
	r := v.stop()
	out := s.out
	if s.valOut != nil {
		out = s.valOut
	}
	role := ""
	if s.cfg.Bidirectional {
		role = "CLIENT"
		if s.server {
			role = "SERVER"
		}
	}
	return writeDVReport(out, r, role, s.cfg.DataValidationDebug, len(v.last))
}

// postReceives posts the receives of messages of m's size, in perftest's
// words when that fails.
func (s *session) postReceives(m *msgPlan) (*receiver, error) {
	r, err := s.ep.postReceives(m)
	if err != nil {
		return nil, fail(err, " "+err.Error()+"\n", " Failed to post receive recv_wqes\n")
	}
	return r, nil
}

// measure runs one size's bandwidth loop with the peer watched and turns
// its samples into perftest's numbers: both sides send and receive (bi,
// perftest's run_iter_bi), or this side sends (run_iter_bw), or, on the
// server of a test with receives, counts what arrives
// (run_iter_bw_server, no peak).
func (s *session) measure(ctx context.Context, m *msgPlan, r *receiver, bi, receives bool) (reports.BWResult, error) {
	stop := s.watchPeer(ctx)
	s.startSize(m.size)
	var sm samples
	var err error
	peak := s.peakOn()
	m0 := markCPU()
	switch {
	case bi:
		sm, err = s.ep.runBi(ctx, r, m, peak, s.server)
	case !s.server || !receives:
		sm, err = s.ep.runBW(ctx, m, peak)
	default:
		peak = false
		sm, err = s.ep.runBWServer(ctx, r)
	}
	stop()
	defer sm.release()
	if err != nil {
		return reports.BWResult{}, s.peerErr(ctx, runErr(err, "run_iter_bw"))
	}
	s.keepCPU(m.size, m0, sm, s.cfg.Iters*uint64(s.cfg.NumQPs))
	return s.bwResult(m.size, sm, peak)
}

// endless is the loop of a --run_infinitely client (perftest's
// run_iter_bw_infinitely): it sends messages of m's size until the user
// stops it (StopTraffic) and prints a row for every period of -D
// seconds, with the messages completed in the period; then perftest's
// "User stopped traffic".
func (s *session) endless(ctx context.Context, m *msgPlan) error {
	cfg := &s.cfg
	var stopCh <-chan struct{}
	if cfg.StopTraffic != nil {
		var release func()
		stopCh, release = cfg.StopTraffic()
		defer release()
	}
	stop := s.watchPeer(ctx)
	s.startSize(m.size)
	s.ep.endless = &endlessLoop{stop: stopCh, period: time.Duration(cfg.Duration) * time.Second}
	s.ep.tick = func(iv interval) {
		// perftest's print_report_bw for the period, its peak off.
		r, err := reports.ComputeBW(reports.BWInput{
			Size: uint64(m.size), Iters: iv.Count, NumQPs: cfg.NumQPs, Duration: true, NoPeak: true,
			CQMod: cfg.CQMod, PostList: cfg.PostList, Gbits: cfg.ReportGbits,
			Posted: []int64{1}, Completed: []int64{1 + int64(iv.To-iv.From)},
		})
		if err == nil {
			_ = reports.WriteBWReport(s.out, &s.ti, r, nil)
		}
	}
	_, err := s.ep.runBW(ctx, m, false)
	s.ep.endless, s.ep.tick = nil, nil
	stop()
	if err != nil {
		return s.peerErr(ctx, loopErr(err, s.endlessFailed()))
	}
	s.printf("\n User stopped traffic\n")
	return nil
}

// endlessFailed is the line perftest's main prints when its endless loop
// failed.
func (s *session) endlessFailed() string {
	if s.cfg.Verb == perftest.Read {
		return " Error occurred while running! aborting ...\n"
	}
	return " Error occurred while running infinitely! aborting ...\n"
}

// reportBW prints and records this side's BW row for one size; with
// exchange (a bidirectional run) it first trades rows with the peer and
// reports their sum, both sides kept in the results.
func (s *session) reportBW(res reports.BWResult, exchange bool) error {
	cfg := &s.cfg
	if !exchange {
		s.rec.AddBW(reports.SideLocal, res)
		s.writeLastRow()
		if !cfg.Bidirectional || cfg.Verb == perftest.Send {
			s.limitRow(res.Average, res.MsgRate)
		}
		return nil
	}
	rem, err := s.exchangeReports(res)
	if err != nil {
		return err
	}
	s.rec.AddBidirectionalBW(res, rem)
	s.writeLastRow()
	s.limitRow(res.Average+rem.Average, res.MsgRate+rem.MsgRate)
	if cfg.ReportBoth && !cfg.AllSizes {
		_ = reports.WriteBWReportBoth(s.out, &s.ti, res, rem)
		s.rec.PrintedBoth()
	}
	return nil
}

// runSendBW is send_bw: the server counts what it receives and prints its
// own row, as the client does.
func (s *session) runSendBW(ctx context.Context) error {
	cfg := &s.cfg
	sends := !s.server || cfg.Bidirectional
	if err := s.exchangeKeys(sends); err != nil {
		return err
	}
	if s.full() {
		_ = reports.WriteBWHeader(s.out, &s.ti)
	}
	for i := range s.plan.msgs {
		m := &s.plan.msgs[i]
		var r *receiver
		if s.server || cfg.Bidirectional {
			var err error
			if r, err = s.postReceives(m); err != nil {
				return err
			}
		}
		if err := s.barrier(); err != nil {
			return err
		}
		res, err := s.measure(ctx, m, r, cfg.Bidirectional, true)
		if err != nil {
			return err
		}
		if err := s.reportBW(res, cfg.Bidirectional && cfg.Duration == 0); err != nil {
			return err
		}
		if cfg.AllSizes {
			if err := s.barrier(); err != nil {
				return err
			}
		}
	}
	s.resultLine()
	s.closeConnSend(" ")
	return nil
}
