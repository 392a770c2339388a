package clock

import (
	_ "unsafe" // for go:linkname
)

// nanotime is the runtime's monotonic clock (what time.Now uses for its
// monotonic reading), without building a time.Time.
//
//go:linkname nanotime runtime.nanotime
func nanotime() int64

// Now returns monotonic nanoseconds.
func Now() int64 { return nanotime() }
