//go:build linux

package emu

import (
	"bytes"
	"encoding/binary"
	"net"
	"net/netip"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pvperf/pvperf/emu/roce"
	"github.com/pvperf/pvperf/verbs"
	"github.com/pvperf/pvperf/verbs/verbstest"
)

// wireFixture is an RC QP on a device with a network port, connected to a
// peer QP on a second device, with a memory region that covers only the
// middle of its memory: the bytes around it are guards no packet may
// touch.
type wireFixture struct {
	a, b       *endpoint
	port       *wirePort
	addrA      netip.Addr
	addrB      netip.Addr
	mrOff      int // the region: mem[mrOff : mrOff+mrLen]
	mrLen      int
	guardBytes byte
}

func newWireFixture(tb testing.TB, base byte) *wireFixture {
	tb.Helper()
	// Addresses of this process alone: fuzzing runs several processes.
	pid := os.Getpid()
	addr := netip.AddrFrom4([4]byte{127, byte(8 + pid>>16&0x3F), byte(pid >> 8), byte(pid&0x7F)<<1 | base&1})
	if base != 0 {
		addr = netip.AddrFrom4([4]byte{127, 0, 5, base})
	}
	f := &wireFixture{addrA: addr, mrOff: 4096, mrLen: 8192, guardBytes: 0xA5}
	f.addrB = f.addrA.Next()
	ca, cb := openWireDevice(tb, f.addrA, TransportRoCE), openWireDevice(tb, f.addrB, TransportRoCE)
	f.a, f.b = newEndpoint(tb, ca, 16384), newEndpoint(tb, cb, 16384)
	tb.Cleanup(f.b.close)
	tb.Cleanup(f.a.close)
	// Replace a's region with one over the middle of its memory.
	if err := f.a.mr.Close(); err != nil {
		tb.Fatal(err)
	}
	mr, err := f.a.pd.RegMR(f.a.mem.Bytes()[f.mrOff:f.mrOff+f.mrLen], verbs.AccessLocalWrite|verbs.AccessRemoteWrite|verbs.AccessRemoteRead|verbs.AccessRemoteAtomic)
	if err != nil {
		tb.Fatal(err)
	}
	f.a.mr = mr
	if err := f.a.connect(f.b.info()); err != nil {
		tb.Fatal(err)
	}
	if err := f.b.connect(f.a.info()); err != nil {
		tb.Fatal(err)
	}
	f.port = ca.(*devContext).wire
	mem := f.a.mem.Bytes()
	for i := range mem {
		mem[i] = f.guardBytes
	}
	return f
}

// guardsIntact reports whether the bytes outside the region are unchanged.
func (f *wireFixture) guardsIntact() bool {
	mem := f.a.mem.Bytes()
	for _, g := range [][]byte{mem[:f.mrOff], mem[f.mrOff+f.mrLen:]} {
		for _, c := range g {
			if c != f.guardBytes {
				return false
			}
		}
	}
	return true
}

// packet builds a sealed packet from b's address to a's QP.
func (f *wireFixture) packet(p *roce.Packet, payload []byte) []byte {
	buf := make([]byte, roce.Len(p.Opcode, len(payload)))
	hl := roce.Encode(buf, p, len(payload))
	copy(buf[hl:], payload)
	roce.Seal(roce.Flow{Src: f.addrB, Dst: f.addrA, SrcPort: roce.Port}, buf)
	return buf
}

func (f *wireFixture) drops() map[string]uint64 { return f.port.counters() }

// openWireDevice opens an emulated device (RoCE v2, MTU 1024) with address
// a on transport, closed when tb's test or benchmark run ends.
func openWireDevice(tb testing.TB, a netip.Addr, transport string) verbs.Context {
	tb.Helper()
	d, err := NewDevice("emu0", Config{Profile: ProfileUnrestricted, RoCE: 2, MTU: verbs.MTU1024, Addr: a, Transport: transport})
	if err != nil {
		tb.Fatal(err)
	}
	ctx, err := d.Open()
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { ctx.Close() })
	return ctx
}

