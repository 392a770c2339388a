package pvrdma

import (
	"unsafe"

	"github.com/pvperf/pvperf/internal/mmio"
)

// Ring is one pvrdma_ring: a producer index (prod_tail) and a consumer
// index (cons_head) of a ring of N slots, N a power of two. Indices live in
// [0, 2N): bit N is a generation bit that tells a full ring from an empty
// one. The producer writes prod_tail and the consumer cons_head; each side
// reads the other's index with an acquire load and publishes its own with a
// release store (package mmio), after the slot contents.
type Ring struct {
	prod *uint32
	cons *uint32
	n    uint32
	mask uint32 // 2N-1
}

// NewRing returns the ring whose 8-byte state starts at b[off], with n
// slots. b must stay mapped while the ring is used; off must be a multiple
// of 4. n must be a power of two.
func NewRing(b []byte, off int, n int) Ring {
	s := b[off : off+RingSize : off+RingSize]
	if uintptr(unsafe.Pointer(&s[0]))%4 != 0 || n <= 0 || n&(n-1) != 0 {
		panic("pvrdma: misaligned ring state or ring size not a power of two")
	}
	return Ring{
		prod: (*uint32)(unsafe.Pointer(&s[0])),
		cons: (*uint32)(unsafe.Pointer(&s[4])),
		n:    uint32(n),
		mask: uint32(2*n - 1),
	}
}

// Len returns the number of slots.
func (r *Ring) Len() int { return int(r.n) }

// Producer returns prod_tail.
func (r *Ring) Producer() uint32 { return mmio.Load32(r.prod) }

// Consumer returns cons_head.
func (r *Ring) Consumer() uint32 { return mmio.Load32(r.cons) }

// SetProducer publishes a new prod_tail.
func (r *Ring) SetProducer(v uint32) { mmio.Store32(r.prod, v) }

// SetConsumer publishes a new cons_head.
func (r *Ring) SetConsumer(v uint32) { mmio.Store32(r.cons, v) }

// Reset sets both indices to 0 (only while no one else uses the ring).
func (r *Ring) Reset() {
	mmio.Store32(r.prod, 0)
	mmio.Store32(r.cons, 0)
}

// Valid reports whether idx is a valid index, i.e. below 2N.
func (r *Ring) Valid(idx uint32) bool { return idx&^r.mask == 0 }

// Next returns the index after idx.
func (r *Ring) Next(idx uint32) uint32 { return (idx + 1) & r.mask }

// Slot returns the slot number of an index.
func (r *Ring) Slot(idx uint32) int { return int(idx & (r.n - 1)) }

// Full reports whether a ring with these indices has no free slot.
func (r *Ring) Full(tail, head uint32) bool { return tail == head^r.n }

// Count returns how many slots are used between head and tail.
func (r *Ring) Count(tail, head uint32) int { return int((tail - head) & r.mask) }
