package verbstest

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/pvperf/pvperf/verbs"
)

var qpTypes = []verbs.QPType{verbs.RC, verbs.UC, verbs.UD}

// forTypes runs fn as one subtest per QP type; a type the device lacks is
// checked to fail with ErrNotSupported instead.
func forTypes(t *testing.T, tg Target, types []verbs.QPType, fn func(t *testing.T, typ verbs.QPType)) {
	for _, typ := range types {
		run(t, typ.String(), func(t *testing.T) {
			f := newFixture(t, tg)
			if !f.attr.Supports(typ) {
				cq := f.cq(4, nil)
				qp, err := f.pd.CreateQP(verbs.QPInit{Type: typ, SendCQ: cq, RecvCQ: cq, Cap: verbs.QPCap{MaxSendWR: 1, MaxRecvWR: 1}})
				if qp != nil {
					qp.Close()
				}
				wantErr(t, fmt.Sprintf("create %v qp (not in QPTypes %v)", typ, f.attr.QPTypes), err, verbs.ErrNotSupported)
				return
			}
			fn(t, typ)
		})
	}
}

func testQPState(t *testing.T, tg Target) {
	run(t, "Transitions", func(t *testing.T) {
		forTypes(t, tg, qpTypes, func(t *testing.T, typ verbs.QPType) { testTransitions(t, tg, typ) })
	})
	run(t, "RequiredAttrs", func(t *testing.T) {
		forTypes(t, tg, qpTypes, func(t *testing.T, typ verbs.QPType) { testRequiredAttrs(t, tg, typ) })
	})
	run(t, "IllegalTransitions", func(t *testing.T) {
		forTypes(t, tg, qpTypes, func(t *testing.T, typ verbs.QPType) { testIllegal(t, tg, typ) })
	})
	run(t, "CurState", func(t *testing.T) {
		forTypes(t, tg, qpTypes, func(t *testing.T, typ verbs.QPType) { testCurState(t, tg, typ) })
	})
	run(t, "Query", func(t *testing.T) {
		forTypes(t, tg, qpTypes, func(t *testing.T, typ verbs.QPType) { testQuery(t, tg, typ) })
	})
	run(t, "PostNotReady", func(t *testing.T) {
		forTypes(t, tg, qpTypes, func(t *testing.T, typ verbs.QPType) { testPostNotReady(t, tg, typ) })
	})
	run(t, "ErrFlushes", func(t *testing.T) {
		forTypes(t, tg, qpTypes, func(t *testing.T, typ verbs.QPType) { testErrFlushes(t, tg, typ) })
	})
	run(t, "ErrFlushesStalledForever", func(t *testing.T) { testErrFlushesStalled(t, tg) })
	run(t, "ResetClears", func(t *testing.T) {
		forTypes(t, tg, qpTypes, func(t *testing.T, typ verbs.QPType) { testResetClears(t, tg, typ) })
	})
}

// selfEndpoint connects a QP to itself: enough for state tests.
func selfEndpoint(f *fixture, qp verbs.QP) Endpoint {
	return Endpoint{QPN: qp.Num(), PSN: 100, GID: f.gids[0].GID}
}

// moveTo brings a QP in RESET to state s along RESET, INIT, RTR, RTS.
func moveTo(t *testing.T, f *fixture, qp verbs.QP, s verbs.QPState) {
	t.Helper()
	for _, step := range []verbs.QPState{verbs.StateInit, verbs.StateRTR, verbs.StateRTS} {
		if step > s {
			return
		}
		a, m := stepAttr(qp.Type(), step, 100, selfEndpoint(f, qp), f.params())
		modify(t, qp, a, m)
	}
}

// optional returns an attribute that transition from→to accepts but does
// not require, for the type of qp.
func optional(typ verbs.QPType, from verbs.QPState) (verbs.QPAttr, verbs.QPAttrMask) {
	switch {
	case typ == verbs.UD:
		return verbs.QPAttr{QKey: 0x22222222}, verbs.AttrQKey
	case from == verbs.StateInit:
		return verbs.QPAttr{Access: verbs.AccessLocalWrite | verbs.AccessRemoteWrite}, verbs.AttrAccessFlags
	case typ == verbs.RC:
		return verbs.QPAttr{MinRNRTimer: 14}, verbs.AttrMinRNRTimer
	}
	return verbs.QPAttr{Access: verbs.AccessLocalWrite}, verbs.AttrAccessFlags
}

