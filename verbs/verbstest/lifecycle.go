package verbstest

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/pvperf/pvperf/verbs"
)

func testLifecycle(t *testing.T, tg Target) {
	run(t, "CreateAll", func(t *testing.T) { testCreateAll(t, tg) })
	run(t, "CloseOrder", func(t *testing.T) { testCloseOrder(t, tg) })
	run(t, "DoubleClose", func(t *testing.T) { testDoubleClose(t, tg) })
	run(t, "UseAfterClose", func(t *testing.T) { testUseAfterClose(t, tg) })
	run(t, "ManyContexts", func(t *testing.T) { testManyContexts(t, tg) })
	run(t, "QueryDevice", func(t *testing.T) { testQueryDevice(t, tg) })
	run(t, "QueryPort", func(t *testing.T) { testQueryPort(t, tg) })
	run(t, "GIDTable", func(t *testing.T) { testGIDTable(t, tg) })
}

// objects is one of every kind of object, made by makeAll.
type objects struct {
	ctx  verbs.Context
	pd   verbs.PD
	mem  verbs.Memory
	mr   verbs.MR
	ch   verbs.CompChannel
	cq   verbs.CQ
	qps  []verbs.QP
	srq  verbs.SRQ // nil when the device has none
	sqp  verbs.QP  // QP on srq
	ah   verbs.AH
	attr verbs.DeviceAttr
}

// makeAll creates every kind of object (without registering cleanups:
// the caller closes them) and checks what the device lacks fails cleanly.
func makeAll(t *testing.T, tg Target) *objects {
	t.Helper()
	dev, err := tg.Device()
	mustOK(t, "device", err)
	o := &objects{}
	o.ctx, err = dev.Open()
	mustOK(t, "open", err)
	t.Cleanup(func() { closeAll(o) })
	if o.ctx.Device() == nil || o.ctx.Device().Name() != dev.Name() {
		t.Errorf("Context.Device() does not return the opened device")
	}
	o.attr, err = o.ctx.QueryDevice()
	mustOK(t, "query device", err)
	o.pd, err = o.ctx.AllocPD()
	mustOK(t, "alloc pd", err)
	if o.pd.Context() != o.ctx {
		t.Errorf("PD.Context() is not the context that allocated it")
	}
	o.mem, err = o.ctx.AllocMemory(3 * 4096)
	mustOK(t, "alloc memory", err)
	o.mr, err = o.pd.RegMR(o.mem.Bytes(), verbs.AccessLocalWrite|verbs.AccessRemoteWrite|verbs.AccessRemoteRead)
	mustOK(t, "reg mr", err)
	o.ch, err = o.ctx.CreateCompChannel()
	mustOK(t, "create comp channel", err)
	o.cq, err = o.ctx.CreateCQ(verbs.CQInit{Entries: 10, Channel: o.ch})
	mustOK(t, "create cq", err)
	if o.cq.Entries() < 10 {
		t.Errorf("cq of 10 entries has Entries() = %d", o.cq.Entries())
	}
	nums := map[uint32]bool{}
	for _, typ := range []verbs.QPType{verbs.RC, verbs.UC, verbs.UD} {
		init := verbs.QPInit{Type: typ, SendCQ: o.cq, RecvCQ: o.cq, Cap: verbs.QPCap{MaxSendWR: 4, MaxRecvWR: 4, MaxSendSGE: 1, MaxRecvSGE: 1}}
		qp, err := o.pd.CreateQP(init)
		if !o.attr.Supports(typ) {
			if qp != nil {
				o.qps = append(o.qps, qp)
			}
			wantErr(t, "create "+typ.String()+" qp on a device without it", err, verbs.ErrNotSupported)
			continue
		}
		mustOK(t, "create "+typ.String()+" qp", err)
		o.qps = append(o.qps, qp)
		if qp.Type() != typ {
			t.Errorf("qp type %v, want %v", qp.Type(), typ)
		}
		if nums[qp.Num()] || qp.Num() == 0 || qp.Num() > 0xFFFFFF {
			t.Errorf("qp number %#x is zero, too large or not unique", qp.Num())
		}
		nums[qp.Num()] = true
	}
	o.srq, err = o.pd.CreateSRQ(verbs.SRQInit{MaxWR: 8, MaxSGE: 1})
	if o.attr.MaxSRQ == 0 {
		wantErr(t, "create srq on a device without SRQs", err, verbs.ErrNotSupported)
		if o.srq != nil {
			t.Errorf("create srq failed but returned an SRQ")
			o.srq = nil
		}
	} else {
		mustOK(t, "create srq", err)
		o.sqp, err = o.pd.CreateQP(verbs.QPInit{Type: verbs.RC, SendCQ: o.cq, RecvCQ: o.cq, SRQ: o.srq, Cap: verbs.QPCap{MaxSendWR: 4, MaxSendSGE: 1}})
		mustOK(t, "create qp on srq", err)
	}
	gid, err := o.ctx.QueryGID(1, 0)
	mustOK(t, "query gid 0", err)
	o.ah, err = o.pd.CreateAH(verbs.AHAttr{IsGlobal: true, Port: 1, GRH: verbs.GRH{DGID: gid.GID, HopLimit: 64}})
	mustOK(t, "create ah", err)
	return o
}

