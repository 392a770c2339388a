package verbstest

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"testing"
	"time"

	"github.com/pvperf/pvperf/verbs"
)

// needUD reports whether the device has UD QPs; if not, it checks that
// creating one fails with ErrNotSupported.
func needUD(t *testing.T, f *fixture) bool {
	t.Helper()
	if f.attr.Supports(verbs.UD) {
		return true
	}
	cq := f.cq(4, nil)
	qp, err := f.pd.CreateQP(verbs.QPInit{Type: verbs.UD, SendCQ: cq, RecvCQ: cq, Cap: verbs.QPCap{MaxSendWR: 1, MaxRecvWR: 1}})
	if qp != nil {
		qp.Close()
	}
	wantErr(t, "create UD qp (not in QPTypes)", err, verbs.ErrNotSupported)
	return false
}

func testUD(t *testing.T, tg Target) {
	run(t, "GRH", func(t *testing.T) { testGRH(t, tg) })
	run(t, "RecvTooSmall", func(t *testing.T) {
		f := newFixture(t, tg)
		if !needUD(t, f) {
			return
		}
		p := f.pair(pairOpts{typ: verbs.UD})
		a, b := p.A, p.B
		postRecv(t, b.QP, verbs.RecvWR{ID: 1, SGL: []verbs.SGE{sge(b.MR, 0, 100)}}) // no room for the GRH
		postSend(t, a.QP, p.sendWR(2, verbs.OpSend, verbs.SendSignaled, sge(a.MR, 0, 100)))
		checkWC(t, "UD sender", poll1(t, a.SendCQ), wcWant{ID: 2, QPNum: a.QP.Num(), Opcode: verbs.WCSend, Len: -1})
		checkWC(t, "UD receive without room for the GRH", poll1(t, b.RecvCQ), wcWant{ID: 1, Status: f.tg.status(t, RecvTooSmall, verbs.WCLocLenErr), QPNum: b.QP.Num()})
	})
	run(t, "QKeyMismatch", func(t *testing.T) {
		f := newFixture(t, tg)
		if !needUD(t, f) {
			return
		}
		p := f.pair(pairOpts{typ: verbs.UD})
		a, b := p.A, p.B
		postRecv(t, b.QP, verbs.RecvWR{ID: 1, SGL: []verbs.SGE{sge(b.MR, 0, 4096)}})
		w := p.sendWR(2, verbs.OpSend, verbs.SendSignaled, sge(a.MR, 0, 64))
		w.RemoteQKey = 0x22222222
		postSend(t, a.QP, w)
		checkWC(t, "send with a wrong qkey", poll1(t, a.SendCQ), wcWant{ID: 2, QPNum: a.QP.Num(), Opcode: verbs.WCSend, Len: -1})
		expectNoWC(t, "datagram with a wrong qkey", b.RecvCQ, waitShort)
		// The receive is still there for the right qkey.
		postSend(t, a.QP, p.sendWR(3, verbs.OpSend, verbs.SendSignaled, sge(a.MR, 0, 64)))
		poll1(t, a.SendCQ)
		checkWC(t, "datagram with the right qkey", poll1(t, b.RecvCQ), wcWant{ID: 1, QPNum: b.QP.Num(), Opcode: verbs.WCRecv, Len: 104, GRH: true, SrcQP: a.QP.Num()})
	})
	run(t, "QKeyViolCounter", func(t *testing.T) {
		// A datagram dropped for its Q_Key counts in the receiving
		// port's qkey_viol_cntr (16 bits that stop at 0xFFFF).
		f := newFixture(t, tg)
		if !needUD(t, f) {
			return
		}
		p := f.pair(pairOpts{typ: verbs.UD})
		a, b := p.A, p.B
		before := queryPort(t, f.ctx).QKeyViolCntr
		postRecv(t, b.QP, verbs.RecvWR{ID: 1, SGL: []verbs.SGE{sge(b.MR, 0, 4096)}})
		const n = 3
		for i := range n {
			w := p.sendWR(uint64(2+i), verbs.OpSend, verbs.SendSignaled, sge(a.MR, 0, 64))
			w.RemoteQKey = 0x22222222
			postSend(t, a.QP, w)
			poll1(t, a.SendCQ)
		}
		expectNoWC(t, "datagram with a wrong qkey", b.RecvCQ, waitShort)
		want := min(before+n, 0xFFFF)
		after := queryPort(t, f.ctx).QKeyViolCntr
		for deadline := time.Now().Add(time.Second); after < want && time.Now().Before(deadline); {
			time.Sleep(10 * time.Millisecond) // a datagram still on the wire
			after = queryPort(t, f.ctx).QKeyViolCntr
		}
		if after < want || after > 0xFFFF {
			t.Errorf("qkey_viol_cntr %d after %d datagrams with a wrong Q_Key, from %d", after, n, before)
		}
	})
	run(t, "NoSuchQP", func(t *testing.T) {
		f := newFixture(t, tg)
		if !needUD(t, f) {
			return
		}
		p := f.pair(pairOpts{typ: verbs.UD})
		a, b := p.A, p.B
		postRecv(t, b.QP, verbs.RecvWR{ID: 1, SGL: []verbs.SGE{sge(b.MR, 0, 4096)}})
		w := p.sendWR(2, verbs.OpSend, verbs.SendSignaled, sge(a.MR, 0, 64))
		w.RemoteQPN = 0xFFFFFE
		postSend(t, a.QP, w)
		checkWC(t, "datagram to a qp that does not exist", poll1(t, a.SendCQ), wcWant{ID: 2, QPNum: a.QP.Num(), Opcode: verbs.WCSend, Len: -1})
		expectNoWC(t, "datagram to another qp", b.RecvCQ, waitShort)
	})
	run(t, "MTU", func(t *testing.T) {
		skipIf(t, tg.Quirks.UDOversize)
		f := newFixture(t, tg)
		if !needUD(t, f) {
			return
		}
		p := f.pair(pairOpts{typ: verbs.UD})
		a, b := p.A, p.B
		mtu := f.port.ActiveMTU.Bytes()
		fill(a.Mem.Bytes()[:mtu+1], 3)
		postRecv(t, b.QP, verbs.RecvWR{ID: 1, SGL: []verbs.SGE{sge(b.MR, 0, 40+mtu)}})
		postSend(t, a.QP, p.sendWR(2, verbs.OpSend, verbs.SendSignaled, sge(a.MR, 0, mtu)))
		checkWC(t, "datagram of the port MTU", poll1(t, a.SendCQ), wcWant{ID: 2, QPNum: a.QP.Num(), Opcode: verbs.WCSend, Len: -1})
		checkWC(t, "its receive", poll1(t, b.RecvCQ), wcWant{ID: 1, QPNum: b.QP.Num(), Opcode: verbs.WCRecv, Len: 40 + mtu, GRH: true, SrcQP: a.QP.Num()})
		sameBytes(t, "datagram of the port MTU", b.Mem.Bytes()[40:40+mtu], a.Mem.Bytes()[:mtu])
		postRecv(t, b.QP, verbs.RecvWR{ID: 3, SGL: []verbs.SGE{sge(b.MR, 0, 4096)}})
		postSend(t, a.QP, p.sendWR(4, verbs.OpSend, verbs.SendSignaled, sge(a.MR, 0, mtu+1)),
			p.sendWR(5, verbs.OpSend, verbs.SendSignaled, sge(a.MR, 0, 10)))
		ws := pollN(t, a.SendCQ, 2)
		checkWC(t, fmt.Sprintf("datagram of %d bytes (MTU %d)", mtu+1, mtu), ws[0], wcWant{ID: 4, Status: verbs.WCLocLenErr, QPNum: a.QP.Num()})
		checkWC(t, "the send after it", ws[1], wcWant{ID: 5, Status: verbs.WCWRFlushErr, QPNum: a.QP.Num()})
		expectNoWC(t, "receiver of a datagram larger than the MTU", b.RecvCQ, waitShort)
		// A UD send error moves the QP to SQE, from which it can resume.
		if wantState(t, "UD qp after a send error", a.QP, verbs.StateSQE) {
			modify(t, a.QP, verbs.QPAttr{State: verbs.StateRTS}, verbs.AttrState)
			postSend(t, a.QP, p.sendWR(6, verbs.OpSend, verbs.SendSignaled, sge(a.MR, 0, 10)))
			checkWC(t, "send after SQE to RTS", poll1(t, a.SendCQ), wcWant{ID: 6, QPNum: a.QP.Num(), Opcode: verbs.WCSend, Len: -1})
			checkWC(t, "its receive", poll1(t, b.RecvCQ), wcWant{ID: 3, QPNum: b.QP.Num(), Opcode: verbs.WCRecv, Len: 50, GRH: true, SrcQP: a.QP.Num()})
		}
	})
	run(t, "UDQPLimit", func(t *testing.T) {
		f := newFixture(t, tg)
		if !needUD(t, f) {
			return
		}
		cq := f.cq(16, nil)
		init := verbs.QPInit{Type: verbs.UD, SendCQ: cq, RecvCQ: cq, Cap: verbs.QPCap{MaxSendWR: 2, MaxRecvWR: 2, MaxSendSGE: 1, MaxRecvSGE: 1}}
		n := f.attr.MaxUDQP
		if n == 0 {
			n = 8 // no limit but max_qp: a few must work
		}
		var qps []verbs.QP
		for i := range n {
			qp, err := f.pd.CreateQP(init)
			if err != nil {
				t.Fatalf("create UD qp %d of %d (MaxUDQP %d): %v", i+1, n, f.attr.MaxUDQP, err)
			}
			closeLater(t, "qp", qp)
			qps = append(qps, qp)
		}
		if f.attr.MaxUDQP == 0 {
			return
		}
		qp, err := f.pd.CreateQP(init)
		if qp != nil {
			closeLater(t, "qp", qp)
		}
		wantErr(t, fmt.Sprintf("create UD qp %d (MaxUDQP %d)", n+1, n), err, errENOMEM)
		rc := init
		rc.Type = verbs.RC
		newQP(t, f.pd, rc) // other types are not limited
		mustOK(t, "close a UD qp", qps[0].Close())
		newQP(t, f.pd, init)
	})
}

