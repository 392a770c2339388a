package pvrdma

import (
	"bytes"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/pvperf/pvperf/internal/unix"
	"github.com/pvperf/pvperf/verbs"
)

// testAH is a verbs.AH backed by a pvrdma AV, as a backend's AH is.
type testAH struct{ *AH }

func (testAH) Close() error { return nil }

// foreignAH is an address handle of some other device: no pvrdma AV.
type foreignAH struct{}

func (foreignAH) Attr() verbs.AHAttr { return verbs.AHAttr{} }
func (foreignAH) Close() error       { return nil }

// Values used by the WQE layout tests, with their little-endian bytes in the
// expected layouts below.
const (
	tWRID   = 0x0102030405060708 // 08 07 06 05 04 03 02 01
	tRAddr  = 0x00007f1234567000 // 00 70 56 34 12 7f 00 00
	tRKey   = 0xa0b0c0d0         // d0 c0 b0 a0
	tImm    = 0xcafef00d         // big-endian on the wire: ca fe f0 0d
	tCmp    = 0x1111222233334444 // 44 44 33 33 22 22 11 11
	tSwap   = 0x5555666677778888 // 88 88 77 77 66 66 55 55
	tQPN    = 0x00123456         // 56 34 12 00
	tQKey   = 0x80010000         // 00 00 01 80
	tHandle = 0x00abcdef
)

var (
	tSGE0 = verbs.SGE{Addr: 0x00007f00deadb000, Length: 0x400, LKey: 0x11223344}
	tSGE1 = verbs.SGE{Addr: 0x0123456789abcdef, Length: 0xffffffff, LKey: 0x01020304}
)