func closeAll(o *objects) {
	// A nil interface converts to a nil closer.
	all := []closer{o.sqp}
	for _, q := range o.qps {
		all = append(all, q)
	}
	all = append(all, o.srq, o.ah, o.mr, o.cq, o.ch, o.mem, o.pd, o.ctx)
	for _, c := range all {
		if c != nil {
			_ = c.Close()
		}
	}
}

func testCreateAll(t *testing.T, tg Target) {
	o := makeAll(t, tg)
	// Children first: everything closes without error.
	if o.sqp != nil {
		wantOK(t, "close qp on srq", o.sqp.Close())
	}
	for _, q := range o.qps {
		wantOK(t, "close "+q.Type().String()+" qp", q.Close())
	}
	if o.srq != nil {
		wantOK(t, "close srq", o.srq.Close())
	}
	wantOK(t, "close ah", o.ah.Close())
	wantOK(t, "close mr", o.mr.Close())
	wantOK(t, "close cq", o.cq.Close())
	wantOK(t, "close comp channel", o.ch.Close())
	wantOK(t, "close memory", o.mem.Close())
	wantOK(t, "close pd", o.pd.Close())
	wantOK(t, "close context", o.ctx.Close())
}

// testCloseOrder closes parents while they have children (EBUSY, and the
// parent keeps working), then closes children first.
func testCloseOrder(t *testing.T, tg Target) {
	o := makeAll(t, tg)
	busy := func(what string, c closer) {
		t.Helper()
		wantErr(t, "close "+what+" with live children", c.Close(), errEBUSY)
	}
	busy("context", o.ctx)
	if _, err := o.ctx.QueryDevice(); err != nil {
		t.Errorf("context unusable after a refused close: %v", err)
	}
	busy("pd", o.pd)
	if mr, err := o.pd.RegMR(o.mem.Bytes()[:4096], verbs.AccessLocalWrite); err != nil {
		t.Errorf("pd unusable after a refused close: %v", err)
	} else {
		wantOK(t, "close extra mr", mr.Close())
	}
	busy("memory", o.mem)
	if len(o.mem.Bytes()) != 3*4096 {
		t.Errorf("memory unusable after a refused close")
	}
	busy("cq", o.cq)
	if _, err := o.cq.Poll(make([]verbs.WC, 1)); err != nil {
		t.Errorf("cq unusable after a refused close: %v", err)
	}
	busy("comp channel", o.ch)
	if o.srq != nil {
		busy("srq", o.srq)
		if _, err := o.srq.Query(); err != nil {
			t.Errorf("srq unusable after a refused close: %v", err)
		}
		wantOK(t, "close qp on srq", o.sqp.Close())
	}
	for _, q := range o.qps {
		busy("cq (used by a qp)", o.cq)
		wantOK(t, "close qp", q.Close())
	}
	busy("pd (srq, ah, mr)", o.pd)
	if o.srq != nil {
		wantOK(t, "close srq", o.srq.Close())
	}
	wantOK(t, "close ah", o.ah.Close())
	busy("pd (mr)", o.pd)
	busy("memory (mr)", o.mem)
	wantOK(t, "close mr", o.mr.Close())
	wantOK(t, "close memory", o.mem.Close())
	wantOK(t, "close pd", o.pd.Close())
	busy("context (cq, channel)", o.ctx)
	busy("comp channel (cq)", o.ch)
	wantOK(t, "close cq", o.cq.Close())
	busy("context (channel)", o.ctx)
	wantOK(t, "close comp channel", o.ch.Close())
	wantOK(t, "close context", o.ctx.Close())
}

