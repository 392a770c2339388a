//go:build !amd64 || race

package mmio

import "sync/atomic"

// Store32 stores v at p with release ordering.
func Store32(p *uint32, v uint32) { atomic.StoreUint32(p, v) }

// Load32 loads p with acquire ordering.
func Load32(p *uint32) uint32 { return atomic.LoadUint32(p) }
