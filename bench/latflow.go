package bench

import (
	"context"

	"github.com/pvperf/pvperf/bench/oob"
	"github.com/pvperf/pvperf/perftest"
	"github.com/pvperf/pvperf/reports"
)

// latResult turns latency samples into perftest's numbers and prints them.
func (s *session) latReport(size int, sm samples, m0 cpuMark) error {
	cfg := &s.cfg
	defer sm.release()
	s.keepCPU(size, m0, sm, cfg.Iters)
	rtt := cfg.Verb.RTTFactor()
	if cfg.Duration > 0 {
		r := reports.ComputeLatencyDuration(reports.LatencyDurationInput{Size: uint64(size), Iters: sm.iters,
			Start: sm.tposted[0], End: sm.tcompleted[0], RTTFactor: rtt, CPUUtil: s.cpuOf(sm), Hist: sm.hist})
		s.rec.AddLatencyDuration(r)
		s.writeLastRow()
		return nil
	}
	if sm.hist != nil {
		// perftest's samples, the time between consecutive posts, of the
		// complete run.
		t := sm.tposted
		for i := 1; i < len(t); i++ {
			sm.hist.Record(t[i] - t[i-1])
		}
	}
	in := reports.LatencyInput{Size: uint64(size), Iters: cfg.Iters,
		Samples: reports.PostedDeltas(sm.tposted), RTTFactor: rtt, Cycles: cfg.Cycles, CPUUtil: s.cpuOf(sm), Hist: sm.hist}
	if cfg.Cycles {
		// -C reports CPU cycles, as perftest's raw get_cycles(): the
		// loops' nanoseconds at the cycle counter's rate.
		in.CyclesMHz = s.cycleMHz()
	}
	r, err := reports.ComputeLatency(in)
	if err != nil {
		return fail(err, " "+err.Error()+"\n")
	}
	s.rec.AddLatency(r)
	s.writeLastRow()
	return nil
}

// runSendLat is send_lat.
func (s *session) runSendLat(ctx context.Context) error {
	if err := s.exchangeKeys(true); err != nil {
		return err
	}
	if s.full() {
		_ = reports.WriteLatencyHeader(s.out, &s.ti)
	}
	for i := range s.plan.msgs {
		m := &s.plan.msgs[i]
		r, err := s.postReceives(m)
		if err != nil {
			return err
		}
		if err := s.barrier(); err != nil {
			return err
		}
		stop := s.watchPeer(ctx)
		s.startSize(m.size)
		m0 := markCPU()
		sm, err := s.ep.runLatSend(ctx, r, m, s.server)
		stop()
		if err != nil {
			sm.release()
			return s.peerErr(ctx, runErr(err, "run_iter_lat_send"))
		}
		if err := s.latReport(m.size, sm, m0); err != nil {
			return err
		}
	}
	s.resultLine()
	s.closeConnSend("")
	return nil
}

// runWriteLat is write_lat: no final handshake, each side just exits.
func (s *session) runWriteLat(ctx context.Context) error {
	cfg := &s.cfg
	if err := s.exchangeKeys(true); err != nil {
		return err
	}
	if err := s.barrier(); err != nil {
		return err
	}
	if s.full() {
		_ = reports.WriteLatencyHeader(s.out, &s.ti)
	}
	for i := range s.plan.msgs {
		m := &s.plan.msgs[i]
		var sm samples
		var err error
		var m0 cpuMark
		if cfg.Verb == perftest.WriteImm {
			r, err2 := s.postReceives(m)
			if err2 != nil {
				return err2
			}
			if err := s.barrier(); err != nil {
				return err
			}
			stop := s.watchPeer(ctx)
			s.startSize(m.size)
			m0 = markCPU()
			sm, err = s.ep.runLatWriteImm(ctx, r, m, s.server)
			stop()
		} else {
			stop := s.watchPeer(ctx)
			s.startSize(m.size)
			m0 = markCPU()
			sm, err = s.ep.runLatWrite(ctx, m, s.server)
			stop()
		}
		if err != nil {
			sm.release()
			return s.peerErr(ctx, runErr(err, "run_iter_lat_write"))
		}
		if err := s.latReport(m.size, sm, m0); err != nil {
			return err
		}
	}
	s.resultLine()
	return nil
}

// runReadAtomicLat is read_lat and atomic_lat: only the client measures.
func (s *session) runReadAtomicLat(ctx context.Context) error {
	if err := s.exchangeKeys(true); err != nil {
		return err
	}
	if err := s.barrier(); err != nil {
		return err
	}
	if s.server {
		// The client runs the test; wait for its end, watching for
		// its loss.
		s.conn.SetTimeout(oob.NoTimeout)
		stop := s.watchPeer(ctx)
		m0 := markCPU()
		err := s.closeConn()
		stop()
		if err != nil {
			return s.peerErr(ctx, err)
		}
		// This side's CPU, for the client's remote columns, is known
		// over the whole wait only: it is the size's when there is one
		// size, no size's in a sweep (as a write_bw server's).
		if len(s.plan.msgs) == 1 {
			s.recordCPU(s.plan.msgs[0].size, m0.spanTo(markCPU(), 0))
		}
		s.resultLine()
		return nil
	}
	if s.full() {
		_ = reports.WriteLatencyHeader(s.out, &s.ti)
	}
	for i := range s.plan.msgs {
		m := &s.plan.msgs[i]
		stop := s.watchPeer(ctx)
		s.startSize(m.size)
		m0 := markCPU()
		sm, err := s.ep.runLatReadAtomic(ctx, m)
		stop()
		if err != nil {
			sm.release()
			return s.peerErr(ctx, runErr(err, "run_iter_lat"))
		}
		if err := s.latReport(m.size, sm, m0); err != nil {
			return err
		}
	}
	if err := s.closeConn(); err != nil {
		return err
	}
	s.resultLine()
	return nil
}
