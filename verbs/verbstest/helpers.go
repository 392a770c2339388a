package verbstest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"testing"
	"time"

	"github.com/pvperf/pvperf/internal/mmio"
	"github.com/pvperf/pvperf/internal/unix"
	"github.com/pvperf/pvperf/verbs"
)

// Waits. waitLong bounds what must happen (it is only reached when a test
// fails); waitShort is how long a test watches for something that must not
// happen.
const (
	waitLong  = 2 * time.Second
	waitShort = 30 * time.Millisecond
)

type closer interface{ Close() error }

// closeLater closes c when t ends. Cleanups run last-in first-out, so
// objects registered after their parents are closed before them.
func closeLater(t testing.TB, what string, c closer) {
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("close %s at the end of the test: %v", what, err)
		}
	})
}

// fixture is an open context of the target with one PD.
type fixture struct {
	t    testing.TB
	tg   Target
	dev  verbs.Device
	ctx  verbs.Context
	attr verbs.DeviceAttr
	port verbs.PortAttr
	gids []verbs.GIDEntry
	pd   verbs.PD
}

func newFixture(t testing.TB, tg Target) *fixture {
	t.Helper()
	dev, err := tg.Device()
	if err != nil {
		t.Fatalf("target %s: device: %v", tg.Name, err)
	}
	ctx := openContext(t, dev)
	f := &fixture{t: t, tg: tg, dev: dev, ctx: ctx}
	if f.attr, err = ctx.QueryDevice(); err != nil {
		t.Fatalf("query device: %v", err)
	}
	if f.port, err = ctx.QueryPort(1); err != nil {
		t.Fatalf("query port 1: %v", err)
	}
	if f.gids, err = ctx.GIDTable(1); err != nil {
		t.Fatalf("gid table of port 1: %v", err)
	}
	if len(f.gids) == 0 {
		t.Fatalf("gid table of port 1 is empty")
	}
	f.pd = f.allocPD()
	return f
}

func openContext(t testing.TB, dev verbs.Device) verbs.Context {
	t.Helper()
	ctx, err := dev.Open()
	if err != nil {
		t.Fatalf("open %s: %v", dev.Name(), err)
	}
	closeLater(t, "context", ctx)
	return ctx
}

func (f *fixture) allocPD() verbs.PD {
	f.t.Helper()
	pd, err := f.ctx.AllocPD()
	if err != nil {
		f.t.Fatalf("alloc pd: %v", err)
	}
	closeLater(f.t, "pd", pd)
	return pd
}

func (f *fixture) alloc(n int) verbs.Memory {
	f.t.Helper()
	return allocMem(f.t, f.ctx, n)
}

func allocMem(t testing.TB, ctx verbs.Context, n int) verbs.Memory {
	t.Helper()
	m, err := ctx.AllocMemory(n)
	if err != nil {
		t.Fatalf("alloc memory(%d): %v", n, err)
	}
	if len(m.Bytes()) != n {
		t.Fatalf("alloc memory(%d) returned %d bytes", n, len(m.Bytes()))
	}
	closeLater(t, "memory", m)
	return m
}

func regMR(t testing.TB, pd verbs.PD, b []byte, access verbs.Access) verbs.MR {
	t.Helper()
	mr, err := pd.RegMR(b, access)
	if err != nil {
		t.Fatalf("reg mr (%d bytes, %v): %v", len(b), access, err)
	}
	closeLater(t, "mr", mr)
	return mr
}

func (f *fixture) cq(n int, ch verbs.CompChannel) verbs.CQ {
	f.t.Helper()
	return newCQ(f.t, f.ctx, n, ch)
}

func newCQ(t testing.TB, ctx verbs.Context, n int, ch verbs.CompChannel) verbs.CQ {
	t.Helper()
	cq, err := ctx.CreateCQ(verbs.CQInit{Entries: n, Channel: ch})
	if err != nil {
		t.Fatalf("create cq(%d): %v", n, err)
	}
	if cq.Entries() < n {
		t.Fatalf("create cq(%d): Entries() = %d", n, cq.Entries())
	}
	closeLater(t, "cq", cq)
	return cq
}

