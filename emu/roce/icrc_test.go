package roce

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"hash/crc32"
	"math/rand/v2"
	"net/netip"
	"testing"
)

func unhex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestSeed checks the seed rxe_icrc.c starts from: the CRC register after
// eight 0xFF bytes (the masked pseudo-LRH) from the initial all-ones
// register is 0xDEBB20E3; zlib and hash/crc32 return its complement,
// zlib.crc32(b'\xff'*8) == 0x2144DF1C in Python.
func TestSeed(t *testing.T) {
	ff := bytes.Repeat([]byte{0xFF}, 8)
	if got := crc32.ChecksumIEEE(ff); got != 0x2144DF1C {
		t.Errorf("crc32.ChecksumIEEE(8×0xFF) = %#x, want 0x2144df1c", got)
	}
	if got := update(0xFFFFFFFF, ff); got != seedRegister {
		t.Errorf("register after 8×0xFF = %#x, want %#x", got, uint32(seedRegister))
	}
	// The table-driven register update agrees with hash/crc32.
	rng := rand.New(rand.NewPCG(1, 2))
	for n := range 100 {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		if got, want := ^update(0xFFFFFFFF, b), crc32.ChecksumIEEE(b); got != want {
			t.Errorf("%d bytes: %#x, want %#x", n, got, want)
		}
	}
}

// The vectors below were computed by an independent oracle: a short
// Python script (not kept) that builds each packet with struct.pack and
// computes zlib.crc32 over 8×0xFF, the masked IPv4 header (0x45, TOS 0xFF,
// total length, ID 0, DF, TTL 0xFF, protocol 17, checksum 0xFFFF, addresses)
// or IPv6 header (0x6FFFFFFF, payload length, 17, hop limit 0xFF,
// addresses), the UDP header with checksum 0xFFFF, the BTH with byte 4 set
// to 0xFF and the rest of the packet up to the ICRC; the ICRC is that value
// stored little-endian. Its results for the two scapy packets below agree
// with scapy and the captured ConnectX-4 Lx CNP.
var vectors = []struct {
	name    string
	flow    Flow
	pkt     Packet
	payload string
	hex     string
	icrc    uint32
}{
	{
		name: "IPv4 RC SEND_ONLY",
		flow: Flow{Src: netip.MustParseAddr("192.168.100.1"), Dst: netip.MustParseAddr("192.168.100.2"), SrcPort: 0xC123},
		pkt:  Packet{Opcode: RCSendOnly, SE: true, PKey: 0xFFFF, DestQPN: 0x11, AckReq: true, PSN: 0x123456},
		// payload "hello", pad 3
		payload: "hello",
		hex:     "04b0ffff000000118012345668656c6c6f0000007220368b",
		icrc:    0x8b362072,
	},
	{
		name: "IPv4 RC WRITE_ONLY",
		flow: Flow{Src: netip.MustParseAddr("10.0.0.1"), Dst: netip.MustParseAddr("10.0.0.2"), SrcPort: 0xC0A3},
		pkt: Packet{Opcode: RCWriteOnly, PKey: 0xFFFF, DestQPN: 0xA3, AckReq: true, PSN: 0xFFFFFE,
			VA: 0x00007F0012345678, RKey: 0x1234, DMALen: 16},
		payload: "\x00\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a\x0b\x0c\x0d\x0e\x0f",
		hex: "0a00ffff000000a380fffffe00007f00123456780000123400000010" +
			"000102030405060708090a0b0c0d0e0f182ddb34",
		icrc: 0x34db2d18,
	},
	{
		name: "IPv6 UD SEND_ONLY",
		flow: Flow{Src: netip.MustParseAddr("fd00::1"), Dst: netip.MustParseAddr("fd00::2"), SrcPort: 0xC0DE},
		pkt: Packet{Opcode: UDSendOnly, PKey: 0xFFFF, DestQPN: 1, PSN: 7,
			QKey: GSIQKey, SrcQPN: 1},
		payload: "abcdefg",
		hex:     "6410ffff0000000100000007800100000000000161626364656667000cd2247f",
		icrc:    0x7f24d20c,
	},
	{
		name: "IPv4 RC ACK",
		flow: Flow{Src: netip.MustParseAddr("192.168.100.2"), Dst: netip.MustParseAddr("192.168.100.1"), SrcPort: 0xC001},
		pkt:  Packet{Opcode: RCAck, PKey: 0xFFFF, DestQPN: 0x12, PSN: 0x123456, Syndrome: SynACK, MSN: 0x42},
		hex:  "1100ffff00000012001234561f0000421c738c2f",
		icrc: 0x2f8c731c,
	},
	{
		// The UC SEND_ONLY example of scapy's test/contrib/roce.uts
		// (secdev/scapy), IPv4 ID 1144, M set, 18 bytes of payload and 2
		// of pad; the test asserts icrc == 0x78f353f3, the wire bytes
		// read big-endian.
		name:    "scapy UC SEND_ONLY",
		flow:    Flow{Src: netip.MustParseAddr("192.168.0.7"), Dst: netip.MustParseAddr("192.168.0.7"), SrcPort: 49152, ID: 1144},
		pkt:     Packet{Opcode: UCSendOnly, M: true, PKey: 0xFFFF, DestQPN: 211, PSN: 13571856},
		payload: "F0\x81\x8b\xe2\x895\xd9\x0e\x9a\x95PT\x01\xbe\x88^P",
		hex: "2460ffff000000d300cf1710" +
			"4630818be28935d90e9a95505401be885e500000" + "78f353f3",
		icrc: 0xf353f378,
	},
	{
		// A CNP captured on a ConnectX-4 Lx, from scapy's
		// test/contrib/roce.uts: 10.0.17.1:0 -> 10.0.18.1:4791, IPv4 ID
		// 0x718c, TOS 0xc2 and TTL 64 (both masked), BECN, QPN 0x118,
		// 16 reserved bytes. The ICRC is the one the NIC put on the wire.
		name:    "captured ConnectX-4 Lx CNP",
		flow:    Flow{Src: netip.MustParseAddr("10.0.17.1"), Dst: netip.MustParseAddr("10.0.18.1"), SrcPort: 0, ID: 0x718c},
		pkt:     Packet{Opcode: CNP, PKey: 0xFFFF, BECN: true, DestQPN: 0x118},
		payload: "\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00",
		hex:     "8100ffff40000118000000000000000000000000000000000000000082fd002a",
		icrc:    0x2a00fd82,
	},
}

