//go:build linux

package uverbs

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pvperf/pvperf/internal/unix"
	"github.com/pvperf/pvperf/internal/wire"
	"github.com/pvperf/pvperf/verbs"
)

// Context is an opened kernel device: one open descriptor of its uverbs
// character device with its user context (GET_CONTEXT).
type Context struct {
	dev   *Device
	k     kernel
	cmd   *cmdBuf
	prov  provider
	async *os.File
	ncomp int

	// mu serialises the creation and destruction of objects; the data
	// path never takes it.
	mu       sync.Mutex
	closed   atomic.Bool
	children int // PDs, CQs, channels, memory
	memories map[*memory]struct{}
	ranges   atomic.Pointer[[][]byte] // the memories, for resolve
	objs     map[uint64]any           // user handle -> *CQ, QP or SRQ, for events
	next     uint64                   // last user handle given
	db       slab                     // rxe QPs' doorbell commands

	// noGIDIoctl is set once the kernel turned down the GID table ioctl
	// (older than 5.10): GIDTable reads sysfs from then on.
	noGIDIoctl atomic.Bool
}

var _ verbs.Context = (*Context)(nil)

// provider is what differs between kernel drivers: the driver data of
// commands and the data path of CQs, QPs and SRQs.
type provider interface {
	// contextOut is the size of GET_CONTEXT's driver output, handed to
	// setup with the context ready for commands.
	contextOut() int
	setup(c *Context, drvOut []byte) error
	// deviceAttr completes the attributes QUERY_DEVICE returned.
	deviceAttr(a *verbs.DeviceAttr)
	pdOut() int
	createCQ(c *Context, n, vector int, ch *compChannel) (verbs.CQ, error)
	createQP(pd *PD, init verbs.QPInit) (verbs.QP, error)
	createSRQ(pd *PD, init verbs.SRQInit) (verbs.SRQ, error)
	createAH(pd *PD, attr verbs.AHAttr) (verbs.AH, error)
	teardown(c *Context) error
}

func open(d *Device) (verbs.Context, error) {
	fail := func(err error) (verbs.Context, error) { return nil, verbs.NewOpError("open device", d.name, err) }
	prov, err := providerFor(d)
	if err != nil {
		return fail(err)
	}
	fd, major, minor, err := unix.OpenDevice(d.Path())
	if err != nil {
		return fail(err)
	}
	if major != d.major || minor != d.minor {
		_ = unix.Close(fd)
		return fail(fmt.Errorf("%s is device %d:%d, sysfs says %d:%d", d.Path(), major, minor, d.major, d.minor))
	}
	c, err := newContext(d, fdKernel{fd: fd, masked: d.driver != DriverRXE}, prov)
	if err != nil {
		return fail(err)
	}
	return c, nil
}

// providerFor returns the provider of d's driver.
func providerFor(d *Device) (provider, error) {
	switch d.driver {
	case DriverRXE:
		if d.abi < 1 || d.abi > abiRXE {
			return nil, verbs.Errorf(verbs.ErrNotSupported, "rdma_rxe uverbs ABI version %d (want %d)", d.abi, abiRXE)
		}
		return &rxe{}, nil
	case DriverPVRDMA:
		if d.abi != abiPVRDMA {
			return nil, verbs.Errorf(verbs.ErrNotSupported, "vmw_pvrdma uverbs ABI version %d (want %d)", d.abi, abiPVRDMA)
		}
		return newPVRDMA(), nil
	}
	return nil, verbs.Errorf(verbs.ErrNotSupported, "driver %s is not supported", d.driver)
}

