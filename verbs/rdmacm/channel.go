//go:build linux

package rdmacm

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/pvperf/pvperf/internal/unix"
	"github.com/pvperf/pvperf/internal/wire"
)

// DevicePath is the connection manager's character device.
const DevicePath = "/dev/infiniband/rdma_cm"

// abiVersionPath holds the ABI version of the kernel's rdma_ucm module.
const abiVersionPath = "/sys/class/misc/rdma_cm/abi_version"

// ErrABI means the kernel speaks another rdma_cm ABI than ABIVersion.
var ErrABI = errors.New("rdmacm: unsupported kernel ABI")

// ErrClosed is the error of an operation on a closed channel or a
// destroyed id.
var ErrClosed = errors.New("rdmacm: closed")

// kernel is the channel's character device. Tests use a scripted kernel
// that checks every byte written.
type kernel interface {
	// write sends a command; the error is the bare errno.
	write(b []byte) (int, error)
	// getEvent sends GET_EVENT and waits until there is an event or
	// ctx ends (an error wrapping os.ErrDeadlineExceeded).
	getEvent(ctx context.Context, b []byte) (int, error)
	close() error
}

// fdKernel is an open rdma_cm device, non-blocking: GET_EVENT answers
// EAGAIN until an event is queued, and the descriptor polls readable
// then.
type fdKernel struct {
	f  *os.File
	fd int
}

// write writes a command; rdma_cm's commands return after bounded work
// (the answers come as events).
func (k *fdKernel) write(b []byte) (int, error) { return unix.WriteCommand(k.fd, b) }

// getEvent waits with ctx's deadline; a context cancelled sooner ends the
// wait through a deadline in the past, set after the first (so that it is
// never overwritten).
func (k *fdKernel) getEvent(ctx context.Context, b []byte) (int, error) {
	// An event already queued needs no wait (nor deadline). The write
	// goes through the file, which keeps the descriptor open meanwhile.
	if n, err := unix.WriteNow(k.f, b); err != unix.EAGAIN {
		return n, err
	}
	deadline, _ := ctx.Deadline()
	if err := k.f.SetReadDeadline(deadline); err != nil {
		return 0, err
	}
	stop := context.AfterFunc(ctx, func() { _ = k.f.SetReadDeadline(time.Unix(1, 0)) })
	defer stop()
	return unix.WriteWhenReadable(k.f, b)
}

func (k *fdKernel) close() error { return k.f.Close() }

// Sizes of the halves of a command buffer: requests and responses are far
// smaller.
const (
	reqSize  = 1024
	respSize = 1024
)

// cmdSlots is how many commands a channel runs at once (its ids' commands
// from several goroutines), each in a command buffer of its own.
const cmdSlots = 16

// slot is one command buffer: the request, then the response.
type slot struct{ req, resp []byte }

// Channel is an event channel of the connection manager: one open of its
// character device. The ids created on it report their events to it.
type Channel struct {
	k   kernel
	mem []byte // outside the Go heap: the command buffers, then the event's
	// slots holds the free command buffers; done is closed by Close.
	slots      chan *slot
	done       chan struct{}
	mu         sync.Mutex // uid and closed
	evMu       sync.Mutex // one GetEvent at a time
	evReq      []byte
	evResp     []byte
	uid        uint64 // the last uid given to an id
	closed     bool
	closedOnce sync.Once
}

// Open opens an event channel on the kernel's connection manager. It fails
// with an error wrapping ErrABI when the kernel's ABI is not version 4, and
// with os.ErrNotExist when the kernel has no rdma_cm (module rdma_ucm).
func Open() (*Channel, error) {
	if err := checkABI(abiVersionPath); err != nil {
		return nil, err
	}
	fd, _, _, err := unix.OpenDevice(DevicePath)
	if err != nil {
		return nil, fmt.Errorf("rdmacm: open: %w", err)
	}
	f, err := unix.EventFile(fd, DevicePath)
	if err != nil {
		_ = unix.Close(fd)
		return nil, fmt.Errorf("rdmacm: open: %w", err)
	}
	c, err := newChannel(&fdKernel{f: f, fd: fd})
	if err != nil {
		f.Close()
		return nil, err
	}
	return c, nil
}

