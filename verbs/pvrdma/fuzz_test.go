package pvrdma

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/pvperf/pvperf/verbs"
)

// specCQE decodes a pvrdma_cqe straight from the spec table (3.5),
// independently of decodeCQE.
func specCQE(b []byte) CQE {
	le := binary.LittleEndian
	var c CQE
	c.WRID = le.Uint64(b[0:])
	c.QP = le.Uint64(b[8:])
	c.Opcode = le.Uint32(b[16:])
	c.Status = le.Uint32(b[20:])
	c.ByteLen = le.Uint32(b[24:])
	c.Imm = binary.BigEndian.Uint32(b[28:])
	c.SrcQP = le.Uint32(b[32:])
	c.Flags = le.Uint32(b[36:])
	c.VendorErr = le.Uint32(b[40:])
	c.PKeyIndex = le.Uint16(b[44:])
	c.SLID = le.Uint16(b[46:])
	c.SL = b[48]
	c.DLIDPathBits = b[49]
	c.Port = b[50]
	copy(c.SMAC[:], b[51:57])
	c.NetworkHdrType = b[57]
	return c
}

// FuzzCQEDecode decodes arbitrary CQE bytes, re-encodes them, and polls
// them through a CQ.
func FuzzCQEDecode(f *testing.F) {
	f.Add(cqeVector(f))
	f.Add(make([]byte, 64))
	f.Add(bytes.Repeat([]byte{0xff}, 64))
	f.Add(bytes.Repeat([]byte{0x5a, 0xa5}, 40))
	env := newCQEnv(f, 1, 4)
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) < CQESize {
			data = append(data, make([]byte, CQESize-len(data))...)
		}
		raw := data[:CQESize]
		c := decodeCQE(raw)
		if want := specCQE(raw); c != want {
			t.Fatalf("decodeCQE(% x) = %+v, spec says %+v", raw, c, want)
		}
		var out [CQESize]byte
		for i := range out {
			out[i] = 0xee
		}
		c.Encode(out[:])
		if !bytes.Equal(out[:58], raw[:58]) {
			t.Fatalf("re-encoding changed the CQE:\n got % x\nwant % x", out[:58], raw[:58])
		}
		if !bytes.Equal(out[58:], make([]byte, 6)) {
			t.Fatalf("reserved bytes encoded as % x", out[58:])
		}
		if d := decodeCQE(out[:]); d != c {
			t.Fatalf("round trip %+v -> %+v", c, d)
		}

		// Through the CQ: the handle maps to a QPN, imm comes out in host
		// order, the rest is copied.
		handle := uint32(c.QP & 0xffff)
		qpn := uint32(c.WRID) & 0xffffff
		env.qps.Set(handle, qpn)
		defer env.qps.Clear(handle)
		env.produceRaw(raw)
		var wc [2]verbs.WC
		n, err := env.cq.Poll(wc[:])
		if n != 1 || err != nil {
			t.Fatalf("Poll = %d, %v", n, err)
		}
		w := wc[0]
		if w.ID != c.WRID || w.QPNum != qpn || w.ByteLen != c.ByteLen || w.Imm != c.Imm || w.SrcQP != c.SrcQP ||
			uint32(w.Flags) != c.Flags || w.VendorErr != c.VendorErr || w.PKeyIndex != c.PKeyIndex ||
			w.SLID != c.SLID || w.SL != c.SL || w.DLIDPathBits != c.DLIDPathBits {
			t.Fatalf("CQE %+v polled as %+v (qpn %#x)", c, w, qpn)
		}
		// WC opcodes and statuses are 8-bit; every defined value fits.
		if c.Opcode < 256 && uint32(w.Opcode) != c.Opcode {
			t.Fatalf("opcode %d polled as %d", c.Opcode, w.Opcode)
		}
		if c.Status < 256 && uint32(w.Status) != c.Status {
			t.Fatalf("status %d polled as %d", c.Status, w.Status)
		}
	})
}

