package emu

import (
	"sync"

	"github.com/pvperf/pvperf/internal/unix"
	"github.com/pvperf/pvperf/verbs"
)

// users guards a resource that other objects use (a CQ or an SRQ used by
// QPs, a PD by its MRs, QPs, SRQs and AHs): they register with use and
// leave with unuse; close refuses while any remain, as the kernel does
// (EBUSY), and use refuses once the resource is closed.
type users struct {
	mu     sync.Mutex
	count  int
	closed bool
}

// use registers one more user, or returns ErrClosed.
func (u *users) use() error {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.closed {
		return verbs.ErrClosed
	}
	u.count++
	return nil
}

// unuse removes a user.
func (u *users) unuse() {
	u.mu.Lock()
	u.count--
	u.mu.Unlock()
}

// close marks the resource closed and returns true the first time; it
// returns an EBUSY error naming the users ("%d <who>") while some remain.
func (u *users) close(who string) (bool, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.closed {
		return false, nil
	}
	if u.count > 0 {
		return false, verbs.Errorf(unix.EBUSY, "%d %s", u.count, who)
	}
	u.closed = true
	return true, nil
}

// isClosed reports whether close succeeded.
func (u *users) isClosed() bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.closed
}
