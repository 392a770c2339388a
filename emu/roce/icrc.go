package roce

import (
	"encoding/binary"
	"hash/crc32"
	"math/bits"
	"net/netip"
	"sync/atomic"
	"time"
)

// Flow is what the ICRC covers of a packet's IP and UDP headers: the
// addresses, the UDP source port (the destination port is always Port) and,
// for IPv4, the Identification field.
type Flow struct {
	Src, Dst netip.Addr
	SrcPort  uint16
	// ID is the IPv4 Identification of the packet, unused for IPv6. It is
	// 0 for packets sent from an unconnected UDP socket with
	// IP_PMTUDISC_DO (DF set and no fragmentation allowed); rdma_rxe
	// sends hashed, non-zero IDs (see CheckICRCAnyID).
	ID uint16
}

// is4 reports whether f's packets travel over IPv4: both addresses are
// IPv4 or IPv4-mapped IPv6 addresses.
func (f *Flow) is4() bool { return f.Src.Unmap().Is4() && f.Dst.Unmap().Is4() }

// The CRC is CRC-32 with the reflected IEEE polynomial, the one of
// Ethernet, zlib and the kernel's crc32_le. Here a "register" is the CRC
// shift register as crc32_le keeps it (no inversion); hash/crc32 keeps the
// complement of the register between calls and returns it.
const (
	poly = crc32.IEEE // 0xEDB88320, x^0 in the top bit
	// seedRegister is the register after the masked pseudo-LRH, eight
	// 0xFF bytes, from the initial all-ones register; rxe starts from it.
	seedRegister = 0xDEBB20E3
)

// slicing holds the slicing-by-8 tables for the pseudo header. hash/crc32
// is not used for it because the pseudo header lives on the stack and
// crc32.Update lets its argument escape.
var slicing = func() *[8][256]uint32 {
	var t [8][256]uint32
	for i := range 256 {
		r := uint32(i)
		for range 8 {
			if r&1 != 0 {
				r = r>>1 ^ poly
			} else {
				r >>= 1
			}
		}
		t[0][i] = r
	}
	for i := range 256 {
		for k := 1; k < 8; k++ {
			r := t[k-1][i]
			t[k][i] = r>>8 ^ t[0][byte(r)]
		}
	}
	return &t
}()

// useCLMUL tells that hash/crc32, which uses carry-less multiplication
// where the CPU has it, is faster here than the tables: true on hardware;
// under an emulator that interprets those instructions (QEMU's TCG, where
// the guest checks run) the tables are about three times faster. It is
// decided once, by timing both over a packet.
var useCLMUL = func() bool {
	buf := make([]byte, 4096)
	best := func(f func()) time.Duration {
		m := time.Duration(1 << 62)
		for range 5 {
			t := time.Now()
			f()
			m = min(m, time.Since(t))
		}
		return m
	}
	var sink uint32
	clmul := best(func() { sink ^= crc32.Update(sink, crc32.IEEETable, buf) })
	table := best(func() { sink ^= update(sink, buf) })
	return clmul <= table
}()

// body returns the register after r runs over p, the bulk of a packet.
func body(r uint32, p []byte) uint32 {
	if useCLMUL {
		// crc32.Update takes and returns the register's complement.
		return ^crc32.Update(^r, crc32.IEEETable, p)
	}
	return update(r, p)
}

// update runs the register r over p.
func update(r uint32, p []byte) uint32 {
	t := slicing
	for len(p) >= 8 {
		r ^= binary.LittleEndian.Uint32(p)
		r = t[7][byte(r)] ^ t[6][byte(r>>8)] ^ t[5][byte(r>>16)] ^ t[4][r>>24] ^
			t[3][p[4]] ^ t[2][p[5]] ^ t[1][p[6]] ^ t[0][p[7]]
		p = p[8:]
	}
	for _, c := range p {
		r = t[0][byte(r)^c] ^ r>>8
	}
	return r
}

// ICRC returns the invariant CRC of pkt, a whole UDP payload (BTH to ICRC;
// the last 4 bytes, the ICRC itself, are not covered), for a packet sent
// from f.Src:f.SrcPort to f.Dst:Port. The packet travels over IPv4 if both
// addresses are IPv4 (or IPv4-mapped), else over IPv6 with IPv4 addresses
// mapped. The CRC covers, after eight 0xFF bytes standing for the masked
// LRH:
//
//   - the IP header as the kernel builds it, variant fields set to ones.
//     IPv4: 0x45, TOS 0xFF, total length 28+len(pkt), f.ID, flags DF and
//     fragment offset 0 (0x4000), TTL 0xFF, protocol 17, checksum 0xFFFF,
//     source, destination. IPv6: version 6 with traffic class and flow
//     label all ones, payload length 8+len(pkt), next header 17, hop limit
//     0xFF, source, destination;
//   - the UDP header: f.SrcPort, Port, length 8+len(pkt), checksum 0xFFFF;
//   - the BTH with byte 4 (FECN, BECN, reserved bits) set to 0xFF;
//   - the rest of pkt up to the ICRC.
//
// The ICRC is the complement of the CRC register, stored little-endian.
// For many packets of one flow, a FlowSum computes the same for less.
func ICRC(f Flow, pkt []byte) uint32 {
	s := NewFlowSum(f)
	return s.ICRC(f.ID, pkt)
}

