//go:build linux

package emu

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pvperf/pvperf/internal/unix"
	"github.com/pvperf/pvperf/verbs"
	"github.com/pvperf/pvperf/verbs/pvrdma"
)

// Device is an emulated PVRDMA device. It implements verbs.Device.
type Device struct {
	name string
	cfg  Config
	prof *profile
}

var _ verbs.Device = (*Device)(nil)

// NewDevice returns an emulated device with the given name and
// configuration. Several devices, in one process or in several, reach each
// other through the QP numbers and GIDs that perftest exchanges.
func NewDevice(name string, cfg Config) (*Device, error) {
	p, ok := profiles[cfg.Profile]
	if !ok {
		return nil, fmt.Errorf("emu: %w: unknown profile %q", errBadConfig, cfg.Profile)
	}
	okRoCE := false
	for _, v := range p.roce {
		okRoCE = okRoCE || v == cfg.RoCE
	}
	if !okRoCE {
		return nil, fmt.Errorf("emu: %w: profile %s does not offer RoCE v%d", errBadConfig, cfg.Profile, cfg.RoCE)
	}
	if cfg.MTU.Bytes() == 0 {
		return nil, fmt.Errorf("emu: %w: invalid MTU %d", errBadConfig, cfg.MTU)
	}
	switch cfg.Transport {
	case "":
		cfg.Transport = TransportAuto
	case TransportAuto, TransportCopy:
	case TransportRoCE, TransportTCP:
		if !cfg.Addr.IsValid() {
			return nil, fmt.Errorf("emu: %w: transport %s needs an address", errBadConfig, cfg.Transport)
		}
	default:
		return nil, fmt.Errorf("emu: %w: unknown transport %q", errBadConfig, cfg.Transport)
	}
	return &Device{name: name, cfg: cfg, prof: p}, nil
}

func (d *Device) Name() string           { return d.name }
func (d *Device) Kind() verbs.DeviceKind { return verbs.KindEmulated }
func (d *Device) Driver() string         { return "emu/" + d.cfg.Profile }

// Config returns the device's configuration.
func (d *Device) Config() Config { return d.cfg }

// Open opens the device.
func (d *Device) Open() (verbs.Context, error) {
	nd, err := d.netdev()
	if err != nil {
		return nil, verbs.NewOpError("open device", d.name, err)
	}
	h, err := acquireHost()
	if err != nil {
		return nil, verbs.NewOpError("open device", d.name, err)
	}
	h.mu.Lock()
	idx, ok := pop(&h.freeCtx)
	h.mu.Unlock()
	if !ok {
		releaseHost()
		return nil, verbs.NewOpError("open device", d.name, verbs.Errorf(unix.ENOMEM, "too many open contexts"))
	}
	c := &devContext{dev: d, h: h, idx: idx, gids: gidTable(nd, d.cfg.RoCE), mac: nd.mac}
	c.attr = d.prof.attr
	c.attr.QPTypes = append([]verbs.QPType(nil), d.prof.attr.QPTypes...)
	c.attr.NodeGUID = guidFromMAC(nd.mac)
	c.attr.SysImageGUID = c.attr.NodeGUID
	c.port = verbs.PortAttr{
		State:        verbs.PortActive,
		MaxMTU:       verbs.MTU4096,
		ActiveMTU:    activeMTU(d.cfg, nd.mtu),
		GIDTblLen:    maxGIDs,
		PortCapFlags: 1<<16 | 1<<26, // CM_SUP | IP_BASED_GIDS, as vmw_pvrdma reports
		MaxMsgSz:     1 << 31,
		PKeyTblLen:   1,
		MaxVLNum:     1,
		ActiveWidth:  1,  // 1X
		ActiveSpeed:  32, // EDR: 25 Gb/s per lane
		PhysState:    5,  // LinkUp
		LinkLayer:    verbs.LinkEthernet,
	}
	di := &h.tab.devs[idx]
	di.roce = uint32(d.cfg.RoCE)
	di.mtu = uint32(d.cfg.MTU)
	di.ngid = uint32(len(c.gids))
	di.netOnly = 0
	store(&di.qkeyViol, 0)
	if d.cfg.Addr.IsValid() && (d.cfg.Transport == TransportRoCE || d.cfg.Transport == TransportTCP) {
		di.netOnly = 1
	}
	for i, g := range c.gids {
		di.gids[i] = g.GID
	}
	if d.cfg.Addr.IsValid() && d.cfg.Transport != TransportCopy {
		c.wire, err = acquireWire(h, d.cfg)
		if err != nil && d.cfg.Transport == TransportAuto && errors.Is(err, unix.EADDRINUSE) {
			// Another process has this address's ports: in auto mode
			// the device still reaches this host by memory copy.
			c.noWire, err = err, nil
		}
		if err != nil {
			h.mu.Lock()
			h.freeCtx = append(h.freeCtx, idx)
			h.mu.Unlock()
			releaseHost()
			return nil, verbs.NewOpError("open device", d.name, err)
		}
	}
	store(&di.live, 1)
	a := &h.tab.async[idx]
	store(&a.head, 0)
	store(&a.tail, 0)
	atomic.AddUint32(&a.gen, 1)
	h.ctxs[idx].Store(c)
	return c, nil
}

