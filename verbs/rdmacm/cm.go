//go:build linux

package rdmacm

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"time"

	"github.com/pvperf/pvperf/verbs"
)

// CM is the kernel's connection manager as a verbs.CM. The ids it creates
// in a port space share one event channel (as a librdmacm program's ids on
// its one channel do), and so do the ids of the connection requests their
// listeners get. A goroutine per channel reads its events and queues each
// for its id, so that each id, connected in any order, waits for its own
// events only.
type CM struct {
	mu     sync.Mutex
	closed bool
	// disp is the channel of each port space, of which the CM holds a
	// reference.
	disp map[uint16]*dispatcher
}

var _ verbs.CM = (*CM)(nil)

// NewCM returns the kernel's connection manager. It fails, with the
// reason, when the kernel has none (module rdma_ucm) or speaks another ABI.
func NewCM() (*CM, error) {
	if err := checkABI(abiVersionPath); err != nil {
		return nil, err
	}
	return &CM{disp: map[uint16]*dispatcher{}}, nil
}

// CreateID creates an id, on the channel of its port space (opened with
// the first).
func (m *CM) CreateID(ps verbs.PortSpace) (verbs.CMID, error) {
	if ps != verbs.PortSpaceTCP && ps != verbs.PortSpaceUDP {
		return nil, fmt.Errorf("rdmacm: create id: port space %v: %w", ps, verbs.ErrNotSupported)
	}
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil, fmt.Errorf("rdmacm: create id: %w", verbs.ErrClosed)
	}
	defer m.mu.Unlock()
	d := m.disp[uint16(ps)]
	if d == nil {
		c, err := Open()
		if err != nil {
			return nil, err
		}
		d = newDispatcher(c, uint16(ps))
		m.disp[uint16(ps)] = d
	}
	id, err := d.c.CreateID(uint16(ps))
	if err != nil {
		return nil, err
	}
	d.mu.Lock()
	d.refs++
	d.mu.Unlock()
	return d.add(id), nil
}

// Close marks the CM closed: no id can be created any more. A channel
// closes with the last of its ids (Close each).
func (m *CM) Close() error {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil
	}
	m.closed = true
	disp := m.disp
	m.disp = nil
	m.mu.Unlock()
	for _, d := range disp {
		d.release()
	}
	return nil
}

// dispatcher reads a channel's events and queues them for their ids: a
// CONNECT_REQUEST for the listener (by its UID), with a new id it
// registers; any other event for the id it names.
type dispatcher struct {
	c      *Channel
	ps     uint16
	cancel context.CancelFunc
	done   chan struct{}

	mu        sync.Mutex
	ids       map[uint32]*cmID // by kernel id
	listeners map[uint64]*cmID // by UID
	refs      int
	err       error // why the reader stopped
}

func newDispatcher(c *Channel, ps uint16) *dispatcher {
	ctx, cancel := context.WithCancel(context.Background())
	d := &dispatcher{c: c, ps: ps, cancel: cancel, done: make(chan struct{}),
		ids: map[uint32]*cmID{}, listeners: map[uint64]*cmID{}, refs: 1}
	go d.read(ctx)
	return d
}

// add registers id (the reference newDispatcher or the request took is
// now the id's).
func (d *dispatcher) add(id *ID) *cmID {
	x := &cmID{d: d, id: id, notify: make(chan struct{}, 1)}
	d.mu.Lock()
	d.ids[id.id] = x
	d.mu.Unlock()
	return x
}

// release drops a reference; the last closes the channel.
func (d *dispatcher) release() {
	d.mu.Lock()
	d.refs--
	last := d.refs == 0
	d.mu.Unlock()
	if last {
		d.cancel()
		<-d.done
		_ = d.c.Close()
	}
}

func (d *dispatcher) read(ctx context.Context) {
	defer close(d.done)
	for {
		e, err := d.c.GetEvent(ctx, d.ps)
		if err != nil {
			d.mu.Lock()
			d.err = err
			all := make([]*cmID, 0, len(d.ids))
			for _, x := range d.ids {
				all = append(all, x)
			}
			d.mu.Unlock()
			for _, x := range all {
				x.wake()
			}
			return
		}
		d.route(e)
	}
}

