package oob

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
)

// Error classes, testable with errors.Is.
var (
	// ErrTimeout: the peer did not complete an exchange within the timeout.
	ErrTimeout = errors.New("peer did not respond in time")
	// ErrPeerClosed: the peer closed the connection (EOF or a short read).
	ErrPeerClosed = errors.New("peer closed the connection")
	// ErrClosed: the Conn was closed locally.
	ErrClosed = errors.New("connection closed")
	// ErrMalformed: a message from the peer (or a value to send) does not
	// fit the wire format.
	ErrMalformed = errors.New("malformed message")
	// ErrIncompatible: the peer's version is older than 5.70, or the peer's
	// version is not known yet.
	ErrIncompatible = errors.New("incompatible peer version")
	// ErrMismatch: a negotiated parameter differs between the two sides.
	ErrMismatch = errors.New("parameter mismatch")
	// ErrResolve: the host or bind address could not be resolved.
	ErrResolve = errors.New("cannot resolve address")
	// ErrBind: the client could not bind its source address.
	ErrBind = errors.New("cannot bind source address")
	// ErrConnect: the client could not connect to the server.
	ErrConnect = errors.New("cannot connect")
	// ErrListen: the server could not listen on its port.
	ErrListen = errors.New("cannot listen")
	// ErrAccept: the server's accept failed.
	ErrAccept = errors.New("accept failed")
)

// errInvalidSource: --bind_source_ip is not an address of the family.
var errInvalidSource = errors.New("invalid source address")

// PerftestMessage returns the text perftest prints to stderr for the
// failure err describes (lines ending in "\n"), or "" if err carries none.
// It looks through the whole chain of err.
func PerftestMessage(err error) string {
	var m interface{ PerftestMessage() string }
	if errors.As(err, &m) {
		return m.PerftestMessage()
	}
	return ""
}

// NetError is a failure to set up the connection: resolving, binding,
// connecting, listening or accepting.
type NetError struct {
	Op   string // "dial", "listen" or "accept"
	Kind error  // ErrResolve, ErrBind, ErrConnect, ErrListen or ErrAccept
	Host string // the server name as given to Dial, or the bind address
	Port int
	IPv6 bool
	Err  error // the underlying error
}

func (e *NetError) Error() string {
	var b strings.Builder
	b.WriteString("oob: " + e.Op)
	if e.Op != "accept" {
		b.WriteString(" " + joinHostPort(e.Host, e.Port))
	}
	fmt.Fprintf(&b, ": %v", e.Kind)
	if e.Err != nil {
		fmt.Fprintf(&b, ": %v", e.Err)
	}
	return b.String()
}

func (e *NetError) Unwrap() []error {
	if e.Err == nil {
		return []error{e.Kind}
	}
	return []error{e.Kind, e.Err}
}

// PerftestMessage returns what perftest prints for this failure
// (ethernet_client_connect, ethernet_server_connect).
func (e *NetError) PerftestMessage() string {
	switch e.Kind {
	case ErrResolve:
		return "Problem in resolving basic address and port\n"
	case ErrBind:
		if e.IPv6 && errors.Is(e.Err, errInvalidSource) {
			// inet_pton fails before any socket exists.
			return "Invalid IPv6 source address.\nFailed to set source address.\n"
		}
		return "Failed to bind socket\n" + fmt.Sprintf("Couldn't connect to %s:%d\n", e.Host, e.Port)
	case ErrConnect:
		return fmt.Sprintf("Couldn't connect to %s:%d\n", e.Host, e.Port)
	case ErrListen:
		return fmt.Sprintf("Couldn't listen to port %d\n", e.Port)
	case ErrAccept:
		return "accept() failed\n"
	}
	return ""
}

// Reason is the system's word for why the operation failed ("connection
// refused", "i/o timeout"), or "" when there is none: what perftest's
// message leaves out.
func (e *NetError) Reason() string {
	var oe *net.OpError
	var se *os.SyscallError
	switch {
	case errors.As(e.Err, &se):
		return se.Err.Error()
	case errors.As(e.Err, &oe) && oe.Err != nil:
		return oe.Err.Error()
	case e.Err != nil:
		return e.Err.Error()
	}
	return ""
}

