//go:build linux

package uverbs

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/pvperf/pvperf/internal/abitest"
	"github.com/pvperf/pvperf/internal/mmio"
	"github.com/pvperf/pvperf/internal/unix"
	"github.com/pvperf/pvperf/verbs"
	"github.com/pvperf/pvperf/verbs/pvrdma"
)

// The vmw_pvrdma provider cannot meet its device here (that needs a
// virtual machine on vSphere), so it is held to the ABI: pvKernel plays
// the kernel driver and the device behind it. It decodes every command at
// the byte offsets of the uverbs and vmw_pvrdma headers, checks the sizes
// the kernel checks, inspects the ring buffers the program hands over (page
// alignment, size, zeroed, every page written before it is pinned), and
// answers at the response address each request carries. As the device it
// reads the rings and the doorbell page and writes CQEs.

// pvSizes are the commands the provider may write: total bytes written
// (header included) and response bytes. Anything else, POST_SEND,
// POLL_CQ, REQ_NOTIFY_CQ or CREATE_AH above all, is an error: user
// objects of vmw_pvrdma have no kernel-side rings, and address handles
// exist only in user space.
var pvSizes = map[uint32][2]int{
	cmdGetContext:        {16, 16},
	cmdQueryDevice:       {16, 176},
	cmdQueryPort:         {24, 40},
	cmdAllocPD:           {16, 12},
	cmdDeallocPD:         {12, 0},
	cmdRegMR:             {48, 12},
	cmdDeregMR:           {12, 0},
	cmdCreateCompChannel: {16, 4},
	cmdCreateCQ:          {56, 16},
	cmdDestroyCQ:         {24, 8},
	cmdCreateQP:          {96, 40},
	cmdQueryQP:           {24, 128},
	cmdModifyQP:          {120, 0},
	cmdDestroyQP:         {24, 4},
	cmdCreateSRQ:         {56, 24},
	cmdModifySRQ:         {24, 0},
	cmdQuerySRQ:          {24, 16},
	cmdDestroySRQ:        {24, 4},
}

// Identifiers the scripted kernel gives, derived from the uverbs handle h
// so that no two kinds coincide: the device QP handle differs from the QP
// number, as on hosts of device version 20.
func pvPDN(h uint32) uint32   { return 0x40 + h }
func pvCQN(h uint32) uint32   { return 0x300 + h }
func pvQPN(h uint32) uint32   { return 0x1000 + h }
func pvDevQP(h uint32) uint32 { return 0x20 + h }
func pvSRQN(h uint32) uint32  { return 0x500 + h }

type pvKernel struct {
	t  *testing.T
	mu sync.Mutex

	// What the host reports.
	maxSRQ    uint32
	atomicCap uint32
	qpTabSize uint32

	// Behaviour.
	oldKernel bool               // CREATE_QP writes no driver output (kernels before 5.5)
	cqeReply  uint32             // the CQ size CREATE_CQ answers, when not 0
	fail      map[uint32]error   // fail the next command of that number
	cmds      []uint32           // command numbers, in order
	writes    [][]byte           // every write, copied
	last      map[uint32][]byte  // the last payload of each command
	next      uint32             // last handle given
	pipes     []int              // our ends of the event descriptors
	channels  map[int32]bool     // completion channel descriptors given
	pds       map[uint32]bool    // live PD handles
	cqs       map[uint32]*pvKCQ  // by uverbs handle
	qps       map[uint32]*pvKQP  // by uverbs handle
	srqs      map[uint32]*pvKSRQ // by uverbs handle
	uar       []byte
	uarMaps   int
	closed    bool
	pagemapOK bool
}

// The device's view of the objects.
type pvKCQ struct {
	handle, cqn uint32
	n           int
	buf         []byte
	user        uint64
}

type pvKQP struct {
	handle, qpn, dev uint32
	typ              verbs.QPType
	l                pvrdma.QPLayout
	sbuf, rbuf       []byte
	scq, rcq, srq    uint32
}

type pvKSRQ struct {
	handle, srqn uint32
	n, stride    int
	buf          []byte
	limit        uint32
}

func newPVKernel(t *testing.T) *pvKernel {
	k := &pvKernel{
		t: t, maxSRQ: 32, atomicCap: uint32(verbs.AtomicHCA), qpTabSize: 1024,
		fail: map[uint32]error{}, last: map[uint32][]byte{}, channels: map[int32]bool{},
		pds: map[uint32]bool{}, cqs: map[uint32]*pvKCQ{}, qps: map[uint32]*pvKQP{}, srqs: map[uint32]*pvKSRQ{},
	}
	_, err := pvWritten(0, 0)
	k.pagemapOK = err == nil
	return k
}

func (k *pvKernel) mmap(off int64, n, prot int) ([]byte, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	// pvrdma_mmap: exactly one page at a page-aligned offset; rdma-core
	// maps it write-only at offset 0.
	if off != 0 || n != pvrdma.PageSize || prot != unix.ProtWrite {
		k.t.Errorf("mmap(off %d, %d bytes, prot %#x); want the doorbell page: off 0, 4096 bytes, PROT_WRITE", off, n, prot)
		return nil, unix.EINVAL
	}
	if len(k.cmds) == 0 || k.cmds[0] != cmdGetContext {
		k.t.Errorf("mmap before GET_CONTEXT")
		return nil, unix.EINVAL
	}
	b, err := mmapAnon(n)
	if err != nil {
		return nil, err
	}
	k.uar = b
	k.uarMaps++
	return b, nil
}

func (k *pvKernel) close() error {
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, fd := range k.pipes {
		_ = unix.Close(fd)
	}
	k.pipes = nil
	k.closed = true
	return nil
}

// eventFD returns the read end of a new pipe, for the program.
func (k *pvKernel) eventFD() int32 {
	r, w, err := unix.Pipe()
	if err != nil {
		k.t.Errorf("pipe: %v", err)
		return -1
	}
	k.pipes = append(k.pipes, w)
	return int32(r)
}

// ringBuffer checks a ring buffer the program hands over, and returns it.
func (k *pvKernel) ringBuffer(what string, addr uint64, size uint32, want int) []byte {
	k.t.Helper()
	if addr == 0 || addr%pvrdma.PageSize != 0 {
		k.t.Errorf("%s at %#x: not page-aligned", what, addr)
		return nil
	}
	if int(size) != want {
		k.t.Errorf("%s of %d bytes, want %d", what, size, want)
	}
	if k.pagemapOK {
		if ok, err := pvWritten(addr, int(size)); err != nil {
			k.t.Errorf("%s: %v", what, err)
		} else if !ok {
			k.t.Errorf("%s: pages never written before the kernel pins them (they would be the shared zero page)", what)
		}
	}
	b := unix.Bytes(addr, int(size))
	if i := bytes.IndexFunc(b, func(r rune) bool { return r != 0 }); i >= 0 {
		k.t.Errorf("%s: byte %d is not zero", what, i)
	}
	return b
}

// ioctl: a kernel without ioctl methods (GIDTable reads sysfs).
func (k *pvKernel) ioctl(uint64) error { return unix.ENOTTY }

func (k *pvKernel) doorbell(b []byte) (int, error) { return k.write(b) }

