package bench

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pvperf/pvperf/bench/oob"
	"github.com/pvperf/pvperf/verbs"
)

// cmMsgSize is the largest message of the rdma_cm exchange pvperf sends
// or takes (the largest perftest sends is the 320-byte negotiation struct).
const cmMsgSize = 4096

// cmConn is the out-of-band exchange over rdma_cm (-z, and -R which
// implies it): an RC QP of its own, connected through the connection
// manager, that carries each message as one SEND, as perftest's
// rdma_write_keys and rdma_read_keys do. It keeps message boundaries
// (oob.MessageConn) and learns of its peer's end from the connection
// manager (oob.PeerWatcher).
type cmConn struct {
	id  verbs.CMID
	pd  verbs.PD
	mem verbs.Memory
	mr  verbs.MR
	scq verbs.CQ
	rcq verbs.CQ
	qp  verbs.QP
	buf []byte // send half, then receive half

	local, remote net.Addr

	mu       sync.Mutex // deadlines
	rdl, wdl time.Time

	closed    atomic.Bool
	closeOnce sync.Once
	closeErr  error
	wc        [1]verbs.WC
}

var (
	_ oob.MessageConn = (*cmConn)(nil)
	_ oob.PeerWatcher = (*cmConn)(nil)
)

// newCMConn makes the exchange's resources on vctx for the connection of
// id: a PD, a buffer, a CQ per direction and an RC QP with one send and
// one receive work request, moved to INIT with the id's attributes.
func newCMConn(vctx verbs.Context, id verbs.CMID) (*cmConn, error) {
	c := &cmConn{id: id}
	err := c.init(vctx)
	if err != nil {
		_ = c.free()
		return nil, err
	}
	return c, nil
}

func (c *cmConn) init(vctx verbs.Context) error {
	var err error
	if c.pd, err = vctx.AllocPD(); err != nil {
		return err
	}
	if c.mem, err = vctx.AllocMemory(2 * cmMsgSize); err != nil {
		return err
	}
	c.buf = c.mem.Bytes()
	if c.mr, err = c.pd.RegMR(c.buf, verbs.AccessLocalWrite); err != nil {
		return err
	}
	if c.scq, err = vctx.CreateCQ(verbs.CQInit{Entries: 1}); err != nil {
		return err
	}
	if c.rcq, err = vctx.CreateCQ(verbs.CQInit{Entries: 1}); err != nil {
		return err
	}
	if c.qp, err = c.pd.CreateQP(verbs.QPInit{Type: verbs.RC, SendCQ: c.scq, RecvCQ: c.rcq,
		Cap: verbs.QPCap{MaxSendWR: 1, MaxRecvWR: 1, MaxSendSGE: 1, MaxRecvSGE: 1}}); err != nil {
		return err
	}
	if err := verbs.CMModify(c.id, c.qp, verbs.StateInit); err != nil {
		return err
	}
	return c.postRecv()
}

func (c *cmConn) postRecv() error {
	_, err := c.qp.PostRecv([]verbs.RecvWR{{ID: 1, SGL: []verbs.SGE{{Addr: c.mr.Addr() + cmMsgSize, Length: cmMsgSize, LKey: c.mr.LKey()}}}})
	return err
}

// setAddrs records the connection's addresses from the id.
func (c *cmConn) setAddrs() {
	if a, err := c.id.Bound(); err == nil {
		c.local = net.TCPAddrFromAddrPort(a.Src)
		c.remote = net.TCPAddrFromAddrPort(a.Dst)
	}
}

// poll waits for the one completion of cq until the deadline.
func (c *cmConn) poll(cq verbs.CQ, deadline time.Time) (verbs.WC, error) {
	spins := 0
	for {
		if c.closed.Load() {
			return verbs.WC{}, net.ErrClosed
		}
		n, err := cq.Poll(c.wc[:])
		if err != nil {
			return verbs.WC{}, err
		}
		if n == 1 {
			wc := c.wc[0]
			if err := wc.Err(); err != nil {
				return wc, err
			}
			return wc, nil
		}
		if !deadline.IsZero() && time.Now().After(deadline) {
			return verbs.WC{}, os.ErrDeadlineExceeded
		}
		// Messages are few and the peer answers at once: spin a
		// little, then sleep.
		if spins++; spins > 1000 {
			time.Sleep(20 * time.Microsecond)
		}
	}
}

// ReadMessage reads the next message and posts the receive for the one
// after.
func (c *cmConn) ReadMessage(b []byte) (int, error) {
	c.mu.Lock()
	dl := c.rdl
	c.mu.Unlock()
	wc, err := c.poll(c.rcq, dl)
	if err != nil {
		return 0, err
	}
	n := int(wc.ByteLen)
	if n > len(b) {
		return 0, fmt.Errorf("a message of %d bytes, more than %d: %w", n, len(b), oob.ErrMalformed)
	}
	copy(b, c.buf[cmMsgSize:cmMsgSize+n])
	if err := c.postRecv(); err != nil {
		return 0, err
	}
	return n, nil
}

// Read is ReadMessage: a message larger than b is an error.
func (c *cmConn) Read(b []byte) (int, error) { return c.ReadMessage(b) }

// Write sends b as one message and waits for its completion.
func (c *cmConn) Write(b []byte) (int, error) {
	if len(b) > cmMsgSize {
		return 0, fmt.Errorf("a message of %d bytes, more than %d", len(b), cmMsgSize)
	}
	c.mu.Lock()
	dl := c.wdl
	c.mu.Unlock()
	copy(c.buf, b)
	if _, err := c.qp.PostSend([]verbs.SendWR{{ID: 2, Opcode: verbs.OpSend, Flags: verbs.SendSignaled,
		SGL: []verbs.SGE{{Addr: c.mr.Addr(), Length: uint32(len(b)), LKey: c.mr.LKey()}}}}); err != nil {
		return 0, err
	}
	if _, err := c.poll(c.scq, dl); err != nil {
		return 0, err
	}
	return len(b), nil
}

// WaitPeerClosed waits for the connection manager to say the connection
// ended (the peer disconnected, or its process died).
func (c *cmConn) WaitPeerClosed(done <-chan struct{}) bool {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-done:
			cancel()
		case <-ctx.Done():
		}
	}()
	// Only the end of the connection counts: an error of the wait (the
	// connection manager's channel failing) leaves the peer's fate to the
	// exchanges' timeouts.
	err := c.id.WaitDisconnected(ctx)
	return err == nil && ctx.Err() == nil
}

func (c *cmConn) Close() error {
	c.closeOnce.Do(func() {
		c.closed.Store(true)
		c.closeErr = c.free()
	})
	return c.closeErr
}

// free destroys the QP, its resources and the id.
func (c *cmConn) free() error {
	var errs []error
	for _, x := range []interface{ Close() error }{c.qp, c.scq, c.rcq, c.mr, c.mem, c.pd, c.id} {
		if x != nil {
			if err := x.Close(); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

func (c *cmConn) LocalAddr() net.Addr  { return c.local }
func (c *cmConn) RemoteAddr() net.Addr { return c.remote }

func (c *cmConn) SetDeadline(t time.Time) error {
	c.mu.Lock()
	c.rdl, c.wdl = t, t
	c.mu.Unlock()
	return nil
}

func (c *cmConn) SetReadDeadline(t time.Time) error {
	c.mu.Lock()
	c.rdl = t
	c.mu.Unlock()
	return nil
}

func (c *cmConn) SetWriteDeadline(t time.Time) error {
	c.mu.Lock()
	c.wdl = t
	c.mu.Unlock()
	return nil
}
