package roce

import (
	"strconv"
	"testing"
)

func BenchmarkICRC(b *testing.B) {
	for _, n := range []int{64, 1024, 4096} {
		s := sample(RCWriteOnly)
		pkt := build(flow4, &s, make([]byte, n))
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			b.SetBytes(int64(n))
			b.ReportAllocs()
			var sink uint32
			for b.Loop() {
				sink += ICRC(flow4, pkt)
			}
			_ = sink
		})
	}
}

func BenchmarkCheckICRCAnyID(b *testing.B) {
	s := sample(RCWriteOnly)
	pkt := build(flow4, &s, make([]byte, 1024))
	b.SetBytes(1024)
	b.ReportAllocs()
	for b.Loop() {
		if _, ok := CheckICRCAnyID(flow4, pkt); !ok {
			b.Fatal("ICRC does not check")
		}
	}
}

func BenchmarkParse(b *testing.B) {
	s := sample(RCWriteOnlyImm)
	pkt := build(flow4, &s, make([]byte, 1024))
	var p Packet
	b.ReportAllocs()
	for b.Loop() {
		if err := Parse(pkt, &p); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkEncode(b *testing.B) {
	s := sample(RCWriteOnlyImm)
	buf := make([]byte, 64)
	b.ReportAllocs()
	for b.Loop() {
		Encode(buf, &s, 1024)
	}
}

// BenchmarkFlowSum is BenchmarkICRC with the flow's part computed once.
func BenchmarkFlowSum(b *testing.B) {
	for _, n := range []int{64, 1024, 4096} {
		s := sample(RCWriteOnly)
		pkt := build(flow4, &s, make([]byte, n))
		fs := NewFlowSum(flow4)
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			b.SetBytes(int64(n))
			b.ReportAllocs()
			var sink uint32
			for b.Loop() {
				sink += fs.ICRC(0, pkt)
			}
			_ = sink
		})
	}
}
