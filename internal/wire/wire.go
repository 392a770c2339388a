// Package wire encodes and decodes the fixed-layout structs of kernel
// commands as encoding/binary does (little-endian, fields in order, no
// implicit padding), without walking their fields when it need not: on a
// little-endian host, a struct whose Go memory layout is that encoding (no
// padding the compiler adds, no bool) is copied as it lies in memory.
// Command paths (uverbs, rdma_cm) encode and decode a struct or two per
// call; field-by-field encoding costs them more than the system call
// under emulation.
//
// The functions are safe for concurrent use. The layout of each type is
// checked once and remembered.
package wire

import (
	"encoding/binary"
	"errors"
	"reflect"
	"sync"

	"github.com/pvperf/pvperf/internal/unix"
)

// littleEndian tells whether the host is little-endian.
var littleEndian = binary.NativeEndian.Uint16([]byte{1, 0}) == 1

// layouts remembers, by struct type, whether it is copied from memory.
var layouts sync.Map // reflect.Type → bool

// Native tells whether values of type t (a struct) are copied from memory:
// the host is little-endian and t's memory layout is its encoding.
func Native(t reflect.Type) bool {
	if v, ok := layouts.Load(t); ok {
		return v.(bool)
	}
	ok := littleEndian && t.Kind() == reflect.Struct && packed(t) && int(t.Size()) == binary.Size(reflect.Zero(t).Interface())
	layouts.Store(t, ok)
	return ok
}

// packed tells whether every field of t lies where encoding/binary puts it
// and holds no bool.
func packed(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Int8, reflect.Uint8, reflect.Int16, reflect.Uint16, reflect.Int32, reflect.Uint32,
		reflect.Int64, reflect.Uint64, reflect.Float32, reflect.Float64:
		return true
	case reflect.Array:
		e := t.Elem()
		return packed(e) && int(e.Size()) == binary.Size(reflect.Zero(e).Interface())
	case reflect.Struct:
		off := uintptr(0)
		for i := range t.NumField() {
			f := t.Field(i)
			if f.Offset != off || !packed(f.Type) {
				return false
			}
			off += f.Type.Size()
		}
		return off == t.Size()
	}
	return false
}

var errShort = errors.New("wire: buffer too small")

// Encode writes v (a pointer to a struct) into b and returns the number of
// bytes written, as binary.Encode(b, binary.LittleEndian, v) does.
func Encode(b []byte, v any) (int, error) {
	if t := reflect.TypeOf(v); t.Kind() == reflect.Pointer && Native(t.Elem()) {
		src := unix.StructBytes(v)
		if len(b) < len(src) {
			return 0, errShort
		}
		return copy(b, src), nil
	}
	return binary.Encode(b, binary.LittleEndian, v)
}

// Decode reads v (a pointer to a struct) from b and returns the number of
// bytes read, as binary.Decode(b, binary.LittleEndian, v) does.
func Decode(b []byte, v any) (int, error) {
	if t := reflect.TypeOf(v); t.Kind() == reflect.Pointer && Native(t.Elem()) {
		dst := unix.StructBytes(v)
		if len(b) < len(dst) {
			return 0, errShort
		}
		return copy(dst, b), nil
	}
	return binary.Decode(b, binary.LittleEndian, v)
}

// Size is binary.Size(v), without walking a native struct's fields.
func Size(v any) int {
	if t := reflect.TypeOf(v); t.Kind() == reflect.Pointer && Native(t.Elem()) {
		return int(t.Elem().Size())
	}
	return binary.Size(v)
}
