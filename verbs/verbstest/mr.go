package verbstest

import (
	"testing"

	"github.com/pvperf/pvperf/verbs"
)

func testMemoryRegion(t *testing.T, tg Target) {
	run(t, "Keys", func(t *testing.T) {
		f := newFixture(t, tg)
		mem := f.alloc(4 * 4096)
		b := mem.Bytes()
		acc := verbs.AccessLocalWrite | verbs.AccessRemoteWrite | verbs.AccessRemoteRead
		whole := regMR(t, f.pd, b, acc)
		if whole.Addr() != addrOf(b) {
			t.Errorf("Addr() = %#x, want the address of the memory %#x", whole.Addr(), addrOf(b))
		}
		if got := whole.Bytes(); len(got) != len(b) || addrOf(got) != addrOf(b) {
			t.Errorf("Bytes() is %d bytes at %#x, want %d at %#x", len(got), addrOf(got), len(b), addrOf(b))
		}
		if whole.Access() != acc {
			t.Errorf("Access() = %v, want %v", whole.Access(), acc)
		}
		// A part of the memory, not page-aligned.
		part := regMR(t, f.pd, b[4096+10:3*4096+7], verbs.AccessRemoteRead)
		if part.Addr() != addrOf(b)+4096+10 || len(part.Bytes()) != 2*4096-3 {
			t.Errorf("partial mr: Addr() %#x, %d bytes; want %#x, %d", part.Addr(), len(part.Bytes()), addrOf(b)+4096+10, 2*4096-3)
		}
		// The same bytes again, with other rights.
		again := regMR(t, f.pd, b, verbs.AccessLocalWrite)
		none := regMR(t, f.pd, b[:100], 0)
		keys := map[uint32]string{}
		for _, m := range []struct {
			name string
			mr   verbs.MR
		}{{"whole", whole}, {"part", part}, {"again", again}, {"none", none}} {
			if prev, dup := keys[m.mr.LKey()]; dup {
				t.Errorf("mr %s has the lkey %#x of mr %s", m.name, m.mr.LKey(), prev)
			}
			keys[m.mr.LKey()] = m.name
			// An rkey is meaningful only with remote access (rdma_rxe
			// gives 0 to every other memory region).
			remote := m.mr.Access()&(verbs.AccessRemoteWrite|verbs.AccessRemoteRead|verbs.AccessRemoteAtomic) != 0
			if remote && m.mr.RKey() != m.mr.LKey() {
				if prev, dup := keys[m.mr.RKey()]; dup {
					t.Errorf("mr %s has the rkey %#x of mr %s", m.name, m.mr.RKey(), prev)
				}
				keys[m.mr.RKey()] = m.name
			}
		}
	})
	run(t, "ForeignMemory", func(t *testing.T) {
		f := newFixture(t, tg)
		heap := make([]byte, 8192)
		if mr, err := f.pd.RegMR(heap, verbs.AccessLocalWrite); err == nil {
			mr.Close()
			t.Errorf("reg mr of Go heap memory succeeded, want an error")
		}
		mem := f.alloc(4096)
		if mr, err := f.pd.RegMR(mem.Bytes()[:0], verbs.AccessLocalWrite); err == nil {
			mr.Close()
			t.Errorf("reg mr of 0 bytes succeeded, want an error")
		}
	})
	run(t, "AccessRules", func(t *testing.T) {
		f := newFixture(t, tg)
		b := f.alloc(4096).Bytes()
		for _, acc := range []verbs.Access{verbs.AccessRemoteWrite, verbs.AccessRemoteAtomic, verbs.AccessRemoteWrite | verbs.AccessRemoteRead} {
			mr, err := f.pd.RegMR(b, acc)
			if wantErr(t, "reg mr with "+acc.String()+" without LOCAL_WRITE", err, errEINVAL) {
				continue
			}
			if mr != nil {
				mr.Close()
			}
		}
		for _, acc := range []verbs.Access{0, verbs.AccessLocalWrite, verbs.AccessRemoteRead,
			verbs.AccessLocalWrite | verbs.AccessRemoteWrite, verbs.AccessLocalWrite | verbs.AccessRemoteAtomic} {
			mr, err := f.pd.RegMR(b, acc)
			if wantOK(t, "reg mr with "+acc.String(), err) {
				if mr.Access() != acc {
					t.Errorf("mr registered with %v has Access() %v", acc, mr.Access())
				}
				wantOK(t, "close mr", mr.Close())
			}
		}
	})
	// The device checks the bytes a receive writes, not its whole SGE (as
	// rdma_rxe's copy_data does): a receive longer than the message may
	// reach past the end of its memory region. perftest posts such
	// receives with --use_srq, whose receive length is rounded up to the
	// MTU.
	run(t, "ReceivePastRegionEnd", func(t *testing.T) {
		for _, typ := range []verbs.QPType{verbs.RC, verbs.UD} {
			run(t, typ.String(), func(t *testing.T) {
				f := newFixture(t, tg)
				p := f.pair(pairOpts{typ: typ})
				a, b := p.A, p.B
				grh := grhLen(typ)
				small := regMR(t, b.PD, b.Mem.Bytes()[:8192], verbs.AccessLocalWrite)
				msg := pattern(200, 3)
				copy(a.Mem.Bytes(), msg)
				// 300 bytes before the region's end, 2048 long: the
				// message and its GRH fit, the SGE does not.
				at := 8192 - 300
				postRecv(t, b.QP, verbs.RecvWR{ID: 1, SGL: []verbs.SGE{sge(small, at, 2048)}})
				postSend(t, a.QP, p.sendWR(2, verbs.OpSend, verbs.SendSignaled, sge(a.MR, 0, len(msg))))
				checkWC(t, "send", poll1(t, a.SendCQ), wcWant{ID: 2, QPNum: a.QP.Num(), Opcode: verbs.WCSend, Len: -1})
				checkWC(t, "receive reaching past its region", poll1(t, b.RecvCQ), wcWant{ID: 1, QPNum: b.QP.Num(), Opcode: verbs.WCRecv, Len: grh + len(msg), GRH: grh > 0, SrcQP: srcQP(typ, a.QP)})
				sameBytes(t, "received message", b.Mem.Bytes()[at+grh:at+grh+len(msg)], msg)
			})
		}
	})
}
