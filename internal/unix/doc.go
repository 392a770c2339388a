// Package unix is the only package of pvperf that imports golang.org/x/sys/unix.
//
// It wraps the few system calls the project needs (anonymous and memfd
// memory mappings, futexes, Unix-socket credentials and descriptor passing,
// and, for real RDMA devices, the uverbs character device) behind small
// functions with Go types, so that the rest of the code never handles raw
// system-call numbers or errno values directly.
//
// Errors are returned as syscall.Errno values wrapped in *os.SyscallError
// (or plain errno values where a caller tests them), so errors.Is(err,
// unix.EBUSY) works everywhere. Nothing here keeps state: every function is
// safe for concurrent use, and ownership of what a call returns (a mapping, a
// file descriptor) passes to the caller, who must release it.
package unix
