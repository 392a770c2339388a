package bench

import (
	"errors"
	"fmt"
	"io"
	"math/rand/v2"

	"github.com/pvperf/pvperf/perftest"
	"github.com/pvperf/pvperf/verbs"
)

// Fixed parameters of perftest's resources.
const (
	defQKey     = 0x11111111 // UD QKey
	minRNRTimer = 12         // 0.64 ms
	hopLimit    = 0xFF
	atomicAdd   = 1 // FETCH_AND_ADD addend
	atomicSwap  = 0 // CMP_AND_SWAP swap (compare 0)
)

// endpoint is one side's resources: perftest's pingpong_context.
type endpoint struct {
	cfg *Config
	// syncAt is when this side last entered a barrier with its peer: no
	// message of the next loop left the peer before it.
	syncAt int64
	// tick, when set, gets each second of a duration run's loop (the
	// interval lines), or each period of a --run_infinitely loop (its
	// rows).
	tick func(interval)
	// endless, when not nil, makes the next bandwidth loop a
	// --run_infinitely one: it ends when the channel is closed.
	endless *endlessLoop
	// debugOut gets --data_validation_debug's lines.
	debugOut io.Writer
	// turn is the polling loops' turns (nil: the loops run locked to
	// their thread).
	turn *turns
	dev  verbs.Device
	ctx  verbs.Context
	attr verbs.DeviceAttr
	port verbs.PortAttr

	// plan is what the run does: sizes, MTU, inline, outstanding reads,
	// GID index, buffer layout.
	plan    *plan
	gid     verbs.GID // the GID at plan.gidIndex
	gidType verbs.GIDType

	pd     verbs.PD
	mem    verbs.Memory
	mr     verbs.MR
	buf    []byte
	sendCh verbs.CompChannel
	recvCh verbs.CompChannel
	scq    verbs.CQ
	rcq    verbs.CQ
	srq    verbs.SRQ
	qps    []verbs.QP
	ahs    []verbs.AH
	// udQPN and udQKey, with -R, are the UD peers the connection
	// manager gave (in place of the keys' QPN and perftest's Q_Key).
	udQPN  []uint32
	udQKey []uint32
	my     []perftest.Dest
	rem    []perftest.Dest
}

// slot returns the per-QP buffer offset i (send slots are 0..n-1, receive
// and target slots n..2n-1), in units of BUFF_SIZE.
func (e *endpoint) slot(i int) uint64 { return e.mr.Addr() + uint64(i*e.plan.bufSize) }

// bestGID returns perftest's automatic GID index for a port.
func bestGID(ctx verbs.Context, port int, preferIPv6 bool) (int, error) {
	table, err := ctx.GIDTable(port)
	if err != nil {
		return -1, err
	}
	best := verbs.BestGID(table, preferIPv6)
	if best < 0 {
		return -1, errors.New("no usable GID")
	}
	return best, nil
}

func randPSN() uint32 { return rand.Uint32() & 0xFFFFFF }

// inc is perftest's INC(size, cache_line): the step between consecutive
// messages in a buffer.
func inc(size, cacheLine int) int {
	if size > cacheLine {
		return (size + cacheLine - 1) / cacheLine * cacheLine
	}
	return cacheLine
}

// buffSize is perftest's BUFF_SIZE(size, cycle_buffer).
func buffSize(size, cycle int) int { return max(size, cycle) }

func (e *endpoint) close() error {
	var errs []error
	add := func(err error) {
		if err != nil {
			errs = append(errs, err)
		}
	}
	for _, a := range e.ahs {
		if a != nil {
			add(a.Close())
		}
	}
	for _, q := range e.qps {
		if q != nil {
			add(q.Close())
		}
	}
	for _, c := range []interface{ Close() error }{e.srq, e.scq, e.rcq, e.mr, e.sendCh, e.recvCh, e.mem, e.pd, e.ctx} {
		if c != nil {
			add(c.Close())
		}
	}
	return errors.Join(errs...)
}

