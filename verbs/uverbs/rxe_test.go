//go:build linux

package uverbs

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"testing"

	"github.com/pvperf/pvperf/internal/mmio"
	"github.com/pvperf/pvperf/internal/unix"
	"github.com/pvperf/pvperf/verbs"
)

// rxeKernel plays the rdma_rxe kernel driver for the tests of the rxe
// provider: it decodes every command written to it, checks its sizes,
// answers the way rxe does, and allocates the queues the program maps
// (rxe_queue_buf: a 384-byte header, then the elements).
type rxeKernel struct {
	t       testing.TB
	quiet   bool     // record nothing (allocation tests)
	cmds    []uint32 // command numbers, in order
	writes  [][]byte // every write, copied
	queues  map[int64][]byte
	next    int64 // next mmap offset cookie
	handles uint32
	pipes   []int
	gids    []gidEntryABI // the GID table QUERY_GID_TABLE returns; nil: no such ioctl
	ioctls  int
}

func newRXEKernel(t testing.TB) *rxeKernel {
	return &rxeKernel{t: t, queues: map[int64][]byte{}, next: 4096}
}

func (k *rxeKernel) mmap(off int64, n, prot int) ([]byte, error) {
	q, ok := k.queues[off]
	if !ok || n > len(q) {
		return nil, unix.EINVAL
	}
	delete(k.queues, off) // each queue maps once
	return q, nil
}

func (k *rxeKernel) close() error {
	for _, fd := range k.pipes {
		_ = unix.Close(fd)
	}
	return nil
}

// queue allocates a queue of at least n usable slots of esize bytes and
// returns its mminfo.
func (k *rxeKernel) queue(n, esize int) []byte {
	slots := 1
	for slots < n+1 {
		slots <<= 1
	}
	log2 := 0
	for 1<<log2 < esize {
		log2++
	}
	size := (rxeQData + slots<<log2 + 4095) &^ 4095
	b, err := unix.MmapAnon(size)
	if err != nil {
		k.t.Fatal(err)
	}
	binary.LittleEndian.PutUint32(b[rxeQLog2:], uint32(log2))
	binary.LittleEndian.PutUint32(b[rxeQMask:], uint32(slots-1))
	off := k.next
	k.queues[off] = b
	k.next += int64(size)
	mi := make([]byte, mminfoSize)
	binary.LittleEndian.PutUint64(mi[0:], uint64(off))
	binary.LittleEndian.PutUint32(mi[8:], uint32(size))
	return mi
}

func (k *rxeKernel) doorbell(b []byte) (int, error) { return k.write(b) }

// ioctl answers QUERY_GID_TABLE from k.gids as the kernel does (5.10 and
// later): it checks the header and every attribute, writes the entries and
// their count and marks both outputs written. With k.gids nil it is a
// kernel without the method.
func (k *rxeKernel) ioctl(addr uint64) error {
	k.ioctls++
	if k.gids == nil {
		return unix.EPROTONOSUPPORT
	}
	le := binary.LittleEndian
	hdr := unix.Bytes(addr, ioctlHdrSize)
	n := int(le.Uint16(hdr[6:]))
	if int(le.Uint16(hdr[0:])) != ioctlHdrSize+ioctlAttrSize*n || le.Uint16(hdr[2:]) != objectDevice ||
		le.Uint16(hdr[4:]) != methodQueryGIDTable || n != 4 || le.Uint64(hdr[8:]) != 0 ||
		le.Uint32(hdr[16:]) != 14 || le.Uint32(hdr[20:]) != 0 {
		k.t.Errorf("query gid table: header % x", hdr)
		return unix.EINVAL
	}
	attrs := unix.Bytes(addr+ioctlHdrSize, ioctlAttrSize*n)
	attr := func(i int) (id, length, flags, data16 uint16, data uint64) {
		a := attrs[i*ioctlAttrSize:]
		return le.Uint16(a[0:]), le.Uint16(a[2:]), le.Uint16(a[4:]), le.Uint16(a[6:]), le.Uint64(a[8:])
	}
	wantLen := []uint16{8, 4, 0, 8}
	for i := range n {
		id, length, flags, d16, data := attr(i)
		if int(id) != i || flags != attrMandatory || d16 != 0 || (i != 2 && length != wantLen[i]) {
			k.t.Errorf("query gid table: attribute %d: id %d len %d flags %#x attr_data %d data %#x", i, id, length, flags, d16, data)
			return unix.EINVAL
		}
	}
	_, _, _, _, esize := attr(0)
	_, _, _, _, flags := attr(1)
	_, elen, _, _, eptr := attr(2)
	_, _, _, _, nptr := attr(3)
	if esize != gidEntrySize || flags != 0 || elen%gidEntrySize != 0 || eptr == 0 || nptr == 0 {
		k.t.Errorf("query gid table: entry size %d, flags %d, entries %d bytes at %#x, count at %#x", esize, flags, elen, eptr, nptr)
		return unix.EINVAL
	}
	if len(k.gids) > int(elen)/gidEntrySize {
		return unix.EINVAL // rdma_query_gid_table: more entries than room
	}
	out := unix.Bytes(eptr, int(elen))
	for i, e := range k.gids {
		if _, err := binary.Encode(out[i*gidEntrySize:], le, e); err != nil {
			k.t.Fatal(err)
		}
	}
	le.PutUint64(unix.Bytes(nptr, 8), uint64(len(k.gids)))
	for _, i := range []int{2, 3} {
		le.PutUint16(attrs[i*ioctlAttrSize+4:], attrMandatory|2) // UVERBS_ATTR_F_VALID_OUTPUT
	}
	return nil
}