// newContext creates the user context on k (GET_CONTEXT), which it owns
// from then on, even on failure.
func newContext(d *Device, k kernel, prov provider) (*Context, error) {
	c := &Context{dev: d, k: k, prov: prov, memories: map[*memory]struct{}{}, objs: map[uint64]any{},
		db: slab{size: rxeDoorbellSize}}
	var err error
	if c.cmd, err = newCmdBuf(k); err != nil {
		_ = k.close()
		return nil, err
	}
	var resp getContextResp
	drv := make([]byte, prov.contextOut())
	if err := c.cmd.exec(cmdGetContext, &respOnly{}, nil, &resp, drv); err != nil {
		c.release()
		return nil, fmt.Errorf("get context: %w", err)
	}
	c.ncomp = int(resp.NumCompVectors)
	if c.async, err = unix.EventFile(int(resp.AsyncFD), "async event"); err != nil {
		_ = unix.Close(int(resp.AsyncFD))
		c.release()
		return nil, err
	}
	if err := prov.setup(c, drv); err != nil {
		c.release()
		return nil, err
	}
	return c, nil
}

// release closes the descriptors and frees the command buffer.
func (c *Context) release() {
	if c.async != nil {
		_ = c.async.Close()
	}
	if c.cmd != nil {
		_ = c.cmd.close()
	}
	_ = c.db.release()
	_ = c.k.close()
}

func (c *Context) err(op string, err error) error {
	// The kernel refuses a new object with EAGAIN when it would go over
	// the rdma cgroup's limit (rdma.max): say so, since the errno alone
	// ("resource temporarily unavailable") suggests trying again.
	var errno unix.Errno
	if errors.As(err, &errno) && errno == unix.EAGAIN && !errors.Is(err, os.ErrDeadlineExceeded) {
		err = verbs.Errorf(errno, "%v (over a limit of the rdma cgroup, rdma.max, or of the device)", errno)
	}
	return verbs.NewOpError(op, c.dev.name, err)
}

// Device returns the device the context was opened on.
func (c *Context) Device() verbs.Device { return c.dev }

// exec runs a command; see cmdBuf.exec.
func (c *Context) exec(cmd uint32, req any, drvIn []byte, resp any, drvOut []byte) error {
	return c.cmd.exec(cmd, req, drvIn, resp, drvOut)
}

// QueryDevice returns the device's attributes (QUERY_DEVICE).
func (c *Context) QueryDevice() (verbs.DeviceAttr, error) {
	if c.closed.Load() {
		return verbs.DeviceAttr{}, c.err("query device", verbs.ErrClosed)
	}
	var r queryDeviceResp
	if err := c.exec(cmdQueryDevice, &respOnly{}, nil, &r, nil); err != nil {
		return verbs.DeviceAttr{}, c.err("query device", err)
	}
	a := verbs.DeviceAttr{
		NodeGUID:              binary.BigEndian.Uint64(r.NodeGUID[:]),
		SysImageGUID:          binary.BigEndian.Uint64(r.SysImageGUID[:]),
		MaxMRSize:             r.MaxMRSize,
		PageSizeCap:           r.PageSizeCap,
		VendorID:              r.VendorID,
		VendorPartID:          r.VendorPartID,
		HWVersion:             r.HWVer,
		MaxQP:                 int(r.MaxQP),
		MaxQPWR:               int(r.MaxQPWR),
		Flags:                 verbs.DeviceCapFlags(r.DeviceCapFlags),
		MaxSGE:                int(r.MaxSGE),
		MaxSGERd:              int(r.MaxSGERd),
		MaxCQ:                 int(r.MaxCQ),
		MaxCQE:                int(r.MaxCQE),
		MaxMR:                 int(r.MaxMR),
		MaxPD:                 int(r.MaxPD),
		MaxQPRdAtom:           int(r.MaxQPRdAtom),
		MaxEERdAtom:           int(r.MaxEERdAtom),
		MaxResRdAtom:          int(r.MaxResRdAtom),
		MaxQPInitRdAtom:       int(r.MaxQPInitRdAtom),
		MaxEEInitRdAtom:       int(r.MaxEEInitRdAtom),
		AtomicCap:             verbs.AtomicCap(r.AtomicCap),
		MaxEE:                 int(r.MaxEE),
		MaxRDD:                int(r.MaxRDD),
		MaxMW:                 int(r.MaxMW),
		MaxRawIPv6QP:          int(r.MaxRawIPv6QP),
		MaxRawEthyQP:          int(r.MaxRawEthyQP),
		MaxMcastGrp:           int(r.MaxMcastGrp),
		MaxMcastQPAttach:      int(r.MaxMcastQPAttach),
		MaxTotalMcastQPAttach: int(r.MaxTotalMcastQPAttach),
		MaxAH:                 int(r.MaxAH),
		MaxFMR:                int(r.MaxFMR),
		MaxMapPerFMR:          int(r.MaxMapPerFMR),
		MaxSRQ:                int(r.MaxSRQ),
		MaxSRQWR:              int(r.MaxSRQWR),
		MaxSRQSGE:             int(r.MaxSRQSGE),
		MaxPKeys:              int(r.MaxPKeys),
		LocalCAAckDelay:       r.LocalCAAckDelay,
		PhysPortCnt:           int(r.PhysPortCnt),
		NumCompVectors:        c.ncomp,
		NUMANode:              c.dev.numaNode,
	}
	a.FWVersion = fwVersion(c.dev.driver, r.FWVer)
	c.prov.deviceAttr(&a)
	return a, nil
}