// TestWireUntrusted: packets from the network that are malformed, have a
// wrong ICRC or P_Key, name no QP, come from the wrong address, or ask for
// memory outside a region are dropped or NAKed and counted; none writes a
// byte outside the registered region.
func TestWireUntrusted(t *testing.T) {
	f := newWireFixture(t, 10)
	qpn := f.a.qp.Num()
	write := func(va uint64, n int) *roce.Packet {
		return &roce.Packet{Opcode: roce.RCWriteOnly, PKey: roce.DefaultPKey, DestQPN: qpn, PSN: benchPSN,
			VA: va, RKey: f.a.mr.RKey(), DMALen: uint32(n), AckReq: true}
	}
	good := f.packet(write(f.a.mr.Addr(), 16), bytes.Repeat([]byte{1}, 16))
	cases := []struct {
		name string
		pkt  []byte
		src  netip.Addr
		drop string
	}{
		{"truncated", good[:7], f.addrB, "drop_malformed"},
		{"garbage opcode", append([]byte{0xE7}, good[1:]...), f.addrB, "drop_malformed"},
		{"icrc", func() []byte { b := bytes.Clone(good); b[len(b)-1] ^= 1; return b }(), f.addrB, "drop_icrc"},
		{"payload bit flip", func() []byte { b := bytes.Clone(good); b[30] ^= 4; return b }(), f.addrB, "drop_icrc"},
		{"pkey", f.packet(&roce.Packet{Opcode: roce.RCWriteOnly, PKey: 0x1234, DestQPN: qpn, PSN: benchPSN, VA: f.a.mr.Addr(), RKey: f.a.mr.RKey(), DMALen: 4}, []byte{1, 2, 3, 4}), f.addrB, "drop_pkey"},
		{"unknown qpn", f.packet(&roce.Packet{Opcode: roce.RCWriteOnly, PKey: roce.DefaultPKey, DestQPN: 0xABCDE, PSN: benchPSN, VA: f.a.mr.Addr(), RKey: f.a.mr.RKey(), DMALen: 4}, []byte{1, 2, 3, 4}), f.addrB, "drop_unknown_qpn"},
		{"wrong source", func() []byte {
			b := bytes.Clone(good)
			roce.Seal(roce.Flow{Src: f.addrB.Next(), Dst: f.addrA, SrcPort: roce.Port}, b)
			return b
		}(), f.addrB.Next(), "drop_wrong_source"},
		{"psn ahead", f.packet(&roce.Packet{Opcode: roce.RCWriteOnly, PKey: roce.DefaultPKey, DestQPN: qpn, PSN: benchPSN + 5, VA: f.a.mr.Addr(), RKey: f.a.mr.RKey(), DMALen: 4}, []byte{1, 2, 3, 4}), f.addrB, "drop_out_of_sequence"},
	}
	for _, c := range cases {
		before := f.drops()[c.drop]
		f.port.input(c.src, roce.Port, c.pkt, 0, &flowCache{})
		if got := f.drops()[c.drop]; got != before+1 {
			t.Errorf("%s: %s went from %d to %d, want one more", c.name, c.drop, before, got)
		}
		if !f.guardsIntact() {
			t.Fatalf("%s: bytes outside the region changed", c.name)
		}
		mem := f.a.mem.Bytes()[f.mrOff : f.mrOff+16]
		if mem[0] != f.guardBytes {
			t.Fatalf("%s: the region was written", c.name)
		}
	}
	// A write that ends past the region: NAK remote access, nothing
	// written, the responder in the error state with QP_ACCESS_ERR.
	before := f.drops()["drop_naked"]
	f.port.input(f.addrB, roce.Port, f.packet(write(f.a.mr.Addr()+uint64(f.mrLen)-8, 16), bytes.Repeat([]byte{7}, 16)), 0, &flowCache{})
	if got := f.drops()["drop_naked"]; got != before+1 {
		t.Errorf("out-of-bounds write: drop_naked %d, want %d", got, before+1)
	}
	if !f.guardsIntact() || f.a.mem.Bytes()[f.mrOff+f.mrLen-8] != f.guardBytes {
		t.Fatal("an out-of-bounds write changed memory")
	}
	deadline := time.Now().Add(2 * time.Second)
	for {
		a, err := f.a.qp.Query()
		if err != nil {
			t.Fatal(err)
		}
		if a.State == verbs.StateErr {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("responder in %v after an out-of-bounds write, want ERR", a.State)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestWireGoodWrite: the well-formed packet of TestWireUntrusted lands.
func TestWireGoodWrite(t *testing.T) {
	f := newWireFixture(t, 20)
	p := &roce.Packet{Opcode: roce.RCWriteOnly, PKey: roce.DefaultPKey, DestQPN: f.a.qp.Num(), PSN: benchPSN,
		VA: f.a.mr.Addr() + 100, RKey: f.a.mr.RKey(), DMALen: 16, AckReq: true}
	f.port.input(f.addrB, roce.Port, f.packet(p, bytes.Repeat([]byte{9}, 16)), 0, &flowCache{})
	got := f.a.mem.Bytes()[f.mrOff+100 : f.mrOff+116]
	if !bytes.Equal(got, bytes.Repeat([]byte{9}, 16)) || !f.guardsIntact() {
		t.Fatalf("region bytes %x, guards intact %v", got, f.guardsIntact())
	}
}

// FuzzWireInput feeds arbitrary packets, sealed with a valid ICRC and
// aimed at a live RC QP from its peer's address, to the device: nothing
// panics and no byte outside the registered region changes.
func FuzzWireInput(f *testing.F) {
	fx := newWireFixture(f, 0)
	qpn := fx.a.qp.Num()
	seed := func(p *roce.Packet, payload []byte) {
		f.Add(fx.packet(p, payload))
	}
	mr := fx.a.mr
	seed(&roce.Packet{Opcode: roce.RCWriteOnly, PKey: roce.DefaultPKey, DestQPN: qpn, PSN: benchPSN, VA: mr.Addr(), RKey: mr.RKey(), DMALen: 8}, make([]byte, 8))
	seed(&roce.Packet{Opcode: roce.RCWriteFirst, PKey: roce.DefaultPKey, DestQPN: qpn, PSN: benchPSN, VA: mr.Addr() + 8000, RKey: mr.RKey(), DMALen: 4096}, make([]byte, 1024))
	seed(&roce.Packet{Opcode: roce.RCReadRequest, PKey: roce.DefaultPKey, DestQPN: qpn, PSN: benchPSN, VA: mr.Addr(), RKey: mr.RKey(), DMALen: 3000}, nil)
	seed(&roce.Packet{Opcode: roce.RCFetchAdd, PKey: roce.DefaultPKey, DestQPN: qpn, PSN: benchPSN, VA: mr.Addr() + 8, RKey: mr.RKey(), SwapAdd: 1}, nil)
	seed(&roce.Packet{Opcode: roce.RCSendOnly, PKey: roce.DefaultPKey, DestQPN: qpn, PSN: benchPSN}, make([]byte, 100))
	seed(&roce.Packet{Opcode: roce.RCAck, PKey: roce.DefaultPKey, DestQPN: qpn, PSN: benchPSN, Syndrome: roce.SynNAKSeq}, nil)
	seed(&roce.Packet{Opcode: roce.RCReadRespOnly, PKey: roce.DefaultPKey, DestQPN: qpn, PSN: benchPSN}, make([]byte, 64))
	f.Fuzz(func(t *testing.T, pkt []byte) {
		pkt = bytes.Clone(pkt)
		if len(pkt) >= 12 {
			// Aim at the QP, so the fuzzer explores its states.
			binary.BigEndian.PutUint32(pkt[8:], uint32(pkt[8])<<24|qpn)
		}
		if len(pkt) >= 16 { // a BTH and an ICRC
			roce.Seal(roce.Flow{Src: fx.addrB, Dst: fx.addrA, SrcPort: roce.Port}, pkt)
		}
		fx.port.input(fx.addrB, roce.Port, pkt, 0, &flowCache{})
		if !fx.guardsIntact() {
			t.Fatalf("packet %x changed bytes outside the registered region", pkt)
		}
	})
}

// TestWireFaults: RC transfers over a lossy, duplicating and reordering
// path complete, with every byte right.
func TestWireFaults(t *testing.T) {
	kinds := []struct {
		name string
		fate int
	}{{"loss", 1}, {"duplicate", 2}, {"reorder", 3}}
	for i, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			f := newWireFixture(t, byte(40+2*i))
			every := func(period int) func() int {
				n := 0
				return func() int {
					n++
					if n%period == 0 {
						return k.fate
					}
					return 0
				}
			}
			fa, fb := every(50), every(13)
			f.port.faults.Store(&fa)
			f.b.ctx.(*devContext).wire.faults.Store(&fb)
			runWireOps(t, f)
			a, b := f.port.counters(), f.b.ctx.(*devContext).wire.counters()
			t.Logf("a: %v", a)
			t.Logf("b: %v", b)
			if a["drop_duplicate"]+b["drop_duplicate"]+a["drop_out_of_sequence"]+b["drop_out_of_sequence"] == 0 {
				t.Error("no packet was dropped as a duplicate or out of sequence: the faults did not happen")
			}
		})
	}
}