func TestPostSendWQELayout(t *testing.T) {
	cases := []struct {
		name string
		typ  verbs.QPType
		wr   verbs.SendWR
		want func(tb testing.TB) []byte // the 128-byte slot
	}{
		{
			name: "RDMA_WRITE",
			wr: verbs.SendWR{ID: tWRID, Opcode: verbs.OpRDMAWrite, Flags: verbs.SendSignaled,
				SGL: []verbs.SGE{tSGE0}, RemoteAddr: tRAddr, RKey: tRKey},
			want: func(tb testing.TB) []byte {
				return layout(tb, 128,
					at(0, 0x08, 0x07, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01),  // wr_id
					at(8, 0x01, 0x00, 0x00, 0x00),                          // num_sge 1
					at(12, 0x00, 0x00, 0x00, 0x00),                         // total_len (reserved) 0
					at(16, 0x00, 0x00, 0x00, 0x00),                         // opcode RDMA_WRITE 0
					at(20, 0x02, 0x00, 0x00, 0x00),                         // send_flags SIGNALED
					at(24, 0x00, 0x00, 0x00, 0x00),                         // imm_data (unused)
					at(28, 0x00, 0x00, 0x00, 0x00),                         // reserved
					at(32, 0x00, 0x70, 0x56, 0x34, 0x12, 0x7f, 0x00, 0x00), // wr.rdma.remote_addr
					at(40, 0xd0, 0xc0, 0xb0, 0xa0),                         // wr.rdma.rkey
					at(44, 0x00, 0x00, 0x00, 0x00),                         // wr.rdma.reserved
					at(80, 0x00, 0xb0, 0xad, 0xde, 0x00, 0x7f, 0x00, 0x00), // sge[0].addr
					at(88, 0x00, 0x04, 0x00, 0x00),                         // sge[0].length 0x400
					at(92, 0x44, 0x33, 0x22, 0x11),                         // sge[0].lkey
				)
			},
		},
		{
			name: "RDMA_WRITE_WITH_IMM",
			wr: verbs.SendWR{ID: tWRID, Opcode: verbs.OpRDMAWriteImm, Flags: verbs.SendSignaled | verbs.SendSolicited,
				SGL: []verbs.SGE{tSGE0, tSGE1}, Imm: tImm, RemoteAddr: tRAddr, RKey: tRKey},
			want: func(tb testing.TB) []byte {
				return layout(tb, 128,
					at(0, 0x08, 0x07, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01),  // wr_id
					at(8, 0x02, 0x00, 0x00, 0x00),                          // num_sge 2
					at(12, 0x00, 0x00, 0x00, 0x00),                         // total_len 0
					at(16, 0x01, 0x00, 0x00, 0x00),                         // opcode RDMA_WRITE_WITH_IMM 1
					at(20, 0x06, 0x00, 0x00, 0x00),                         // send_flags SIGNALED|SOLICITED
					at(24, 0xca, 0xfe, 0xf0, 0x0d),                         // imm_data, big-endian
					at(28, 0x00, 0x00, 0x00, 0x00),                         // reserved
					at(32, 0x00, 0x70, 0x56, 0x34, 0x12, 0x7f, 0x00, 0x00), // wr.rdma.remote_addr
					at(40, 0xd0, 0xc0, 0xb0, 0xa0),                         // wr.rdma.rkey
					at(80, 0x00, 0xb0, 0xad, 0xde, 0x00, 0x7f, 0x00, 0x00), // sge[0].addr
					at(88, 0x00, 0x04, 0x00, 0x00),                         // sge[0].length
					at(92, 0x44, 0x33, 0x22, 0x11),                         // sge[0].lkey
					at(96, 0xef, 0xcd, 0xab, 0x89, 0x67, 0x45, 0x23, 0x01), // sge[1].addr
					at(104, 0xff, 0xff, 0xff, 0xff),                        // sge[1].length
					at(108, 0x04, 0x03, 0x02, 0x01),                        // sge[1].lkey
				)
			},
		},
		{
			name: "SEND",
			wr: verbs.SendWR{ID: tWRID, Opcode: verbs.OpSend, Flags: verbs.SendFence | verbs.SendSignaled,
				SGL: []verbs.SGE{tSGE0}},
			want: func(tb testing.TB) []byte {
				return layout(tb, 128,
					at(0, 0x08, 0x07, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01),  // wr_id
					at(8, 0x01, 0x00, 0x00, 0x00),                          // num_sge 1
					at(12, 0x00, 0x00, 0x00, 0x00),                         // total_len 0
					at(16, 0x02, 0x00, 0x00, 0x00),                         // opcode SEND 2
					at(20, 0x03, 0x00, 0x00, 0x00),                         // send_flags FENCE|SIGNALED
					at(24, 0x00, 0x00, 0x00, 0x00),                         // imm_data (unused)
					at(32, make([]byte, 48)...),                            // union: nothing for an RC send
					at(80, 0x00, 0xb0, 0xad, 0xde, 0x00, 0x7f, 0x00, 0x00), // sge[0].addr
					at(88, 0x00, 0x04, 0x00, 0x00),                         // sge[0].length
					at(92, 0x44, 0x33, 0x22, 0x11),                         // sge[0].lkey
				)
			},
		},
		{
			name: "SEND_WITH_IMM",
			wr:   verbs.SendWR{ID: tWRID, Opcode: verbs.OpSendImm, SGL: []verbs.SGE{tSGE0}, Imm: 1},
			want: func(tb testing.TB) []byte {
				return layout(tb, 128,
					at(0, 0x08, 0x07, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01),  // wr_id
					at(8, 0x01, 0x00, 0x00, 0x00),                          // num_sge 1
					at(16, 0x03, 0x00, 0x00, 0x00),                         // opcode SEND_WITH_IMM 3
					at(20, 0x00, 0x00, 0x00, 0x00),                         // send_flags: unsignaled
					at(24, 0x00, 0x00, 0x00, 0x01),                         // imm_data 1, big-endian
					at(80, 0x00, 0xb0, 0xad, 0xde, 0x00, 0x7f, 0x00, 0x00), // sge[0].addr
					at(88, 0x00, 0x04, 0x00, 0x00),                         // sge[0].length
					at(92, 0x44, 0x33, 0x22, 0x11),                         // sge[0].lkey
				)
			},
		},
		{
			name: "RDMA_READ",
			wr: verbs.SendWR{ID: tWRID, Opcode: verbs.OpRDMARead, Flags: verbs.SendSignaled,
				SGL: []verbs.SGE{tSGE0}, RemoteAddr: tRAddr, RKey: tRKey},
			want: func(tb testing.TB) []byte {
				return layout(tb, 128,
					at(0, 0x08, 0x07, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01),  // wr_id
					at(8, 0x01, 0x00, 0x00, 0x00),                          // num_sge 1
					at(16, 0x04, 0x00, 0x00, 0x00),                         // opcode RDMA_READ 4
					at(20, 0x02, 0x00, 0x00, 0x00),                         // send_flags SIGNALED
					at(32, 0x00, 0x70, 0x56, 0x34, 0x12, 0x7f, 0x00, 0x00), // wr.rdma.remote_addr
					at(40, 0xd0, 0xc0, 0xb0, 0xa0),                         // wr.rdma.rkey
					at(80, 0x00, 0xb0, 0xad, 0xde, 0x00, 0x7f, 0x00, 0x00), // sge[0].addr
					at(88, 0x00, 0x04, 0x00, 0x00),                         // sge[0].length
					at(92, 0x44, 0x33, 0x22, 0x11),                         // sge[0].lkey
				)
			},
		},
		{
			name: "ATOMIC_CMP_AND_SWP",
			wr: verbs.SendWR{ID: tWRID, Opcode: verbs.OpAtomicCmpSwap, Flags: verbs.SendSignaled,
				SGL:        []verbs.SGE{{Addr: 0x7f00deadb000, Length: 8, LKey: 0x11223344}},
				RemoteAddr: tRAddr + 8, RKey: tRKey, CompareAdd: tCmp, Swap: tSwap},
			want: func(tb testing.TB) []byte {
				return layout(tb, 128,
					at(0, 0x08, 0x07, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01),  // wr_id
					at(8, 0x01, 0x00, 0x00, 0x00),                          // num_sge 1
					at(16, 0x05, 0x00, 0x00, 0x00),                         // opcode ATOMIC_CMP_AND_SWP 5
					at(20, 0x02, 0x00, 0x00, 0x00),                         // send_flags SIGNALED
					at(32, 0x08, 0x70, 0x56, 0x34, 0x12, 0x7f, 0x00, 0x00), // wr.atomic.remote_addr
					at(40, 0x44, 0x44, 0x33, 0x33, 0x22, 0x22, 0x11, 0x11), // wr.atomic.compare_add
					at(48, 0x88, 0x88, 0x77, 0x77, 0x66, 0x66, 0x55, 0x55), // wr.atomic.swap
					at(56, 0xd0, 0xc0, 0xb0, 0xa0),                         // wr.atomic.rkey
					at(60, 0x00, 0x00, 0x00, 0x00),                         // wr.atomic.reserved
					at(80, 0x00, 0xb0, 0xad, 0xde, 0x00, 0x7f, 0x00, 0x00), // sge[0].addr
					at(88, 0x08, 0x00, 0x00, 0x00),                         // sge[0].length 8
					at(92, 0x44, 0x33, 0x22, 0x11),                         // sge[0].lkey
				)
			},
		},
		{
			name: "ATOMIC_FETCH_AND_ADD",
			wr: verbs.SendWR{ID: tWRID, Opcode: verbs.OpAtomicFetchAdd, Flags: verbs.SendSignaled,
				SGL:        []verbs.SGE{{Addr: 0x7f00deadb000, Length: 8, LKey: 0x11223344}},
				RemoteAddr: tRAddr + 8, RKey: tRKey, CompareAdd: 0x0000000000000102},
			want: func(tb testing.TB) []byte {
				return layout(tb, 128,
					at(0, 0x08, 0x07, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01),  // wr_id
					at(8, 0x01, 0x00, 0x00, 0x00),                          // num_sge 1
					at(16, 0x06, 0x00, 0x00, 0x00),                         // opcode ATOMIC_FETCH_AND_ADD 6
					at(20, 0x02, 0x00, 0x00, 0x00),                         // send_flags SIGNALED
					at(32, 0x08, 0x70, 0x56, 0x34, 0x12, 0x7f, 0x00, 0x00), // wr.atomic.remote_addr
					at(40, 0x02, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00), // wr.atomic.compare_add (addend)
					at(48, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00), // wr.atomic.swap (unused)
					at(56, 0xd0, 0xc0, 0xb0, 0xa0),                         // wr.atomic.rkey
					at(80, 0x00, 0xb0, 0xad, 0xde, 0x00, 0x7f, 0x00, 0x00), // sge[0].addr
					at(88, 0x08, 0x00, 0x00, 0x00),                         // sge[0].length 8
					at(92, 0x44, 0x33, 0x22, 0x11),                         // sge[0].lkey
				)
			},
		},
		{
			name: "UD SEND_WITH_IMM",
			typ:  verbs.UD,
			wr: verbs.SendWR{ID: tWRID, Opcode: verbs.OpSendImm, Flags: verbs.SendSignaled | verbs.SendSolicited,
				SGL: []verbs.SGE{tSGE0}, Imm: tImm, AH: testAH{NewAH(avAttr, avPDN, avDMAC)}, RemoteQPN: tQPN, RemoteQKey: tQKey},
			want: func(tb testing.TB) []byte {
				return layout(tb, 128,
					at(0, 0x08, 0x07, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01),  // wr_id
					at(8, 0x01, 0x00, 0x00, 0x00),                          // num_sge 1
					at(12, 0x00, 0x00, 0x00, 0x00),                         // total_len 0
					at(16, 0x03, 0x00, 0x00, 0x00),                         // opcode SEND_WITH_IMM 3
					at(20, 0x06, 0x00, 0x00, 0x00),                         // send_flags SIGNALED|SOLICITED
					at(24, 0xca, 0xfe, 0xf0, 0x0d),                         // imm_data, big-endian
					at(28, 0x00, 0x00, 0x00, 0x00),                         // reserved
					at(32, 0x56, 0x34, 0x12, 0x00),                         // wr.ud.remote_qpn 0x123456
					at(36, 0x00, 0x00, 0x01, 0x80),                         // wr.ud.remote_qkey 0x80010000
					at(40, 0x0b, 0x0a, 0x00, 0x01),                         // av.port_pd: pdn 0xa0b | port 1 << 24
					at(44, 0xde, 0xbc, 0xaa, 0x05),                         // av.sl_tclass_flowlabel: 0x5a << 20 | 0xabcde
					at(48, 0xfe, 0x80, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00), // av.dgid[0:8]
					at(56, 0x02, 0x11, 0x22, 0xff, 0xfe, 0x33, 0x44, 0x55), // av.dgid[8:16]
					at(64, 0x83), // av.src_path_bits 0x03 | 0x80
					at(65, 0x02), // av.gid_index 2
					at(66, 0x00), // av.stat_rate 0
					at(67, 0x40), // av.hop_limit 64
					at(68, 0x00, 0x11, 0x22, 0x33, 0x44, 0x55),             // av.dmac
					at(74, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00),             // av.reserved
					at(80, 0x00, 0xb0, 0xad, 0xde, 0x00, 0x7f, 0x00, 0x00), // sge[0].addr
					at(88, 0x00, 0x04, 0x00, 0x00),                         // sge[0].length
					at(92, 0x44, 0x33, 0x22, 0x11),                         // sge[0].lkey
				)
			},
		},
		{
			name: "UD SEND",
			typ:  verbs.UD,
			wr: verbs.SendWR{ID: tWRID, Opcode: verbs.OpSend, Flags: verbs.SendSignaled,
				SGL: []verbs.SGE{tSGE0}, AH: testAH{NewAH(avAttr, avPDN, avDMAC)}, RemoteQPN: tQPN, RemoteQKey: tQKey},
			want: func(tb testing.TB) []byte {
				fields := []fld{
					at(0, 0x08, 0x07, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01),  // wr_id
					at(8, 0x01, 0x00, 0x00, 0x00),                          // num_sge 1
					at(16, 0x02, 0x00, 0x00, 0x00),                         // opcode SEND 2
					at(20, 0x02, 0x00, 0x00, 0x00),                         // send_flags SIGNALED
					at(32, 0x56, 0x34, 0x12, 0x00),                         // wr.ud.remote_qpn
					at(36, 0x00, 0x00, 0x01, 0x80),                         // wr.ud.remote_qkey
					at(40, avVector(tb)...),                                // wr.ud.av (TestAVEncoding)
					at(80, 0x00, 0xb0, 0xad, 0xde, 0x00, 0x7f, 0x00, 0x00), // sge[0].addr
					at(88, 0x00, 0x04, 0x00, 0x00),                         // sge[0].length
					at(92, 0x44, 0x33, 0x22, 0x11),                         // sge[0].lkey
				}
				return layout(tb, 128, fields...)
			},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := newQPEnv(t, qpOpts{typ: c.typ, cap: verbs.QPCap{MaxSendWR: 4, MaxRecvWR: 4, MaxSendSGE: 2, MaxRecvSGE: 1},
				handle: tHandle, atomics: true, state: verbs.StateRTS})
			if e.layout.SendStride != 128 {
				t.Fatalf("send stride %d, want 128", e.layout.SendStride)
			}
			n, err := e.qp.PostSend([]verbs.SendWR{c.wr})
			if n != 1 || err != nil {
				t.Fatalf("PostSend = %d, %v; want 1, nil", n, err)
			}
			// WQE at sbuf + 4096 + slot*stride, slot 0.
			diffBytes(t, c.name+" WQE", e.sbuf[4096:4096+128], c.want(t))
			// prod_tail advanced to 1; nothing else in the ring page.
			if e.sqTail() != 1 || e.sqHead() != 0 || e.rqTail() != 0 || e.rqHead() != 0 {
				t.Errorf("ring state after one post: sq %d/%d rq %d/%d, want sq 1/0 rq 0/0", e.sqTail(), e.sqHead(), e.rqTail(), e.rqHead())
			}
			if !bytes.Equal(e.sbuf[16:4096], make([]byte, 4096-16)) {
				t.Errorf("ring page beyond ring_state modified")
			}
			if !bytes.Equal(e.sbuf[4096+128:], make([]byte, len(e.sbuf)-4096-128)) {
				t.Errorf("send buffer beyond slot 0 modified")
			}
			e.uar.expect(t, "doorbell", dbWrite{0, tHandle | 1<<30})
		})
	}
}

