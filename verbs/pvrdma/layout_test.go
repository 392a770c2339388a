package pvrdma

import (
	"testing"

	"github.com/pvperf/pvperf/verbs"
)

// The expectations in this file come from the ABI reference
// (uverbs-pvrdma-rxe-abi.md sections 3.2-3.6), not from the code.

func TestABIConstants(t *testing.T) {
	for _, c := range []struct {
		name      string
		got, want int64
	}{
		{"PageSize", PageSize, 4096},
		{"RingSize (pvrdma_ring)", RingSize, 8},
		{"RingStateSize (pvrdma_ring_state)", RingStateSize, 16},
		{"SGESize (pvrdma_sge)", SGESize, 16},
		{"SendHdrSize (pvrdma_sq_wqe_hdr)", SendHdrSize, 80},
		{"RecvHdrSize (pvrdma_rq_wqe_hdr)", RecvHdrSize, 16},
		{"CQESize (pvrdma_cqe)", CQESize, 64},
		{"AVSize (pvrdma_av)", AVSize, 40},
		{"TxRingOffset", TxRingOffset, 0},
		{"RxRingOffset", RxRingOffset, 8},
		{"UARQPOffset", UARQPOffset, 0},
		{"UARCQOffset", UARCQOffset, 4},
		{"UARSRQOffset", UARSRQOffset, 8},
		{"UARHandleMask", int64(UARHandleMask), 0x00FFFFFF},
		{"UARQPSend", int64(UARQPSend), 1 << 30},
		{"UARQPRecv", int64(UARQPRecv), 1 << 31},
		{"UARCQArm", int64(UARCQArm), 1 << 30},
		{"UARCQArmSol", int64(UARCQArmSol), 1 << 29},
		{"UARCQPoll", int64(UARCQPoll), 1 << 31},
		{"UARSRQRecv", int64(UARSRQRecv), 1 << 30},
		{"FlagFence", FlagFence, 1},
		{"FlagSignaled", FlagSignaled, 2},
		{"FlagSolicited", FlagSolicited, 4},
		{"FlagInline", FlagInline, 8},
		{"FlagIPCsum", FlagIPCsum, 16},
		{"WCOpSend", WCOpSend, 0},
		{"WCOpRDMAWrite", WCOpRDMAWrite, 1},
		{"WCOpRDMARead", WCOpRDMARead, 2},
		{"WCOpCompSwap", WCOpCompSwap, 3},
		{"WCOpFetchAdd", WCOpFetchAdd, 4},
		{"WCOpBindMW", WCOpBindMW, 5},
		{"WCOpLSO", WCOpLSO, 6},
		{"WCOpLocalInv", WCOpLocalInv, 7},
		{"WCOpFastRegMR", WCOpFastRegMR, 8},
		{"WCOpMaskedCompSwap", WCOpMaskedCompSwap, 9},
		{"WCOpMaskedFetchAdd", WCOpMaskedFetchAdd, 10},
		{"WCOpRecv", WCOpRecv, 128},
		{"WCOpRecvRDMAWithImm", WCOpRecvRDMAWithImm, 129},
		{"WCFlagGRH", WCFlagGRH, 1},
		{"WCFlagWithImm", WCFlagWithImm, 2},
		{"WCFlagWithInvalidate", WCFlagWithInvalidate, 4},
		{"WCFlagIPCsumOK", WCFlagIPCsumOK, 8},
		{"WCFlagWithSMAC", WCFlagWithSMAC, 16},
		{"WCFlagWithVLAN", WCFlagWithVLAN, 32},
		{"WCFlagWithNetworkHdrType", WCFlagWithNetworkHdrType, 64},
		{"NetworkIB", NetworkIB, 0},
		{"NetworkIPv4", NetworkIPv4, 1},
		{"NetworkIPv6", NetworkIPv6, 2},
	} {
		if c.got != c.want {
			t.Errorf("%s = %#x, want %#x", c.name, c.got, c.want)
		}
	}
}