// runWireOps writes, reads and sends 64 KiB messages between f's QPs and
// checks the bytes.
func runWireOps(t *testing.T, f *wireFixture) {
	t.Helper()
	const size = 8192 // the fixture's region
	src := f.b.mem.Bytes()
	for i := range src {
		src[i] = byte(i*7 + 3)
	}
	post := func(wr verbs.SendWR) {
		t.Helper()
		if _, err := f.b.qp.PostSend([]verbs.SendWR{wr}); err != nil {
			t.Fatal(err)
		}
		wc := make([]verbs.WC, 1)
		deadline := time.Now().Add(20 * time.Second)
		for {
			n, err := f.b.scq.Poll(wc)
			if err != nil {
				t.Fatal(err)
			}
			if n == 1 {
				if err := wc[0].Err(); err != nil {
					t.Fatalf("%v: %v", wr.Opcode, err)
				}
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%v: no completion", wr.Opcode)
			}
		}
	}
	for round := range 20 {
		// b writes its bytes into a's region, then reads them back.
		post(verbs.SendWR{Opcode: verbs.OpRDMAWrite, Flags: verbs.SendSignaled,
			SGL:        []verbs.SGE{{Addr: f.b.mr.Addr(), Length: size, LKey: f.b.mr.LKey()}},
			RemoteAddr: f.a.mr.Addr(), RKey: f.a.mr.RKey()})
		if !bytes.Equal(f.a.mem.Bytes()[f.mrOff:f.mrOff+size], src[:size]) {
			t.Fatalf("round %d: written bytes differ", round)
		}
		clear(f.b.mem.Bytes()[size : 2*size])
		post(verbs.SendWR{Opcode: verbs.OpRDMARead, Flags: verbs.SendSignaled,
			SGL:        []verbs.SGE{{Addr: f.b.mr.Addr() + size, Length: size, LKey: f.b.mr.LKey()}},
			RemoteAddr: f.a.mr.Addr(), RKey: f.a.mr.RKey()})
		if !bytes.Equal(f.b.mem.Bytes()[size:2*size], src[:size]) {
			t.Fatalf("round %d: read bytes differ", round)
		}
		if !f.guardsIntact() {
			t.Fatal("bytes outside the region changed")
		}
	}
	// Reads in flight together, as read_bw posts them.
	const n, depth, rsize = 400, 16, 8192
	wrs := []verbs.SendWR{{Opcode: verbs.OpRDMARead, Flags: verbs.SendSignaled,
		SGL:        []verbs.SGE{{Addr: f.b.mr.Addr() + size, Length: rsize, LKey: f.b.mr.LKey()}},
		RemoteAddr: f.a.mr.Addr(), RKey: f.a.mr.RKey()}}
	wc := make([]verbs.WC, 16)
	posted, done := 0, 0
	deadline := time.Now().Add(30 * time.Second)
	for done < n {
		for posted < n && posted-done < depth {
			if _, err := f.b.qp.PostSend(wrs); err != nil {
				t.Fatal(err)
			}
			posted++
		}
		k, err := f.b.scq.Poll(wc)
		if err != nil {
			t.Fatal(err)
		}
		for i := range k {
			if err := wc[i].Err(); err != nil {
				t.Fatalf("read %d of %d: %v", done+i, n, err)
			}
		}
		done += k
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d pipelined reads completed", done, n)
		}
	}
	if !bytes.Equal(f.b.mem.Bytes()[size:size+rsize], src[:rsize]) {
		t.Fatal("pipelined reads: bytes differ")
	}
}

