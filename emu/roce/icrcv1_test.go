package roce

import (
	"encoding/hex"
	"testing"
)

// TestICRCv1Vector: the ICRC of a RoCE v1 SEND_ONLY behind a GRH whose
// traffic class, flow label and hop limit are not zero (they are masked).
// The expected value was computed independently with Python's zlib.crc32
// over 8 bytes 0xFF, the GRH with its first word ORed with 0x0FFFFFFF and
// its hop limit set to 0xFF, the BTH with byte 4 set to 0xFF, and the
// payload.
func TestICRCv1Vector(t *testing.T) {
	grh, _ := hex.DecodeString("6120034500181b40fe800000000000000200000000000001fe800000000000000200000000000002")
	body, _ := hex.DecodeString("0400ffff00001001800000050001020304050607")
	pkt := append(body, 0, 0, 0, 0)
	if got := ICRCv1(grh, pkt); got != 0xf7236906 {
		t.Fatalf("ICRCv1 = %#08x, want 0xf7236906", got)
	}
	SealV1(grh, pkt)
	if !CheckICRCv1(grh, pkt) {
		t.Fatal("a sealed packet fails CheckICRCv1")
	}
	var g2 [GRHLen]byte
	var s, d [16]byte
	copy(s[:], grh[8:24])
	copy(d[:], grh[24:40])
	PutGRH(g2[:], s, d, 0x12, 64, len(pkt))
	if !CheckICRCv1(g2[:], pkt) {
		t.Error("PutGRH's header (flow label 0) changes the ICRC: the flow label is not masked")
	}
	pkt[13] ^= 1
	if CheckICRCv1(grh, pkt) {
		t.Error("a corrupted payload passes")
	}
	if CheckICRCv1(grh, pkt[:10]) {
		t.Error("a truncated packet passes")
	}
}