func TestOpcodeValues(t *testing.T) {
	// pvrdma_wr_opcode (spec 3.5).
	want := []Opcode{
		OpRDMAWrite, OpRDMAWriteWithImm, OpSend, OpSendWithImm, OpRDMARead,
		OpAtomicCmpAndSwp, OpAtomicFetchAndAdd, OpLSO, OpSendWithInv, OpRDMAReadWithInv,
		OpLocalInv, OpFastRegMR, OpMaskedAtomicCmpAndSwp, OpMaskedAtomicFetchAndAdd,
		OpBindMW, OpRegSigMR, OpError,
	}
	for i, op := range want {
		if uint32(op) != uint32(i) {
			t.Errorf("opcode #%d has value %d, want %d", i, op, i)
		}
	}
	// Values 0-6 equal the verbs opcodes, which the driver just casts.
	for _, c := range []struct {
		v verbs.WROpcode
		p Opcode
	}{
		{verbs.OpRDMAWrite, OpRDMAWrite},
		{verbs.OpRDMAWriteImm, OpRDMAWriteWithImm},
		{verbs.OpSend, OpSend},
		{verbs.OpSendImm, OpSendWithImm},
		{verbs.OpRDMARead, OpRDMARead},
		{verbs.OpAtomicCmpSwap, OpAtomicCmpAndSwp},
		{verbs.OpAtomicFetchAdd, OpAtomicFetchAndAdd},
	} {
		if uint32(c.v) != uint32(c.p) {
			t.Errorf("verbs %v = %d, pvrdma = %d", c.v, c.v, c.p)
		}
	}
}

func TestRoundPow2(t *testing.T) {
	for _, c := range []struct{ in, want int }{
		{-5, 1}, {0, 1}, {1, 1}, {2, 2}, {3, 4}, {4, 4}, {5, 8}, {7, 8}, {8, 8}, {9, 16},
		{100, 128}, {1000, 1024}, {1024, 1024}, {1025, 2048}, {65535, 65536}, {1 << 20, 1 << 20},
	} {
		if got := RoundPow2(c.in); got != c.want {
			t.Errorf("RoundPow2(%d) = %d, want %d", c.in, got, c.want)
		}
	}
}

func TestStrides(t *testing.T) {
	// Spec 3.4: SQ WQE size = next_pow2(80 + 16*max_send_sge):
	// max_send_sge 1-3 -> 128 B; 4-11 -> 256 B (12 -> 512 B).
	for sge, want := range map[int]int{1: 128, 2: 128, 3: 128, 4: 256, 5: 256, 8: 256, 11: 256, 12: 512, 27: 512, 28: 1024} {
		if got := SendStride(sge, 0); got != want {
			t.Errorf("SendStride(%d, 0) = %d, want %d", sge, got, want)
		}
		l := NewQPLayout(verbs.QPCap{MaxSendWR: 1, MaxRecvWR: 1, MaxSendSGE: sge, MaxRecvSGE: 1}, false)
		if l.SendStride != want {
			t.Errorf("NewQPLayout(max_send_sge %d).SendStride = %d, want %d", sge, l.SendStride, want)
		}
	}
	// RQ WQE size = next_pow2(16 + 16*max_recv_sge):
	// max_recv_sge 1 -> 32 B; 2-3 -> 64 B; 4-7 -> 128 B (8 -> 256 B).
	for sge, want := range map[int]int{1: 32, 2: 64, 3: 64, 4: 128, 5: 128, 6: 128, 7: 128, 8: 256, 15: 256, 16: 512} {
		if got := RecvStride(sge); got != want {
			t.Errorf("RecvStride(%d) = %d, want %d", sge, got, want)
		}
		l := NewQPLayout(verbs.QPCap{MaxSendWR: 1, MaxRecvWR: 1, MaxSendSGE: 1, MaxRecvSGE: sge}, false)
		if l.RecvStride != want {
			t.Errorf("NewQPLayout(max_recv_sge %d).RecvStride = %d, want %d", sge, l.RecvStride, want)
		}
	}
}