func (f *fixture) channel() verbs.CompChannel {
	f.t.Helper()
	ch, err := f.ctx.CreateCompChannel()
	if err != nil {
		f.t.Fatalf("create comp channel: %v", err)
	}
	closeLater(f.t, "comp channel", ch)
	return ch
}

func newQP(t testing.TB, pd verbs.PD, init verbs.QPInit) verbs.QP {
	t.Helper()
	qp, err := pd.CreateQP(init)
	if err != nil {
		t.Fatalf("create %v qp: %v", init.Type, err)
	}
	if qp.Type() != init.Type {
		t.Fatalf("create %v qp: Type() = %v", init.Type, qp.Type())
	}
	closeLater(t, "qp", qp)
	return qp
}

// qp creates a QP of type typ on f's PD with its own CQ.
func (f *fixture) qp(typ verbs.QPType) verbs.QP {
	f.t.Helper()
	cq := f.cq(16, nil)
	return newQP(f.t, f.pd, verbs.QPInit{Type: typ, SendCQ: cq, RecvCQ: cq, Cap: verbs.QPCap{MaxSendWR: 8, MaxRecvWR: 8, MaxSendSGE: 1, MaxRecvSGE: 1}})
}

func (f *fixture) params() ConnParams {
	p := DefaultConnParams()
	p.MTU = f.port.ActiveMTU
	return p
}

// pairOpts describe a pair of QPs for newPair.
type pairOpts struct {
	typ       verbs.QPType
	pa, pb    ConnParams  // zero Access and QKey mean DefaultConnParams
	cap       verbs.QPCap // zero means 64 WRs each way and 1 SGE
	sigAll    bool
	cqSize    int // 0: 256 entries
	sendCQA   int // A's send CQ size, if not cqSize
	chanB     verbs.CompChannel
	memSize   int // 0: 64 KiB
	noConnect bool
	psnA      uint32
	psnB      uint32
}

func newPair(t testing.TB, ca, cb verbs.Context, o pairOpts) *Pair {
	t.Helper()
	if o.cap == (verbs.QPCap{}) {
		o.cap = verbs.QPCap{MaxSendWR: 64, MaxRecvWR: 64, MaxSendSGE: 1, MaxRecvSGE: 1}
	}
	if o.cqSize == 0 {
		o.cqSize = 256
	}
	if o.memSize == 0 {
		o.memSize = 64 << 10
	}
	def := DefaultConnParams()
	for _, p := range []*ConnParams{&o.pa, &o.pb} {
		if p.Access == 0 && p.QKey == 0 && p.MTU == 0 {
			*p = def
		}
	}
	if o.psnA == 0 && o.psnB == 0 {
		// Near the 24-bit wrap, so that multi-packet messages wrap.
		o.psnA, o.psnB = 0xFFFFFE, 0x000010
	}
	mk := func(ctx verbs.Context, p ConnParams, psn uint32, sendCQ int, ch verbs.CompChannel) *Side {
		s := &Side{Ctx: ctx, PSN: psn}
		var err error
		if s.PD, err = ctx.AllocPD(); err != nil {
			t.Fatalf("alloc pd: %v", err)
		}
		closeLater(t, "pd", s.PD)
		s.Mem = allocMem(t, ctx, o.memSize)
		attr, err := ctx.QueryDevice()
		if err != nil {
			t.Fatalf("query device: %v", err)
		}
		access := verbs.AccessLocalWrite | verbs.AccessRemoteWrite | verbs.AccessRemoteRead
		if attr.AtomicCap != verbs.AtomicNone {
			access |= verbs.AccessRemoteAtomic
		}
		s.MR = regMR(t, s.PD, s.Mem.Bytes(), access)
		if sendCQ == 0 {
			sendCQ = o.cqSize
		}
		s.SendCQ = newCQ(t, ctx, sendCQ, nil)
		s.RecvCQ = newCQ(t, ctx, o.cqSize, ch)
		s.QP = newQP(t, s.PD, verbs.QPInit{Type: o.typ, SendCQ: s.SendCQ, RecvCQ: s.RecvCQ, Cap: o.cap, SigAll: o.sigAll})
		if s.GID, err = ctx.QueryGID(1, int(p.SGIDIndex)); err != nil {
			t.Fatalf("query gid %d: %v", p.SGIDIndex, err)
		}
		return s
	}
	pr := &Pair{A: mk(ca, o.pa, o.psnA, o.sendCQA, nil), B: mk(cb, o.pb, o.psnB, 0, o.chanB)}
	if o.typ == verbs.UD {
		pr.A.AH = newAH(t, pr.A.PD, o.pa.SGIDIndex, pr.B.GID.GID)
		pr.B.AH = newAH(t, pr.B.PD, o.pb.SGIDIndex, pr.A.GID.GID)
	}
	if !o.noConnect {
		if err := Connect(pr.A.QP, pr.A.PSN, pr.B.Endpoint(), o.pa); err != nil {
			t.Fatalf("connect A: %v", err)
		}
		if err := Connect(pr.B.QP, pr.B.PSN, pr.A.Endpoint(), o.pb); err != nil {
			t.Fatalf("connect B: %v", err)
		}
	}
	return pr
}