func testDoubleClose(t *testing.T, tg Target) {
	o := makeAll(t, tg)
	twice := func(what string, c closer) {
		t.Helper()
		wantOK(t, "close "+what, c.Close())
		wantOK(t, "close "+what+" again", c.Close())
	}
	if o.sqp != nil {
		twice("qp on srq", o.sqp)
	}
	for _, q := range o.qps {
		twice(q.Type().String()+" qp", q)
	}
	if o.srq != nil {
		twice("srq", o.srq)
	}
	twice("ah", o.ah)
	twice("mr", o.mr)
	twice("cq", o.cq)
	twice("comp channel", o.ch)
	twice("memory", o.mem)
	twice("pd", o.pd)
	twice("context", o.ctx)
}

func testUseAfterClose(t *testing.T, tg Target) {
	closed := func(t *testing.T, what string, err error) {
		t.Helper()
		wantErr(t, what+" after close", err, verbs.ErrClosed)
	}
	run(t, "QP", func(t *testing.T) {
		f := newFixture(t, tg)
		mem := f.alloc(4096)
		mr := regMR(t, f.pd, mem.Bytes(), verbs.AccessLocalWrite)
		qp := f.qp(verbs.RC)
		mustOK(t, "connect", Connect(qp, 1, Endpoint{QPN: qp.Num(), PSN: 1, GID: f.gids[0].GID}, f.params()))
		mustOK(t, "close qp", qp.Close())
		_, err := qp.PostSend([]verbs.SendWR{{Opcode: verbs.OpSend, SGL: []verbs.SGE{sge(mr, 0, 8)}}})
		closed(t, "post send", err)
		_, err = qp.PostRecv([]verbs.RecvWR{{SGL: []verbs.SGE{sge(mr, 0, 8)}}})
		closed(t, "post recv", err)
		closed(t, "modify qp", qp.Modify(&verbs.QPAttr{State: verbs.StateErr}, verbs.AttrState))
		_, err = qp.Query()
		closed(t, "query qp", err)
	})
	run(t, "CQ", func(t *testing.T) {
		f := newFixture(t, tg)
		cq := f.cq(4, nil)
		mustOK(t, "close cq", cq.Close())
		_, err := cq.Poll(make([]verbs.WC, 1))
		closed(t, "poll cq", err)
		closed(t, "req notify cq", cq.ReqNotify(false))
		_, err = f.pd.CreateQP(verbs.QPInit{Type: verbs.RC, SendCQ: cq, RecvCQ: cq, Cap: verbs.QPCap{MaxSendWR: 1, MaxRecvWR: 1}})
		closed(t, "create qp on a closed cq", err)
	})
	run(t, "CompChannel", func(t *testing.T) {
		f := newFixture(t, tg)
		ch := f.channel()
		mustOK(t, "close comp channel", ch.Close())
		c, cancel := context.WithTimeout(context.Background(), waitLong)
		defer cancel()
		_, err := ch.Wait(c)
		closed(t, "wait on comp channel", err)
		_, err = f.ctx.CreateCQ(verbs.CQInit{Entries: 4, Channel: ch})
		closed(t, "create cq on a closed channel", err)
	})
	run(t, "SRQ", func(t *testing.T) {
		f := newFixture(t, tg)
		if f.attr.MaxSRQ == 0 {
			_, err := f.pd.CreateSRQ(verbs.SRQInit{MaxWR: 4, MaxSGE: 1})
			wantErr(t, "create srq on a device without SRQs", err, verbs.ErrNotSupported)
			return
		}
		srq, err := f.pd.CreateSRQ(verbs.SRQInit{MaxWR: 4, MaxSGE: 1})
		mustOK(t, "create srq", err)
		mem := f.alloc(4096)
		mr := regMR(t, f.pd, mem.Bytes(), verbs.AccessLocalWrite)
		mustOK(t, "close srq", srq.Close())
		_, err = srq.PostRecv([]verbs.RecvWR{{SGL: []verbs.SGE{sge(mr, 0, 8)}}})
		closed(t, "post srq recv", err)
		_, err = srq.Query()
		closed(t, "query srq", err)
		closed(t, "modify srq", srq.Modify(verbs.SRQAttr{Limit: 1}, verbs.SRQLimit))
		cq := f.cq(4, nil)
		_, err = f.pd.CreateQP(verbs.QPInit{Type: verbs.RC, SendCQ: cq, RecvCQ: cq, SRQ: srq, Cap: verbs.QPCap{MaxSendWR: 1}})
		closed(t, "create qp on a closed srq", err)
	})
	run(t, "PD", func(t *testing.T) {
		f := newFixture(t, tg)
		pd, err := f.ctx.AllocPD()
		mustOK(t, "alloc pd", err)
		mem := f.alloc(4096)
		cq := f.cq(4, nil)
		mustOK(t, "close pd", pd.Close())
		_, err = pd.RegMR(mem.Bytes(), verbs.AccessLocalWrite)
		closed(t, "reg mr", err)
		_, err = pd.CreateQP(verbs.QPInit{Type: verbs.RC, SendCQ: cq, RecvCQ: cq, Cap: verbs.QPCap{MaxSendWR: 1, MaxRecvWR: 1}})
		closed(t, "create qp", err)
		if f.attr.MaxSRQ > 0 {
			_, err = pd.CreateSRQ(verbs.SRQInit{MaxWR: 4, MaxSGE: 1})
			closed(t, "create srq", err)
		}
		_, err = pd.CreateAH(verbs.AHAttr{IsGlobal: true, Port: 1, GRH: verbs.GRH{DGID: f.gids[0].GID, HopLimit: 64}})
		closed(t, "create ah", err)
	})
	run(t, "Memory", func(t *testing.T) {
		f := newFixture(t, tg)
		mem, err := f.ctx.AllocMemory(4096)
		mustOK(t, "alloc memory", err)
		b := mem.Bytes()
		mustOK(t, "free memory", mem.Close())
		if mr, err := f.pd.RegMR(b, verbs.AccessLocalWrite); err == nil {
			mr.Close()
			t.Errorf("reg mr on freed memory succeeded")
		}
	})
	run(t, "Context", func(t *testing.T) {
		dev, err := tg.Device()
		mustOK(t, "device", err)
		ctx, err := dev.Open()
		mustOK(t, "open", err)
		mustOK(t, "close context", ctx.Close())
		_, err = ctx.QueryDevice()
		closed(t, "query device", err)
		_, err = ctx.QueryPort(1)
		closed(t, "query port", err)
		_, err = ctx.QueryGID(1, 0)
		closed(t, "query gid", err)
		_, err = ctx.GIDTable(1)
		closed(t, "gid table", err)
		_, err = ctx.AllocPD()
		closed(t, "alloc pd", err)
		_, err = ctx.AllocMemory(4096)
		closed(t, "alloc memory", err)
		_, err = ctx.CreateCQ(verbs.CQInit{Entries: 4})
		closed(t, "create cq", err)
		_, err = ctx.CreateCompChannel()
		closed(t, "create comp channel", err)
		c, cancel := context.WithTimeout(context.Background(), waitLong)
		defer cancel()
		start := time.Now()
		_, err = ctx.AsyncEvent(c)
		closed(t, "async event", err)
		if d := time.Since(start); d > waitLong/2 {
			t.Errorf("async event on a closed context blocked for %v", d)
		}
	})
}

