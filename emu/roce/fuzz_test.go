package roce

import (
	"bytes"
	"testing"
)

// FuzzParse checks that Parse never panics and that a packet it accepts
// is one Encode writes: re-encoding the parsed Packet gives back the same
// header bytes, except the reserved bits Parse ignores and Encode writes
// as 0 (the 6 bits after FECN and BECN in BTH byte 4, the 7 bits after
// AckReq in BTH byte 8, and the byte before SrcQPN in the DETH). It also
// checks that a packet sealed with an IPv4 ID gives that ID back.
func FuzzParse(f *testing.F) {
	for _, o := range validOpcodes() {
		for _, n := range []int{0, 1, 4, 7} {
			if n > 0 && o.Hdrs()&HdrPayload == 0 {
				continue
			}
			s := sample(o)
			f.Add(build(flow4, &s, bytes.Repeat([]byte{0x5A}, n)), uint16(0))
		}
	}
	for _, v := range vectors {
		f.Add(unhex(f, v.hex), v.flow.ID)
	}
	f.Fuzz(func(t *testing.T, b []byte, id uint16) {
		var p Packet
		if err := Parse(b, &p); err != nil {
			return
		}
		hl := p.Opcode.HeaderLen()
		if got := Len(p.Opcode, len(p.Payload)); got != len(b) {
			t.Fatalf("Len = %d for a %d-byte packet", got, len(b))
		}
		if int(p.Pad) != PadLen(len(p.Payload)) {
			t.Fatalf("pad %d for %d bytes of payload", p.Pad, len(p.Payload))
		}
		if !bytes.Equal(p.Payload, b[hl:hl+len(p.Payload)]) {
			t.Fatal("payload is not the bytes after the headers")
		}
		enc := make([]byte, hl)
		if n := Encode(enc, &p, len(p.Payload)); n != hl {
			t.Fatalf("Encode wrote %d bytes, want %d", n, hl)
		}
		want := bytes.Clone(b[:hl])
		want[4] &^= 0x3F
		want[8] &^= 0x7F
		if p.Opcode.Hdrs()&HdrDETH != 0 {
			want[bthLen+4] = 0
		}
		if !bytes.Equal(enc, want) {
			t.Fatalf("re-encoded\n%x, want\n%x", enc, want)
		}

		pkt := bytes.Clone(b)
		f := flow4
		f.ID = id
		Seal(f, pkt)
		if !CheckICRC(f, pkt) {
			t.Fatal("sealed packet does not check")
		}
		if got, ok := CheckICRCAnyID(flow4, pkt); !ok || got != id {
			t.Fatalf("CheckICRCAnyID = %#x, %v, want %#x", got, ok, id)
		}
	})
}