// accessFlags is what the MR and the QPs allow the peer (perftest's
// setup_mr_flags and ctx_modify_qp_to_init).
func (cfg *Config) mrAccess() verbs.Access {
	a := verbs.AccessLocalWrite
	switch cfg.Verb {
	case perftest.Write, perftest.WriteImm:
		a |= verbs.AccessRemoteWrite
	case perftest.Read:
		a |= verbs.AccessRemoteRead
	case perftest.Atomic:
		a |= verbs.AccessRemoteAtomic
	}
	a |= cfg.dvAccess()
	if cfg.relaxedOrdering() {
		a |= verbs.AccessRelaxedOrdering
	}
	return a
}

// relaxedOrdering tells whether memory regions are registered with relaxed
// ordering: unless --disable_pcie_relaxed, and never for write_lat (whose
// polling on the last byte of the buffer needs the writes in order).
func (cfg *Config) relaxedOrdering() bool {
	return !cfg.NoRelaxedOrdering && !(cfg.Test == perftest.Latency && (cfg.Verb == perftest.Write || cfg.Verb == perftest.WriteImm))
}

// pollBatch is the fixed CQE poll batch: perftest's CTX_POLL_BATCH unless
// the configuration says otherwise.
func (cfg *Config) pollBatch() int {
	if cfg.PollBatch < 1 {
		return 16
	}
	return cfg.PollBatch
}

// dvAccess is what --data_validation adds to the memory region's and the
// QPs' access: the markers' fetch-and-add (and, for WRITE, reads).
func (cfg *Config) dvAccess() verbs.Access {
	switch {
	case !cfg.DataValidation:
		return 0
	case cfg.Verb == perftest.Read:
		return verbs.AccessRemoteAtomic
	}
	return verbs.AccessRemoteAtomic | verbs.AccessRemoteRead
}

func (cfg *Config) qpAccess() verbs.Access {
	switch cfg.Verb {
	case perftest.Write, perftest.WriteImm:
		return verbs.AccessRemoteWrite | cfg.dvAccess()
	case perftest.Read:
		return verbs.AccessRemoteRead | cfg.dvAccess()
	case perftest.Atomic:
		return verbs.AccessRemoteAtomic
	}
	return verbs.AccessRemoteWrite | verbs.AccessLocalWrite
}

