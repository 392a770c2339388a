//go:build linux

package rdmacm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"testing"
	"time"

	"github.com/pvperf/pvperf/verbs"
	"github.com/pvperf/pvperf/verbs/uverbs"
)

// The kernel tests run where RDMACM_TEST_ADDR names an IP address of a
// network device that carries an RDMA device (the guest of
// scripts/guest-test.sh: 10.77.0.1, rxe0's veth): both ends of each
// connection are in this process, the server listening on that address.

// kernelAddr returns the address of the kernel tests, or skips.
func kernelAddr(t *testing.T) netip.Addr {
	t.Helper()
	s := os.Getenv("RDMACM_TEST_ADDR")
	if s == "" {
		t.Skip("RDMACM_TEST_ADDR is not set (an IP address of a network device with an RDMA device)")
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		t.Fatalf("RDMACM_TEST_ADDR: %v", err)
	}
	return a
}

// openByGUID opens the kernel RDMA device whose node GUID is guid: the
// device an id resolved to. It is closed when the test ends.
func openByGUID(t *testing.T, guid uint64) (verbs.Context, error) {
	devs, err := uverbs.Devices()
	if err != nil {
		return nil, err
	}
	for _, d := range devs {
		ctx, err := d.Open()
		if err != nil {
			continue
		}
		if a, err := ctx.QueryDevice(); err == nil && a.NodeGUID == guid {
			t.Cleanup(func() { ctx.Close() })
			return ctx, nil
		}
		ctx.Close()
	}
	return nil, fmt.Errorf("no device with node GUID %016x", guid)
}

// endpoint is one side's verbs resources for a connection.
type endpoint struct {
	ctx verbs.Context
	pd  verbs.PD
	cq  verbs.CQ
	qp  verbs.QP
	mr  verbs.MR
	buf []byte
}

// newEndpoint makes an RC QP and a registered buffer on the device with
// node GUID guid, closed when the test ends.
func newEndpoint(t *testing.T, guid uint64) (*endpoint, error) {
	return newTypedEndpoint(t, guid, verbs.RC)
}

// newTypedEndpoint is newEndpoint with a QP of type typ.
func newTypedEndpoint(t *testing.T, guid uint64, typ verbs.QPType) (*endpoint, error) {
	ctx, err := openByGUID(t, guid)
	if err != nil {
		return nil, err
	}
	e := &endpoint{ctx: ctx}
	if e.pd, err = ctx.AllocPD(); err != nil {
		return nil, err
	}
	t.Cleanup(func() { e.pd.Close() })
	if e.cq, err = ctx.CreateCQ(verbs.CQInit{Entries: 16}); err != nil {
		return nil, err
	}
	t.Cleanup(func() { e.cq.Close() })
	if e.qp, err = e.pd.CreateQP(verbs.QPInit{Type: typ, SendCQ: e.cq, RecvCQ: e.cq,
		Cap: verbs.QPCap{MaxSendWR: 4, MaxRecvWR: 4, MaxSendSGE: 1, MaxRecvSGE: 1}}); err != nil {
		return nil, err
	}
	t.Cleanup(func() { e.qp.Close() })
	mem, err := ctx.AllocMemory(4096)
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() { mem.Close() })
	e.buf = mem.Bytes()
	if e.mr, err = e.pd.RegMR(e.buf, verbs.AccessLocalWrite); err != nil {
		return nil, err
	}
	t.Cleanup(func() { e.mr.Close() })
	return e, nil
}

// move applies the kernel's attributes for each state to the QP.
func move(id *ID, qp verbs.QP, states ...verbs.QPState) error {
	for _, s := range states {
		a, m, err := id.InitQPAttr(s)
		if err != nil {
			return err
		}
		if err := qp.Modify(&a, m); err != nil {
			return fmt.Errorf("modify to %v: %w", s, err)
		}
	}
	return nil
}

func (e *endpoint) poll(t *testing.T) verbs.WC {
	t.Helper()
	wc := make([]verbs.WC, 1)
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		n, err := e.cq.Poll(wc)
		if err != nil {
			t.Fatal(err)
		}
		if n == 1 {
			if err := wc[0].Err(); err != nil {
				t.Fatal(err)
			}
			return wc[0]
		}
	}
	t.Fatal("no completion in 10 s")
	return verbs.WC{}
}