// TestPostSendSlotOffset checks that a WQE goes to sbuf + 4096 + slot*stride
// for a slot other than 0 (and a prod_tail with the generation bit set).
func TestPostSendSlotOffset(t *testing.T) {
	for _, sge := range []int{1, 4} {
		t.Run(fmt.Sprintf("max_send_sge=%d", sge), func(t *testing.T) {
			e := newQPEnv(t, qpOpts{cap: verbs.QPCap{MaxSendWR: 4, MaxRecvWR: 1, MaxSendSGE: sge, MaxRecvSGE: 1}, state: verbs.StateRTS})
			stride := e.layout.SendStride
			// N = 4: index 6 = generation 1, slot 2.
			e.setSQTail(6)
			e.setSQHead(6)
			n, err := e.qp.PostSend([]verbs.SendWR{{ID: 0xabc, Opcode: verbs.OpSend, SGL: []verbs.SGE{tSGE0}}})
			if n != 1 || err != nil {
				t.Fatalf("PostSend = %d, %v", n, err)
			}
			if got := e.sqTail(); got != 7 {
				t.Errorf("prod_tail = %d, want 7", got)
			}
			for slot := 0; slot < 4; slot++ {
				w := e.sbuf[4096+slot*stride : 4096+(slot+1)*stride]
				if slot == 2 {
					if SendWQE(w).WRID() != 0xabc || SendWQE(w).SGE(0) != tSGE0 {
						t.Errorf("slot 2 at offset %d does not hold the WQE: % x", 4096+slot*stride, w[:96])
					}
				} else if !bytes.Equal(w, make([]byte, stride)) {
					t.Errorf("slot %d modified", slot)
				}
			}
		})
	}
}