func TestNewQPLayout(t *testing.T) {
	for _, c := range []struct {
		cap  verbs.QPCap
		srq  bool
		want QPLayout
	}{
		// max_*_wr rounded up to powers of two (>= 1); send buffer = ring
		// page + N*stride page-aligned; receive buffer = N*stride aligned.
		{verbs.QPCap{MaxSendWR: 0, MaxRecvWR: 0, MaxSendSGE: 1, MaxRecvSGE: 1}, false,
			QPLayout{SendWR: 1, SendStride: 128, RecvWR: 1, RecvStride: 32, SendBufLen: 8192, RecvBufLen: 4096}},
		{verbs.QPCap{MaxSendWR: 1, MaxRecvWR: 1, MaxSendSGE: 1, MaxRecvSGE: 1}, false,
			QPLayout{SendWR: 1, SendStride: 128, RecvWR: 1, RecvStride: 32, SendBufLen: 8192, RecvBufLen: 4096}},
		{verbs.QPCap{MaxSendWR: 3, MaxRecvWR: 5, MaxSendSGE: 3, MaxRecvSGE: 2}, false,
			QPLayout{SendWR: 4, SendStride: 128, RecvWR: 8, RecvStride: 64, SendBufLen: 8192, RecvBufLen: 4096}},
		{verbs.QPCap{MaxSendWR: 32, MaxRecvWR: 128, MaxSendSGE: 1, MaxRecvSGE: 1}, false,
			// 4096 + 32*128 = 8192 exactly; 128*32 = 4096 exactly.
			QPLayout{SendWR: 32, SendStride: 128, RecvWR: 128, RecvStride: 32, SendBufLen: 8192, RecvBufLen: 4096}},
		{verbs.QPCap{MaxSendWR: 33, MaxRecvWR: 129, MaxSendSGE: 1, MaxRecvSGE: 1}, false,
			// 4096 + 64*128 = 12288; 256*32 = 8192.
			QPLayout{SendWR: 64, SendStride: 128, RecvWR: 256, RecvStride: 32, SendBufLen: 12288, RecvBufLen: 8192}},
		{verbs.QPCap{MaxSendWR: 100, MaxRecvWR: 129, MaxSendSGE: 4, MaxRecvSGE: 4}, false,
			// 4096 + 128*256 = 36864; 256*128 = 32768.
			QPLayout{SendWR: 128, SendStride: 256, RecvWR: 256, RecvStride: 128, SendBufLen: 36864, RecvBufLen: 32768}},
		{verbs.QPCap{MaxSendWR: 17, MaxRecvWR: 3, MaxSendSGE: 12, MaxRecvSGE: 8}, false,
			// 4096 + 32*512 = 20480; 4*256 = 1024 -> 4096.
			QPLayout{SendWR: 32, SendStride: 512, RecvWR: 4, RecvStride: 256, SendBufLen: 20480, RecvBufLen: 4096}},
		{verbs.QPCap{MaxSendWR: 1000, MaxRecvWR: 1000, MaxSendSGE: 11, MaxRecvSGE: 7}, false,
			// 4096 + 1024*256 = 266240; 1024*128 = 131072.
			QPLayout{SendWR: 1024, SendStride: 256, RecvWR: 1024, RecvStride: 128, SendBufLen: 266240, RecvBufLen: 131072}},
		// With an SRQ: no receive queue and no receive buffer, whatever
		// the receive capabilities say.
		{verbs.QPCap{MaxSendWR: 16, MaxRecvWR: 0, MaxSendSGE: 2, MaxRecvSGE: 0}, true,
			QPLayout{SendWR: 16, SendStride: 128, SendBufLen: 8192}},
		{verbs.QPCap{MaxSendWR: 5, MaxRecvWR: 64, MaxSendSGE: 4, MaxRecvSGE: 4}, true,
			QPLayout{SendWR: 8, SendStride: 256, SendBufLen: 8192}},
	} {
		got := NewQPLayout(c.cap, c.srq)
		if got != c.want {
			t.Errorf("NewQPLayout(%+v, srq=%v) = %+v, want %+v", c.cap, c.srq, got, c.want)
		}
		if got.SendBufLen%PageSize != 0 || got.RecvBufLen%PageSize != 0 {
			t.Errorf("NewQPLayout(%+v): buffer lengths %d/%d not page-aligned", c.cap, got.SendBufLen, got.RecvBufLen)
		}
	}
}