func (k *pvKernel) write(b []byte) (int, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	t := k.t
	le := binary.LittleEndian
	if len(b) < cmdHdrSize {
		t.Errorf("write of %d bytes", len(b))
		return 0, unix.EINVAL
	}
	cmd := le.Uint32(b[0:])
	in, out := int(le.Uint16(b[4:]))*4, int(le.Uint16(b[6:]))*4
	k.writes = append(k.writes, bytes.Clone(b))
	k.cmds = append(k.cmds, cmd)
	size, ok := pvSizes[cmd]
	if !ok {
		t.Errorf("command %d written to vmw_pvrdma", cmd)
		return 0, unix.EINVAL
	}
	if in != len(b) || len(b) != size[0] || out != size[1] {
		t.Errorf("command %d: in_words %d, out_words %d, %d bytes written; want %d bytes in, %d out", cmd, in/4, out/4, len(b), size[0], size[1])
		return 0, unix.EINVAL
	}
	p := b[cmdHdrSize:]
	k.last[cmd] = bytes.Clone(p)
	if err, ok := k.fail[cmd]; ok {
		delete(k.fail, cmd)
		return 0, err
	}
	var resp []byte
	u32 := func(v ...uint32) {
		for _, x := range v {
			resp = le.AppendUint32(resp, x)
		}
	}
	zero := func(what string, bs []byte) {
		if bytes.IndexFunc(bs, func(r rune) bool { return r != 0 }) >= 0 {
			t.Errorf("command %d: %s % x, want zeros", cmd, what, bs)
		}
	}
	switch cmd {
	case cmdGetContext:
		fd := k.eventFD()
		u32(uint32(fd), 1, k.qpTabSize, 0) // async_fd, num_comp_vectors; qp_tab_size, reserved
	case cmdQueryDevice:
		resp = make([]byte, 176)
		le.PutUint32(resp[44:], 0x0820)                                    // vendor_part_id
		le.PutUint32(resp[52:], 256)                                       // max_qp
		le.PutUint32(resp[56:], 1024)                                      // max_qp_wr
		le.PutUint32(resp[60:], uint32(verbs.DeviceSRQResize|1<<12|1<<14)) // device_cap_flags
		le.PutUint32(resp[64:], 16)                                        // max_sge
		le.PutUint32(resp[76:], 4096)                                      // max_cqe
		le.PutUint32(resp[108:], k.atomicCap)                              // atomic_cap
		le.PutUint32(resp[156:], k.maxSRQ)                                 // max_srq
		le.PutUint32(resp[160:], 512)                                      // max_srq_wr
		le.PutUint32(resp[164:], 8)                                        // max_srq_sge
		resp[171] = 1                                                      // phys_port_cnt
	case cmdQueryPort:
		resp = make([]byte, 40)
		resp[26], resp[37] = uint8(verbs.PortActive), uint8(verbs.LinkEthernet)
	case cmdAllocPD:
		k.next++
		k.pds[k.next] = true
		u32(k.next, pvPDN(k.next), 0) // pd_handle; pdn, reserved
	case cmdDeallocPD:
		h := le.Uint32(p[0:])
		if !k.pds[h] {
			t.Errorf("dealloc pd %d: no such pd", h)
			return 0, unix.EINVAL
		}
		delete(k.pds, h)
	case cmdRegMR:
		if h := le.Uint32(p[32:]); !k.pds[h] {
			t.Errorf("reg mr on pd %d: no such pd", h)
		}
		k.next++
		u32(k.next, 0x100+k.next, 0x200+k.next)
	case cmdDeregMR:
	case cmdCreateCompChannel:
		fd := k.eventFD()
		k.channels[fd] = true
		u32(uint32(fd))
	case cmdCreateCQ:
		user, n, vector, ch := le.Uint64(p[8:]), le.Uint32(p[16:]), le.Uint32(p[20:]), int32(le.Uint32(p[24:]))
		if user == 0 || n == 0 || n&(n-1) != 0 || vector != 0 || (ch != -1 && !k.channels[ch]) {
			t.Errorf("create cq: user_handle %d, cqe %d (want a power of two), comp_vector %d, comp_channel %d", user, n, vector, ch)
		}
		zero("core reserved", p[28:32])
		// pvrdma_create_cq: buf_addr u64 @32, buf_size u32 @40, reserved @44.
		zero("driver reserved", p[44:48])
		buf := k.ringBuffer("cq buffer", le.Uint64(p[32:]), le.Uint32(p[40:]), pvrdma.PageSize+(int(n)*64+4095)&^4095)
		k.next++
		cqe := n
		if k.cqeReply != 0 {
			cqe = k.cqeReply
		}
		k.cqs[k.next] = &pvKCQ{handle: k.next, cqn: pvCQN(k.next), n: int(cqe), buf: buf, user: user}
		u32(k.next, cqe, pvCQN(k.next), 0) // cq_handle, cqe; cqn, reserved
	case cmdDestroyCQ:
		h := le.Uint32(p[8:])
		if k.cqs[h] == nil {
			t.Errorf("destroy cq %d: no such cq", h)
			return 0, unix.EINVAL
		}
		delete(k.cqs, h)
		u32(0, 0)
	case cmdCreateQP:
		pd, scq, rcq, srq := le.Uint32(p[16:]), le.Uint32(p[20:]), le.Uint32(p[24:]), le.Uint32(p[28:])
		sw, rw, ss, rs, inl := le.Uint32(p[32:]), le.Uint32(p[36:]), le.Uint32(p[40:]), le.Uint32(p[44:]), le.Uint32(p[48:])
		typ, isSRQ := verbs.QPType(p[53]), p[54] != 0
		if le.Uint64(p[8:]) == 0 || !k.pds[pd] || k.cqs[scq] == nil || k.cqs[rcq] == nil || (isSRQ && k.srqs[srq] == nil) || (!isSRQ && srq != 0) {
			t.Errorf("create qp: user_handle %d, pd %d, cqs %d/%d, srq %d (is_srq %v)", le.Uint64(p[8:]), pd, scq, rcq, srq, isSRQ)
		}
		if typ != verbs.RC && typ != verbs.UD {
			t.Errorf("create qp of type %d on vmw_pvrdma", typ)
		}
		if sw == 0 || sw&(sw-1) != 0 || ss == 0 || inl != 0 || p[55] != 0 {
			t.Errorf("create qp: max_send_wr %d (want a power of two), max_send_sge %d, max_inline_data %d, reserved %d", sw, ss, inl, p[55])
		}
		if isSRQ && (rw != 0 || rs != 0) || !isSRQ && (rw == 0 || rw&(rw-1) != 0 || rs == 0) {
			t.Errorf("create qp (is_srq %v): max_recv_wr %d, max_recv_sge %d", isSRQ, rw, rs)
		}
		// pvrdma_create_qp: rbuf_addr @56, sbuf_addr @64, rbuf_size @72,
		// sbuf_size @76, qp_addr @80.
		l := pvrdma.NewQPLayout(verbs.QPCap{MaxSendWR: int(sw), MaxRecvWR: int(rw), MaxSendSGE: int(ss), MaxRecvSGE: int(rs)}, isSRQ)
		q := &pvKQP{typ: typ, l: l, scq: scq, rcq: rcq, srq: srq}
		q.sbuf = k.ringBuffer("qp send buffer", le.Uint64(p[64:]), le.Uint32(p[76:]), l.SendBufLen)
		if isSRQ {
			if le.Uint64(p[56:]) != 0 || le.Uint32(p[72:]) != 0 {
				t.Errorf("qp on an srq with a receive buffer at %#x of %d bytes", le.Uint64(p[56:]), le.Uint32(p[72:]))
			}
		} else {
			q.rbuf = k.ringBuffer("qp receive buffer", le.Uint64(p[56:]), le.Uint32(p[72:]), l.RecvBufLen)
		}
		if le.Uint64(p[80:]) != 0 {
			t.Errorf("create qp: qp_addr %#x", le.Uint64(p[80:]))
		}
		k.next++
		q.handle, q.qpn, q.dev = k.next, pvQPN(k.next), pvDevQP(k.next)
		k.qps[k.next] = q
		u32(k.next, q.qpn, sw, rw, ss, rs, 0, 0)
		if k.oldKernel {
			u32(0, 0)
		} else {
			u32(q.qpn, q.dev) // pvrdma_create_qp_resp: qpn, qp_handle
		}
	case cmdModifyQP:
		if h := le.Uint32(p[64:]); k.qps[h] == nil {
			return 0, unix.EINVAL // destroyed meanwhile
		}
	case cmdQueryQP:
		resp = make([]byte, 128)
	case cmdDestroyQP:
		h := le.Uint32(p[8:])
		if k.qps[h] == nil {
			t.Errorf("destroy qp %d: no such qp", h)
			return 0, unix.EINVAL
		}
		delete(k.qps, h)
		u32(0)
	case cmdCreateSRQ:
		pd, n, sge, limit := le.Uint32(p[16:]), le.Uint32(p[20:]), le.Uint32(p[24:]), le.Uint32(p[28:])
		if le.Uint64(p[8:]) == 0 || !k.pds[pd] || n == 0 || n&(n-1) != 0 || sge == 0 {
			t.Errorf("create srq: user_handle %d, pd %d, max_wr %d (want a power of two), max_sge %d", le.Uint64(p[8:]), pd, n, sge)
		}
		// pvrdma_create_srq: buf_addr @32, buf_size @40, reserved @44.
		zero("driver reserved", p[44:48])
		stride := pvrdma.RecvStride(int(sge))
		buf := k.ringBuffer("srq buffer", le.Uint64(p[32:]), le.Uint32(p[40:]), pvrdma.PageSize+(int(n)*stride+4095)&^4095)
		k.next++
		k.srqs[k.next] = &pvKSRQ{handle: k.next, srqn: pvSRQN(k.next), n: int(n), stride: stride, buf: buf, limit: limit}
		u32(k.next, n, sge, 0, pvSRQN(k.next), 0) // srq_handle, max_wr, max_sge, srqn (core, XRC only); srqn, reserved
	case cmdModifySRQ:
		s := k.srqs[le.Uint32(p[0:])]
		if s == nil {
			t.Errorf("modify srq %d: no such srq", le.Uint32(p[0:]))
			return 0, unix.EINVAL
		}
		if le.Uint32(p[4:]) != uint32(verbs.SRQLimit) {
			return 0, unix.EINVAL // pvrdma_modify_srq: the limit only
		}
		s.limit = le.Uint32(p[12:])
	case cmdQuerySRQ:
		s := k.srqs[le.Uint32(p[8:])]
		if s == nil {
			return 0, unix.EINVAL
		}
		u32(uint32(s.n), 1, s.limit, 0)
	case cmdDestroySRQ:
		h := le.Uint32(p[8:])
		if k.srqs[h] == nil {
			t.Errorf("destroy srq %d: no such srq", h)
			return 0, unix.EINVAL
		}
		delete(k.srqs, h)
		u32(0)
	}
	if len(resp) != out {
		t.Errorf("command %d: scripted response of %d bytes for %d", cmd, len(resp), out)
		return 0, unix.EINVAL
	}
	if out > 0 {
		copy(unix.Bytes(le.Uint64(p[0:]), out), resp)
	}
	return len(b), nil
}

// count returns how many commands were written.
func (k *pvKernel) count() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return len(k.cmds)
}

// lastPayload returns the payload of the last command cmd written.
func (k *pvKernel) lastPayload(cmd uint32) []byte {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.last[cmd]
}

// uar32 reads the doorbell word at off.
func (k *pvKernel) uar32(off int) uint32 { return mmio.Load32(unix.Word32(k.uar, off)) }

// clearUAR forgets the doorbells rung so far.
func (k *pvKernel) clearUAR() {
	for off := 0; off < 12; off += 4 {
		mmio.Store32(unix.Word32(k.uar, off), 0)
	}
}

// The device's views of the rings.
func (q *pvKQP) sq() pvrdma.Queue {
	return pvrdma.NewQueue(q.sbuf, pvrdma.TxRingOffset, q.sbuf[pvrdma.PageSize:], q.l.SendWR, q.l.SendStride)
}

func (q *pvKQP) rq() pvrdma.Queue {
	return pvrdma.NewQueue(q.sbuf, pvrdma.RxRingOffset, q.rbuf, q.l.RecvWR, q.l.RecvStride)
}

func (s *pvKSRQ) q() pvrdma.Queue {
	return pvrdma.NewQueue(s.buf, pvrdma.RxRingOffset, s.buf[pvrdma.PageSize:], s.n, s.stride)
}

// device runs f, a device access to the rings of QP q and its CQs, unless
// the QP was destroyed: the kernel returns from DESTROY_QP once the device
// no longer uses them.
func (k *pvKernel) device(q *pvKQP, f func()) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.qps[q.handle] == q {
		f()
	}
}

// pvWQE returns the WQE at index i of the device's view of a queue.
func pvWQE(q pvrdma.Queue, i uint32) []byte { return q.WQE(i) }

func (c *pvKCQ) ring() pvrdma.Ring { return pvrdma.NewRing(c.buf, pvrdma.RxRingOffset, c.n) }

// complete writes a CQE into the CQ as the device does.
func (c *pvKCQ) complete(e pvrdma.CQE) {
	r := c.ring()
	tail := r.Producer()
	off := pvrdma.PageSize + r.Slot(tail)*pvrdma.CQESize
	e.Encode(c.buf[off : off+pvrdma.CQESize])
	r.SetProducer(r.Next(tail))
}

// pvWritten reports whether every page of the n bytes at addr is memory
// of its own: present and exclusively mapped in /proc/self/pagemap, as a
// page the program wrote is and the shared zero page (a page only read)
// is not.
func pvWritten(addr uint64, n int) (bool, error) {
	f, err := os.Open("/proc/self/pagemap")
	if err != nil {
		return false, err
	}
	defer f.Close()
	const ps = pvrdma.PageSize
	for pg := addr / ps; pg < (addr+uint64(n)+ps-1)/ps; pg++ {
		var e [8]byte
		if _, err := f.ReadAt(e[:], int64(pg*8)); err != nil {
			return false, err
		}
		if v := binary.LittleEndian.Uint64(e[:]); v>>63&1 == 0 || v>>56&1 == 0 {
			return false, nil
		}
	}
	return true, nil
}