// fwVersion formats QUERY_DEVICE's firmware version as the driver's
// rdma-core provider does: major.minor.sub_minor from bits 47..32, 31..16
// and 15..0, the sub-minor in three digits for vmw_pvrdma.
func fwVersion(driver string, raw uint64) string {
	format := "%d.%d.%d"
	if driver == DriverPVRDMA {
		format = "%d.%d.%03d"
	}
	return fmt.Sprintf(format, raw>>32&0xffff, raw>>16&0xffff, raw&0xffff)
}

// QueryPort returns a port's attributes (QUERY_PORT).
func (c *Context) QueryPort(port int) (verbs.PortAttr, error) {
	if c.closed.Load() {
		return verbs.PortAttr{}, c.err("query port", verbs.ErrClosed)
	}
	if port < 1 || port > 255 {
		return verbs.PortAttr{}, c.err("query port", verbs.Errorf(unix.EINVAL, "no port %d", port))
	}
	var r queryPortResp
	if err := c.exec(cmdQueryPort, &queryPortReq{PortNum: uint8(port)}, nil, &r, nil); err != nil {
		return verbs.PortAttr{}, c.err("query port", err)
	}
	return verbs.PortAttr{
		State:         verbs.PortState(r.State),
		MaxMTU:        verbs.MTU(r.MaxMTU),
		ActiveMTU:     verbs.MTU(r.ActiveMTU),
		GIDTblLen:     int(r.GIDTblLen),
		PortCapFlags:  r.PortCapFlags,
		MaxMsgSz:      r.MaxMsgSz,
		BadPKeyCntr:   r.BadPKeyCntr,
		QKeyViolCntr:  r.QKeyViolCntr,
		PKeyTblLen:    r.PKeyTblLen,
		LID:           r.LID,
		SMLID:         r.SMLID,
		LMC:           r.LMC,
		MaxVLNum:      r.MaxVLNum,
		SMSL:          r.SMSL,
		SubnetTimeout: r.SubnetTimeout,
		InitTypeReply: r.InitTypeReply,
		ActiveWidth:   r.ActiveWidth,
		ActiveSpeed:   r.ActiveSpeed,
		PhysState:     r.PhysState,
		LinkLayer:     verbs.LinkLayer(r.LinkLayer),
		Flags:         r.Flags,
	}, nil
}

// QueryGID returns entry index of a port's GID table, from sysfs.
func (c *Context) QueryGID(port, index int) (verbs.GIDEntry, error) {
	if c.closed.Load() {
		return verbs.GIDEntry{}, c.err("query gid", verbs.ErrClosed)
	}
	e, err := gidEntry(c.dev.name, port, index)
	if err != nil {
		return verbs.GIDEntry{}, c.err("query gid", err)
	}
	return e, nil
}