// checkABI reads the kernel's ABI version from path.
func checkABI(path string) error {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("rdmacm: the kernel has no RDMA connection manager (module rdma_ucm): %w", err)
	}
	if err != nil {
		return fmt.Errorf("rdmacm: abi version: %w", err)
	}
	v, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return fmt.Errorf("%w: version %q", ErrABI, strings.TrimSpace(string(b)))
	}
	if v != ABIVersion {
		return fmt.Errorf("%w: version %d, want %d", ErrABI, v, ABIVersion)
	}
	return nil
}

func newChannel(k kernel) (*Channel, error) {
	const size = reqSize + respSize
	m, err := unix.MmapAnon((cmdSlots + 1) * size)
	if err != nil {
		return nil, fmt.Errorf("rdmacm: command buffer: %w", err)
	}
	c := &Channel{k: k, mem: m, slots: make(chan *slot, cmdSlots), done: make(chan struct{})}
	for i := range cmdSlots {
		b := m[i*size : (i+1)*size : (i+1)*size]
		c.slots <- &slot{req: b[:reqSize:reqSize], resp: b[reqSize:]}
	}
	ev := m[cmdSlots*size:]
	c.evReq, c.evResp = ev[:reqSize:reqSize], ev[reqSize:size:size]
	return c, nil
}

// Close closes the channel: a GetEvent waiting on it returns ErrClosed.
// Destroy its ids first; the kernel destroys those left.
func (c *Channel) Close() error {
	var err error
	c.closedOnce.Do(func() {
		c.mu.Lock()
		c.closed = true
		c.mu.Unlock()
		close(c.done)
		// The commands under way end before the descriptor closes.
		for range cmdSlots {
			<-c.slots
		}
		err = c.k.close()
		// A GetEvent still waiting returns once the descriptor is
		// closed; the event buffer is unmapped after it.
		c.evMu.Lock()
		defer c.evMu.Unlock()
		if uerr := unix.Munmap(c.mem); err == nil {
			err = uerr
		}
	})
	return err
}

// exec writes command cmd: the header, then req encoded. When resp is not
// nil, req's field at respAt holds the address of the response buffer,
// which exec fills, and the response is decoded into resp.
func (c *Channel) exec(op string, cmd uint32, req any, respAt int, resp any) error {
	s, err := c.slot(op)
	if err != nil {
		return err
	}
	defer c.put(s)
	return c.execIn(s, op, cmd, req, respAt, resp)
}

// slot takes a free command buffer; put gives it back.
func (c *Channel) slot(op string) (*slot, error) {
	var s *slot
	select {
	case s = <-c.slots:
	case <-c.done:
		return nil, fmt.Errorf("rdmacm: %s: %w", op, ErrClosed)
	}
	c.mu.Lock()
	closed := c.closed
	c.mu.Unlock()
	if closed {
		c.put(s)
		return nil, fmt.Errorf("rdmacm: %s: %w", op, ErrClosed)
	}
	return s, nil
}

func (c *Channel) put(s *slot) { c.slots <- s }

// execIn is exec in command buffer s.
func (c *Channel) execIn(s *slot, op string, cmd uint32, req any, respAt int, resp any) error {
	out := 0
	if resp != nil {
		out = wire.Size(resp)
	}
	n, err := encodeCmd(s.req, cmd, req, respAt, s.resp[:out])
	if err != nil {
		return fmt.Errorf("rdmacm: %s: %w", op, err)
	}
	w, err := c.k.write(s.req[:n])
	if err != nil {
		return fmt.Errorf("rdmacm: %s: %w", op, err)
	}
	if w != n {
		return fmt.Errorf("rdmacm: %s: short write (%d of %d bytes)", op, w, n)
	}
	if resp != nil {
		if _, err := wire.Decode(s.resp[:out], resp); err != nil {
			return fmt.Errorf("rdmacm: %s: decode response: %w", op, err)
		}
	}
	return nil
}

// encodeCmd lays out command cmd in buf: the header, then req; a
// response buffer resp (cleared) has its address at offset respAt of req.
// It returns the length of the command.
func encodeCmd(buf []byte, cmd uint32, req any, respAt int, resp []byte) (int, error) {
	n, err := wire.Encode(buf[cmdHdrSize:], req)
	if err != nil {
		return 0, err
	}
	if len(resp) > 0 {
		clear(resp)
		binary.LittleEndian.PutUint64(buf[cmdHdrSize+respAt:], unix.Addr(resp))
	}
	binary.LittleEndian.PutUint32(buf[0:], cmd)
	binary.LittleEndian.PutUint16(buf[4:], uint16(n))
	binary.LittleEndian.PutUint16(buf[6:], uint16(len(resp)))
	return cmdHdrSize + n, nil
}