func (k *rxeKernel) write(b []byte) (int, error) {
	cmd := binary.LittleEndian.Uint32(b[0:])
	in := int(binary.LittleEndian.Uint16(b[4:])) * 4
	out := int(binary.LittleEndian.Uint16(b[6:])) * 4
	if k.quiet && cmd == cmdPostSend {
		return len(b), nil
	}
	k.writes = append(k.writes, bytes.Clone(b))
	k.cmds = append(k.cmds, cmd)
	if in != len(b) {
		k.t.Errorf("command %d: in_words say %d bytes, %d written", cmd, in, len(b))
		return 0, unix.EINVAL
	}
	p := b[cmdHdrSize:]
	le := binary.LittleEndian
	var resp []byte // what the kernel writes back
	want := func(total, outBytes int) {
		k.t.Helper()
		if len(b) != total || out != outBytes {
			k.t.Errorf("command %d: %d bytes in, %d out; want %d in, %d out", cmd, len(b), out, total, outBytes)
		}
	}
	k.handles++
	switch cmd {
	case cmdGetContext:
		want(16, 8)
		fds, err := pipe()
		if err != nil {
			k.t.Fatal(err)
		}
		k.pipes = append(k.pipes, fds[1])
		resp = le.AppendUint32(le.AppendUint32(nil, uint32(fds[0])), 2)
	case cmdQueryDevice:
		want(16, 176)
		resp = make([]byte, 176)
		le.PutUint32(resp[52:], 1<<17) // max_qp
		le.PutUint32(resp[156:], 64)   // max_srq
		resp[171] = 1                  // phys_port_cnt
	case cmdQueryPort:
		want(24, 40)
		resp = make([]byte, 40)
		le.PutUint32(resp[16:], 1024) // gid_tbl_len
		resp[26] = 4                  // state ACTIVE
		resp[37] = 2                  // link layer Ethernet
	case cmdAllocPD:
		want(16, 4)
		resp = le.AppendUint32(nil, k.handles)
	case cmdRegMR:
		want(48, 12)
		if start, va := le.Uint64(p[8:]), le.Uint64(p[24:]); start != va || start == 0 {
			k.t.Errorf("reg mr: start %#x, hca_va %#x", start, va)
		}
		resp = le.AppendUint32(le.AppendUint32(le.AppendUint32(nil, k.handles), 0x100+k.handles), 0x200+k.handles)
	case cmdCreateCQ:
		want(40, 24) // no driver input; mminfo out
		n := int(le.Uint32(p[16:]))
		resp = le.AppendUint32(le.AppendUint32(nil, k.handles), uint32(n))
		resp = append(resp, k.queue(n, 64)...)
	case cmdCreateQP:
		want(64, 64) // no driver input (rxe refuses any); rq_mi and sq_mi out
		if p[53] != uint8(verbs.RC) && p[53] != uint8(verbs.UC) && p[53] != uint8(verbs.UD) {
			k.t.Errorf("create qp: type %d", p[53])
		}
		sw, rw := int(le.Uint32(p[32:])), int(le.Uint32(p[36:]))
		resp = make([]byte, 32)
		le.PutUint32(resp[0:], k.handles)
		le.PutUint32(resp[4:], 0x11+k.handles)
		le.PutUint32(resp[8:], uint32(sw))
		le.PutUint32(resp[12:], uint32(rw))
		le.PutUint32(resp[16:], le.Uint32(p[40:]))
		le.PutUint32(resp[20:], le.Uint32(p[44:]))
		le.PutUint32(resp[24:], 256)
		rq := make([]byte, mminfoSize)
		if p[54] == 0 {
			rq = k.queue(rw, 64)
		}
		resp = append(resp, rq...)
		resp = append(resp, k.queue(sw, 512)...)
	case cmdModifyQP:
		want(120, 0)
	case cmdQueryQP:
		want(24, 128)
		resp = make([]byte, 128)
		resp[108] = uint8(verbs.StateRTS)
	case cmdPostSend:
		want(32, 4)
		if le.Uint32(p[12:]) != 0 || le.Uint32(p[16:]) != 0 || le.Uint32(p[20:]) != postSendWQE {
			k.t.Errorf("post send doorbell: wr_count %d, sge_count %d, wqe_size %d", le.Uint32(p[12:]), le.Uint32(p[16:]), le.Uint32(p[20:]))
		}
		resp = make([]byte, 4)
	case cmdReqNotifyCQ:
		want(16, 0)
	case cmdCreateSRQ:
		want(40, 40)
		n := int(le.Uint32(p[20:]))
		resp = make([]byte, 16)
		le.PutUint32(resp[0:], k.handles)
		le.PutUint32(resp[4:], uint32(n))
		le.PutUint32(resp[8:], le.Uint32(p[24:]))
		resp = append(resp, k.queue(n, 64)...)
		resp = le.AppendUint32(le.AppendUint32(resp, 0x77), 0)
	case cmdCreateAH:
		want(64, 12)
		if p[24+29] != 1 {
			k.t.Errorf("create ah without is_global")
		}
		resp = le.AppendUint32(le.AppendUint32(le.AppendUint32(nil, k.handles), 5), 0)
	case cmdDestroyCQ, cmdDestroyQP, cmdDestroySRQ:
		want(24, binary.Size(destroyCQResp{})*map[uint32]int{cmdDestroyCQ: 1, cmdDestroyQP: 0, cmdDestroySRQ: 0}[cmd]+4*map[uint32]int{cmdDestroyCQ: 0, cmdDestroyQP: 1, cmdDestroySRQ: 1}[cmd])
		resp = make([]byte, out)
	case cmdDeallocPD, cmdDeregMR, cmdDestroyAH:
		want(12, 0)
	default:
		k.t.Errorf("unexpected command %d", cmd)
		return 0, unix.EINVAL
	}
	if len(resp) != out {
		k.t.Fatalf("command %d: scripted response of %d bytes for %d", cmd, len(resp), out)
	}
	if out > 0 {
		// As the kernel does: at the address the request carries.
		copy(unix.Bytes(le.Uint64(p[0:]), out), resp)
	}
	return len(b), nil
}