// GIDTable returns the used entries of a port's GID table: from one ioctl
// (QUERY_GID_TABLE), or from sysfs on kernels without it. Sysfs needs two
// files for each used entry and one for each unused one (rdma_rxe has 1024
// entries), which takes seconds on a slow machine.
func (c *Context) GIDTable(port int) ([]verbs.GIDEntry, error) {
	if c.closed.Load() {
		return nil, c.err("gid table", verbs.ErrClosed)
	}
	pa, err := c.QueryPort(port)
	if err != nil {
		return nil, err
	}
	if !c.noGIDIoctl.Load() {
		t, err := c.gidTableIoctl(port)
		switch {
		case err == nil:
			return t, nil
		case errors.Is(err, unix.ENOTTY), errors.Is(err, unix.EPROTONOSUPPORT), errors.Is(err, unix.EOPNOTSUPP):
			c.noGIDIoctl.Store(true)
		case errors.Is(err, errGIDTableTooLarge):
		default:
			return nil, c.err("gid table", err)
		}
	}
	t, err := gidTable(c.dev.name, port, pa.GIDTblLen)
	if err != nil {
		return nil, c.err("gid table", err)
	}
	return t, nil
}

var errGIDTableTooLarge = errors.New("gid table too large for one ioctl")

// gidTableIoctl returns port's entries of the device's GID table, which
// QUERY_GID_TABLE returns for every port at once.
func (c *Context) gidTableIoctl(port int) ([]verbs.GIDEntry, error) {
	da, err := c.QueryDevice()
	if err != nil {
		return nil, err
	}
	size := 0
	for p := 1; p <= da.PhysPortCnt; p++ {
		pa, err := c.QueryPort(p)
		if err != nil {
			return nil, err
		}
		size += pa.GIDTblLen
	}
	if size == 0 {
		return nil, nil
	}
	if size*gidEntrySize > 0xffff {
		// An attribute's length is 16 bits.
		return nil, errGIDTableTooLarge
	}
	buf, err := mmapAnon(size*gidEntrySize + 8)
	if err != nil {
		return nil, err
	}
	defer func() { _ = munmap(buf) }()
	entries, count := buf[:size*gidEntrySize], buf[size*gidEntrySize:][:8]
	err = c.cmd.ioctl(objectDevice, methodQueryGIDTable, driverIDs[c.dev.driver], []ioctlAttr{
		{AttrID: attrGIDTableEntrySize, Len: 8, Flags: attrMandatory, Data: gidEntrySize},
		{AttrID: attrGIDTableFlags, Len: 4, Flags: attrMandatory},
		{AttrID: attrGIDTableRespEntries, Len: uint16(len(entries)), Flags: attrMandatory, Data: unix.Addr(entries)},
		{AttrID: attrGIDTableRespNumEntries, Len: 8, Flags: attrMandatory, Data: unix.Addr(count)},
	})
	if err != nil {
		return nil, err
	}
	n := binary.LittleEndian.Uint64(count)
	if n > uint64(size) {
		return nil, fmt.Errorf("query gid table: %d entries returned for a table of %d", n, size)
	}
	var out []verbs.GIDEntry
	names := map[uint32]string{}
	for i := range int(n) {
		var e gidEntryABI
		if _, err := wire.Decode(entries[i*gidEntrySize:], &e); err != nil {
			return nil, err
		}
		if int(e.PortNum) != port {
			continue
		}
		g := verbs.GIDEntry{Index: int(e.GIDIndex), GID: verbs.GID(e.GID), Type: verbs.GIDTypeRoCEv1}
		// sysfs, and so QueryGID, call types 0 (IB) and 1 (RoCE v1) alike.
		if e.GIDType == 2 {
			g.Type = verbs.GIDTypeRoCEv2
		}
		if e.NetdevIfindex != 0 {
			name, ok := names[e.NetdevIfindex]
			if !ok {
				if ifi, err := net.InterfaceByIndex(int(e.NetdevIfindex)); err == nil {
					name = ifi.Name
				}
				names[e.NetdevIfindex] = name
			}
			g.Netdev = name
		}
		out = append(out, g)
	}
	return out, nil
}