// testGRH sends a datagram from and to each kind of GID in the table and
// checks the 40 bytes in front of the payload.
func testGRH(t *testing.T, tg Target) {
	f := newFixture(t, tg)
	if !needUD(t, f) {
		return
	}
	kinds := []struct {
		name string
		pick func(verbs.GIDEntry) bool
	}{
		{"LinkLocal", func(e verbs.GIDEntry) bool { return e.GID.IsLinkLocal() }},
		{"IPv4", func(e verbs.GIDEntry) bool { return e.GID.IsV4Mapped() }},
		{"IPv6", func(e verbs.GIDEntry) bool { return !e.GID.IsV4Mapped() && !e.GID.IsLinkLocal() }},
	}
	for _, k := range kinds {
		run(t, k.name, func(t *testing.T) {
			idx := -1
			for _, e := range f.gids {
				if k.pick(e) {
					idx = e.Index
					break
				}
			}
			if idx < 0 {
				t.Skipf("the gid table %v has no %s GID (a property of the host's interface, not the device)", f.gids, k.name)
			}
			f := newFixture(t, tg)
			p := f.params()
			p.SGIDIndex = uint8(idx)
			pr := f.pair(pairOpts{typ: verbs.UD, pa: p, pb: p})
			a, b := pr.A, pr.B
			const n = 200
			fill(a.Mem.Bytes()[:n], 7)
			postRecv(t, b.QP, verbs.RecvWR{ID: 1, SGL: []verbs.SGE{sge(b.MR, 0, 40+n)}})
			postSend(t, a.QP, pr.sendWR(2, verbs.OpSend, verbs.SendSignaled, sge(a.MR, 0, n)))
			checkWC(t, "UD send", poll1(t, a.SendCQ), wcWant{ID: 2, QPNum: a.QP.Num(), Opcode: verbs.WCSend, Len: -1})
			if !checkWC(t, "UD receive", poll1(t, b.RecvCQ), wcWant{ID: 1, QPNum: b.QP.Num(), Opcode: verbs.WCRecv, Len: 40 + n, GRH: true, SrcQP: a.QP.Num()}) {
				return
			}
			g := b.Mem.Bytes()[:40]
			sameBytes(t, "payload after the GRH", b.Mem.Bytes()[40:40+n], a.Mem.Bytes()[:n])
			sgid, dgid := a.GID, b.GID.GID
			if sgid.Type == verbs.GIDTypeRoCEv2 && sgid.GID.IsV4Mapped() {
				checkIPv4GRH(t, g, sgid.GID, dgid, n, tg.Quirks.NoGRHChecksum)
			} else {
				checkIPv6GRH(t, g, sgid, dgid)
			}
		})
	}
}

