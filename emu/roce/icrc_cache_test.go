package roce

import "testing"

// TestXPowInv8Cached: the cached powers equal the computed ones, for
// lengths inside the table (first and second use) and beyond it.
func TestXPowInv8Cached(t *testing.T) {
	for _, n := range []int{0, 1, 18, 1042, 4114, len(xpowInv8Table) - 1, len(xpowInv8Table), 70000} {
		for range 2 {
			if got, want := xpowInv8Cached(n), xpowInv8(n); got != want {
				t.Fatalf("xpowInv8Cached(%d) = %#x, want %#x", n, got, want)
			}
		}
	}
}
