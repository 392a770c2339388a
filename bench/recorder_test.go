package bench

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/pvperf/pvperf/emu"
	"github.com/pvperf/pvperf/verbs"
)

// recorder is a device wrapper that records what the engine asks of the
// device: the batch of every poll, the access and the contents of every
// registered memory region.
type recorder struct {
	mu     sync.Mutex
	polls  []int
	regs   []verbs.Access
	bufs   [][]byte
	modify []verbs.QPAttr // every Modify's attributes
	sends  int            // work requests posted
	posted []postedWR     // every work request posted
	lists  []int          // length of every PostSend list
	recvs  []int          // length of every PostRecv list
	waits  int            // completion channel waits
	// Waits on the channels of send CQs and of receive CQs.
	sendWaits, recvWaits int
	// Work requests posted to QPs and not yet completed (every
	// completion polled counts one: with -Q 1, as tests set it, every
	// one is signalled), and the most there ever were. Receives posted
	// to an SRQ are not seen, so with --use-srq the receive counts mean
	// nothing.
	sendsOut, maxSendsOut int
	recvsOut, maxRecvsOut int
	srqQPs                int // QPs created to take receives from an SRQ
}

// postedWR is what the loops change in a work request from one post to
// the next.
type postedWR struct {
	signaled     bool
	inline       bool
	addr, remote uint64
}

func (r *recorder) pollSizes() []int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]int(nil), r.polls...)
}

type recDevice struct {
	verbs.Device
	r *recorder
}
type recContext struct {
	verbs.Context
	r *recorder
}
type recPD struct {
	verbs.PD
	r *recorder
}
type recCQ struct {
	verbs.CQ
	r  *recorder
	ch *recChannel // its completion channel, if any
}

func (d recDevice) Open() (verbs.Context, error) {
	c, err := d.Device.Open()
	return recContext{c, d.r}, err
}

func (c recContext) AllocPD() (verbs.PD, error) {
	pd, err := c.Context.AllocPD()
	return recPD{pd, c.r}, err
}

func (c recContext) CreateCQ(init verbs.CQInit) (verbs.CQ, error) {
	ch, ok := init.Channel.(*recChannel)
	if ok {
		init.Channel = ch.CompChannel
	}
	cq, err := c.Context.CreateCQ(init)
	return &recCQ{cq, c.r, ch}, err
}

func (c recContext) CreateCompChannel() (verbs.CompChannel, error) {
	ch, err := c.Context.CreateCompChannel()
	if err != nil {
		return nil, err
	}
	return &recChannel{CompChannel: ch, r: c.r}, nil
}

type recChannel struct {
	verbs.CompChannel
	r          *recorder
	send, recv bool // the channel of a QP's send CQ, of its receive CQ (under r.mu)
}

func (ch *recChannel) Wait(ctx context.Context) (verbs.CQ, error) {
	ch.r.mu.Lock()
	ch.r.waits++
	if ch.send {
		ch.r.sendWaits++
	}
	if ch.recv {
		ch.r.recvWaits++
	}
	ch.r.mu.Unlock()
	return ch.CompChannel.Wait(ctx)
}

func (pd recPD) RegMR(b []byte, access verbs.Access) (verbs.MR, error) {
	pd.r.mu.Lock()
	pd.r.regs = append(pd.r.regs, access)
	pd.r.bufs = append(pd.r.bufs, bytes.Clone(b))
	pd.r.mu.Unlock()
	return pd.PD.RegMR(b, access)
}

// CreateQP hands the device its own CQs, and notes which channels serve
// send and receive CQs.
func (pd recPD) CreateQP(init verbs.QPInit) (verbs.QP, error) {
	pd.r.mu.Lock()
	if c, ok := init.SendCQ.(*recCQ); ok {
		init.SendCQ = c.CQ
		if c.ch != nil {
			c.ch.send = true
		}
	}
	if c, ok := init.RecvCQ.(*recCQ); ok {
		init.RecvCQ = c.CQ
		if c.ch != nil {
			c.ch.recv = true
		}
	}
	pd.r.mu.Unlock()
	qp, err := pd.PD.CreateQP(init)
	if err != nil {
		return nil, err
	}
	if init.SRQ != nil {
		pd.r.mu.Lock()
		pd.r.srqQPs++
		pd.r.mu.Unlock()
	}
	return &recQP{qp, pd.r}, nil
}

type recQP struct {
	verbs.QP
	r *recorder
}

func (q *recQP) Modify(attr *verbs.QPAttr, mask verbs.QPAttrMask) error {
	q.r.mu.Lock()
	q.r.modify = append(q.r.modify, *attr)
	q.r.mu.Unlock()
	return q.QP.Modify(attr, mask)
}

func (q *recQP) PostSend(wrs []verbs.SendWR) (int, error) {
	n, err := q.QP.PostSend(wrs)
	q.r.mu.Lock()
	q.r.sends += n
	for _, w := range wrs[:n] {
		q.r.posted = append(q.r.posted, postedWR{w.Flags&verbs.SendSignaled != 0, w.Flags&verbs.SendInline != 0, w.SGL[0].Addr, w.RemoteAddr})
	}
	q.r.lists = append(q.r.lists, len(wrs))
	q.r.sendsOut += n
	q.r.maxSendsOut = max(q.r.maxSendsOut, q.r.sendsOut)
	q.r.mu.Unlock()
	return n, err
}

func (q *recQP) PostRecv(wrs []verbs.RecvWR) (int, error) {
	n, err := q.QP.PostRecv(wrs)
	q.r.mu.Lock()
	q.r.recvs = append(q.r.recvs, len(wrs))
	q.r.recvsOut += n
	q.r.maxRecvsOut = max(q.r.maxRecvsOut, q.r.recvsOut)
	q.r.mu.Unlock()
	return n, err
}

func (c *recCQ) Poll(wc []verbs.WC) (int, error) {
	c.r.mu.Lock()
	c.r.polls = append(c.r.polls, len(wc))
	c.r.mu.Unlock()
	n, err := c.CQ.Poll(wc)
	c.r.mu.Lock()
	for _, w := range wc[:max(n, 0)] {
		if w.Opcode >= verbs.WCRecv {
			c.r.recvsOut--
		} else {
			c.r.sendsOut--
		}
	}
	c.r.mu.Unlock()
	return n, err
}

// runRecorded runs cfg on a recorded emulator and returns the recording
// and the output.
func runRecorded(t *testing.T, cfg Config) (*recorder, string) {
	t.Helper()
	r := &recorder{}
	out := runLoop(t, recDevice{device(t, emu.ProfileUnrestricted, 2), r}, cfg)
	return r, out
}

func headerLine(out, prefix string) string {
	for l := range strings.SplitSeq(out, "\n") {
		if strings.HasPrefix(l, prefix) {
			return l
		}
	}
	return ""
}