// track registers a new object for the events that name it by user handle
// and returns the handle. Called with c.mu held.
func (c *Context) track(o any) uint64 {
	c.next++
	c.objs[c.next] = o
	return c.next
}

func (c *Context) lookup(handle uint64) any {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.objs[handle]
}

// AllocMemory returns n bytes of zeroed, page-aligned memory outside the Go
// heap, kept out of child processes.
func (c *Context) AllocMemory(n int) (verbs.Memory, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed.Load() {
		return nil, c.err("alloc memory", verbs.ErrClosed)
	}
	if n <= 0 {
		return nil, c.err("alloc memory", verbs.Errorf(unix.EINVAL, "size %d", n))
	}
	b, err := mmapAnon(n)
	if err != nil {
		return nil, c.err("alloc memory", err)
	}
	if err := unix.MadviseDontFork(b); err != nil {
		_ = munmap(b)
		return nil, c.err("alloc memory", err)
	}
	m := &memory{c: c, b: b}
	c.memories[m] = struct{}{}
	c.children++
	c.snapshot()
	return m, nil
}

// snapshot publishes the list of memories for resolve. Called with c.mu
// held.
func (c *Context) snapshot() {
	r := make([][]byte, 0, len(c.memories))
	for m := range c.memories {
		r = append(r, m.b)
	}
	c.ranges.Store(&r)
}

// resolve returns the n bytes at virtual address addr when they lie in
// memory of this context (inline sends copy them into the work request).
// It takes no lock.
func (c *Context) resolve(addr uint64, n int) ([]byte, bool) {
	r := c.ranges.Load()
	if r == nil {
		return nil, false
	}
	for _, b := range *r {
		start := unix.Addr(b)
		if addr >= start && addr-start <= uint64(len(b)) && uint64(n) <= uint64(len(b))-(addr-start) {
			off := addr - start
			return b[off : off+uint64(n)], true
		}
	}
	return nil, false
}

// memoryOf returns the live memory that holds all of b. Called with c.mu
// held.
func (c *Context) memoryOf(b []byte) *memory {
	if len(b) == 0 {
		return nil
	}
	start := unix.Addr(b)
	for m := range c.memories {
		ms := unix.Addr(m.b)
		if start >= ms && start+uint64(len(b)) <= ms+uint64(len(m.b)) {
			return m
		}
	}
	return nil
}

// CreateCompChannel creates a completion channel (CREATE_COMP_CHANNEL).
func (c *Context) CreateCompChannel() (verbs.CompChannel, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed.Load() {
		return nil, c.err("create comp channel", verbs.ErrClosed)
	}
	var r compChannelResp
	if err := c.exec(cmdCreateCompChannel, &respOnly{}, nil, &r, nil); err != nil {
		return nil, c.err("create comp channel", err)
	}
	f, err := unix.EventFile(int(r.FD), "completion channel")
	if err != nil {
		_ = unix.Close(int(r.FD))
		return nil, c.err("create comp channel", err)
	}
	c.children++
	return &compChannel{c: c, f: f, fd: int32(r.FD)}, nil
}

