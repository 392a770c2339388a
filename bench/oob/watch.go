package oob

import "github.com/pvperf/pvperf/internal/unix"

// WaitPeerClosed waits, without reading anything, until the peer closes the
// connection (it returns true) or sends data, or done is closed (it returns
// false). During a test no message is due, so a closed connection means the
// peer is gone: perftest would wait forever, pvperf stops. It must not run
// concurrently with an exchange.
func WaitPeerClosed(c *Conn, done <-chan struct{}) bool {
	if w, ok := c.nc.(PeerWatcher); ok {
		return w.WaitPeerClosed(done)
	}
	return unix.WaitPeerClosed(c.nc, done)
}