// FlowSum is the part of the ICRC that the packets of one flow share: the
// CRC register after the IP and UDP headers of the pseudo header, computed
// with the fields that change from packet to packet (the lengths, and the
// IPv4 identification) set to zero. The CRC is linear, so those fields
// are added by table lookups, and a packet's ICRC costs little more than
// its BTH and payload. A FlowSum is a value; copy it freely.
type FlowSum struct {
	base uint32 // the register after the IP and UDP headers, variant fields zero
	v4   bool
}

// Where the fields that vary from packet to packet sit in the IP and UDP
// headers of the pseudo header: IPv4's total length, identification and
// UDP length; IPv6's payload length and UDP length (always equal).
const (
	ip4Len   = 20 + 8 // IPv4 and UDP headers
	ip6Len   = 40 + 8
	offLen4  = 2
	offID4   = 4
	offUDP4  = 20 + 4
	offLen6  = 4
	offUDP6  = 40 + 4
	tabLen4  = 0 // rows of fieldTab4: high and low byte of each field
	tabID4   = 2
	tabUDP4  = 4
	tabBoth6 = 0 // rows of fieldTab6: both lengths of IPv6, one value
)

// fieldTab4[r][v] is what byte value v, at the place of row r's byte in the
// IPv4 and UDP headers, adds to the register after them (from a zero
// register); fieldTab6 likewise for IPv6, each row adding the byte at both
// length fields.
var fieldTab4, fieldTab6 = func() (t4 [6][256]uint32, t6 [2][256]uint32) {
	at := func(n, off, v int) uint32 {
		var b [ip6Len]byte
		b[off] = byte(v)
		return update(0, b[off:n])
	}
	for v := range 256 {
		for i, off := range [3]int{offLen4, offID4, offUDP4} {
			t4[2*i][v] = at(ip4Len, off, v)
			t4[2*i+1][v] = at(ip4Len, off+1, v)
		}
		t6[0][v] = at(ip6Len, offLen6, v) ^ at(ip6Len, offUDP6, v)
		t6[1][v] = at(ip6Len, offLen6+1, v) ^ at(ip6Len, offUDP6+1, v)
	}
	return t4, t6
}()

// NewFlowSum returns the FlowSum of f's packets; f.ID does not matter.
func NewFlowSum(f Flow) FlowSum {
	var ps [ip6Len]byte
	if f.is4() {
		s, d := f.Src.Unmap().As4(), f.Dst.Unmap().As4()
		ps[0] = 0x45
		ps[1] = 0xFF
		ps[6] = 0x40
		ps[8] = 0xFF
		ps[9] = 17
		ps[10], ps[11] = 0xFF, 0xFF
		copy(ps[12:16], s[:])
		copy(ps[16:20], d[:])
		putUDP(ps[20:28], f.SrcPort)
		return FlowSum{base: update(seedRegister, ps[:ip4Len]), v4: true}
	}
	s, d := f.Src.As16(), f.Dst.As16()
	binary.BigEndian.PutUint32(ps[0:], 0x6FFFFFFF)
	ps[6] = 17
	ps[7] = 0xFF
	copy(ps[8:24], s[:])
	copy(ps[24:40], d[:])
	putUDP(ps[40:48], f.SrcPort)
	return FlowSum{base: update(seedRegister, ps[:ip6Len])}
}

// putUDP writes the pseudo header's UDP header, length zero.
func putUDP(b []byte, srcPort uint16) {
	binary.BigEndian.PutUint16(b[0:], srcPort)
	binary.BigEndian.PutUint16(b[2:], Port)
	b[6], b[7] = 0xFF, 0xFF
}

