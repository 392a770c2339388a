package roce

import (
	"bytes"
	"errors"
	"net/netip"
	"reflect"
	"testing"
)

// sample returns a packet of opcode o with every field its headers carry
// set to a distinct value and every other field zero.
func sample(o Opcode) Packet {
	p := Packet{
		Opcode:  o,
		SE:      true,
		M:       true,
		PKey:    DefaultPKey,
		FECN:    true,
		BECN:    true,
		DestQPN: 0xABCDEF,
		AckReq:  true,
		PSN:     0xFEDCBA,
	}
	h := o.Hdrs()
	if h&(HdrRETH|HdrAtomicETH) != 0 {
		p.VA = 0x0123456789ABCDEF
		p.RKey = 0x11223344
	}
	if h&HdrRETH != 0 {
		p.DMALen = 0x55667788
	}
	if h&HdrAtomicETH != 0 {
		p.SwapAdd = 0x8877665544332211
		p.Compare = 0xF0E0D0C0B0A09080
	}
	if h&HdrAETH != 0 {
		p.Syndrome = SynNAKRemOp
		p.MSN = 0x00C0FFEE
	}
	if h&HdrAtomicAck != 0 {
		p.AtomicOrig = 0xDEADBEEFCAFEF00D
	}
	if h&HdrDETH != 0 {
		p.QKey = GSIQKey
		p.SrcQPN = 0x123456
	}
	if h&HdrImm != 0 {
		p.Imm = 0x01020304
	}
	if h&HdrIETH != 0 {
		p.InvRKey = 0x0A0B0C0D
	}
	return p
}

// build encodes p with payload, pads with zeros and seals it for f.
func build(f Flow, p *Packet, payload []byte) []byte {
	b := make([]byte, Len(p.Opcode, len(payload)))
	n := Encode(b, p, len(payload))
	copy(b[n:], payload)
	Seal(f, b)
	return b
}

var (
	flow4 = Flow{
		Src:     netip.MustParseAddr("192.168.100.1"),
		Dst:     netip.MustParseAddr("192.168.100.2"),
		SrcPort: 0xC123,
	}
	flow6 = Flow{
		Src:     netip.MustParseAddr("fd00::1"),
		Dst:     netip.MustParseAddr("fd00::2"),
		SrcPort: 0xC0DE,
	}
)

func validOpcodes() []Opcode {
	var ops []Opcode
	for o := range 256 {
		if Opcode(o).Valid() {
			ops = append(ops, Opcode(o))
		}
	}
	return ops
}

func payloadLens(o Opcode) []int {
	if o.Hdrs()&HdrPayload == 0 {
		return []int{0}
	}
	return []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}
}

func TestOpcodeTable(t *testing.T) {
	ops := validOpcodes()
	// RC 0x00-0x14, 0x16, 0x17; UC 0x20-0x2B; UD 0x64, 0x65; CNP.
	if len(ops) != 23+12+2+1 {
		t.Errorf("%d valid opcodes, want 38", len(ops))
	}
	for _, c := range []struct {
		o    Opcode
		hlen int
		name string
		h    Hdr
	}{
		{RCSendFirst, 12, "RC SEND_FIRST", HdrPayload | HdrFirst | HdrRequest},
		{RCSendLastImm, 16, "RC SEND_LAST_IMM", HdrImm | HdrPayload | HdrLast | HdrRequest},
		{RCWriteFirst, 28, "RC WRITE_FIRST", HdrRETH | HdrPayload | HdrFirst | HdrRequest},
		{RCWriteOnlyImm, 32, "RC WRITE_ONLY_IMM", HdrRETH | HdrImm | HdrPayload | HdrOnly | HdrRequest},
		{RCReadRequest, 28, "RC READ_REQUEST", HdrRETH | HdrOnly | HdrRequest},
		{RCReadRespFirst, 16, "RC READ_RESP_FIRST", HdrAETH | HdrPayload | HdrFirst | HdrResponse},
		{RCReadRespMiddle, 12, "RC READ_RESP_MIDDLE", HdrPayload | HdrMiddle | HdrResponse},
		{RCAck, 16, "RC ACK", HdrAETH | HdrOnly | HdrResponse},
		{RCAtomicAck, 24, "RC ATOMIC_ACK", HdrAETH | HdrAtomicAck | HdrOnly | HdrResponse},
		{RCCompareSwap, 40, "RC COMPARE_SWAP", HdrAtomicETH | HdrOnly | HdrRequest},
		{RCFetchAdd, 40, "RC FETCH_ADD", HdrAtomicETH | HdrOnly | HdrRequest},
		{RCSendOnlyInv, 16, "RC SEND_ONLY_INV", HdrIETH | HdrPayload | HdrOnly | HdrRequest},
		{UCWriteOnlyImm, 32, "UC WRITE_ONLY_IMM", HdrRETH | HdrImm | HdrPayload | HdrOnly | HdrRequest},
		{UDSendOnly, 20, "UD SEND_ONLY", HdrDETH | HdrPayload | HdrOnly | HdrRequest},
		{UDSendOnlyImm, 24, "UD SEND_ONLY_IMM", HdrDETH | HdrImm | HdrPayload | HdrOnly | HdrRequest},
		{CNP, 12, "CNP", HdrPayload | HdrOnly},
		{0x15, 12, "opcode 0x15", 0},
		{0x2C, 12, "opcode 0x2c", 0},
		{0xFF, 12, "opcode 0xff", 0},
	} {
		if got := c.o.HeaderLen(); got != c.hlen {
			t.Errorf("%v.HeaderLen() = %d, want %d", c.o, got, c.hlen)
		}
		if got := c.o.String(); got != c.name {
			t.Errorf("Opcode(%#x).String() = %q, want %q", uint8(c.o), got, c.name)
		}
		if got := c.o.Hdrs(); got != c.h {
			t.Errorf("%v.Hdrs() = %#x, want %#x", c.o, got, c.h)
		}
		if c.o.Valid() != (c.h != 0) {
			t.Errorf("%v.Valid() = %v", c.o, c.o.Valid())
		}
	}
	// UC mirrors RC's SEND and WRITE opcodes.
	for o := RCSendFirst; o <= RCWriteOnlyImm; o++ {
		if o.Hdrs() != (o+0x20).Hdrs() || o.HeaderLen() != (o+0x20).HeaderLen() {
			t.Errorf("%v and %v differ", o, o+0x20)
		}
	}
}