// TestWireUDLoss: UD datagrams lost on the way are counted from the gaps
// in the sender's PSNs, and the rest arrive.
func TestWireUDLoss(t *testing.T) {
	ca, cb := openWireDevice(t, netip.MustParseAddr("127.0.7.1"), TransportRoCE), openWireDevice(t, netip.MustParseAddr("127.0.7.2"), TransportRoCE)
	p := verbstest.NewPair(t, ca, cb, verbs.UD, verbstest.DefaultConnParams())
	n := 0
	lose := func() int {
		n++
		if n%10 == 0 {
			return 1 // lost
		}
		return 0
	}
	ca.(*devContext).wire.faults.Store(&lose)
	const total = 60
	for i := range total {
		if _, err := p.B.QP.PostRecv([]verbs.RecvWR{{ID: uint64(i), SGL: []verbs.SGE{{Addr: p.B.MR.Addr(), Length: 2048, LKey: p.B.MR.LKey()}}}}); err != nil {
			t.Fatal(err)
		}
	}
	wc := make([]verbs.WC, 1)
	for i := range total {
		wr := verbs.SendWR{ID: uint64(i), Opcode: verbs.OpSend, Flags: verbs.SendSignaled, AH: p.A.AH, RemoteQPN: p.B.QP.Num(),
			RemoteQKey: verbstest.DefaultConnParams().QKey, SGL: []verbs.SGE{{Addr: p.A.MR.Addr(), Length: 100, LKey: p.A.MR.LKey()}}}
		if _, err := p.A.QP.PostSend([]verbs.SendWR{wr}); err != nil {
			t.Fatal(err)
		}
		for {
			k, err := p.A.SendCQ.Poll(wc)
			if err != nil {
				t.Fatal(err)
			}
			if k == 1 {
				break
			}
		}
	}
	got := 0
	deadline := time.Now().Add(5 * time.Second)
	for got < total-total/10 && time.Now().Before(deadline) {
		k, err := p.B.RecvCQ.Poll(wc)
		if err != nil {
			t.Fatal(err)
		}
		got += k
	}
	lost := cb.(*devContext).wire.counters()["ud_lost"]
	if got != total-total/10 || lost != total/10-1 {
		// The last loss (datagram 60) leaves no gap behind it.
		t.Errorf("%d of %d datagrams received, %d counted lost; want %d and %d", got, total, lost, total-total/10, total/10-1)
	}
}

// TestWireLargeRead: a read longer than 128 packets asks for its
// responses 128 packets at a time, so that the responder never sends more
// than the receiving socket can hold: 2 MiB at MTU 1024 is 16 read
// requests. Reads of that size in a row complete with the right bytes.
func TestWireLargeRead(t *testing.T) {
	const size = 2 << 20
	addrA := netip.AddrFrom4([4]byte{127, 0, 5, 60})
	ca, cb := openWireDevice(t, addrA, TransportRoCE), openWireDevice(t, addrA.Next(), TransportRoCE)
	a, b := newEndpoint(t, ca, size), newEndpoint(t, cb, 2*size)
	t.Cleanup(b.close)
	t.Cleanup(a.close)
	if err := a.connect(b.info()); err != nil {
		t.Fatal(err)
	}
	if err := b.connect(a.info()); err != nil {
		t.Fatal(err)
	}
	src := a.mem.Bytes()
	for i := range src {
		src[i] = byte(i*7 + i>>12)
	}
	wr := verbs.SendWR{Opcode: verbs.OpRDMARead, Flags: verbs.SendSignaled,
		SGL:        []verbs.SGE{{Addr: b.mr.Addr() + size, Length: size, LKey: b.mr.LKey()}},
		RemoteAddr: a.mr.Addr(), RKey: a.mr.RKey()}
	read := func(n int) {
		t.Helper()
		clear(b.mem.Bytes()[size:])
		wrs := make([]verbs.SendWR, n)
		for i := range wrs {
			wrs[i] = wr
		}
		if _, err := b.qp.PostSend(wrs); err != nil {
			t.Fatal(err)
		}
		wc := make([]verbs.WC, n)
		deadline := time.Now().Add(60 * time.Second)
		for done := 0; done < n; {
			k, err := b.scq.Poll(wc)
			if err != nil {
				t.Fatal(err)
			}
			for i := range k {
				if err := wc[i].Err(); err != nil {
					t.Fatalf("read %d of %d: %v", done+i+1, n, err)
				}
			}
			done += k
			if time.Now().After(deadline) {
				t.Fatalf("%d of %d reads of %d bytes completed", done, n, size)
			}
		}
		if !bytes.Equal(b.mem.Bytes()[size:], src) {
			t.Fatal("read bytes differ")
		}
	}
	read(1)
	ra, rb := ca.(*devContext).wire.counters(), cb.(*devContext).wire.counters()
	if ra["rx_packets"] != 16 || rb["rx_packets"] != 2048 {
		t.Errorf("one read of 2 MiB: the responder received %d packets, the requester %d; want 16 requests and 2048 responses\nresponder: %v\nrequester: %v",
			ra["rx_packets"], rb["rx_packets"], ra, rb)
	}
	read(8)
}

