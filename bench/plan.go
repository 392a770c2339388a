package bench

import (
	"fmt"
	"strings"

	"github.com/pvperf/pvperf/perftest"
	"github.com/pvperf/pvperf/reports"
	"github.com/pvperf/pvperf/verbs"
)

// plan is what one side of a run does, derived from the configuration,
// the device and the peer: perftest's adjustments of its parameters, made
// once, in perftest's order, into a value of their own. The engine reads
// the plan and never changes the configuration.
//
// planDevice fills the part the configuration and the local device decide;
// planPeer what waits for the peer's system data and MTU; the session then
// applies the peer's read limit (oob.OutReadsForPeer) and chooses the GID
// index among the port's GIDs (autoGID).
type plan struct {
	inline    int       // max inline data (ctx_set_max_inline)
	outReads  int       // outstanding reads and atomics (ctx_set_out_reads, then the peer's limit)
	pkeyIndex int       // --pkey_index within the device's P_Key table (ctx_chk_pkey_index)
	mtu       verbs.MTU // path MTU: -m within the port's (set_mtu), then both sides' smaller one
	link      verbs.LinkLayer
	gidIndex  int  // -1: no GRH (InfiniBand without -x)
	autoGID   bool // gidIndex is chosen among the port's GIDs (RoCE without -x)

	pageSize  int // cycle_buffer: the larger page size of both sides
	cacheLine int // the larger cache line size of both sides
	// size is the message size after UD's MTU limit; msgs are the message
	// sizes of the run (one, or 2..2^23 with -a) and how each is posted.
	size int
	msgs []msgPlan
	// maxSize is the largest message the buffers are sized for (2^23
	// with -a), and bufSize perftest's BUFF_SIZE of it: the size of each
	// QP's send and receive slot.
	maxSize, bufSize int
	// dv is the buffer of a --data_validation run (nil: none).
	dv *dvLayout
}

// msgPlan is how the messages of one size are posted (perftest's
// ctx_set_send_wqes, ctx_set_recv_wqes and the loops' address stepping).
type msgPlan struct {
	size int
	// step is the distance between consecutive messages in a slot
	// (INC(size, cache line)); the addresses go round the first wrap
	// bytes of a cycle of cycle_buffer bytes.
	step, cycle, wrap uint64
	// small: size is at most half a cycle, so the bandwidth loops move
	// each message to the next step of the cycle.
	small bool
	// stepRemote: a loop posting one work request at a time moves the
	// remote address with the local one (small messages other than SEND);
	// listStepRemote: in a post list, each work request targets the next
	// remote step (small messages, and every atomic).
	stepRemote, listStepRemote bool
	// inline: SEND and WRITE messages go inline.
	inline bool
	// recvLength is the receive buffer length (set_recv_length);
	// recvSmall tells that a bandwidth server moves a reposted receive to
	// the next step (SIZE(connection, size, 1) <= cycle/2).
	recvLength int
	recvSmall  bool
}

// note is a message a plan step prints: stdout first, then stderr.
type note struct{ stdout, stderr string }

