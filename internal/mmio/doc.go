// Package mmio provides single 32-bit loads and stores for memory shared
// with a device or another process: ring indices, doorbells and lock words.
//
// On amd64 they are plain MOVL instructions in assembly. x86 orders stores
// after earlier stores and loads before later loads (TSO), and the compiler
// cannot move memory accesses across a call into assembly, so Store32 is a
// release store and Load32 an acquire load, without the full fence (XCHG)
// that sync/atomic.StoreUint32 costs. A doorbell to a real device's UAR page
// must be exactly one 4-byte store, which is what Store32 emits.
//
// On other architectures they fall back to sync/atomic.
package mmio

// Under the race detector the atomic fallback is used everywhere, so that
// the detector sees the happens-before edges these accesses create.