func newAH(t testing.TB, pd verbs.PD, sgid uint8, dgid verbs.GID) verbs.AH {
	t.Helper()
	ah, err := pd.CreateAH(verbs.AHAttr{IsGlobal: true, Port: 1, GRH: verbs.GRH{DGID: dgid, SGIDIndex: sgid, HopLimit: 64}})
	if err != nil {
		t.Fatalf("create ah: %v", err)
	}
	closeLater(t, "ah", ah)
	return ah
}

// pair makes a pair of QPs on f's context.
func (f *fixture) pair(o pairOpts) *Pair {
	f.t.Helper()
	if o.pa == (ConnParams{}) {
		o.pa = f.params()
	}
	if o.pb == (ConnParams{}) {
		o.pb = f.params()
	}
	return newPair(f.t, f.ctx, f.ctx, o)
}

// sge returns the SGE of b, which must lie in mr.
func sge(mr verbs.MR, off, n int) verbs.SGE {
	return verbs.SGE{Addr: mr.Addr() + uint64(off), Length: uint32(n), LKey: mr.LKey()}
}

// addrOf returns the address of b[0].
func addrOf(b []byte) uint64 { return mmio.Addr(b) }

// fill writes a pattern that depends on seed and on the position.
func fill(b []byte, seed byte) {
	for i := range b {
		b[i] = byte(i*7) ^ byte(i>>8) ^ seed*31
	}
}

func pattern(n int, seed byte) []byte {
	b := make([]byte, n)
	fill(b, seed)
	return b
}

// sameBytes fails t if got differs from want, naming the first difference.
func sameBytes(t testing.TB, what string, got, want []byte) bool {
	t.Helper()
	if bytes.Equal(got, want) {
		return true
	}
	if len(got) != len(want) {
		t.Errorf("%s: %d bytes, want %d", what, len(got), len(want))
		return false
	}
	for i := range got {
		if got[i] != want[i] {
			end := min(i+8, len(got))
			t.Errorf("%s: first difference at byte %d of %d: got % x, want % x", what, i, len(got), got[i:end], want[i:end])
			break
		}
	}
	return false
}