// ICRC returns the ICRC of pkt (see the function ICRC) sent in s's flow
// with IPv4 identification id (unused over IPv6). It panics if pkt is
// shorter than a BTH and an ICRC.
func (s *FlowSum) ICRC(id uint16, pkt []byte) uint32 {
	n := len(pkt)
	_ = pkt[bthLen+icrcLen-1]
	r := s.base
	if s.v4 {
		t := &fieldTab4
		tl, ul := uint16(ip4Len+n), uint16(8+n)
		r ^= t[tabLen4][tl>>8] ^ t[tabLen4+1][byte(tl)] ^
			t[tabID4][id>>8] ^ t[tabID4+1][byte(id)] ^
			t[tabUDP4][ul>>8] ^ t[tabUDP4+1][byte(ul)]
	} else {
		t := &fieldTab6
		ul := uint16(8 + n)
		r ^= t[tabBoth6][ul>>8] ^ t[tabBoth6+1][byte(ul)]
	}
	// The BTH, its byte 4 taken as 0xFF: one step of eight bytes and
	// one of four.
	t := slicing
	r ^= binary.LittleEndian.Uint32(pkt)
	r = t[7][byte(r)] ^ t[6][byte(r>>8)] ^ t[5][byte(r>>16)] ^ t[4][r>>24] ^
		t[3][0xFF] ^ t[2][pkt[5]] ^ t[1][pkt[6]] ^ t[0][pkt[7]]
	r ^= binary.LittleEndian.Uint32(pkt[8:])
	r = t[3][byte(r)] ^ t[2][byte(r>>8)] ^ t[1][byte(r>>16)] ^ t[0][r>>24]
	// The ICRC is the complement of the register.
	return ^body(r, pkt[bthLen:n-icrcLen])
}

// Seal writes pkt's ICRC, sent in s's flow with identification id, into
// its last 4 bytes.
func (s *FlowSum) Seal(id uint16, pkt []byte) {
	binary.LittleEndian.PutUint32(pkt[len(pkt)-icrcLen:], s.ICRC(id, pkt))
}

// Seal computes pkt's ICRC (see ICRC) and writes it, little-endian, into
// the last 4 bytes of pkt.
func Seal(f Flow, pkt []byte) {
	binary.LittleEndian.PutUint32(pkt[len(pkt)-icrcLen:], ICRC(f, pkt))
}

// CheckICRC reports whether the last 4 bytes of pkt hold its ICRC. It
// reports false for a packet shorter than a BTH and an ICRC.
func CheckICRC(f Flow, pkt []byte) bool {
	if len(pkt) < bthLen+icrcLen {
		return false
	}
	return binary.LittleEndian.Uint32(pkt[len(pkt)-icrcLen:]) == ICRC(f, pkt)
}

// CheckICRCAnyID checks the ICRC of a packet received over IPv4 whose IP
// Identification is unknown, as it is to a UDP socket, and returns that
// ID. f.ID is the likeliest ID: a packet that carries it costs one pass
// over the packet, as CheckICRC, and any other costs little more. For IPv6
// it is CheckICRC, with ID 0.
//
// The CRC is linear, so the received ICRC differs from the one computed
// with f.ID by a value that depends only on the two IDs' difference and
// the packet length; CheckICRCAnyID solves for the difference. Each of the
// 2^16 IDs is accepted for one ICRC value, so a corrupted packet passes
// with probability 2^-16 instead of 2^-32.
func CheckICRCAnyID(f Flow, pkt []byte) (id uint16, ok bool) {
	s := NewFlowSum(f)
	return s.CheckAnyID(f.ID, pkt)
}

// CheckAnyID is CheckICRCAnyID for a packet of s's flow whose likeliest
// identification is id.
func (s *FlowSum) CheckAnyID(id uint16, pkt []byte) (uint16, bool) {
	if len(pkt) < bthLen+icrcLen {
		return 0, false
	}
	d := binary.LittleEndian.Uint32(pkt[len(pkt)-icrcLen:]) ^ s.ICRC(id, pkt)
	if !s.v4 {
		return 0, d == 0
	}
	if d == 0 {
		return id, true
	}
	// Undo the zero bytes that follow the ID in the covered data: the
	// rest of the IPv4 header (14 bytes), the UDP header (8) and pkt
	// without its ICRC.
	d = mulmod(d, xpowInv8Cached(len(pkt)+18))
	var delta uint16
	for d != 0 {
		top := 31 - bits.LeadingZeros32(d)
		if idPivot[top] == 0 {
			return 0, false
		}
		d ^= idPivot[top]
		delta ^= idComb[top]
	}
	return id ^ delta, true
}

// mulmod returns a·b modulo the CRC polynomial, both in the reflected
// representation of the register (the coefficient of x^0 in the top bit).
func mulmod(a, b uint32) uint32 {
	var p uint32
	for m := uint32(1) << 31; m != 0; m >>= 1 {
		if a&m != 0 {
			p ^= b
		}
		if b&1 != 0 {
			b = b>>1 ^ poly
		} else {
			b >>= 1
		}
	}
	return p
}