func TestPostRecvWQELayout(t *testing.T) {
	want := func(tb testing.TB) []byte {
		return layout(tb, 64,
			at(0, 0x08, 0x07, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01),  // wr_id
			at(8, 0x02, 0x00, 0x00, 0x00),                          // num_sge 2
			at(12, 0x00, 0x00, 0x00, 0x00),                         // total_len 0
			at(16, 0x00, 0xb0, 0xad, 0xde, 0x00, 0x7f, 0x00, 0x00), // sge[0].addr
			at(24, 0x00, 0x04, 0x00, 0x00),                         // sge[0].length
			at(28, 0x44, 0x33, 0x22, 0x11),                         // sge[0].lkey
			at(32, 0xef, 0xcd, 0xab, 0x89, 0x67, 0x45, 0x23, 0x01), // sge[1].addr
			at(40, 0xff, 0xff, 0xff, 0xff),                         // sge[1].length
			at(44, 0x04, 0x03, 0x02, 0x01),                         // sge[1].lkey
			at(48, make([]byte, 16)...),                            // room for sge[2], untouched
		)
	}
	wr := verbs.RecvWR{ID: tWRID, SGL: []verbs.SGE{tSGE0, tSGE1}}

	t.Run("QP", func(t *testing.T) {
		e := newQPEnv(t, qpOpts{cap: verbs.QPCap{MaxSendWR: 1, MaxRecvWR: 4, MaxSendSGE: 1, MaxRecvSGE: 3}, handle: tHandle, state: verbs.StateInit})
		if e.layout.RecvStride != 64 {
			t.Fatalf("recv stride %d, want 64", e.layout.RecvStride)
		}
		n, err := e.qp.PostRecv([]verbs.RecvWR{wr})
		if n != 1 || err != nil {
			t.Fatalf("PostRecv = %d, %v", n, err)
		}
		// rbuf + slot*stride, slot 0.
		diffBytes(t, "recv WQE", e.rbuf[:64], want(t))
		if !bytes.Equal(e.rbuf[64:], make([]byte, len(e.rbuf)-64)) {
			t.Errorf("receive buffer beyond slot 0 modified")
		}
		// The RQ ring is ring_state.rx at sbuf+8.
		if e.rqTail() != 1 || e.rqHead() != 0 || e.sqTail() != 0 || e.sqHead() != 0 {
			t.Errorf("ring state: sq %d/%d rq %d/%d, want sq 0/0 rq 1/0", e.sqTail(), e.sqHead(), e.rqTail(), e.rqHead())
		}
		if !bytes.Equal(e.sbuf[4096:], make([]byte, len(e.sbuf)-4096)) {
			t.Errorf("receive post modified the send queue")
		}
		e.uar.expect(t, "doorbell", dbWrite{0, tHandle | 1<<31})

		// Slot 3 with the generation bit set: index 7 of N = 4.
		e.setRQTail(7)
		e.setRQHead(7)
		if n, err := e.qp.PostRecv([]verbs.RecvWR{wr}); n != 1 || err != nil {
			t.Fatalf("PostRecv = %d, %v", n, err)
		}
		diffBytes(t, "recv WQE in slot 3", e.rbuf[3*64:4*64], want(t))
		if e.rqTail() != 0 {
			t.Errorf("prod_tail after index 7 = %d, want 0", e.rqTail())
		}
	})

	t.Run("SRQ", func(t *testing.T) {
		e := newSRQEnv(t, 0x000123, 4, 3)
		if e.stride != 64 {
			t.Fatalf("SRQ stride %d, want 64", e.stride)
		}
		n, err := e.srq.PostRecv([]verbs.RecvWR{wr})
		if n != 1 || err != nil {
			t.Fatalf("SRQ PostRecv = %d, %v", n, err)
		}
		// buf + 4096 + slot*stride; the ring is ring_state.rx at buf+8.
		diffBytes(t, "SRQ WQE", e.buf[4096:4096+64], want(t))
		if e.tail() != 1 || e.head() != 0 {
			t.Errorf("SRQ ring %d/%d, want 1/0", e.tail(), e.head())
		}
		if load32(e.buf, 0) != 0 || load32(e.buf, 4) != 0 {
			t.Errorf("SRQ post touched ring_state.tx")
		}
		e.uar.expect(t, "doorbell", dbWrite{8, 0x000123 | 1<<30})

		e.setTail(6)
		e.setHead(6)
		if n, err := e.srq.PostRecv([]verbs.RecvWR{wr}); n != 1 || err != nil {
			t.Fatalf("SRQ PostRecv = %d, %v", n, err)
		}
		diffBytes(t, "SRQ WQE in slot 2", e.buf[4096+2*64:4096+3*64], want(t))
	})
}

func TestDoorbells(t *testing.T) {
	for _, h := range []uint32{0, 1, 0x42, 0x00abcdef, 0x00ffffff} {
		t.Run(fmt.Sprintf("handle=%#x", h), func(t *testing.T) {
			e := newQPEnv(t, qpOpts{cap: verbs.QPCap{MaxSendWR: 8, MaxRecvWR: 8, MaxSendSGE: 1, MaxRecvSGE: 1}, handle: h, state: verbs.StateRTS})
			if _, err := e.qp.PostSend([]verbs.SendWR{{Opcode: verbs.OpSend}}); err != nil {
				t.Fatal(err)
			}
			if _, err := e.qp.PostRecv([]verbs.RecvWR{{}}); err != nil {
				t.Fatal(err)
			}
			e.uar.expect(t, "QP doorbells", dbWrite{0, h | 1<<30}, dbWrite{0, h | 1<<31})

			s := newSRQEnv(t, h, 8, 1)
			if _, err := s.srq.PostRecv([]verbs.RecvWR{{}}); err != nil {
				t.Fatal(err)
			}
			s.uar.expect(t, "SRQ doorbell", dbWrite{8, h | 1<<30})

			c := newCQEnv(t, h, 8)
			c.cq.ReqNotify(false)
			c.cq.ReqNotify(true)
			var wc [1]verbs.WC
			if n, err := c.cq.Poll(wc[:]); n != 0 || err != nil {
				t.Fatalf("Poll of an empty CQ = %d, %v", n, err)
			}
			c.uar.expect(t, "CQ doorbells", dbWrite{4, h | 1<<30}, dbWrite{4, h | 1<<29}, dbWrite{4, h | 1<<31})
		})
	}
}

func TestOneDoorbellPerPost(t *testing.T) {
	e := newQPEnv(t, qpOpts{cap: verbs.QPCap{MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 1, MaxRecvSGE: 1}, handle: 7, state: verbs.StateRTS})
	wrs := make([]verbs.SendWR, 5)
	for i := range wrs {
		wrs[i] = verbs.SendWR{ID: uint64(100 + i), Opcode: verbs.OpSend, SGL: []verbs.SGE{tSGE0}}
	}
	if n, err := e.qp.PostSend(wrs); n != 5 || err != nil {
		t.Fatalf("PostSend(5) = %d, %v", n, err)
	}
	e.uar.expect(t, "5 chained sends", dbWrite{0, 7 | 1<<30})
	if e.sqTail() != 5 {
		t.Errorf("prod_tail = %d, want 5", e.sqTail())
	}
	for i := range 5 {
		if got := SendWQE(e.sqSlot(i)).WRID(); got != uint64(100+i) {
			t.Errorf("slot %d wr_id %d, want %d", i, got, 100+i)
		}
	}
	e.uar.reset()
	if n, err := e.qp.PostSend(nil); n != 0 || err != nil {
		t.Fatalf("PostSend(nil) = %d, %v", n, err)
	}
	e.uar.expect(t, "empty post send")

	rwrs := make([]verbs.RecvWR, 7)
	for i := range rwrs {
		rwrs[i] = verbs.RecvWR{ID: uint64(200 + i), SGL: []verbs.SGE{tSGE0}}
	}
	if n, err := e.qp.PostRecv(rwrs); n != 7 || err != nil {
		t.Fatalf("PostRecv(7) = %d, %v", n, err)
	}
	e.uar.expect(t, "7 chained receives", dbWrite{0, 7 | 1<<31})
	e.uar.reset()
	if n, err := e.qp.PostRecv(nil); n != 0 || err != nil {
		t.Fatalf("PostRecv(nil) = %d, %v", n, err)
	}
	e.uar.expect(t, "empty post recv")

	s := newSRQEnv(t, 9, 16, 1)
	if n, err := s.srq.PostRecv(rwrs); n != 7 || err != nil {
		t.Fatalf("SRQ PostRecv(7) = %d, %v", n, err)
	}
	s.uar.expect(t, "7 chained SRQ receives", dbWrite{8, 9 | 1<<30})

	// A chain whose second WR fails: the first is posted and rung once.
	e.uar.reset()
	e.consumeSQ()
	bad := []verbs.SendWR{
		{ID: 1, Opcode: verbs.OpSend},
		{ID: 2, Opcode: verbs.OpSend, SGL: []verbs.SGE{tSGE0, tSGE1}}, // 2 > max_send_sge 1
		{ID: 3, Opcode: verbs.OpSend},
	}
	tail := e.sqTail()
	n, err := e.qp.PostSend(bad)
	if n != 1 || !isErrno(err, unix.EINVAL) {
		t.Fatalf("PostSend(ok, too many SGEs, ok) = %d, %v; want 1, EINVAL", n, err)
	}
	if e.sqTail() != tail+1 {
		t.Errorf("prod_tail = %d, want %d", e.sqTail(), tail+1)
	}
	e.uar.expect(t, "partial post", dbWrite{0, 7 | 1<<30})
}