func TestCQBufLen(t *testing.T) {
	// align(4096 + cqe*64, 4096).
	for n, want := range map[int]int{1: 8192, 2: 8192, 63: 8192, 64: 8192, 65: 12288, 128: 12288, 256: 20480, 4096: 266240} {
		if got := CQBufLen(n); got != want {
			t.Errorf("CQBufLen(%d) = %d, want %d", n, got, want)
		}
	}
}

func TestSRQBufLen(t *testing.T) {
	// Page 0 holds the ring state, WQEs from 4096: 4096 + align(N*stride).
	for _, c := range []struct{ n, stride, want int }{
		{1, 32, 8192},
		{16, 32, 8192},
		{128, 32, 8192},
		{129, 32, 12288},
		{128, 64, 12288},
		{1024, 128, 135168},
		{64, 256, 20480},
	} {
		if got := SRQBufLen(c.n, c.stride); got != c.want {
			t.Errorf("SRQBufLen(%d, %d) = %d, want %d", c.n, c.stride, got, c.want)
		}
	}
}

// avVector is the pvrdma_av of avAttr/avPDN/avDMAC, written out from the
// spec table (spec 3.5, pvrdma_av).
var (
	avAttr = verbs.AHAttr{
		GRH: verbs.GRH{
			DGID:         verbs.GID{0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0x02, 0x11, 0x22, 0xff, 0xfe, 0x33, 0x44, 0x55},
			FlowLabel:    0xABCDE,
			SGIDIndex:    2,
			HopLimit:     64,
			TrafficClass: 0x5A,
		},
		SrcPathBits: 0x03,
		IsGlobal:    true,
		Port:        1,
	}
	avPDN  = uint32(0x000A0B)
	avDMAC = [6]byte{0x00, 0x11, 0x22, 0x33, 0x44, 0x55}
)

func avVector(tb testing.TB) []byte {
	return layout(tb, 40,
		at(0, 0x0b, 0x0a, 0x00, 0x01), // port_pd = pdn 0x000a0b | port 1 << 24
		at(4, 0xde, 0xbc, 0xaa, 0x05), // sl_tclass_flowlabel = tclass 0x5a << 20 | flow 0xabcde
		at(8, 0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0x02, 0x11, 0x22, 0xff, 0xfe, 0x33, 0x44, 0x55), // dgid, raw
		at(24, 0x83), // src_path_bits 0x03 | 0x80 (GRH)
		at(25, 0x02), // gid_index
		at(26, 0x00), // stat_rate 0
		at(27, 0x40), // hop_limit 64
		at(28, 0x00, 0x11, 0x22, 0x33, 0x44, 0x55), // dmac
		at(34, 0, 0, 0, 0, 0, 0),                   // reserved
	)
}

func TestAVEncoding(t *testing.T) {
	want := avVector(t)
	ah := NewAH(avAttr, avPDN, avDMAC)
	if ah.Attr() != avAttr {
		t.Errorf("AH.Attr() = %+v, want %+v", ah.Attr(), avAttr)
	}
	av := ah.AddressVector()
	wantAV := AV{
		PortPD:            0x01000A0B,
		SLTClassFlowLabel: 0x05AABCDE,
		DGID:              avAttr.GRH.DGID,
		SrcPathBits:       0x83,
		GIDIndex:          2,
		StatRate:          0,
		HopLimit:          64,
		DMAC:              avDMAC,
	}
	if *av != wantAV {
		t.Errorf("NewAH AV = %+v, want %+v", *av, wantAV)
	}
	got := make([]byte, 40)
	for i := range got {
		got[i] = 0xee // Encode must write every byte, reserved ones as 0
	}
	av.Encode(got)
	diffBytes(t, "AV.Encode", got, want)
	if d := DecodeAV(want); d != wantAV {
		t.Errorf("DecodeAV = %+v, want %+v", d, wantAV)
	}
	// A port above 1 and a large PD number: port in the top byte.
	ah2 := NewAH(verbs.AHAttr{Port: 2, GRH: verbs.GRH{TrafficClass: 0xff, FlowLabel: 0xfffff}}, 0x00FFFFFF, [6]byte{})
	if got := ah2.AddressVector().PortPD; got != 0x02FFFFFF {
		t.Errorf("port_pd for pdn 0xffffff port 2 = %#x, want 0x2ffffff", got)
	}
	if got := ah2.AddressVector().SLTClassFlowLabel; got != 0x0FFFFFFF {
		t.Errorf("sl_tclass_flowlabel for tclass 0xff flow 0xfffff = %#x, want 0xfffffff", got)
	}
	if got := ah2.AddressVector().SrcPathBits; got != 0x80 {
		t.Errorf("src_path_bits without path bits = %#x, want 0x80", got)
	}
}