func guidFromMAC(m [6]byte) uint64 {
	return uint64(m[0]^0x02)<<56 | uint64(m[1])<<48 | uint64(m[2])<<40 | 0xff<<32 | 0xfe<<24 |
		uint64(m[3])<<16 | uint64(m[4])<<8 | uint64(m[5])
}

// devContext is an open emulated device. It implements verbs.Context and is
// the UAR of the pvrdma data path: its doorbells run the device model.
type devContext struct {
	dev  *Device
	h    *host
	idx  uint32
	attr verbs.DeviceAttr
	port verbs.PortAttr
	gids []verbs.GIDEntry
	mac  [6]byte
	qpt  pvrdma.QPTable

	mu      sync.Mutex // guards the counts below and closed
	closed  bool
	waiters sync.WaitGroup // AsyncEvent calls in progress

	nPD, nCQ, nChan, nMem, nQP, nUDQP, nSRQ int

	wire   *wirePort // the network port, nil on the copy transport only
	noWire error     // why an address in auto mode has no network port
}

var _ verbs.Context = (*devContext)(nil)

func (c *devContext) Device() verbs.Device { return c.dev }

func (c *devContext) err(op string, err error) error { return verbs.NewOpError(op, c.dev.name, err) }

// errOrNil is err for op, or nil when err is nil.
func (c *devContext) errOrNil(op string, err error) error {
	if err == nil {
		return nil
	}
	return c.err(op, err)
}

// child registers one more object of the kind counted by n; it fails once
// the context is closed or the limit is reached.
func (c *devContext) child(op string, n *int, limit int) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return c.err(op, verbs.ErrClosed)
	}
	if limit > 0 && *n >= limit {
		return c.err(op, verbs.Errorf(unix.ENOMEM, "device limit of %d reached", limit))
	}
	*n++
	return nil
}

func (c *devContext) unchild(n *int) {
	c.mu.Lock()
	*n--
	c.mu.Unlock()
}

func (c *devContext) QueryDevice() (verbs.DeviceAttr, error) {
	if c.isClosed() {
		return verbs.DeviceAttr{}, c.err("query device", verbs.ErrClosed)
	}
	a := c.attr
	a.QPTypes = append([]verbs.QPType(nil), c.attr.QPTypes...)
	return a, nil
}

func (c *devContext) isClosed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed
}

func (c *devContext) QueryPort(port int) (verbs.PortAttr, error) {
	if c.isClosed() {
		return verbs.PortAttr{}, c.err("query port", verbs.ErrClosed)
	}
	if port != 1 {
		return verbs.PortAttr{}, c.err("query port", verbs.Errorf(unix.EINVAL, "no port %d", port))
	}
	a := c.port
	a.QKeyViolCntr = load(&c.h.tab.devs[c.idx].qkeyViol)
	return a, nil
}

func (c *devContext) QueryGID(port, index int) (verbs.GIDEntry, error) {
	if c.isClosed() {
		return verbs.GIDEntry{}, c.err("query gid", verbs.ErrClosed)
	}
	if port != 1 {
		return verbs.GIDEntry{}, c.err("query gid", verbs.Errorf(unix.EINVAL, "no port %d", port))
	}
	if index < 0 || index >= maxGIDs {
		return verbs.GIDEntry{}, c.err("query gid", verbs.Errorf(unix.EINVAL, "gid index %d out of range", index))
	}
	if index >= len(c.gids) {
		return verbs.GIDEntry{}, c.err("query gid", verbs.Errorf(unix.EINVAL, "gid index %d is not in use", index))
	}
	return c.gids[index], nil
}