func testQueryDevice(t *testing.T, tg Target) {
	f := newFixture(t, tg)
	a := f.attr
	if f.dev.Name() == "" || f.dev.Driver() == "" {
		t.Errorf("device name %q, driver %q: want both set", f.dev.Name(), f.dev.Driver())
	}
	if k := f.dev.Kind(); k != verbs.KindKernel && k != verbs.KindEmulated {
		t.Errorf("device kind %v", k)
	}
	positive := []struct {
		name string
		v    int
	}{
		{"PhysPortCnt", a.PhysPortCnt}, {"MaxQP", a.MaxQP}, {"MaxQPWR", a.MaxQPWR}, {"MaxSGE", a.MaxSGE},
		{"MaxSGERd", a.MaxSGERd}, {"MaxCQ", a.MaxCQ}, {"MaxCQE", a.MaxCQE}, {"MaxMR", a.MaxMR}, {"MaxPD", a.MaxPD},
		{"MaxAH", a.MaxAH}, {"NumCompVectors", a.NumCompVectors}, {"MaxPKeys", a.MaxPKeys},
	}
	for _, p := range positive {
		if p.v <= 0 {
			t.Errorf("%s = %d, want > 0", p.name, p.v)
		}
	}
	if a.MaxMRSize == 0 {
		t.Errorf("MaxMRSize = 0")
	}
	if !a.Supports(verbs.RC) {
		t.Errorf("QPTypes %v lacks RC", a.QPTypes)
	}
	for _, q := range a.QPTypes {
		if q != verbs.RC && q != verbs.UC && q != verbs.UD {
			t.Errorf("QPTypes %v has unknown type %v", a.QPTypes, q)
		}
	}
	if a.MaxSRQ > 0 && (a.MaxSRQWR <= 0 || a.MaxSRQSGE <= 0) {
		t.Errorf("MaxSRQ %d with MaxSRQWR %d, MaxSRQSGE %d", a.MaxSRQ, a.MaxSRQWR, a.MaxSRQSGE)
	}
	if a.AtomicCap > verbs.AtomicGlob {
		t.Errorf("AtomicCap %v", a.AtomicCap)
	}
	if a.MaxUDQP < 0 || a.MaxInlineData < 0 {
		t.Errorf("MaxUDQP %d, MaxInlineData %d", a.MaxUDQP, a.MaxInlineData)
	}
	a2, err := f.ctx.QueryDevice()
	mustOK(t, "query device again", err)
	if len(a2.QPTypes) > 0 {
		a2.QPTypes[0] = 0 // the caller owns the slice
	}
	if a3, _ := f.ctx.QueryDevice(); !a3.Supports(verbs.RC) {
		t.Errorf("changing QueryDevice's QPTypes changed the device's")
	}
}

