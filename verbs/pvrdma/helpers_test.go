package pvrdma

import (
	"bytes"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"unsafe"

	"github.com/pvperf/pvperf/internal/unix"
	"github.com/pvperf/pvperf/verbs"
)

// mmapBuf returns n bytes of zeroed, page-aligned memory outside the Go heap,
// unmapped when the test ends.
func mmapBuf(tb testing.TB, n int) []byte {
	tb.Helper()
	b, err := unix.MmapAnon(n)
	if err != nil {
		tb.Fatalf("mmap %d bytes: %v", n, err)
	}
	if uintptr(unsafe.Pointer(&b[0]))%PageSize != 0 {
		tb.Fatalf("mmap returned memory that is not page-aligned")
	}
	tb.Cleanup(func() {
		if err := unix.Munmap(b); err != nil {
			tb.Errorf("munmap: %v", err)
		}
	})
	return b
}

// u32 returns the 32-bit word at b[off] for atomic access (the device side
// of a ring index).
func u32(b []byte, off int) *uint32 {
	if off%4 != 0 || off+4 > len(b) {
		panic("u32: bad offset")
	}
	return (*uint32)(unsafe.Pointer(&b[off]))
}

func load32(b []byte, off int) uint32     { return atomic.LoadUint32(u32(b, off)) }
func store32(b []byte, off int, v uint32) { atomic.StoreUint32(u32(b, off), v) }

// dbWrite is one doorbell store recorded by fakeUAR.
type dbWrite struct{ off, val uint32 }

func (w dbWrite) String() string { return fmt.Sprintf("UAR+%d <- %#08x", w.off, w.val) }

// fakeUAR records the doorbell stores of the code under test and lets a test
// act as the device on each store. It never allocates while recording (the
// log has a fixed capacity; stores beyond it are only counted), so it can be
// used in allocation tests.
type fakeUAR struct {
	mu    sync.Mutex
	log   []dbWrite
	count int
	// hook, when set, runs after each store is recorded, outside mu.
	hook func(off, val uint32)
}

func newFakeUAR() *fakeUAR { return &fakeUAR{log: make([]dbWrite, 0, 4096)} }

func (u *fakeUAR) Write32(off, val uint32) {
	u.mu.Lock()
	if len(u.log) < cap(u.log) {
		u.log = append(u.log, dbWrite{off, val})
	}
	u.count++
	h := u.hook
	u.mu.Unlock()
	if h != nil {
		h(off, val)
	}
}

// writes returns a copy of the recorded stores.
func (u *fakeUAR) writes() []dbWrite {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]dbWrite(nil), u.log...)
}

// total returns how many stores were made.
func (u *fakeUAR) total() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.count
}

// reset forgets the recorded stores.
func (u *fakeUAR) reset() {
	u.mu.Lock()
	u.log = u.log[:0]
	u.count = 0
	u.mu.Unlock()
}

func (u *fakeUAR) expect(tb testing.TB, what string, want ...dbWrite) {
	tb.Helper()
	got := u.writes()
	if len(got) != len(want) {
		tb.Fatalf("%s: %d doorbell writes %v, want %d %v", what, len(got), got, len(want), want)
	}
	for i := range want {
		if got[i] != want[i] {
			tb.Fatalf("%s: doorbell write %d is %v, want %v", what, i, got[i], want[i])
		}
	}
}

// qpOpts describes a test QP.
type qpOpts struct {
	typ     verbs.QPType
	cap     verbs.QPCap
	handle  uint32
	srq     bool
	atomics bool
	state   verbs.QPState
	res     Resolver
}

// qpEnv is a QP over real mmapped buffers plus the fake UAR it rings.
type qpEnv struct {
	qp     *QP
	uar    *fakeUAR
	layout QPLayout
	sbuf   []byte
	rbuf   []byte
}

func newQPEnv(tb testing.TB, o qpOpts) *qpEnv {
	tb.Helper()
	if o.typ == 0 {
		o.typ = verbs.RC
	}
	l := NewQPLayout(o.cap, o.srq)
	e := &qpEnv{uar: newFakeUAR(), layout: l}
	e.sbuf = mmapBuf(tb, l.SendBufLen)
	if !o.srq {
		e.rbuf = mmapBuf(tb, l.RecvBufLen)
	}
	e.qp = NewQP(QPConfig{
		Type:     o.typ,
		Handle:   o.handle,
		Layout:   l,
		SendBuf:  e.sbuf,
		RecvBuf:  e.rbuf,
		Cap:      o.cap,
		UAR:      e.uar,
		Resolver: o.res,
		Atomics:  o.atomics,
	})
	e.qp.SetState(o.state)
	return e
}

// Ring indices as the device sees them (spec 3.4: SQ ring @ sbuf+0, RQ ring
// @ sbuf+8; each ring is {prod_tail u32 @0, cons_head u32 @4}).
func (e *qpEnv) sqTail() uint32         { return load32(e.sbuf, 0) }
func (e *qpEnv) sqHead() uint32         { return load32(e.sbuf, 4) }
func (e *qpEnv) rqTail() uint32         { return load32(e.sbuf, 8) }
func (e *qpEnv) rqHead() uint32         { return load32(e.sbuf, 12) }
func (e *qpEnv) setSQTail(v uint32)     { store32(e.sbuf, 0, v) }
func (e *qpEnv) setSQHead(v uint32)     { store32(e.sbuf, 4, v) }
func (e *qpEnv) setRQTail(v uint32)     { store32(e.sbuf, 8, v) }
func (e *qpEnv) setRQHead(v uint32)     { store32(e.sbuf, 12, v) }
func (e *qpEnv) sqSlot(slot int) []byte { return slotAt(e.sbuf, PageSize, slot, e.layout.SendStride) }
func (e *qpEnv) rqSlot(slot int) []byte { return slotAt(e.rbuf, 0, slot, e.layout.RecvStride) }