func (c *devContext) GIDTable(port int) ([]verbs.GIDEntry, error) {
	if c.isClosed() {
		return nil, c.err("query gid table", verbs.ErrClosed)
	}
	if port != 1 {
		return nil, c.err("query gid table", verbs.Errorf(unix.EINVAL, "no port %d", port))
	}
	return append([]verbs.GIDEntry(nil), c.gids...), nil
}

func (c *devContext) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	if n := c.nPD + c.nCQ + c.nChan + c.nMem; n > 0 {
		c.mu.Unlock()
		return c.err("close device", verbs.Errorf(unix.EBUSY, "%d objects still open", n))
	}
	c.closed = true
	c.mu.Unlock()
	h := c.h
	if c.wire != nil {
		c.wire.release()
	}
	unix.FutexWake(&h.tab.async[c.idx].seq, 1<<30)
	c.waiters.Wait()
	store(&h.tab.devs[c.idx].live, 0)
	h.ctxs[c.idx].Store(nil)
	atomic.AddUint32(&h.tab.async[c.idx].gen, 1)
	h.mu.Lock()
	h.freeCtx = append(h.freeCtx, c.idx)
	h.mu.Unlock()
	releaseHost()
	return nil
}

// memory is registered-able memory: a segment of its own.
type memory struct {
	c      *devContext
	seg    *segment
	mu     sync.Mutex
	mrs    int
	closed bool
}

func (c *devContext) AllocMemory(n int) (verbs.Memory, error) {
	if n <= 0 {
		return nil, c.err("alloc memory", verbs.Errorf(unix.EINVAL, "size %d", n))
	}
	if err := c.child("alloc memory", &c.nMem, 0); err != nil {
		return nil, err
	}
	seg, err := c.h.newSegment(n)
	if err != nil {
		c.unchild(&c.nMem)
		return nil, c.err("alloc memory", err)
	}
	m := &memory{c: c, seg: seg}
	c.h.memMu.Lock()
	c.h.mems[seg] = m
	c.h.memMu.Unlock()
	return m, nil
}

func (m *memory) Bytes() []byte {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil
	}
	b := m.seg.mem
	return b[:len(b):len(b)]
}

func (m *memory) Close() error {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil
	}
	if m.mrs > 0 {
		m.mu.Unlock()
		return m.c.err("free memory", verbs.Errorf(unix.EBUSY, "%d memory regions registered", m.mrs))
	}
	m.closed = true
	m.mu.Unlock()
	m.c.h.memMu.Lock()
	delete(m.c.h.mems, m.seg)
	m.c.h.memMu.Unlock()
	m.c.h.dropSegment(m.seg)
	m.c.unchild(&m.c.nMem)
	return nil
}

// Resolve implements pvrdma.Resolver for inline sends.
func (c *devContext) Resolve(addr uint64, n int) ([]byte, bool) {
	seg, off, ok := c.h.addrs.find(addr, n)
	if !ok {
		return nil, false
	}
	return seg.mem[off : off+n], true
}

// AsyncEvent waits for the next asynchronous event of the context.
func (c *devContext) AsyncEvent(ctx context.Context) (verbs.AsyncEvent, error) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return verbs.AsyncEvent{}, c.err("get async event", verbs.ErrClosed)
	}
	c.waiters.Add(1) // Close waits for us before the table goes away
	c.mu.Unlock()
	defer c.waiters.Done()
	a := &c.h.tab.async[c.idx]
	l := spinLock{&a.lock}
	for {
		if c.isClosed() {
			return verbs.AsyncEvent{}, c.err("get async event", verbs.ErrClosed)
		}
		seq := load(&a.seq)
		l.lock(c.h)
		if a.head != a.tail {
			e := a.ring[a.head%asyncRing]
			a.head++
			l.unlock()
			if ev, ok := c.resolveEvent(e); ok {
				return ev, nil
			}
			continue
		}
		l.unlock()
		if err := ctx.Err(); err != nil {
			return verbs.AsyncEvent{}, c.err("get async event", err)
		}
		_ = unix.FutexWait(&a.seq, seq, 50*time.Millisecond)
	}
}

