//go:build linux

package uverbs

import "testing"

func TestSlab(t *testing.T) {
	if dbRequestSize+8 > rxeDoorbellSize {
		t.Fatalf("a doorbell command and its response (%d bytes) do not fit a piece of %d", dbRequestSize+8, rxeDoorbellSize)
	}
	s := slab{size: rxeDoorbellSize}
	defer func() {
		if err := s.release(); err != nil {
			t.Error(err)
		}
	}()
	per := slabPage / rxeDoorbellSize
	seen := map[*byte]bool{}
	var all [][]byte
	for i := range per + 1 {
		b, err := s.alloc()
		if err != nil {
			t.Fatal(err)
		}
		if len(b) != rxeDoorbellSize || cap(b) != rxeDoorbellSize {
			t.Fatalf("piece %d: len %d cap %d", i, len(b), cap(b))
		}
		if seen[&b[0]] {
			t.Fatalf("piece %d given twice", i)
		}
		seen[&b[0]] = true
		for j := range b {
			b[j] = 0xa5
		}
		all = append(all, b)
	}
	if len(s.pages) != 2 {
		t.Fatalf("%d pieces took %d pages, want 2", per+1, len(s.pages))
	}
	s.put(all[3])
	b, err := s.alloc()
	if err != nil {
		t.Fatal(err)
	}
	if &b[0] != &all[3][0] {
		t.Fatal("a piece given back is not reused")
	}
	for i, v := range b {
		if v != 0 {
			t.Fatalf("reused piece not zeroed at %d", i)
		}
	}
	if len(s.pages) != 2 {
		t.Fatalf("reuse mapped a page: %d pages", len(s.pages))
	}
}
