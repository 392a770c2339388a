//go:build linux

package emu

import (
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/pvperf/pvperf/internal/unix"
)

// udpBlast sends n UDP datagrams of size bytes from one socket to another
// on loopback addresses and returns the bytes received per second: the
// path's own limit for that packet size and batching. With batch > 1 the
// sender hands the kernel batch datagrams per call (UDP segmentation
// offload) and the receiver reads coalesced datagrams (UDP GRO), as the
// emulator's network port does; with batch 1, one datagram per call.
func udpBlast(tb testing.TB, src, dst netip.Addr, size, n, batch int) float64 {
	tb.Helper()
	rc, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(dst, 0)))
	if err != nil {
		tb.Fatal(err)
	}
	defer rc.Close()
	_ = rc.SetReadBuffer(4 << 20)
	if batch > 1 {
		unix.EnableUDPGRO(rc)
	}
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
	msg := make([]byte, size*batch)
	var oob [64]byte
	start := time.Now()
	for sent := 0; sent < n; sent += batch {
		if batch == 1 {
			_, err = sc.WriteToUDPAddrPort(msg, to)
		} else {
			_, _, err = sc.WriteMsgUDPAddrPort(msg, unix.PutUDPSegment(oob[:], uint16(size)), to)
		}
		if err != nil {
			tb.Fatal(err)
		}
	}
	total := <-got
	el := time.Since(start) - 100*time.Millisecond // the receiver's idle timeout
	return float64(total) / el.Seconds()
}

// BenchmarkWireWriteBW: 64 KiB RDMA writes between two emulated devices of
// one process, each with an address of its own on loopback, over RoCE v2
// (UDP) and TCP; of_udp_blast is the write bandwidth (payload bytes)
// against the best of six udpBlast runs of the same packets (1024-byte
// payload, BTH and ICRC) in batches of 60, as the port sends them, three
// before and three after in the same run.
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
			const pkt = 1024 + 12 + 4
			blast := 0.0
			measure := func() {
				for range 3 {
					blast = max(blast, udpBlast(b, addrA.Next().Next().Next(), addrA.Next().Next(), pkt, 60000, 60)*1024/pkt)
				}
			}
			measure()
			b.SetBytes(size)
			b.ResetTimer()
			el := writeLoop(b, a, t.info(), size, b.N, 128, 1)
			b.StopTimer()
			measure()
			b.ReportMetric(float64(b.N)*size/el.Seconds()/blast, "of_udp_blast")
		})
	}
}