const (
	objQP   = 1
	objCQ   = 2
	objSRQ  = 3
	objPort = 4
)

func (c *devContext) resolveEvent(e asyncEvent) (verbs.AsyncEvent, bool) {
	ev := verbs.AsyncEvent{Type: verbs.EventType(e.typ)}
	switch e.objKind {
	case objQP:
		q := c.h.qps[e.index%maxQPs].Load()
		if q == nil || q.gen.Load() != e.gen {
			return ev, false
		}
		ev.QP = q
	case objCQ:
		q := c.h.cqs[e.index%maxCQs].Load()
		if q == nil || q.gen != e.gen {
			return ev, false
		}
		ev.CQ = q
	case objSRQ:
		s := c.h.srqs[e.index%maxSRQs].Load()
		if s == nil || s.gen != e.gen {
			return ev, false
		}
		ev.SRQ = s
	case objPort:
		ev.Port = int(e.index)
	}
	return ev, true
}

// raiseEvent queues an asynchronous event to context ctxIdx of process p.
func (h *host) raiseEvent(p *peer, ctxIdx uint32, typ verbs.EventType, kind, index, gen uint32) {
	if ctxIdx >= maxContexts {
		return
	}
	a := &p.tab.async[ctxIdx]
	l := spinLock{&a.lock}
	l.lock(h)
	if a.tail-a.head >= asyncRing {
		a.lost++
	} else {
		a.ring[a.tail%asyncRing] = asyncEvent{typ: uint32(typ), objKind: kind, index: index, gen: gen}
		a.tail++
	}
	atomic.AddUint32(&a.seq, 1)
	l.unlock()
	unix.FutexWake(&a.seq, 1<<30)
}

// pd is a protection domain.
type pd struct {
	c     *devContext
	id    uint32
	users // children: MRs, QPs, SRQs, AHs
}

func (c *devContext) AllocPD() (verbs.PD, error) {
	if err := c.child("alloc pd", &c.nPD, c.attr.MaxPD); err != nil {
		return nil, err
	}
	return &pd{c: c, id: c.h.newPD()}, nil
}

func (p *pd) Context() verbs.Context { return p.c }

func (p *pd) child(op string) error {
	if err := p.use(); err != nil {
		return p.c.err(op, err)
	}
	return nil
}

func (p *pd) unchild() { p.unuse() }

func (p *pd) Close() error {
	if first, err := p.close("objects still use the protection domain"); !first {
		return p.c.errOrNil("dealloc pd", err)
	}
	p.c.unchild(&p.c.nPD)
	return nil
}

// mr is a memory region.
type mr struct {
	p      *pd
	mem    *memory
	idx    uint32
	key    uint32
	b      []byte
	access verbs.Access
	once   sync.Once
}

