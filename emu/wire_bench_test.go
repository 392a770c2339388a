//go:build linux

package emu

import (
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/pvperf/pvperf/internal/unix"
)

// blastBatch is one send of udpBlast: bytes bytes cut into datagrams of seg
// bytes (the last possibly shorter); seg 0 sends one datagram.
type blastBatch struct{ seg, bytes int }

// udpBlast sends the batches of pattern, again and again until n bytes
// are sent, from one socket to another on loopback addresses and returns
// the bytes received per second: the path's own limit for those datagrams
// and that batching. A batch of several datagrams leaves in one call (UDP
// segmentation offload) and the receiver reads coalesced datagrams (UDP
// GRO), as the emulator's network port does.
func udpBlast(tb testing.TB, src, dst netip.Addr, pattern []blastBatch, n int) float64 {
	tb.Helper()
	rc, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(dst, 0)))
	if err != nil {
		tb.Fatal(err)
	}
	defer rc.Close()
	_ = rc.SetReadBuffer(4 << 20)
	unix.EnableUDPGRO(rc)
	sc, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(src, 0)))
	if err != nil {
		tb.Fatal(err)
	}
	defer sc.Close()
	to := rc.LocalAddr().(*net.UDPAddr).AddrPort()
	got := make(chan int)
	go func() {
		buf := make([]byte, 1<<16)
		var oob [64]byte
		total := 0
		for {
			_ = rc.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
			k, _, _, _, err := rc.ReadMsgUDPAddrPort(buf, oob[:])
			if err != nil {
				got <- total
				return
			}
			total += k
		}
	}()
	msg := make([]byte, 1<<16)
	var oob [64]byte
	start := time.Now()
	for sent, i := 0, 0; sent < n; i++ {
		b := pattern[i%len(pattern)]
		if b.seg == 0 || b.seg >= b.bytes {
			_, err = sc.WriteToUDPAddrPort(msg[:b.bytes], to)
		} else {
			_, _, err = sc.WriteMsgUDPAddrPort(msg[:b.bytes], unix.PutUDPSegment(oob[:], uint16(b.seg)), to)
		}
		if err != nil {
			tb.Fatal(err)
		}
		sent += b.bytes
	}
	total := <-got
	el := time.Since(start) - 100*time.Millisecond // the receiver's idle timeout
	return float64(total) / el.Seconds()
}

// BenchmarkWireWriteBW: 64 KiB RDMA writes between two emulated devices of
// one process, each with an address of its own on loopback, over RoCE v2
// (UDP) and TCP, against UDP blasts on the same path (udpBlast) of the
// same packets, PMTU 1024 (BTH, 1024 payload bytes, ICRC):
//
//   - of_udp_blast: against the best batching, 60 packets per send;
//   - of_same_batches: against the batching the port achieves for such
//     writes: a send of the first two packets (the first carries a RETH,
//     so the second cannot follow it in a batch of equal datagrams), then
//     one of the other 62 (64 KiB of IP datagram), pkts/batch 32;
//
// each the write bandwidth (payload bytes) against the best of several
// blasts before and after, in the same run. pkts/batch is what the port
// achieved: packets sent per batch, acknowledgements included.
func BenchmarkWireWriteBW(b *testing.B) {
	const size = 65536
	for i, transport := range []string{TransportRoCE, TransportTCP} {
		b.Run(transport+"/size=65536", func(b *testing.B) {
			addrA := netip.AddrFrom4([4]byte{127, 0, 3, byte(2 * i)})
			addrB := addrA.Next()
			ca, cb := openWireDevice(b, addrA, transport), openWireDevice(b, addrB, transport)
			a, t := newEndpoint(b, ca, 1<<20), newEndpoint(b, cb, 1<<20)
			defer a.close()
			defer t.close()
			if err := a.connect(t.info()); err != nil {
				b.Fatal(err)
			}
			if err := t.connect(a.info()); err != nil {
				b.Fatal(err)
			}
			// The path's limit: the best of several blasts before and
			// after, since one blast varies by a factor of two on a
			// busy machine.
			const first, middle = 12 + 16 + 1024 + 4, 12 + 1024 + 4 // BTH, RETH, payload, ICRC
			best := []blastBatch{{middle, 60 * middle}}
			same := []blastBatch{{first, first + middle}, {middle, 62 * middle}}
			var bestBW, sameBW float64
			measure := func() {
				src, dst := addrA.Next().Next().Next(), addrA.Next().Next()
				for range 3 {
					bestBW = max(bestBW, udpBlast(b, src, dst, best, 64<<20)*1024/middle)
					sameBW = max(sameBW, udpBlast(b, src, dst, same, 64<<20)*size/(first+63*middle))
				}
			}
			measure()
			counters := func() map[string]uint64 {
				return ca.(interface{ WireCounters() map[string]uint64 }).WireCounters()
			}
			before := counters()
			b.SetBytes(size)
			b.ResetTimer()
			el := writeLoop(b, a, t.info(), size, b.N, 128, 1)
			b.StopTimer()
			after := counters()
			measure()
			bw := float64(b.N) * size / el.Seconds()
			b.ReportMetric(bw/bestBW, "of_udp_blast")
			b.ReportMetric(bw/sameBW, "of_same_batches")
			if n := after["tx_batches"] - before["tx_batches"]; n > 0 {
				b.ReportMetric(float64(after["tx_packets"]-before["tx_packets"])/float64(n), "pkts/batch")
			}
		})
	}
}
