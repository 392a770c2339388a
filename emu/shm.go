//go:build linux

package emu

import (
	"fmt"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/pvperf/pvperf/internal/unix"
)

// A segment is one memfd-backed shared mapping. Every byte the emulated
// device can reach from another process (registered memory, queue buffers,
// the object tables) lives in a segment, so a peer process can map the same
// memfd and address it by (segment id, offset).
type segment struct {
	id   uint32
	mu   sync.Mutex // guards fd against the peer server sending it
	fd   int        // -1 for a peer's mapping once its descriptor is closed
	mem  []byte
	base uintptr
}

func newSegment(id uint32, size int) (*segment, error) {
	fd, err := unix.MemfdCreate(fmt.Sprintf("pvperf-emu-%d", id), size)
	if err != nil {
		return nil, err
	}
	mem, err := unix.MmapFile(fd, size)
	if err != nil {
		_ = unix.Close(fd)
		return nil, err
	}
	return &segment{id: id, fd: fd, mem: mem, base: uintptr(unsafe.Pointer(&mem[0]))}, nil
}

func mapSegment(id uint32, fd int, size int) (*segment, error) {
	mem, err := unix.MmapFile(fd, size)
	_ = unix.Close(fd)
	if err != nil {
		return nil, err
	}
	return &segment{id: id, fd: -1, mem: mem, base: uintptr(unsafe.Pointer(&mem[0]))}, nil
}

func (s *segment) release() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mem != nil {
		_ = unix.Munmap(s.mem)
		s.mem = nil
	}
	if s.fd >= 0 {
		_ = unix.Close(s.fd)
		s.fd = -1
	}
}

// segTable maps segment ids to segments. Reads are lock-free (the hot path
// translates a segment id per SGE); changes copy the slice.
type segTable struct {
	mu   sync.Mutex
	list atomic.Pointer[[]*segment]
}

func (t *segTable) get(id uint32) *segment {
	l := t.list.Load()
	if l == nil || int(id) >= len(*l) {
		return nil
	}
	return (*l)[id]
}

func (t *segTable) put(s *segment) {
	t.mu.Lock()
	defer t.mu.Unlock()
	var l []*segment
	if p := t.list.Load(); p != nil {
		l = *p
	}
	n := max(len(l), int(s.id)+1)
	nl := make([]*segment, n, max(n, 2*len(l)))
	copy(nl, l)
	nl[s.id] = s
	t.list.Store(&nl)
}

func (t *segTable) remove(id uint32) *segment {
	t.mu.Lock()
	defer t.mu.Unlock()
	p := t.list.Load()
	if p == nil || int(id) >= len(*p) || (*p)[id] == nil {
		return nil
	}
	nl := slices.Clone(*p)
	s := nl[id]
	nl[id] = nil
	t.list.Store(&nl)
	return s
}

func (t *segTable) all() []*segment {
	p := t.list.Load()
	if p == nil {
		return nil
	}
	var out []*segment
	for _, s := range *p {
		if s != nil {
			out = append(out, s)
		}
	}
	return out
}

// span is a piece of a segment handed out by the allocator.
type span struct {
	seg *segment
	off int
	n   int
}

func (s span) bytes() []byte {
	if s.seg == nil {
		return nil
	}
	return s.seg.mem[s.off : s.off+s.n : s.off+s.n]
}

// addrMap finds which local segment holds an address; lookups are lock-free.
type addrMap struct {
	mu   sync.Mutex
	list atomic.Pointer[[]addrRange]
}

type addrRange struct {
	start, end uintptr
	seg        *segment
}

func (m *addrMap) add(s *segment) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var l []addrRange
	if p := m.list.Load(); p != nil {
		l = slices.Clone(*p)
	}
	l = append(l, addrRange{s.base, s.base + uintptr(len(s.mem)), s})
	sort.Slice(l, func(i, j int) bool { return l[i].start < l[j].start })
	m.list.Store(&l)
}

