//go:build unix

package unix

import (
	"net"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// WaitPeerClosed waits, without consuming anything, until the peer of
// socket connection c closes it (it returns true) or sends data, or done is
// closed (it returns false).
func WaitPeerClosed(c net.Conn, done <-chan struct{}) bool {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return false
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	stopped := make(chan struct{})
	woken := make(chan struct{})
	go func() {
		defer close(woken)
		select {
		case <-done:
			_ = c.SetReadDeadline(time.Unix(1, 0)) // wakes the wait below
		case <-stopped:
		}
	}()
	defer func() {
		close(stopped)
		<-woken // the deadline is no longer touched by the goroutine
		_ = c.SetReadDeadline(time.Time{})
	}()
	var closed bool
	_ = rc.Read(func(fd uintptr) bool {
		var b [1]byte
		n, _, err := unix.Recvfrom(int(fd), b[:], unix.MSG_PEEK|unix.MSG_DONTWAIT)
		switch {
		case err == unix.EAGAIN || err == unix.EINTR:
			return false // not readable yet: wait
		case err != nil || n == 0:
			closed = true
		}
		return true
	})
	return closed
}

// SIGTERM is the termination signal, for os/signal.
const SIGTERM = unix.SIGTERM
