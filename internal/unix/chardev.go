//go:build linux

package unix

import (
	"os"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// What the kernel RDMA backend needs: opening uverbs character devices,
// writing commands to them, reading their event descriptors and mapping
// their queues and doorbell pages.

// Protections for MmapDevice.
const (
	ProtRead  = unix.PROT_READ
	ProtWrite = unix.PROT_WRITE
)

// Additional errno values of the uverbs ABI.
const (
	ENOTTY          = unix.ENOTTY
	EPROTONOSUPPORT = unix.EPROTONOSUPPORT
	EOPNOTSUPP      = unix.EOPNOTSUPP
	EINTR           = unix.EINTR
)

// OpenDevice opens a character device for reading and writing, closed on
// exec. It returns the descriptor and the device number (major, minor) it
// refers to.
func OpenDevice(path string) (fd int, major, minor uint32, err error) {
	fd, err = unix.Open(path, unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, 0, 0, &os.PathError{Op: "open", Path: path, Err: err}
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		_ = unix.Close(fd)
		return -1, 0, 0, &os.PathError{Op: "fstat", Path: path, Err: err}
	}
	if st.Mode&unix.S_IFMT != unix.S_IFCHR {
		_ = unix.Close(fd)
		return -1, 0, 0, &os.PathError{Op: "open", Path: path, Err: unix.ENODEV}
	}
	return fd, unix.Major(st.Rdev), unix.Minor(st.Rdev), nil
}

// Write writes b to fd in one write(2), retrying on EINTR. The error is the
// bare errno (a [Errno]), so that callers can map it precisely.
func Write(fd int, b []byte) (int, error) {
	for {
		n, err := unix.Write(fd, b)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return n, err
		}
		return n, nil
	}
}

// WriteMasked is [Write] with every signal blocked on the calling thread
// for the duration of the call. A driver that waits for its device
// interruptibly and turns an interrupted wait into an error (vmw_pvrdma
// waits for the answer to each device command with
// wait_for_completion_interruptible_timeout and returns ETIMEDOUT when a
// signal arrives) would otherwise fail a command whenever the Go runtime
// preempts the thread with a signal. Signals that arrive meanwhile are
// delivered when the call returns.
func WriteMasked(fd int, b []byte) (int, error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var all, old unix.Sigset_t
	for i := range all.Val {
		all.Val[i] = ^all.Val[i]
	}
	if err := unix.PthreadSigmask(unix.SIG_SETMASK, &all, &old); err != nil {
		return Write(fd, b)
	}
	defer func() { _ = unix.PthreadSigmask(unix.SIG_SETMASK, &old, nil) }()
	return Write(fd, b)
}

// WriteCommand is [Write] for commands that the kernel completes after
// bounded work of its own, as a rule without sleeping or waiting for a
// device or a peer: the data path's doorbells (post send, request notify),
// rdma_rxe's commands but CREATE_AH and REG_MR (its MODIFY_QP to RTR
// resolves a new peer's address once), and rdma_cm's commands (GET_EVENT
// on a non-blocking descriptor included). It makes the system call
// without telling the Go scheduler, which keeps the goroutine's
// processor: a system call the scheduler sees
// and that lasts more than 20 µs (most commands, on an emulated CPU) has
// the processor handed to another thread and the monitor thread woken
// every 20 µs, and the call then waits for a processor again. That costs a
// polling loop making one call per message four fifths of its rate, and a
// connection setup more CPU than its commands. b must stay put (outside
// the Go heap, or referenced by the caller) for the call.
func WriteCommand(fd int, b []byte) (int, error) {
	for {
		n, _, e := unix.RawSyscall(unix.SYS_WRITE, uintptr(fd), uintptr(unsafe.Pointer(unsafe.SliceData(b))), uintptr(len(b)))
		if e == unix.EINTR {
			continue
		}
		if e != 0 {
			return 0, e
		}
		return int(n), nil
	}
}

// Ioctl issues ioctl(2) request req on fd with the address of memory
// outside the Go heap (see [Addr]) as its argument, retrying on EINTR. The
// error is the bare errno.
func Ioctl(fd int, req uint, addr uint64) error {
	for {
		_, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), uintptr(req), uintptr(addr))
		if e == unix.EINTR {
			continue
		}
		if e != 0 {
			return e
		}
		return nil
	}
}