// setup creates the buffers, PD, MR, CQs, SRQ and QPs (perftest's
// ctx_init) as the plan lays them out.
func (e *endpoint) setup() error {
	cfg, p := e.cfg, e.plan
	var err error
	if e.pd, err = e.ctx.AllocPD(); err != nil {
		return fmt.Errorf("Couldn't allocate PD: %w", err)
	}
	total := inc(p.bufSize, p.cacheLine) * 2 * cfg.NumQPs
	if cfg.Connection == perftest.UD {
		total += p.cacheLine
	}
	if p.dv != nil {
		total = int(p.dv.total)
	}
	if e.mem, err = e.ctx.AllocMemory(total); err != nil {
		return fmt.Errorf("Couldn't allocate work buf: %w", err)
	}
	e.buf = e.mem.Bytes()
	if p.dv != nil {
		p.dv.fill(e.buf)
		if cfg.DataValidationDebug {
			fmt.Fprintf(e.debugOut, "Data validation: Initialized patterns (0x01, 0x02, 0x03), payload_size=%d\n", p.dv.payload)
			fmt.Fprintf(e.debugOut, "Data validation: tail_markers at offset %d, recv_slots at offset %d, total buffer %d (64-byte aligned)\n", p.dv.markers, p.dv.slots, p.dv.total)
		}
	} else if cfg.PayloadFile != "" {
		pattern, err := readPayload(cfg.PayloadFile, p.maxSize)
		if err != nil {
			return fmt.Errorf("Failed to create MR: %w", err)
		}
		// write_lat polls on the last byte of a buffer that starts zeroed.
		if !(cfg.Test == perftest.Latency && (cfg.Verb == perftest.Write || cfg.Verb == perftest.WriteImm)) {
			fill(e.buf, pattern)
		}
	} else {
		e.fillPattern()
	}
	if e.mr, err = e.pd.RegMR(e.buf, cfg.mrAccess()); err != nil {
		return fmt.Errorf("Couldn't allocate MR: %w", err)
	}
	if cfg.Events {
		if e.sendCh, err = e.ctx.CreateCompChannel(); err != nil {
			return fmt.Errorf("Couldn't create completion channel: %w", err)
		}
		if cfg.Verb.HasReceives() {
			if e.recvCh, err = e.ctx.CreateCompChannel(); err != nil {
				return fmt.Errorf("Couldn't create completion channel: %w", err)
			}
		}
	}
	// A validated run's send queue also holds the markers' fetch-and-adds
	// (perftest makes it three times tx_depth).
	sqDepth := cfg.TxDepth
	if p.dv != nil {
		sqDepth *= 3
	}
	if e.scq, err = e.ctx.CreateCQ(verbs.CQInit{Entries: sqDepth * cfg.NumQPs, Channel: e.sendCh, Vector: cfg.CompVector}); err != nil {
		return fmt.Errorf("Couldn't create CQ: %w", err)
	}
	if cfg.Verb.HasReceives() {
		if e.rcq, err = e.ctx.CreateCQ(verbs.CQInit{Entries: cfg.RxDepth * cfg.NumQPs, Channel: e.recvCh, Vector: cfg.CompVector}); err != nil {
			return fmt.Errorf("Couldn't create a receiver CQ: %w", err)
		}
	} else {
		e.rcq = e.scq
	}
	if cfg.UseSRQ {
		if e.srq, err = e.pd.CreateSRQ(verbs.SRQInit{MaxWR: cfg.RxDepth, MaxSGE: 1}); err != nil {
			return fmt.Errorf("Couldn't create SRQ: %w", err)
		}
	}
	qpType, ok := qpTypes[cfg.Connection]
	if !ok {
		return fmt.Errorf("Couldn't create QP: connection type %v: %w", cfg.Connection, verbs.ErrNotSupported)
	}
	e.qps = make([]verbs.QP, cfg.NumQPs)
	e.ahs = make([]verbs.AH, cfg.NumQPs)
	for i := range e.qps {
		init := verbs.QPInit{
			Type: qpType, SendCQ: e.scq, RecvCQ: e.rcq,
			Cap: verbs.QPCap{MaxSendWR: sqDepth, MaxSendSGE: 1, MaxInlineData: e.plan.inline},
		}
		if cfg.Verb.HasReceives() && !cfg.UseSRQ {
			init.Cap.MaxRecvWR = cfg.RxDepth
			init.Cap.MaxRecvSGE = 1
		}
		if cfg.UseSRQ {
			init.SRQ = e.srq
		}
		if !cfg.Verb.HasReceives() && !cfg.UseSRQ {
			init.Cap.MaxRecvWR = 1
			init.Cap.MaxRecvSGE = 1
		}
		if e.qps[i], err = e.pd.CreateQP(init); err != nil {
			return fmt.Errorf("Couldn't create QP: %w", err)
		}
		// With -R the connection manager's attributes move the QP.
		if cfg.RdmaCM {
			continue
		}
		if err := e.toInit(e.qps[i]); err != nil {
			return fmt.Errorf("Failed to modify QP to INIT: %w", err)
		}
	}
	return nil
}

func (e *endpoint) toInit(q verbs.QP) error {
	a := verbs.QPAttr{State: verbs.StateInit, PKeyIndex: uint16(e.plan.pkeyIndex), Port: uint8(e.cfg.IBPort)}
	mask := verbs.AttrState | verbs.AttrPKeyIndex | verbs.AttrPort
	if e.cfg.Connection == perftest.UD {
		a.QKey = defQKey
		mask |= verbs.AttrQKey
	} else {
		a.Access = e.cfg.qpAccess()
		mask |= verbs.AttrAccessFlags
	}
	return q.Modify(&a, mask)
}

