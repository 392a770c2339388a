//go:build linux

package emu

import (
	"testing"

	"github.com/pvperf/pvperf/verbs"
)

func TestSmoke(t *testing.T) {
	d, err := NewDevice("emu0", DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	ctx, err := d.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer ctx.Close()
	pd, err := ctx.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	mem, err := ctx.AllocMemory(1 << 16)
	if err != nil {
		t.Fatal(err)
	}
	mr, err := pd.RegMR(mem.Bytes(), verbs.AccessLocalWrite|verbs.AccessRemoteWrite|verbs.AccessRemoteRead)
	if err != nil {
		t.Fatal(err)
	}
	cq, err := ctx.CreateCQ(verbs.CQInit{Entries: 64})
	if err != nil {
		t.Fatal(err)
	}
	mk := func() verbs.QP {
		q, err := pd.CreateQP(verbs.QPInit{Type: verbs.RC, SendCQ: cq, RecvCQ: cq, Cap: verbs.QPCap{MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 1, MaxRecvSGE: 1}})
		if err != nil {
			t.Fatal(err)
		}
		return q
	}
	a, b := mk(), mk()
	gid, _ := ctx.QueryGID(1, 0)
	conn := func(x, y verbs.QP) {
		if err := x.Modify(&verbs.QPAttr{State: verbs.StateInit, Port: 1, Access: verbs.AccessRemoteWrite | verbs.AccessRemoteRead | verbs.AccessLocalWrite}, verbs.AttrState|verbs.AttrPKeyIndex|verbs.AttrPort|verbs.AttrAccessFlags); err != nil {
			t.Fatal(err)
		}
		if err := x.Modify(&verbs.QPAttr{State: verbs.StateRTR, PathMTU: verbs.MTU1024, DestQPN: y.Num(), RQPSN: 100, MaxDestRdAtomic: 1, MinRNRTimer: 12,
			AH: verbs.AHAttr{IsGlobal: true, Port: 1, GRH: verbs.GRH{DGID: gid.GID, HopLimit: 64}}},
			verbs.AttrState|verbs.AttrAV|verbs.AttrPathMTU|verbs.AttrDestQPN|verbs.AttrRQPSN|verbs.AttrMaxDestRdAtomic|verbs.AttrMinRNRTimer); err != nil {
			t.Fatal(err)
		}
		if err := x.Modify(&verbs.QPAttr{State: verbs.StateRTS, SQPSN: 100, Timeout: 14, RetryCnt: 7, RNRRetry: 7, MaxRdAtomic: 1},
			verbs.AttrState|verbs.AttrTimeout|verbs.AttrRetryCnt|verbs.AttrRNRRetry|verbs.AttrSQPSN|verbs.AttrMaxQPRdAtomic); err != nil {
			t.Fatal(err)
		}
	}
	conn(a, b)
	conn(b, a)
	buf := mr.Bytes()
	copy(buf[0:], "hello")
	sge := []verbs.SGE{{Addr: mr.Addr(), Length: 5, LKey: mr.LKey()}}
	if _, err := a.PostSend([]verbs.SendWR{{ID: 7, Opcode: verbs.OpRDMAWrite, Flags: verbs.SendSignaled, SGL: sge, RemoteAddr: mr.Addr() + 4096, RKey: mr.RKey()}}); err != nil {
		t.Fatal(err)
	}
	wc := make([]verbs.WC, 4)
	n, err := cq.Poll(wc)
	if err != nil || n != 1 || wc[0].Status != verbs.WCSuccess || wc[0].ID != 7 {
		t.Fatalf("poll: %d %v %+v", n, err, wc[0])
	}
	if string(buf[4096:4101]) != "hello" {
		t.Fatalf("got %q", buf[4096:4101])
	}
	// send/recv
	rsge := []verbs.SGE{{Addr: mr.Addr() + 8192, Length: 100, LKey: mr.LKey()}}
	if _, err := b.PostRecv([]verbs.RecvWR{{ID: 9, SGL: rsge}}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.PostSend([]verbs.SendWR{{ID: 8, Opcode: verbs.OpSendImm, Imm: 0xdeadbeef, Flags: verbs.SendSignaled, SGL: sge}}); err != nil {
		t.Fatal(err)
	}
	n, err = cq.Poll(wc)
	if err != nil || n != 2 {
		t.Fatalf("poll: %d completions, %v", n, err)
	}
	for _, c := range wc[:n] {
		switch c.ID {
		case 8:
			if c.Status != verbs.WCSuccess || c.Opcode != verbs.WCSend {
				t.Errorf("send completion %+v", c)
			}
		case 9:
			if c.Status != verbs.WCSuccess || c.Opcode != verbs.WCRecv || c.ByteLen != 5 || c.Imm != 0xdeadbeef || c.Flags&verbs.WCWithImm == 0 {
				t.Errorf("receive completion %+v, want 5 bytes with immediate 0xdeadbeef", c)
			}
		default:
			t.Errorf("completion of work request %d", c.ID)
		}
	}
	if string(buf[8192:8197]) != "hello" {
		t.Fatalf("got %q", buf[8192:8197])
	}
	for _, o := range []interface{ Close() error }{a, b, cq, mr, pd, mem} {
		if err := o.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