func TestSyndromes(t *testing.T) {
	for _, c := range []struct {
		syn            uint8
		ack, rnr, nakk bool
	}{
		{0x00, true, false, false},
		{SynACK, true, false, false},
		{SynRNR, false, true, false},
		{SynRNR | 0x1F, false, true, false},
		{SynNAKSeq, false, false, true},
		{SynNAKInvReq, false, false, true},
		{SynNAKRemAccess, false, false, true},
		{SynNAKRemOp, false, false, true},
		{SynNAKInvRD, false, false, true},
		{0x40, false, false, false}, // reserved
	} {
		if IsACK(c.syn) != c.ack || IsRNR(c.syn) != c.rnr || IsNAK(c.syn) != c.nakk {
			t.Errorf("syndrome %#x: ACK %v RNR %v NAK %v", c.syn, IsACK(c.syn), IsRNR(c.syn), IsNAK(c.syn))
		}
	}
}

func TestPadLen(t *testing.T) {
	for n, want := range []int{0, 3, 2, 1, 0, 3, 2, 1, 0} {
		if got := PadLen(n); got != want {
			t.Errorf("PadLen(%d) = %d, want %d", n, got, want)
		}
	}
	if got := Len(RCWriteOnly, 5); got != 28+5+3+4 {
		t.Errorf("Len(RCWriteOnly, 5) = %d", got)
	}
}

func TestRoundTrip(t *testing.T) {
	for _, o := range validOpcodes() {
		for _, n := range payloadLens(o) {
			want := sample(o)
			payload := make([]byte, n)
			for i := range payload {
				payload[i] = byte(0xA0 + i)
			}
			b := build(flow4, &want, payload)
			if len(b)%4 != 0 {
				t.Fatalf("%v/%d: length %d not a multiple of 4", o, n, len(b))
			}
			var got Packet
			if err := Parse(b, &got); err != nil {
				t.Fatalf("%v/%d: Parse: %v", o, n, err)
			}
			if !bytes.Equal(got.Payload, payload) {
				t.Errorf("%v/%d: payload %x, want %x", o, n, got.Payload, payload)
			}
			want.Pad = uint8(PadLen(n))
			got.Payload, want.Payload = nil, nil
			if !reflect.DeepEqual(got, want) {
				t.Errorf("%v/%d:\n got %+v\nwant %+v", o, n, got, want)
			}
			if !CheckICRC(flow4, b) {
				t.Errorf("%v/%d: ICRC does not check", o, n)
			}
		}
	}
}

// TestEncodeTruncates checks that 24-bit fields are cut to 24 bits, Pad is
// ignored, and an opcode that is not valid gets a BTH alone.
func TestEncodeTruncates(t *testing.T) {
	p := Packet{Opcode: UDSendOnly, Pad: 3, DestQPN: 0xFF123456, PSN: 0xFF654321, SrcQPN: 0xFF000001, PKey: 0x7FFF}
	var b [64]byte
	n := Encode(b[:], &p, 8)
	want := []byte{0x64, 0x00, 0x7F, 0xFF, 0x00, 0x12, 0x34, 0x56, 0x00, 0x65, 0x43, 0x21, 0, 0, 0, 0, 0x00, 0, 0, 1}
	if !bytes.Equal(b[:n], want) {
		t.Errorf("Encode = %x, want %x", b[:n], want)
	}
	p = Packet{Opcode: 0x15, PSN: 1}
	if n := Encode(b[:], &p, 1); n != 12 || b[1] != 0x30 {
		t.Errorf("Encode of opcode 0x15 = %d bytes, flags %#x", n, b[1])
	}
}

func TestEncodeShortPanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("Encode into a short buffer did not panic")
		}
	}()
	p := sample(RCWriteOnly)
	Encode(make([]byte, 27), &p, 0)
}