// checkQueueFull checks the error of a post into a full queue: it matches
// verbs.ErrQueueFull and ENOMEM (both errno packages).
func checkQueueFull(tb testing.TB, what string, err error) {
	tb.Helper()
	if !errors.Is(err, verbs.ErrQueueFull) {
		tb.Errorf("%s: error %v does not match verbs.ErrQueueFull", what, err)
	}
	if !errors.Is(err, unix.ENOMEM) {
		tb.Errorf("%s: error %v does not match ENOMEM", what, err)
	}
}

func TestSendQueueOverflow(t *testing.T) {
	const N = 4
	e := newQPEnv(t, qpOpts{cap: verbs.QPCap{MaxSendWR: N, MaxRecvWR: 1, MaxSendSGE: 1, MaxRecvSGE: 1}, handle: 3, state: verbs.StateRTS})
	wrs := make([]verbs.SendWR, N+1)
	for i := range wrs {
		wrs[i] = verbs.SendWR{ID: uint64(i + 1), Opcode: verbs.OpRDMAWrite, SGL: []verbs.SGE{{Addr: uint64(i), Length: 1, LKey: 1}}, RemoteAddr: uint64(i) << 32, RKey: 5}
	}
	n, err := e.qp.PostSend(wrs)
	if n != N {
		t.Errorf("PostSend(N+1) posted %d, want %d", n, N)
	}
	checkQueueFull(t, "PostSend(N+1)", err)
	// Full: tail == head ^ N.
	if e.sqTail() != N || e.sqHead() != 0 {
		t.Errorf("ring %d/%d, want %d/0", e.sqTail(), e.sqHead(), N)
	}
	e.uar.expect(t, "partial post", dbWrite{0, 3 | 1<<30})
	snapshot := append([]byte(nil), e.sbuf...)
	if got := SendWQE(e.sqSlot(0)).WRID(); got != 1 {
		t.Errorf("slot 0 holds wr_id %d, want 1 (overwritten by WR N+1?)", got)
	}

	// Further posts fail without touching anything.
	e.uar.reset()
	n, err = e.qp.PostSend(wrs[N:])
	if n != 0 {
		t.Errorf("PostSend into a full queue posted %d", n)
	}
	checkQueueFull(t, "PostSend into a full queue", err)
	e.uar.expect(t, "post into a full queue")
	diffBytes(t, "send buffer after a post into a full queue", e.sbuf, snapshot)

	// The queue-full check comes before the SGE-count check.
	tooMany := []verbs.SendWR{{Opcode: verbs.OpSend, SGL: []verbs.SGE{tSGE0, tSGE1}}}
	_, err = e.qp.PostSend(tooMany)
	checkQueueFull(t, "full queue and too many SGEs", err)
	diffBytes(t, "send buffer after a full post with too many SGEs", e.sbuf, snapshot)

	// Once the device consumes one WQE, exactly one more fits, in slot 0.
	e.setSQHead(1)
	n, err = e.qp.PostSend(wrs[N-1:])
	if n != 1 {
		t.Errorf("after one consumed: posted %d, want 1", n)
	}
	checkQueueFull(t, "after one consumed", err)
	if got := SendWQE(e.sqSlot(0)).WRID(); got != N {
		t.Errorf("slot 0 holds wr_id %d, want %d", got, N)
	}
	if got := SendWQE(e.sqSlot(1)).WRID(); got != 2 {
		t.Errorf("slot 1 holds wr_id %d, want 2 (not consumed yet)", got)
	}
	if e.sqTail() != N+1 {
		t.Errorf("prod_tail = %d, want %d", e.sqTail(), N+1)
	}
}

func TestRecvQueueOverflow(t *testing.T) {
	const N = 8
	rwrs := make([]verbs.RecvWR, N+1)
	for i := range rwrs {
		rwrs[i] = verbs.RecvWR{ID: uint64(i + 1), SGL: []verbs.SGE{{Addr: uint64(i), Length: 1, LKey: 1}}}
	}
	t.Run("QP", func(t *testing.T) {
		e := newQPEnv(t, qpOpts{cap: verbs.QPCap{MaxSendWR: 1, MaxRecvWR: N, MaxSendSGE: 1, MaxRecvSGE: 1}, handle: 3, state: verbs.StateRTR})
		n, err := e.qp.PostRecv(rwrs)
		if n != N {
			t.Errorf("PostRecv(N+1) posted %d, want %d", n, N)
		}
		checkQueueFull(t, "PostRecv(N+1)", err)
		if e.rqTail() != N || e.rqHead() != 0 {
			t.Errorf("RQ ring %d/%d, want %d/0", e.rqTail(), e.rqHead(), N)
		}
		if got := RecvWQE(e.rqSlot(0)).WRID(); got != 1 {
			t.Errorf("slot 0 holds wr_id %d, want 1", got)
		}
		e.uar.expect(t, "partial post", dbWrite{0, 3 | 1<<31})
		snap := append([]byte(nil), e.rbuf...)
		e.uar.reset()
		n, err = e.qp.PostRecv(rwrs[:1])
		if n != 0 {
			t.Errorf("post into a full RQ posted %d", n)
		}
		checkQueueFull(t, "post into a full RQ", err)
		// Queue full is checked before the SGE count.
		_, err = e.qp.PostRecv([]verbs.RecvWR{{SGL: []verbs.SGE{tSGE0, tSGE1}}})
		checkQueueFull(t, "full RQ and too many SGEs", err)
		e.uar.expect(t, "posts into a full RQ")
		diffBytes(t, "receive buffer", e.rbuf, snap)
	})
	t.Run("SRQ", func(t *testing.T) {
		e := newSRQEnv(t, 5, N, 1)
		n, err := e.srq.PostRecv(rwrs)
		if n != N {
			t.Errorf("SRQ PostRecv(N+1) posted %d, want %d", n, N)
		}
		checkQueueFull(t, "SRQ PostRecv(N+1)", err)
		if e.tail() != N || e.head() != 0 {
			t.Errorf("SRQ ring %d/%d, want %d/0", e.tail(), e.head(), N)
		}
		if got := RecvWQE(e.slot(0)).WRID(); got != 1 {
			t.Errorf("slot 0 holds wr_id %d, want 1", got)
		}
		e.uar.expect(t, "partial post", dbWrite{8, 5 | 1<<30})
		snap := append([]byte(nil), e.buf...)
		e.uar.reset()
		n, err = e.srq.PostRecv(rwrs[:1])
		if n != 0 {
			t.Errorf("post into a full SRQ posted %d", n)
		}
		checkQueueFull(t, "post into a full SRQ", err)
		_, err = e.srq.PostRecv([]verbs.RecvWR{{SGL: []verbs.SGE{tSGE0, tSGE1}}})
		checkQueueFull(t, "full SRQ and too many SGEs", err)
		e.uar.expect(t, "posts into a full SRQ")
		diffBytes(t, "SRQ buffer", e.buf, snap)
	})
}