func testTransitions(t *testing.T, tg Target, typ verbs.QPType) {
	f := newFixture(t, tg)
	qp := f.qp(typ)
	step := func(what string, a verbs.QPAttr, m verbs.QPAttrMask, want verbs.QPState) {
		t.Helper()
		if err := qp.Modify(&a, m); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if got := qpState(t, qp); got != want {
			t.Fatalf("%s: state %v, want %v", what, got, want)
		}
	}
	// A QP in SQD may be modified again only once its send queue has
	// drained; until then rdma_rxe refuses (EINVAL) anything but ERR, and
	// its requester drains in the background. Steps out of SQD retry on
	// EINVAL for a while.
	fromSQD := func(what string, a verbs.QPAttr, m verbs.QPAttrMask, want verbs.QPState) {
		t.Helper()
		deadline := time.Now().Add(2 * time.Second)
		for {
			b := a
			err := qp.Modify(&b, m)
			if err == nil {
				break
			}
			if !errors.Is(err, errEINVAL) || time.Now().After(deadline) {
				t.Fatalf("%s: %v", what, err)
			}
			time.Sleep(time.Millisecond)
		}
		if got := qpState(t, qp); got != want {
			t.Fatalf("%s: state %v, want %v", what, got, want)
		}
	}
	req := func(to verbs.QPState) (verbs.QPAttr, verbs.QPAttrMask) {
		return stepAttr(typ, to, 100, selfEndpoint(f, qp), f.params())
	}
	wantState(t, "new qp", qp, verbs.StateReset)
	a, m := req(verbs.StateInit)
	step("RESET to INIT", a, m, verbs.StateInit)
	a, m = optional(typ, verbs.StateInit)
	a.State = verbs.StateInit
	step("INIT to INIT", a, m|verbs.AttrState, verbs.StateInit)
	step("INIT to INIT without attributes", verbs.QPAttr{}, 0, verbs.StateInit)
	a, m = req(verbs.StateRTR)
	step("INIT to RTR", a, m, verbs.StateRTR)
	a, m = req(verbs.StateRTS)
	step("RTR to RTS", a, m, verbs.StateRTS)
	a, m = optional(typ, verbs.StateRTS)
	a.State = verbs.StateRTS
	step("RTS to RTS", a, m|verbs.AttrState, verbs.StateRTS)
	step("RTS to SQD", verbs.QPAttr{State: verbs.StateSQD}, verbs.AttrState, verbs.StateSQD)
	fromSQD("SQD to SQD", verbs.QPAttr{State: verbs.StateSQD}, verbs.AttrState, verbs.StateSQD)
	fromSQD("SQD to RTS", verbs.QPAttr{State: verbs.StateRTS}, verbs.AttrState, verbs.StateRTS)
	step("RTS to ERR", verbs.QPAttr{State: verbs.StateErr}, verbs.AttrState, verbs.StateErr)
	step("ERR to RESET", verbs.QPAttr{State: verbs.StateReset}, verbs.AttrState, verbs.StateReset)
	a, m = req(verbs.StateInit)
	step("RESET to INIT", a, m, verbs.StateInit)
	step("INIT to ERR", verbs.QPAttr{State: verbs.StateErr}, verbs.AttrState, verbs.StateErr)
	step("ERR to ERR", verbs.QPAttr{State: verbs.StateErr}, verbs.AttrState, verbs.StateErr)
	step("ERR to RESET", verbs.QPAttr{State: verbs.StateReset}, verbs.AttrState, verbs.StateReset)
	step("RESET to RESET", verbs.QPAttr{State: verbs.StateReset}, verbs.AttrState, verbs.StateReset)
	// Every state reaches RESET and ERR.
	for _, s := range []verbs.QPState{verbs.StateInit, verbs.StateRTR, verbs.StateRTS, verbs.StateSQD} {
		for _, to := range []verbs.QPState{verbs.StateErr, verbs.StateReset} {
			moveTo(t, f, qp, min(s, verbs.StateRTS))
			if s == verbs.StateSQD {
				step("RTS to SQD", verbs.QPAttr{State: verbs.StateSQD}, verbs.AttrState, verbs.StateSQD)
			}
			if s == verbs.StateSQD {
				fromSQD(fmt.Sprintf("%v to %v", s, to), verbs.QPAttr{State: to}, verbs.AttrState, to)
			} else {
				step(fmt.Sprintf("%v to %v", s, to), verbs.QPAttr{State: to}, verbs.AttrState, to)
			}
			if to == verbs.StateErr {
				step("ERR to RESET", verbs.QPAttr{State: verbs.StateReset}, verbs.AttrState, verbs.StateReset)
			}
		}
	}
}