// TestWireTCPCloseAllLinks: closing a TCP port closes every link it reads
// from, also a second link from a peer it already has one with (both ends
// dialling at once), so that closing the device does not wait forever.
func TestWireTCPCloseAllLinks(t *testing.T) {
	addr := netip.AddrFrom4([4]byte{127, 0, 5, 70})
	d, err := NewDevice("emu0", Config{Profile: ProfileUnrestricted, RoCE: 2, MTU: verbs.MTU1024, Addr: addr, Transport: TransportTCP})
	if err != nil {
		t.Fatal(err)
	}
	ctx, err := d.Open()
	if err != nil {
		t.Fatal(err)
	}
	w := ctx.(*devContext).wire
	dialer := net.Dialer{Timeout: 5 * time.Second, LocalAddr: net.TCPAddrFromAddrPort(netip.AddrPortFrom(addr.Next(), 0))}
	for range 2 {
		c, err := dialer.Dial("tcp", netip.AddrPortFrom(addr, roce.Port).String())
		if err != nil {
			ctx.Close()
			t.Fatal(err)
		}
		defer c.Close()
		if _, err := c.Write([]byte{0, 1, helloUDP}); err != nil {
			ctx.Close()
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		w.mu.Lock()
		n := len(w.allLinks)
		w.mu.Unlock()
		if n == 2 {
			break
		}
		if time.Now().After(deadline) {
			ctx.Close()
			t.Fatalf("the port has %d links, want 2", n)
		}
		time.Sleep(time.Millisecond)
	}
	closed := make(chan error, 1)
	go func() { closed <- ctx.Close() }()
	select {
	case err := <-closed:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("closing the device did not return: a link's reader still runs")
	}
}

// TestWirePortUsers: a thread polling a CQ reads the port's socket only
// while a QP may use the network: QPs on the memory-copy transport of a
// device with an address leave the socket alone (an empty poll would
// otherwise cost a system call).
func TestWirePortUsers(t *testing.T) {
	f := newWireFixture(t, 80)
	wa, wb := f.port, f.b.ctx.(*devContext).wire
	if wa.users.Load() != 1 || wb.users.Load() != 1 {
		t.Errorf("RC QPs on the network: the ports count %d and %d users, want 1 each", wa.users.Load(), wb.users.Load())
	}
	if err := f.a.qp.Close(); err != nil {
		t.Fatal(err)
	}
	if wa.users.Load() != 0 {
		t.Errorf("after the QP's close the port counts %d users", wa.users.Load())
	}

	ctx := openWireDevice(t, netip.AddrFrom4([4]byte{127, 0, 5, 90}), TransportAuto)
	a, b := newEndpoint(t, ctx, 8192), newEndpoint(t, ctx, 8192)
	t.Cleanup(b.close)
	t.Cleanup(a.close)
	if err := a.connect(b.info()); err != nil {
		t.Fatal(err)
	}
	if err := b.connect(a.info()); err != nil {
		t.Fatal(err)
	}
	if n := ctx.(*devContext).wire.users.Load(); n != 0 {
		t.Errorf("QPs on the memory-copy transport: the port counts %d users, want 0", n)
	}
}

// TestWireRNRTimer: after an RNR NAK the requester sends again when the
// NAK's RNR timer runs out, not before: a sequence NAK meanwhile (for the
// packets after the refused one) sends nothing, as rxe's requester
// ignores responses while it waits to retry. Every packet of the
// requester is lost, so nothing but its timers makes it send.
func TestWireRNRTimer(t *testing.T) {
	const rnrWait = 655360 * time.Microsecond // RNR timer 0
	f := newWireFixture(t, 100)
	if err := f.a.qp.Modify(&verbs.QPAttr{State: verbs.StateReset}, verbs.AttrState); err != nil {
		t.Fatal(err)
	}
	if err := f.a.connectWith(f.b.info(), 24, 7); err != nil {
		t.Fatal(err)
	}
	var sent atomic.Int64
	lose := func() int { sent.Add(1); return 1 }
	f.port.faults.Store(&lose)
	if _, err := f.a.qp.PostSend([]verbs.SendWR{{Opcode: verbs.OpSend, Flags: verbs.SendSignaled,
		SGL: []verbs.SGE{{Addr: f.a.mr.Addr(), Length: 16, LKey: f.a.mr.LKey()}}}}); err != nil {
		t.Fatal(err)
	}
	nak := func(syn uint8) {
		p := &roce.Packet{Opcode: roce.RCAck, PKey: roce.DefaultPKey, DestQPN: f.a.qp.Num(), PSN: benchPSN, Syndrome: syn}
		f.port.input(f.addrB, roce.Port, f.packet(p, nil), 0, &flowCache{})
	}
	start := time.Now()
	nak(roce.SynRNR)    // wait rnrWait, then send again
	nak(roce.SynNAKSeq) // changes nothing
	if n := sent.Load(); n != 1 && time.Since(start) < rnrWait {
		t.Fatalf("%d transmissions right after an RNR NAK and a sequence NAK, want 1", n)
	}
	deadline := start.Add(20 * time.Second)
	for sent.Load() == 1 {
		if time.Now().After(deadline) {
			t.Fatalf("no transmission within 20 s of an RNR NAK whose timer is %v", rnrWait)
		}
		time.Sleep(time.Millisecond)
	}
	if el := time.Since(start); el < rnrWait {
		t.Fatalf("sent again %v after the RNR NAK, before its timer (%v) ran out", el, rnrWait)
	} else {
		t.Logf("sent again %v after the RNR NAK (timer %v)", el, rnrWait)
	}
}

// TestWireWindow: a fresh QP has at most 128 PSNs in flight, as rxe; a
// timeout halves that; once ACKs come back the window grows past 128.
func TestWireWindow(t *testing.T) {
	f := newWireFixture(t, 120)
	if err := f.a.qp.Modify(&verbs.QPAttr{State: verbs.StateReset}, verbs.AttrState); err != nil {
		t.Fatal(err)
	}
	if err := f.a.connectWith(f.b.info(), 18, 7); err != nil { // ACK timeout 1.07 s
		t.Fatal(err)
	}
	const msg, wrs = 8192, 128 // 8 PSNs each: 1024 in all
	var sent atomic.Int64
	lose := func() int { sent.Add(1); return 1 }
	post := func() {
		t.Helper()
		for range wrs {
			if _, err := f.a.qp.PostSend([]verbs.SendWR{{Opcode: verbs.OpRDMAWrite, Flags: verbs.SendSignaled,
				SGL:        []verbs.SGE{{Addr: f.a.mr.Addr(), Length: msg, LKey: f.a.mr.LKey()}},
				RemoteAddr: f.b.mr.Addr(), RKey: f.b.mr.RKey()}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	// burst waits for the transmissions to pass from, then for them to
	// stop, and returns how many there were.
	burst := func(from int64) int64 {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for sent.Load() <= from {
			if time.Now().After(deadline) {
				t.Fatal("nothing sent within 10 s")
			}
			time.Sleep(time.Millisecond)
		}
		for n := sent.Load(); ; {
			time.Sleep(100 * time.Millisecond)
			m := sent.Load()
			if m == n {
				return n - from
			}
			n = m
		}
	}
	complete := func() {
		t.Helper()
		f.port.faults.Store(nil)
		for i := range wrs {
			if wc := pollWC(t, f.a.scq); wc.Status != verbs.WCSuccess {
				t.Fatalf("write %d: %v", i, wc.Status)
			}
		}
	}
	f.port.faults.Store(&lose)
	post()
	if n := burst(0); n != initWindow {
		t.Fatalf("a fresh QP sent %d packets before an ACK, want %d", n, initWindow)
	}
	if n := burst(initWindow); n != initWindow/2 {
		t.Fatalf("after the ACK timeout the QP sent %d packets again, want %d", n, initWindow/2)
	}
	complete()
	sent.Store(0)
	f.port.faults.Store(&lose)
	post()
	if n := burst(0); n <= initWindow {
		t.Fatalf("after %d PSNs acknowledged the QP sent %d packets before an ACK, want more than %d", msg/1024*wrs, n, initWindow)
	} else {
		t.Logf("window after %d PSNs acknowledged: %d", msg/1024*wrs, n)
	}
	complete()
}

// TestWireUCLongMessage: a UC message longer than the window (512 packets)
// is sent whole and completes: nothing acknowledges UC packets, so no
// window holds them back.
func TestWireUCLongMessage(t *testing.T) {
	addr := netip.AddrFrom4([4]byte{127, 0, 5, 130})
	ca, cb := openWireDevice(t, addr, TransportRoCE), openWireDevice(t, addr.Next(), TransportRoCE)
	const n = 512 << 10
	a, b := newEndpointOf(t, ca, n, verbs.UC, 4), newEndpointOf(t, cb, n, verbs.UC, 4)
	t.Cleanup(b.close)
	t.Cleanup(a.close)
	a.connectUC(t, b.info())
	b.connectUC(t, a.info())
	for i := range a.mem.Bytes() {
		a.mem.Bytes()[i] = byte(i * 7)
	}
	wr := verbs.SendWR{ID: 1, Opcode: verbs.OpRDMAWrite, Flags: verbs.SendSignaled,
		SGL: []verbs.SGE{{Addr: a.mr.Addr(), Length: n, LKey: a.mr.LKey()}}, RemoteAddr: b.mr.Addr(), RKey: b.mr.RKey()}
	if _, err := a.qp.PostSend([]verbs.SendWR{wr}); err != nil {
		t.Fatal(err)
	}
	if wc := pollWC(t, a.scq); wc.Status != verbs.WCSuccess {
		t.Fatalf("UC write of %d bytes: %v", n, wc.Status)
	}
	// UC may lose a message; on loopback with room in the socket's buffer
	// this one arrives.
	deadline := time.Now().Add(5 * time.Second)
	for !bytes.Equal(a.mem.Bytes(), b.mem.Bytes()) {
		if time.Now().After(deadline) {
			t.Fatal("the UC write's bytes did not all arrive")
		}
		time.Sleep(time.Millisecond)
	}
}

// TestWireAutoFallback: a device in auto mode whose UDP port 4791 is taken
// falls back to TCP, and a RoCE v2 device in auto mode then reaches it over
// TCP: from the fallback's first connection (an RC QP's RTR), or from its
// own probe (a UD address handle) when the peer never sends first. A peer
// with no TCP port (a kernel RDMA device) stays on UDP, and so does an
// emulated peer on RoCE v2. A connection that does not start with a hello
// is closed.
func TestWireAutoFallback(t *testing.T) {
	base := netip.AddrFrom4([4]byte{127, 0, 6, 10})
	roceAddr, tcpAddr, otherAddr, nobody := base, base.Next(), base.Next().Next(), base.Next().Next().Next()
	taken, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(tcpAddr, roce.Port)))
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	port := func(a netip.Addr) *wirePort {
		return openWireDevice(t, a, TransportAuto).(*devContext).wire
	}
	r, f, o := port(roceAddr), port(tcpAddr), port(otherAddr)
	if r.kind != wireRoCE || r.ln == nil || f.kind != wireTCP || o.kind != wireRoCE {
		t.Fatalf("ports: %v (TCP listener %v), %v, %v; want RoCE v2 with a TCP listener, TCP, RoCE v2", r.kind, r.ln != nil, f.kind, o.kind)
	}
	if got := r.kindTo(tcpAddr); got != wireRoCE {
		t.Fatalf("before any link the RoCE port sends to the fallback over %v", got)
	}
	// The fallback connects (an RC QP's RTR): when connect returns, the
	// RoCE port already sends to it over TCP.
	f.connect(roceAddr)
	if got := r.kindTo(tcpAddr); got != wireTCP {
		t.Errorf("after the fallback connected, the RoCE port sends to it over %v, want TCP", got)
	}
	if got := r.tcpPeers(); len(got) != 1 || got[0] != tcpAddr {
		t.Errorf("TCP peers %v, want [%v]", got, tcpAddr)
	}
	// The other RoCE device probes the fallback (a UD address handle),
	// and the RoCE device: TCP to the first, UDP to the second.
	o.probe(tcpAddr)
	o.probe(roceAddr)
	if got := o.kindTo(tcpAddr); got != wireTCP {
		t.Errorf("after its probe, a RoCE port sends to the fallback over %v, want TCP", got)
	}
	if got := o.kindTo(roceAddr); got != wireRoCE {
		t.Errorf("after its probe, a RoCE port sends to another RoCE port over %v, want RoCE v2", got)
	}
	if got := r.kindTo(otherAddr); got != wireRoCE {
		t.Errorf("a probed RoCE port sends to its prober over %v, want RoCE v2", got)
	}
	// Nobody listens: the probe's connection is refused, UDP it is.
	o.probe(nobody)
	if got := o.kindTo(nobody); got != wireRoCE {
		t.Errorf("a peer without a TCP port is reached over %v, want RoCE v2", got)
	}
	// A connection without a hello is not a link.
	c, err := net.Dial("tcp", netip.AddrPortFrom(roceAddr, roce.Port).String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write([]byte{0, 40, 1, 2}); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if n, err := c.Read(make([]byte, 8)); err == nil {
		t.Errorf("a connection without a hello got %d bytes, want it closed", n)
	}
}

// TestAddrNotOnNetdev: a device whose address is not on the interface its
// netdev names is refused when opened, rather than the netdev ignored.
func TestAddrNotOnNetdev(t *testing.T) {
	d, err := NewDevice("emu0", Config{Profile: ProfileUnrestricted, RoCE: 2, MTU: verbs.MTU1024, Addr: netip.MustParseAddr("127.0.0.1"), Netdev: "pvperf-none0", Transport: TransportCopy})
	if err != nil {
		t.Fatal(err)
	}
	ctx, err := d.Open()
	if err == nil {
		ctx.Close()
		t.Fatal("opened a device whose address is not on its netdev")
	}
	if want := "addr 127.0.0.1 is on interface lo, not on netdev=pvperf-none0"; !strings.Contains(err.Error(), want) {
		t.Errorf("error %q, want it to say %q", err, want)
	}
	d, err = NewDevice("emu0", Config{Profile: ProfileUnrestricted, RoCE: 2, MTU: verbs.MTU1024, Addr: netip.MustParseAddr("127.0.0.1"), Netdev: "lo", Transport: TransportCopy})
	if err != nil {
		t.Fatal(err)
	}
	if ctx, err = d.Open(); err != nil {
		t.Fatalf("address on its netdev: %v", err)
	}
	ctx.Close()
}

// TestDefaultTransportIsAuto: a device configured with an address and no
// transport is in auto mode, as documented: its QPs reach a QP of this
// host by memory copy, not over the network.
func TestDefaultTransportIsAuto(t *testing.T) {
	a, b := netip.MustParseAddr("127.0.6.30"), netip.MustParseAddr("127.0.6.31")
	x, y := newEndpoint(t, openWireDevice(t, a, ""), 4096), newEndpoint(t, openWireDevice(t, b, ""), 4096)
	defer x.close()
	defer y.close()
	connectBoth(t, x, y)
	if got := x.qp.(interface{ DataPath() string }).DataPath(); got != "memory copy (emulated device)" {
		t.Errorf("data path %q, want memory copy", got)
	}
	if got := x.ctx.(*devContext).Transports(); !strings.HasPrefix(got, "memory copy on this host, else ") {
		t.Errorf("transports %q, want memory copy on this host first", got)
	}
}

// TestWireSmallWindowAsksForACK: after losses have shrunk a QP's window
// below the 64 packets between two ACK requests, a message longer than the
// window still flows: the packet that fills the window, and every half
// window, asks for an ACK, so that the window moves on without waiting for
// the ACK timeout and sending again.
func TestWireSmallWindowAsksForACK(t *testing.T) {
	addr := netip.AddrFrom4([4]byte{127, 0, 5, 130})
	const size = 512 << 10 // 512 packets
	a := newEndpoint(t, openWireDevice(t, addr, TransportRoCE), size)
	b := newEndpoint(t, openWireDevice(t, addr.Next(), TransportRoCE), size)
	defer b.close()
	defer a.close()
	if err := a.connectWith(b.info(), 16, 7); err != nil { // ACK timeout 268 ms
		t.Fatal(err)
	}
	if err := b.connect(a.info()); err != nil {
		t.Fatal(err)
	}
	q, port := a.qp.(*qp), a.ctx.(*devContext).wire
	q.LockSend()
	q.wq.cwnd, q.wq.ssthresh = minWindow, minWindow
	q.UnlockSend()
	before := port.txPkts.Load()
	if _, err := a.qp.PostSend([]verbs.SendWR{{Opcode: verbs.OpRDMAWrite, Flags: verbs.SendSignaled,
		SGL:        []verbs.SGE{{Addr: a.mr.Addr(), Length: size, LKey: a.mr.LKey()}},
		RemoteAddr: b.mr.Addr(), RKey: b.mr.RKey()}}); err != nil {
		t.Fatal(err)
	}
	if wc := pollWC(t, a.scq); wc.Status != verbs.WCSuccess {
		t.Fatalf("write: %v", wc.Status)
	}
	if sent := port.txPkts.Load() - before; sent != size/1024 {
		t.Errorf("sent %d packets for a message of %d: some waited for the ACK timeout and went again", sent, size/1024)
	}
}

// TestWireAutoPortsTaken: a device in auto mode whose address's UDP and
// TCP ports 4791 are both taken (another process's device has the address)
// opens without a network port and says so; forced to RoCE it fails.
func TestWireAutoPortsTaken(t *testing.T) {
	addr := netip.MustParseAddr("127.0.6.40")
	u, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(addr, roce.Port)))
	if err != nil {
		t.Fatal(err)
	}
	defer u.Close()
	l, err := net.ListenTCP("tcp", net.TCPAddrFromAddrPort(netip.AddrPortFrom(addr, roce.Port)))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	c := openWireDevice(t, addr, TransportAuto).(*devContext)
	if c.wire != nil {
		t.Fatal("the device has a network port on ports that are taken")
	}
	if got := c.Transports(); !strings.HasPrefix(got, "memory copy on this host only (no network port: tcp: ") || !strings.Contains(got, "another process's emulated device") {
		t.Errorf("transports %q", got)
	}
	d, err := NewDevice("emu0", Config{Profile: ProfileUnrestricted, RoCE: 2, MTU: verbs.MTU1024, Addr: addr, Transport: TransportRoCE})
	if err != nil {
		t.Fatal(err)
	}
	if ctx, err := d.Open(); err == nil {
		ctx.Close()
		t.Error("transport=roce opened on a taken UDP port")
	} else if !strings.Contains(err.Error(), "rdma_rxe") {
		t.Errorf("error %q does not say who may hold the port", err)
	}
}

// TestMixedTransportsOnOneHost: a device in auto mode facing a device of
// this host forced onto the network (transport=roce or tcp) reaches it
// over the network too, not by memory copy, which the forced device would
// not read: writes both ways complete with the right bytes, and the auto
// side's data path says which transport.
func TestMixedTransportsOnOneHost(t *testing.T) {
	for i, c := range []struct{ forced, want string }{{TransportRoCE, "RoCE v2, "}, {TransportTCP, "TCP, "}} {
		t.Run(c.forced, func(t *testing.T) {
			a := netip.AddrFrom4([4]byte{127, 0, 6, byte(40 + 2*i)})
			x := newEndpoint(t, openWireDevice(t, a, TransportAuto), 1<<16)
			y := newEndpoint(t, openWireDevice(t, a.Next(), c.forced), 1<<16)
			defer x.close()
			defer y.close()
			connectBoth(t, x, y)
			if got := x.qp.(interface{ DataPath() string }).DataPath(); !strings.HasPrefix(got, c.want) {
				t.Errorf("auto side's data path %q, want %q...", got, c.want)
			}
			for k, e := range []struct{ from, to *endpoint }{{x, y}, {y, x}} {
				src, dst := e.from.mem.Bytes()[:4096], e.to.mem.Bytes()[:4096]
				for j := range src {
					src[j] = byte(j*7 + k + 1)
				}
				writeLoop(t, e.from, e.to.info(), 4096, 10, 4, 1)
				if !bytes.Equal(src, dst) {
					t.Errorf("direction %d: the bytes written did not arrive", k)
				}
			}
		})
	}
}

// TestWireTCPSelfLink: RDMA writes between two QPs of one TCP port, its
// link to itself carrying the requests one way and the ACKs the other,
// with the window full. The socket fills up while the requester writes,
// and the reader must go on reading, ACKs to send or not: nothing is
// dropped, retransmitted or given up.
func TestWireTCPSelfLink(t *testing.T) {
	ctx := openWireDevice(t, netip.AddrFrom4([4]byte{127, 0, 5, 150}), TransportTCP)
	const msg, n = 1 << 16, 1024
	x := newEndpoint(t, ctx, 1<<20)
	y := newEndpoint(t, ctx, 1<<20)
	t.Cleanup(x.close)
	t.Cleanup(y.close)
	connectBoth(t, x, y)
	writeLoop(t, x, y.info(), msg, n, 128, 1) // every write signalled and checked
	c := ctx.(*devContext).WireCounters()
	if c["drop_send_error"] != 0 || c["drop_duplicate"] != 0 || c["drop_out_of_sequence"] != 0 {
		t.Errorf("counters %v: packets lost on a TCP link", c)
	}
}