// MmapDevice maps n bytes of fd at offset off, shared, with protection prot
// (ProtRead, ProtWrite or both). It is how queues and doorbell pages of a
// kernel RDMA device are mapped.
func MmapDevice(fd int, off int64, n, prot int) ([]byte, error) {
	b, err := unix.Mmap(fd, off, n, prot, unix.MAP_SHARED)
	if err != nil {
		return nil, os.NewSyscallError("mmap", err)
	}
	return b, nil
}

// Addr returns the virtual address of b's first byte: what a device and
// the kernel are told. b must be memory outside the Go heap (from
// MmapAnon or MmapDevice), which never moves.
func Addr(b []byte) uint64 { return uint64(uintptr(unsafe.Pointer(unsafe.SliceData(b)))) }

// EventFile wraps an event descriptor of a kernel device (a completion
// channel or the async event descriptor) for reads through Go's poller:
// it is made non-blocking, and the returned file's reads honour deadlines.
func EventFile(fd int, name string) (*os.File, error) {
	if err := unix.SetNonblock(fd, true); err != nil {
		return nil, os.NewSyscallError("fcntl", err)
	}
	return os.NewFile(uintptr(fd), name), nil
}

// WriteWhenReadable writes b to f's descriptor (made non-blocking by
// EventFile) in one write(2), and while the kernel answers EAGAIN (a
// command that waits for something to read, as rdma_cm's GET_EVENT does
// on a non-blocking descriptor), waits through Go's poller for the
// descriptor to become readable and writes again. A read deadline set on f
// ends the wait with an error wrapping os.ErrDeadlineExceeded; closing f
// ends it with os.ErrClosed. The write's error is the bare errno.
func WriteWhenReadable(f *os.File, b []byte) (int, error) {
	rc, err := f.SyscallConn()
	if err != nil {
		return 0, err
	}
	var n int
	var werr error
	if err := rc.Read(func(fd uintptr) bool {
		n, werr = WriteCommand(int(fd), b)
		return werr != unix.EAGAIN
	}); err != nil {
		return 0, err
	}
	return n, werr
}

// WriteNow writes b to f's descriptor in one write(2), without waiting:
// a descriptor made non-blocking by EventFile answers EAGAIN when it would
// have to. f stays open until the write returns. The write's error is the
// bare errno (os.ErrClosed when f is closed).
func WriteNow(f *os.File, b []byte) (int, error) {
	rc, err := f.SyscallConn()
	if err != nil {
		return 0, err
	}
	var n int
	var werr error
	if err := rc.Write(func(fd uintptr) bool {
		n, werr = WriteCommand(int(fd), b)
		return true
	}); err != nil {
		return 0, err
	}
	return n, werr
}

// MemlockLimit returns the soft limit on locked memory (RLIMIT_MEMLOCK) in
// bytes, and whether there is a limit at all.
func MemlockLimit() (uint64, bool) {
	var r unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_MEMLOCK, &r); err != nil || r.Cur == unix.RLIM_INFINITY {
		return 0, false
	}
	return r.Cur, true
}

// Word32 returns the 32-bit word at b[off:off+4], which must be 4-byte
// aligned, for atomic access to indices a kernel shares through a mapping.
func Word32(b []byte, off int) *uint32 {
	p := unsafe.Pointer(unsafe.SliceData(b[off : off+4 : off+4]))
	if uintptr(p)%4 != 0 {
		panic("unix: misaligned 32-bit word")
	}
	return (*uint32)(p)
}

// Bytes returns the n bytes at virtual address addr, which must be mapped
// memory outside the Go heap (what a device or the kernel reads and
// writes there).
func Bytes(addr uint64, n int) []byte {
	a := uintptr(addr)
	p := *(*unsafe.Pointer)(unsafe.Pointer(&a)) // mapped memory outside the Go heap, never a Go object
	return unsafe.Slice((*byte)(p), n)
}

// Pipe returns the two ends of a new pipe, closed on exec.
func Pipe() (r, w int, err error) {
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		return -1, -1, os.NewSyscallError("pipe2", err)
	}
	return p[0], p[1], nil
}