func TestMACFromGID(t *testing.T) {
	// Link-local EUI-64 GID: MAC = dgid[8..10] ‖ dgid[13..15], bit 0x02 of
	// the first byte flipped.
	g := verbs.GID{0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0x02, 0x11, 0x22, 0xff, 0xfe, 0x33, 0x44, 0x55}
	if got, want := MACFromGID(g), [6]byte{0x00, 0x11, 0x22, 0x33, 0x44, 0x55}; got != want {
		t.Errorf("MACFromGID(%v) = % x, want % x", g, got, want)
	}
	g = verbs.GID{0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0x50, 0x6b, 0x8d, 0xff, 0xfe, 0x01, 0x02, 0x03}
	if got, want := MACFromGID(g), [6]byte{0x52, 0x6b, 0x8d, 0x01, 0x02, 0x03}; got != want {
		t.Errorf("MACFromGID(%v) = % x, want % x", g, got, want)
	}
}

// cqeVector is a pvrdma_cqe written out from the spec table (spec 3.5).
func cqeVector(tb testing.TB) []byte {
	return layout(tb, 64,
		at(0, 0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11), // wr_id 0x1122334455667788
		at(8, 0x03, 0x02, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00), // qp 0x010203 (handle & 0xffff = 0x0203)
		at(16, 0x81, 0x00, 0x00, 0x00),                        // opcode 129 RECV_RDMA_WITH_IMM
		at(20, 0x05, 0x00, 0x00, 0x00),                        // status 5 WR_FLUSH_ERR
		at(24, 0x00, 0x00, 0x01, 0x00),                        // byte_len 0x10000
		at(28, 0xde, 0xad, 0xbe, 0xef),                        // imm_data 0xdeadbeef, big-endian
		at(32, 0xef, 0xcd, 0xab, 0x00),                        // src_qp 0xabcdef
		at(36, 0x43, 0x00, 0x00, 0x00),                        // wc_flags GRH|WITH_IMM|WITH_NETWORK_HDR_TYPE
		at(40, 0x0d, 0xf0, 0xad, 0x8b),                        // vendor_err 0x8badf00d
		at(44, 0x02, 0x01),                                    // pkey_index 0x0102
		at(46, 0x01, 0xc0),                                    // slid 0xc001
		at(48, 0x07),                                          // sl 7
		at(49, 0x3f),                                          // dlid_path_bits 0x3f
		at(50, 0x01),                                          // port_num 1
		at(51, 0x02, 0x11, 0x22, 0x33, 0x44, 0x55),            // smac
		at(57, 0x02),                                          // network_hdr_type 2 (IPv6)
		at(58, 0, 0, 0, 0, 0, 0),                              // reserved
	)
}

var cqeValue = CQE{
	WRID:           0x1122334455667788,
	QP:             0x010203,
	Opcode:         WCOpRecvRDMAWithImm,
	Status:         5,
	ByteLen:        0x10000,
	Imm:            0xdeadbeef,
	SrcQP:          0xabcdef,
	Flags:          WCFlagGRH | WCFlagWithImm | WCFlagWithNetworkHdrType,
	VendorErr:      0x8badf00d,
	PKeyIndex:      0x0102,
	SLID:           0xc001,
	SL:             7,
	DLIDPathBits:   0x3f,
	Port:           1,
	SMAC:           [6]byte{0x02, 0x11, 0x22, 0x33, 0x44, 0x55},
	NetworkHdrType: NetworkIPv6,
}

