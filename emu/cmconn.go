//go:build linux

package emu

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"time"

	"github.com/pvperf/pvperf/internal/unix"
	"github.com/pvperf/pvperf/verbs"
)

// errPeerClosed: the peer's connection manager closed the TCP connection
// in the middle of an exchange (its process ended or closed the id).
var errPeerClosed = fmt.Errorf("peer closed the connection: %w", io.ErrUnexpectedEOF)

// Connect sends a REQ (TCP port space) or a SIDR_REQ (UDP) to the
// resolved destination and waits for the answer, at most
// CMResponseTimeout. See verbs.CMID.
func (id *cmID) Connect(ctx context.Context, p verbs.ConnParam) (verbs.ConnParam, error) {
	id.mu.Lock()
	op := "connect " + id.dst.String()
	if err := id.usable(op); err != nil {
		id.mu.Unlock()
		return verbs.ConnParam{}, err
	}
	if id.st != idRouteResolved {
		id.mu.Unlock()
		return verbs.ConnParam{}, errf(op, unix.EINVAL, "id is %v, not route resolved", id.st)
	}
	req, err := id.reqMsg(p)
	if err != nil {
		id.mu.Unlock()
		return verbs.ConnParam{}, fmt.Errorf("emu cm: %s: %w", op, err)
	}
	id.st = idConnecting
	id.respRes, id.initDepth, id.retry, id.rnrRetry = req.respRes, req.initDepth, req.retry, req.rnrRetry
	id.mu.Unlock()

	ans, c, err := id.request(ctx, req)
	if err != nil {
		id.failed(c)
		return verbs.ConnParam{}, fmt.Errorf("emu cm: %s: %w", op, err)
	}
	var out verbs.ConnParam
	if id.ps == verbs.PortSpaceUDP {
		out, err = id.sidrAnswer(c, ans)
	} else {
		out, err = id.repAnswer(c, ans)
	}
	if err != nil {
		return verbs.ConnParam{}, fmt.Errorf("emu cm: %s: %w", op, err)
	}
	return out, nil
}

// gid returns the id's GID. Call with mu held.
func (id *cmID) gid() verbs.GID { return id.dev.gids[id.gidIdx].GID }

// reqMsg builds the request for p. The caller's private data has the
// room the kernel's rdma_cm leaves it (the IB CM's less its header). Call
// with mu held.
func (id *cmID) reqMsg(p verbs.ConnParam) (*cmMsg, error) {
	typ, limit := msgREQ, reqPrivateData-cmaHdrLen
	if id.ps == verbs.PortSpaceUDP {
		typ, limit = msgSIDRREQ, sidrReqPrivateData-cmaHdrLen
	}
	if len(p.PrivateData) > limit {
		return nil, verbs.Errorf(unix.EINVAL, "private data of %d bytes, at most %d", len(p.PrivateData), limit)
	}
	m := &cmMsg{typ: typ, ps: id.ps, mtu: id.dev.mtu, gid: id.gid(), pdata: p.PrivateData}
	if typ == msgREQ {
		m.qpn, m.psn, m.srq = p.QPNum&cmQPNMask, id.psn, p.SRQ
		m.respRes, m.initDepth, m.flowCtl = p.ResponderResources, p.InitiatorDepth, p.FlowControl&1
		m.retry, m.rnrRetry = min(p.RetryCount, cmMaxRetry), min(p.RNRRetryCount, cmMaxRetry)
	}
	return m, nil
}

// request connects to the destination, sends req and returns the answer
// and the connection (nil if none was made).
func (id *cmID) request(ctx context.Context, req *cmMsg) (*cmMsg, net.Conn, error) {
	ctx, done := id.ctxFor(ctx)
	defer done()
	deadline := time.Now().Add(id.m.respTimeout)
	id.mu.Lock()
	src, dst := id.src.Addr(), id.dst
	id.mu.Unlock()
	d := net.Dialer{Deadline: deadline, LocalAddr: &net.TCPAddr{IP: src.AsSlice(), Zone: src.Zone()}}
	c, err := d.DialContext(ctx, "tcp", dst.String())
	if err != nil {
		return nil, nil, id.dialErr(ctx, err)
	}
	if err := id.adopt(c); err != nil {
		c.Close()
		return nil, nil, err
	}
	if err := id.send(c, req); err != nil {
		return nil, c, refused(req, id.readErr(ctx, err))
	}
	ans, err := id.await(ctx, c, deadline)
	if err != nil {
		return nil, c, refused(req, err)
	}
	return ans, c, nil
}

