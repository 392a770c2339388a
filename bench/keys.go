package bench

import (
	"fmt"

	"github.com/pvperf/pvperf/bench/oob"
	"github.com/pvperf/pvperf/internal/clock"
	"github.com/pvperf/pvperf/perftest"
	"github.com/pvperf/pvperf/reports"
	"github.com/pvperf/pvperf/verbs"
)

// handshake exchanges the key of QP i.
func (s *session) handshake(i int) error {
	r, err := s.conn.Handshake(s.kf, s.ep.my[i])
	if err != nil {
		return fail(err, oob.PerftestMessage(err), " Failed to exchange data between server and clients\n")
	}
	s.setRemote(i, r)
	return nil
}

// barrier is a key handshake of QP 0 whose answer is not needed.
func (s *session) barrier() error {
	s.ep.syncAt = clock.Now()
	_, err := s.conn.Handshake(s.kf, s.ep.my[0])
	if err != nil {
		return fail(err, oob.PerftestMessage(err), " Failed to exchange data between server and clients\n")
	}
	return nil
}

// waitingBarrier is a barrier that waits for the peer's test to run: no
// timeout, but the peer's death still ends it.
func (s *session) waitingBarrier() error {
	s.conn.SetTimeout(oob.NoTimeout)
	defer s.conn.SetTimeout(s.cfg.PeerTimeout)
	return s.barrier()
}

func (s *session) setRemote(i int, k perftest.Dest) {
	e := s.ep
	if e.rem == nil {
		e.rem = make([]perftest.Dest, s.cfg.NumQPs)
	}
	e.rem[i] = k
}

// exchangeKeys runs the key rounds common to all tests (perftest's mains
// between ctx_print_test_info and the test): round 1, the GID check, the
// connection of the QPs, the send tests' extra handshake, and round 2 with
// the address lines.
func (s *session) exchangeKeys(sends bool) error {
	cfg := &s.cfg
	n := cfg.NumQPs
	recvVerb := cfg.Verb == perftest.Send || cfg.Verb == perftest.SendImm
	if cfg.Test == perftest.Latency && !recvVerb {
		if err := s.handshake(0); err != nil {
			return err
		}
	}
	for i := range n {
		if err := s.handshake(i); err != nil {
			return err
		}
	}
	// With -R the connection manager has connected the QPs.
	if !cfg.RdmaCM {
		if verbs.GID(s.ep.my[0].GID).IsV4Mapped() != verbs.GID(s.ep.rem[0].GID).IsV4Mapped() && s.kf == oob.KeyGID {
			return fail(nil, "\n Found Incompatibility issue with GID types.\n Please Try to use a different IP version.\n\n")
		}
		if err := s.ep.connect(sends); err != nil {
			return fail(err, " "+err.Error()+"\n", " Unable to Connect the HCA's through the link\n")
		}
	}
	if recvVerb {
		if err := s.barrier(); err != nil {
			return err
		}
	}
	for i := range n {
		if err := s.handshake(i); err != nil {
			return err
		}
	}
	if d, ok := s.ep.qps[0].(interface{ DataPath() string }); ok {
		s.info.DataPath = d.DataPath()
		if cfg.Extras {
			s.ti.DataPath = s.info.DataPath
		}
	}
	_ = reports.WriteAddresses(s.out, &s.ti, s.ep.my, s.ep.rem)
	if cfg.Events {
		if err := s.ep.scq.ReqNotify(false); err != nil {
			return fail(err, " Couldn't request CQ notification\n")
		}
		if s.ep.rcq != s.ep.scq {
			if err := s.ep.rcq.ReqNotify(false); err != nil {
				return fail(err, " Couldn't request CQ notification\n")
			}
		}
	}
	return nil
}

// closeConn is perftest's ctx_close_connection.
func (s *session) closeConn() error {
	if _, err := s.conn.CloseHandshake(s.kf, s.ep.my[0]); err != nil {
		return fail(err, oob.PerftestMessage(err), "Failed to close connection between server and client\n")
	}
	return nil
}

// closeConnSend is the close of send_bw and send_lat, which, unlike the
// other tests, only say so when it fails and end as they would have:
// the results are printed already. send_bw's message has a leading space,
// send_lat's not.
func (s *session) closeConnSend(lead string) {
	if _, err := s.conn.CloseHandshake(s.kf, s.ep.my[0]); err != nil {
		fmt.Fprint(s.errOut, oob.PerftestMessage(err)+lead+"Failed to close connection between server and client\n Trying to close this side resources\n")
	}
}