func TestCQEEncoding(t *testing.T) {
	want := cqeVector(t)
	got := make([]byte, 64)
	for i := range got {
		got[i] = 0xee // Encode must write every byte, reserved ones as 0
	}
	c := cqeValue
	c.Encode(got)
	diffBytes(t, "CQE.Encode", got, want)
	if d := decodeCQE(want); d != cqeValue {
		t.Errorf("decodeCQE = %+v, want %+v", d, cqeValue)
	}
	// Reserved bytes are ignored when decoding.
	dirty := append([]byte(nil), want...)
	for i := 58; i < 64; i++ {
		dirty[i] = 0xff
	}
	if d := decodeCQE(dirty); d != cqeValue {
		t.Errorf("decodeCQE with reserved bytes set = %+v, want %+v", d, cqeValue)
	}
	// Round trip of extreme values.
	for _, c := range []CQE{
		{},
		{WRID: ^uint64(0), QP: ^uint64(0), Opcode: ^uint32(0), Status: ^uint32(0), ByteLen: ^uint32(0), Imm: ^uint32(0),
			SrcQP: ^uint32(0), Flags: ^uint32(0), VendorErr: ^uint32(0), PKeyIndex: 0xffff, SLID: 0xffff, SL: 0xff,
			DLIDPathBits: 0xff, Port: 0xff, SMAC: [6]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, NetworkHdrType: 0xff},
		{Imm: 0x01020304, Opcode: WCOpRecv, Flags: WCFlagWithImm},
	} {
		var b [64]byte
		c.Encode(b[:])
		if d := decodeCQE(b[:]); d != c {
			t.Errorf("round trip of %+v gave %+v", c, d)
		}
	}
	// imm_data is stored big-endian: 0x01020304 -> 01 02 03 04 @28.
	var b [64]byte
	(&CQE{Imm: 0x01020304}).Encode(b[:])
	diffBytes(t, "imm_data bytes", b[28:32], []byte{1, 2, 3, 4})
}

