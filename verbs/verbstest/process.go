package verbstest

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pvperf/pvperf/verbs"
)

// The peer protocol: the parent writes one command per line to the peer's
// stdin; the peer answers each with one line on stdout, "ERR ..." when the
// command failed. Numbers are decimal, GIDs and data hex.
//
//	(on start)                        HELLO qpn psn gid rkey addr len lkey
//	CONNECT qpn psn gid timeout retry  OK        (RESET to RTS)
//	FILL off len seed                  OK        (pattern into the memory)
//	DUMP off len                       DATA hex
//	RECV id off len                    OK        (post a receive)
//	SEND id off len imm                OK        (post a signaled SEND_IMM)
//	POLL                               WC id status opcode len imm flags qpn
//	STATE                              STATE n
//
// The peer exits when its stdin is closed.

const peerRoleRC = "rc"

func runPeer(role string, tg Target) int {
	switch role {
	case peerRoleRC:
		if err := rcPeer(tg, os.Stdin, os.Stdout); err != nil {
			fmt.Fprintf(os.Stderr, "verbstest peer: %v\n", err)
			return 1
		}
		return 0
	}
	fmt.Fprintf(os.Stderr, "verbstest: unknown peer role %q\n", role)
	return 2
}

func rcPeer(tg Target, in io.Reader, out io.Writer) (err error) {
	dev, err := tg.Device()
	if err != nil {
		return err
	}
	ctx, err := dev.Open()
	if err != nil {
		return err
	}
	var objs []closer
	defer func() {
		for i := len(objs) - 1; i >= 0; i-- {
			if cerr := objs[i].Close(); cerr != nil && err == nil {
				err = cerr
			}
		}
	}()
	objs = append(objs, ctx)
	pd, err := ctx.AllocPD()
	if err != nil {
		return err
	}
	objs = append(objs, pd)
	mem, err := ctx.AllocMemory(64 << 10)
	if err != nil {
		return err
	}
	objs = append(objs, mem)
	mr, err := pd.RegMR(mem.Bytes(), verbs.AccessLocalWrite|verbs.AccessRemoteWrite|verbs.AccessRemoteRead)
	if err != nil {
		return err
	}
	objs = append(objs, mr)
	cq, err := ctx.CreateCQ(verbs.CQInit{Entries: 64})
	if err != nil {
		return err
	}
	objs = append(objs, cq)
	qp, err := pd.CreateQP(verbs.QPInit{Type: verbs.RC, SendCQ: cq, RecvCQ: cq, Cap: verbs.QPCap{MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 1, MaxRecvSGE: 1}})
	if err != nil {
		return err
	}
	objs = append(objs, qp)
	gid, err := ctx.QueryGID(1, 0)
	if err != nil {
		return err
	}
	const psn = 0x4242
	buf := mem.Bytes()
	w := bufio.NewWriter(out)
	reply := func(format string, args ...any) {
		fmt.Fprintf(w, format+"\n", args...)
		w.Flush()
	}
	reply("HELLO %d %d %s %d %d %d %d", qp.Num(), psn, hex.EncodeToString(gid.GID[:]), mr.RKey(), mr.Addr(), len(buf), mr.LKey())
	sc := bufio.NewScanner(in)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		num := func(i int) uint64 {
			if i >= len(f) {
				return 0
			}
			v, _ := strconv.ParseUint(f[i], 10, 64)
			return v
		}
		span := func(off, n uint64) ([]byte, bool) {
			if off > uint64(len(buf)) || n > uint64(len(buf))-off {
				reply("ERR span %d+%d outside the memory", off, n)
				return nil, false
			}
			return buf[off : off+n], true
		}
		switch f[0] {
		case "CONNECT":
			var g verbs.GID
			if b, err := hex.DecodeString(f[3]); err != nil || len(b) != 16 {
				reply("ERR bad gid %q", f[3])
				continue
			} else {
				copy(g[:], b)
			}
			p := DefaultConnParams()
			p.Timeout, p.RetryCnt = uint8(num(4)), uint8(num(5))
			if err := Connect(qp, psn, Endpoint{QPN: uint32(num(1)), PSN: uint32(num(2)), GID: g}, p); err != nil {
				reply("ERR %v", err)
				continue
			}
			reply("OK")
		case "FILL":
			if b, ok := span(num(1), num(2)); ok {
				fill(b, byte(num(3)))
				reply("OK")
			}
		case "DUMP":
			if b, ok := span(num(1), num(2)); ok {
				reply("DATA %s", hex.EncodeToString(b))
			}
		case "RECV":
			if _, ok := span(num(2), num(3)); !ok {
				continue
			}
			_, err := qp.PostRecv([]verbs.RecvWR{{ID: num(1), SGL: []verbs.SGE{sge(mr, int(num(2)), int(num(3)))}}})
			if err != nil {
				reply("ERR %v", err)
				continue
			}
			reply("OK")
		case "SEND":
			if _, ok := span(num(2), num(3)); !ok {
				continue
			}
			_, err := qp.PostSend([]verbs.SendWR{{ID: num(1), Opcode: verbs.OpSendImm, Flags: verbs.SendSignaled, Imm: uint32(num(4)),
				SGL: []verbs.SGE{sge(mr, int(num(2)), int(num(3)))}}})
			if err != nil {
				reply("ERR %v", err)
				continue
			}
			reply("OK")
		case "POLL":
			wc := make([]verbs.WC, 1)
			deadline := time.Now().Add(waitLong)
			for {
				n, err := cq.Poll(wc)
				if err != nil {
					reply("ERR %v", err)
					break
				}
				if n == 1 {
					c := wc[0]
					reply("WC %d %d %d %d %d %d %d", c.ID, c.Status, c.Opcode, c.ByteLen, c.Imm, c.Flags, c.QPNum)
					break
				}
				if time.Now().After(deadline) {
					reply("ERR no completion within %v", waitLong)
					break
				}
				time.Sleep(20 * time.Microsecond)
			}
		case "STATE":
			a, err := qp.Query()
			if err != nil {
				reply("ERR %v", err)
				continue
			}
			reply("STATE %d", a.State)
		default:
			reply("ERR unknown command %q", f[0])
		}
	}
	return sc.Err()
}