// qpTypes are the queue pair types of the connection types pvperf runs.
var qpTypes = map[perftest.Connection]verbs.QPType{perftest.RC: verbs.RC, perftest.UC: verbs.UC, perftest.UD: verbs.UD}

// localDests fills e.my: what each QP tells its peer.
func (e *endpoint) localDests() {
	n := e.cfg.NumQPs
	e.my = make([]perftest.Dest, n)
	for i := range e.my {
		e.my[i] = perftest.Dest{
			LID:      e.port.LID,
			OutReads: uint16(e.plan.outReads),
			QPN:      e.qps[i].Num(),
			PSN:      randPSN(),
			RKey:     e.mr.RKey(),
			VAddr:    e.slot(n + i),
			GID:      e.gid,
		}
		if e.plan.dv != nil {
			e.my[i].VAddr = e.dvVAddr(i)
			e.my[i].TailMarkersVAddr = e.mr.Addr() + e.plan.dv.markers
		}
	}
}

// ahAttr is the address of the peer of QP i.
func (e *endpoint) ahAttr(i int) verbs.AHAttr {
	cfg := e.cfg
	r := &e.rem[i]
	a := verbs.AHAttr{DLID: r.LID, SL: uint8(cfg.SL), Port: uint8(cfg.IBPort)}
	if cfg.DLID != 0 {
		a.DLID = uint16(cfg.DLID)
	}
	if e.plan.gidIndex >= 0 {
		a.IsGlobal = true
		a.GRH = verbs.GRH{DGID: verbs.GID(r.GID), SGIDIndex: uint8(e.plan.gidIndex), HopLimit: hopLimit, TrafficClass: uint8(cfg.TClass)}
		if len(cfg.FlowLabel) > 0 {
			a.GRH.FlowLabel = uint32(cfg.FlowLabel[i%len(cfg.FlowLabel)])
		}
	}
	return a
}

// connect moves every QP to RTR, and to RTS when it sends (perftest's
// ctx_connect: the server of a unidirectional bandwidth test stays in RTR).
func (e *endpoint) connect(sends bool) error {
	cfg := e.cfg
	for i, q := range e.qps {
		r := &e.rem[i]
		a := verbs.QPAttr{State: verbs.StateRTR, AH: e.ahAttr(i)}
		mask := verbs.AttrState
		if cfg.Connection != perftest.UD {
			a.PathMTU = e.plan.mtu
			a.DestQPN = r.QPN
			a.RQPSN = r.PSN
			mask |= verbs.AttrAV | verbs.AttrPathMTU | verbs.AttrDestQPN | verbs.AttrRQPSN
			if cfg.Connection == perftest.RC {
				a.MaxDestRdAtomic = uint8(e.my[i].OutReads)
				a.MinRNRTimer = minRNRTimer
				mask |= verbs.AttrMinRNRTimer | verbs.AttrMaxDestRdAtomic
			}
		}
		if err := q.Modify(&a, mask); err != nil {
			return fmt.Errorf("Failed to modify QP %d to RTR: %w", q.Num(), err)
		}
		if sends {
			b := verbs.QPAttr{State: verbs.StateRTS, SQPSN: e.my[i].PSN}
			mask := verbs.AttrState | verbs.AttrSQPSN
			if cfg.Connection == perftest.RC {
				b.Timeout = uint8(cfg.QPTimeout)
				b.RetryCnt = 7
				b.RNRRetry = 7
				b.MaxRdAtomic = uint8(r.OutReads)
				mask |= verbs.AttrTimeout | verbs.AttrRetryCnt | verbs.AttrRNRRetry | verbs.AttrMaxQPRdAtomic
			}
			if err := q.Modify(&b, mask); err != nil {
				return fmt.Errorf("Failed to modify QP to RTS: %w", err)
			}
			if cfg.Connection == perftest.UD {
				ah, err := e.pd.CreateAH(a.AH)
				if err != nil {
					return fmt.Errorf("Failed to create AH: %w", err)
				}
				e.ahs[i] = ah
			}
		}
	}
	return nil
}
