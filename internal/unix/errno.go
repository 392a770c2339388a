//go:build unix

package unix

import (
	"syscall"

	"golang.org/x/sys/unix"
)

// Errno values used across the project, so that callers need not import
// syscall or x/sys/unix to test for them with errors.Is.
const (
	EACCES        = unix.EACCES
	EADDRINUSE    = unix.EADDRINUSE
	EADDRNOTAVAIL = unix.EADDRNOTAVAIL
	EAGAIN        = unix.EAGAIN
	EBUSY         = unix.EBUSY
	ECONNREFUSED  = unix.ECONNREFUSED
	ECONNRESET    = unix.ECONNRESET
	EEXIST        = unix.EEXIST
	EFAULT        = unix.EFAULT
	EHOSTUNREACH  = unix.EHOSTUNREACH
	EIO           = unix.EIO
	EINVAL        = unix.EINVAL
	ENODEV        = unix.ENODEV
	ENETUNREACH   = unix.ENETUNREACH
	ENOENT        = unix.ENOENT
	ENOBUFS       = unix.ENOBUFS
	ENOMEM        = unix.ENOMEM
	ENOSPC        = unix.ENOSPC
	ENOTSUP       = unix.EOPNOTSUPP
	EPERM         = unix.EPERM
	EPIPE         = unix.EPIPE
	ETIMEDOUT     = unix.ETIMEDOUT
)

// Errno is the type of the errno values above.
type Errno = syscall.Errno
