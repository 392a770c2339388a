package verbs

import (
	"errors"
	"fmt"
	"strings"
)

// ErrNotSupported is returned, wrapped, by every operation a device cannot
// perform: a QP type, opcode or flag its profile lacks, a feature its driver
// does not implement. The device attributes say in advance what is missing;
// the operation then fails with this error on every kind of device.
var ErrNotSupported = errors.New("not supported")

// ErrClosed is returned, wrapped, by operations on an object that was closed.
var ErrClosed = errors.New("closed")

// ErrQueueFull is returned, wrapped in an *OpError naming the verb ("post
// send", "post recv"), by PostSend and PostRecv when the work queue has no
// room for a work request. It also matches ENOMEM with errors.Is, the errno
// libibverbs returns in that case. It and its wrappers are preallocated:
// the hot path never allocates to report it.
var ErrQueueFull error = &errnoError{msg: "queue full", errno: errnoNOMEM}

// OpError describes a failed verb: which operation on which device, and why.
// Err usually wraps a syscall.Errno so that errors.Is(err, unix.EINVAL)
// style tests work, and may wrap ErrNotSupported or ErrClosed.
type OpError struct {
	Op     string // the verb, e.g. "create qp" or "modify qp to RTR"
	Device string // device name, may be empty
	Err    error
}

func (e *OpError) Error() string {
	var b strings.Builder
	if e.Device != "" {
		b.WriteString(e.Device)
		b.WriteString(": ")
	}
	b.WriteString(e.Op)
	if e.Err != nil {
		b.WriteString(": ")
		b.WriteString(e.Err.Error())
	}
	return b.String()
}

// Unwrap returns the underlying error.
func (e *OpError) Unwrap() error { return e.Err }

// NewOpError wraps err as an *OpError; it returns nil when err is nil.
func NewOpError(op, device string, err error) error {
	if err == nil {
		return nil
	}
	return &OpError{Op: op, Device: device, Err: err}
}

// Errorf builds an error whose message is a formatted detail and which
// matches errno (a syscall.Errno, or any other error such as ErrNotSupported)
// with errors.Is. Backends use it for argument checks:
//
//	verbs.Errorf(unix.EINVAL, "max_send_wr %d exceeds the device limit %d", n, max)
func Errorf(errno error, format string, args ...any) error {
	return &errnoError{msg: fmt.Sprintf(format, args...), errno: errno}
}

type errnoError struct {
	msg   string
	errno error
}

func (e *errnoError) Error() string {
	if e.errno == nil {
		return e.msg
	}
	return e.msg + ": " + e.errno.Error()
}

func (e *errnoError) Unwrap() error { return e.errno }

// WCError is the error form of a work completion that did not succeed.
// Benchmarks and tools turn failed completions into a WCError to report them.
type WCError struct {
	Status    WCStatus
	Opcode    WCOpcode
	VendorErr uint32
	WRID      uint64
	QPNum     uint32
}

func (e *WCError) Error() string {
	return fmt.Sprintf("work completion failed: %s (%d), opcode %s, wr_id %#x, qp %#x, vendor error %#x",
		e.Status, int(e.Status), e.Opcode, e.WRID, e.QPNum, e.VendorErr)
}

// Err returns nil for a successful completion and a *WCError otherwise.
func (wc *WC) Err() error {
	if wc.Status == WCSuccess {
		return nil
	}
	return &WCError{Status: wc.Status, Opcode: wc.Opcode, VendorErr: wc.VendorErr, WRID: wc.ID, QPNum: wc.QPNum}
}
