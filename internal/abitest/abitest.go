// Package abitest pins kernel ABI structs in tests: a struct declared
// field by field for encoding/binary (little-endian, no implicit padding)
// must have the kernel's size and field offsets. It is imported by tests
// only.
package abitest

import (
	"encoding/binary"
	"reflect"
	"testing"
)

// Layout returns the encoded size of v and the offset of each named field
// (nested structs as "Outer.Inner"), as encoding/binary lays them out.
func Layout(v any) (int, map[string]int) {
	offs := map[string]int{}
	var walk func(t reflect.Type, base int, prefix string) int
	walk = func(t reflect.Type, base int, prefix string) int {
		off := base
		for i := range t.NumField() {
			f := t.Field(i)
			offs[prefix+f.Name] = off
			if f.Type.Kind() == reflect.Struct {
				walk(f.Type, off, prefix+f.Name+".")
			}
			off += binary.Size(reflect.Zero(f.Type).Interface())
		}
		return off - base
	}
	return walk(reflect.TypeOf(v), 0, ""), offs
}

// Struct is one struct's expected layout: its size and the offsets of
// the fields named (nested ones as "Outer.Inner").
type Struct struct {
	V    any
	Size int
	Offs map[string]int
	// All: the table names every field, nested ones included.
	All bool
}

// Check fails t for each struct of want whose size or field offsets
// differ from the expected ones.
func Check(t testing.TB, want ...Struct) {
	t.Helper()
	for _, c := range want {
		name := reflect.TypeOf(c.V).Name()
		size, offs := Layout(c.V)
		if size != c.Size || binary.Size(c.V) != c.Size {
			t.Errorf("%s: size %d (encoded %d), want %d", name, size, binary.Size(c.V), c.Size)
		}
		for f, w := range c.Offs {
			got, ok := offs[f]
			switch {
			case !ok:
				t.Errorf("%s: no field %s", name, f)
			case got != w:
				t.Errorf("%s.%s at offset %d, want %d", name, f, got, w)
			}
		}
		if c.All && len(offs) != len(c.Offs) {
			t.Errorf("%s has %d fields, the table pins %d", name, len(offs), len(c.Offs))
		}
	}
}
