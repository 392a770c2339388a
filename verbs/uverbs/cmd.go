//go:build linux

package uverbs

import (
	"encoding/binary"
	"fmt"
	"sync"

	"github.com/pvperf/pvperf/internal/unix"
	"github.com/pvperf/pvperf/internal/wire"
	"github.com/pvperf/pvperf/verbs"
)

// cmdPage is the size of each half of a command buffer: requests and
// responses are far smaller.
const cmdPage = 4096

// kernel is the uverbs character device of a context: commands are
// written to it and queues and doorbell pages mapped from it. Tests use a
// scripted kernel that checks every byte written.
type kernel interface {
	write(b []byte) (int, error)
	// doorbell writes a data-path command (post send, request notify),
	// one the kernel completes without sleeping.
	doorbell(b []byte) (int, error)
	// ioctl issues RDMA_VERBS_IOCTL with the header at addr.
	ioctl(addr uint64) error
	mmap(off int64, n, prot int) ([]byte, error)
	close() error
}

// fdKernel is an open uverbs character device.
type fdKernel struct {
	fd int
	// masked: commands are written with signals blocked. vmw_pvrdma
	// fails a command (ETIMEDOUT) whose wait for the device a signal
	// interrupts; rdma_rxe's commands never wait so, and are spared the
	// two extra system calls.
	masked bool
}

// write issues a control command. rdma_rxe's are raw writes, which keep
// the goroutine's processor (see unix.WriteCommand: a connection setup
// made of scheduler hand-overs costs more than its commands), but for
// CREATE_AH and REG_MR, which may sleep long (resolving the peer's MAC
// address, for up to a second; pinning pages): system calls the Go
// scheduler sees. MODIFY_QP to RTR resolves the address too, but it is
// most of a connection setup's commands, and the address is resolved
// once per peer: it stays raw.
func (k fdKernel) write(b []byte) (int, error) {
	if k.masked {
		return unix.WriteMasked(k.fd, b)
	}
	switch binary.LittleEndian.Uint32(b) & cmdMask {
	case cmdCreateAH, cmdRegMR:
		return unix.Write(k.fd, b)
	}
	return unix.WriteCommand(k.fd, b)
}

func (k fdKernel) doorbell(b []byte) (int, error) { return unix.WriteCommand(k.fd, b) }

func (k fdKernel) ioctl(addr uint64) error { return unix.Ioctl(k.fd, rdmaVerbsIoctl, addr) }

func (k fdKernel) mmap(off int64, n, prot int) ([]byte, error) {
	return unix.MmapDevice(k.fd, off, n, prot)
}

func (k fdKernel) close() error { return unix.Close(k.fd) }

// cmdBuf writes uverbs commands to a context's kernel. Requests and
// responses live in memory outside the Go heap: the kernel writes each
// response to the address the request carries, which must not move.
type cmdBuf struct {
	mu   sync.Mutex
	dead bool // closed: mem is unmapped (under mu)
	k    kernel
	mem  []byte // the mapping
	req  []byte // cmdPage bytes
	resp []byte // cmdPage bytes
}

func newCmdBuf(k kernel) (*cmdBuf, error) {
	m, err := mmapAnon(2 * cmdPage)
	if err != nil {
		return nil, err
	}
	return &cmdBuf{k: k, mem: m, req: m[:cmdPage:cmdPage], resp: m[cmdPage : 2*cmdPage : 2*cmdPage]}, nil
}

// close unmaps the buffer once no command uses it; later commands fail
// with ErrClosed. (A query may have passed its context's closed check
// just before the context closed.)
func (c *cmdBuf) close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.dead {
		return nil
	}
	c.dead = true
	return munmap(c.mem)
}

// exec writes command cmd: the 8-byte header, req (encoded), then driver
// input drvIn. When the command has a response (resp or drvOut non-nil),
// req's first field is the response pointer, which exec fills; the kernel
// writes resp's bytes followed by drvOut's. It returns the bare errno of a
// failed write.
func (c *cmdBuf) exec(cmd uint32, req any, drvIn []byte, resp any, drvOut []byte) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.dead {
		return verbs.ErrClosed
	}
	n, err := wire.Encode(c.req[cmdHdrSize:], req)
	if err != nil {
		return fmt.Errorf("encode command %d: %w", cmd, err)
	}
	n += copy(c.req[cmdHdrSize+n:], drvIn)
	total := cmdHdrSize + n
	respSize := 0
	if resp != nil {
		respSize = wire.Size(resp)
	}
	out := respSize + len(drvOut)
	if total%4 != 0 || out%4 != 0 || total > cmdPage || out > cmdPage {
		return fmt.Errorf("command %d: request of %d bytes and response of %d bytes are not whole words", cmd, total, out)
	}
	if out > 0 {
		clear(c.resp[:out])
		binary.LittleEndian.PutUint64(c.req[cmdHdrSize:], unix.Addr(c.resp))
	}
	binary.LittleEndian.PutUint32(c.req[0:], cmd)
	binary.LittleEndian.PutUint16(c.req[4:], uint16(total/4))
	binary.LittleEndian.PutUint16(c.req[6:], uint16(out/4))
	w, err := c.k.write(c.req[:total])
	if err != nil {
		return err
	}
	if w != total {
		return fmt.Errorf("command %d: short write (%d of %d bytes)", cmd, w, total)
	}
	if resp != nil {
		if _, err := wire.Decode(c.resp[:respSize], resp); err != nil {
			return fmt.Errorf("decode response to command %d: %w", cmd, err)
		}
	}
	copy(drvOut, c.resp[respSize:out])
	return nil
}

// ioctl calls method of object with attrs (their flags and data as the
// kernel reads them; outputs point to memory outside the Go heap) for the
// driver driverID. It returns the bare errno of a failed call.
func (c *cmdBuf) ioctl(object, method uint16, driverID uint32, attrs []ioctlAttr) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.dead {
		return verbs.ErrClosed
	}
	total := ioctlHdrSize + ioctlAttrSize*len(attrs)
	if total > cmdPage {
		return fmt.Errorf("ioctl %d/%d: %d attributes do not fit", object, method, len(attrs))
	}
	hdr := ioctlHdr{Length: uint16(total), ObjectID: object, MethodID: method, NumAttrs: uint16(len(attrs)), DriverID: driverID}
	n, err := wire.Encode(c.req, hdr)
	if err != nil {
		return err
	}
	if _, err := wire.Encode(c.req[n:], attrs); err != nil {
		return err
	}
	return c.k.ioctl(unix.Addr(c.req))
}

// The program's own mappings (command buffers, memory, pvrdma rings) go
// through these, so that tests can follow what is mapped.
var (
	mmapAnon = unix.MmapAnon
	munmap   = unix.Munmap
)