// pollN polls cq until n completions arrived; it fails t after waitLong.
func pollN(t testing.TB, cq verbs.CQ, n int) []verbs.WC {
	t.Helper()
	out := make([]verbs.WC, 0, n)
	wc := make([]verbs.WC, n)
	deadline := time.Now().Add(waitLong)
	for len(out) < n {
		k, err := cq.Poll(wc[:n-len(out)])
		if err != nil {
			t.Fatalf("poll cq: %v", err)
		}
		out = append(out, wc[:k]...)
		if k == 0 {
			if time.Now().After(deadline) {
				t.Fatalf("poll cq: %d of %d completions after %v: %s", len(out), n, waitLong, fmtWCs(out))
			}
			time.Sleep(20 * time.Microsecond)
		}
	}
	return out
}

func poll1(t testing.TB, cq verbs.CQ) verbs.WC {
	t.Helper()
	return pollN(t, cq, 1)[0]
}

// expectNoWC fails t if a completion arrives on cq within d.
func expectNoWC(t testing.TB, what string, cq verbs.CQ, d time.Duration) {
	t.Helper()
	wc := make([]verbs.WC, 4)
	deadline := time.Now().Add(d)
	for {
		n, err := cq.Poll(wc)
		if err != nil {
			t.Fatalf("poll cq: %v", err)
		}
		if n > 0 {
			t.Errorf("%s: unexpected completion(s): %s", what, fmtWCs(wc[:n]))
			return
		}
		if time.Now().After(deadline) {
			return
		}
		time.Sleep(100 * time.Microsecond)
	}
}

func fmtWC(w verbs.WC) string {
	return fmt.Sprintf("{id %#x %s opcode %v len %d imm %#x qp %#x src %#x flags %#x vendor %#x}",
		w.ID, w.Status.Name(), w.Opcode, w.ByteLen, w.Imm, w.QPNum, w.SrcQP, uint32(w.Flags), w.VendorErr)
}

func fmtWCs(ws []verbs.WC) string {
	var b bytes.Buffer
	for i, w := range ws {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(fmtWC(w))
	}
	return "[" + b.String() + "]"
}

// wcWant is an expected work completion. ID, Status and QPNum are always
// checked; the other fields only for successful completions, as they are
// undefined otherwise.
type wcWant struct {
	ID      uint64
	Status  verbs.WCStatus
	QPNum   uint32
	Opcode  verbs.WCOpcode
	Len     int // byte_len; -1 not checked
	Imm     uint32
	WithImm bool   // receives: WCWithImm and Imm
	GRH     bool   // UD receives: WCWithGRH (not checked on RC and UC)
	SrcQP   uint32 // receives on UD QPs, when nonzero
}

func checkWC(t testing.TB, what string, got verbs.WC, w wcWant) bool {
	t.Helper()
	var bad []string
	if got.ID != w.ID {
		bad = append(bad, fmt.Sprintf("wr_id %#x, want %#x", got.ID, w.ID))
	}
	if got.Status != w.Status {
		bad = append(bad, fmt.Sprintf("status %s, want %s", got.Status.Name(), w.Status.Name()))
	}
	if got.QPNum != w.QPNum {
		bad = append(bad, fmt.Sprintf("qp_num %#x, want %#x", got.QPNum, w.QPNum))
	}
	if w.Status == verbs.WCSuccess && got.Status == verbs.WCSuccess {
		if got.Opcode != w.Opcode {
			bad = append(bad, fmt.Sprintf("opcode %v, want %v", got.Opcode, w.Opcode))
		}
		if w.Len >= 0 && got.ByteLen != uint32(w.Len) {
			bad = append(bad, fmt.Sprintf("byte_len %d, want %d", got.ByteLen, w.Len))
		}
		if w.Opcode&verbs.WCRecv != 0 {
			if imm := got.Flags&verbs.WCWithImm != 0; imm != w.WithImm {
				bad = append(bad, fmt.Sprintf("WITH_IMM flag %v, want %v", imm, w.WithImm))
			} else if imm && got.Imm != w.Imm {
				bad = append(bad, fmt.Sprintf("imm %#x, want %#x", got.Imm, w.Imm))
			}
			// The GRH flag means something only on UD receives, where it
			// is required; devices differ on connected QPs (rdma_rxe sets
			// it on every receive).
			if grh := got.Flags&verbs.WCWithGRH != 0; w.GRH && !grh {
				bad = append(bad, "GRH flag false, want true")
			}
			if w.SrcQP != 0 && got.SrcQP != w.SrcQP {
				bad = append(bad, fmt.Sprintf("src_qp %#x, want %#x", got.SrcQP, w.SrcQP))
			}
		}
	}
	if len(bad) > 0 {
		t.Errorf("%s: completion %s: %v", what, fmtWC(got), bad)
		return false
	}
	return true
}

