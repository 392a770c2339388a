package bench

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/pvperf/pvperf/internal/clock"
)

// ErrStalled means a test waited longer than the stall timeout for a completion
// (or, in write_lat, for the peer's write) with work outstanding. perftest
// waits for ever there; a device that never completes a work request (RNR
// retries without end, a device model without the verb) would hang the test.
var ErrStalled = errors.New("no progress")

// StallTimeout is how long a test waits for a completion before it fails
// with ErrStalled. The slowest device pvperf runs on (vmw_pvrdma in a guest
// nested under software emulation) completes a message in milliseconds.
var StallTimeout = 15 * time.Second

// stall finds a wait without progress for longer than StallTimeout. A
// loop calls idle after each empty poll and busy after progress. The clock
// is read once a wait has lasted stallStart empty polls (a latency loop's
// waits for its peer seldom do), then every stallCheck: the waiting costs
// no more than a counter, and a loop whose polls are slow (a loaded or
// emulated CPU: half a millisecond each was seen) still notices the stall
// within a second or two of StallTimeout.
//
// The wait also ends when ctx (if not nil) is done, which is checked every
// ctxCheck empty polls: the number of polls, not of seconds, so that the
// cancellation is seen within a fraction of a second even when each poll
// takes that half millisecond.
type stall struct {
	n     uint64
	since int64
	grace time.Duration // added to StallTimeout: a latency loop's --latency_gap
	// turn, when not nil, is the loop's turns, told of every poll.
	turn *turns
	ctx  context.Context
}

const (
	stallStart = 0x100
	stallCheck = 0x1000
	ctxCheck   = 0x100
)

// stallNow reads the clock (a variable for tests).
var stallNow = clock.Now

func (s *stall) busy() {
	s.n = 0
	s.turn.busy()
}

// idle counts an empty poll and returns ErrStalled once the wait has lasted
// StallTimeout, or ctx's error once it is done.
func (s *stall) idle(what string) error {
	s.n++
	s.turn.idle()
	if s.n%ctxCheck == 0 && s.ctx != nil {
		if err := s.ctx.Err(); err != nil {
			return err
		}
	}
	switch {
	case s.n == stallStart:
		s.since = stallNow()
	case s.n > stallStart && s.n%stallCheck == 0:
		if d := time.Duration(stallNow() - s.since); d > StallTimeout+s.grace {
			return fmt.Errorf("%w: %s for %v (posted work never completed)", ErrStalled, what, d.Round(10*time.Millisecond))
		}
	}
	return nil
}
