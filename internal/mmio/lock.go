package mmio

import (
	"runtime"
	"sync/atomic"
)

// SpinLock is a mutual-exclusion lock for short critical sections on hot
// paths: locking is one compare-and-swap and unlocking one plain store
// (Store32), where sync.Mutex pays a second atomic read-modify-write.
// Waiters spin briefly, then yield the processor. The zero value is
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
		if i >= 32 {
			runtime.Gosched()
		}
	}
}

// TryLock locks l if it is free and reports whether it did.
func (l *SpinLock) TryLock() bool { return atomic.CompareAndSwapUint32(&l.v, 0, 1) }

// Unlock unlocks l.
func (l *SpinLock) Unlock() { Store32(&l.v, 0) }