// consumeSQ makes the device consume everything posted to the send queue.
func (e *qpEnv) consumeSQ() { e.setSQHead(e.sqTail()) }
func (e *qpEnv) consumeRQ() { e.setRQHead(e.rqTail()) }

func slotAt(buf []byte, base, slot, stride int) []byte {
	off := base + slot*stride
	return buf[off : off+stride : off+stride]
}

// srqEnv is an SRQ over a real mmapped buffer.
type srqEnv struct {
	srq    *SRQ
	uar    *fakeUAR
	buf    []byte
	n      int
	stride int
}

func newSRQEnv(tb testing.TB, handle uint32, maxWR, maxSGE int) *srqEnv {
	tb.Helper()
	n := RoundPow2(maxWR)
	stride := RecvStride(maxSGE)
	e := &srqEnv{uar: newFakeUAR(), n: n, stride: stride}
	e.buf = mmapBuf(tb, SRQBufLen(n, stride))
	e.srq = NewSRQ(SRQConfig{Handle: handle, Entries: n, Stride: stride, MaxSGE: maxSGE, Buf: e.buf, UAR: e.uar})
	return e
}

// SRQ ring = ring_state.rx at buf+8 (spec 3.4), WQEs from buf+4096.
func (e *srqEnv) tail() uint32         { return load32(e.buf, 8) }
func (e *srqEnv) head() uint32         { return load32(e.buf, 12) }
func (e *srqEnv) setTail(v uint32)     { store32(e.buf, 8, v) }
func (e *srqEnv) setHead(v uint32)     { store32(e.buf, 12, v) }
func (e *srqEnv) slot(slot int) []byte { return slotAt(e.buf, PageSize, slot, e.stride) }

// cqEnv is a CQ over a real mmapped buffer; the test plays the device.
type cqEnv struct {
	cq  *CQ
	uar *fakeUAR
	buf []byte
	n   int
	qps *QPTable
}

func newCQEnv(tb testing.TB, handle uint32, entries int) *cqEnv {
	tb.Helper()
	e := &cqEnv{uar: newFakeUAR(), n: entries, qps: new(QPTable)}
	e.buf = mmapBuf(tb, CQBufLen(entries))
	e.cq = NewCQ(CQConfig{Handle: handle, Entries: entries, Buf: e.buf, UAR: e.uar, QPs: e.qps})
	return e
}

// CQ ring = ring_state.rx at cqbuf+8 (spec 3.4), CQEs from cqbuf+4096.
func (e *cqEnv) tail() uint32     { return load32(e.buf, 8) }
func (e *cqEnv) head() uint32     { return load32(e.buf, 12) }
func (e *cqEnv) setTail(v uint32) { store32(e.buf, 8, v) }
func (e *cqEnv) setHead(v uint32) { store32(e.buf, 12, v) }
func (e *cqEnv) cqe(slot int) []byte {
	return slotAt(e.buf, PageSize, slot, 64)
}

// produce writes raw CQE bytes at prod_tail and advances it, as the device
// does (without checking for space: tests keep the ring from overflowing).
func (e *cqEnv) produceRaw(raw []byte) {
	t := e.tail()
	copy(e.cqe(int(t)&(e.n-1)), raw)
	e.setTail((t + 1) & uint32(2*e.n-1))
}

func (e *cqEnv) produce(c CQE) {
	var raw [64]byte
	c.Encode(raw[:])
	e.produceRaw(raw[:])
}

// fld is one field of an expected byte layout: bytes placed at an offset.
type fld struct {
	off int
	b   []byte
}

func at(off int, b ...byte) fld { return fld{off, b} }

// layout builds a zero-filled byte array of size n with the fields placed
// at their offsets; overlapping fields are a bug in the test.
func layout(tb testing.TB, n int, fields ...fld) []byte {
	tb.Helper()
	out := make([]byte, n)
	used := make([]bool, n)
	for _, f := range fields {
		if f.off+len(f.b) > n {
			tb.Fatalf("expected layout: field @%d (%d bytes) past the end (%d)", f.off, len(f.b), n)
		}
		for i := range f.b {
			if used[f.off+i] {
				tb.Fatalf("expected layout: field @%d overlaps byte %d", f.off, f.off+i)
			}
			used[f.off+i] = true
		}
		copy(out[f.off:], f.b)
	}
	return out
}

// diffBytes reports the first differences between got and want, with offsets.
func diffBytes(tb testing.TB, what string, got, want []byte) {
	tb.Helper()
	if bytes.Equal(got, want) {
		return
	}
	if len(got) != len(want) {
		tb.Errorf("%s: %d bytes, want %d", what, len(got), len(want))
	}
	n := 0
	for i := 0; i < min(len(got), len(want)); i++ {
		if got[i] != want[i] {
			tb.Errorf("%s: byte @%d = %#02x, want %#02x", what, i, got[i], want[i])
			if n++; n == 12 {
				tb.Errorf("%s: more differences follow", what)
				break
			}
		}
	}
	tb.Errorf("%s:\n got % x\nwant % x", what, got, want)
}

// isErrno reports whether err matches errno through errors.Is.
func isErrno(err error, errno unix.Errno) bool { return errors.Is(err, errno) }