// testRequiredAttrs leaves out each required attribute of each transition
// (EINVAL, state unchanged) and adds one the transition does not accept.
func testRequiredAttrs(t *testing.T, tg Target, typ verbs.QPType) {
	f := newFixture(t, tg)
	qp := f.qp(typ)
	from := verbs.StateReset
	// extra is an attribute the transition into the state does not accept.
	extra := map[verbs.QPState]verbs.QPAttrMask{
		verbs.StateInit: verbs.AttrQKey,
		verbs.StateRTR:  verbs.AttrSQPSN,
		verbs.StateRTS:  verbs.AttrDestQPN,
	}
	if typ == verbs.UD {
		extra[verbs.StateInit] = verbs.AttrAccessFlags
		extra[verbs.StateRTR] = verbs.AttrAV
	}
	for _, to := range []verbs.QPState{verbs.StateInit, verbs.StateRTR, verbs.StateRTS} {
		a, m := stepAttr(typ, to, 100, selfEndpoint(f, qp), f.params())
		for bit := verbs.QPAttrMask(1); bit != 0 && bit <= m; bit <<= 1 {
			if m&bit == 0 || bit == verbs.AttrState {
				continue
			}
			err := qp.Modify(&a, m&^bit)
			wantErr(t, fmt.Sprintf("%v to %v without attribute %#x", from, to, uint32(bit)), err, errEINVAL)
			wantState(t, "after a refused modify", qp, from)
		}
		err := qp.Modify(&a, m|extra[to])
		wantErr(t, fmt.Sprintf("%v to %v with attribute %#x, which it does not accept", from, to, uint32(extra[to])), err, errEINVAL)
		wantState(t, "after a refused modify", qp, from)
		modify(t, qp, a, m)
		from = to
	}
	wantState(t, "after all transitions", qp, verbs.StateRTS)
}

func testIllegal(t *testing.T, tg Target, typ verbs.QPType) {
	f := newFixture(t, tg)
	illegal := []struct{ from, to verbs.QPState }{
		// RESET leads only to INIT (and RESET): even ERR is refused, as
		// in the kernel's transition table (ib_modify_qp_is_ok).
		{verbs.StateReset, verbs.StateRTR}, {verbs.StateReset, verbs.StateRTS}, {verbs.StateReset, verbs.StateSQD},
		{verbs.StateReset, verbs.StateErr},
		{verbs.StateInit, verbs.StateRTS}, {verbs.StateInit, verbs.StateSQD},
		{verbs.StateRTR, verbs.StateInit}, {verbs.StateRTR, verbs.StateRTR}, {verbs.StateRTR, verbs.StateSQD},
		{verbs.StateRTS, verbs.StateInit}, {verbs.StateRTS, verbs.StateRTR},
		{verbs.StateErr, verbs.StateInit}, {verbs.StateErr, verbs.StateRTR}, {verbs.StateErr, verbs.StateRTS},
	}
	if typ == verbs.RC {
		// RC has no SQE state; a QP in RTS cannot be put there.
		illegal = append(illegal, struct{ from, to verbs.QPState }{verbs.StateRTS, verbs.StateSQE})
	}
	qp := f.qp(typ)
	for _, c := range illegal {
		modify(t, qp, verbs.QPAttr{State: verbs.StateReset}, verbs.AttrState)
		if c.from == verbs.StateErr {
			toErr(t, qp)
		} else {
			moveTo(t, f, qp, c.from)
		}
		// Give the transition every attribute it could need, so that only
		// the transition itself is wrong.
		a, m := stepAttr(typ, c.to, 100, selfEndpoint(f, qp), f.params())
		if c.to == verbs.StateSQD || c.to == verbs.StateSQE {
			a, m = verbs.QPAttr{State: c.to}, verbs.AttrState
		}
		err := qp.Modify(&a, m)
		wantErr(t, fmt.Sprintf("%v to %v", c.from, c.to), err, errEINVAL)
		wantState(t, fmt.Sprintf("after refused %v to %v", c.from, c.to), qp, c.from)
	}
	// An invalid state number.
	modify(t, qp, verbs.QPAttr{State: verbs.StateReset}, verbs.AttrState)
	err := qp.Modify(&verbs.QPAttr{State: verbs.QPState(7)}, verbs.AttrState)
	wantErr(t, "modify to state 7", err, errEINVAL)
}