func TestSendWQEAccessors(t *testing.T) {
	// A CMP_AND_SWP WQE written out from the spec table.
	w := SendWQE(layout(t, 128,
		at(0, 0x08, 0x07, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01),  // wr_id 0x0102030405060708
		at(8, 0x01, 0x00, 0x00, 0x00),                          // num_sge 1
		at(12, 0x09, 0x00, 0x00, 0x00),                         // total_len 9
		at(16, 0x05, 0x00, 0x00, 0x00),                         // opcode ATOMIC_CMP_AND_SWP
		at(20, 0x12, 0x00, 0x00, 0x00),                         // send_flags SIGNALED|IP_CSUM
		at(24, 0xca, 0xfe, 0xf0, 0x0d),                         // imm_data 0xcafef00d big-endian
		at(32, 0x08, 0x70, 0x56, 0x34, 0x12, 0x7f, 0x00, 0x00), // remote_addr 0x7f1234567008
		at(40, 0x44, 0x44, 0x33, 0x33, 0x22, 0x22, 0x11, 0x11), // compare_add
		at(48, 0x88, 0x88, 0x77, 0x77, 0x66, 0x66, 0x55, 0x55), // swap
		at(56, 0xd0, 0xc0, 0xb0, 0xa0),                         // rkey
		at(80, 0x00, 0xb0, 0xad, 0xde, 0x00, 0x7f, 0x00, 0x00), // sge[0].addr
		at(88, 0x08, 0x00, 0x00, 0x00),                         // sge[0].length
		at(92, 0x44, 0x33, 0x22, 0x11),                         // sge[0].lkey
	))
	check := func(name string, got, want uint64) {
		t.Helper()
		if got != want {
			t.Errorf("%s = %#x, want %#x", name, got, want)
		}
	}
	check("WRID", w.WRID(), 0x0102030405060708)
	check("NumSGE", uint64(w.NumSGE()), 1)
	check("TotalLen", uint64(w.TotalLen()), 9)
	check("Opcode", uint64(w.Opcode()), uint64(OpAtomicCmpAndSwp))
	check("Flags", uint64(w.Flags()), FlagSignaled|FlagIPCsum)
	check("Imm", uint64(w.Imm()), 0xcafef00d)
	check("AtomicAddr", w.AtomicAddr(), 0x7f1234567008)
	check("RemoteAddr", w.RemoteAddr(), 0x7f1234567008)
	check("CompareAdd", w.CompareAdd(), 0x1111222233334444)
	check("Swap", w.Swap(), 0x5555666677778888)
	check("AtomicRKey", uint64(w.AtomicRKey()), 0xa0b0c0d0)
	if got, want := w.SGE(0), (verbs.SGE{Addr: 0x7f00deadb000, Length: 8, LKey: 0x11223344}); got != want {
		t.Errorf("SGE(0) = %+v, want %+v", got, want)
	}

	// An RDMA WQE: rkey @40.
	w = SendWQE(layout(t, 128,
		at(32, 0x00, 0x70, 0x56, 0x34, 0x12, 0x7f, 0x00, 0x00), // remote_addr
		at(40, 0xd0, 0xc0, 0xb0, 0xa0),                         // rkey
	))
	check("RemoteAddr", w.RemoteAddr(), 0x7f1234567000)
	check("RKey", uint64(w.RKey()), 0xa0b0c0d0)

	// A UD WQE: remote_qpn @32, remote_qkey @36, av @40.
	fields := []fld{
		at(32, 0x56, 0x34, 0x12, 0x00), // remote_qpn 0x123456
		at(36, 0x00, 0x00, 0x01, 0x80), // remote_qkey 0x80010000
	}
	for i, b := range avVector(t) {
		fields = append(fields, at(40+i, b))
	}
	w = SendWQE(layout(t, 128, fields...))
	check("RemoteQPN", uint64(w.RemoteQPN()), 0x123456)
	check("RemoteQKey", uint64(w.RemoteQKey()), 0x80010000)
	if got, want := w.AV(), *NewAH(avAttr, avPDN, avDMAC).AddressVector(); got != want {
		t.Errorf("AV() = %+v, want %+v", got, want)
	}

	// Inline payload sits where the SGE array would be.
	w = SendWQE(layout(t, 128, at(80, 'h', 'e', 'l', 'l', 'o')))
	if got := string(w.Inline(5)); got != "hello" {
		t.Errorf("Inline(5) = %q, want %q", got, "hello")
	}
}

func TestRecvWQEAccessors(t *testing.T) {
	w := RecvWQE(layout(t, 64,
		at(0, 0x08, 0x07, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01),  // wr_id
		at(8, 0x02, 0x00, 0x00, 0x00),                          // num_sge 2
		at(16, 0x00, 0xb0, 0xad, 0xde, 0x00, 0x7f, 0x00, 0x00), // sge[0].addr
		at(24, 0x00, 0x04, 0x00, 0x00),                         // sge[0].length
		at(28, 0x44, 0x33, 0x22, 0x11),                         // sge[0].lkey
		at(32, 0xef, 0xcd, 0xab, 0x89, 0x67, 0x45, 0x23, 0x01), // sge[1].addr
		at(40, 0xff, 0xff, 0xff, 0xff),                         // sge[1].length
		at(44, 0x04, 0x03, 0x02, 0x01),                         // sge[1].lkey
	))
	if got := w.WRID(); got != 0x0102030405060708 {
		t.Errorf("WRID = %#x", got)
	}
	if got := w.NumSGE(); got != 2 {
		t.Errorf("NumSGE = %d", got)
	}
	if got, want := w.SGE(0), (verbs.SGE{Addr: 0x7f00deadb000, Length: 0x400, LKey: 0x11223344}); got != want {
		t.Errorf("SGE(0) = %+v, want %+v", got, want)
	}
	if got, want := w.SGE(1), (verbs.SGE{Addr: 0x0123456789abcdef, Length: 0xffffffff, LKey: 0x01020304}); got != want {
		t.Errorf("SGE(1) = %+v, want %+v", got, want)
	}
}