// refused turns the peer's end of the connection before it answered req
// into a rejection: its listener closed (or its process ended) with the
// request unread, which is as a request to a port no one listens on.
func refused(req *cmMsg, err error) error {
	if !errors.Is(err, errPeerClosed) {
		return err
	}
	if req.typ == msgSIDRREQ {
		return &CMRejectError{SIDR: true, Reason: sidrUnsupported, Err: err}
	}
	return &CMRejectError{Reason: rejInvalidService, Err: err}
}

// peerEnded tells that err is the peer's end of the connection: its close
// or its reset.
func peerEnded(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, unix.ECONNRESET) || errors.Is(err, unix.EPIPE)
}

// dialErr classifies an error of the TCP connect: refused (no listener:
// the IB CM's reject reason 8), timed out, or else unreachable (no route
// to the host or network, the source address gone, ...).
func (id *cmID) dialErr(ctx context.Context, err error) error {
	var ne net.Error
	switch {
	case ctx.Err() != nil:
		return context.Cause(ctx)
	// Refused, or reset by a listener that closed with the connection in
	// its queue: no one listens.
	case (errors.Is(err, unix.ECONNREFUSED) || errors.Is(err, unix.ECONNRESET)) && id.ps == verbs.PortSpaceUDP:
		return &CMRejectError{SIDR: true, Reason: sidrUnsupported, Err: err}
	case errors.Is(err, unix.ECONNREFUSED) || errors.Is(err, unix.ECONNRESET):
		return &CMRejectError{Reason: rejInvalidService, Err: err}
	case errors.As(err, &ne) && ne.Timeout():
		return fmt.Errorf("%w: %w", verbs.ErrCMTimeout, err)
	}
	return fmt.Errorf("%w: %w", verbs.ErrUnreachable, err)
}

// adopt makes c the id's connection, unless the id was closed.
func (id *cmID) adopt(c net.Conn) error {
	id.mu.Lock()
	defer id.mu.Unlock()
	if id.st == idClosed {
		return verbs.ErrClosed
	}
	id.conn, id.src = c, addrPortOf(c.LocalAddr())
	return nil
}

// failed ends a handshake that did not succeed: the id cannot connect
// again (as the kernel's cannot) and c is closed.
func (id *cmID) failed(c net.Conn) {
	id.mu.Lock()
	if id.st != idClosed {
		id.st = idFailed
	}
	if c != nil && id.conn == c {
		id.conn = nil
	}
	id.mu.Unlock()
	if c != nil {
		c.Close()
	}
}

// repAnswer takes the answer to a REQ: a REP, whose parameters set the
// connection's (and are returned from this side's point of view, as
// ib_cm's REP event has them), or a REJ.
func (id *cmID) repAnswer(c net.Conn, ans *cmMsg) (verbs.ConnParam, error) {
	switch {
	case ans.typ == msgREJ:
		id.failed(c)
		return verbs.ConnParam{}, &CMRejectError{Reason: int(ans.reason), PrivateData: pad(ans.pdata, rejPrivateData)}
	case ans.typ != msgREP || ans.ps != verbs.PortSpaceTCP:
		id.failed(c)
		return verbs.ConnParam{}, badMsg("%v (port space %v) in answer to a REQ", ans.typ, ans.ps)
	}
	id.mu.Lock()
	defer id.mu.Unlock()
	if id.st == idClosed {
		return verbs.ConnParam{}, verbs.ErrClosed
	}
	id.peer = cmPeer{qpn: ans.qpn, psn: ans.psn, gid: ans.gid, mtu: min(id.dev.mtu, ans.mtu)}
	id.peerKnown = true
	// As ib_cm's cm_rep_handler: the peer's initiator depth is this side's
	// responder resources and the other way round; the RNR retry count is
	// the one the peer asks for.
	id.respRes, id.initDepth, id.rnrRetry = ans.initDepth, ans.respRes, ans.rnrRetry
	id.st = idRepRcvd
	return verbs.ConnParam{
		QPNum: ans.qpn, SRQ: ans.srq, ResponderResources: id.respRes, InitiatorDepth: id.initDepth,
		FlowControl: ans.flowCtl, RNRRetryCount: ans.rnrRetry, PrivateData: pad(ans.pdata, repPrivateData),
	}, nil
}