func testCurState(t *testing.T, tg Target, typ verbs.QPType) {
	f := newFixture(t, tg)
	qp := f.qp(typ)
	moveTo(t, f, qp, verbs.StateInit)
	a, m := stepAttr(typ, verbs.StateRTR, 100, selfEndpoint(f, qp), f.params())
	a.CurState = verbs.StateInit
	wantErr(t, "INIT to RTR with CUR_STATE, which it does not accept", qp.Modify(&a, m|verbs.AttrCurState), errEINVAL)
	modify(t, qp, a, m)
	a, m = stepAttr(typ, verbs.StateRTS, 100, selfEndpoint(f, qp), f.params())
	a.CurState = verbs.StateInit
	wantErr(t, "RTR to RTS with CUR_STATE INIT", qp.Modify(&a, m|verbs.AttrCurState), errEINVAL)
	wantState(t, "after a refused modify", qp, verbs.StateRTR)
	a.CurState = verbs.StateRTR
	if wantOK(t, "RTR to RTS with CUR_STATE RTR", qp.Modify(&a, m|verbs.AttrCurState)) {
		wantState(t, "RTR to RTS with CUR_STATE", qp, verbs.StateRTS)
	}
	rts := verbs.QPAttr{State: verbs.StateRTS, CurState: verbs.StateRTR}
	wantErr(t, "RTS to RTS with CUR_STATE RTR", qp.Modify(&rts, verbs.AttrState|verbs.AttrCurState), errEINVAL)
	rts.CurState = verbs.StateRTS
	wantOK(t, "RTS to RTS with CUR_STATE RTS", qp.Modify(&rts, verbs.AttrState|verbs.AttrCurState))
	wantState(t, "after RTS to RTS", qp, verbs.StateRTS)
}

