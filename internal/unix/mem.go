package unix

import (
	"reflect"
	"unsafe"
)

// StructBytes returns the memory of the value p points to, as bytes, for
// a copy to or from a kernel buffer. p must point to a value without Go
// pointers (numbers, arrays and structs of them); the caller checks that
// its Go layout is the kernel's (package wire does).
func StructBytes(p any) []byte {
	v := reflect.ValueOf(p)
	return unsafe.Slice((*byte)(v.UnsafePointer()), v.Type().Elem().Size())
}
