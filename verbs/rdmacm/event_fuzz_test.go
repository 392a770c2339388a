//go:build linux

package rdmacm

import "testing"

// FuzzDecodeEvent: any bytes the kernel's event file could give decode to
// an event or an error, never a panic, with no more private data than a
// connection carries.
func FuzzDecodeEvent(f *testing.F) {
	f.Add(make([]byte, eventRespSize), uint16(PSTCP))
	f.Add(make([]byte, eventRespSize), uint16(PSUDP))
	full := make([]byte, eventRespSize)
	for i := range full {
		full[i] = 0xff
	}
	f.Add(full, uint16(PSTCP))
	f.Add(full, uint16(PSUDP))
	f.Add(make([]byte, eventRespSize-1), uint16(PSTCP))
	f.Fuzz(func(t *testing.T, b []byte, ps uint16) {
		e, err := decodeEvent(b, ps)
		if err != nil {
			return
		}
		if len(e.Conn.PrivateData) > maxPrivateData || len(e.UD.PrivateData) > maxPrivateData {
			t.Errorf("private data of %d and %d bytes", len(e.Conn.PrivateData), len(e.UD.PrivateData))
		}
	})
}