// mapped follows the program's mappings (mmapAnon and munmap, and the
// fake kernels' doorbell pages): an address freed and reused by another
// mapping in the meantime cannot fool the checks, as /proc/self/maps could.
var mapped = struct {
	sync.Mutex
	m map[uint64]uint64 // start -> end
}{m: map[uint64]uint64{}}

func init() {
	mmapAnon = func(n int) ([]byte, error) {
		b, err := unix.MmapAnon(n)
		if err == nil {
			track(b)
		}
		return b, err
	}
	munmap = func(b []byte) error {
		mapped.Lock()
		delete(mapped.m, unix.Addr(b))
		mapped.Unlock()
		return unix.Munmap(b)
	}
}

func track(b []byte) {
	mapped.Lock()
	mapped.m[unix.Addr(b)] = unix.Addr(b) + uint64(cap(b))
	mapped.Unlock()
}

// pvMapped reports whether addr lies in a live mapping of the program.
func pvMapped(t *testing.T, addr uint64) bool {
	t.Helper()
	mapped.Lock()
	defer mapped.Unlock()
	for lo, hi := range mapped.m {
		if addr >= lo && addr < hi {
			return true
		}
	}
	return false
}

// pvContext opens a Context of a vmw_pvrdma device on a scripted kernel.
func pvContext(t *testing.T, setup ...func(*pvKernel)) (*Context, *pvKernel) {
	t.Helper()
	k := newPVKernel(t)
	for _, f := range setup {
		f(k)
	}
	d := &Device{name: "vmw_pvrdma0", driver: DriverPVRDMA, abi: abiPVRDMA, numaNode: -1}
	c, err := newContext(d, k, newPVRDMA())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c, k
}

// pvObjects are what most tests need.
type pvObjects struct {
	c   *Context
	k   *pvKernel
	pd  verbs.PD
	mem verbs.Memory
	mr  verbs.MR
	cq  verbs.CQ
}

func pvSetup(t *testing.T, setup ...func(*pvKernel)) *pvObjects {
	t.Helper()
	c, k := pvContext(t, setup...)
	o := &pvObjects{c: c, k: k}
	var err error
	if o.pd, err = c.AllocPD(); err != nil {
		t.Fatal(err)
	}
	if o.mem, err = c.AllocMemory(2 * pvrdma.PageSize); err != nil {
		t.Fatal(err)
	}
	if o.mr, err = o.pd.RegMR(o.mem.Bytes(), verbs.AccessLocalWrite|verbs.AccessRemoteWrite); err != nil {
		t.Fatal(err)
	}
	if o.cq, err = c.CreateCQ(verbs.CQInit{Entries: 64}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, x := range []interface{ Close() error }{o.cq, o.mr, o.mem, o.pd} {
			if err := x.Close(); err != nil {
				t.Errorf("close %T: %v", x, err)
			}
		}
	})
	return o
}

// qp creates a QP, closed when the test ends.
func (o *pvObjects) qp(t *testing.T, init verbs.QPInit) (*pvrdmaQP, *pvKQP) {
	t.Helper()
	if init.SendCQ == nil {
		init.SendCQ, init.RecvCQ = o.cq, o.cq
	}
	qp, err := o.pd.CreateQP(init)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := qp.Close(); err != nil {
			t.Errorf("close qp: %v", err)
		}
	})
	q := qp.(*pvrdmaQP)
	return q, o.k.qps[q.handle]
}

// toRTS walks a QP to RTS.
func pvToRTS(t *testing.T, qp verbs.QP) {
	t.Helper()
	for _, s := range []verbs.QPState{verbs.StateInit, verbs.StateRTR, verbs.StateRTS} {
		if err := qp.Modify(&verbs.QPAttr{State: s}, verbs.AttrState); err != nil {
			t.Fatalf("modify to %v: %v", s, err)
		}
	}
}

// TestPVRDMAABILayouts pins the vmw_pvrdma driver data to the layout of
// vmw_pvrdma-abi.h.
func TestPVRDMAABILayouts(t *testing.T) {
	for _, c := range []struct {
		v    any
		size int
		offs map[string]int
	}{
		{pvrdmaContextResp{}, 8, map[string]int{"QPTabSize": 0, "Reserved": 4}},
		{pvrdmaPDResp{}, 8, map[string]int{"PDN": 0, "Reserved": 4}},
		{pvrdmaCreateCQ{}, 16, map[string]int{"BufAddr": 0, "BufSize": 8, "Reserved": 12}},
		{pvrdmaCreateCQResp{}, 8, map[string]int{"CQN": 0, "Reserved": 4}},
		{pvrdmaCreateSRQ{}, 16, map[string]int{"BufAddr": 0, "BufSize": 8, "Reserved": 12}},
		{pvrdmaCreateSRQResp{}, 8, map[string]int{"SRQN": 0, "Reserved": 4}},
		{pvrdmaCreateQP{}, 32, map[string]int{"RBufAddr": 0, "SBufAddr": 8, "RBufSize": 16, "SBufSize": 20, "QPAddr": 24}},
		{pvrdmaCreateQPResp{}, 8, map[string]int{"QPN": 0, "QPHandle": 4}},
	} {
		abitest.Check(t, abitest.Struct{V: c.v, Size: c.size, Offs: c.offs, All: true})
	}
	for name, n := range map[string]int{
		"context": pvrdmaContextRespSize, "pd": pvrdmaPDRespSize, "cq": pvrdmaCQRespSize,
		"srq": pvrdmaSRQRespSize, "qp": pvrdmaQPRespSize,
	} {
		if n != 8 {
			t.Errorf("%s driver response of %d bytes, want 8", name, n)
		}
	}
	// The encoders put each field where the header says.
	b := pvrdmaEncode(&pvrdmaCreateQP{RBufAddr: 0x1111, SBufAddr: 0x2222, RBufSize: 0x33, SBufSize: 0x44, QPAddr: 0x55})
	le := binary.LittleEndian
	if len(b) != 32 || le.Uint64(b[0:]) != 0x1111 || le.Uint64(b[8:]) != 0x2222 || le.Uint32(b[16:]) != 0x33 || le.Uint32(b[20:]) != 0x44 || le.Uint64(b[24:]) != 0x55 {
		t.Errorf("pvrdma_create_qp encodes as % x", b)
	}
}

// TestPVRDMAWrittenCheck makes sure the pagemap check tells written pages
// from untouched ones and from the shared zero page.
func TestPVRDMAWrittenCheck(t *testing.T) {
	b, err := unix.MmapAnon(3 * pvrdma.PageSize)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = unix.Munmap(b) }()
	a := unix.Addr(b)
	if _, err := pvWritten(a, len(b)); err != nil {
		t.Skipf("no /proc/self/pagemap: %v", err)
	}
	b[0] = 1
	sink := b[pvrdma.PageSize] // read: the zero page
	if ok, _ := pvWritten(a, pvrdma.PageSize); !ok {
		t.Error("a written page is not seen as written")
	}
	if ok, _ := pvWritten(a+pvrdma.PageSize, pvrdma.PageSize); ok {
		t.Errorf("a page only read (%d) is seen as written", sink)
	}
	if ok, _ := pvWritten(a+2*pvrdma.PageSize, pvrdma.PageSize); ok {
		t.Error("an untouched page is seen as written")
	}
	if ok, _ := pvWritten(a, len(b)); ok {
		t.Error("a partly written buffer is seen as written")
	}
}

func TestPVRDMAContext(t *testing.T) {
	c, k := pvContext(t)
	if len(k.cmds) != 2 || k.cmds[0] != cmdGetContext || k.cmds[1] != cmdQueryDevice || k.uarMaps != 1 {
		t.Fatalf("opening wrote commands %v and mapped the doorbell page %d times; want GET_CONTEXT, QUERY_DEVICE and one mapping", k.cmds, k.uarMaps)
	}
	p := c.prov.(*pvrdmaProvider)
	if p.qpTab != 1024 || p.caps.maxSRQ != 32 || !p.caps.atomics || p.caps.ports != 1 || p.caps.maxCQE != 4096 {
		t.Errorf("context state: qp_tab_size %d, caps %+v", p.qpTab, p.caps)
	}
	a, err := c.QueryDevice()
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(a.QPTypes, []verbs.QPType{verbs.RC, verbs.UD}) || a.Supports(verbs.UC) || a.MaxInlineData != 0 {
		t.Errorf("qp types %v, max inline %d; want RC and UD, no inline", a.QPTypes, a.MaxInlineData)
	}
	if a.Flags&verbs.DeviceSRQResize != 0 || a.MaxSRQ != 32 || a.MaxSRQWR != 512 || a.VendorPartID != 0x0820 || a.NumCompVectors != 1 {
		t.Errorf("device attributes %+v", a)
	}
	// Objects keep the context open; afterwards everything is closed.
	pd, err := c.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); !errors.Is(err, unix.EBUSY) {
		t.Errorf("close with a pd open: %v", err)
	}
	if err := pd.Close(); err != nil {
		t.Fatal(err)
	}
	uar := unix.Addr(k.uar)
	if !pvMapped(t, uar) {
		t.Fatal("the doorbell page is not mapped")
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if pvMapped(t, uar) {
		t.Error("the doorbell page is still mapped after close")
	}
	if !k.closed {
		t.Error("the device was not closed")
	}
	if _, err := c.AllocPD(); !errors.Is(err, verbs.ErrClosed) {
		t.Errorf("alloc pd after close: %v", err)
	}
	if _, err := c.CreateCQ(verbs.CQInit{Entries: 1}); !errors.Is(err, verbs.ErrClosed) {
		t.Errorf("create cq after close: %v", err)
	}
	if _, err := c.QueryDevice(); !errors.Is(err, verbs.ErrClosed) {
		t.Errorf("query device after close: %v", err)
	}
}

func TestPVRDMAOpenFails(t *testing.T) {
	k := newPVKernel(t)
	k.fail[cmdQueryDevice] = unix.EINVAL
	d := &Device{name: "vmw_pvrdma0", driver: DriverPVRDMA, abi: abiPVRDMA, numaNode: -1}
	if _, err := newContext(d, k, newPVRDMA()); !errors.Is(err, unix.EINVAL) {
		t.Errorf("open with a failing QUERY_DEVICE: %v", err)
	}
	if k.uarMaps != 1 || pvMapped(t, unix.Addr(k.uar)) || !k.closed {
		t.Errorf("after a failed open: %d doorbell mappings, still mapped %v, device closed %v", k.uarMaps, pvMapped(t, unix.Addr(k.uar)), k.closed)
	}
}

