package bench

import (
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
// loop calls idle after each empty poll and busy after progress; only
// every 65536th idle call in a row reads the clock, so the waiting costs
// no more than a counter.
type stall struct {
	n     uint64
	since int64
}

func (s *stall) busy() { s.n = 0 }

// idle counts an empty poll and returns ErrStalled once the wait has lasted
// StallTimeout.
func (s *stall) idle(what string) error {
	s.n++
	if s.n&0xFFFF != 0 {
		return nil
	}
	now := clock.Now()
	if s.n == 0x10000 {
		s.since = now
		return nil
	}
	if d := time.Duration(now - s.since); d > StallTimeout {
		return fmt.Errorf("%w: %s for %v (posted work never completed)", ErrStalled, what, d.Round(10*time.Millisecond))
	}
	return nil
}
