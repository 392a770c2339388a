// Package oob speaks perftest's TCP out-of-band protocol ("Data ex. method :
// Ethernet"), so that a pvperf binary can face a real perftest binary
// (ib_write_bw, ib_send_lat, ...) as its peer.
//
// # Protocol
//
// One TCP connection (default port 18515) carries everything. There is no
// framing: every message has a size both sides know in advance, and every
// exchange is symmetric — the client writes its message, then reads the
// server's; the server reads, then writes. A short read is an error, never
// a hang. The sequence a perftest binary follows is, in order:
//
//	ExchangeVersion   16 bytes, NUL-padded version string ("6.29")
//	ExchangeSysData   page size, cache line size (4 bytes big-endian each)
//	ExchangeMTU       ASCII ibv_mtu enum + NUL (2 bytes, 4 for old peers)
//	Negotiate         perftest_parameters_negotiate (320 or 312 bytes)
//	Handshake ...     key (QP info) messages, per test (see below)
//	ExchangeReports   BW results at the end of BW tests
//	CloseHandshake    one more key handshake, then close
//
// Which of the optional steps happen depends on the version strings: see
// [Features]. A real perftest decides only from its peer's version; a Conn
// decides from both (its own advertised version and the peer's), because
// the peer decides from the version this side advertises. Advertising
// "6.27" therefore makes a Conn behave exactly like a 6.27 binary.
//
// The package provides the messages and the exchanges; the order of the key
// handshakes is the caller's, following perftest
// (src/perftest_communication.c and the test mains):
//
//	latency write/read/atomic: one extra handshake (QP 0) first
//	round 1: one handshake per QP
//	send tests: one handshake (QP 0)
//	round 2: one handshake per QP (the "remote address" values)
//	write/read/atomic: barrier after RTR, one handshake (QP 0)
//	send tests, and write/read/atomic with -b: start barrier, one handshake
//	end of test: per test (write_lat has none; unidirectional write/read/
//	atomic BW: Handshake, ExchangeReports, CloseHandshake; ...)
//
// # Differences from the reference, found in the captures
//
// The captures of real runs (perftest 6.06 and 6.29) are the ground truth of
// this package; its tests replay them byte for byte. Where they differ from
// written descriptions of the protocol:
//
//   - perftest before 6.17 (for example 6.06) writes "done\0" (5 bytes) right
//     after the close handshake and closes without reading anything; the
//     peer never reads it either. 6.17 removed the write (commit dbf395e).
//     A Conn advertising a version below 6.17 writes it too ([Features.SendDone]).
//   - "max_qp_rd_atom at offset 224" is the offset in the negotiation struct;
//     in struct ibv_device_attr (which starts at offset 80) it is at 144.
//   - ibv_device_attr is in host byte order except node_guid and
//     sys_image_guid, which are __be64 (network order in memory).
//   - The 6.06 server of a unidirectional BW test sends uninitialised
//     memory as its BW report (6.29 sends zeros); the values mean nothing.
//
// # Ownership
//
// A [Conn] owns the net.Conn it is given (or that [Dial] or
// [Listener.Accept] opened) and closes it in [Conn.Close] and
// [Conn.CloseHandshake]. Byte slices passed to a Conn are not retained;
// slices and values it returns belong to the caller.
//
// # Concurrency
//
// The protocol is lock-step, so a Conn serves one goroutine: its exchange
// methods must not be called concurrently. [Conn.Close] is the exception:
// it may be called from any goroutine, at any time and more than once, and
// makes a blocked exchange return an error wrapping [ErrClosed].
// The encoding functions and types hold no state and are safe for
// concurrent use.
//
// # Timeouts
//
// Each exchange (write plus read) must complete within the Conn's timeout
// (default [DefaultTimeout], 5 s), so a peer that vanishes mid-test makes
// the exchange fail with an error wrapping [ErrTimeout]; a peer that closes
// the connection makes it fail at once with [ErrPeerClosed]. Waiting for a
// client to connect ([Listener.Accept]) is governed by its context only and
// may wait forever; connecting ([Dial]) gives up after the timeout or
// [MinConnectTimeout], whichever is longer. An exchange that legitimately
// waits for the whole test to run (a unidirectional BW server waits in a
// handshake until the client is done) needs a longer timeout: call
// [Conn.SetTimeout] before it. Such a wait still ends when the peer's host
// or link is gone, which sends no FIN: the connection's TCP keep-alive
// ([KeepAlive], about 13 s of silence) fails it.
//
// # Errors
//
// Errors are lowercase "oob: op: detail: cause" chains. Their class is
// testable with errors.Is against the Err* sentinels ([ErrTimeout],
// [ErrPeerClosed], [ErrClosed], [ErrMalformed], [ErrIncompatible],
// [ErrMismatch], [ErrResolve], [ErrBind], [ErrConnect], [ErrListen],
// [ErrAccept]); the underlying net/os error stays reachable too. The typed
// errors ([*NetError], [*ExchangeError], [*VersionError], [*MismatchError])
// carry the details, and [PerftestMessage] returns the exact text perftest
// prints to stderr for the failure (for example "Couldn't connect to
// host:18515\n" or " size mismatch: local=4096, remote=8192\n"), so that a
// caller can print what perftest prints.
package oob