// sidrAnswer takes the answer to a SIDR_REQ: the peer's QP number, Q_Key
// and address, or a refusal. The TCP connection is no longer needed.
func (id *cmID) sidrAnswer(c net.Conn, ans *cmMsg) (verbs.ConnParam, error) {
	id.failed(c)
	switch {
	case ans.typ != msgSIDRREP || ans.ps != verbs.PortSpaceUDP:
		return verbs.ConnParam{}, badMsg("%v (port space %v) in answer to a SIDR_REQ", ans.typ, ans.ps)
	case ans.status != 0:
		return verbs.ConnParam{}, &CMRejectError{SIDR: true, Reason: int(ans.status), PrivateData: pad(ans.pdata, sidrRepPrivateData)}
	case ans.qkey != CMUDPQKey:
		return verbs.ConnParam{}, verbs.Errorf(unix.EINVAL, "the peer's Q_Key %#x is not the UDP port space's %#x", ans.qkey, CMUDPQKey)
	}
	id.mu.Lock()
	defer id.mu.Unlock()
	if id.st == idClosed {
		return verbs.ConnParam{}, verbs.ErrClosed
	}
	id.st = idDatagram
	id.peer = cmPeer{qpn: ans.qpn, gid: ans.gid, mtu: min(id.dev.mtu, ans.mtu), qkey: ans.qkey}
	id.peerKnown = true
	return verbs.ConnParam{QPNum: ans.qpn, QKey: ans.qkey, AH: id.ah(ans.gid), PrivateData: pad(ans.pdata, sidrRepPrivateData)}, nil
}

// pad returns b zero-padded to n bytes: the kernel reports the whole
// private data field of a message, whatever the sender put in it.
func pad(b []byte, n int) []byte {
	out := make([]byte, max(n, len(b)))
	copy(out, b)
	return out
}

// Establish sends the RTU after Connect: the connection is up.
func (id *cmID) Establish() error {
	id.mu.Lock()
	if err := id.usable("establish"); err != nil {
		id.mu.Unlock()
		return err
	}
	if id.st != idRepRcvd {
		id.mu.Unlock()
		return errf("establish", unix.EINVAL, "id is %v, not connected by Connect", id.st)
	}
	c := id.conn
	id.mu.Unlock()
	if err := id.send(c, &cmMsg{typ: msgRTU}); err != nil {
		id.failed(c)
		return fmt.Errorf("emu cm: establish: %w", err)
	}
	return id.established(c)
}

// established marks the id connected and watches c for the end of the
// connection.
func (id *cmID) established(c net.Conn) error {
	id.mu.Lock()
	defer id.mu.Unlock()
	if id.st == idClosed {
		return fmt.Errorf("emu cm: establish: %w", verbs.ErrClosed)
	}
	id.st, id.connected = idConnected, true
	id.wg.Add(1)
	go id.watch(c)
	return nil
}

// watch reads the connection until it ends: a DREQ or DREP from the peer,
// or the end of the TCP connection, disconnects the id.
func (id *cmID) watch(c net.Conn) {
	defer id.wg.Done()
	defer id.markDisconnected()
	for {
		m, err := readMsg(c)
		if err != nil {
			return
		}
		switch m.typ {
		case msgDREQ:
			id.mu.Lock()
			id.dreqRcvd = true
			id.mu.Unlock()
			id.markDisconnected()
		case msgDREP:
			id.markDisconnected()
		}
	}
}

func (id *cmID) markDisconnected() { id.discOnce.Do(func() { close(id.disc) }) }