// FuzzCQEEncode encodes arbitrary field values and checks every field at
// its spec offset, and the round trip.
func FuzzCQEEncode(f *testing.F) {
	f.Add(uint64(1), uint64(2), uint32(128), uint32(0), uint32(4096), uint32(0x01020304), uint32(5), uint32(2),
		uint32(0), uint16(0), uint16(0), uint8(0), uint8(0), uint8(1), uint64(0x0211223344), uint8(1))
	f.Add(^uint64(0), ^uint64(0), ^uint32(0), ^uint32(0), ^uint32(0), ^uint32(0), ^uint32(0), ^uint32(0),
		^uint32(0), ^uint16(0), ^uint16(0), ^uint8(0), ^uint8(0), ^uint8(0), ^uint64(0), ^uint8(0))
	f.Fuzz(func(t *testing.T, wrid, qp uint64, opcode, status, byteLen, imm, srcQP, flags, vendorErr uint32,
		pkey, slid uint16, sl, dlid, port uint8, smac uint64, nht uint8) {
		c := CQE{WRID: wrid, QP: qp, Opcode: opcode, Status: status, ByteLen: byteLen, Imm: imm, SrcQP: srcQP,
			Flags: flags, VendorErr: vendorErr, PKeyIndex: pkey, SLID: slid, SL: sl, DLIDPathBits: dlid, Port: port,
			NetworkHdrType: nht}
		for i := range c.SMAC {
			c.SMAC[i] = byte(smac >> (8 * i))
		}
		var b [CQESize]byte
		c.Encode(b[:])
		if got := specCQE(b[:]); got != c {
			t.Fatalf("Encode(%+v) reads back by the spec table as %+v", c, got)
		}
		if !bytes.Equal(b[58:], make([]byte, 6)) {
			t.Fatalf("reserved bytes % x", b[58:])
		}
		if got := decodeCQE(b[:]); got != c {
			t.Fatalf("round trip %+v -> %+v", c, got)
		}
	})
}

// splitmix64 derives pseudo-random values from a fuzz seed.
func splitmix64(x *uint64) uint64 {
	*x += 0x9e3779b97f4a7c15
	z := *x
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}