// TestVectors checks the vectors with the CRC of the packet's bulk
// computed both ways: by hash/crc32 and by the tables (whichever is
// faster is used).
func TestVectors(t *testing.T) {
	t.Logf("hash/crc32 chosen: %v", useCLMUL)
	orig := useCLMUL
	t.Cleanup(func() { useCLMUL = orig })
	for _, clmul := range []bool{true, false} {
		useCLMUL = clmul
		t.Run(map[bool]string{true: "hash_crc32", false: "tables"}[clmul], testVectors)
	}
}

func testVectors(t *testing.T) {
	for _, v := range vectors {
		want := unhex(t, v.hex)
		if got := ICRC(v.flow, want); got != v.icrc {
			t.Errorf("%s: ICRC = %#08x, want %#08x", v.name, got, v.icrc)
		}
		if !CheckICRC(v.flow, want) {
			t.Errorf("%s: CheckICRC false", v.name)
		}
		got := build(v.flow, &v.pkt, []byte(v.payload))
		if !bytes.Equal(got, want) {
			t.Errorf("%s: built\n%x, want\n%x", v.name, got, want)
		}
		var p Packet
		if err := Parse(want, &p); err != nil {
			t.Errorf("%s: Parse: %v", v.name, err)
			continue
		}
		if string(p.Payload) != v.payload {
			t.Errorf("%s: payload %x", v.name, p.Payload)
		}
		id, ok := CheckICRCAnyID(Flow{Src: v.flow.Src, Dst: v.flow.Dst, SrcPort: v.flow.SrcPort}, want)
		if !ok || id != v.flow.ID {
			t.Errorf("%s: CheckICRCAnyID = %#x, %v, want %#x", v.name, id, ok, v.flow.ID)
		}
		if v.flow.ID != 0 && CheckICRC(Flow{Src: v.flow.Src, Dst: v.flow.Dst, SrcPort: v.flow.SrcPort}, want) {
			t.Errorf("%s: ICRC checks with ID 0", v.name)
		}
	}
}

