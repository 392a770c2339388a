//go:build unix

package unix

import (
	"math"
	"os"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// bigInt64s is the size from which Int64s maps memory.
const bigInt64s = 1 << 20

// Int64s returns n zeroed int64s and the function that frees them (the
// slice must not be used after). From 1 MiB up they are anonymous memory
// outside the Go heap, which the kernel zeroes page by page as they are
// first written, as C's malloc does for a large block: the Go heap may
// instead clear a reused block whole before returning it, which takes
// seconds for gigabytes (perftest's timestamps of -n 1000000000 are
// 8 GB) while nothing else of the caller runs. Below, a Go slice.
func Int64s(n int) ([]int64, func(), error) {
	if n < 0 || n > math.MaxInt/8 {
		return nil, nil, os.NewSyscallError("mmap", unix.ENOMEM)
	}
	if n*8 < bigInt64s {
		return make([]int64, n), func() {}, nil
	}
	b, err := unix.Mmap(-1, 0, n*8, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANON)
	if err != nil {
		return nil, nil, os.NewSyscallError("mmap", err)
	}
	return unsafe.Slice((*int64)(unsafe.Pointer(&b[0])), n), sync.OnceFunc(func() { _ = unix.Munmap(b) }), nil
}