// wantErr fails t unless err matches target with errors.Is.
func wantErr(t testing.TB, what string, err, target error) bool {
	t.Helper()
	if err == nil {
		t.Errorf("%s: succeeded, want an error matching %v", what, target)
		return false
	}
	if !errors.Is(err, target) {
		t.Errorf("%s: error %q does not match %v", what, err, target)
		return false
	}
	return true
}

func wantOK(t testing.TB, what string, err error) bool {
	t.Helper()
	if err != nil {
		t.Errorf("%s: %v", what, err)
		return false
	}
	return true
}

func mustOK(t testing.TB, what string, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// postSend posts wrs and fails t unless all were queued.
func postSend(t testing.TB, qp verbs.QP, wrs ...verbs.SendWR) {
	t.Helper()
	n, err := qp.PostSend(wrs)
	if err != nil || n != len(wrs) {
		t.Fatalf("post send: %d of %d queued: %v", n, len(wrs), err)
	}
}

func postRecv(t testing.TB, qp verbs.QP, wrs ...verbs.RecvWR) {
	t.Helper()
	n, err := qp.PostRecv(wrs)
	if err != nil || n != len(wrs) {
		t.Fatalf("post recv: %d of %d queued: %v", n, len(wrs), err)
	}
}

func modify(t testing.TB, qp verbs.QP, a verbs.QPAttr, m verbs.QPAttrMask) {
	t.Helper()
	if err := qp.Modify(&a, m); err != nil {
		t.Fatalf("modify qp (mask %#x): %v", uint32(m), err)
	}
}

// drainCQ discards every completion in cq.
func drainCQ(cq verbs.CQ) {
	wc := make([]verbs.WC, 16)
	for {
		if n, err := cq.Poll(wc); n == 0 || err != nil {
			return
		}
	}
}

// toErr moves qp to ERR, through INIT when it is in RESET (which leads
// nowhere else).
func toErr(t testing.TB, qp verbs.QP) {
	t.Helper()
	if qpState(t, qp) == verbs.StateReset {
		modify(t, qp, verbs.QPAttr{State: verbs.StateInit, PKeyIndex: 0, Port: 1}, verbs.AttrState|verbs.AttrPKeyIndex|verbs.AttrPort|initExtra(qp))
	}
	modify(t, qp, verbs.QPAttr{State: verbs.StateErr}, verbs.AttrState)
}

// initExtra is the attribute RESET to INIT needs besides the port: the
// qkey for UD, the access flags otherwise (zero values will do).
func initExtra(qp verbs.QP) verbs.QPAttrMask {
	if qp.Type() == verbs.UD {
		return verbs.AttrQKey
	}
	return verbs.AttrAccessFlags
}

func qpState(t testing.TB, qp verbs.QP) verbs.QPState {
	t.Helper()
	a, err := qp.Query()
	if err != nil {
		t.Fatalf("query qp: %v", err)
	}
	return a.State
}

func wantState(t testing.TB, what string, qp verbs.QP, want verbs.QPState) bool {
	t.Helper()
	if got := qpState(t, qp); got != want {
		t.Errorf("%s: qp %#x is in state %v, want %v", what, qp.Num(), got, want)
		return false
	}
	return true
}

// waitState waits until qp reaches state want (a peer's error reaches a
// responder asynchronously on real devices).
func waitState(t testing.TB, what string, qp verbs.QP, want verbs.QPState) bool {
	t.Helper()
	deadline := time.Now().Add(waitLong)
	for {
		got := qpState(t, qp)
		if got == want {
			return true
		}
		if time.Now().After(deadline) {
			t.Errorf("%s: qp %#x is in state %v after %v, want %v", what, qp.Num(), got, waitLong, want)
			return false
		}
		time.Sleep(100 * time.Microsecond)
	}
}

// waitEvent waits for an asynchronous event of type typ for which match
// (if not nil) holds; other events are ignored.
func waitEvent(t testing.TB, ctx verbs.Context, typ verbs.EventType, match func(verbs.AsyncEvent) bool) bool {
	t.Helper()
	c, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	var seen []string
	for {
		ev, err := ctx.AsyncEvent(c)
		if err != nil {
			t.Errorf("no %v event within %v (saw %v): %v", typ, waitLong, seen, err)
			return false
		}
		if ev.Type == typ && (match == nil || match(ev)) {
			return true
		}
		seen = append(seen, ev.Type.String())
	}
}

// expectNoEvent fails t if an event of type typ arrives within d.
func expectNoEvent(t testing.TB, ctx verbs.Context, typ verbs.EventType, d time.Duration) {
	t.Helper()
	c, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	for {
		ev, err := ctx.AsyncEvent(c)
		if err != nil {
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("async event: %v, want a timeout", err)
			}
			return
		}
		if ev.Type == typ {
			t.Errorf("unexpected %v event", typ)
			return
		}
	}
}