func testQueryPort(t *testing.T, tg Target) {
	f := newFixture(t, tg)
	p := f.port
	if p.State != verbs.PortActive {
		t.Errorf("port state %v, want ACTIVE", p.State)
	}
	if p.LinkLayer != verbs.LinkEthernet {
		t.Errorf("link layer %v, want Ethernet", p.LinkLayer)
	}
	if p.ActiveMTU.Bytes() == 0 || p.MaxMTU.Bytes() == 0 || p.ActiveMTU > p.MaxMTU {
		t.Errorf("active MTU %v, max MTU %v", p.ActiveMTU, p.MaxMTU)
	}
	if p.GIDTblLen < len(f.gids) || p.GIDTblLen <= 0 {
		t.Errorf("gid_tbl_len %d with %d GIDs in use", p.GIDTblLen, len(f.gids))
	}
	if p.MaxMsgSz == 0 {
		t.Errorf("max_msg_sz 0")
	}
	for _, port := range []int{0, f.attr.PhysPortCnt + 1} {
		_, err := f.ctx.QueryPort(port)
		wantErr(t, "query port "+strconv.Itoa(port), err, errEINVAL)
	}
}

func testGIDTable(t *testing.T, tg Target) {
	f := newFixture(t, tg)
	used := map[int]bool{}
	typ := f.gids[0].Type
	if typ != verbs.GIDTypeRoCEv1 && typ != verbs.GIDTypeRoCEv2 {
		t.Errorf("gid 0 has type %v, want a RoCE type", typ)
	}
	for i, e := range f.gids {
		if e.Type != typ {
			t.Errorf("gid %d has type %v, gid 0 %v: a device has one RoCE version", e.Index, e.Type, typ)
		}
		if e.GID.IsZero() {
			t.Errorf("gid table entry %d is zero", e.Index)
		}
		if i > 0 && e.Index <= f.gids[i-1].Index {
			t.Errorf("gid table indices not ascending: %d after %d", e.Index, f.gids[i-1].Index)
		}
		used[e.Index] = true
		q, err := f.ctx.QueryGID(1, e.Index)
		if wantOK(t, "query gid "+strconv.Itoa(e.Index), err) && q != e {
			t.Errorf("query gid %d = %+v, table has %+v", e.Index, q, e)
		}
	}
	if q := f.tg.Quirks.NoLinkLocalGID; q != "" {
		t.Logf("no link-local GID at index 0 (quirk: %s)", q)
	} else if f.gids[0].Index != 0 || !f.gids[0].GID.IsLinkLocal() {
		t.Errorf("gid 0 is %v (index %d), want a link-local GID at index 0", f.gids[0].GID, f.gids[0].Index)
	}
	unused := -1
	for i := 0; i < f.port.GIDTblLen; i++ {
		if !used[i] {
			unused = i
			break
		}
	}
	if unused >= 0 {
		_, err := f.ctx.QueryGID(1, unused)
		wantErr(t, "query unused gid "+strconv.Itoa(unused), err, errEINVAL)
	} else {
		t.Logf("the gid table is full: no unused entry to query")
	}
	_, err := f.ctx.QueryGID(1, f.port.GIDTblLen)
	wantErr(t, "query gid beyond gid_tbl_len", err, errEINVAL)
	_, err = f.ctx.QueryGID(1, -1)
	wantErr(t, "query gid -1", err, errEINVAL)
	tbl, _ := f.ctx.GIDTable(1)
	tbl[0].GID[0] ^= 0xff // the caller owns the slice
	if g, _ := f.ctx.QueryGID(1, 0); g.GID != f.gids[0].GID {
		t.Errorf("changing GIDTable's result changed the device's table")
	}
}