// peerProc is the parent's side of a peer process.
type peerProc struct {
	t      *testing.T
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	lines  chan string
	stderr *lockedBuffer
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func startPeer(t *testing.T, tg Target, role string) *peerProc {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), PeerEnv+"="+role+":"+tg.Name)
	p := &peerProc{t: t, cmd: cmd, lines: make(chan string, 16), stderr: &lockedBuffer{}}
	cmd.Stderr = p.stderr
	var err error
	if p.stdin, err = cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start peer %s: %v", os.Args[0], err)
	}
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			p.lines <- sc.Text()
		}
		close(p.lines)
	}()
	t.Cleanup(func() {
		p.stdin.Close()
		done := make(chan struct{})
		go func() {
			for range p.lines {
			}
			close(done)
		}()
		select {
		case <-done:
		case <-time.After(waitLong):
			_ = p.cmd.Process.Kill()
		}
		if err := p.cmd.Wait(); err != nil && p.cmd.ProcessState != nil && !p.killed() {
			t.Errorf("peer process: %v; its stderr:\n%s", err, p.stderr.String())
		}
	})
	return p
}

func (p *peerProc) killed() bool {
	ps := p.cmd.ProcessState
	return ps != nil && !ps.Exited() // ended by a signal
}

// do sends a command and returns the fields of the answer, which must
// start with want.
func (p *peerProc) do(want, format string, args ...any) []string {
	p.t.Helper()
	if format != "" {
		if _, err := fmt.Fprintf(p.stdin, format+"\n", args...); err != nil {
			p.t.Fatalf("peer: write %q: %v; its stderr:\n%s", fmt.Sprintf(format, args...), err, p.stderr.String())
		}
	}
	select {
	case line, ok := <-p.lines:
		if !ok {
			p.t.Fatalf("peer exited while answering %q (did the test package's TestMain call verbstest.Main?); its stderr:\n%s",
				fmt.Sprintf(format, args...), p.stderr.String())
		}
		f := strings.Fields(line)
		if len(f) == 0 || f[0] != want {
			p.t.Fatalf("peer answered %q to %q, want %s ...", line, fmt.Sprintf(format, args...), want)
		}
		return f[1:]
	case <-time.After(2 * waitLong):
		p.t.Fatalf("peer did not answer %q within %v; its stderr:\n%s", fmt.Sprintf(format, args...), 2*waitLong, p.stderr.String())
	}
	return nil
}

