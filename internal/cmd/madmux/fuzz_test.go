package main

import "testing"

// FuzzDecode: any message on QEMU's MAD socket decodes to a request or an
// error, never a panic; a request answered in place keeps its size.
func FuzzDecode(f *testing.F) {
	f.Add(make([]byte, msgSize))
	f.Add(make([]byte, msgSize-1))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		if _, err := decode(b); err != nil {
			return
		}
		reply(b, 0)
		if len(b) != msgSize {
			t.Errorf("reply of %d bytes", len(b))
		}
	})
}