// FuzzSendWQE posts arbitrary work requests and checks that the device's
// view of the WQE (the SendWQE accessors) reads back exactly what was posted.
func FuzzSendWQE(f *testing.F) {
	f.Add(uint64(tWRID), uint8(0), uint32(2), uint32(0), uint64(tRAddr), uint32(tRKey), uint64(0), uint64(0), uint8(1), uint64(1), uint32(0), uint32(0), false)
	f.Add(uint64(1), uint8(1), uint32(6), uint32(tImm), uint64(tRAddr), uint32(tRKey), uint64(0), uint64(0), uint8(2), uint64(2), uint32(0), uint32(0), false)
	f.Add(uint64(2), uint8(5), uint32(2), uint32(0), uint64(tRAddr), uint32(tRKey), uint64(tCmp), uint64(tSwap), uint8(1), uint64(3), uint32(0), uint32(0), false)
	f.Add(uint64(3), uint8(6), uint32(0x17), uint32(0), uint64(8), uint32(1), uint64(1), uint64(0), uint8(1), uint64(4), uint32(0), uint32(0), false)
	f.Add(uint64(4), uint8(3), uint32(2), uint32(tImm), uint64(0), uint32(0), uint64(0), uint64(0), uint8(4), uint64(5), uint32(tQPN), uint32(tQKey), true)
	f.Add(^uint64(0), uint8(255), ^uint32(0), ^uint32(0), ^uint64(0), ^uint32(0), ^uint64(0), ^uint64(0), uint8(255), ^uint64(0), ^uint32(0), ^uint32(0), true)
	const maxSGE = 4
	rc := newQPEnv(f, qpOpts{typ: verbs.RC, cap: verbs.QPCap{MaxSendWR: 8, MaxRecvWR: 1, MaxSendSGE: maxSGE, MaxRecvSGE: 1}, atomics: true, state: verbs.StateRTS})
	ud := newQPEnv(f, qpOpts{typ: verbs.UD, cap: verbs.QPCap{MaxSendWR: 8, MaxRecvWR: 1, MaxSendSGE: maxSGE, MaxRecvSGE: 1}, state: verbs.StateRTS})
	f.Fuzz(func(t *testing.T, id uint64, op uint8, flags, imm uint32, raddr uint64, rkey uint32, cmp, swap uint64,
		nsge uint8, seed uint64, qpn, qkey uint32, isUD bool) {
		e := rc
		opcode := verbs.WROpcode(op % 7)
		if isUD {
			e = ud
			opcode = verbs.OpSend + verbs.WROpcode(op%2)
		}
		wr := verbs.SendWR{
			ID: id, Opcode: opcode, Flags: verbs.SendFlags(flags) &^ verbs.SendInline, Imm: imm,
			RemoteAddr: raddr, RKey: rkey, CompareAdd: cmp, Swap: swap, RemoteQPN: qpn, RemoteQKey: qkey,
		}
		wr.SGL = make([]verbs.SGE, int(nsge)%(maxSGE+1))
		for i := range wr.SGL {
			v := splitmix64(&seed)
			wr.SGL[i] = verbs.SGE{Addr: splitmix64(&seed), Length: uint32(v), LKey: uint32(v >> 32)}
		}
		var ah *AH
		if isUD {
			var gid verbs.GID
			binary.LittleEndian.PutUint64(gid[:], splitmix64(&seed))
			binary.LittleEndian.PutUint64(gid[8:], splitmix64(&seed))
			v := splitmix64(&seed)
			attr := verbs.AHAttr{
				GRH: verbs.GRH{DGID: gid, FlowLabel: uint32(v) & 0xfffff, SGIDIndex: uint8(v >> 20),
					HopLimit: uint8(v >> 28), TrafficClass: uint8(v >> 36)},
				SrcPathBits: uint8(v>>44) & 0x7f, IsGlobal: true, Port: uint8(v>>52)&1 + 1,
			}
			var mac [6]byte
			binary.LittleEndian.PutUint32(mac[:], uint32(seed))
			ah = NewAH(attr, uint32(v>>8)&0xffffff, mac)
			wr.AH = testAH{ah}
		}

		tail := e.sqTail()
		n, err := e.qp.PostSend([]verbs.SendWR{wr})
		if n != 1 || err != nil {
			t.Fatalf("PostSend(%+v) = %d, %v", wr, n, err)
		}
		raw := e.sqSlot(int(tail) & (e.layout.SendWR - 1))
		w := SendWQE(raw)
		defer e.consumeSQ()

		// Header, against the accessors and the raw spec offsets.
		if w.WRID() != id || binary.LittleEndian.Uint64(raw[0:]) != id {
			t.Errorf("wr_id %#x, want %#x", w.WRID(), id)
		}
		if w.NumSGE() != len(wr.SGL) || binary.LittleEndian.Uint32(raw[8:]) != uint32(len(wr.SGL)) {
			t.Errorf("num_sge %d, want %d", w.NumSGE(), len(wr.SGL))
		}
		if w.TotalLen() != 0 {
			t.Errorf("total_len %d, want 0", w.TotalLen())
		}
		if w.Opcode() != Opcode(opcode) || binary.LittleEndian.Uint32(raw[16:]) != uint32(opcode) {
			t.Errorf("opcode %d, want %d", w.Opcode(), opcode)
		}
		if w.Flags() != uint32(wr.Flags) || binary.LittleEndian.Uint32(raw[20:]) != uint32(wr.Flags) {
			t.Errorf("send_flags %#x, want %#x", w.Flags(), wr.Flags)
		}
		if opcode == verbs.OpSendImm || opcode == verbs.OpRDMAWriteImm {
			if w.Imm() != imm || binary.BigEndian.Uint32(raw[24:]) != imm {
				t.Errorf("imm_data %#x, want %#x", w.Imm(), imm)
			}
		}
		switch {
		case isUD:
			if w.RemoteQPN() != qpn || w.RemoteQKey() != qkey {
				t.Errorf("ud remote_qpn/qkey %#x/%#x, want %#x/%#x", w.RemoteQPN(), w.RemoteQKey(), qpn, qkey)
			}
			if w.AV() != *ah.AddressVector() {
				t.Errorf("ud av %+v, want %+v", w.AV(), *ah.AddressVector())
			}
			var av [AVSize]byte
			ah.AddressVector().Encode(av[:])
			if !bytes.Equal(raw[40:80], av[:]) {
				t.Errorf("ud av bytes % x, want % x", raw[40:80], av[:])
			}
		case opcode == verbs.OpRDMAWrite || opcode == verbs.OpRDMAWriteImm || opcode == verbs.OpRDMARead:
			if w.RemoteAddr() != raddr || w.RKey() != rkey {
				t.Errorf("rdma remote_addr/rkey %#x/%#x, want %#x/%#x", w.RemoteAddr(), w.RKey(), raddr, rkey)
			}
		case opcode == verbs.OpAtomicCmpSwap || opcode == verbs.OpAtomicFetchAdd:
			if w.AtomicAddr() != raddr || w.CompareAdd() != cmp || w.AtomicRKey() != rkey {
				t.Errorf("atomic remote_addr/compare_add/rkey %#x/%#x/%#x, want %#x/%#x/%#x",
					w.AtomicAddr(), w.CompareAdd(), w.AtomicRKey(), raddr, cmp, rkey)
			}
			if opcode == verbs.OpAtomicCmpSwap && w.Swap() != swap {
				t.Errorf("atomic swap %#x, want %#x", w.Swap(), swap)
			}
		}
		for i, s := range wr.SGL {
			if w.SGE(i) != s {
				t.Errorf("SGE %d = %+v, want %+v", i, w.SGE(i), s)
			}
			if got := decodeSpecSGE(raw[80+16*i:]); got != s {
				t.Errorf("SGE %d bytes decode to %+v, want %+v", i, got, s)
			}
		}
	})
}