// CreateCQ creates a completion queue.
func (c *Context) CreateCQ(init verbs.CQInit) (verbs.CQ, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed.Load() {
		return nil, c.err("create cq", verbs.ErrClosed)
	}
	var ch *compChannel
	if init.Channel != nil {
		var ok bool
		if ch, ok = init.Channel.(*compChannel); !ok || ch.c != c {
			return nil, c.err("create cq", verbs.Errorf(unix.EINVAL, "completion channel of another context"))
		}
		if ch.closed.Load() {
			return nil, c.err("create cq", verbs.ErrClosed)
		}
	}
	if init.Entries <= 0 {
		return nil, c.err("create cq", verbs.Errorf(unix.EINVAL, "%d entries", init.Entries))
	}
	if init.Vector < 0 || init.Vector >= max(c.ncomp, 1) {
		return nil, c.err("create cq", verbs.Errorf(unix.EINVAL, "completion vector %d of %d", init.Vector, c.ncomp))
	}
	cq, err := c.prov.createCQ(c, init.Entries, init.Vector, ch)
	if err != nil {
		return nil, c.err("create cq", err)
	}
	c.children++
	if ch != nil {
		ch.users++
	}
	return cq, nil
}

// AllocPD allocates a protection domain (ALLOC_PD).
func (c *Context) AllocPD() (verbs.PD, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed.Load() {
		return nil, c.err("alloc pd", verbs.ErrClosed)
	}
	var r allocPDResp
	drv := make([]byte, c.prov.pdOut())
	if err := c.exec(cmdAllocPD, &respOnly{}, nil, &r, drv); err != nil {
		return nil, c.err("alloc pd", err)
	}
	c.children++
	return &PD{c: c, handle: r.PDHandle, drv: drv}, nil
}

// AsyncEvent waits for the next asynchronous event of the context.
func (c *Context) AsyncEvent(ctx context.Context) (verbs.AsyncEvent, error) {
	for {
		if c.closed.Load() {
			return verbs.AsyncEvent{}, c.err("get async event", verbs.ErrClosed)
		}
		var b [asyncEventSize]byte
		if err := readEvent(ctx, c.async, b[:]); err != nil {
			if c.closed.Load() {
				err = verbs.ErrClosed
			}
			return verbs.AsyncEvent{}, c.err("get async event", err)
		}
		element := binary.LittleEndian.Uint64(b[0:])
		ev := verbs.AsyncEvent{Type: verbs.EventType(binary.LittleEndian.Uint32(b[8:]))}
		switch ev.Type {
		case verbs.EventPortActive, verbs.EventPortErr, verbs.EventLIDChange, verbs.EventPKeyChange,
			verbs.EventSMChange, verbs.EventClientReregister, verbs.EventGIDChange, verbs.EventDeviceFatal:
			ev.Port = int(element)
			return ev, nil
		}
		switch o := c.lookup(element).(type) {
		case verbs.QP:
			ev.QP = o
		case verbs.CQ:
			ev.CQ = o
		case verbs.SRQ:
			ev.SRQ = o
		default:
			continue // the object is gone
		}
		return ev, nil
	}
}

// readEvent reads one event record from f, waiting until ctx is done.
func readEvent(ctx context.Context, f *os.File, b []byte) error {
	woken := make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		_ = f.SetReadDeadline(time.Unix(1, 0)) // wakes the read below
		close(woken)
	})
	defer func() {
		if !stop() {
			<-woken
			_ = f.SetReadDeadline(time.Time{})
		}
	}()
	var n int
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		var err error
		n, err = f.Read(b)
		if err == nil {
			break
		}
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			return err
		}
		if ctx.Err() == nil {
			// Another reader of f was cancelled: the deadline that woke
			// it woke this read too. Read again once it is cleared.
			time.Sleep(time.Millisecond)
		}
	}
	if n != len(b) {
		return fmt.Errorf("event of %d bytes, want %d", n, len(b))
	}
	return nil
}

// Close closes the context. It fails with EBUSY while objects created
// through it are open.
func (c *Context) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed.Load() {
		return nil
	}
	if c.children > 0 {
		return c.err("close context", verbs.Errorf(unix.EBUSY, "%d objects still open", c.children))
	}
	c.closed.Store(true)
	err := c.prov.teardown(c)
	c.release()
	return c.err("close context", err)
}