// xinvPow2[k] is x^(-2^k) modulo the polynomial. The polynomial is
// 1 + x·Q(x), so x^-1 is Q, which in the reflected representation is the
// polynomial shifted up by one with x^31 (the bottom bit) set.
var xinvPow2 = func() (t [64]uint32) {
	t[0] = (poly<<1 | 1) & 0xFFFFFFFF
	for k := 1; k < len(t); k++ {
		t[k] = mulmod(t[k-1], t[k-1])
	}
	return t
}()

// xpowInv8 returns x^(-8n): the inverse of running the register over n
// zero bytes.
func xpowInv8(n int) uint32 {
	r := uint32(1) << 31 // 1
	e := uint64(n) * 8
	for k := 0; e != 0; k++ {
		if e&1 != 0 {
			r = mulmod(r, xinvPow2[k])
		}
		e >>= 1
	}
	return r
}

// xpowInv8Table caches xpowInv8(n) for the lengths packets have (a
// handful in a run: the MTU-sized ones and the last of each message),
// filled as they come; 0 is "not yet" (no power of x is 0).
var xpowInv8Table [1 << 14]atomic.Uint32

// xpowInv8Cached is xpowInv8(n), from xpowInv8Table when n fits it.
func xpowInv8Cached(n int) uint32 {
	if n < 0 || n >= len(xpowInv8Table) {
		return xpowInv8(n)
	}
	v := xpowInv8Table[n].Load()
	if v == 0 {
		v = xpowInv8(n)
		xpowInv8Table[n].Store(v)
	}
	return v
}

// idPivot and idComb are the row-reduced contributions of the 16 ID bits to
// the register just after the ID field, started from zero: idPivot[b] has
// its highest set bit at b and is the contribution of the ID bits in
// idComb[b].
var idPivot, idComb = func() (piv [32]uint32, comb [32]uint16) {
	for i := range 16 {
		id := uint16(1) << i
		v := update(0, []byte{byte(id >> 8), byte(id)})
		for v != 0 {
			top := 31 - bits.LeadingZeros32(v)
			if piv[top] == 0 {
				piv[top], comb[top] = v, id
				break
			}
			v ^= piv[top]
			id ^= comb[top]
		}
	}
	return piv, comb
}()

// GRHLen is the length of the global route header that precedes the BTH
// in RoCE v1 (Ethertype 0x8915) frames.
const GRHLen = 40

// EtherTypeRoCEv1 is the Ethertype of RoCE v1 frames.
const EtherTypeRoCEv1 = 0x8915

// PutGRH writes a RoCE v1 global route header into grh (GRHLen bytes) for
// a packet of n bytes (BTH through ICRC) from sgid to dgid: IP version 6,
// traffic class tclass, next header 0x1B (the IB transport), hop limit.
func PutGRH(grh []byte, sgid, dgid [16]byte, tclass uint8, hopLimit uint8, n int) {
	binary.BigEndian.PutUint32(grh[0:], 6<<28|uint32(tclass)<<20)
	binary.BigEndian.PutUint16(grh[4:], uint16(n))
	grh[6] = 0x1B
	grh[7] = hopLimit
	copy(grh[8:24], sgid[:])
	copy(grh[24:40], dgid[:])
}

// ICRCv1 computes the ICRC of a RoCE v1 packet: pkt (BTH through ICRC)
// behind the global route header grh. The CRC covers, as for InfiniBand
// with a GRH: eight bytes 0xFF (the masked LRH), the GRH with its traffic
// class, flow label and hop limit set to ones, the BTH with byte 4 set to
// 0xFF, and the rest of pkt up to the ICRC. It panics if grh is shorter
// than GRHLen or pkt than a BTH and an ICRC.
func ICRCv1(grh, pkt []byte) uint32 {
	var ps [GRHLen + bthLen]byte
	copy(ps[:GRHLen], grh[:GRHLen])
	binary.BigEndian.PutUint32(ps[0:], binary.BigEndian.Uint32(ps[0:])|0x0FFFFFFF)
	ps[7] = 0xFF
	copy(ps[GRHLen:], pkt[:bthLen])
	ps[GRHLen+4] = 0xFF
	r := update(seedRegister, ps[:])
	return ^body(r, pkt[bthLen:len(pkt)-icrcLen])
}

// SealV1 writes the ICRC of a RoCE v1 packet into its last 4 bytes.
func SealV1(grh, pkt []byte) {
	binary.LittleEndian.PutUint32(pkt[len(pkt)-icrcLen:], ICRCv1(grh, pkt))
}

// CheckICRCv1 reports whether a RoCE v1 packet's last 4 bytes hold its
// ICRC; false for a packet shorter than a BTH and an ICRC.
func CheckICRCv1(grh, pkt []byte) bool {
	if len(grh) < GRHLen || len(pkt) < bthLen+icrcLen {
		return false
	}
	return binary.LittleEndian.Uint32(pkt[len(pkt)-icrcLen:]) == ICRCv1(grh, pkt)
}
