package unix

import "golang.org/x/sys/unix"

// Yield gives the CPU to another thread that is ready to run, with
// sched_yield(2). Unlike runtime.Gosched it does not go through the Go
// scheduler: a goroutine locked to its thread (runtime.LockOSThread) that
// calls runtime.Gosched has its thread put to sleep and woken again through
// futexes, which costs far more than a wait for a lock held a few
// microseconds by another thread.
func Yield() { _, _, _ = unix.Syscall(unix.SYS_SCHED_YIELD, 0, 0, 0) }