func (m *addrMap) del(s *segment) {
	m.mu.Lock()
	defer m.mu.Unlock()
	p := m.list.Load()
	if p == nil {
		return
	}
	l := slices.DeleteFunc(slices.Clone(*p), func(r addrRange) bool { return r.seg == s })
	m.list.Store(&l)
}

// find returns the segment and offset of [addr, addr+n).
func (m *addrMap) find(addr uint64, n int) (*segment, int, bool) {
	p := m.list.Load()
	if p == nil {
		return nil, 0, false
	}
	l := *p
	a := uintptr(addr)
	i := sort.Search(len(l), func(i int) bool { return l[i].end > a })
	if i == len(l) || a < l[i].start || n < 0 || uint64(a)+uint64(n) > uint64(l[i].end) {
		return nil, 0, false
	}
	return l[i].seg, int(a - l[i].start), true
}

// arena sub-allocates queue buffers (whole pages) from shared chunks, so a
// process with many QPs does not need a descriptor per queue.
type arena struct {
	mu         sync.Mutex
	chunks     []*chunk
	quarantine []freed
	h          *host
}

// freed is a span waiting out its quarantine: a peer process that checked
// the owning object just before it was destroyed may still be writing to
// it, so it is not handed out again at once.
type freed struct {
	s  span
	at time.Time
}

const quarantine = 2 * time.Second

type chunk struct {
	seg  *segment
	free []extent // sorted by offset
}

type extent struct{ off, n int }

const arenaChunk = 8 << 20

func (a *arena) alloc(n int) (span, error) {
	n = (n + pageSize - 1) &^ (pageSize - 1)
	a.mu.Lock()
	defer a.mu.Unlock()
	a.reclaim(false)
	if n > arenaChunk/2 {
		seg, err := a.h.newSegment(n)
		if err != nil {
			return span{}, err
		}
		return span{seg: seg, off: 0, n: n}, nil
	}
	for _, c := range a.chunks {
		for i, e := range c.free {
			if e.n >= n {
				if e.n == n {
					c.free = slices.Delete(c.free, i, i+1)
				} else {
					c.free[i] = extent{e.off + n, e.n - n}
				}
				s := span{seg: c.seg, off: e.off, n: n}
				clear(s.bytes())
				return s, nil
			}
		}
	}
	seg, err := a.h.newSegment(arenaChunk)
	if err != nil {
		return span{}, err
	}
	c := &chunk{seg: seg, free: []extent{{n, arenaChunk - n}}}
	a.chunks = append(a.chunks, c)
	return span{seg: seg, off: 0, n: n}, nil
}

// free returns a span. It is reused only after its quarantine.
func (a *arena) free(s span) {
	if s.seg == nil {
		return
	}
	a.mu.Lock()
	a.quarantine = append(a.quarantine, freed{s, time.Now()})
	a.mu.Unlock()
}

// reclaim returns spans whose quarantine is over (all of them with all) to
// the free lists. a.mu is held.
func (a *arena) reclaim(all bool) {
	now := time.Now()
	keep := a.quarantine[:0]
	for _, f := range a.quarantine {
		if !all && now.Sub(f.at) < quarantine {
			keep = append(keep, f)
			continue
		}
		a.put(f.s)
	}
	clear(a.quarantine[len(keep):])
	a.quarantine = keep
}

func (a *arena) put(s span) {
	for _, c := range a.chunks {
		if c.seg != s.seg {
			continue
		}
		c.free = append(c.free, extent{s.off, s.n})
		sort.Slice(c.free, func(i, j int) bool { return c.free[i].off < c.free[j].off })
		merged := c.free[:1]
		for _, e := range c.free[1:] {
			last := &merged[len(merged)-1]
			if last.off+last.n == e.off {
				last.n += e.n
			} else {
				merged = append(merged, e)
			}
		}
		c.free = merged
		return
	}
	// A dedicated segment.
	a.h.dropSegment(s.seg)
}

func (a *arena) release() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.reclaim(true)
	for _, c := range a.chunks {
		a.h.dropSegment(c.seg)
	}
	a.chunks = nil
}
