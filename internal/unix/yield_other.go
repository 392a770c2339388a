//go:build !linux

package unix

import "runtime"

// Yield lets other goroutines run (runtime.Gosched); on Linux it yields the
// thread with sched_yield(2).
func Yield() { runtime.Gosched() }