// Listen makes the id a listener (an id not bound yet is bound to
// 0.0.0.0, port 0, as the kernel does). A backlog of 0 or more than 1024
// is 1024.
func (id *cmID) Listen(backlog int) error {
	id.mu.Lock()
	idle := id.st == idIdle
	id.mu.Unlock()
	if idle {
		if err := id.Bind(netip.AddrPortFrom(netip.IPv4Unspecified(), 0)); err != nil {
			return err
		}
	}
	id.mu.Lock()
	defer id.mu.Unlock()
	if err := id.usable("listen"); err != nil {
		return err
	}
	if id.st != idBound {
		return errf("listen", unix.EINVAL, "id is %v, not bound", id.st)
	}
	if backlog <= 0 || backlog > cmMaxBacklog {
		backlog = cmMaxBacklog
	}
	id.reqs = make(chan *cmID, backlog)
	id.inflight = map[net.Conn]struct{}{}
	id.st = idListening
	id.wg.Add(1)
	go id.acceptLoop(id.ln)
	return nil
}

// acceptLoop serves each TCP connection to the listener in a goroutine of
// its own.
func (id *cmID) acceptLoop(ln net.Listener) {
	defer id.wg.Done()
	for {
		c, err := ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) || id.life.Err() != nil {
				return
			}
			select { // out of descriptors, say: try again later
			case <-time.After(10 * time.Millisecond):
			case <-id.life.Done():
				return
			}
			continue
		}
		if !id.track(c) {
			c.Close()
			return
		}
		id.wg.Add(1)
		go id.serve(c)
	}
}

// track records a connection being read, which Close closes.
func (id *cmID) track(c net.Conn) bool {
	id.mu.Lock()
	defer id.mu.Unlock()
	if id.st == idClosed {
		return false
	}
	id.inflight[c] = struct{}{}
	return true
}

func (id *cmID) untrack(c net.Conn) {
	id.mu.Lock()
	delete(id.inflight, c)
	id.mu.Unlock()
}

// serve reads a connection's request, within CMRequestTimeout, and queues
// the id it makes for GetRequest, waiting while the backlog is full (as
// the kernel drops requests beyond it, which their senders repeat). A
// connection that sends anything else is dropped; a request the listener
// cannot take is rejected.
func (id *cmID) serve(c net.Conn) {
	defer id.wg.Done()
	_ = c.SetReadDeadline(time.Now().Add(id.m.reqTimeout))
	req, err := readMsg(c)
	id.untrack(c)
	if err != nil || (req.typ != msgREQ && req.typ != msgSIDRREQ) {
		c.Close()
		return
	}
	_ = c.SetReadDeadline(time.Time{})
	pid, rej := id.passive(c, req)
	if rej != nil {
		_ = id.send(c, rej)
		c.Close()
		return
	}
	select {
	case id.reqs <- pid:
	case <-id.life.Done():
		_ = pid.Close()
	}
}

// passive returns the id of a request, or the answer that refuses it: the
// listener is of another port space (as the kernel's IB CM: no listener
// for the service ID), or no emulated device owns the address the
// request came to.
func (id *cmID) passive(c net.Conn, req *cmMsg) (*cmID, *cmMsg) {
	want := msgREQ
	if id.ps == verbs.PortSpaceUDP {
		want = msgSIDRREQ
	}
	if req.typ != want || req.ps != id.ps {
		return nil, refusal(req, rejInvalidService, sidrUnsupported)
	}
	local := addrPortOf(c.LocalAddr())
	dev, gi, err := id.m.device(local.Addr(), !req.gid.IsV4Mapped())
	if err != nil {
		return nil, refusal(req, rejNoResources, sidrNoQP)
	}
	p := id.m.newID(id.ps)
	p.dev, p.gidIdx, p.src, p.dst, p.conn, p.st = dev, gi, local, addrPortOf(c.RemoteAddr()), c, idReqRcvd
	p.peer = cmPeer{qpn: req.qpn, psn: req.psn, gid: req.gid, mtu: min(dev.mtu, req.mtu)}
	p.peerKnown = true
	// As ib_cm's cm_req_handler: the requester's initiator depth is this
	// side's responder resources and the other way round; both retry
	// counts are the requester's.
	p.respRes, p.initDepth, p.retry, p.rnrRetry = req.initDepth, req.respRes, req.retry, req.rnrRetry
	p.req = reqParam(req)
	if !id.m.register(p) {
		return nil, refusal(req, rejNoResources, sidrNoQP)
	}
	return p, nil
}