var allStates = []verbs.QPState{
	verbs.StateReset, verbs.StateInit, verbs.StateRTR, verbs.StateRTS, verbs.StateSQD, verbs.StateSQE, verbs.StateErr,
}

func TestPostStateChecks(t *testing.T) {
	for _, s := range allStates {
		t.Run(s.String(), func(t *testing.T) {
			e := newQPEnv(t, qpOpts{cap: verbs.QPCap{MaxSendWR: 4, MaxRecvWR: 4, MaxSendSGE: 1, MaxRecvSGE: 1}, handle: 1})
			e.qp.SetState(s)
			if e.qp.State() != s {
				t.Fatalf("State() = %v after SetState(%v)", e.qp.State(), s)
			}
			// rdma-core: post_send fails with EINVAL below RTS, and lets
			// the device decide in RTS, SQD, SQE and ERR.
			n, err := e.qp.PostSend([]verbs.SendWR{{ID: 1, Opcode: verbs.OpSend, SGL: []verbs.SGE{tSGE0}}})
			if s < verbs.StateRTS {
				if n != 0 || !isErrno(err, unix.EINVAL) {
					t.Errorf("PostSend in %v = %d, %v; want 0, EINVAL", s, n, err)
				}
				if e.sqTail() != 0 || !bytes.Equal(e.sqSlot(0), make([]byte, e.layout.SendStride)) {
					t.Errorf("rejected PostSend in %v touched the send queue", s)
				}
			} else if n != 1 || err != nil {
				t.Errorf("PostSend in %v = %d, %v; want 1, nil", s, n, err)
			}
			// post_recv fails only in RESET.
			n, err = e.qp.PostRecv([]verbs.RecvWR{{ID: 2, SGL: []verbs.SGE{tSGE0}}})
			if s == verbs.StateReset {
				if n != 0 || !isErrno(err, unix.EINVAL) {
					t.Errorf("PostRecv in RESET = %d, %v; want 0, EINVAL", n, err)
				}
				if e.rqTail() != 0 || !bytes.Equal(e.rqSlot(0), make([]byte, e.layout.RecvStride)) {
					t.Errorf("rejected PostRecv touched the receive queue")
				}
			} else if n != 1 || err != nil {
				t.Errorf("PostRecv in %v = %d, %v; want 1, nil", s, n, err)
			}
			var want []dbWrite
			if s >= verbs.StateRTS {
				want = append(want, dbWrite{0, 1 | 1<<30})
			}
			if s != verbs.StateReset {
				want = append(want, dbWrite{0, 1 | 1<<31})
			}
			e.uar.expect(t, "doorbells", want...)
		})
	}
}

func TestPostRecvWithSRQ(t *testing.T) {
	for _, s := range allStates {
		e := newQPEnv(t, qpOpts{cap: verbs.QPCap{MaxSendWR: 4, MaxSendSGE: 1}, srq: true, handle: 1, state: s})
		if e.rbuf != nil || e.layout.RecvBufLen != 0 {
			t.Fatalf("QP with an SRQ has a receive buffer")
		}
		n, err := e.qp.PostRecv([]verbs.RecvWR{{ID: 1}})
		if n != 0 || !isErrno(err, unix.EINVAL) {
			t.Errorf("PostRecv on a QP with an SRQ in %v = %d, %v; want 0, EINVAL", s, n, err)
		}
		if e.rqTail() != 0 || e.rqHead() != 0 {
			t.Errorf("PostRecv on a QP with an SRQ touched ring_state.rx")
		}
		e.uar.expect(t, "PostRecv on a QP with an SRQ")
	}
	// Sends still work, and a reset leaves ring_state.rx alone.
	e := newQPEnv(t, qpOpts{cap: verbs.QPCap{MaxSendWR: 4, MaxSendSGE: 1}, srq: true, handle: 1, state: verbs.StateRTS})
	if n, err := e.qp.PostSend([]verbs.SendWR{{Opcode: verbs.OpSend}}); n != 1 || err != nil {
		t.Errorf("PostSend on a QP with an SRQ = %d, %v", n, err)
	}
	e.qp.SetState(verbs.StateReset)
	if e.sqTail() != 0 {
		t.Errorf("reset did not clear the SQ ring")
	}
}

func TestPostSendSGELimit(t *testing.T) {
	for _, maxSGE := range []int{1, 2, 3, 4, 11} {
		e := newQPEnv(t, qpOpts{cap: verbs.QPCap{MaxSendWR: 4, MaxRecvWR: 4, MaxSendSGE: maxSGE, MaxRecvSGE: maxSGE}, state: verbs.StateRTS})
		sgl := make([]verbs.SGE, maxSGE+1)
		for i := range sgl {
			sgl[i] = verbs.SGE{Addr: uint64(0x1000 * (i + 1)), Length: uint32(i + 1), LKey: uint32(i)}
		}
		// Exactly max SGEs is fine, and each lands at 80 + 16*i.
		if n, err := e.qp.PostSend([]verbs.SendWR{{ID: 1, Opcode: verbs.OpSend, SGL: sgl[:maxSGE]}}); n != 1 || err != nil {
			t.Fatalf("PostSend with %d = max SGEs: %d, %v", maxSGE, n, err)
		}
		w := SendWQE(e.sqSlot(0))
		if w.NumSGE() != maxSGE {
			t.Errorf("num_sge = %d, want %d", w.NumSGE(), maxSGE)
		}
		for i := range maxSGE {
			if w.SGE(i) != sgl[i] {
				t.Errorf("SGE %d = %+v, want %+v", i, w.SGE(i), sgl[i])
			}
		}
		e.uar.reset()
		n, err := e.qp.PostSend([]verbs.SendWR{{ID: 2, Opcode: verbs.OpSend, SGL: sgl}})
		if n != 0 || !isErrno(err, unix.EINVAL) {
			t.Errorf("PostSend with %d > max %d SGEs = %d, %v; want 0, EINVAL", maxSGE+1, maxSGE, n, err)
		}
		if e.sqTail() != 1 {
			t.Errorf("rejected WR advanced prod_tail to %d", e.sqTail())
		}
		e.uar.expect(t, "rejected post")

		if n, err := e.qp.PostRecv([]verbs.RecvWR{{ID: 1, SGL: sgl[:maxSGE]}}); n != 1 || err != nil {
			t.Fatalf("PostRecv with %d = max SGEs: %d, %v", maxSGE, n, err)
		}
		r := RecvWQE(e.rqSlot(0))
		for i := range maxSGE {
			if r.SGE(i) != sgl[i] {
				t.Errorf("recv SGE %d = %+v, want %+v", i, r.SGE(i), sgl[i])
			}
		}
		e.uar.reset()
		n, err = e.qp.PostRecv([]verbs.RecvWR{{ID: 2, SGL: sgl}})
		if n != 0 || !isErrno(err, unix.EINVAL) {
			t.Errorf("PostRecv with %d > max %d SGEs = %d, %v; want 0, EINVAL", maxSGE+1, maxSGE, n, err)
		}
		if e.rqTail() != 1 {
			t.Errorf("rejected receive advanced prod_tail to %d", e.rqTail())
		}
		e.uar.expect(t, "rejected post")
	}
	s := newSRQEnv(t, 1, 4, 2)
	n, err := s.srq.PostRecv([]verbs.RecvWR{{SGL: []verbs.SGE{tSGE0, tSGE1, tSGE0}}})
	if n != 0 || !isErrno(err, unix.EINVAL) {
		t.Errorf("SRQ PostRecv with 3 > 2 SGEs = %d, %v; want 0, EINVAL", n, err)
	}
	s.uar.expect(t, "rejected SRQ post")
}

