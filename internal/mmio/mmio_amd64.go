//go:build amd64 && !race

package mmio

import "sync/atomic"

// Store32 stores v at p with release ordering, as one 4-byte MOVL.
//
//go:noescape
func Store32(p *uint32, v uint32)

// Load32 loads p with acquire ordering. On amd64 sync/atomic's load is
// already a plain MOVL, and the compiler inlines it.
func Load32(p *uint32) uint32 { return atomic.LoadUint32(p) }