func decodeSpecSGE(b []byte) verbs.SGE {
	return verbs.SGE{
		Addr:   binary.LittleEndian.Uint64(b[0:]),
		Length: binary.LittleEndian.Uint32(b[8:]),
		LKey:   binary.LittleEndian.Uint32(b[12:]),
	}
}

// FuzzRecvWQE posts arbitrary receive work requests to a QP and an SRQ and
// checks the device's view of them.
func FuzzRecvWQE(f *testing.F) {
	f.Add(uint64(1), uint8(0), uint64(0), false)
	f.Add(uint64(tWRID), uint8(3), uint64(42), true)
	f.Add(^uint64(0), uint8(255), ^uint64(0), false)
	const maxSGE = 3
	qp := newQPEnv(f, qpOpts{cap: verbs.QPCap{MaxSendWR: 1, MaxRecvWR: 4, MaxSendSGE: 1, MaxRecvSGE: maxSGE}, state: verbs.StateRTR})
	srq := newSRQEnv(f, 1, 4, maxSGE)
	f.Fuzz(func(t *testing.T, id uint64, nsge uint8, seed uint64, useSRQ bool) {
		wr := verbs.RecvWR{ID: id, SGL: make([]verbs.SGE, int(nsge)%(maxSGE+1))}
		for i := range wr.SGL {
			v := splitmix64(&seed)
			wr.SGL[i] = verbs.SGE{Addr: splitmix64(&seed), Length: uint32(v), LKey: uint32(v >> 32)}
		}
		var raw []byte
		if useSRQ {
			tail := srq.tail()
			if n, err := srq.srq.PostRecv([]verbs.RecvWR{wr}); n != 1 || err != nil {
				t.Fatalf("SRQ PostRecv = %d, %v", n, err)
			}
			raw = srq.slot(int(tail) % srq.n)
			defer srq.setHead(srq.tail())
		} else {
			tail := qp.rqTail()
			if n, err := qp.qp.PostRecv([]verbs.RecvWR{wr}); n != 1 || err != nil {
				t.Fatalf("PostRecv = %d, %v", n, err)
			}
			raw = qp.rqSlot(int(tail) % qp.layout.RecvWR)
			defer qp.consumeRQ()
		}
		w := RecvWQE(raw)
		if w.WRID() != id || w.NumSGE() != len(wr.SGL) || binary.LittleEndian.Uint32(raw[12:]) != 0 {
			t.Errorf("recv WQE wr_id %#x num_sge %d total_len %d, want %#x %d 0", w.WRID(), w.NumSGE(), binary.LittleEndian.Uint32(raw[12:]), id, len(wr.SGL))
		}
		for i, s := range wr.SGL {
			if w.SGE(i) != s || decodeSpecSGE(raw[16+16*i:]) != s {
				t.Errorf("SGE %d = %+v, want %+v", i, w.SGE(i), s)
			}
		}
	})
}