func testQuery(t *testing.T, tg Target, typ verbs.QPType) {
	f := newFixture(t, tg)
	cq := f.cq(16, nil)
	want := verbs.QPCap{MaxSendWR: 5, MaxRecvWR: 7, MaxSendSGE: 1, MaxRecvSGE: min(2, f.attr.MaxSGE)}
	qp := newQP(t, f.pd, verbs.QPInit{Type: typ, SendCQ: cq, RecvCQ: cq, Cap: want, SigAll: true})
	p := f.params()
	p.SGIDIndex = uint8(len(f.gids) - 1)
	p.Access = verbs.AccessLocalWrite | verbs.AccessRemoteRead
	p.QKey = 0x1234567
	p.Timeout, p.RetryCnt, p.RNRRetry, p.MinRNRTimer, p.RdAtomic = 17, 5, 3, 9, 1
	p.MTU = verbs.MTU512
	dgid := f.gids[len(f.gids)-1].GID
	remote := Endpoint{QPN: 0xABCDE, PSN: 0x345678, GID: dgid}
	mustOK(t, "connect", Connect(qp, 0x123456, remote, p))
	a, err := qp.Query()
	mustOK(t, "query", err)
	var bad []string
	check := func(name string, got, want any) {
		if got != want {
			bad = append(bad, fmt.Sprintf("%s %v, want %v", name, got, want))
		}
	}
	check("state", a.State, verbs.StateRTS)
	check("sig_all", a.SigAll, true)
	check("port", a.Port, uint8(1))
	check("pkey_index", a.PKeyIndex, uint16(0))
	check("sq_psn", a.SQPSN, uint32(0x123456))
	if a.Cap.MaxSendWR < want.MaxSendWR || a.Cap.MaxRecvWR < want.MaxRecvWR || a.Cap.MaxSendSGE < want.MaxSendSGE || a.Cap.MaxRecvSGE < want.MaxRecvSGE {
		bad = append(bad, fmt.Sprintf("cap %+v, want at least %+v", a.Cap, want))
	}
	switch typ {
	case verbs.UD:
		check("qkey", a.QKey, p.QKey)
	default:
		check("access", a.Access, p.Access)
		check("path_mtu", a.PathMTU, p.MTU)
		check("dest_qp_num", a.DestQPN, remote.QPN)
		check("rq_psn", a.RQPSN, remote.PSN)
		check("ah.is_global", a.AH.IsGlobal, true)
		check("ah.grh.dgid", a.AH.GRH.DGID, dgid)
		check("ah.grh.sgid_index", a.AH.GRH.SGIDIndex, p.SGIDIndex)
	}
	if typ == verbs.RC {
		check("timeout", a.Timeout, p.Timeout)
		check("retry_cnt", a.RetryCnt, p.RetryCnt)
		check("rnr_retry", a.RNRRetry, p.RNRRetry)
		check("min_rnr_timer", a.MinRNRTimer, p.MinRNRTimer)
		check("max_rd_atomic", a.MaxRdAtomic, p.RdAtomic)
		check("max_dest_rd_atomic", a.MaxDestRdAtomic, p.RdAtomic)
	}
	if len(bad) > 0 {
		t.Errorf("query after connect: %v", bad)
	}
	// A later modify shows too.
	o, m := optional(typ, verbs.StateRTS)
	modify(t, qp, o, m)
	a, _ = qp.Query()
	switch m {
	case verbs.AttrQKey:
		check("qkey after modify", a.QKey, o.QKey)
	case verbs.AttrMinRNRTimer:
		check("min_rnr_timer after modify", a.MinRNRTimer, o.MinRNRTimer)
	case verbs.AttrAccessFlags:
		check("access after modify", a.Access, o.Access)
	}
	if len(bad) > 0 {
		t.Errorf("query: %v", bad)
	}
}

// testPostNotReady posts sends before RTS and receives in RESET.
func testPostNotReady(t *testing.T, tg Target, typ verbs.QPType) {
	f := newFixture(t, tg)
	mem := f.alloc(4096)
	mr := regMR(t, f.pd, mem.Bytes(), verbs.AccessLocalWrite)
	qp := f.qp(typ)
	var ah verbs.AH
	if typ == verbs.UD {
		ah = newAH(t, f.pd, 0, f.gids[0].GID)
	}
	send := []verbs.SendWR{{ID: 1, Opcode: verbs.OpSend, Flags: verbs.SendSignaled, SGL: []verbs.SGE{sge(mr, 0, 16)}, AH: ah, RemoteQPN: qp.Num(), RemoteQKey: f.params().QKey}}
	recv := []verbs.RecvWR{{ID: 2, SGL: []verbs.SGE{sge(mr, 64, 128)}}}
	for _, s := range []verbs.QPState{verbs.StateReset, verbs.StateInit, verbs.StateRTR} {
		moveTo(t, f, qp, s)
		n, err := qp.PostSend(send)
		if wantErr(t, "post send in "+s.String(), err, errEINVAL) && n != 0 {
			t.Errorf("post send in %v: %d queued", s, n)
		}
		if s == verbs.StateReset {
			n, err := qp.PostRecv(recv)
			if wantErr(t, "post recv in RESET", err, errEINVAL) && n != 0 {
				t.Errorf("post recv in RESET: %d queued", n)
			}
		} else {
			recv[0].ID = uint64(10 + s)
			n, err := qp.PostRecv(recv)
			if err != nil || n != 1 {
				t.Errorf("post recv in %v: %d queued: %v", s, n, err)
			}
		}
	}
}