func (d *dispatcher) route(e Event) {
	d.mu.Lock()
	if e.Type == EventConnectRequest {
		l := d.listeners[e.UID]
		if l == nil {
			d.mu.Unlock()
			// A request for a listener closed since the kernel
			// reported it: the kernel destroys with the listener only
			// the requests not yet read, so this one's id is destroyed
			// here, which rejects the request.
			_, _ = d.c.NewID(&e, d.ps).Destroy()
			return
		}
		d.refs++
		nid := d.c.NewID(&e, d.ps)
		x := &cmID{d: d, id: nid, notify: make(chan struct{}, 1), req: e.Conn, reqUD: e.UD}
		d.ids[nid.id] = x
		d.mu.Unlock()
		l.push(Event{Type: EventConnectRequest, ID: nid.id}, x)
		return
	}
	x := d.ids[e.ID]
	d.mu.Unlock()
	if x != nil {
		x.push(e, nil)
	}
}

// cmID is an id of the kernel's connection manager as a verbs.CMID.
type cmID struct {
	d      *dispatcher
	id     *ID
	notify chan struct{}

	mu       sync.Mutex
	events   []Event
	requests []*cmID
	closed   bool
	// req and reqUD are what the connection request that created a
	// passive id carried.
	req   ConnParam
	reqUD UDParam
}

var _ verbs.CMID = (*cmID)(nil)

func (x *cmID) push(e Event, req *cmID) {
	x.mu.Lock()
	if req != nil {
		x.requests = append(x.requests, req)
	} else {
		x.events = append(x.events, e)
	}
	x.mu.Unlock()
	x.wake()
}

func (x *cmID) wake() {
	select {
	case x.notify <- struct{}{}:
	default:
	}
}

// next waits for the id's next event (or, with requests, connection
// request).
func (x *cmID) next(ctx context.Context, requests bool) (Event, *cmID, error) {
	for {
		x.mu.Lock()
		switch {
		case requests && len(x.requests) > 0:
			r := x.requests[0]
			x.requests = x.requests[1:]
			x.mu.Unlock()
			return Event{}, r, nil
		case !requests && len(x.events) > 0:
			e := x.events[0]
			x.events = x.events[1:]
			x.mu.Unlock()
			return e, nil, nil
		case x.closed:
			x.mu.Unlock()
			return Event{}, nil, fmt.Errorf("rdmacm: get event: %w", verbs.ErrClosed)
		}
		x.mu.Unlock()
		x.d.mu.Lock()
		derr := x.d.err
		x.d.mu.Unlock()
		if derr != nil {
			return Event{}, nil, derr
		}
		select {
		case <-x.notify:
		case <-ctx.Done():
			return Event{}, nil, fmt.Errorf("rdmacm: get event: %w", context.Cause(ctx))
		}
	}
}

// expect waits for an event of type want with status 0; any other event
// is an error (its own, or one wrapping ErrEvent).
func (x *cmID) expect(ctx context.Context, op string, want uint32) (Event, error) {
	e, _, err := x.next(ctx, false)
	if err != nil {
		return e, fmt.Errorf("%s: %w (waiting for %s)", op, err, EventName(want))
	}
	if err := e.Err(); err != nil {
		return e, fmt.Errorf("%s: %w", op, err)
	}
	if e.Type != want {
		return e, fmt.Errorf("%s: rdmacm: %w: %s, waiting for %s", op, ErrEvent, EventName(e.Type), EventName(want))
	}
	return e, nil
}

// Bind binds the id to a local address.
func (x *cmID) Bind(a netip.AddrPort) error { return x.id.Bind(a) }

// ResolveAddr resolves dst to a device and port.
func (x *cmID) ResolveAddr(ctx context.Context, src netip.Addr, dst netip.AddrPort, timeout time.Duration) error {
	var s netip.AddrPort
	if src.IsValid() {
		s = netip.AddrPortFrom(src, 0)
	}
	if err := x.id.ResolveAddr(s, dst, timeout); err != nil {
		return err
	}
	_, err := x.expect(ctx, fmt.Sprintf("resolve address %v", dst), EventAddrResolved)
	return err
}

// ResolveRoute resolves the route to the resolved address.
func (x *cmID) ResolveRoute(ctx context.Context, timeout time.Duration) error {
	if err := x.id.ResolveRoute(timeout); err != nil {
		return err
	}
	_, err := x.expect(ctx, "resolve route", EventRouteResolved)
	return err
}

// Bound returns the device, port and addresses of the id.
func (x *cmID) Bound() (verbs.CMAddr, error) {
	a, err := x.id.QueryAddr()
	if err != nil {
		return verbs.CMAddr{}, err
	}
	return verbs.CMAddr{NodeGUID: a.NodeGUID, Port: int(a.Port), Src: a.Src, Dst: a.Dst}, nil
}

func (x *cmID) SetTOS(tos uint8) error      { return x.id.SetTOS(tos) }
func (x *cmID) SetAckTimeout(t uint8) error { return x.id.SetAckTimeout(t) }

func (x *cmID) InitQPAttr(state verbs.QPState) (verbs.QPAttr, verbs.QPAttrMask, error) {
	return x.id.InitQPAttr(state)
}

