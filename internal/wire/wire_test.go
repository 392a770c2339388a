package wire

import (
	"bytes"
	"encoding/binary"
	"reflect"
	"testing"
)

type inner struct {
	A uint16
	B [3]uint8
	C int8
}

// native: every field where encoding/binary puts it.
type native struct {
	U   uint64
	V   uint32
	W   int32
	In  inner
	Arr [2]inner
	Raw [5]byte
	Pad [1]byte
}

// padded: the compiler aligns V after U, encoding/binary does not.
type padded struct {
	U uint8
	V uint32
}

// withBool: a bool is not copied from memory.
type withBool struct {
	B bool
	X [7]uint8
}

// tail: the compiler pads the end to U's alignment (where it aligns uint64
// to 8).
type tail struct {
	U uint64
	V uint32
}

func TestNative(t *testing.T) {
	for _, c := range []struct {
		v    any
		want bool
	}{
		{native{}, littleEndian},
		{padded{}, false},
		{withBool{}, false},
		{tail{}, littleEndian && reflect.TypeOf(tail{}).Size() == 12}, // 386 aligns uint64 to 4: no tail padding
	} {
		if got := Native(reflect.TypeOf(c.v)); got != c.want {
			t.Errorf("Native(%T) = %v, want %v", c.v, got, c.want)
		}
	}
}

// Encode and Decode give encoding/binary's bytes and values, whichever
// way they take.
func TestSameAsBinary(t *testing.T) {
	vals := []any{
		&native{U: 0x0102030405060708, V: 0xa0b0c0d0, W: -2, In: inner{A: 0x1234, B: [3]uint8{1, 2, 3}, C: -1},
			Arr: [2]inner{{A: 7}, {C: 9}}, Raw: [5]byte{9, 8, 7, 6, 5}, Pad: [1]byte{1}},
		&padded{U: 3, V: 0x01020304},
		&withBool{B: true, X: [7]uint8{1, 2}},
		&tail{U: 1 << 40, V: 5},
	}
	for _, v := range vals {
		want := make([]byte, binary.Size(v))
		if _, err := binary.Encode(want, binary.LittleEndian, v); err != nil {
			t.Fatal(err)
		}
		got := make([]byte, len(want)+8)
		n, err := Encode(got, v)
		if err != nil || n != len(want) || !bytes.Equal(got[:n], want) {
			t.Errorf("Encode(%T) = %d, %v: % x, want % x", v, n, err, got[:n], want)
		}
		if s := Size(v); s != len(want) {
			t.Errorf("Size(%T) = %d, want %d", v, s, len(want))
		}
		back := reflect.New(reflect.TypeOf(v).Elem()).Interface()
		if n, err := Decode(want, back); err != nil || n != len(want) || !reflect.DeepEqual(back, v) {
			t.Errorf("Decode(%T) = %d, %v: %+v, want %+v", v, n, err, back, v)
		}
		if _, err := Encode(got[:len(want)-1], v); err == nil {
			t.Errorf("Encode(%T) into a short buffer: no error", v)
		}
		if _, err := Decode(want[:len(want)-1], back); err == nil {
			t.Errorf("Decode(%T) from a short buffer: no error", v)
		}
	}
}

func TestNoAllocs(t *testing.T) {
	if !littleEndian {
		t.Skip("big-endian host: encoding/binary does the work")
	}
	v := &native{U: 1}
	b := make([]byte, 128)
	if n := testing.AllocsPerRun(100, func() {
		_, _ = Encode(b, v)
		_, _ = Decode(b, v)
	}); n != 0 {
		t.Errorf("%v allocations per Encode and Decode", n)
	}
}

func BenchmarkDecode(b *testing.B) {
	v := &native{}
	buf := make([]byte, 128)
	b.Run("wire", func(b *testing.B) {
		for b.Loop() {
			_, _ = Decode(buf, v)
		}
	})
	b.Run("binary", func(b *testing.B) {
		for b.Loop() {
			_, _ = binary.Decode(buf, binary.LittleEndian, v)
		}
	})
}