// resolve is the active side up to the connect: an id on c resolved to
// addr (address and route), and an endpoint on its device whose QP is in
// INIT.
func resolve(ctx context.Context, t *testing.T, c *Channel, addr netip.AddrPort) (*ID, *endpoint) {
	t.Helper()
	id, err := c.CreateID(PSTCP)
	if err != nil {
		t.Fatal(err)
	}
	if err := id.ResolveAddr(netip.AddrPort{}, addr, 2*time.Second); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Expect(ctx, PSTCP, EventAddrResolved); err != nil {
		t.Fatal(err)
	}
	info, err := id.QueryAddr()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("resolved %v to device %016x port %d (index %d), source %v", addr, info.NodeGUID, info.Port, info.DevIndex, info.Src)
	if info.Dst != addr || info.Port == 0 {
		t.Errorf("query: %+v", info)
	}
	if err := id.ResolveRoute(2 * time.Second); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Expect(ctx, PSTCP, EventRouteResolved); err != nil {
		t.Fatal(err)
	}
	e, err := newEndpoint(t, info.NodeGUID)
	if err != nil {
		t.Fatal(err)
	}
	if err := move(id, e.qp, verbs.StateInit); err != nil {
		t.Fatal(err)
	}
	return id, e
}

// channel opens an event channel, closed when the test ends.
func channel(t *testing.T) *Channel {
	t.Helper()
	c, err := Open()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// listen makes an id of port space ps on a channel of its own listen on
// addr.
func listen(t *testing.T, ps uint16, addr netip.AddrPort, backlog int) (*Channel, *ID) {
	t.Helper()
	c := channel(t)
	lis, err := c.CreateID(ps)
	if err != nil {
		t.Fatal(err)
	}
	if err := lis.Bind(addr); err != nil {
		t.Fatal(err)
	}
	if err := lis.Listen(backlog); err != nil {
		t.Fatal(err)
	}
	return c, lis
}

// TestKernelConnect connects two RC QPs through the kernel's connection
// manager as perftest's -R does (QPs of the program's own, moved with the
// kernel's attributes), sends a message over the connection, and
// disconnects.
func TestKernelConnect(t *testing.T) {
	addr := netip.AddrPortFrom(kernelAddr(t), 18600)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	sc, lis := listen(t, PSTCP, addr, 4)

	// The server side, in a goroutine: accept one connection, receive one
	// message, wait for the disconnection.
	type result struct {
		msg string
		err error
	}
	done := make(chan result, 1)
	go func() {
		msg, err := serveOne(ctx, t, sc)
		done <- result{msg, err}
	}()

	cc := channel(t)
	id, e := resolve(ctx, t, cc, addr)
	if err := id.Connect(ConnParam{QPNum: e.qp.Num(), PrivateData: []byte("pvperf"), ResponderResources: 1,
		InitiatorDepth: 1, RetryCount: 7, RNRRetryCount: 7}); err != nil {
		t.Fatal(err)
	}
	if _, err := cc.Expect(ctx, PSTCP, EventConnectResp); err != nil {
		t.Fatal(err)
	}
	if err := move(id, e.qp, verbs.StateRTR, verbs.StateRTS); err != nil {
		t.Fatal(err)
	}
	// The RTU: the connection is established on this side (the kernel
	// sends no ESTABLISHED to an active side whose QP it does not own;
	// librdmacm turns CONNECT_RESPONSE into ESTABLISHED itself).
	if err := id.Establish(); err != nil {
		t.Fatal(err)
	}
	copy(e.buf, "hello over rdma_cm")
	if _, err := e.qp.PostSend([]verbs.SendWR{{Opcode: verbs.OpSend, Flags: verbs.SendSignaled,
		SGL: []verbs.SGE{{Addr: e.mr.Addr(), Length: 18, LKey: e.mr.LKey()}}}}); err != nil {
		t.Fatal(err)
	}
	e.poll(t)
	if err := id.Disconnect(); err != nil {
		t.Fatal(err)
	}
	if _, err := cc.Expect(ctx, PSTCP, EventDisconnected); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil {
		t.Fatal(r.err)
	}
	if r.msg != "hello over rdma_cm" {
		t.Errorf("server received %q", r.msg)
	}
	if n, err := id.Destroy(); err != nil {
		t.Errorf("destroy: %v (%d events)", err, n)
	}
	if _, err := lis.Destroy(); err != nil {
		t.Errorf("destroy listener: %v", err)
	}
}

// serveOne is the server of TestKernelConnect: it accepts one connection
// and returns the message received on it once the client disconnects.
func serveOne(ctx context.Context, t *testing.T, c *Channel) (string, error) {
	ev, err := c.Expect(ctx, PSTCP, EventConnectRequest)
	if err != nil {
		return "", err
	}
	if !bytes.HasPrefix(ev.Conn.PrivateData, []byte("pvperf")) || ev.Conn.QPNum == 0 {
		return "", fmt.Errorf("connect request %+v", ev.Conn)
	}
	id := c.NewID(&ev, PSTCP)
	info, err := id.QueryAddr()
	if err != nil {
		return "", err
	}
	e, err := newEndpoint(t, info.NodeGUID)
	if err != nil {
		return "", err
	}
	if err := move(id, e.qp, verbs.StateInit); err != nil {
		return "", err
	}
	if _, err := e.qp.PostRecv([]verbs.RecvWR{{SGL: []verbs.SGE{{Addr: e.mr.Addr(), Length: 64, LKey: e.mr.LKey()}}}}); err != nil {
		return "", err
	}
	if err := move(id, e.qp, verbs.StateRTR, verbs.StateRTS); err != nil {
		return "", err
	}
	if err := id.Accept(ConnParam{QPNum: e.qp.Num(), ResponderResources: 1, InitiatorDepth: 1, RNRRetryCount: 7}); err != nil {
		return "", err
	}
	if _, err := c.Expect(ctx, PSTCP, EventEstablished); err != nil {
		return "", err
	}
	wc := make([]verbs.WC, 1)
	var n int
	for n == 0 && ctx.Err() == nil {
		if n, err = e.cq.Poll(wc); err != nil {
			return "", err
		}
	}
	if err := errors.Join(ctx.Err(), wc[0].Err()); err != nil {
		return "", err
	}
	msg := string(e.buf[:wc[0].ByteLen])
	if _, err := c.Expect(ctx, PSTCP, EventDisconnected); err != nil {
		return msg, err
	}
	_, err = id.Destroy()
	return msg, err
}

// TestKernelNoListener: connecting to a port nobody listens on is
// rejected by the peer's connection manager, at once.
func TestKernelNoListener(t *testing.T) {
	addr := netip.AddrPortFrom(kernelAddr(t), 18601)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := channel(t)
	id, e := resolve(ctx, t, c, addr)
	defer func() { _, _ = id.Destroy() }()
	if err := id.Connect(ConnParam{QPNum: e.qp.Num(), RetryCount: 7, RNRRetryCount: 7}); err != nil {
		t.Fatal(err)
	}
	_, err := c.Expect(ctx, PSTCP, EventEstablished)
	t.Logf("connect to %v: %v", addr, err)
	if !errors.Is(err, ErrRejected) {
		t.Errorf("got %v, want a rejection", err)
	}
}

// readyUD moves a UD QP to RTS as librdmacm does: INIT with the kernel's
// attributes (port, P_Key index and the id's Q_Key, which it returns),
// then RTR and RTS with the state alone (and the send PSN). The Q_Key is
// the kernel's default for the UDP port space (RDMA_UDP_QKEY): a service
// reply with another one fails (cma_set_qkey).
func readyUD(id *ID, qp verbs.QP) (uint32, error) {
	a, m, err := id.InitQPAttr(verbs.StateInit)
	if err != nil {
		return 0, err
	}
	if err := qp.Modify(&a, m); err != nil {
		return 0, fmt.Errorf("modify to INIT: %w", err)
	}
	if err := qp.Modify(&verbs.QPAttr{State: verbs.StateRTR}, verbs.AttrState); err != nil {
		return 0, fmt.Errorf("modify to RTR: %w", err)
	}
	if err := qp.Modify(&verbs.QPAttr{State: verbs.StateRTS}, verbs.AttrState|verbs.AttrSQPSN); err != nil {
		return 0, fmt.Errorf("modify to RTS: %w", err)
	}
	return a.QKey, nil
}

// TestKernelUD resolves a datagram service through the connection
// manager (SIDR, port space UDP, as perftest's -R -c UD): the client
// learns the server's QP number, Q_Key and address, and sends it a
// datagram.
func TestKernelUD(t *testing.T) {
	addr := netip.AddrPortFrom(kernelAddr(t), 18602)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sc, lis := listen(t, PSUDP, addr, 1)
	defer func() { _, _ = lis.Destroy() }()
	type result struct {
		msg string
		err error
	}
	done := make(chan result, 1)
	go func() {
		msg, err := serveUD(ctx, t, sc)
		done <- result{msg, err}
	}()

	cc := channel(t)
	id, err := cc.CreateID(PSUDP)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _, _ = id.Destroy() }()
	if err := id.ResolveAddr(netip.AddrPort{}, addr, 2*time.Second); err != nil {
		t.Fatal(err)
	}
	if _, err := cc.Expect(ctx, PSUDP, EventAddrResolved); err != nil {
		t.Fatal(err)
	}
	if err := id.ResolveRoute(2 * time.Second); err != nil {
		t.Fatal(err)
	}
	if _, err := cc.Expect(ctx, PSUDP, EventRouteResolved); err != nil {
		t.Fatal(err)
	}
	info, err := id.QueryAddr()
	if err != nil {
		t.Fatal(err)
	}
	e, err := newTypedEndpoint(t, info.NodeGUID, verbs.UD)
	if err != nil {
		t.Fatal(err)
	}
	qkey, err := readyUD(id, e.qp)
	if err != nil {
		t.Fatal(err)
	}
	if err := id.Connect(ConnParam{QPNum: e.qp.Num(), QKey: qkey, PrivateData: []byte("pvperf")}); err != nil {
		t.Fatal(err)
	}
	ev, err := cc.Expect(ctx, PSUDP, EventEstablished)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("server: QP %#x, Q_Key %#x, address %+v", ev.UD.QPNum, ev.UD.QKey, ev.UD.AH)
	if ev.UD.QPNum == 0 || ev.UD.QKey != qkey || !ev.UD.AH.IsGlobal {
		t.Fatalf("UD parameters %+v", ev.UD)
	}
	ah, err := e.pd.CreateAH(ev.UD.AH)
	if err != nil {
		t.Fatal(err)
	}
	defer ah.Close()
	copy(e.buf, "a datagram")
	if _, err := e.qp.PostSend([]verbs.SendWR{{Opcode: verbs.OpSend, Flags: verbs.SendSignaled,
		SGL: []verbs.SGE{{Addr: e.mr.Addr(), Length: 10, LKey: e.mr.LKey()}},
		AH:  ah, RemoteQPN: ev.UD.QPNum, RemoteQKey: ev.UD.QKey}}); err != nil {
		t.Fatal(err)
	}
	e.poll(t)
	r := <-done
	if r.err != nil {
		t.Fatal(r.err)
	}
	if r.msg != "a datagram" {
		t.Errorf("server received %q", r.msg)
	}
}