func TestPostSendOpcodeChecks(t *testing.T) {
	all := []verbs.WROpcode{verbs.OpRDMAWrite, verbs.OpRDMAWriteImm, verbs.OpSend, verbs.OpSendImm,
		verbs.OpRDMARead, verbs.OpAtomicCmpSwap, verbs.OpAtomicFetchAdd}
	allowed := map[verbs.QPType]map[verbs.WROpcode]bool{
		verbs.RC: {verbs.OpRDMAWrite: true, verbs.OpRDMAWriteImm: true, verbs.OpSend: true, verbs.OpSendImm: true,
			verbs.OpRDMARead: true, verbs.OpAtomicCmpSwap: true, verbs.OpAtomicFetchAdd: true},
		verbs.UC: {verbs.OpRDMAWrite: true, verbs.OpRDMAWriteImm: true, verbs.OpSend: true, verbs.OpSendImm: true},
		verbs.UD: {verbs.OpSend: true, verbs.OpSendImm: true},
	}
	ah := testAH{NewAH(avAttr, avPDN, avDMAC)}
	for _, typ := range []verbs.QPType{verbs.RC, verbs.UC, verbs.UD} {
		for _, op := range all {
			t.Run(fmt.Sprintf("%v/%v", typ, op), func(t *testing.T) {
				e := newQPEnv(t, qpOpts{typ: typ, cap: verbs.QPCap{MaxSendWR: 2, MaxRecvWR: 2, MaxSendSGE: 1, MaxRecvSGE: 1}, atomics: true, state: verbs.StateRTS})
				n, err := e.qp.PostSend([]verbs.SendWR{{ID: 1, Opcode: op, SGL: []verbs.SGE{{Addr: 0x1000, Length: 8, LKey: 1}}, AH: ah}})
				if allowed[typ][op] {
					if n != 1 || err != nil {
						t.Errorf("PostSend = %d, %v; want 1, nil", n, err)
					}
					return
				}
				if n != 0 || !isErrno(err, unix.EINVAL) {
					t.Errorf("PostSend = %d, %v; want 0, EINVAL", n, err)
				}
				e.uar.expect(t, "rejected post")
				if e.sqTail() != 0 {
					t.Errorf("rejected post advanced prod_tail")
				}
			})
		}
	}
	// Opcodes beyond ATOMIC_FETCH_AND_ADD are not posted by this driver.
	e := newQPEnv(t, qpOpts{cap: verbs.QPCap{MaxSendWR: 2, MaxRecvWR: 2, MaxSendSGE: 1, MaxRecvSGE: 1}, atomics: true, state: verbs.StateRTS})
	for _, op := range []verbs.WROpcode{7, 8, 9, 14, 255} {
		if n, err := e.qp.PostSend([]verbs.SendWR{{Opcode: op}}); n != 0 || !isErrno(err, unix.EINVAL) {
			t.Errorf("PostSend with opcode %d = %d, %v; want 0, EINVAL", op, n, err)
		}
	}
}

func TestPostSendUDAddressHandle(t *testing.T) {
	e := newQPEnv(t, qpOpts{typ: verbs.UD, cap: verbs.QPCap{MaxSendWR: 2, MaxRecvWR: 2, MaxSendSGE: 1, MaxRecvSGE: 1}, state: verbs.StateRTS})
	for _, ah := range []verbs.AH{nil, foreignAH{}} {
		n, err := e.qp.PostSend([]verbs.SendWR{{Opcode: verbs.OpSend, AH: ah}})
		if n != 0 || !isErrno(err, unix.EINVAL) {
			t.Errorf("UD PostSend with AH %T = %d, %v; want 0, EINVAL", ah, n, err)
		}
	}
	e.uar.expect(t, "rejected UD posts")
	if e.sqTail() != 0 {
		t.Errorf("rejected UD posts advanced prod_tail")
	}
}

func TestPostSendNotSupported(t *testing.T) {
	// Atomics on a device without them.
	e := newQPEnv(t, qpOpts{cap: verbs.QPCap{MaxSendWR: 2, MaxRecvWR: 2, MaxSendSGE: 1, MaxRecvSGE: 1}, atomics: false, state: verbs.StateRTS})
	for _, op := range []verbs.WROpcode{verbs.OpAtomicCmpSwap, verbs.OpAtomicFetchAdd} {
		n, err := e.qp.PostSend([]verbs.SendWR{{Opcode: op, SGL: []verbs.SGE{{Addr: 0x1000, Length: 8, LKey: 1}}}})
		if n != 0 || !errors.Is(err, verbs.ErrNotSupported) {
			t.Errorf("%v without device atomics = %d, %v; want 0, ErrNotSupported", op, n, err)
		}
	}
	// Inline without max_inline_data (vmw_pvrdma never supports it).
	for _, op := range []verbs.WROpcode{verbs.OpSend, verbs.OpRDMAWrite} {
		n, err := e.qp.PostSend([]verbs.SendWR{{Opcode: op, Flags: verbs.SendInline | verbs.SendSignaled, SGL: []verbs.SGE{{Addr: 0x1000, Length: 8, LKey: 1}}}})
		if n != 0 || !errors.Is(err, verbs.ErrNotSupported) {
			t.Errorf("%v INLINE with max_inline_data 0 = %d, %v; want 0, ErrNotSupported", op, n, err)
		}
	}
	e.uar.expect(t, "unsupported posts")
	if e.sqTail() != 0 {
		t.Errorf("unsupported posts advanced prod_tail")
	}
}

// mapResolver resolves addresses inside one buffer based at base.
type mapResolver struct {
	base uint64
	buf  []byte
}

func (r mapResolver) Resolve(addr uint64, n int) ([]byte, bool) {
	if addr < r.base || addr-r.base+uint64(n) > uint64(len(r.buf)) {
		return nil, false
	}
	off := addr - r.base
	return r.buf[off : off+uint64(n)], true
}

