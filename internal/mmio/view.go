package mmio

import (
	"sync/atomic"
	"unsafe"
)

// LoadByte reads b[0] with an atomic load of the aligned 32-bit word that
// holds it: another thread, or the device, writes that memory.
func LoadByte(b []byte) byte {
	p := unsafe.Pointer(&b[0])
	off := uintptr(p) & 3
	w := atomic.LoadUint32((*uint32)(unsafe.Add(p, -int(off))))
	return byte(w >> (8 * off))
}

// Addr is the address of b's first byte, as a device sees it in a work
// request's scatter/gather entry.
func Addr(b []byte) uint64 { return uint64(uintptr(unsafe.Pointer(unsafe.SliceData(b)))) }

// LoadUint64 reads the 8 bytes at the start of b, which must be 8-byte
// aligned, with an atomic load: a device's atomic operation writes them.
func LoadUint64(b []byte) uint64 {
	return atomic.LoadUint64((*uint64)(unsafe.Pointer(&b[:8][0])))
}
