package bench

import "testing"

// TestStepAddr: for a sender whose count and address start together,
// stepAddr walks the same addresses as perftest's increase_loc_addr.
func TestStepAddr(t *testing.T) {
	const prim = 0x7f0000001000
	for _, c := range []struct{ step, cycle uint64 }{
		{64, 4096}, {128, 4096}, {192, 4096}, {2048, 4096}, {64, 65536}, {4032, 16384},
	} {
		wrap := c.cycle / c.step * c.step
		a, b := uint64(prim), uint64(prim)
		for cnt := range uint64(10000) {
			a = nextAddr(a, c.step, cnt, prim, c.cycle)
			b = stepAddr(b, c.step, prim, wrap)
			if a != b {
				t.Fatalf("step %d cycle %d, message %d: stepAddr %#x, nextAddr %#x", c.step, c.cycle, cnt, b, a)
			}
			if b < prim || b+c.step > prim+c.cycle {
				t.Fatalf("step %d cycle %d: address %#x leaves the cycle", c.step, c.cycle, b)
			}
		}
	}
}