func pipe() ([2]int, error) {
	r, w, err := unix.Pipe()
	return [2]int{r, w}, err
}

// rxeContext opens a Context of an rxe device on a scripted kernel.
func rxeContext(t testing.TB) (*Context, *rxeKernel) {
	t.Helper()
	k := newRXEKernel(t)
	d := &Device{name: "rxe0", driver: DriverRXE, abi: 2, numaNode: -1}
	c, err := newContext(d, k, &rxe{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c, k
}

func TestRXEControlPath(t *testing.T) {
	c, k := rxeContext(t)
	attr, err := c.QueryDevice()
	if err != nil {
		t.Fatal(err)
	}
	if !attr.Supports(verbs.UC) || attr.MaxInlineData != rxeMaxInline || attr.NumCompVectors != 2 {
		t.Errorf("device attributes %+v", attr)
	}
	pd, err := c.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	mem, err := c.AllocMemory(8192)
	if err != nil {
		t.Fatal(err)
	}
	mr, err := pd.RegMR(mem.Bytes(), verbs.AccessLocalWrite|verbs.AccessRemoteWrite)
	if err != nil {
		t.Fatal(err)
	}
	cq, err := c.CreateCQ(verbs.CQInit{Entries: 15})
	if err != nil {
		t.Fatal(err)
	}
	qp, err := pd.CreateQP(verbs.QPInit{Type: verbs.RC, SendCQ: cq, RecvCQ: cq, Cap: verbs.QPCap{MaxSendWR: 8, MaxRecvWR: 8, MaxSendSGE: 2, MaxRecvSGE: 2, MaxInlineData: 64}})
	if err != nil {
		t.Fatal(err)
	}
	// Posting before RTS fails; receives after INIT work.
	if _, err := qp.PostSend([]verbs.SendWR{{Opcode: verbs.OpSend}}); !errors.Is(err, unix.EINVAL) {
		t.Errorf("post send in RESET: %v", err)
	}
	if _, err := qp.PostRecv([]verbs.RecvWR{{}}); !errors.Is(err, unix.EINVAL) {
		t.Errorf("post recv in RESET: %v", err)
	}
	for _, st := range []verbs.QPState{verbs.StateInit, verbs.StateRTR, verbs.StateRTS} {
		if err := qp.Modify(&verbs.QPAttr{State: st, AH: verbs.AHAttr{IsGlobal: true, Port: 1}}, verbs.AttrState|verbs.AttrAV); err != nil {
			t.Fatal(err)
		}
	}
	last := k.writes[len(k.writes)-1][cmdHdrSize:]
	if last[96] != uint8(verbs.StateRTS) || last[30] != 1 || last[31] != 1 || binary.LittleEndian.Uint32(last[68:]) != uint32(verbs.AttrState|verbs.AttrAV) {
		t.Errorf("modify qp request: state %d, is_global %d, port %d, mask %#x", last[96], last[30], last[31], binary.LittleEndian.Uint32(last[68:]))
	}

	// RDMA WRITE with two SGEs: the rxe_send_wqe fields at the reference
	// offsets, then the doorbell.
	rq := qp.(*rxeQP)
	wr := verbs.SendWR{ID: 0x1122334455667788, Opcode: verbs.OpRDMAWriteImm, Flags: verbs.SendSignaled | verbs.SendSolicited, Imm: 0xa1b2c3d4,
		SGL:        []verbs.SGE{{Addr: mr.Addr(), Length: 100, LKey: mr.LKey()}, {Addr: mr.Addr() + 4096, Length: 28, LKey: mr.LKey()}},
		RemoteAddr: 0xfeed0000, RKey: 0xabcd}
	nw := len(k.writes)
	if n, err := qp.PostSend([]verbs.SendWR{wr}); n != 1 || err != nil {
		t.Fatalf("post send: %d, %v", n, err)
	}
	if len(k.writes) != nw+1 || k.cmds[len(k.cmds)-1] != cmdPostSend {
		t.Errorf("post send rang %d doorbells", len(k.writes)-nw)
	}
	if p := mmio.Load32(rq.sq.prod); p != 1 {
		t.Errorf("send queue producer %d, want 1", p)
	}
	e := rq.sq.elem(0)
	le := binary.LittleEndian
	for _, f := range []struct {
		name string
		off  int
		got  uint64
		want uint64
	}{
		{"wr_id", 0, le.Uint64(e[0:]), wr.ID},
		{"num_sge", 8, uint64(le.Uint32(e[8:])), 2},
		{"opcode", 12, uint64(le.Uint32(e[12:])), 1},
		{"send_flags", 16, uint64(le.Uint32(e[16:])), 2 | 4},
		{"imm (big-endian)", 20, uint64(binary.BigEndian.Uint32(e[20:])), 0xa1b2c3d4},
		{"remote_addr", 24, le.Uint64(e[24:]), 0xfeed0000},
		{"rkey", 32, uint64(le.Uint32(e[32:])), 0xabcd},
		{"status", 144, uint64(le.Uint32(e[144:])), 0},
		{"state", 148, uint64(le.Uint32(e[148:])), 0},
		{"iova", 152, le.Uint64(e[152:]), 0xfeed0000},
		{"dma.length", 184, uint64(le.Uint32(e[184:])), 128},
		{"dma.resid", 188, uint64(le.Uint32(e[188:])), 128},
		{"dma.cur_sge", 192, uint64(le.Uint32(e[192:])), 0},
		{"dma.num_sge", 196, uint64(le.Uint32(e[196:])), 2},
		{"dma.sge_offset", 200, uint64(le.Uint32(e[200:])), 0},
		{"sge[0].addr", 208, le.Uint64(e[208:]), mr.Addr()},
		{"sge[0].length", 216, uint64(le.Uint32(e[216:])), 100},
		{"sge[0].lkey", 220, uint64(le.Uint32(e[220:])), uint64(mr.LKey())},
		{"sge[1].addr", 224, le.Uint64(e[224:]), mr.Addr() + 4096},
		{"sge[1].length", 232, uint64(le.Uint32(e[232:])), 28},
	} {
		if f.got != f.want {
			t.Errorf("send wqe %s (offset %d) = %#x, want %#x", f.name, f.off, f.got, f.want)
		}
	}
	// Inline SEND: the payload bytes follow the dma header.
	copy(mem.Bytes()[64:], "inline payload")
	if _, err := qp.PostSend([]verbs.SendWR{{Opcode: verbs.OpSend, Flags: verbs.SendInline, SGL: []verbs.SGE{{Addr: mr.Addr() + 64, Length: 14}}}}); err != nil {
		t.Fatal(err)
	}
	e = rq.sq.elem(1)
	if le.Uint32(e[16:]) != uint32(verbs.SendInline) || string(e[208:222]) != "inline payload" || le.Uint32(e[196:]) != 0 || le.Uint32(e[184:]) != 14 {
		t.Errorf("inline send wqe: flags %#x, data %q, dma.num_sge %d, length %d", le.Uint32(e[16:]), e[208:222], le.Uint32(e[196:]), le.Uint32(e[184:]))
	}
	// Atomics need one 8-byte SGE.
	if _, err := qp.PostSend([]verbs.SendWR{{Opcode: verbs.OpAtomicFetchAdd, SGL: []verbs.SGE{{Addr: mr.Addr(), Length: 4, LKey: mr.LKey()}}}}); !errors.Is(err, unix.EINVAL) {
		t.Errorf("4-byte atomic: %v", err)
	}
	if _, err := qp.PostSend([]verbs.SendWR{{Opcode: verbs.OpAtomicCmpSwap, CompareAdd: 1, Swap: 2, RemoteAddr: 0x1000, RKey: 9, SGL: []verbs.SGE{{Addr: mr.Addr(), Length: 8, LKey: mr.LKey()}}}}); err != nil {
		t.Fatal(err)
	}
	e = rq.sq.elem(2)
	if le.Uint64(e[24:]) != 0x1000 || le.Uint64(e[32:]) != 1 || le.Uint64(e[40:]) != 2 || le.Uint32(e[48:]) != 9 || le.Uint64(e[152:]) != 0x1000 {
		t.Errorf("atomic wqe: remote %#x compare %d swap %d rkey %d iova %#x", le.Uint64(e[24:]), le.Uint64(e[32:]), le.Uint64(e[40:]), le.Uint32(e[48:]), le.Uint64(e[152:]))
	}

	// Receive: rxe_recv_wqe, no system call.
	nw = len(k.writes)
	if _, err := qp.PostRecv([]verbs.RecvWR{{ID: 77, SGL: []verbs.SGE{{Addr: mr.Addr(), Length: 256, LKey: mr.LKey()}}}}); err != nil {
		t.Fatal(err)
	}
	if len(k.writes) != nw {
		t.Error("post recv made a system call")
	}
	r := rq.rq.elem(0)
	if le.Uint64(r[0:]) != 77 || le.Uint32(r[8:]) != 1 || le.Uint32(r[16:]) != 256 || le.Uint32(r[20:]) != 256 || le.Uint32(r[28:]) != 1 ||
		le.Uint64(r[40:]) != mr.Addr() || le.Uint32(r[48:]) != 256 || le.Uint32(r[52:]) != mr.LKey() {
		t.Errorf("recv wqe % x", r[:56])
	}

	// A completion the kernel writes is polled back.
	rcq := cq.(*rxeCQ)
	w := rcq.q.elem(0)
	le.PutUint64(w[0:], 77)
	le.PutUint32(w[8:], uint32(verbs.WCSuccess))
	le.PutUint32(w[12:], uint32(verbs.WCRecvRDMAWithImm))
	le.PutUint32(w[20:], 1234)
	binary.BigEndian.PutUint32(w[24:], 0xdeadbeef)
	le.PutUint32(w[28:], qp.Num())
	le.PutUint32(w[36:], uint32(verbs.WCWithImm|verbs.WCWithGRH))
	mmio.Store32(rcq.q.prod, 1)
	wc := make([]verbs.WC, 4)
	n, err := cq.Poll(wc)
	if err != nil || n != 1 {
		t.Fatalf("poll: %d, %v", n, err)
	}
	if wc[0].ID != 77 || wc[0].Opcode != verbs.WCRecvRDMAWithImm || wc[0].ByteLen != 1234 || wc[0].Imm != 0xdeadbeef || wc[0].QPNum != qp.Num() || wc[0].Flags != verbs.WCWithImm|verbs.WCWithGRH {
		t.Errorf("polled %+v", wc[0])
	}
	if mmio.Load32(rcq.q.cons) != 1 {
		t.Error("consumer index not advanced")
	}
	if n, _ := cq.Poll(wc); n != 0 {
		t.Errorf("empty cq polled %d", n)
	}
	// Arm: REQ_NOTIFY_CQ with the solicited flag.
	if err := cq.ReqNotify(true); err != nil {
		t.Fatal(err)
	}
	last = k.writes[len(k.writes)-1]
	if k.cmds[len(k.cmds)-1] != cmdReqNotifyCQ || le.Uint32(last[8:]) != rcq.handle || le.Uint32(last[12:]) != 1 {
		t.Errorf("req notify % x", last)
	}

	// Close order is enforced.
	if err := cq.Close(); !errors.Is(err, unix.EBUSY) {
		t.Errorf("close cq used by a qp: %v", err)
	}
	for _, o := range []interface{ Close() error }{qp, cq, mr, mem, pd} {
		if err := o.Close(); err != nil {
			t.Errorf("close %T: %v", o, err)
		}
	}
	if _, err := qp.PostSend([]verbs.SendWR{wr}); !errors.Is(err, verbs.ErrClosed) {
		t.Errorf("post send after close: %v", err)
	}
}

func TestRXEQueueFull(t *testing.T) {
	c, _ := rxeContext(t)
	pd, _ := c.AllocPD()
	cq, _ := c.CreateCQ(verbs.CQInit{Entries: 4})
	qp, err := pd.CreateQP(verbs.QPInit{Type: verbs.RC, SendCQ: cq, RecvCQ: cq, Cap: verbs.QPCap{MaxSendWR: 3, MaxRecvWR: 3, MaxSendSGE: 1, MaxRecvSGE: 1}})
	if err != nil {
		t.Fatal(err)
	}
	if err := qp.Modify(&verbs.QPAttr{State: verbs.StateInit}, verbs.AttrState); err != nil {
		t.Fatal(err)
	}
	wrs := make([]verbs.RecvWR, 5)
	n, err := qp.PostRecv(wrs)
	if n != 3 || !errors.Is(err, verbs.ErrQueueFull) || !errors.Is(err, unix.ENOMEM) {
		t.Errorf("posted %d of 5 receives on a queue of 3: %v", n, err)
	}
	t.Cleanup(func() { _ = qp.Close(); _ = cq.Close(); _ = pd.Close() })
}

func TestRXEUD(t *testing.T) {
	c, _ := rxeContext(t)
	pd, _ := c.AllocPD()
	cq, _ := c.CreateCQ(verbs.CQInit{Entries: 4})
	qp, err := pd.CreateQP(verbs.QPInit{Type: verbs.UD, SendCQ: cq, RecvCQ: cq, Cap: verbs.QPCap{MaxSendWR: 4, MaxRecvWR: 4, MaxSendSGE: 1, MaxRecvSGE: 1}})
	if err != nil {
		t.Fatal(err)
	}
	ah, err := pd.CreateAH(verbs.AHAttr{IsGlobal: true, Port: 1, GRH: verbs.GRH{HopLimit: 64, SGIDIndex: 1}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pd.CreateAH(verbs.AHAttr{Port: 1}); !errors.Is(err, unix.EINVAL) {
		t.Errorf("ah without grh: %v", err)
	}
	_ = qp.Modify(&verbs.QPAttr{State: verbs.StateRTS}, verbs.AttrState)
	if _, err := qp.PostSend([]verbs.SendWR{{Opcode: verbs.OpSend, AH: ah, RemoteQPN: 0x42, RemoteQKey: 0x11111111}}); err != nil {
		t.Fatal(err)
	}
	e := qp.(*rxeQP).sq.elem(0)
	le := binary.LittleEndian
	if le.Uint32(e[24:]) != 0x42 || le.Uint32(e[28:]) != 0x11111111 || le.Uint32(e[36:]) != 5 {
		t.Errorf("ud wqe: remote_qpn %#x, qkey %#x, ah_num %d", le.Uint32(e[24:]), le.Uint32(e[28:]), le.Uint32(e[36:]))
	}
	if _, err := qp.PostSend([]verbs.SendWR{{Opcode: verbs.OpRDMAWrite, AH: ah}}); !errors.Is(err, unix.EINVAL) {
		t.Errorf("rdma write on ud: %v", err)
	}
	if _, err := qp.PostSend([]verbs.SendWR{{Opcode: verbs.OpSend}}); !errors.Is(err, unix.EINVAL) {
		t.Errorf("ud send without ah: %v", err)
	}
	t.Cleanup(func() { _ = ah.Close(); _ = qp.Close(); _ = cq.Close(); _ = pd.Close() })
}

// rxeRTS is an RC QP in RTS on a scripted kernel, with one CQ for both
// queues and a registered page.
func rxeRTS(tb testing.TB) (*rxeKernel, verbs.QP, verbs.CQ, verbs.MR) {
	tb.Helper()
	c, k := rxeContext(tb)
	must := func(err error) {
		tb.Helper()
		if err != nil {
			tb.Fatal(err)
		}
	}
	pd, err := c.AllocPD()
	must(err)
	mem, err := c.AllocMemory(4096)
	must(err)
	mr, err := pd.RegMR(mem.Bytes(), verbs.AccessLocalWrite)
	must(err)
	cq, err := c.CreateCQ(verbs.CQInit{Entries: 64})
	must(err)
	qp, err := pd.CreateQP(verbs.QPInit{Type: verbs.RC, SendCQ: cq, RecvCQ: cq, Cap: verbs.QPCap{MaxSendWR: 64, MaxRecvWR: 64, MaxSendSGE: 1, MaxRecvSGE: 1}})
	must(err)
	tb.Cleanup(func() { _ = qp.Close(); _ = cq.Close(); _ = mr.Close(); _ = mem.Close(); _ = pd.Close() })
	for _, st := range []verbs.QPState{verbs.StateInit, verbs.StateRTR, verbs.StateRTS} {
		must(qp.Modify(&verbs.QPAttr{State: st, AH: verbs.AHAttr{IsGlobal: true, Port: 1}}, verbs.AttrState|verbs.AttrAV))
	}
	return k, qp, cq, mr
}

func TestRXEAllocs(t *testing.T) {
	k, qp, cq, mr := rxeRTS(t)
	send := []verbs.SendWR{{Opcode: verbs.OpRDMAWrite, SGL: []verbs.SGE{{Addr: mr.Addr(), Length: 8, LKey: mr.LKey()}}}}
	recv := []verbs.RecvWR{{SGL: []verbs.SGE{{Addr: mr.Addr(), Length: 8, LKey: mr.LKey()}}}}
	wc := make([]verbs.WC, 8)
	sq, rqq := qp.(*rxeQP).sq, qp.(*rxeQP).rq
	k.quiet = true
	var failed error
	check := func(n int, err error) {
		if (n != 1 || err != nil) && failed == nil {
			failed = fmt.Errorf("%d posted or polled, %v", n, err)
		}
	}
	if a := testing.AllocsPerRun(100, func() {
		check(qp.PostSend(send))
		mmio.Store32(sq.cons, mmio.Load32(sq.prod)) // the kernel consumed it
	}); a > 0 {
		t.Errorf("post send allocates %v times", a)
	}
	if a := testing.AllocsPerRun(100, func() {
		check(qp.PostRecv(recv))
		mmio.Store32(rqq.cons, mmio.Load32(rqq.prod))
	}); a > 0 {
		t.Errorf("post recv allocates %v times", a)
	}
	// Each poll decodes a completion the kernel wrote.
	rcq := cq.(*rxeCQ)
	if a := testing.AllocsPerRun(100, func() {
		prod := mmio.Load32(rcq.q.prod)
		w := rcq.q.elem(prod)
		clear(w)
		binary.LittleEndian.PutUint64(w[0:], 5)
		binary.LittleEndian.PutUint32(w[12:], uint32(verbs.WCRecv))
		binary.LittleEndian.PutUint32(w[28:], qp.Num())
		mmio.Store32(rcq.q.prod, (prod+1)&rcq.q.mask)
		check(cq.Poll(wc))
	}); a > 0 {
		t.Errorf("poll allocates %v times", a)
	}
	if failed != nil {
		t.Fatal(failed)
	}
}