// planDevice makes the adjustments perftest makes once the device is open
// (check_link, ctx_set_max_inline, ctx_set_out_reads, ctx_chk_pkey_index,
// set_mtu) and returns the messages they print.
func planDevice(cfg *Config, attr *verbs.DeviceAttr, port *verbs.PortAttr, emulated bool) (plan, []note) {
	p := plan{gidIndex: cfg.GIDIndex, link: port.LinkLayer}
	var notes []note
	// --force-link replaces the port's link layer (set_link_layer).
	if cfg.ForceLink != verbs.LinkUnspecified {
		p.link = cfg.ForceLink
	}
	if p.link == verbs.LinkEthernet && p.gidIndex == -1 {
		p.gidIndex, p.autoGID = 0, true // get_best_gid_index, once the device is set up
	}
	// Inline data: perftest's defaults for latency tests on devices it
	// recognizes (ctx_set_max_inline). It recognizes none of the kernel
	// devices pvperf drives (rdma_rxe and vmw_pvrdma are not in its
	// list): on them inline data is off, with perftest's message when an
	// inline size was set (-I, or the 0 of READ and atomic tests). The
	// emulator is pvperf's own: it tells its inline support in its
	// attributes.
	p.inline = cfg.Inline
	if !emulated {
		if cfg.Inline != -1 {
			var out, errOut strings.Builder
			_ = reports.WriteInlineNotRecognized(&out, &errOut)
			notes = append(notes, note{out.String(), errOut.String()})
		}
		p.inline = 0
	} else if attr.MaxInlineData == 0 {
		if cfg.InlineGiven && cfg.Inline > 0 {
			var out, errOut strings.Builder
			_ = reports.WriteInlineNotRecognized(&out, &errOut)
			notes = append(notes, note{out.String(), errOut.String()})
		}
		p.inline = 0
	} else if !cfg.InlineGiven || cfg.Inline < 0 {
		p.inline = 0
		if cfg.Test == perftest.Latency {
			switch cfg.Verb {
			case perftest.Write, perftest.WriteImm:
				p.inline = 220
			case perftest.Send, perftest.SendImm:
				p.inline = 236
				if cfg.Connection == perftest.UD {
					p.inline = 188
				}
			}
		}
	}
	if !cfg.InlineGiven {
		p.inline = min(p.inline, attr.MaxInlineData)
	}
	// An -I above the device's limit goes to the QP as asked, which the
	// device refuses ("Couldn't create QP"), as perftest's does.
	p.outReads = 1
	if cfg.Verb == perftest.Read || cfg.Verb == perftest.Atomic || cfg.DataValidation {
		p.outReads = max(attr.MaxQPRdAtom, 1)
		if cfg.OutReads > p.outReads {
			notes = append(notes, note{reports.ResultLine,
				fmt.Sprintf(" Number of outstanding reads is above max = %d\n Changing to that max value\n", p.outReads)})
		} else if cfg.OutReads > 0 {
			p.outReads = cfg.OutReads
		}
	}
	p.pkeyIndex = cfg.PKeyIndex
	if p.pkeyIndex > 0 && p.pkeyIndex > attr.MaxPKeys-1 {
		notes = append(notes, note{reports.ResultLine,
			fmt.Sprintf(" Specified PKey Index, %d, greater than allowed max, %d\n Changing to 0\n", p.pkeyIndex, attr.MaxPKeys-1)})
		p.pkeyIndex = 0
	}
	p.mtu = port.ActiveMTU
	if cfg.MTU != 0 {
		m := verbs.MTUFromBytes(cfg.MTU)
		if m == 0 {
			notes = append(notes, note{"", fmt.Sprintf(" Invalid MTU - %d \n Please choose mtu from {256,512,1024,2048,4096}\n Will run with the port active mtu - %d\n", cfg.MTU, port.ActiveMTU)})
			m = port.ActiveMTU
		}
		if m > port.ActiveMTU {
			notes = append(notes, note{fmt.Sprintf("Requested mtu is higher than active mtu \nChanging to active mtu - %d\n", port.ActiveMTU), ""})
			m = port.ActiveMTU
		}
		p.mtu = m
	}
	return p, notes
}

// errUDSize is check_mtu's refusal of a UD message size (-s) above the MTU.
var errUDSize = fail(nil, " Max message size in UD cannot be greater than MTU \n", " Couldn't get context for the device\n")

// planPeer completes p once both sides' system data and MTU are known:
// the cycle buffer and cache line, the negotiated MTU, UD's size limit
// (check_mtu), the sizes of the run and how each is posted.
func (p *plan) planPeer(cfg *Config, pageSize, cacheLine int, mtu verbs.MTU) ([]note, error) {
	p.pageSize, p.cacheLine, p.mtu = pageSize, cacheLine, mtu
	var notes []note
	p.size = int(cfg.Size)
	if cfg.Connection == perftest.UD && p.size > mtu.Bytes() {
		if !cfg.AllSizes && cfg.SizeGiven {
			return nil, errUDSize
		}
		var errOut strings.Builder
		_ = reports.WriteUDSizeClamped(&errOut, mtu.Bytes())
		notes = append(notes, note{"", errOut.String()})
		p.size = mtu.Bytes()
	}
	sizes := []int{p.size}
	p.maxSize = p.size
	if cfg.AllSizes {
		top := MaxSize
		if cfg.Connection == perftest.UD {
			top = mtu.Bytes()
		}
		sizes = sizes[:0]
		for n := 2; n <= top; n *= 2 {
			sizes = append(sizes, n)
		}
		p.maxSize = MaxSize
	}
	p.bufSize = buffSize(p.maxSize, pageSize)
	if cfg.DataValidation {
		l, err := newDVLayout(cfg, p.size)
		if err != nil {
			return nil, fail(err, err.Error()+"\n")
		}
		p.dv = l
	}
	p.msgs = make([]msgPlan, len(sizes))
	for i, n := range sizes {
		p.msgs[i] = p.msgPlan(cfg, n)
	}
	return notes, nil
}

// msgPlan is how messages of size n are posted.
func (p *plan) msgPlan(cfg *Config, n int) msgPlan {
	step := uint64(inc(n, p.cacheLine))
	cycle := uint64(p.pageSize)
	m := msgPlan{size: n, step: step, cycle: cycle, wrap: cycle / step * step, small: uint64(n) <= cycle/2}
	sends := cfg.Verb == perftest.Send || cfg.Verb == perftest.SendImm
	m.stepRemote = m.small && !sends
	m.listStepRemote = m.small || cfg.Verb == perftest.Atomic
	m.inline = n <= p.inline && cfg.Verb != perftest.Read && cfg.Verb != perftest.Atomic && !cfg.DataValidation
	m.recvLength = n
	if cfg.Connection == perftest.UD {
		m.recvLength += UDAddition
	}
	m.recvSmall = m.recvLength <= p.pageSize/2
	if cfg.UseSRQ {
		b := p.mtu.Bytes()
		m.recvLength = (m.recvLength + b - 1) / b * b
	}
	if cfg.Verb == perftest.WriteImm {
		m.recvLength = 0
	}
	return m
}