// checkIPv4GRH: RoCE v2 over IPv4 puts 20 unused bytes and then the IPv4
// header in the GRH area.
func checkIPv4GRH(t *testing.T, g []byte, sgid, dgid verbs.GID, n int, noChecksum string) {
	t.Helper()
	if !bytes.Equal(g[:20], make([]byte, 20)) {
		t.Errorf("RoCE v2 IPv4 GRH: bytes 0..19 are % x, want zeros", g[:20])
	}
	ip := g[20:40]
	if ip[0] != 0x45 {
		t.Errorf("IPv4 header: version/IHL %#x, want 0x45 (header % x)", ip[0], ip)
	}
	if ip[9] != 17 {
		t.Errorf("IPv4 header: protocol %d, want 17 (UDP)", ip[9])
	}
	if ip[8] != 64 {
		t.Errorf("IPv4 header: TTL %d, want the hop limit 64 of the address handle", ip[8])
	}
	const udp, bth, deth, icrc = 8, 12, 8, 4
	if got, want := int(binary.BigEndian.Uint16(ip[2:])), 20+udp+bth+deth+n+icrc; got != want {
		t.Errorf("IPv4 header: total length %d, want %d", got, want)
	}
	if !bytes.Equal(ip[12:16], sgid[12:16]) || !bytes.Equal(ip[16:20], dgid[12:16]) {
		t.Errorf("IPv4 header: addresses %v -> %v, want %v -> %v", ip[12:16], ip[16:20], sgid.Addr(), dgid.Addr())
	}
	if noChecksum != "" && ip[10] == 0 && ip[11] == 0 {
		t.Logf("IPv4 header without a checksum (device quirk: %s)", noChecksum)
		return
	}
	var sum uint32
	for i := 0; i < 20; i += 2 {
		sum += uint32(binary.BigEndian.Uint16(ip[i:]))
	}
	for sum > 0xFFFF {
		sum = sum&0xFFFF + sum>>16
	}
	if sum != 0xFFFF {
		t.Errorf("IPv4 header checksum is wrong (header % x)", ip)
	}
}

