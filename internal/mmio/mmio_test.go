package mmio

import (
	"sync"
	"testing"
	"unsafe"
)

func TestStoreLoad(t *testing.T) {
	var w uint32
	Store32(&w, 0xdeadbeef)
	if got := Load32(&w); got != 0xdeadbeef {
		t.Fatalf("Load32 = %#x", got)
	}
}

// TestPublish checks the release/acquire pairing: a consumer that sees the
// published index also sees the data written before it.
func TestPublish(t *testing.T) {
	const n = 200000
	data := make([]uint32, 64)
	var idx uint32
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := uint32(1); i <= n; i++ {
			for Load32(&idx) != i-1 {
			}
			Store32(&data[i%64], i)
			Store32(&idx, i)
		}
	}()
	for i := uint32(1); i <= n; {
		if Load32(&idx) >= i {
			if got := Load32(&data[i%64]); got < i {
				t.Fatalf("index %d published before its data (%d)", i, got)
			}
			i++
		}
	}
	wg.Wait()
}

func BenchmarkStore32(b *testing.B) {
	var w uint32
	for i := 0; b.Loop(); i++ {
		Store32(&w, uint32(i))
	}
}

func TestSpinLock(t *testing.T) {
	var l SpinLock
	var wg sync.WaitGroup
	n := 0
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 10000 {
				l.Lock()
				n++
				l.Unlock()
			}
		}()
	}
	wg.Wait()
	if n != 40000 {
		t.Fatalf("n = %d, want 40000", n)
	}
	if !l.TryLock() || l.TryLock() {
		t.Fatal("TryLock on a free then a held lock")
	}
	l.Unlock()
}

// TestLoadViews: LoadByte and LoadUint64 read memory as bytes laid out
// little-endian, at any byte offset (LoadByte) or an aligned one.
func TestLoadViews(t *testing.T) {
	w := make([]uint64, 2)
	w[1] = 0x0807060504030201
	b := unsafe.Slice((*byte)(unsafe.Pointer(&w[0])), 16)
	if got := LoadUint64(b[8:]); got != 0x0807060504030201 {
		t.Errorf("LoadUint64 = %#x", got)
	}
	for i := range 8 {
		if got := LoadByte(b[8+i:]); got != byte(i+1) {
			t.Errorf("LoadByte at %d = %d", i, got)
		}
	}
}
