package emu

import (
	"testing"

	"github.com/pvperf/pvperf/verbs"
)

func quickPair(b *testing.B) (verbs.Context, verbs.QP, verbs.QP, verbs.CQ, verbs.MR) {
	d, _ := NewDevice("emu0", DefaultConfig())
	ctx, err := d.Open()
	if err != nil {
		b.Fatal(err)
	}
	pd, _ := ctx.AllocPD()
	mem, _ := ctx.AllocMemory(1 << 20)
	mr, _ := pd.RegMR(mem.Bytes(), verbs.AccessLocalWrite|verbs.AccessRemoteWrite|verbs.AccessRemoteRead)
	cq, _ := ctx.CreateCQ(verbs.CQInit{Entries: 1024})
	mk := func() verbs.QP {
		q, err := pd.CreateQP(verbs.QPInit{Type: verbs.RC, SendCQ: cq, RecvCQ: cq, Cap: verbs.QPCap{MaxSendWR: 128, MaxRecvWR: 128, MaxSendSGE: 1, MaxRecvSGE: 1}})
		if err != nil {
			b.Fatal(err)
		}
		return q
	}
	a, bq := mk(), mk()
	gid, _ := ctx.QueryGID(1, 0)
	conn := func(x, y verbs.QP) {
		x.Modify(&verbs.QPAttr{State: verbs.StateInit, Port: 1, Access: verbs.AccessRemoteWrite | verbs.AccessRemoteRead | verbs.AccessLocalWrite}, verbs.AttrState|verbs.AttrPKeyIndex|verbs.AttrPort|verbs.AttrAccessFlags)
		x.Modify(&verbs.QPAttr{State: verbs.StateRTR, PathMTU: verbs.MTU1024, DestQPN: y.Num(), RQPSN: 100, MaxDestRdAtomic: 1, MinRNRTimer: 12,
			AH: verbs.AHAttr{IsGlobal: true, Port: 1, GRH: verbs.GRH{DGID: gid.GID, HopLimit: 64}}},
			verbs.AttrState|verbs.AttrAV|verbs.AttrPathMTU|verbs.AttrDestQPN|verbs.AttrRQPSN|verbs.AttrMaxDestRdAtomic|verbs.AttrMinRNRTimer)
		x.Modify(&verbs.QPAttr{State: verbs.StateRTS, SQPSN: 100, Timeout: 14, RetryCnt: 7, RNRRetry: 7, MaxRdAtomic: 1},
			verbs.AttrState|verbs.AttrTimeout|verbs.AttrRetryCnt|verbs.AttrRNRRetry|verbs.AttrSQPSN|verbs.AttrMaxQPRdAtomic)
	}
	conn(a, bq)
	conn(bq, a)
	return ctx, a, bq, cq, mr
}

func BenchmarkQuickWrite(b *testing.B) {
	for _, size := range []int{2, 65536} {
		b.Run(map[int]string{2: "2", 65536: "64K"}[size], func(b *testing.B) {
			_, a, _, cq, mr := quickPair(b)
			sge := []verbs.SGE{{Addr: mr.Addr(), Length: uint32(size), LKey: mr.LKey()}}
			wr := []verbs.SendWR{{Opcode: verbs.OpRDMAWrite, SGL: sge, RemoteAddr: mr.Addr() + 1<<19, RKey: mr.RKey()}}
			wc := make([]verbs.WC, 16)
			cqmod := 100
			if size > 8192 {
				cqmod = 1
			}
			b.SetBytes(int64(size))
			posted, done := 0, 0
			for i := 0; i < b.N; i++ {
				for posted-done >= 128 {
					n, _ := cq.Poll(wc)
					done += n * cqmod
				}
				wr[0].Flags = 0
				if (i+1)%cqmod == 0 || i == b.N-1 {
					wr[0].Flags = verbs.SendSignaled
				}
				if _, err := a.PostSend(wr); err != nil {
					b.Fatal(err)
				}
				posted++
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds()/1e6, "Mmsg/s")
		})
	}
}

func BenchmarkQuickCopy(b *testing.B) {
	src := make([]byte, 65536)
	dst := make([]byte, 65536)
	b.SetBytes(65536)
	for b.Loop() {
		copy(dst, src)
	}
}