func fromVerbs(p *verbs.ConnParam) ConnParam {
	return ConnParam{QPNum: p.QPNum, QKey: p.QKey, PrivateData: p.PrivateData, SRQ: p.SRQ,
		ResponderResources: p.ResponderResources, InitiatorDepth: p.InitiatorDepth, FlowControl: p.FlowControl,
		RetryCount: p.RetryCount, RNRRetryCount: p.RNRRetryCount}
}

func toVerbs(p *ConnParam) verbs.ConnParam {
	return verbs.ConnParam{QPNum: p.QPNum, QKey: p.QKey, PrivateData: p.PrivateData, SRQ: p.SRQ,
		ResponderResources: p.ResponderResources, InitiatorDepth: p.InitiatorDepth, FlowControl: p.FlowControl,
		RetryCount: p.RetryCount, RNRRetryCount: p.RNRRetryCount}
}

func udToVerbs(u *UDParam) verbs.ConnParam {
	return verbs.ConnParam{QPNum: u.QPNum, QKey: u.QKey, AH: u.AH, PrivateData: u.PrivateData}
}

// Connect sends the request and waits for the answer: CONNECT_RESPONSE
// (TCP space) or ESTABLISHED with the peer's datagram address (UDP).
func (x *cmID) Connect(ctx context.Context, p verbs.ConnParam) (verbs.ConnParam, error) {
	if err := x.id.Connect(fromVerbs(&p)); err != nil {
		return verbs.ConnParam{}, err
	}
	if x.id.PS == PSUDP {
		e, err := x.expect(ctx, "connect", EventEstablished)
		if err != nil {
			return verbs.ConnParam{}, err
		}
		return udToVerbs(&e.UD), nil
	}
	e, err := x.expect(ctx, "connect", EventConnectResp)
	if err != nil {
		return verbs.ConnParam{}, err
	}
	return toVerbs(&e.Conn), nil
}

// Establish sends the RTU.
func (x *cmID) Establish() error { return x.id.Establish() }

// Listen makes the id a listener.
func (x *cmID) Listen(backlog int) error {
	x.d.mu.Lock()
	x.d.listeners[x.id.UID] = x
	x.d.mu.Unlock()
	if err := x.id.Listen(backlog); err != nil {
		x.d.mu.Lock()
		delete(x.d.listeners, x.id.UID)
		x.d.mu.Unlock()
		return err
	}
	return nil
}

// GetRequest waits for the next connection request.
func (x *cmID) GetRequest(ctx context.Context) (verbs.CMID, verbs.ConnParam, error) {
	_, r, err := x.next(ctx, true)
	if err != nil {
		return nil, verbs.ConnParam{}, fmt.Errorf("get request: %w", err)
	}
	if x.id.PS == PSUDP {
		return r, udToVerbs(&r.reqUD), nil
	}
	return r, toVerbs(&r.req), nil
}

// Accept accepts the request; in the TCP space it waits for ESTABLISHED.
func (x *cmID) Accept(ctx context.Context, p verbs.ConnParam) error {
	if err := x.id.Accept(fromVerbs(&p)); err != nil {
		return err
	}
	if x.id.PS == PSUDP {
		return nil
	}
	_, err := x.expect(ctx, "accept", EventEstablished)
	return err
}

func (x *cmID) Reject(privateData []byte) error { return x.id.Reject(privateData) }
func (x *cmID) Disconnect() error               { return x.id.Disconnect() }

// WaitDisconnected waits for DISCONNECTED.
func (x *cmID) WaitDisconnected(ctx context.Context) error {
	for {
		e, err := x.expect(ctx, "wait disconnected", EventDisconnected)
		// Neither ends a connection: a late ESTABLISHED, TIMEWAIT_EXIT.
		if errors.Is(err, ErrEvent) && (e.Type == EventTimewaitExit || e.Type == EventEstablished) {
			continue
		}
		return err
	}
}

// Close destroys the id.
func (x *cmID) Close() error {
	x.mu.Lock()
	if x.closed {
		x.mu.Unlock()
		return nil
	}
	x.closed = true
	reqs := x.requests
	x.requests = nil
	x.mu.Unlock()
	x.wake()
	// Requests nobody took are rejected with the listener, by the kernel.
	for _, r := range reqs {
		_ = r.Close()
	}
	d := x.d
	d.mu.Lock()
	delete(d.ids, x.id.id)
	if d.listeners[x.id.UID] == x {
		delete(d.listeners, x.id.UID)
	}
	d.mu.Unlock()
	_, err := x.id.Destroy()
	d.release()
	return err
}