// stallPair is an RC pair whose B posts no receive: A's sends wait for RNR
// retries (forever) until B posts one.
func stallPair(f *fixture, o pairOpts) *Pair {
	o.typ = verbs.RC
	o.pa, o.pb = f.params(), f.params()
	o.pa.RNRRetry = 7
	o.pb.MinRNRTimer = 14 // 1.28 ms
	return f.pair(o)
}

// testErrFlushes: modify to ERR flushes the posted receives and sends
// (the sends stalled on RNR for RC), and work posted in ERR is flushed.
func testErrFlushes(t *testing.T, tg Target, typ verbs.QPType) {
	f := newFixture(t, tg)
	var p *Pair
	if typ == verbs.RC {
		p = stallPair(f, pairOpts{})
	} else {
		p = f.pair(pairOpts{typ: typ})
	}
	a, b := p.A, p.B
	for i := range 3 {
		postRecv(t, a.QP, verbs.RecvWR{ID: uint64(100 + i), SGL: []verbs.SGE{sge(a.MR, 4096*i, 4096)}})
	}
	nsend := 0
	send := func(id uint64) verbs.SendWR {
		return verbs.SendWR{ID: id, Opcode: verbs.OpSend, Flags: verbs.SendSignaled, SGL: []verbs.SGE{sge(a.MR, 0, 64)},
			AH: a.AH, RemoteQPN: b.QP.Num(), RemoteQKey: f.params().QKey}
	}
	if typ == verbs.RC {
		postSend(t, a.QP, send(200), send(201))
		nsend = 2
		expectNoWC(t, "sends waiting for a receive (rnr_retry 7)", a.SendCQ, waitShort)
	}
	toErr(t, a.QP)
	wantState(t, "after modify to ERR", a.QP, verbs.StateErr)
	for i, wc := range pollN(t, a.RecvCQ, 3) {
		checkWC(t, "flushed receive", wc, wcWant{ID: uint64(100 + i), Status: verbs.WCWRFlushErr, QPNum: a.QP.Num()})
	}
	for i, wc := range pollN(t, a.SendCQ, nsend) {
		checkWC(t, "flushed send", wc, wcWant{ID: uint64(200 + i), Status: verbs.WCWRFlushErr, QPNum: a.QP.Num()})
	}
	// Work posted in ERR completes with WR_FLUSH_ERR.
	postSend(t, a.QP, send(202))
	checkWC(t, "send posted in ERR", poll1(t, a.SendCQ), wcWant{ID: 202, Status: verbs.WCWRFlushErr, QPNum: a.QP.Num()})
	expectNoWC(t, "after the flush", a.SendCQ, waitShort)
	run(t, "RecvPostedInErr", func(t *testing.T) {
		skipIf(t, f.tg.Quirks.RecvPostedInErr)
		postRecv(t, a.QP, verbs.RecvWR{ID: 103, SGL: []verbs.SGE{sge(a.MR, 0, 64)}})
		checkWC(t, "receive posted in ERR", poll1(t, a.RecvCQ), wcWant{ID: 103, Status: verbs.WCWRFlushErr, QPNum: a.QP.Num()})
		expectNoWC(t, "after the flush", a.RecvCQ, 0)
	})
	expectNoWC(t, "peer of the flushed qp", b.RecvCQ, 0)
}

// testErrFlushesStalled: an RC send to a QP that does not exist with an
// infinite ACK timeout (timeout 0) waits forever; modify to ERR flushes it,
// and work posted afterwards is flushed too.
func testErrFlushesStalled(t *testing.T, tg Target) {
	f := newFixture(t, tg)
	p := f.pair(pairOpts{typ: verbs.RC, noConnect: true})
	a := p.A
	pa := f.params()
	pa.Timeout = 0
	mustOK(t, "connect", Connect(a.QP, a.PSN, Endpoint{QPN: 0xFFFFFE, PSN: 1, GID: f.gids[0].GID}, pa))
	send := func(id uint64) verbs.SendWR {
		return verbs.SendWR{ID: id, Opcode: verbs.OpSend, Flags: verbs.SendSignaled, SGL: []verbs.SGE{sge(a.MR, 0, 64)}}
	}
	postSend(t, a.QP, send(1), send(2))
	expectNoWC(t, "send with an infinite ACK timeout to a missing qp", a.SendCQ, waitShort)
	toErr(t, a.QP)
	for i, wc := range pollN(t, a.SendCQ, 2) {
		checkWC(t, "flushed send", wc, wcWant{ID: uint64(1 + i), Status: verbs.WCWRFlushErr, QPNum: a.QP.Num()})
	}
	postSend(t, a.QP, send(3))
	checkWC(t, "send posted in ERR", poll1(t, a.SendCQ), wcWant{ID: 3, Status: verbs.WCWRFlushErr, QPNum: a.QP.Num()})
}