// refusal is the answer that refuses req with an IB CM reject reason or,
// for a SIDR_REQ, a SIDR status.
func refusal(req *cmMsg, reason uint16, status uint8) *cmMsg {
	if req.typ == msgSIDRREQ {
		return &cmMsg{typ: msgSIDRREP, ps: req.ps, mtu: verbs.MTU256, status: status}
	}
	return &cmMsg{typ: msgREJ, reason: reason}
}

// reqParam is what GetRequest reports of a request: for a datagram
// service, only the private data (the kernel's SIDR_REQ carries no QP);
// for a connection, the resources from this side's point of view, as
// ib_cm's REQ event has them (the requester's initiator depth is this
// side's responder resources).
func reqParam(m *cmMsg) verbs.ConnParam {
	if m.typ == msgSIDRREQ {
		return verbs.ConnParam{PrivateData: pad(m.pdata, sidrReqPrivateData-cmaHdrLen)}
	}
	return verbs.ConnParam{
		QPNum: m.qpn, SRQ: m.srq, ResponderResources: m.initDepth, InitiatorDepth: m.respRes,
		FlowControl: m.flowCtl, RetryCount: m.retry, RNRRetryCount: m.rnrRetry,
		PrivateData: pad(m.pdata, reqPrivateData-cmaHdrLen),
	}
}

// GetRequest waits for the next request to the listener, in the order
// they arrived.
func (id *cmID) GetRequest(ctx context.Context) (verbs.CMID, verbs.ConnParam, error) {
	id.mu.Lock()
	if err := id.usable("get request"); err != nil {
		id.mu.Unlock()
		return nil, verbs.ConnParam{}, err
	}
	if id.st != idListening {
		id.mu.Unlock()
		return nil, verbs.ConnParam{}, errf("get request", unix.EINVAL, "id is %v, not listening", id.st)
	}
	reqs := id.reqs
	id.mu.Unlock()
	select {
	case p := <-reqs:
		p.mu.Lock()
		param := p.req
		p.mu.Unlock()
		return p, param, nil
	case <-ctx.Done():
		return nil, verbs.ConnParam{}, fmt.Errorf("emu cm: get request: %w", context.Cause(ctx))
	case <-id.life.Done():
		return nil, verbs.ConnParam{}, fmt.Errorf("emu cm: get request: %w", verbs.ErrClosed)
	}
}

// Accept answers the request with a REP (and waits for the RTU, at most
// CMResponseTimeout) or, in the UDP port space, a SIDR_REP.
func (id *cmID) Accept(ctx context.Context, p verbs.ConnParam) error {
	id.mu.Lock()
	if err := id.usable("accept"); err != nil {
		id.mu.Unlock()
		return err
	}
	if id.st != idReqRcvd {
		id.mu.Unlock()
		return errf("accept", unix.EINVAL, "id is %v, not a request", id.st)
	}
	rep, err := id.repMsg(p)
	if err != nil {
		id.mu.Unlock()
		return fmt.Errorf("emu cm: accept: %w", err)
	}
	c := id.conn
	if id.ps == verbs.PortSpaceUDP {
		id.st, id.conn = idDatagram, nil
		id.mu.Unlock()
		err := id.send(c, rep)
		c.Close()
		if err != nil {
			return fmt.Errorf("emu cm: accept: %w", err)
		}
		return nil
	}
	id.respRes, id.initDepth = p.ResponderResources, p.InitiatorDepth
	id.st = idAccepting
	id.mu.Unlock()
	if err := id.awaitRTU(ctx, c, rep); err != nil {
		id.failed(c)
		return fmt.Errorf("emu cm: accept: %w", err)
	}
	return id.established(c)
}