// ExchangeError is a failed exchange: the write or the read of one message.
type ExchangeError struct {
	Step   string // the message: "version", "key", "bw report size", ...
	Op     string // "write", "read" or "decode"
	Server bool   // the side that failed
	Data   []byte // for Op "decode": the message received
	Err    error  // ErrTimeout, ErrPeerClosed, ErrClosed or ErrMalformed, and the cause
}

func (e *ExchangeError) Error() string {
	return fmt.Sprintf("oob: exchange %s: %s: %v", e.Step, e.Op, e.Err)
}

func (e *ExchangeError) Unwrap() error { return e.Err }

// PerftestMessage returns what perftest_communication.c prints when this
// exchange fails: the low-level line, the ctx_hand_shake/ctx_xchg_data line
// (whose read/write wording perftest swaps on the server side), and for the
// steps that perftest_communication.c drives itself, its summary line. The
// test's main adds its own line (" Failed to exchange data between server
// and clients\n" for key handshakes).
func (e *ExchangeError) PerftestMessage() string {
	var b strings.Builder
	key := e.Step == stepKey
	switch {
	case e.Op == "decode" && key:
		text := e.Data
		if i := bytes.IndexByte(text, 0); i >= 0 {
			text = text[:i]
		}
		fmt.Fprintf(&b, "Couldn't parse line <%s>\n", text)
	case e.Op == "read" && key:
		b.WriteString("ethernet_read_keys: Couldn't read remote address\n")
	case e.Op == "write" && key:
		b.WriteString("Couldn't send local address\n")
	case e.Op == "read":
		b.WriteString("ethernet_read_data: Couldn't read reports\n")
	case e.Op == "write":
		b.WriteString("Couldn't send reports\n")
	}
	if e.Op == "decode" {
		e = &ExchangeError{Step: e.Step, Op: "read", Server: e.Server}
	}
	switch {
	case !e.Server && e.Op == "write":
		b.WriteString(" Unable to write to socket/rdma_cm\n")
	case !e.Server:
		b.WriteString(" Unable to read from socket/rdma_cm\n")
	case e.Op == "read":
		b.WriteString(" Unable to read to socket/rdma_cm\n")
	default:
		b.WriteString(" Unable to write from socket/rdma_cm\n")
	}
	switch e.Step {
	case stepVersion, stepMTU:
		b.WriteString(" Failed to exchange data between server and clients\n")
	case stepPageSize:
		b.WriteString(" Failed to exchange Page Size data between server and client\n")
	case stepCacheLine:
		b.WriteString(" Failed to exchange Cache Line Size data between server and client\n")
	case stepNegotiate:
		b.WriteString(" Failed to exchange negotiation parameters between server and client\n")
	case stepReportSize, stepReportIters, stepReportPeak, stepReportAvg, stepReportRate,
		stepReportAvgP1, stepReportRateP1, stepReportAvgP2, stepReportRateP2:
		b.WriteString(" Failed to exchange data between server and clients\n")
	}
	return b.String()
}

// VersionError reports a peer older than perftest's minimum, 5.70.
type VersionError struct {
	Remote string  // the peer's version string
	Value  float64 // as atof parses it
}

func (e *VersionError) Error() string {
	return fmt.Sprintf("oob: version: peer version %q is older than 5.70: %v", e.Remote, ErrIncompatible)
}

func (e *VersionError) Unwrap() error { return ErrIncompatible }

// PerftestMessage returns check_version_compatibility's message.
func (e *VersionError) PerftestMessage() string {
	return "Current implementation is not compatible with versions older than 5.70\n"
}

// MismatchError is the first negotiated parameter that differs between the
// two sides, in perftest's comparison order.
type MismatchError struct {
	Field  string // perftest's field name: "size", "report_fmt", ...
	Local  string // the local value as perftest prints it
	Remote string // the remote value as perftest prints it
}

func (e *MismatchError) Error() string {
	return fmt.Sprintf("oob: negotiate: %s mismatch: local=%s, remote=%s", e.Field, e.Local, e.Remote)
}

func (e *MismatchError) Unwrap() error { return ErrMismatch }

// PerftestMessage returns the line perftest's compare() prints, for example
// " size mismatch: local=4096, remote=8192\n". perftest's main then prints
// " Failed to negotiate parameters\n" and exits with status 1.
func (e *MismatchError) PerftestMessage() string {
	return fmt.Sprintf(" %s mismatch: local=%s, remote=%s\n", e.Field, e.Local, e.Remote)
}