// testResetClears: RESET empties the work queues and removes the QP's
// completions from its CQs.
func testResetClears(t *testing.T, tg Target, typ verbs.QPType) {
	f := newFixture(t, tg)
	p := f.pair(pairOpts{typ: typ, cap: verbs.QPCap{MaxSendWR: 8, MaxRecvWR: 8, MaxSendSGE: 1, MaxRecvSGE: 1}})
	a, b := p.A, p.B
	grh := 0
	if typ == verbs.UD {
		grh = 40
	}
	for i := range 4 {
		postRecv(t, b.QP, verbs.RecvWR{ID: uint64(1 + i), SGL: []verbs.SGE{sge(b.MR, 4096*i, 4096)}})
	}
	send := verbs.SendWR{ID: 50, Opcode: verbs.OpSend, Flags: verbs.SendSignaled, SGL: []verbs.SGE{sge(a.MR, 0, 64)},
		AH: a.AH, RemoteQPN: b.QP.Num(), RemoteQKey: f.params().QKey}
	postSend(t, a.QP, send)
	checkWC(t, "send before reset", poll1(t, a.SendCQ), wcWant{ID: 50, QPNum: a.QP.Num(), Opcode: verbs.WCSend, Len: -1})
	// B's receive completion is left in its CQ (on every known device it
	// is there before the requester's completion): resetting B removes it.
	reset := verbs.QPAttr{State: verbs.StateReset}
	modify(t, b.QP, reset, verbs.AttrState)
	modify(t, a.QP, reset, verbs.AttrState)
	wantState(t, "after reset", b.QP, verbs.StateReset)
	run(t, "CompletionsRemoved", func(t *testing.T) {
		skipIf(t, f.tg.Quirks.ResetKeepsCompletions)
		expectNoWC(t, "completions of a qp that was reset", b.RecvCQ, 0)
	})
	// Whatever the device left behind is not the test's concern below.
	drainCQ(b.RecvCQ)
	b.PSN, a.PSN = 0x777, 0x888
	mustOK(t, "reconnect B", Connect(b.QP, b.PSN, a.Endpoint(), f.params()))
	mustOK(t, "reconnect A", Connect(a.QP, a.PSN, b.Endpoint(), f.params()))
	postRecv(t, b.QP, verbs.RecvWR{ID: 10, SGL: []verbs.SGE{sge(b.MR, 0, 4096)}})
	send.ID = 51
	postSend(t, a.QP, send)
	checkWC(t, "send after reset", poll1(t, a.SendCQ), wcWant{ID: 51, QPNum: a.QP.Num(), Opcode: verbs.WCSend, Len: -1})
	checkWC(t, "receive after reset (the receives posted before it are gone)", poll1(t, b.RecvCQ),
		wcWant{ID: 10, QPNum: b.QP.Num(), Opcode: verbs.WCRecv, Len: 64 + grh, GRH: grh > 0, SrcQP: srcQP(typ, a.QP)})
	// The receive queue is empty again: it takes its full capacity.
	qa, err := b.QP.Query()
	mustOK(t, "query", err)
	wrs := make([]verbs.RecvWR, qa.Cap.MaxRecvWR)
	for i := range wrs {
		wrs[i] = verbs.RecvWR{ID: uint64(20 + i), SGL: []verbs.SGE{sge(b.MR, 0, 64)}}
	}
	n, err := b.QP.PostRecv(wrs)
	if err != nil || n != len(wrs) {
		t.Errorf("posting max_recv_wr %d receives after reset: %d queued: %v", len(wrs), n, err)
	}
}

func srcQP(typ verbs.QPType, qp verbs.QP) uint32 {
	if typ == verbs.UD {
		return qp.Num()
	}
	return 0
}