func atou(t *testing.T, s string) uint64 {
	t.Helper()
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		t.Fatalf("peer: bad number %q", s)
	}
	return v
}

// testTwoProcesses connects an RC QP of this process to one of a peer
// process that opened the same device, moves data both ways, kills the
// peer and checks that the next request fails with RETRY_EXC_ERR.
func testTwoProcesses(t *testing.T, tg Target) {
	f := newFixture(t, tg)
	peer := startPeer(t, tg, peerRoleRC)
	hello := peer.do("HELLO", "")
	if len(hello) != 7 {
		t.Fatalf("peer said HELLO %v", hello)
	}
	pqpn, ppsn := uint32(atou(t, hello[0])), uint32(atou(t, hello[1]))
	var pgid verbs.GID
	if b, err := hex.DecodeString(hello[2]); err != nil || len(b) != 16 {
		t.Fatalf("peer gid %q", hello[2])
	} else {
		copy(pgid[:], b)
	}
	prkey, paddr, plen, plkey := uint32(atou(t, hello[3])), atou(t, hello[4]), atou(t, hello[5]), uint32(atou(t, hello[6]))
	if plen < 48<<10 {
		t.Fatalf("peer memory of %d bytes, want 64 KiB", plen)
	}

	// Short enough that a killed peer fails a request well within the
	// test's bound, long enough that a peer process slowed by a loaded
	// machine (go test runs packages in parallel) answers in time.
	const timeout, retries = 15, 3
	pa := f.params()
	pa.Timeout, pa.RetryCnt = timeout, retries
	p := f.pair(pairOpts{typ: verbs.RC, noConnect: true, pa: pa, psnA: 0x1234, psnB: 1})
	a := p.A
	// Identifiers are unique across processes.
	for _, qp := range []verbs.QP{p.A.QP, p.B.QP} {
		if qp.Num() == pqpn {
			t.Errorf("this process's qp and the peer's have the same number %#x", pqpn)
		}
	}
	for _, mr := range []verbs.MR{p.A.MR, p.B.MR} {
		if mr.RKey() == prkey || mr.LKey() == plkey {
			t.Errorf("this process's mr (lkey %#x, rkey %#x) and the peer's (lkey %#x, rkey %#x) share a key", mr.LKey(), mr.RKey(), plkey, prkey)
		}
	}
	mustOK(t, "connect to the peer", Connect(a.QP, a.PSN, Endpoint{QPN: pqpn, PSN: ppsn, GID: pgid}, pa))
	peer.do("OK", "CONNECT %d %d %s %d %d", a.QP.Num(), a.PSN, hex.EncodeToString(a.GID.GID[:]), 14, 7)

	abuf := a.Mem.Bytes()
	dump := func(off, n int) []byte {
		t.Helper()
		d := peer.do("DATA", "DUMP %d %d", off, n)
		if len(d) != 1 {
			t.Fatalf("peer DATA %v", d)
		}
		b, err := hex.DecodeString(d[0])
		if err != nil {
			t.Fatalf("peer data: %v", err)
		}
		return b
	}
	pollPeer := func(want wcWant) {
		t.Helper()
		r := peer.do("WC", "POLL")
		if len(r) != 7 {
			t.Fatalf("peer WC %v", r)
		}
		checkWC(t, "peer's completion", verbs.WC{ID: atou(t, r[0]), Status: verbs.WCStatus(atou(t, r[1])), Opcode: verbs.WCOpcode(atou(t, r[2])),
			ByteLen: uint32(atou(t, r[3])), Imm: uint32(atou(t, r[4])), Flags: verbs.WCFlags(atou(t, r[5])), QPNum: uint32(atou(t, r[6]))}, want)
	}

	// RDMA write into the peer's memory.
	const n = 5000
	fill(abuf[:n], 11)
	w := p.sendWR(1, verbs.OpRDMAWrite, verbs.SendSignaled, sge(a.MR, 0, n))
	w.RemoteAddr, w.RKey = paddr+1024, prkey
	postSend(t, a.QP, w)
	checkWC(t, "write to the peer", poll1(t, a.SendCQ), wcWant{ID: 1, QPNum: a.QP.Num(), Opcode: verbs.WCRDMAWrite, Len: -1})
	sameBytes(t, "peer's memory after the write", dump(1024, n), abuf[:n])

	// RDMA read of the peer's memory.
	peer.do("OK", "FILL %d %d %d", 20000, n, 12)
	r := p.sendWR(2, verbs.OpRDMARead, verbs.SendSignaled, sge(a.MR, 8192, n))
	r.RemoteAddr, r.RKey = paddr+20000, prkey
	postSend(t, a.QP, r)
	checkWC(t, "read from the peer", poll1(t, a.SendCQ), wcWant{ID: 2, QPNum: a.QP.Num(), Opcode: verbs.WCRDMARead, Len: n})
	sameBytes(t, "peer's memory read", abuf[8192:8192+n], pattern(n, 12))

	// Send to the peer.
	peer.do("OK", "RECV %d %d %d", 77, 30000, 4096)
	fill(abuf[16384:16384+300], 13)
	s := p.sendWR(3, verbs.OpSendImm, verbs.SendSignaled, sge(a.MR, 16384, 300))
	s.Imm = 0xA1B2C3D4
	postSend(t, a.QP, s)
	checkWC(t, "send to the peer", poll1(t, a.SendCQ), wcWant{ID: 3, QPNum: a.QP.Num(), Opcode: verbs.WCSend, Len: -1})
	pollPeer(wcWant{ID: 77, QPNum: pqpn, Opcode: verbs.WCRecv, Len: 300, WithImm: true, Imm: 0xA1B2C3D4})
	sameBytes(t, "message received by the peer", dump(30000, 300), abuf[16384:16384+300])

	// Send from the peer.
	postRecv(t, a.QP, verbs.RecvWR{ID: 88, SGL: []verbs.SGE{sge(a.MR, 32768, 4096)}})
	peer.do("OK", "FILL %d %d %d", 40000, 700, 14)
	peer.do("OK", "SEND %d %d %d %d", 99, 40000, 700, 0x55667788)
	pollPeer(wcWant{ID: 99, QPNum: pqpn, Opcode: verbs.WCSend, Len: -1})
	checkWC(t, "message from the peer", poll1(t, a.RecvCQ), wcWant{ID: 88, QPNum: a.QP.Num(), Opcode: verbs.WCRecv, Len: 700, WithImm: true, Imm: 0x55667788})
	sameBytes(t, "message from the peer", abuf[32768:32768+700], pattern(700, 14))
	if st := peer.do("STATE", "STATE"); len(st) != 1 || st[0] != strconv.Itoa(int(verbs.StateRTS)) {
		t.Errorf("peer's qp state %v, want RTS", st)
	}

	// Kill the peer (with a receive posted, so a request that still
	// reached its memory would succeed): the next request is lost.
	peer.do("OK", "RECV %d %d %d", 78, 30000, 4096)
	if err := peer.cmd.Process.Kill(); err != nil {
		t.Fatalf("kill peer: %v", err)
	}
	_ = peer.cmd.Wait() // killed: the error says so
	start := time.Now()
	postSend(t, a.QP, p.sendWR(4, verbs.OpSend, verbs.SendSignaled, sge(a.MR, 16384, 64)))
	wc := poll1(t, a.SendCQ)
	elapsed := time.Since(start)
	checkWC(t, "send to a killed peer", wc, wcWant{ID: 4, Status: verbs.WCRetryExcErr, QPNum: a.QP.Num()})
	bound := 2 * time.Second
	if elapsed > bound {
		t.Errorf("RETRY_EXC_ERR after %v, want it within %v (timeout %d, retry_cnt %d: nominally %v)", elapsed, bound, timeout, retries, (retries+1)*ackTimeout(timeout))
	}
}
