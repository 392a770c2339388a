//go:build linux

package unix

import (
	"net"
	"os"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// PageSize is the size of a memory page.
var PageSize = os.Getpagesize()

// MmapAnon maps n bytes (rounded up to whole pages) of zeroed, private,
// anonymous memory. The memory is outside the Go heap and never moves.
func MmapAnon(n int) ([]byte, error) {
	b, err := unix.Mmap(-1, 0, roundPage(n), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return nil, os.NewSyscallError("mmap", err)
	}
	return b[:n], nil // the capacity is the whole mapping, for Munmap
}

// Munmap releases a mapping returned by MmapAnon or MmapFile. b must be the
// slice that was returned (its capacity is the mapped length).
func Munmap(b []byte) error {
	if cap(b) == 0 {
		return nil
	}
	if err := unix.Munmap(b[:cap(b)]); err != nil {
		return os.NewSyscallError("munmap", err)
	}
	return nil
}

// MadviseDontFork keeps a mapping out of child processes.
func MadviseDontFork(b []byte) error {
	if err := unix.Madvise(b[:roundPage(len(b))], unix.MADV_DONTFORK); err != nil {
		return os.NewSyscallError("madvise", err)
	}
	return nil
}

// MemfdCreate creates an anonymous memory file of n bytes (rounded up to
// whole pages) that is closed on exec. It lives only as long as a
// descriptor or a mapping refers to it.
func MemfdCreate(name string, n int) (int, error) {
	fd, err := unix.MemfdCreate(name, unix.MFD_CLOEXEC)
	if err != nil {
		return -1, os.NewSyscallError("memfd_create", err)
	}
	if err := unix.Ftruncate(fd, int64(roundPage(n))); err != nil {
		unix.Close(fd)
		return -1, os.NewSyscallError("ftruncate", err)
	}
	return fd, nil
}

// MmapFile maps n bytes of fd, shared and writable.
func MmapFile(fd, n int) ([]byte, error) {
	b, err := unix.Mmap(fd, 0, roundPage(n), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, os.NewSyscallError("mmap", err)
	}
	return b[:n], nil // the capacity is the whole mapping, for Munmap
}

// Close closes a file descriptor.
func Close(fd int) error {
	if err := unix.Close(fd); err != nil {
		return os.NewSyscallError("close", err)
	}
	return nil
}

// Getuid returns the caller's user ID.
func Getuid() int { return unix.Getuid() }

// FutexWait sleeps while *addr == val, for at most d (d <= 0 waits without
// limit). It works across processes on shared mappings. A spurious or timed
// out wake-up returns nil; the caller rechecks its condition.
func FutexWait(addr *uint32, val uint32, d time.Duration) error {
	var tsp *unix.Timespec
	var ts unix.Timespec
	if d > 0 {
		ts = unix.NsecToTimespec(d.Nanoseconds())
		tsp = &ts
	}
	_, _, e := unix.Syscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(addr)), futexWait, uintptr(val), uintptr(unsafe.Pointer(tsp)), 0, 0)
	switch e {
	case 0, unix.EAGAIN, unix.EINTR, unix.ETIMEDOUT:
		return nil
	default:
		return os.NewSyscallError("futex", e)
	}
}

// FutexWake wakes up to n waiters sleeping on addr, in any process.
func FutexWake(addr *uint32, n int) {
	_, _, _ = unix.Syscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(addr)), futexWake, uintptr(n), 0, 0, 0)
}

// PeerUID returns the user ID of the process at the other end of a Unix
// socket connection.
func PeerUID(c *net.UnixConn) (int, error) {
	raw, err := c.SyscallConn()
	if err != nil {
		return -1, err
	}
	var cred *unix.Ucred
	var serr error
	if err := raw.Control(func(fd uintptr) {
		cred, serr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return -1, err
	}
	if serr != nil {
		return -1, os.NewSyscallError("getsockopt", serr)
	}
	return int(cred.Uid), nil
}

// UnixRights encodes file descriptors as a socket control message.
func UnixRights(fds ...int) []byte { return unix.UnixRights(fds...) }

// ParseUnixRights decodes the file descriptors carried by a control message.
func ParseUnixRights(oob []byte) ([]int, error) {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return nil, os.NewSyscallError("parse control message", err)
	}
	var fds []int
	for i := range msgs {
		f, err := unix.ParseUnixRights(&msgs[i])
		if err != nil {
			continue
		}
		fds = append(fds, f...)
	}
	return fds, nil
}

// CmsgSpace returns the control-message buffer size for n descriptors.
func CmsgSpace(n int) int { return unix.CmsgSpace(n * 4) }

func roundPage(n int) int {
	if n <= 0 {
		return PageSize
	}
	return (n + PageSize - 1) &^ (PageSize - 1)
}

// Futex operations (linux/futex.h); the shared (non-private) forms, since
// the words live in memory shared between processes.
const (
	futexWait = 0
	futexWake = 1
)

// Gettid returns the caller's thread ID.
func Gettid() int { return unix.Gettid() }

// FutexOwnerDied is the bit the kernel sets in a robust futex word whose
// owner thread died.
const FutexOwnerDied = 0x40000000

// SetRobustList registers the calling thread's robust futex list (struct
// robust_list_head, 24 bytes at head; 0 unregisters). When the thread
// exits, for any reason, the kernel marks every futex word on the list
// that holds the thread's ID with FutexOwnerDied.
func SetRobustList(head uintptr) error {
	_, _, e := unix.Syscall(unix.SYS_SET_ROBUST_LIST, head, 24, 0)
	if e != 0 {
		return os.NewSyscallError("set_robust_list", e)
	}
	return nil
}