func TestPVRDMAPD(t *testing.T) {
	c, k := pvContext(t)
	pd, err := c.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	h := pd.(*PD).handle
	if got := pvrdmaPDN(pd.(*PD)); got != pvPDN(h) {
		t.Errorf("pdn %#x, want %#x from ALLOC_PD's driver data", got, pvPDN(h))
	}
	if err := pd.Close(); err != nil {
		t.Fatal(err)
	}
	if p := k.lastPayload(cmdDeallocPD); binary.LittleEndian.Uint32(p) != h {
		t.Errorf("dealloc pd payload % x", p)
	}
}

func TestPVRDMACQ(t *testing.T) {
	c, k := pvContext(t)
	ch, err := c.CreateCompChannel()
	if err != nil {
		t.Fatal(err)
	}
	cq, err := c.CreateCQ(verbs.CQInit{Entries: 10, Channel: ch})
	if err != nil {
		t.Fatal(err)
	}
	le := binary.LittleEndian
	p := k.lastPayload(cmdCreateCQ)
	if got := int32(le.Uint32(p[24:])); got != ch.(*compChannel).fd {
		t.Errorf("comp_channel %d, want %d", got, ch.(*compChannel).fd)
	}
	if n := le.Uint32(p[16:]); n != 16 || cq.Entries() != 16 {
		t.Errorf("cq of 10 entries: cqe %d in the request, Entries() %d; want 16", n, cq.Entries())
	}
	if size := le.Uint32(p[40:]); size != 2*pvrdma.PageSize {
		t.Errorf("cq buffer of %d bytes, want the ring state page and one page of 16 CQEs", size)
	}
	pc := cq.(*pvrdmaCQ)
	kc := k.cqs[pc.handle]
	if kc == nil || le.Uint64(p[32:]) != unix.Addr(pc.buf) || le.Uint64(p[8:]) != pc.user {
		t.Fatalf("cq buffer %#x, user handle %d: not the CQ's", le.Uint64(p[32:]), le.Uint64(p[8:]))
	}
	if _, err := c.CreateCQ(verbs.CQInit{Entries: 4097}); !errors.Is(err, unix.EINVAL) {
		t.Errorf("cq above max_cqe: %v", err)
	}

	// Doorbells: arm (next or solicited), and POLL on an empty ring.
	nw := k.count()
	cqn := kc.cqn
	for _, d := range []struct {
		sol  bool
		want uint32
	}{{false, cqn | 1<<30}, {true, cqn | 1<<29}} {
		if err := cq.ReqNotify(d.sol); err != nil {
			t.Fatal(err)
		}
		if got := k.uar32(4); got != d.want {
			t.Errorf("arm (solicited %v): doorbell %#x at +4, want %#x", d.sol, got, d.want)
		}
	}
	wc := make([]verbs.WC, 4)
	if n, err := cq.Poll(wc); n != 0 || err != nil {
		t.Fatalf("empty cq: %d, %v", n, err)
	}
	if got := k.uar32(4); got != cqn|1<<31 {
		t.Errorf("poll of an empty cq: doorbell %#x at +4, want POLL %#x", got, cqn|1<<31)
	}
	if k.uar32(0) != 0 || k.uar32(8) != 0 {
		t.Errorf("cq doorbells rang the qp or srq doorbell: %#x, %#x", k.uar32(0), k.uar32(8))
	}
	if k.count() != nw {
		t.Errorf("arm and poll wrote %d commands; they are doorbells only", k.count()-nw)
	}
	// A CQE of an unknown QP is an error, as in rdma-core.
	kc.complete(pvrdma.CQE{WRID: 1, QP: 0x7777})
	if _, err := cq.Poll(wc); !errors.Is(err, unix.EINVAL) {
		t.Errorf("cqe of an unknown qp: %v", err)
	}
	kr := kc.ring()
	kr.SetConsumer(kr.Producer())

	if err := ch.Close(); !errors.Is(err, unix.EBUSY) {
		t.Errorf("close a channel with a cq: %v", err)
	}
	if err := cq.Close(); err != nil {
		t.Fatal(err)
	}
	if p := k.lastPayload(cmdDestroyCQ); le.Uint32(p[8:]) != pc.handle {
		t.Errorf("destroy cq payload % x", p)
	}
	if pvMapped(t, le.Uint64(k.lastPayload(cmdCreateCQ)[32:])) {
		t.Error("the cq buffer is still mapped")
	}
	if _, err := cq.Poll(wc); !errors.Is(err, verbs.ErrClosed) {
		t.Errorf("poll after close: %v", err)
	}
	if err := cq.ReqNotify(false); !errors.Is(err, verbs.ErrClosed) {
		t.Errorf("arm after close: %v", err)
	}
	if err := ch.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestPVRDMACQBadReply(t *testing.T) {
	for _, cqe := range []uint32{32, 12} { // larger than the buffer; not a power of two
		c, k := pvContext(t, func(k *pvKernel) { k.cqeReply = cqe })
		if _, err := c.CreateCQ(verbs.CQInit{Entries: 16}); !errors.Is(err, unix.EINVAL) {
			t.Errorf("kernel answering %d entries for 16: %v", cqe, err)
		}
		if k.cmds[len(k.cmds)-1] != cmdDestroyCQ || len(k.cqs) != 0 {
			t.Errorf("cq answered with %d entries was not destroyed: %v", cqe, k.cmds)
		}
		if pvMapped(t, binary.LittleEndian.Uint64(k.lastPayload(cmdCreateCQ)[32:])) {
			t.Error("the buffer of the failed cq is still mapped")
		}
		if err := c.Close(); err != nil {
			t.Errorf("close after a failed create cq: %v", err)
		}
	}
}

func TestPVRDMAQP(t *testing.T) {
	o := pvSetup(t)
	k := o.k
	le := binary.LittleEndian
	qp, kq := o.qp(t, verbs.QPInit{Type: verbs.RC, SigAll: true, Cap: verbs.QPCap{MaxSendWR: 5, MaxRecvWR: 3, MaxSendSGE: 3, MaxRecvSGE: 2}})
	p := k.lastPayload(cmdCreateQP)
	// Ring sizes rounded to powers of two, SGE counts not; the WQE strides
	// are next_pow2(80 + 16*3) = 128 and next_pow2(16 + 16*2) = 64.
	for _, f := range []struct {
		name      string
		got, want uint64
	}{
		{"pd_handle", uint64(le.Uint32(p[16:])), uint64(o.pd.(*PD).handle)},
		{"send_cq_handle", uint64(le.Uint32(p[20:])), uint64(o.cq.(*pvrdmaCQ).handle)},
		{"max_send_wr", uint64(le.Uint32(p[32:])), 8},
		{"max_recv_wr", uint64(le.Uint32(p[36:])), 4},
		{"max_send_sge", uint64(le.Uint32(p[40:])), 3},
		{"max_recv_sge", uint64(le.Uint32(p[44:])), 2},
		{"max_inline_data", uint64(le.Uint32(p[48:])), 0},
		{"sq_sig_all", uint64(p[52]), 1},
		{"qp_type", uint64(p[53]), uint64(verbs.RC)},
		{"is_srq", uint64(p[54]), 0},
		{"rbuf_addr", le.Uint64(p[56:]), unix.Addr(qp.rbuf)},
		{"sbuf_addr", le.Uint64(p[64:]), unix.Addr(qp.sbuf)},
		{"rbuf_size", uint64(le.Uint32(p[72:])), 4096},     // 4 * 64, one page
		{"sbuf_size", uint64(le.Uint32(p[76:])), 2 * 4096}, // ring state page + 8 * 128
	} {
		if f.got != f.want {
			t.Errorf("create qp %s = %#x, want %#x", f.name, f.got, f.want)
		}
	}
	// One user handle, the one the kernel was given (its events carry it).
	if le.Uint64(p[8:]) != qp.user || o.c.objs[qp.user] != verbs.QP(qp) || len(o.c.objs) != 2 {
		t.Errorf("user handle %d in the request, %d in the qp; %d objects tracked, want the cq and the qp", le.Uint64(p[8:]), qp.user, len(o.c.objs))
	}
	if qp.Num() != kq.qpn || qp.devQP != kq.dev {
		t.Errorf("qp number %#x, device handle %#x; want %#x and %#x", qp.Num(), qp.devQP, kq.qpn, kq.dev)
	}
	if qp.cap.MaxSendWR != 8 || qp.cap.MaxRecvWR != 4 || qp.cap.MaxInlineData != 0 {
		t.Errorf("qp caps %+v", qp.cap)
	}
	mr, mem := o.mr, o.mem.Bytes()
	sge := func(off, n int) verbs.SGE {
		return verbs.SGE{Addr: mr.Addr() + uint64(off), Length: uint32(n), LKey: mr.LKey()}
	}

	// Nothing posts in RESET; receives from INIT.
	if _, err := qp.PostSend([]verbs.SendWR{{Opcode: verbs.OpSend}}); !errors.Is(err, unix.EINVAL) {
		t.Errorf("post send in RESET: %v", err)
	}
	if _, err := qp.PostRecv([]verbs.RecvWR{{}}); !errors.Is(err, unix.EINVAL) {
		t.Errorf("post recv in RESET: %v", err)
	}
	if err := qp.Modify(&verbs.QPAttr{State: verbs.StateInit, Port: 1, Access: verbs.AccessRemoteWrite}, verbs.AttrState|verbs.AttrPort|verbs.AttrAccessFlags|verbs.AttrPKeyIndex); err != nil {
		t.Fatal(err)
	}
	if m := k.lastPayload(cmdModifyQP); le.Uint32(m[64:]) != qp.handle || m[96] != uint8(verbs.StateInit) || m[104] != 1 {
		t.Errorf("modify qp: qp_handle %d, state %d, port %d", le.Uint32(m[64:]), m[96], m[104])
	}
	if qp.dp.State() != verbs.StateInit {
		t.Errorf("data path state %v after INIT", qp.dp.State())
	}
	nw := k.count()
	k.clearUAR()
	if n, err := qp.PostRecv([]verbs.RecvWR{{ID: 0xabc, SGL: []verbs.SGE{sge(0, 100), sge(512, 28)}}}); n != 1 || err != nil {
		t.Fatalf("post recv: %d, %v", n, err)
	}
	if got := k.uar32(0); got != kq.dev|1<<31 {
		t.Errorf("recv doorbell %#x at +0, want %#x (device qp handle | RECV)", got, kq.dev|1<<31)
	}
	if tail := le.Uint32(qp.sbuf[8:]); tail != 1 {
		t.Errorf("receive ring prod_tail (send buffer +8) = %d, want 1", tail)
	}
	r := qp.rbuf[:64]
	if le.Uint64(r[0:]) != 0xabc || le.Uint32(r[8:]) != 2 || le.Uint32(r[12:]) != 0 ||
		le.Uint64(r[16:]) != mr.Addr() || le.Uint32(r[24:]) != 100 || le.Uint32(r[28:]) != mr.LKey() ||
		le.Uint64(r[32:]) != mr.Addr()+512 || le.Uint32(r[40:]) != 28 {
		t.Errorf("receive wqe % x", r)
	}
	if w := pvrdma.RecvWQE(pvWQE(kq.rq(), 0)); w.WRID() != 0xabc || w.NumSGE() != 2 || w.SGE(1) != sge(512, 28) {
		t.Errorf("the device reads receive wqe %#x with %d sges", w.WRID(), w.NumSGE())
	}
	if _, err := qp.PostRecv([]verbs.RecvWR{{SGL: make([]verbs.SGE, 3)}}); !errors.Is(err, unix.EINVAL) {
		t.Errorf("receive with 3 sges on max_recv_sge 2: %v", err)
	}

	if k.count() != nw {
		t.Errorf("posting receives wrote %d commands", k.count()-nw)
	}
	for _, s := range []verbs.QPState{verbs.StateRTR, verbs.StateRTS} {
		if err := qp.Modify(&verbs.QPAttr{State: s}, verbs.AttrState); err != nil {
			t.Fatal(err)
		}
	}
	nw = k.count()
	// RDMA WRITE with immediate: the header at the reference offsets, the
	// SGEs after the 80-byte header, the ring index, then the doorbell.
	wr := verbs.SendWR{ID: 0x1122334455667788, Opcode: verbs.OpRDMAWriteImm, Flags: verbs.SendSignaled | verbs.SendSolicited, Imm: 0xa1b2c3d4,
		SGL: []verbs.SGE{sge(0, 100), sge(4096, 28)}, RemoteAddr: 0xfeed0000, RKey: 0xabcd}
	if n, err := qp.PostSend([]verbs.SendWR{wr}); n != 1 || err != nil {
		t.Fatalf("post send: %d, %v", n, err)
	}
	if got := k.uar32(0); got != kq.dev|1<<30 {
		t.Errorf("send doorbell %#x at +0, want %#x (device qp handle | SEND)", got, kq.dev|1<<30)
	}
	if tail := le.Uint32(qp.sbuf[0:]); tail != 1 {
		t.Errorf("send ring prod_tail = %d, want 1", tail)
	}
	e := qp.sbuf[pvrdma.PageSize : pvrdma.PageSize+128]
	for _, f := range []struct {
		name      string
		off       int
		got, want uint64
	}{
		{"wr_id", 0, le.Uint64(e[0:]), wr.ID},
		{"num_sge", 8, uint64(le.Uint32(e[8:])), 2},
		{"total_len", 12, uint64(le.Uint32(e[12:])), 0},
		{"opcode", 16, uint64(le.Uint32(e[16:])), uint64(pvrdma.OpRDMAWriteWithImm)},
		{"send_flags", 20, uint64(le.Uint32(e[20:])), 2 | 4},
		{"imm_data (big-endian)", 24, uint64(binary.BigEndian.Uint32(e[24:])), 0xa1b2c3d4},
		{"rdma.remote_addr", 32, le.Uint64(e[32:]), 0xfeed0000},
		{"rdma.rkey", 40, uint64(le.Uint32(e[40:])), 0xabcd},
		{"sge[0].addr", 80, le.Uint64(e[80:]), mr.Addr()},
		{"sge[0].length", 88, uint64(le.Uint32(e[88:])), 100},
		{"sge[0].lkey", 92, uint64(le.Uint32(e[92:])), uint64(mr.LKey())},
		{"sge[1].addr", 96, le.Uint64(e[96:]), mr.Addr() + 4096},
		{"sge[1].length", 104, uint64(le.Uint32(e[104:])), 28},
	} {
		if f.got != f.want {
			t.Errorf("send wqe %s (offset %d) = %#x, want %#x", f.name, f.off, f.got, f.want)
		}
	}
	// Atomics on a host that has them.
	cas := verbs.SendWR{ID: 2, Opcode: verbs.OpAtomicCmpSwap, CompareAdd: 5, Swap: 6, RemoteAddr: 0x8000, RKey: 0x99, SGL: []verbs.SGE{sge(64, 8)}}
	if _, err := qp.PostSend([]verbs.SendWR{cas}); err != nil {
		t.Fatal(err)
	}
	if w := pvrdma.SendWQE(pvWQE(kq.sq(), 1)); w.Opcode() != pvrdma.OpAtomicCmpAndSwp || w.AtomicAddr() != 0x8000 || w.CompareAdd() != 5 || w.Swap() != 6 || w.AtomicRKey() != 0x99 {
		t.Errorf("atomic wqe as the device reads it: op %d addr %#x compare %d swap %d rkey %#x", w.Opcode(), w.AtomicAddr(), w.CompareAdd(), w.Swap(), w.AtomicRKey())
	}
	// No inline data on vmw_pvrdma.
	copy(mem[64:], "payload")
	if n, err := qp.PostSend([]verbs.SendWR{{Opcode: verbs.OpSend, Flags: verbs.SendInline, SGL: []verbs.SGE{sge(64, 7)}}}); n != 0 || !errors.Is(err, verbs.ErrNotSupported) {
		t.Errorf("inline send: %d, %v; want ErrNotSupported", n, err)
	}
	if _, err := qp.PostSend([]verbs.SendWR{{Opcode: verbs.OpSend, SGL: make([]verbs.SGE, 4)}}); !errors.Is(err, unix.EINVAL) {
		t.Errorf("send with 4 sges on max_send_sge 3: %v", err)
	}
	if k.count() != nw {
		t.Errorf("the data path wrote %d commands", k.count()-nw)
	}

	// The queue is full after 8 sends the device has not consumed.
	sq := kq.sq()
	sends := make([]verbs.SendWR, 8)
	for i := range sends {
		sends[i] = verbs.SendWR{ID: uint64(10 + i), Opcode: verbs.OpSend, SGL: []verbs.SGE{sge(0, 8)}}
	}
	n, err := qp.PostSend(sends)
	if n != 6 || !errors.Is(err, verbs.ErrQueueFull) || !errors.Is(err, unix.ENOMEM) {
		t.Errorf("8 sends on a ring of 8 holding 2: posted %d, %v", n, err)
	}
	sq.SetConsumer(sq.Producer()) // the device took them all
	if n, err := qp.PostSend(sends[6:]); n != 2 || err != nil {
		t.Errorf("after the device consumed: %d, %v", n, err)
	}

	// A completion the device writes, naming the QP by its device handle,
	// is polled back with the QP number.
	kc := k.cqs[o.cq.(*pvrdmaCQ).handle]
	kc.complete(pvrdma.CQE{WRID: 0xabc, QP: uint64(kq.dev), Opcode: pvrdma.WCOpRecvRDMAWithImm, ByteLen: 1234, Imm: 0xdeadbeef,
		SrcQP: 0x42, Flags: pvrdma.WCFlagWithImm | pvrdma.WCFlagGRH, PKeyIndex: 3, SL: 2})
	wc := make([]verbs.WC, 4)
	if n, err := o.cq.Poll(wc); n != 1 || err != nil {
		t.Fatalf("poll: %d, %v", n, err)
	}
	if w := wc[0]; w.ID != 0xabc || w.QPNum != kq.qpn || w.Opcode != verbs.WCRecvRDMAWithImm || w.ByteLen != 1234 || w.Imm != 0xdeadbeef ||
		w.SrcQP != 0x42 || w.Flags != verbs.WCWithImm|verbs.WCWithGRH || w.PKeyIndex != 3 || w.SL != 2 || w.Status != verbs.WCSuccess {
		t.Errorf("polled %+v", w)
	}
	if head := le.Uint32(kc.buf[12:]); head != 1 {
		t.Errorf("cq cons_head (+12) = %d, want 1", head)
	}
	if k.count() != nw {
		t.Errorf("the data path wrote %d commands", k.count()-nw)
	}
}

func TestPVRDMAQPTypes(t *testing.T) {
	o := pvSetup(t)
	nw := o.k.count()
	for _, c := range []struct {
		what string
		init verbs.QPInit
	}{
		{"UC", verbs.QPInit{Type: verbs.UC, Cap: verbs.QPCap{MaxSendWR: 1, MaxRecvWR: 1}}},
		{"inline", verbs.QPInit{Type: verbs.RC, Cap: verbs.QPCap{MaxSendWR: 1, MaxRecvWR: 1, MaxInlineData: 64}}},
	} {
		c.init.SendCQ, c.init.RecvCQ = o.cq, o.cq
		if _, err := o.pd.CreateQP(c.init); !errors.Is(err, verbs.ErrNotSupported) {
			t.Errorf("%s qp: %v, want ErrNotSupported", c.what, err)
		}
	}
	if _, err := o.pd.CreateQP(verbs.QPInit{Type: verbs.RC, SendCQ: o.cq, RecvCQ: o.cq, Cap: verbs.QPCap{MaxSendWR: 2048}}); !errors.Is(err, unix.EINVAL) {
		t.Errorf("qp above max_qp_wr: %v", err)
	}
	if o.k.count() != nw {
		t.Errorf("refused qps wrote %d commands", o.k.count()-nw)
	}
	// A kernel refusal is returned as it is; the buffers go away.
	o.k.fail[cmdCreateQP] = unix.EOPNOTSUPP
	_, err := o.pd.CreateQP(verbs.QPInit{Type: verbs.UD, SendCQ: o.cq, RecvCQ: o.cq, Cap: verbs.QPCap{MaxSendWR: 1, MaxRecvWR: 1}})
	if !errors.Is(err, unix.EOPNOTSUPP) || !errors.Is(err, verbs.ErrNotSupported) {
		t.Errorf("create qp refused with EOPNOTSUPP: %v", err)
	}
	p := o.k.lastPayload(cmdCreateQP)
	if a, b := binary.LittleEndian.Uint64(p[56:]), binary.LittleEndian.Uint64(p[64:]); pvMapped(t, a) || pvMapped(t, b) {
		t.Error("the buffers of a refused qp are still mapped")
	}
	o.k.fail[cmdCreateQP] = unix.ENOMEM
	if _, err := o.pd.CreateQP(verbs.QPInit{Type: verbs.UD, SendCQ: o.cq, RecvCQ: o.cq}); !errors.Is(err, unix.ENOMEM) {
		t.Errorf("create qp refused with ENOMEM: %v", err)
	}
	if len(o.c.objs) != 1 { // the CQ
		t.Errorf("refused qps left %d tracked objects", len(o.c.objs)-1)
	}
}

// TestPVRDMAAtomicsAbsent: a host without atomics refuses them in user
// space.
func TestPVRDMAAtomicsAbsent(t *testing.T) {
	o := pvSetup(t, func(k *pvKernel) { k.atomicCap = uint32(verbs.AtomicNone) })
	qp, _ := o.qp(t, verbs.QPInit{Type: verbs.RC, Cap: verbs.QPCap{MaxSendWR: 2, MaxRecvWR: 2}})
	pvToRTS(t, qp)
	_, err := qp.PostSend([]verbs.SendWR{{Opcode: verbs.OpAtomicFetchAdd, SGL: []verbs.SGE{{Addr: o.mr.Addr(), Length: 8, LKey: o.mr.LKey()}}}})
	if !errors.Is(err, verbs.ErrNotSupported) {
		t.Errorf("fetch and add without host atomics: %v", err)
	}
}

// TestPVRDMAOldKernel: a kernel that writes no QP handle (before 5.5)
// means the QP number is the device handle.
func TestPVRDMAOldKernel(t *testing.T) {
	o := pvSetup(t, func(k *pvKernel) { k.oldKernel = true })
	qp, kq := o.qp(t, verbs.QPInit{Type: verbs.RC, Cap: verbs.QPCap{MaxSendWR: 2, MaxRecvWR: 2}})
	if qp.devQP != kq.qpn {
		t.Errorf("device handle %#x, want the qp number %#x", qp.devQP, kq.qpn)
	}
	_ = qp.Modify(&verbs.QPAttr{State: verbs.StateInit}, verbs.AttrState)
	if _, err := qp.PostRecv([]verbs.RecvWR{{}}); err != nil {
		t.Fatal(err)
	}
	if got := o.k.uar32(0); got != kq.qpn|1<<31 {
		t.Errorf("doorbell %#x, want %#x", got, kq.qpn|1<<31)
	}
	k := o.k
	k.cqs[o.cq.(*pvrdmaCQ).handle].complete(pvrdma.CQE{WRID: 5, QP: uint64(kq.qpn), Opcode: pvrdma.WCOpRecv})
	wc := make([]verbs.WC, 1)
	if n, err := o.cq.Poll(wc); n != 1 || err != nil || wc[0].QPNum != kq.qpn {
		t.Errorf("poll: %d, %v, %+v", n, err, wc[0])
	}
}

// TestPVRDMAReset: after MODIFY_QP to RESET the QP's completions leave its
// CQs and its rings start over; destroying a QP purges too, and a CQE
// still naming it afterwards is unknown.
func TestPVRDMAReset(t *testing.T) {
	o := pvSetup(t)
	k := o.k
	scq, err := o.c.CreateCQ(verbs.CQInit{Entries: 8})
	if err != nil {
		t.Fatal(err)
	}
	defer scq.Close()
	a, ka := o.qp(t, verbs.QPInit{Type: verbs.RC, SendCQ: scq, RecvCQ: o.cq, Cap: verbs.QPCap{MaxSendWR: 4, MaxRecvWR: 4}})
	b, kb := o.qp(t, verbs.QPInit{Type: verbs.RC, Cap: verbs.QPCap{MaxSendWR: 4, MaxRecvWR: 4}})
	pvToRTS(t, a)
	pvToRTS(t, b)
	send := []verbs.SendWR{{Opcode: verbs.OpSend, SGL: []verbs.SGE{{Addr: o.mr.Addr(), Length: 1, LKey: o.mr.LKey()}}}}
	for _, q := range []verbs.QP{a, b} {
		if _, err := q.PostSend(send); err != nil {
			t.Fatal(err)
		}
		if _, err := q.PostRecv([]verbs.RecvWR{{}}); err != nil {
			t.Fatal(err)
		}
	}
	rcq, kscq := k.cqs[o.cq.(*pvrdmaCQ).handle], k.cqs[scq.(*pvrdmaCQ).handle]
	for i, who := range []*pvKQP{ka, kb, ka, kb, ka} {
		rcq.complete(pvrdma.CQE{WRID: uint64(i), QP: uint64(who.dev)})
	}
	kscq.complete(pvrdma.CQE{WRID: 100, QP: uint64(ka.dev)})
	if err := a.Modify(&verbs.QPAttr{State: verbs.StateReset}, verbs.AttrState); err != nil {
		t.Fatal(err)
	}
	for _, q := range []pvrdma.Queue{ka.sq(), ka.rq()} {
		if q.Producer() != 0 || q.Consumer() != 0 {
			t.Errorf("ring of a reset qp: prod_tail %d, cons_head %d", q.Producer(), q.Consumer())
		}
	}
	if bq := kb.sq(); bq.Producer() != 1 {
		t.Errorf("the other qp's ring was reset")
	}
	wc := make([]verbs.WC, 8)
	n, err := o.cq.Poll(wc)
	if err != nil || n != 2 || wc[0].ID != 1 || wc[1].ID != 3 || wc[0].QPNum != kb.qpn {
		t.Errorf("after reset the receive cq has %d completions (%v): %+v", n, err, wc[:n])
	}
	if n, _ := scq.Poll(wc); n != 0 {
		t.Errorf("after reset the send cq has %d completions", n)
	}
	if _, err := a.PostRecv([]verbs.RecvWR{{}}); !errors.Is(err, unix.EINVAL) {
		t.Errorf("post recv after reset: %v", err)
	}

	// Destroy: B's completions go, and the handle is forgotten.
	rcq.complete(pvrdma.CQE{WRID: 7, QP: uint64(kb.dev)})
	rcq.complete(pvrdma.CQE{WRID: 8, QP: uint64(ka.dev)})
	sbuf := unix.Addr(b.sbuf)
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if last := k.cmds[len(k.cmds)-1]; last != cmdDestroyQP || binary.LittleEndian.Uint32(k.lastPayload(cmdDestroyQP)[8:]) != b.handle {
		t.Errorf("destroy qp: last command %d, payload % x", last, k.lastPayload(cmdDestroyQP))
	}
	if pvMapped(t, sbuf) {
		t.Error("the destroyed qp's buffer is still mapped")
	}
	if _, ok := o.c.objs[b.user]; ok || len(o.c.objs) != 3 { // two CQs and A
		t.Errorf("after destroy %d objects are tracked, the destroyed qp among them: %v", len(o.c.objs), ok)
	}
	if n, err := o.cq.Poll(wc); err != nil || n != 1 || wc[0].ID != 8 {
		t.Errorf("after destroy: %d completions (%v): %+v", n, err, wc[:n])
	}
	rcq.complete(pvrdma.CQE{WRID: 9, QP: uint64(kb.dev)})
	if _, err := o.cq.Poll(wc); !errors.Is(err, unix.EINVAL) {
		t.Errorf("cqe of a destroyed qp: %v", err)
	}
	rr := rcq.ring()
	rr.SetConsumer(rr.Producer())
	if _, err := b.PostSend(send); !errors.Is(err, verbs.ErrClosed) {
		t.Errorf("post send after close: %v", err)
	}
	if _, err := b.PostRecv(nil); !errors.Is(err, verbs.ErrClosed) {
		t.Errorf("post recv after close: %v", err)
	}
	if err := b.Modify(&verbs.QPAttr{State: verbs.StateInit}, verbs.AttrState); !errors.Is(err, verbs.ErrClosed) {
		t.Errorf("modify after close: %v", err)
	}
	if err := b.Close(); err != nil {
		t.Errorf("second close: %v", err)
	}
	if err := scq.Close(); !errors.Is(err, unix.EBUSY) {
		t.Errorf("close a cq a qp uses: %v", err)
	}
}

func TestPVRDMASRQ(t *testing.T) {
	o := pvSetup(t)
	k := o.k
	le := binary.LittleEndian
	srq, err := o.pd.CreateSRQ(verbs.SRQInit{MaxWR: 5, MaxSGE: 2, Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	p := k.lastPayload(cmdCreateSRQ)
	s := srq.(*pvrdmaSRQ)
	ks := k.srqs[s.handle]
	if le.Uint32(p[20:]) != 8 || le.Uint32(p[24:]) != 2 || le.Uint32(p[28:]) != 1 || le.Uint32(p[16:]) != o.pd.(*PD).handle {
		t.Errorf("create srq: max_wr %d, max_sge %d, limit %d, pd %d", le.Uint32(p[20:]), le.Uint32(p[24:]), le.Uint32(p[28:]), le.Uint32(p[16:]))
	}
	if le.Uint64(p[32:]) != unix.Addr(s.buf) || le.Uint32(p[40:]) != 2*pvrdma.PageSize { // ring state page + 8 * 64
		t.Errorf("srq buffer %#x of %d bytes", le.Uint64(p[32:]), le.Uint32(p[40:]))
	}
	if srq.Num() != ks.srqn {
		t.Errorf("srq number %#x, want the driver's srqn %#x", srq.Num(), ks.srqn)
	}
	qp, kq := o.qp(t, verbs.QPInit{Type: verbs.RC, SRQ: srq, Cap: verbs.QPCap{MaxSendWR: 4, MaxRecvSGE: 3}})
	p = k.lastPayload(cmdCreateQP)
	if le.Uint32(p[28:]) != s.handle || p[54] != 1 || le.Uint32(p[36:]) != 0 || le.Uint32(p[44:]) != 0 || le.Uint64(p[56:]) != 0 || le.Uint32(p[72:]) != 0 {
		t.Errorf("qp on an srq: srq_handle %d, is_srq %d, max_recv_wr %d, max_recv_sge %d, rbuf %#x/%d",
			le.Uint32(p[28:]), p[54], le.Uint32(p[36:]), le.Uint32(p[44:]), le.Uint64(p[56:]), le.Uint32(p[72:]))
	}
	if kq.rbuf != nil || qp.rbuf != nil {
		t.Error("a qp on an srq has a receive buffer")
	}
	pvToRTS(t, qp)
	if _, err := qp.PostRecv([]verbs.RecvWR{{}}); !errors.Is(err, unix.EINVAL) {
		t.Errorf("post recv to a qp on an srq: %v", err)
	}
	if err := srq.Close(); !errors.Is(err, unix.EBUSY) {
		t.Errorf("close an srq a qp uses: %v", err)
	}

	nw := k.count()
	k.clearUAR()
	recv := []verbs.RecvWR{{ID: 31, SGL: []verbs.SGE{{Addr: o.mr.Addr(), Length: 64, LKey: o.mr.LKey()}}}, {ID: 32}}
	if n, err := srq.PostRecv(recv); n != 2 || err != nil {
		t.Fatalf("post srq recv: %d, %v", n, err)
	}
	if got := k.uar32(8); got != ks.srqn|1<<30 {
		t.Errorf("srq doorbell %#x at +8, want %#x", got, ks.srqn|1<<30)
	}
	if k.uar32(0) != 0 || k.uar32(4) != 0 {
		t.Error("the srq rang another doorbell")
	}
	if tail := le.Uint32(s.buf[8:]); tail != 2 {
		t.Errorf("srq prod_tail (+8) = %d, want 2", tail)
	}
	if w := s.buf[pvrdma.PageSize:]; le.Uint64(w[0:]) != 31 || le.Uint32(w[8:]) != 1 || le.Uint64(w[16:]) != o.mr.Addr() || le.Uint64(w[64:]) != 32 {
		t.Errorf("srq wqes % x", w[:80])
	}
	if w := pvrdma.RecvWQE(pvWQE(ks.q(), 1)); w.WRID() != 32 || w.NumSGE() != 0 {
		t.Errorf("the device reads srq wqe %d with %d sges", w.WRID(), w.NumSGE())
	}
	if _, err := srq.PostRecv([]verbs.RecvWR{{SGL: make([]verbs.SGE, 3)}}); !errors.Is(err, unix.EINVAL) {
		t.Errorf("3 sges on max_sge 2: %v", err)
	}
	if k.count() != nw {
		t.Errorf("posting to the srq wrote %d commands", k.count()-nw)
	}

	// Only the limit can change.
	if err := srq.Modify(verbs.SRQAttr{Limit: 6}, verbs.SRQLimit); err != nil {
		t.Fatal(err)
	}
	if m := k.lastPayload(cmdModifySRQ); len(m) != 16 || le.Uint32(m[0:]) != s.handle || le.Uint32(m[4:]) != uint32(verbs.SRQLimit) || le.Uint32(m[12:]) != 6 {
		t.Errorf("modify srq payload % x", m)
	}
	nw = k.count()
	if err := srq.Modify(verbs.SRQAttr{MaxWR: 16}, verbs.SRQMaxWR); !errors.Is(err, verbs.ErrNotSupported) {
		t.Errorf("resize srq: %v", err)
	}
	if err := srq.Modify(verbs.SRQAttr{Limit: 9}, verbs.SRQLimit); !errors.Is(err, unix.EINVAL) {
		t.Errorf("limit 9 above max_wr 8: %v", err)
	}
	if k.count() != nw {
		t.Error("refused srq modifications reached the kernel")
	}
	if a, err := srq.Query(); err != nil || a.MaxWR != 8 || a.Limit != 6 {
		t.Errorf("query srq: %+v, %v", a, err)
	}
	if err := qp.Close(); err != nil {
		t.Fatal(err)
	}
	if err := srq.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := srq.PostRecv(recv); !errors.Is(err, verbs.ErrClosed) {
		t.Errorf("post srq recv after close: %v", err)
	}
	if err := srq.Modify(verbs.SRQAttr{Limit: 1}, verbs.SRQLimit); !errors.Is(err, verbs.ErrClosed) {
		t.Errorf("modify srq after close: %v", err)
	}
}

func TestPVRDMASRQAbsent(t *testing.T) {
	o := pvSetup(t, func(k *pvKernel) { k.maxSRQ = 0 })
	nw := o.k.count()
	if _, err := o.pd.CreateSRQ(verbs.SRQInit{MaxWR: 4, MaxSGE: 1}); !errors.Is(err, verbs.ErrNotSupported) {
		t.Errorf("create srq on a host without srqs: %v", err)
	}
	if o.k.count() != nw {
		t.Error("create srq reached the kernel of a host without srqs")
	}
	if a, _ := o.c.QueryDevice(); a.MaxSRQ != 0 || a.MaxSRQWR != 0 || a.MaxSRQSGE != 0 {
		t.Errorf("srq attributes %d/%d/%d of a host without srqs", a.MaxSRQ, a.MaxSRQWR, a.MaxSRQSGE)
	}
}

// pvSysfs gives the vmw_pvrdma0 device of the tests a GID table in a
// temporary sysfs: entry 1 an IPv4 RoCE v2 GID on ens192.
func pvSysfs(t *testing.T) {
	t.Helper()
	root := t.TempDir()
	dir := filepath.Join(root, "class", "infiniband", "vmw_pvrdma0", "ports", "1")
	for path, content := range map[string]string{
		"gids/0":            "fe80:0000:0000:0000:0250:56ff:fe8a:1b2c\n",
		"gids/1":            "0000:0000:0000:0000:0000:ffff:c0a8:010a\n",
		"gid_attrs/types/0": "RoCE v2\n",
		"gid_attrs/types/1": "RoCE v2\n",
		"gid_attrs/ndevs/0": "ens192\n",
		"gid_attrs/ndevs/1": "ens192\n",
	} {
		p := filepath.Join(dir, path)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	old := sysfsRoot
	sysfsRoot = root
	t.Cleanup(func() { sysfsRoot = old })
}

func TestPVRDMAUD(t *testing.T) {
	pvSysfs(t)
	type lookup struct {
		netdev string
		dst    string
	}
	var lookups []lookup
	old := pvrdmaNeighbour
	pvrdmaNeighbour = func(netdev string, dst netip.Addr) ([6]byte, error) {
		lookups = append(lookups, lookup{netdev, dst.String()})
		if dst.String() == "192.168.1.99" {
			return [6]byte{}, verbs.Errorf(unix.ETIMEDOUT, "no neighbour entry")
		}
		return [6]byte{0x00, 0x50, 0x56, 0xaa, 0xbb, 0xcc}, nil
	}
	t.Cleanup(func() { pvrdmaNeighbour = old })

	o := pvSetup(t)
	k := o.k
	le := binary.LittleEndian
	qp, kq := o.qp(t, verbs.QPInit{Type: verbs.UD, Cap: verbs.QPCap{MaxSendWR: 4, MaxRecvWR: 4, MaxSendSGE: 1, MaxRecvSGE: 1}})
	if p := k.lastPayload(cmdCreateQP); p[53] != uint8(verbs.UD) {
		t.Errorf("qp_type %d", p[53])
	}
	nw := k.count()
	// A link-local EUI-64 GID carries the MAC: 00:50:56:8a:1b:2c.
	ll, _ := verbs.ParseGID("fe80::250:56ff:fe8a:1b2c")
	ah, err := o.pd.CreateAH(verbs.AHAttr{IsGlobal: true, Port: 1, SL: 0, SrcPathBits: 0x3,
		GRH: verbs.GRH{DGID: ll, SGIDIndex: 0, HopLimit: 64, TrafficClass: 0x12, FlowLabel: 0xabcde}})
	if err != nil {
		t.Fatal(err)
	}
	if len(lookups) != 0 {
		t.Errorf("a link-local EUI-64 gid needed a neighbour lookup: %v", lookups)
	}
	// An IPv4-mapped GID is resolved on the source GID's netdev.
	v4, _ := verbs.ParseGID("::ffff:192.168.1.20")
	ah4, err := o.pd.CreateAH(verbs.AHAttr{IsGlobal: true, Port: 1, GRH: verbs.GRH{DGID: v4, SGIDIndex: 1, HopLimit: 64}})
	if err != nil {
		t.Fatal(err)
	}
	if len(lookups) != 1 || lookups[0] != (lookup{"ens192", "192.168.1.20"}) {
		t.Errorf("neighbour lookups %v, want 192.168.1.20 on ens192", lookups)
	}
	bad, _ := verbs.ParseGID("::ffff:192.168.1.99")
	if _, err := o.pd.CreateAH(verbs.AHAttr{IsGlobal: true, Port: 1, GRH: verbs.GRH{DGID: bad, SGIDIndex: 1}}); !errors.Is(err, unix.ETIMEDOUT) || !strings.Contains(err.Error(), "192.168.1.99") {
		t.Errorf("unresolvable destination: %v", err)
	}
	mc, _ := verbs.ParseGID("ff0e::1")
	if _, err := o.pd.CreateAH(verbs.AHAttr{IsGlobal: true, Port: 1, GRH: verbs.GRH{DGID: mc}}); !errors.Is(err, verbs.ErrNotSupported) {
		t.Errorf("multicast destination: %v", err)
	}
	if _, err := o.pd.CreateAH(verbs.AHAttr{Port: 1, GRH: verbs.GRH{DGID: ll}}); !errors.Is(err, unix.EINVAL) {
		t.Errorf("ah without a grh: %v", err)
	}
	if _, err := o.pd.CreateAH(verbs.AHAttr{IsGlobal: true, Port: 2, GRH: verbs.GRH{DGID: ll}}); !errors.Is(err, unix.EINVAL) {
		t.Errorf("ah on port 2 of a one-port device: %v", err)
	}
	if k.count() != nw {
		t.Errorf("address handles wrote %d commands; they are user space only", k.count()-nw)
	}
	if got := ah.Attr(); got.GRH.DGID != ll || got.SrcPathBits != 3 {
		t.Errorf("ah attributes %+v", got)
	}

	pvToRTS(t, qp)
	k.clearUAR()
	wr := verbs.SendWR{ID: 9, Opcode: verbs.OpSendImm, Imm: 0x01020304, AH: ah, RemoteQPN: 0x123456, RemoteQKey: 0x11111111,
		SGL: []verbs.SGE{{Addr: o.mr.Addr(), Length: 256, LKey: o.mr.LKey()}}}
	if n, err := qp.PostSend([]verbs.SendWR{wr, wr}); n != 2 || err != nil {
		t.Fatalf("ud send: %d, %v", n, err)
	}
	if got := k.uar32(0); got != kq.dev|1<<30 {
		t.Errorf("send doorbell %#x", got)
	}
	pdn := pvPDN(o.pd.(*PD).handle)
	e := qp.sbuf[pvrdma.PageSize:]
	av := e[40:80]
	var dgid [16]byte
	copy(dgid[:], av[8:24])
	for _, f := range []struct {
		name      string
		off       int
		got, want uint64
	}{
		{"opcode", 16, uint64(le.Uint32(e[16:])), uint64(pvrdma.OpSendWithImm)},
		{"imm_data", 24, uint64(binary.BigEndian.Uint32(e[24:])), 0x01020304},
		{"ud.remote_qpn", 32, uint64(le.Uint32(e[32:])), 0x123456},
		{"ud.remote_qkey", 36, uint64(le.Uint32(e[36:])), 0x11111111},
		{"av.port_pd", 40, uint64(le.Uint32(av[0:])), uint64(pdn | 1<<24)},
		{"av.sl_tclass_flowlabel", 44, uint64(le.Uint32(av[4:])), 0x12<<20 | 0xabcde},
		{"av.src_path_bits", 64, uint64(av[24]), 0x80 | 0x3},
		{"av.gid_index", 65, uint64(av[25]), 0},
		{"av.stat_rate", 66, uint64(av[26]), 0},
		{"av.hop_limit", 67, uint64(av[27]), 64},
		{"sge[0].length", 88, uint64(le.Uint32(e[88:])), 256},
	} {
		if f.got != f.want {
			t.Errorf("ud send wqe %s (offset %d) = %#x, want %#x", f.name, f.off, f.got, f.want)
		}
	}
	if verbs.GID(dgid) != ll || !bytes.Equal(av[28:34], []byte{0x00, 0x50, 0x56, 0x8a, 0x1b, 0x2c}) || !bytes.Equal(av[34:40], make([]byte, 6)) {
		t.Errorf("av dgid %v, dmac % x, reserved % x", verbs.GID(dgid), av[28:34], av[34:40])
	}
	if w := pvrdma.SendWQE(pvWQE(kq.sq(), 1)); w.AV().DMAC != [6]byte{0x00, 0x50, 0x56, 0x8a, 0x1b, 0x2c} || w.RemoteQPN() != 0x123456 {
		t.Errorf("the device reads the second wqe's av as %+v", w.AV())
	}
	wr.AH = ah4
	if _, err := qp.PostSend([]verbs.SendWR{wr}); err != nil {
		t.Fatal(err)
	}
	if av := pvrdma.SendWQE(pvWQE(kq.sq(), 2)).AV(); av.DMAC != [6]byte{0x00, 0x50, 0x56, 0xaa, 0xbb, 0xcc} || av.GIDIndex != 1 || av.DGID != v4 {
		t.Errorf("av of the ipv4 destination: %+v", av)
	}
	// Only live address handles of this context.
	if _, err := qp.PostSend([]verbs.SendWR{{Opcode: verbs.OpSend}}); !errors.Is(err, unix.EINVAL) {
		t.Errorf("ud send without an ah: %v", err)
	}
	if _, err := qp.PostSend([]verbs.SendWR{{Opcode: verbs.OpRDMAWrite, AH: ah}}); !errors.Is(err, unix.EINVAL) {
		t.Errorf("rdma write on a ud qp: %v", err)
	}
	if err := o.pd.Close(); !errors.Is(err, unix.EBUSY) {
		t.Errorf("close a pd with address handles: %v", err)
	}
	if err := ah4.Close(); err != nil {
		t.Fatal(err)
	}
	sq := kq.sq()
	tail := sq.Producer()
	wr2 := wr
	wr2.AH = ah
	if n, err := qp.PostSend([]verbs.SendWR{wr2, wr}); n != 1 || !errors.Is(err, unix.EINVAL) {
		t.Errorf("ud sends with a closed ah second: %d, %v", n, err)
	}
	if sq.Producer() != sq.Next(tail) {
		t.Errorf("prod_tail moved from %d to %d for one send", tail, sq.Producer())
	}
	if err := ah.Close(); err != nil {
		t.Fatal(err)
	}
	if err := ah.Close(); err != nil {
		t.Errorf("second close: %v", err)
	}
}

func TestPVRDMAAllocs(t *testing.T) {
	o := pvSetup(t)
	k := o.k
	qp, kq := o.qp(t, verbs.QPInit{Type: verbs.RC, Cap: verbs.QPCap{MaxSendWR: 64, MaxRecvWR: 64, MaxSendSGE: 1, MaxRecvSGE: 1}})
	ud, kud := o.qp(t, verbs.QPInit{Type: verbs.UD, Cap: verbs.QPCap{MaxSendWR: 64, MaxRecvWR: 64, MaxSendSGE: 1, MaxRecvSGE: 1}})
	srq, err := o.pd.CreateSRQ(verbs.SRQInit{MaxWR: 64, MaxSGE: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer srq.Close()
	pvToRTS(t, qp)
	pvToRTS(t, ud)
	ll, _ := verbs.ParseGID("fe80::250:56ff:fe8a:1b2c")
	ah, err := o.pd.CreateAH(verbs.AHAttr{IsGlobal: true, Port: 1, GRH: verbs.GRH{DGID: ll, HopLimit: 64}})
	if err != nil {
		t.Fatal(err)
	}
	defer ah.Close()
	s := []verbs.SGE{{Addr: o.mr.Addr(), Length: 8, LKey: o.mr.LKey()}}
	send := []verbs.SendWR{{Opcode: verbs.OpRDMAWrite, SGL: s, RemoteAddr: 0x1000, RKey: 1}}
	udSend := []verbs.SendWR{{Opcode: verbs.OpSend, SGL: s, AH: ah, RemoteQPN: 2, RemoteQKey: 3}}
	recv := []verbs.RecvWR{{SGL: s}}
	wc := make([]verbs.WC, 8)
	kc := k.cqs[o.cq.(*pvrdmaCQ).handle]
	ks := k.srqs[srq.(*pvrdmaSRQ).handle]
	consume := func(q pvrdma.Queue) { q.SetConsumer(q.Producer()) }
	for _, c := range []struct {
		what string
		f    func() error
	}{
		{"post send", func() error { _, err := qp.PostSend(send); consume(kq.sq()); return err }},
		{"post ud send", func() error { _, err := ud.PostSend(udSend); consume(kud.sq()); return err }},
		{"post recv", func() error { _, err := qp.PostRecv(recv); consume(kq.rq()); return err }},
		{"post srq recv", func() error { _, err := srq.PostRecv(recv); consume(ks.q()); return err }},
		{"poll (empty)", func() error { _, err := o.cq.Poll(wc); return err }},
		{"poll", func() error {
			kc.complete(pvrdma.CQE{WRID: 1, QP: uint64(kq.dev)})
			n, err := o.cq.Poll(wc)
			if n != 1 && err == nil {
				err = fmt.Errorf("polled %d", n)
			}
			return err
		}},
		{"req notify", func() error { return o.cq.ReqNotify(false) }},
	} {
		var err error
		if a := testing.AllocsPerRun(100, func() {
			if e := c.f(); e != nil {
				err = e
			}
		}); a != 0 {
			t.Errorf("%s allocates %v times", c.what, a)
		}
		if err != nil {
			t.Errorf("%s: %v", c.what, err)
		}
	}
}

// TestPVRDMAConcurrentClose runs the data path against closes: every
// call either works or fails with ErrClosed, never touches unmapped
// rings, and the race detector sees the locking.
func TestPVRDMAConcurrentClose(t *testing.T) {
	o := pvSetup(t)
	k := o.k
	cq, err := o.c.CreateCQ(verbs.CQInit{Entries: 16})
	if err != nil {
		t.Fatal(err)
	}
	qp, err := o.pd.CreateQP(verbs.QPInit{Type: verbs.RC, SendCQ: cq, RecvCQ: cq, Cap: verbs.QPCap{MaxSendWR: 8, MaxRecvWR: 8}})
	if err != nil {
		t.Fatal(err)
	}
	kq := k.qps[qp.(*pvrdmaQP).handle]
	sq, rq := kq.sq(), kq.rq()
	kc := k.cqs[cq.(*pvrdmaCQ).handle]
	pvToRTS(t, qp)
	s := []verbs.SGE{{Addr: o.mr.Addr(), Length: 8, LKey: o.mr.LKey()}}
	closedOr := func(err error, ok ...error) bool {
		if err == nil || errors.Is(err, verbs.ErrClosed) {
			return true
		}
		for _, e := range ok {
			if errors.Is(err, e) {
				return true
			}
		}
		return false
	}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	loop := func(what string, f func() error, ok ...error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				err := f()
				if !closedOr(err, ok...) {
					t.Errorf("%s: %v", what, err)
					return
				}
				if errors.Is(err, verbs.ErrClosed) {
					return
				}
				select {
				case <-stop:
					return
				default:
				}
			}
		}()
	}
	// The state goes round while posts run: sends fail outside RTS and
	// receives in RESET, with EINVAL; full rings with ENOMEM.
	loop("post send", func() error {
		_, err := qp.PostSend([]verbs.SendWR{{Opcode: verbs.OpSend, SGL: s}})
		k.device(kq, func() { sq.SetConsumer(sq.Producer()) })
		return err
	}, unix.EINVAL, unix.ENOMEM)
	loop("post recv", func() error {
		_, err := qp.PostRecv([]verbs.RecvWR{{SGL: s}})
		k.device(kq, func() { rq.SetConsumer(rq.Producer()) })
		return err
	}, unix.EINVAL, unix.ENOMEM)
	loop("poll", func() error { _, err := cq.Poll(make([]verbs.WC, 4)); return err }, unix.EINVAL)
	loop("arm", func() error { return cq.ReqNotify(false) })
	loop("modify", func() error {
		for _, st := range []verbs.QPState{verbs.StateReset, verbs.StateInit, verbs.StateRTR, verbs.StateRTS} {
			if err := qp.Modify(&verbs.QPAttr{State: st}, verbs.AttrState); err != nil {
				return err
			}
		}
		return nil
	}, unix.EINVAL)
	// The device completes what it finds in the rings.
	devStop := make(chan struct{})
	devDone := make(chan struct{})
	go func() {
		defer close(devDone)
		for {
			select {
			case <-devStop:
				return
			default:
			}
			k.device(kq, func() {
				if r := kc.ring(); !r.Full(r.Producer(), r.Consumer()) {
					kc.complete(pvrdma.CQE{QP: uint64(kq.dev)})
				}
			})
		}
	}()
	for k.count() < 200 {
		runtime.Gosched()
	}
	if err := qp.Close(); err != nil {
		t.Error(err)
	}
	close(devStop)
	<-devDone
	if err := cq.Close(); err != nil {
		t.Error(err)
	}
	close(stop)
	wg.Wait()
}

// TestQueryWhileContextCloses: queries that race the context's Close
// either work or fail with ErrClosed; none writes a command into the
// unmapped command buffer.
func TestQueryWhileContextCloses(t *testing.T) {
	for round := range 200 {
		c, _ := pvContext(t)
		var wg sync.WaitGroup
		var queries atomic.Int64
		for range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					_, err := c.QueryPort(1)
					if errors.Is(err, verbs.ErrClosed) {
						return
					}
					if err != nil {
						t.Errorf("round %d: query port: %v", round, err)
						return
					}
					queries.Add(1)
				}
			}()
		}
		for queries.Load() < 20 { // the queries are under way
			runtime.Gosched()
		}
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
		wg.Wait()
	}
}