func TestParseRejects(t *testing.T) {
	var p Packet
	// Every prefix of every valid packet: shorter than the headers and
	// ICRC it is ErrTruncated; longer, it either fails or parses as a
	// shorter packet whose ICRC does not check.
	for _, o := range validOpcodes() {
		for _, n := range payloadLens(o) {
			s := sample(o)
			b := build(flow4, &s, make([]byte, n))
			for l := range len(b) {
				err := Parse(b[:l], &p)
				if l < o.HeaderLen()+4 {
					if !errors.Is(err, ErrTruncated) {
						t.Errorf("%v/%d: prefix %d: %v, want ErrTruncated", o, n, l, err)
					}
					continue
				}
				if err == nil && CheckICRC(flow4, b[:l]) {
					t.Errorf("%v/%d: prefix %d parses and checks", o, n, l)
				}
			}
		}
	}

	good := build(flow4, &Packet{Opcode: RCSendOnly, PKey: DefaultPKey, DestQPN: 17}, []byte("hello"))
	mod := func(f func(b []byte)) []byte {
		b := bytes.Clone(good)
		f(b)
		return b
	}
	for _, c := range []struct {
		name string
		b    []byte
		err  error
	}{
		{"empty", nil, ErrTruncated},
		{"tver 1", mod(func(b []byte) { b[1] |= 1 }), ErrVersion},
		{"tver 15", mod(func(b []byte) { b[1] |= 0xF }), ErrVersion},
		{"unknown 0x15", mod(func(b []byte) { b[0] = 0x15 }), ErrOpcode},
		{"unknown 0x40 (RD)", mod(func(b []byte) { b[0] = 0x40 }), ErrOpcode},
		{"unknown 0x66", mod(func(b []byte) { b[0] = 0x66 }), ErrOpcode},
		// A BTH and an ICRC, no payload, but PadCnt 3 or 1.
		{"pad > payload", append(mod(func(b []byte) { b[1] = 0x30 })[:12], 0, 0, 0, 0), ErrPad},
		{"pad 3 > 2 bytes", append(mod(func(b []byte) { b[1] = 0x30 })[:12], 0, 0, 0, 0, 0, 0), ErrPad},
		{"pad with no payload", append(mod(func(b []byte) { b[1] = 0x10 })[:12], 0, 0, 0, 0), ErrPad},
		{"not a multiple of 4", append(bytes.Clone(good), 0), ErrLength},
		{"payload on ACK", append(build(flow4, &Packet{Opcode: RCAck}, nil), 0, 0, 0, 0), ErrLength},
		{"payload on READ_REQUEST", append(build(flow4, &Packet{Opcode: RCReadRequest}, nil), 0, 0, 0, 0), ErrLength},
	} {
		p = Packet{PSN: 42}
		err := Parse(c.b, &p)
		if !errors.Is(err, c.err) {
			t.Errorf("%s: Parse = %v, want %v", c.name, err, c.err)
		}
		if !reflect.DeepEqual(p, Packet{PSN: 42}) {
			t.Errorf("%s: Parse wrote %+v", c.name, p)
		}
	}
	// Every opcode Parse does not know is rejected as such.
	for o := range 256 {
		if Opcode(o).Valid() {
			continue
		}
		b := mod(func(b []byte) { b[0] = byte(o) })
		if err := Parse(b, &p); !errors.Is(err, ErrOpcode) {
			t.Errorf("opcode %#x: %v", o, err)
		}
	}
}

func TestParseCNP(t *testing.T) {
	b := build(flow4, &Packet{Opcode: CNP, PKey: DefaultPKey, BECN: true, DestQPN: 0xD2}, make([]byte, 16))
	var p Packet
	if err := Parse(b, &p); err != nil {
		t.Fatal(err)
	}
	if !p.BECN || p.DestQPN != 0xD2 || len(p.Payload) != 16 {
		t.Errorf("CNP parsed as %+v", p)
	}
}

func TestAllocs(t *testing.T) {
	s := sample(UDSendOnlyImm)
	b := build(flow6, &s, make([]byte, 1000))
	bad := bytes.Clone(b)
	bad[1] |= 1
	var p Packet
	hdr := make([]byte, 64)
	var sink uint32
	for _, c := range []struct {
		name string
		f    func()
	}{
		{"Parse", func() { _ = Parse(b, &p) }},
		{"Parse error", func() { _ = Parse(bad, &p) }},
		{"Encode", func() { Encode(hdr, &s, 1000) }},
		{"ICRC v4", func() { sink += ICRC(flow4, b) }},
		{"ICRC v6", func() { sink += ICRC(flow6, b) }},
		{"Seal", func() { Seal(flow6, b) }},
		{"CheckICRC", func() { _ = CheckICRC(flow6, b) }},
		{"CheckICRCAnyID", func() { _, _ = CheckICRCAnyID(flow4, b) }},
	} {
		if n := testing.AllocsPerRun(100, c.f); n != 0 {
			t.Errorf("%s: %v allocations", c.name, n)
		}
	}
	_ = sink
}
