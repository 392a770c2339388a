//go:build linux

package uverbs

import "github.com/pvperf/pvperf/verbs"

// slab hands out small, fixed-size pieces of memory outside the Go heap,
// carved from pages mapped once: a QP's doorbell command (the kernel
// writes its response there) takes one piece instead of a mapping of its
// own. A mapping per QP costs a system call to map, a page fault on the
// first write and an unmap (with its TLB shootdown on every CPU the
// process runs on) at the end: most of what creating a QP costs the
// process on an emulated CPU. The context's mu guards it.
type slab struct {
	size  int      // of a piece
	pages [][]byte // the mappings
	free  [][]byte // the pieces not in use
}

// slabPage is the size of one mapping.
const slabPage = 4096

// alloc returns a zeroed piece.
func (s *slab) alloc() ([]byte, error) {
	if len(s.free) == 0 {
		if s.size <= 0 || s.size > slabPage {
			return nil, verbs.Errorf(verbs.ErrNotSupported, "slab piece of %d bytes", s.size)
		}
		p, err := mmapAnon(slabPage)
		if err != nil {
			return nil, err
		}
		s.pages = append(s.pages, p)
		for off := 0; off+s.size <= len(p); off += s.size {
			s.free = append(s.free, p[off:off+s.size:off+s.size])
		}
	}
	b := s.free[len(s.free)-1]
	s.free = s.free[:len(s.free)-1]
	clear(b)
	return b, nil
}

// put gives a piece back.
func (s *slab) put(b []byte) { s.free = append(s.free, b) }

// release unmaps every page; no piece may be in use.
func (s *slab) release() error {
	var err error
	for _, p := range s.pages {
		if uerr := munmap(p); err == nil {
			err = uerr
		}
	}
	s.pages, s.free = nil, nil
	return err
}
