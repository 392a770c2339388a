//go:build linux

package rdmacm

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/pvperf/pvperf/verbs"
)

// gated holds the scripted kernel's events until the test opens the gate.
type gated struct {
	*scripted
	gate chan struct{}
}

func (g *gated) getEvent(ctx context.Context, b []byte) (int, error) {
	select {
	case <-g.gate:
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	return g.scripted.getEvent(ctx, b)
}

// TestDispatch: requests reach their listener in order, each with a new
// id, and every later event reaches the id it names, whatever the order
// the kernel reports them in.
func TestDispatch(t *testing.T) {
	ev := func(typ, id uint32, uid uint64) []byte {
		return le(eventResp{Event: typ, ID: id, UID: uid})
	}
	k := &gated{gate: make(chan struct{}), scripted: &scripted{
		resps: map[uint32][]byte{cmdCreateID: le(createIDResp{ID: 1})},
		events: [][]byte{
			ev(EventConnectRequest, 10, 1),
			ev(EventConnectRequest, 11, 1),
			ev(EventEstablished, 11, 0),
			ev(EventConnectRequest, 12, 99), // a listener that is not there
			ev(EventEstablished, 10, 0),
			ev(EventDisconnected, 10, 0),
		},
	}}
	c, err := newChannel(k)
	if err != nil {
		t.Fatal(err)
	}
	d := newDispatcher(c, PSTCP)
	id, err := c.CreateID(PSTCP)
	if err != nil {
		t.Fatal(err)
	}
	l := d.add(id)
	if err := l.Listen(4); err != nil {
		t.Fatal(err)
	}
	close(k.gate)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	r1, _, err := l.GetRequest(ctx)
	if err != nil {
		t.Fatal(err)
	}
	r2, _, err := l.GetRequest(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if h1, h2 := r1.(*cmID).id.Handle(), r2.(*cmID).id.Handle(); h1 != 10 || h2 != 11 {
		t.Fatalf("requests %d, %d; want 10, 11", h1, h2)
	}
	if _, err := r2.(*cmID).expect(ctx, "accept", EventEstablished); err != nil {
		t.Errorf("second request: %v", err)
	}
	if _, err := r1.(*cmID).expect(ctx, "accept", EventEstablished); err != nil {
		t.Errorf("first request: %v", err)
	}
	if err := r1.WaitDisconnected(ctx); err != nil {
		t.Errorf("first request's disconnection: %v", err)
	}
	// No third request arrives for this listener.
	short, cancel2 := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel2()
	if _, _, err := l.GetRequest(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("third request: %v", err)
	}
	for _, x := range []verbs.CMID{r1, r2} {
		if err := x.Close(); err != nil {
			t.Error(err)
		}
	}
	if err := l.Close(); err != nil {
		t.Error(err)
	}
	// The last id's close closed the channel.
	if _, err := c.GetEvent(ctx, PSTCP); !errors.Is(err, ErrClosed) {
		t.Errorf("channel after the last id: %v", err)
	}
	if _, _, err := l.GetRequest(ctx); !errors.Is(err, verbs.ErrClosed) {
		t.Errorf("a closed listener's request: %v", err)
	}
}

// TestEventErrors: the events' statuses match verbs' classes of errors.
func TestEventErrors(t *testing.T) {
	neg := func(n int) int32 { return int32(-n) }
	for _, tc := range []struct {
		e    Event
		want error
	}{
		{Event{Type: EventRejected, Status: RejectInvalidServiceID}, verbs.ErrRejected},
		{Event{Type: EventUnreachable, Status: 1}, verbs.ErrRejected}, // SIDR: no listener
		{Event{Type: EventUnreachable, Status: neg(110)}, verbs.ErrCMTimeout},
		{Event{Type: EventAddrError, Status: neg(110)}, verbs.ErrCMTimeout},
		{Event{Type: EventAddrError, Status: neg(101)}, verbs.ErrUnreachable}, // ENETUNREACH
		{Event{Type: EventAddrError, Status: neg(19)}, verbs.ErrUnreachable},  // ENODEV
	} {
		if err := tc.e.Err(); !errors.Is(err, tc.want) {
			t.Errorf("%s status %d: %v, want %v", EventName(tc.e.Type), tc.e.Status, err, tc.want)
		}
	}
	e := Event{Type: EventRejected, Status: RejectInvalidServiceID}
	if got := e.Err().Error(); got != "rdmacm: connection rejected (IB CM reason 8: no listener on the port)" {
		t.Errorf("text: %q", got)
	}
}
