package oob

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"time"
)

// pvperf's own message
//
// After perftest's last exchange, two pvperf sides may trade one message
// of their own: ExtraMagic, a 4-byte big-endian length and that many
// bytes of payload (JSON, at most MaxExtra). perftest never reads it: a
// side sends it only when its user asked for what it carries, and a
// perftest peer just closes the connection (or, before 6.17, sends
// "done\0", which is not the magic).

// ExtraMagic opens pvperf's message.
const ExtraMagic = "pvperf-x"

// MaxExtra bounds the payload of pvperf's message.
const MaxExtra = 1 << 20

// ErrNoExtra means the peer sent no pvperf message (it is perftest, or it did
// not send one in time).
var ErrNoExtra = errors.New("no pvperf message from the peer")

// EncodeExtra returns pvperf's message carrying payload.
func EncodeExtra(payload []byte) ([]byte, error) {
	if len(payload) > MaxExtra {
		return nil, fmt.Errorf("oob: pvperf message of %d bytes, more than %d: %w", len(payload), MaxExtra, ErrMalformed)
	}
	b := make([]byte, 0, len(ExtraMagic)+4+len(payload))
	b = append(b, ExtraMagic...)
	b = binary.BigEndian.AppendUint32(b, uint32(len(payload)))
	return append(b, payload...), nil
}

// ReadExtra reads pvperf's message from r and returns its payload. Bytes
// that are not the magic, a length over MaxExtra and a short payload are
// errors wrapping ErrMalformed (after the magic) or ErrNoExtra.
func ReadExtra(r io.Reader) ([]byte, error) {
	var head [len(ExtraMagic) + 4]byte
	n, err := io.ReadFull(r, head[:])
	if err != nil {
		return nil, fmt.Errorf("%w: %d bytes (%q): %w", ErrNoExtra, n, head[:n], err)
	}
	if string(head[:len(ExtraMagic)]) != ExtraMagic {
		return nil, fmt.Errorf("%w: %q is not its start", ErrNoExtra, head[:])
	}
	size := binary.BigEndian.Uint32(head[len(ExtraMagic):])
	if size > MaxExtra {
		return nil, fmt.Errorf("oob: pvperf message of %d bytes, more than %d: %w", size, MaxExtra, ErrMalformed)
	}
	p := make([]byte, size)
	if n, err := io.ReadFull(r, p); err != nil {
		return nil, fmt.Errorf("oob: pvperf message: %d of %d bytes: %w: %w", n, size, ErrMalformed, err)
	}
	return p, nil
}

// ExchangeExtra sends payload as pvperf's message (unless it is nil) and,
// when want is set, waits up to wait for the peer's, returning its
// payload or an error wrapping ErrNoExtra (a perftest peer) or
// ErrMalformed. It is for the end of a test, after perftest's last
// exchange, over a TCP connection (not an rdma_cm one).
func (c *Conn) ExchangeExtra(payload []byte, want bool, wait time.Duration) ([]byte, error) {
	if _, ok := c.nc.(MessageConn); ok {
		return nil, fmt.Errorf("oob: pvperf message over a message connection: %w", ErrNoExtra)
	}
	if err := c.nc.SetDeadline(time.Now().Add(wait)); err != nil {
		return nil, c.ioError("pvperf message", "write", err)
	}
	if payload != nil {
		b, err := EncodeExtra(payload)
		if err != nil {
			return nil, err
		}
		if err := c.write("pvperf message", b); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrNoExtra, err)
		}
	}
	if !want {
		return nil, nil
	}
	return ReadExtra(c.nc)
}
