package mmio

import (
	"runtime"
	"sync/atomic"

	"github.com/pvperf/pvperf/internal/unix"
)

// SpinLock is a mutual-exclusion lock for short critical sections on hot
// paths: locking is one compare-and-swap and unlocking one plain store
// (Store32), where sync.Mutex pays a second atomic read-modify-write.
// Waiters spin briefly, then yield (see Backoff). The zero value is
// unlocked. It is not reentrant.
type SpinLock struct{ v uint32 }

// Lock locks l.
func (l *SpinLock) Lock() {
	if atomic.CompareAndSwapUint32(&l.v, 0, 1) {
		return
	}
	l.lockSlow()
}

func (l *SpinLock) lockSlow() {
	for i := 0; ; i++ {
		if Load32(&l.v) == 0 && atomic.CompareAndSwapUint32(&l.v, 0, 1) {
			return
		}
		Backoff(i)
	}
}

// Backoff is what the i-th failed attempt to take a spin lock does before
// the next: nothing for the first 32, then it yields the thread to the
// kernel's scheduler (the holder may be a thread waiting for this CPU), and
// every 64th time to Go's, should the holder be a goroutine waiting for a
// processor. runtime.Gosched alone would be costly in a goroutine locked
// to its thread, as the data paths' are: the thread sleeps and is woken
// through futexes each time.
func Backoff(i int) {
	switch {
	case i < 32:
	case i&63 == 63:
		runtime.Gosched()
	default:
		unix.Yield()
	}
}

// TryLock locks l if it is free and reports whether it did.
func (l *SpinLock) TryLock() bool { return atomic.CompareAndSwapUint32(&l.v, 0, 1) }

// Unlock unlocks l.
func (l *SpinLock) Unlock() { Store32(&l.v, 0) }