// TestICRCCoverage flips every bit of a packet and of its flow: only the
// BTH's byte 4 (FECN, BECN, reserved) is not covered.
func TestICRCCoverage(t *testing.T) {
	s := sample(RCWriteOnlyImm)
	for _, f := range []Flow{flow4, flow6} {
		b := build(f, &s, []byte("0123456789"))
		for i := range len(b) - 4 {
			for bit := range 8 {
				b[i] ^= 1 << bit
				if got := CheckICRC(f, b); got != (i == 4) {
					t.Errorf("byte %d bit %d flipped: CheckICRC %v", i, bit, got)
				}
				b[i] ^= 1 << bit
			}
		}
		g := f
		g.SrcPort ^= 1
		if CheckICRC(g, b) {
			t.Error("source port not covered")
		}
		g = f
		g.Dst = g.Dst.Next()
		if CheckICRC(g, b) {
			t.Error("destination not covered")
		}
		g = f
		g.ID = 1
		if CheckICRC(g, b) != !g.is4() {
			t.Errorf("ID covered %v for IPv4 %v", !CheckICRC(g, b), g.is4())
		}
	}
	// A 4-in-6 pair is IPv4; a mixed pair is IPv6 with the IPv4 address
	// mapped.
	m := Flow{Src: netip.MustParseAddr("::ffff:192.168.100.1"), Dst: netip.MustParseAddr("::ffff:192.168.100.2"), SrcPort: flow4.SrcPort}
	b := build(flow4, &s, nil)
	if !CheckICRC(m, b) {
		t.Error("4-in-6 flow is not IPv4")
	}
	mixed := Flow{Src: netip.MustParseAddr("fd00::1"), Dst: flow4.Dst, SrcPort: 1}
	mixed6 := Flow{Src: mixed.Src, Dst: m.Dst, SrcPort: 1}
	if ICRC(mixed, b) != ICRC(mixed6, b) {
		t.Error("mixed flow does not map IPv4 into IPv6")
	}
	if CheckICRC(flow4, b[:15]) {
		t.Error("15-byte packet checks")
	}
	if _, ok := CheckICRCAnyID(flow4, b[:15]); ok {
		t.Error("15-byte packet checks with any ID")
	}
}

func TestCheckICRCAnyID(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	s := sample(RCSendOnly)
	for range 2000 {
		n := rng.IntN(9000)
		b := build(flow4, &s, make([]byte, n))
		f := flow4
		f.ID = uint16(rng.Uint32())
		Seal(f, b)
		// The likeliest ID given: 0, a wrong one or the right one.
		guess := flow4
		switch rng.IntN(3) {
		case 1:
			guess.ID = uint16(rng.Uint32())
		case 2:
			guess.ID = f.ID
		}
		id, ok := CheckICRCAnyID(guess, b)
		if !ok || id != f.ID {
			t.Fatalf("%d bytes, ID %#x, guessed %#x: got %#x, %v", n, f.ID, guess.ID, id, ok)
		}
	}
	// IPv6 has no ID.
	b := build(flow6, &s, []byte("x"))
	if id, ok := CheckICRCAnyID(flow6, b); !ok || id != 0 {
		t.Errorf("IPv6: %#x, %v", id, ok)
	}
	b[len(b)-1] ^= 1
	if _, ok := CheckICRCAnyID(flow6, b); ok {
		t.Error("IPv6: corrupted ICRC checks")
	}
	// A corrupted IPv4 packet passes for about one ICRC in 2^16.
	pass := 0
	b = build(flow4, &s, make([]byte, 64))
	for i := range 1 << 16 {
		binary.LittleEndian.PutUint32(b[len(b)-4:], uint32(i)*0x9E3779B1)
		if _, ok := CheckICRCAnyID(flow4, b); ok {
			pass++
		}
	}
	if pass > 8 {
		t.Errorf("%d of 65536 random ICRCs pass", pass)
	}
}