// repMsg builds the answer p gives to the request. Call with mu held.
func (id *cmID) repMsg(p verbs.ConnParam) (*cmMsg, error) {
	if id.ps == verbs.PortSpaceUDP {
		if len(p.PrivateData) > sidrRepPrivateData {
			return nil, verbs.Errorf(unix.EINVAL, "private data of %d bytes, at most %d", len(p.PrivateData), sidrRepPrivateData)
		}
		if p.QKey != 0 && p.QKey != CMUDPQKey {
			return nil, verbs.Errorf(unix.EINVAL, "Q_Key %#x is not the UDP port space's %#x", p.QKey, CMUDPQKey)
		}
		return &cmMsg{typ: msgSIDRREP, ps: id.ps, mtu: id.dev.mtu, qpn: p.QPNum & cmQPNMask, qkey: CMUDPQKey,
			gid: id.gid(), pdata: p.PrivateData}, nil
	}
	if len(p.PrivateData) > repPrivateData {
		return nil, verbs.Errorf(unix.EINVAL, "private data of %d bytes, at most %d", len(p.PrivateData), repPrivateData)
	}
	return &cmMsg{
		typ: msgREP, ps: id.ps, mtu: id.dev.mtu, qpn: p.QPNum & cmQPNMask, psn: id.psn, gid: id.gid(), srq: p.SRQ,
		respRes: p.ResponderResources, initDepth: p.InitiatorDepth, flowCtl: p.FlowControl & 1,
		rnrRetry: min(p.RNRRetryCount, cmMaxRetry), pdata: p.PrivateData,
	}, nil
}

// awaitRTU sends the REP and waits for the RTU.
func (id *cmID) awaitRTU(ctx context.Context, c net.Conn, rep *cmMsg) error {
	ctx, done := id.ctxFor(ctx)
	defer done()
	if err := id.send(c, rep); err != nil {
		return id.readErr(ctx, err)
	}
	m, err := id.await(ctx, c, time.Now().Add(id.m.respTimeout))
	switch {
	case err != nil:
		return err
	case m.typ == msgRTU:
		return nil
	case m.typ == msgREJ:
		return &CMRejectError{Reason: int(m.reason), PrivateData: pad(m.pdata, rejPrivateData)}
	case m.typ == msgDREQ:
		return fmt.Errorf("the peer disconnected before the RTU: %w", errPeerClosed)
	}
	return badMsg("%v in answer to a REP", m.typ)
}

// Reject refuses the request with a REJ (reason 28, consumer defined) or,
// in the UDP port space, a SIDR_REP of status 2 (rejected).
func (id *cmID) Reject(privateData []byte) error {
	id.mu.Lock()
	if err := id.usable("reject"); err != nil {
		id.mu.Unlock()
		return err
	}
	if id.st != idReqRcvd {
		id.mu.Unlock()
		return errf("reject", unix.EINVAL, "id is %v, not a request", id.st)
	}
	m := &cmMsg{typ: msgREJ, reason: rejConsumer, pdata: privateData}
	if id.ps == verbs.PortSpaceUDP {
		m = &cmMsg{typ: msgSIDRREP, ps: id.ps, mtu: id.dev.mtu, status: sidrReject, gid: id.gid(), pdata: privateData}
	}
	if n := m.typ.maxPrivateData(); len(privateData) > n {
		id.mu.Unlock()
		return errf("reject", unix.EINVAL, "private data of %d bytes, at most %d", len(privateData), n)
	}
	c := id.conn
	id.st, id.conn = idFailed, nil
	id.mu.Unlock()
	err := id.send(c, m)
	c.Close()
	if err != nil {
		return fmt.Errorf("emu cm: reject: %w", err)
	}
	return nil
}

// Disconnect sends a DREQ, or the DREP that answers the peer's DREQ. A
// datagram id has no connection: nothing happens, as with the kernel.
func (id *cmID) Disconnect() error {
	id.mu.Lock()
	if err := id.usable("disconnect"); err != nil {
		id.mu.Unlock()
		return err
	}
	switch {
	case id.st == idDatagram || id.dreqSent:
		id.mu.Unlock()
		return nil
	case !id.connected:
		id.mu.Unlock()
		return errf("disconnect", unix.EINVAL, "id is %v, not connected", id.st)
	}
	m := &cmMsg{typ: msgDREQ}
	if id.dreqRcvd {
		m.typ = msgDREP
	}
	id.dreqSent, id.dreqAt = true, time.Now()
	c := id.conn
	id.mu.Unlock()
	if err := id.send(c, m); err != nil {
		id.markDisconnected() // the peer is gone already
	}
	return nil
}

