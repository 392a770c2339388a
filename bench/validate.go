package bench

import (
	"errors"
	"fmt"

	"github.com/pvperf/pvperf/perftest"
)

// The received-data check
//
// pvperf fills the slots messages are sent from with a pattern that
// repeats every cache line and has no zero byte, and leaves the slots
// messages land in zeroed. Every message starts at a multiple of the cache
// line in both (the loops step by whole cache lines; a UD payload lands
// one cache line in, after the GRH), so each byte of a landing slot must
// end up 0 (never written) or the pattern's byte for its offset, and the
// first message of the largest size, at the start of each slot, must be
// there whole. A transfer that moved nothing, moved part of a message or
// changed a byte fails the check; a copy from a wrong whole number of
// cache lines does not. Atomics (8-byte values the responder computes)
// and runs with --payload_file_path (the user's bytes everywhere) are not
// checked.

// ErrDataMismatch is the error of received data that is not what was sent.
var ErrDataMismatch = errors.New("received data differs from what was sent")

// patternByte is the pattern's byte at offset x of a slot, for cache lines
// of line bytes: never 0.
func patternByte(x, line int) byte { return byte(1 + (x%line*37+11)%255) }

// checksData tells whether this side's run can check what it received, and
// with which slots as the landing ones (false: the send slots, true: the
// receive slots).
func (e *endpoint) checksData() bool {
	cfg := e.cfg
	return cfg.Verb != perftest.Atomic && cfg.PayloadFile == "" && !cfg.DataValidation
}

// readLands tells that messages land in the send slots: READ's responder
// data lands where its requests are posted from.
func (e *endpoint) readLands() bool { return e.cfg.Verb == perftest.Read }

// fillPattern writes the pattern into the slots messages leave from (the
// receive slots for READ, whose responder is the peer) and leaves the
// others zeroed; write_lat's polled last bytes start at 0 as perftest's.
func (e *endpoint) fillPattern() {
	if !e.checksData() {
		return
	}
	n, line := e.cfg.NumQPs, e.plan.cacheLine
	first := 0
	if e.readLands() {
		first = n
	}
	for i := first; i < first+n; i++ {
		b := e.slotBytes(i)
		for x := range b {
			b[x] = patternByte(x, line)
		}
	}
}

// slotBytes is slot i of the buffer.
func (e *endpoint) slotBytes(i int) []byte {
	off := i * e.plan.bufSize
	return e.buf[off : off+e.plan.bufSize]
}

// receives tells whether this side receives messages in the test: the
// server of a unidirectional test, both sides of a bidirectional test or
// of a SEND or WRITE latency test; READ's data lands on its client (both
// sides, bidirectional).
func (s *session) receives() bool {
	cfg := &s.cfg
	if cfg.Verb == perftest.Read {
		return !s.server || cfg.Bidirectional
	}
	if cfg.Test == perftest.Latency || cfg.Bidirectional {
		return true
	}
	return s.server
}

// checkReceived checks the landing slots after the test: every byte 0 or
// the pattern's, and the first message of the largest size whole at the
// start of each slot. Not checked: write_lat's counter bytes (the last of
// each size's message, which the sender changes in its own buffer and the
// larger sizes then carry); with an SRQ, whether each slot got a first
// message (the first receives may all be another queue pair's); with UD,
// the bytes outside the first message (each receive buffer starts with a
// GRH) and its last 40 bytes (the next receive buffer, a message further,
// starts with its GRH there: perftest's layout).
func (s *session) checkReceived() error {
	e := s.ep
	cfg := &s.cfg
	if !e.checksData() || !s.receives() {
		return nil
	}
	n, line := cfg.NumQPs, e.plan.cacheLine
	first := n
	if e.readLands() {
		first = 0
	}
	ud := cfg.Connection == perftest.UD
	start := 0
	if ud {
		start = line // the payload follows the GRH, at the first cache line
	}
	writeLat := cfg.Test == perftest.Latency && (cfg.Verb == perftest.Write || cfg.Verb == perftest.WriteImm)
	whole := 0
	counters := map[int]bool{}
	for i := range s.plan.msgs {
		sz := s.plan.msgs[i].size
		whole = max(whole, sz)
		if writeLat {
			counters[start+sz-1] = true
		}
	}
	if ud {
		whole -= UDAddition
	}
	for q := range n {
		b := e.slotBytes(first + q)
		for x, v := range b {
			want := patternByte(x, line)
			inFirst := x >= start && x < start+whole && !counters[x]
			switch {
			case v == want, counters[x]:
			case inFirst && !cfg.UseSRQ:
				return fmt.Errorf("queue pair %d: byte %d of its receive buffer, in the first message, is %#02x, want %#02x: %w",
					q, x, v, want, ErrDataMismatch)
			case v == 0, ud:
			default:
				return fmt.Errorf("queue pair %d: byte %d of its receive buffer is %#02x, want %#02x or 0 (not written): %w",
					q, x, v, want, ErrDataMismatch)
			}
		}
	}
	return nil
}