var (
	errEINVAL = error(unix.EINVAL)
	errEBUSY  = error(unix.EBUSY)
	errENOMEM = error(unix.ENOMEM)
)

// run is t.Run, except that a panic (of the backend) fails the subtest
// instead of ending the test binary, so that one bug does not hide the
// results of the other tests.
func run(t *testing.T, name string, fn func(t *testing.T)) bool {
	t.Helper()
	return t.Run(name, func(t *testing.T) {
		if current != nil {
			if why, ok := current.Quirks.skipReason(t.Name()); ok {
				t.Skip("device quirk: " + why)
			}
		}
		defer func() {
			if r := recover(); r != nil {
				t.Errorf("panic: %v\n%s", r, panicSite(debug.Stack()))
			}
		}()
		fn(t)
	})
}

// panicSite returns the frames of a stack trace below the panic call.
func panicSite(stack []byte) []byte {
	lines := bytes.Split(stack, []byte("\n"))
	for i, l := range lines {
		if bytes.HasPrefix(l, []byte("panic(")) {
			lines = lines[i+2:]
			break
		}
	}
	return bytes.Join(lines[:min(len(lines), 16)], []byte("\n"))
}

// ucFence waits, on UC, until everything a has sent before has landed at b:
// UC completes a request when it is sent, not when it arrives, so the
// bytes of an RDMA write are checked after a SEND behind it is received
// (UC delivers in order). On other QP types it does nothing.
func ucFence(t testing.TB, typ verbs.QPType, a, b *Side) {
	t.Helper()
	if typ != verbs.UC {
		return
	}
	postRecv(t, b.QP, verbs.RecvWR{ID: 0xFE9CE})
	postSend(t, a.QP, verbs.SendWR{ID: 0xFE9CE, Opcode: verbs.OpSend, Flags: verbs.SendSignaled})
	checkWC(t, "fence send", poll1(t, a.SendCQ), wcWant{ID: 0xFE9CE, QPNum: a.QP.Num(), Opcode: verbs.WCSend, Len: -1})
	checkWC(t, "fence receive", poll1(t, b.RecvCQ), wcWant{ID: 0xFE9CE, QPNum: b.QP.Num(), Opcode: verbs.WCRecv, Len: 0})
}