// WaitDisconnected waits until the peer's DREQ or DREP arrives or the
// connection ends; after the id's own DREQ, at most CMResponseTimeout.
func (id *cmID) WaitDisconnected(ctx context.Context) error {
	id.mu.Lock()
	if err := id.usable("wait disconnected"); err != nil {
		id.mu.Unlock()
		return err
	}
	if !id.connected {
		id.mu.Unlock()
		return errf("wait disconnected", unix.EINVAL, "id is %v, never connected", id.st)
	}
	awaitDREP, at := id.dreqSent && !id.dreqRcvd, id.dreqAt
	id.mu.Unlock()
	var expire <-chan time.Time
	if awaitDREP {
		t := time.NewTimer(time.Until(at.Add(id.m.respTimeout)))
		defer t.Stop()
		expire = t.C
	}
	select {
	case <-id.disc:
		return nil
	case <-expire:
		id.markDisconnected()
		return nil
	case <-ctx.Done():
		return fmt.Errorf("emu cm: wait disconnected: %w", context.Cause(ctx))
	case <-id.life.Done():
		return fmt.Errorf("emu cm: wait disconnected: %w", verbs.ErrClosed)
	}
}

// Close destroys the id: its TCP connection or listener closes, a request
// not answered yet is rejected, requests queued on a listener are
// rejected, and every goroutine of the id ends before Close returns.
func (id *cmID) Close() error {
	id.mu.Lock()
	if id.st == idClosed {
		id.mu.Unlock()
		return nil
	}
	prev := id.st
	id.st = idClosed
	c, ln, inflight, reqs := id.conn, id.ln, id.inflight, id.reqs
	id.conn, id.ln, id.inflight = nil, nil, nil
	id.mu.Unlock()
	id.kill()
	if c != nil {
		if prev == idReqRcvd {
			_ = id.send(c, id.closeRefusal())
		}
		c.Close()
	}
	if ln != nil {
		ln.Close()
	}
	for c := range inflight {
		c.Close()
	}
	id.wg.Wait()
	for reqs != nil {
		select {
		case p := <-reqs:
			_ = p.Close()
		default:
			reqs = nil
		}
	}
	id.markDisconnected()
	id.m.forget(id)
	return nil
}

// closeRefusal is what a request id closed before its answer sends, as
// the kernel's ib_cm does when it destroys one.
func (id *cmID) closeRefusal() *cmMsg {
	if id.ps == verbs.PortSpaceUDP {
		return &cmMsg{typ: msgSIDRREP, ps: id.ps, mtu: verbs.MTU256, status: sidrReject}
	}
	return &cmMsg{typ: msgREJ, reason: rejConsumer}
}

// send writes m to c.
func (id *cmID) send(c net.Conn, m *cmMsg) error {
	b, err := m.encode()
	if err != nil {
		return err
	}
	id.wmu.Lock()
	defer id.wmu.Unlock()
	_ = c.SetWriteDeadline(time.Now().Add(id.m.respTimeout))
	_, err = c.Write(b)
	return err
}

// ctxFor returns ctx that also ends, with cause verbs.ErrClosed, when the
// id closes.
func (id *cmID) ctxFor(ctx context.Context) (context.Context, context.CancelFunc) {
	c, cancel := context.WithCancelCause(ctx)
	stop := context.AfterFunc(id.life, func() { cancel(verbs.ErrClosed) })
	return c, func() {
		stop()
		cancel(nil)
	}
}

// await reads the next message on c, until deadline or ctx's end.
func (id *cmID) await(ctx context.Context, c net.Conn, deadline time.Time) (*cmMsg, error) {
	_ = c.SetReadDeadline(deadline)
	fired := make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		_ = c.SetReadDeadline(time.Unix(1, 0))
		close(fired)
	})
	m, err := readMsg(c)
	if !stop() {
		<-fired
	}
	_ = c.SetReadDeadline(time.Time{})
	if err != nil {
		return nil, id.readErr(ctx, err)
	}
	return m, nil
}

// readErr classifies an error of the connection during an exchange.
func (id *cmID) readErr(ctx context.Context, err error) error {
	switch {
	case ctx.Err() != nil:
		return context.Cause(ctx)
	case errors.Is(err, net.ErrClosed):
		return verbs.ErrClosed
	case errors.Is(err, os.ErrDeadlineExceeded):
		return fmt.Errorf("%w from the peer in %v", verbs.ErrCMTimeout, id.m.respTimeout)
	case peerEnded(err):
		return errPeerClosed
	}
	return err
}