func (p *pd) RegMR(b []byte, access verbs.Access) (verbs.MR, error) {
	c := p.c
	if len(b) == 0 {
		return nil, c.err("reg mr", verbs.Errorf(unix.EINVAL, "empty buffer"))
	}
	if access&(verbs.AccessMWBind|verbs.AccessZeroBased|verbs.AccessOnDemand) != 0 {
		return nil, c.err("reg mr", verbs.Errorf(verbs.ErrNotSupported, "access flags %v", access&(verbs.AccessMWBind|verbs.AccessZeroBased|verbs.AccessOnDemand)))
	}
	if access&(verbs.AccessRemoteWrite|verbs.AccessRemoteAtomic) != 0 && access&verbs.AccessLocalWrite == 0 {
		return nil, c.err("reg mr", verbs.Errorf(unix.EINVAL, "remote write and atomic access need local write"))
	}
	if uint64(len(b)) > c.attr.MaxMRSize {
		return nil, c.err("reg mr", verbs.Errorf(unix.EINVAL, "length %d exceeds max_mr_size %d", len(b), c.attr.MaxMRSize))
	}
	addr := uint64(addrOf(b))
	seg, off, ok := c.h.addrs.find(addr, len(b))
	if !ok {
		return nil, c.err("reg mr", verbs.Errorf(unix.EFAULT, "buffer is not memory allocated by AllocMemory"))
	}
	// Find the memory object owning the segment, to pin it.
	m := c.h.memoryOf(seg)
	if m == nil {
		return nil, c.err("reg mr", verbs.Errorf(unix.EFAULT, "buffer is not memory allocated by AllocMemory"))
	}
	if err := p.child("reg mr"); err != nil {
		return nil, err
	}
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		p.unchild()
		return nil, c.err("reg mr", verbs.ErrClosed)
	}
	m.mrs++
	m.mu.Unlock()
	h := c.h
	h.mu.Lock()
	defer h.mu.Unlock()
	nmr := 0
	idx, ok := pop(&h.freeMR)
	if ok {
		h.mrGen[idx]++
		if h.mrGen[idx] == 0 {
			h.mrGen[idx] = 1
		}
		nmr = int(h.mrGen[idx])
	}
	if !ok {
		m.mu.Lock()
		m.mrs--
		m.mu.Unlock()
		p.unchild()
		return nil, c.err("reg mr", verbs.Errorf(unix.ENOMEM, "too many memory regions"))
	}
	key := h.slot<<20 | idx<<8 | uint32(nmr)
	e := &h.tab.mrs[idx]
	e.access = uint32(access)
	e.pd = p.id
	e.seg = seg.id
	e.segOff = uint64(off)
	e.addr = addr
	e.length = uint64(len(b))
	h.mrSerial++
	atomic.StoreUint64(&e.keySerial, uint64(h.mrSerial)<<32|uint64(key))
	return &mr{p: p, mem: m, idx: idx, key: key, b: b, access: access}, nil
}

func (m *mr) LKey() uint32         { return m.key }
func (m *mr) RKey() uint32         { return m.key }
func (m *mr) Addr() uint64         { return uint64(addrOf(m.b)) }
func (m *mr) Bytes() []byte        { return m.b }
func (m *mr) Access() verbs.Access { return m.access }

func (m *mr) Close() error {
	m.once.Do(func() {
		h := m.p.c.h
		atomic.StoreUint64(&h.tab.mrs[m.idx].keySerial, 0)
		h.quiesce()
		h.mu.Lock()
		h.freeMR = append(h.freeMR, m.idx)
		h.mu.Unlock()
		m.mem.mu.Lock()
		m.mem.mrs--
		m.mem.mu.Unlock()
		m.p.unchild()
	})
	return nil
}

// memoryOf finds the memory object of a segment.
func (h *host) memoryOf(s *segment) *memory {
	h.memMu.Lock()
	defer h.memMu.Unlock()
	return h.mems[s]
}

// readARP looks up the MAC of an IPv4 neighbour in /proc/net/arp.
func readARP(a netip.Addr) ([6]byte, bool) {
	var mac [6]byte
	b, err := os.ReadFile("/proc/net/arp")
	if err != nil {
		return mac, false
	}
	for _, line := range strings.Split(string(b), "\n")[1:] {
		f := strings.Fields(line)
		if len(f) < 4 || f[0] != a.String() {
			continue
		}
		var m [6]int
		if n, _ := fmt.Sscanf(f[3], "%x:%x:%x:%x:%x:%x", &m[0], &m[1], &m[2], &m[3], &m[4], &m[5]); n == 6 {
			for i := range m {
				mac[i] = byte(m[i])
			}
			return mac, true
		}
	}
	return mac, false
}

// roceHeaders bounds the bytes a RoCE packet adds to its payload on the
// interface: an IPv6 header (40), UDP (8), BTH (12), the largest extended
// header (RETH and ImmDt, 20, or AtomicETH, 28) and the ICRC (4).
const roceHeaders = 40 + 8 + 12 + 28 + 4

// activeMTU is the port's active MTU: the configured one, or where RoCE
// packets go out of an interface whose MTU (ifMTU) cannot carry them, the
// largest that it can, as rdma_rxe derives its port's MTU from its
// netdev's.
func activeMTU(cfg Config, ifMTU int) verbs.MTU {
	m := cfg.MTU
	if !cfg.Addr.IsValid() || cfg.Transport == TransportCopy || cfg.Transport == TransportTCP || ifMTU <= 0 {
		return m
	}
	for m > verbs.MTU256 && m.Bytes()+roceHeaders > ifMTU {
		m--
	}
	return m
}