// TestPostSendInline covers the emulator-only inline extension documented
// in layout.go: payload where the SGE array would be, num_sge 0 and
// total_len the payload length.
func TestPostSendInline(t *testing.T) {
	res := mapResolver{base: 0x10000, buf: []byte("0123456789abcdefghijklmnopqrstuvwxyz")}
	e := newQPEnv(t, qpOpts{cap: verbs.QPCap{MaxSendWR: 4, MaxRecvWR: 1, MaxSendSGE: 1, MaxRecvSGE: 1, MaxInlineData: 64},
		res: res, state: verbs.StateRTS})
	wr := verbs.SendWR{ID: 9, Opcode: verbs.OpSend, Flags: verbs.SendInline,
		SGL: []verbs.SGE{{Addr: 0x10000, Length: 4}, {Addr: 0x10000 + 10, Length: 3}}}
	if n, err := e.qp.PostSend([]verbs.SendWR{wr}); n != 1 || err != nil {
		t.Fatalf("inline PostSend = %d, %v", n, err)
	}
	w := SendWQE(e.sqSlot(0))
	if w.NumSGE() != 0 || w.TotalLen() != 7 || w.Flags() != FlagInline || string(w.Inline(7)) != "0123abc" {
		t.Errorf("inline WQE: num_sge %d total_len %d flags %#x payload %q", w.NumSGE(), w.TotalLen(), w.Flags(), w.Inline(7))
	}
	// Too large: EINVAL. Unmapped: EFAULT.
	big := verbs.SendWR{Opcode: verbs.OpSend, Flags: verbs.SendInline, SGL: []verbs.SGE{{Addr: 0x10000, Length: 65}}}
	if n, err := e.qp.PostSend([]verbs.SendWR{big}); n != 0 || !isErrno(err, unix.EINVAL) {
		t.Errorf("inline PostSend above max_inline_data = %d, %v; want 0, EINVAL", n, err)
	}
	bad := verbs.SendWR{Opcode: verbs.OpSend, Flags: verbs.SendInline, SGL: []verbs.SGE{{Addr: 0x9000, Length: 4}}}
	if n, err := e.qp.PostSend([]verbs.SendWR{bad}); n != 0 || !isErrno(err, unix.EFAULT) {
		t.Errorf("inline PostSend of unmapped memory = %d, %v; want 0, EFAULT", n, err)
	}
	if e.sqTail() != 1 {
		t.Errorf("prod_tail = %d, want 1", e.sqTail())
	}
}

func TestResetClearsRings(t *testing.T) {
	e := newQPEnv(t, qpOpts{cap: verbs.QPCap{MaxSendWR: 4, MaxRecvWR: 4, MaxSendSGE: 1, MaxRecvSGE: 1}, state: verbs.StateRTS})
	for range 3 {
		if n, err := e.qp.PostSend([]verbs.SendWR{{Opcode: verbs.OpSend}}); n != 1 || err != nil {
			t.Fatalf("PostSend = %d, %v", n, err)
		}
		if n, err := e.qp.PostRecv([]verbs.RecvWR{{}}); n != 1 || err != nil {
			t.Fatalf("PostRecv = %d, %v", n, err)
		}
	}
	e.setSQHead(2)
	e.setRQHead(1)
	e.qp.SetState(verbs.StateReset)
	if e.sqTail() != 0 || e.sqHead() != 0 || e.rqTail() != 0 || e.rqHead() != 0 {
		t.Errorf("after RESET rings are sq %d/%d rq %d/%d, want all 0", e.sqTail(), e.sqHead(), e.rqTail(), e.rqHead())
	}
	e.qp.SetState(verbs.StateInit)
	e.qp.SetState(verbs.StateRTR)
	e.qp.SetState(verbs.StateRTS)
	if n, err := e.qp.PostSend([]verbs.SendWR{{ID: 77, Opcode: verbs.OpSend}}); n != 1 || err != nil {
		t.Fatalf("PostSend after reset = %d, %v", n, err)
	}
	if SendWQE(e.sqSlot(0)).WRID() != 77 || e.sqTail() != 1 {
		t.Errorf("post after reset did not start at slot 0")
	}
}

func TestShutdown(t *testing.T) {
	e := newQPEnv(t, qpOpts{cap: verbs.QPCap{MaxSendWR: 4, MaxRecvWR: 4, MaxSendSGE: 1, MaxRecvSGE: 1}, state: verbs.StateRTS})
	e.qp.Shutdown()
	if n, err := e.qp.PostSend([]verbs.SendWR{{Opcode: verbs.OpSend}}); n != 0 || !errors.Is(err, verbs.ErrClosed) {
		t.Errorf("PostSend after Shutdown = %d, %v; want 0, ErrClosed", n, err)
	}
	if n, err := e.qp.PostRecv([]verbs.RecvWR{{}}); n != 0 || !errors.Is(err, verbs.ErrClosed) {
		t.Errorf("PostRecv after Shutdown = %d, %v; want 0, ErrClosed", n, err)
	}
	e.uar.expect(t, "posts after Shutdown")
	s := newSRQEnv(t, 1, 4, 1)
	s.srq.Shutdown()
	if n, err := s.srq.PostRecv([]verbs.RecvWR{{}}); n != 0 || !errors.Is(err, verbs.ErrClosed) {
		t.Errorf("SRQ PostRecv after Shutdown = %d, %v; want 0, ErrClosed", n, err)
	}
	c := newCQEnv(t, 1, 4)
	c.cq.Shutdown()
	var wc [1]verbs.WC
	if n, err := c.cq.Poll(wc[:]); n != 0 || !errors.Is(err, verbs.ErrClosed) {
		t.Errorf("Poll after Shutdown = %d, %v; want 0, ErrClosed", n, err)
	}
}

// TestConcurrentPostSend posts from several goroutines while a device
// goroutine consumes the send queue on its own, reading prod_tail and the
// WQEs and publishing cons_head. Every WR must arrive exactly once, each
// poster's WRs in order.
func TestConcurrentPostSend(t *testing.T) {
	const (
		posters = 4
		perG    = 2000
	)
	e := newQPEnv(t, qpOpts{cap: verbs.QPCap{MaxSendWR: 16, MaxRecvWR: 1, MaxSendSGE: 1, MaxRecvSGE: 1}, handle: 1, state: verbs.StateRTS})
	n := uint32(e.layout.SendWR)
	done := make(chan error, 1)
	var stop atomic.Bool
	defer stop.Store(true)
	go func() {
		next := make([]uint64, posters)
		got := 0
		for got < posters*perG {
			if stop.Load() {
				done <- errors.New("stopped")
				return
			}
			head := e.sqHead()
			tail := e.sqTail()
			if head == tail {
				runtime.Gosched()
				continue
			}
			w := SendWQE(e.sqSlot(int(head & (n - 1))))
			id := w.WRID()
			g, seq := id>>32, id&0xffffffff
			if g >= posters || seq != next[g] || w.SGE(0).Addr != id {
				done <- fmt.Errorf("device read wr_id %#x addr %#x at index %d; expected seq %d for poster %d", id, w.SGE(0).Addr, head, next[g%posters], g)
				return
			}
			next[g]++
			got++
			e.setSQHead((head + 1) & (2*n - 1))
		}
		done <- nil
	}()
	var wg sync.WaitGroup
	for g := range posters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < perG; {
				id := uint64(g)<<32 | uint64(i)
				wr := []verbs.SendWR{{ID: id, Opcode: verbs.OpSend, SGL: []verbs.SGE{{Addr: id, Length: 1}}}}
				k, err := e.qp.PostSend(wr)
				if err != nil && !errors.Is(err, verbs.ErrQueueFull) {
					t.Errorf("PostSend: %v", err)
					return
				}
				if k == 0 {
					runtime.Gosched()
				}
				i += k
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
