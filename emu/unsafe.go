//go:build linux

package emu

import "unsafe"

// addrOf returns the address of the first byte of b.
func addrOf(b []byte) uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(b))) }

// u64At returns the 8-byte word at b[0], which must be 8-byte aligned, for
// atomic operations.
func u64At(b []byte) *uint64 { return (*uint64)(unsafe.Pointer(&b[:8][0])) }