// serveUD is the server of TestKernelUD: it answers one service request
// and returns the datagram it then receives (after the 40-byte GRH).
func serveUD(ctx context.Context, t *testing.T, c *Channel) (string, error) {
	ev, err := c.Expect(ctx, PSUDP, EventConnectRequest)
	if err != nil {
		return "", err
	}
	if !bytes.HasPrefix(ev.UD.PrivateData, []byte("pvperf")) {
		return "", fmt.Errorf("service request %+v", ev.UD)
	}
	id := c.NewID(&ev, PSUDP)
	defer func() { _, _ = id.Destroy() }()
	info, err := id.QueryAddr()
	if err != nil {
		return "", err
	}
	e, err := newTypedEndpoint(t, info.NodeGUID, verbs.UD)
	if err != nil {
		return "", err
	}
	qkey, err := readyUD(id, e.qp)
	if err != nil {
		return "", err
	}
	if _, err := e.qp.PostRecv([]verbs.RecvWR{{SGL: []verbs.SGE{{Addr: e.mr.Addr(), Length: 40 + 64, LKey: e.mr.LKey()}}}}); err != nil {
		return "", err
	}
	if err := id.Accept(ConnParam{QPNum: e.qp.Num(), QKey: qkey}); err != nil {
		return "", err
	}
	wc := make([]verbs.WC, 1)
	var n int
	for n == 0 && ctx.Err() == nil {
		if n, err = e.cq.Poll(wc); err != nil {
			return "", err
		}
	}
	if err := errors.Join(ctx.Err(), wc[0].Err()); err != nil {
		return "", err
	}
	return string(e.buf[40:wc[0].ByteLen]), nil
}