// checkIPv6GRH: RoCE v1 and RoCE v2 over IPv6 put an IPv6-style header
// whose bytes 8..23 and 24..39 are the source and destination GIDs.
func checkIPv6GRH(t *testing.T, g []byte, sgid verbs.GIDEntry, dgid verbs.GID) {
	t.Helper()
	if g[0]>>4 != 6 {
		t.Errorf("GRH: IP version %d, want 6 (GRH % x)", g[0]>>4, g)
	}
	next := byte(0x1B) // RoCE v1: the IB transport header follows
	if sgid.Type == verbs.GIDTypeRoCEv2 {
		next = 17 // UDP
	}
	if g[6] != next {
		t.Errorf("GRH: next header %#x, want %#x for %v", g[6], next, sgid.Type)
	}
	if g[7] != 64 {
		t.Errorf("GRH: hop limit %d, want the hop limit 64 of the address handle", g[7])
	}
	if verbs.GID(g[8:24]) != sgid.GID {
		t.Errorf("GRH: source GID %v, want %v", verbs.GID(g[8:24]), sgid.GID)
	}
	if verbs.GID(g[24:40]) != dgid {
		t.Errorf("GRH: destination GID %v, want %v", verbs.GID(g[24:40]), dgid)
	}
}

func queryPort(t *testing.T, ctx verbs.Context) verbs.PortAttr {
	t.Helper()
	a, err := ctx.QueryPort(1)
	if err != nil {
		t.Fatalf("query port 1: %v", err)
	}
	return a
}