// testManyContexts opens many contexts of the device at once; each works on
// its own, and the first and last can exchange data.
func testManyContexts(t *testing.T, tg Target) {
	const n = 20
	dev, err := tg.Device()
	mustOK(t, "device", err)
	ctxs := make([]verbs.Context, n)
	for i := range ctxs {
		ctxs[i] = openContext(t, dev)
	}
	for _, c := range []struct {
		name string
		a, b verbs.Context
	}{{"first", ctxs[0], ctxs[0]}, {"last", ctxs[n-1], ctxs[n-1]}, {"first to last", ctxs[0], ctxs[n-1]}} {
		cp := DefaultConnParams()
		cp.Timeout, cp.RetryCnt = 10, 1 // fail fast
		p := newPair(t, c.a, c.b, pairOpts{typ: verbs.RC, pa: cp, pb: cp})
		fill(p.A.Mem.Bytes()[:100], 1)
		postRecv(t, p.B.QP, verbs.RecvWR{ID: 1, SGL: []verbs.SGE{sge(p.B.MR, 0, 4096)}})
		postSend(t, p.A.QP, p.sendWR(2, verbs.OpSend, verbs.SendSignaled, sge(p.A.MR, 0, 100)))
		if !checkWC(t, "send with "+strconv.Itoa(n)+" contexts open, "+c.name, poll1(t, p.A.SendCQ), wcWant{ID: 2, QPNum: p.A.QP.Num(), Opcode: verbs.WCSend, Len: -1}) {
			continue
		}
		if checkWC(t, "its receive", poll1(t, p.B.RecvCQ), wcWant{ID: 1, QPNum: p.B.QP.Num(), Opcode: verbs.WCRecv, Len: 100}) {
			sameBytes(t, "message", p.B.Mem.Bytes()[:100], p.A.Mem.Bytes()[:100])
		}
	}
}