// referenceICRC is the ICRC computed the long way: hash/crc32 over the
// masked LRH, the pseudo IP and UDP headers, the masked BTH and the rest
// of the packet, all laid out in one buffer.
func referenceICRC(f Flow, pkt []byte) uint32 {
	b := bytes.Repeat([]byte{0xFF}, 8)
	n := len(pkt)
	if f.is4() {
		ip := make([]byte, 20)
		ip[0], ip[1] = 0x45, 0xFF
		binary.BigEndian.PutUint16(ip[2:], uint16(28+n))
		binary.BigEndian.PutUint16(ip[4:], f.ID)
		ip[6], ip[8], ip[9], ip[10], ip[11] = 0x40, 0xFF, 17, 0xFF, 0xFF
		s, d := f.Src.Unmap().As4(), f.Dst.Unmap().As4()
		copy(ip[12:], s[:])
		copy(ip[16:], d[:])
		b = append(b, ip...)
	} else {
		ip := make([]byte, 40)
		binary.BigEndian.PutUint32(ip, 0x6FFFFFFF)
		binary.BigEndian.PutUint16(ip[4:], uint16(8+n))
		ip[6], ip[7] = 17, 0xFF
		s, d := f.Src.As16(), f.Dst.As16()
		copy(ip[8:], s[:])
		copy(ip[24:], d[:])
		b = append(b, ip...)
	}
	b = binary.BigEndian.AppendUint16(b, f.SrcPort)
	b = binary.BigEndian.AppendUint16(b, Port)
	b = binary.BigEndian.AppendUint16(b, uint16(8+n))
	b = append(b, 0xFF, 0xFF)
	bth := len(b)
	b = append(b, pkt[:n-icrcLen]...)
	b[bth+4] = 0xFF
	return crc32.ChecksumIEEE(b)
}

// TestFlowSum: the ICRC of a FlowSum, of ICRC and of the long way agree
// for random flows (IPv4, IPv6, mapped), identifications and lengths, with
// hash/crc32 and with the tables, and one FlowSum serves every packet of
// its flow.
func TestFlowSum(t *testing.T) {
	orig := useCLMUL
	t.Cleanup(func() { useCLMUL = orig })
	rng := rand.New(rand.NewPCG(5, 6))
	addr := func() netip.Addr {
		var a [16]byte
		for i := range a {
			a[i] = byte(rng.Uint32())
		}
		switch rng.IntN(3) {
		case 0:
			return netip.AddrFrom4([4]byte(a[:4]))
		case 1:
			return netip.AddrFrom16(netip.AddrFrom4([4]byte(a[:4])).As16()) // mapped
		}
		return netip.AddrFrom16(a)
	}
	for i := range 300 {
		useCLMUL = i%2 == 0
		f := Flow{Src: addr(), Dst: addr(), SrcPort: uint16(rng.Uint32())}
		s := NewFlowSum(f)
		for range 10 {
			pkt := make([]byte, bthLen+icrcLen+rng.IntN(70000))
			for j := range pkt {
				pkt[j] = byte(rng.Uint32())
			}
			f.ID = uint16(rng.Uint32())
			want := referenceICRC(f, pkt)
			if got := s.ICRC(f.ID, pkt); got != want {
				t.Fatalf("%v→%v port %#x ID %#x, %d bytes: FlowSum.ICRC %#08x, want %#08x", f.Src, f.Dst, f.SrcPort, f.ID, len(pkt), got, want)
			}
			if got := ICRC(f, pkt); got != want {
				t.Fatalf("%v→%v, %d bytes: ICRC %#08x, want %#08x", f.Src, f.Dst, len(pkt), got, want)
			}
			s.Seal(f.ID, pkt)
			if id, ok := s.CheckAnyID(0, pkt); !ok || f.is4() && id != f.ID {
				t.Fatalf("%v→%v: CheckAnyID = %#x, %v, want %#x", f.Src, f.Dst, id, ok, f.ID)
			}
		}
	}
}
