//go:build linux

package uverbs

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"sync/atomic"

	"github.com/pvperf/pvperf/internal/unix"
	"github.com/pvperf/pvperf/verbs"
)

// Lifecycles: every object counts the objects that depend on it (users)
// and refuses to close, with EBUSY, while any exists; all of it under the
// context's mu. The data path only reads the closed flags.

// memory is memory from AllocMemory.
type memory struct {
	c     *Context
	b     []byte
	users int // memory regions
	freed bool
}

func (m *memory) Bytes() []byte { return m.b }

func (m *memory) Close() error {
	c := m.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if m.freed {
		return nil
	}
	if m.users > 0 {
		return c.err("free memory", verbs.Errorf(unix.EBUSY, "%d memory regions use it", m.users))
	}
	m.freed = true
	delete(c.memories, m)
	c.snapshot()
	c.children--
	return c.err("free memory", munmap(m.b))
}

// PD is a protection domain.
type PD struct {
	c      *Context
	handle uint32
	drv    []byte // ALLOC_PD's driver output
	users  int    // MRs, QPs, SRQs, AHs
	closed atomic.Bool
}

var _ verbs.PD = (*PD)(nil)

func (pd *PD) Context() verbs.Context { return pd.c }

func (pd *PD) err(op string, err error) error { return pd.c.err(op, err) }

// RegMR registers b, which must lie in memory from AllocMemory (REG_MR).
func (pd *PD) RegMR(b []byte, access verbs.Access) (verbs.MR, error) {
	c := pd.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if pd.closed.Load() {
		return nil, pd.err("reg mr", verbs.ErrClosed)
	}
	m := c.memoryOf(b)
	if m == nil {
		return nil, pd.err("reg mr", verbs.Errorf(unix.EINVAL, "%d bytes at %#x are not memory allocated by this context", len(b), unix.Addr(b)))
	}
	if access&(verbs.AccessRemoteWrite|verbs.AccessRemoteAtomic) != 0 && access&verbs.AccessLocalWrite == 0 {
		return nil, pd.err("reg mr", verbs.Errorf(unix.EINVAL, "remote write or atomic access needs local write"))
	}
	addr := unix.Addr(b)
	req := regMRReq{Start: addr, Length: uint64(len(b)), HCAVA: addr, PDHandle: pd.handle, AccessFlags: uint32(access)}
	var r regMRResp
	if err := c.exec(cmdRegMR, &req, nil, &r, nil); err != nil {
		if errors.Is(err, unix.ENOMEM) {
			if lim, ok := unix.MemlockLimit(); ok {
				err = fmt.Errorf("%w (the locked-memory limit is %d bytes; raise it with ulimit -l or run with CAP_IPC_LOCK)", err, lim)
			}
		}
		return nil, pd.err("reg mr", err)
	}
	m.users++
	pd.users++
	return &mr{pd: pd, mem: m, b: b, handle: r.MRHandle, lkey: r.LKey, rkey: r.RKey, access: access}, nil
}

// CreateQP creates a queue pair.
func (pd *PD) CreateQP(init verbs.QPInit) (verbs.QP, error) {
	c := pd.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if pd.closed.Load() {
		return nil, pd.err("create qp", verbs.ErrClosed)
	}
	qp, err := c.prov.createQP(pd, init)
	if err != nil {
		return nil, pd.err("create qp", err)
	}
	pd.users++
	return qp, nil
}

// CreateSRQ creates a shared receive queue.
func (pd *PD) CreateSRQ(init verbs.SRQInit) (verbs.SRQ, error) {
	c := pd.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if pd.closed.Load() {
		return nil, pd.err("create srq", verbs.ErrClosed)
	}
	s, err := c.prov.createSRQ(pd, init)
	if err != nil {
		return nil, pd.err("create srq", err)
	}
	pd.users++
	return s, nil
}

// CreateAH creates an address handle for UD sends.
func (pd *PD) CreateAH(attr verbs.AHAttr) (verbs.AH, error) {
	c := pd.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if pd.closed.Load() {
		return nil, pd.err("create ah", verbs.ErrClosed)
	}
	ah, err := c.prov.createAH(pd, attr)
	if err != nil {
		return nil, pd.err("create ah", err)
	}
	pd.users++
	return ah, nil
}

// Close deallocates the PD (DEALLOC_PD).
func (pd *PD) Close() error {
	c := pd.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if pd.closed.Load() {
		return nil
	}
	if pd.users > 0 {
		return pd.err("dealloc pd", verbs.Errorf(unix.EBUSY, "%d objects use it", pd.users))
	}
	if err := c.exec(cmdDeallocPD, &handleOnly{pd.handle}, nil, nil, nil); err != nil {
		return pd.err("dealloc pd", err)
	}
	pd.closed.Store(true)
	c.children--
	return nil
}

// release drops one user of the PD. Called with c.mu held.
func (pd *PD) release() { pd.users-- }

// mr is a registered memory region.
type mr struct {
	pd     *PD
	mem    *memory
	b      []byte
	handle uint32
	lkey   uint32
	rkey   uint32
	access verbs.Access
	closed bool
}

func (r *mr) LKey() uint32         { return r.lkey }
func (r *mr) RKey() uint32         { return r.rkey }
func (r *mr) Addr() uint64         { return unix.Addr(r.b) }
func (r *mr) Bytes() []byte        { return r.b }
func (r *mr) Access() verbs.Access { return r.access }

func (r *mr) Close() error {
	c := r.pd.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if r.closed {
		return nil
	}
	if err := c.exec(cmdDeregMR, &handleOnly{r.handle}, nil, nil, nil); err != nil {
		return c.err("dereg mr", err)
	}
	r.closed = true
	r.mem.users--
	r.pd.release()
	return nil
}

// compChannel is a completion channel: a descriptor that yields the user
// handle of each armed CQ that got a completion.
type compChannel struct {
	c      *Context
	f      *os.File
	fd     int32
	users  int // CQs
	closed atomic.Bool
}

func (ch *compChannel) Wait(ctx context.Context) (verbs.CQ, error) {
	c := ch.c
	for {
		if ch.closed.Load() {
			return nil, c.err("get cq event", verbs.ErrClosed)
		}
		var b [compEventSize]byte
		if err := readEvent(ctx, ch.f, b[:]); err != nil {
			if ch.closed.Load() {
				err = verbs.ErrClosed
			}
			return nil, c.err("get cq event", err)
		}
		if cq, ok := c.lookup(binary.LittleEndian.Uint64(b[:])).(verbs.CQ); ok {
			return cq, nil
		}
		// The CQ was destroyed after the event was queued.
	}
}

func (ch *compChannel) Close() error {
	c := ch.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if ch.closed.Load() {
		return nil
	}
	if ch.users > 0 {
		return c.err("close comp channel", verbs.Errorf(unix.EBUSY, "%d CQs use it", ch.users))
	}
	ch.closed.Store(true)
	c.children--
	return c.err("close comp channel", ch.f.Close())
}
