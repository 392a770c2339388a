package oob

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"sync"
	"time"

	"github.com/pvperf/pvperf/perftest"
)

// Timeouts.
const (
	// DefaultTimeout bounds each exchange unless Config.Timeout or
	// SetTimeout say otherwise.
	DefaultTimeout = 5 * time.Second
	// MinConnectTimeout is the least a connection attempt waits for an
	// answer ([Dial]): with the TCP's retransmission of a lost SYN after
	// 1, 2, 4 and 8 s, it covers four losses, and a host stalled for
	// seconds (a loaded or nested virtual machine).
	MinConnectTimeout = 30 * time.Second
	// NoTimeout, as a timeout, lets exchanges wait forever (as perftest does).
	NoTimeout time.Duration = -1
)

// Role is the side of a connection: the client writes first in every
// exchange, the server reads first.
type Role uint8

// Roles.
const (
	Client Role = iota
	Server
)

func (r Role) String() string {
	if r == Server {
		return "server"
	}
	return "client"
}

// Config configures a Conn. The zero value is valid: version 6.29, 5 s per
// exchange, the negotiation struct in 320 bytes (a server answers in its
// client's size).
type Config struct {
	// Version is the version string advertised to the peer (1 to 15 bytes;
	// default DefaultVersion). It also selects this side's behaviour: see
	// FeaturesFor.
	Version string
	// Timeout bounds each exchange: 0 means DefaultTimeout, a negative
	// value (NoTimeout) means no limit.
	Timeout time.Duration
	// ParamsSize is the size of the negotiation struct: ParamsSize (320,
	// perftest built with mlx5dv as distributions ship it) or
	// ParamsSizeNoMLX5DV (312). Both sides must use the same size. With 0,
	// the default, a client sends ParamsSize and a server answers in the
	// size its client sent.
	ParamsSize int
}

// Conn is one side of perftest's out-of-band TCP connection. See the
// package documentation for ownership, concurrency and error conventions.
type Conn struct {
	nc         net.Conn
	role       Role
	timeout    time.Duration
	local      string
	localV     float64
	paramsSize int
	paramsAny  bool // a server answers the negotiation in its client's size

	remote  string
	remoteV float64
	haveVer bool
	feat    Features

	closeOnce sync.Once
	closeErr  error
	// keepOpen: CloseHandshake does not close the connection.
	keepOpen bool
}

// KeepAlive is the TCP keep-alive of the connection: a peer that stopped
// answering (its host down, the link cut) is found within about 13 s of
// silence (5 s idle, then 4 probes 2 s apart), where the kernel's default
// takes over two hours. A live peer's kernel answers the probes even while
// its process is busy or stopped.
var KeepAlive = net.KeepAliveConfig{Enable: true, Idle: 5 * time.Second, Interval: 2 * time.Second, Count: 4}

// NewConn returns a Conn for role over nc, which it takes ownership of.
// It fails (without closing nc) if cfg is invalid.
func NewConn(nc net.Conn, role Role, cfg Config) (*Conn, error) {
	if role != Client && role != Server {
		return nil, fmt.Errorf("oob: new conn: invalid role %d", role)
	}
	auto := cfg.ParamsSize == 0
	cfg, err := cfg.normalize()
	if err != nil {
		return nil, err
	}
	if tc, ok := nc.(*net.TCPConn); ok {
		// A peer whose host or link is gone sends no FIN: the waits
		// without a timeout (a server waiting for its client's end of
		// the test) learn of it from the kernel's probes instead.
		_ = tc.SetKeepAliveConfig(KeepAlive)
	}
	return &Conn{
		nc:         nc,
		role:       role,
		timeout:    cfg.Timeout,
		local:      cfg.Version,
		localV:     ParseVersion(cfg.Version),
		paramsSize: cfg.ParamsSize,
		paramsAny:  auto && role == Server,
	}, nil
}

// normalize fills in the defaults and checks cfg.
func (cfg Config) normalize() (Config, error) {
	if cfg.Version == "" {
		cfg.Version = DefaultVersion
	}
	if _, err := encodeVersion(cfg.Version); err != nil {
		return cfg, fmt.Errorf("oob: config: %w", err)
	}
	switch cfg.ParamsSize {
	case 0:
		cfg.ParamsSize = ParamsSize
	case ParamsSize, ParamsSizeNoMLX5DV:
	default:
		return cfg, fmt.Errorf("oob: config: params size %d, want %d or %d", cfg.ParamsSize, ParamsSize, ParamsSizeNoMLX5DV)
	}
	cfg.Timeout = normTimeout(cfg.Timeout)
	return cfg, nil
}

func normTimeout(d time.Duration) time.Duration {
	switch {
	case d == 0:
		return DefaultTimeout
	case d < 0:
		return NoTimeout
	}
	return d
}

// Timeout returns the current per-exchange timeout (NoTimeout: none).
func (c *Conn) Timeout() time.Duration { return c.timeout }

// SetTimeout sets the per-exchange timeout for the following exchanges: 0
// restores DefaultTimeout, NoTimeout (or any negative value) removes the
// limit. Use it around an exchange that waits for the test to run.
func (c *Conn) SetTimeout(d time.Duration) { c.timeout = normTimeout(d) }

// Close closes the connection. It is safe to call more than once and from
// any goroutine; later calls return the first call's result.
func (c *Conn) Close() error {
	c.closeOnce.Do(func() {
		if err := c.nc.Close(); err != nil {
			c.closeErr = fmt.Errorf("oob: close: %w", err)
		}
	})
	return c.closeErr
}

// Step names, as in error messages.
const (
	stepVersion      = "version"
	stepPageSize     = "page size"
	stepCacheLine    = "cache line size"
	stepMTU          = "mtu"
	stepNegotiate    = "negotiation"
	stepKey          = "key"
	stepRaw          = "data"
	stepDone         = "done"
	stepReportSize   = "bw report size"
	stepReportIters  = "bw report iters"
	stepReportPeak   = "bw report bw_peak"
	stepReportAvg    = "bw report bw_avg"
	stepReportRate   = "bw report msgRate_avg"
	stepReportAvgP1  = "bw report bw_avg_p1"
	stepReportRateP1 = "bw report msgRate_avg_p1"
	stepReportAvgP2  = "bw report bw_avg_p2"
	stepReportRateP2 = "bw report msgRate_avg_p2"
)

// exchange sends out and receives len(in) bytes into in, in the order of
// c's role, within one timeout.
func (c *Conn) exchange(step string, out, in []byte) error {
	if err := c.setDeadline(step); err != nil {
		return err
	}
	if c.role == Client {
		if err := c.write(step, out); err != nil {
			return err
		}
		return c.read(step, in)
	}
	if err := c.read(step, in); err != nil {
		return err
	}
	return c.write(step, out)
}

func (c *Conn) setDeadline(step string) error {
	var t time.Time
	if c.timeout > 0 {
		t = time.Now().Add(c.timeout)
	}
	if err := c.nc.SetDeadline(t); err != nil {
		return c.ioError(step, "write", err)
	}
	return nil
}

func (c *Conn) write(step string, b []byte) error {
	if _, err := c.nc.Write(b); err != nil {
		return c.ioError(step, "write", err)
	}
	return nil
}

func (c *Conn) read(step string, b []byte) error {
	if mc, ok := c.nc.(MessageConn); ok {
		return c.readMessage(mc, step, b)
	}
	n, err := io.ReadFull(c.nc, b)
	if err == nil {
		return nil
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		err = fmt.Errorf("got %d of %d bytes: %w", n, len(b), err)
	}
	return c.ioError(step, "read", err)
}

// readMessage reads one message of exactly len(b) bytes.
func (c *Conn) readMessage(mc MessageConn, step string, b []byte) error {
	n, err := mc.ReadMessage(b)
	if err != nil {
		return c.ioError(step, "read", err)
	}
	if n != len(b) {
		return &ExchangeError{Step: step, Op: "read", Server: c.role == Server, Data: b[:n],
			Err: fmt.Errorf("a message of %d bytes, want %d: %w", n, len(b), ErrMalformed)}
	}
	return nil
}

// ioError classifies an I/O error.
func (c *Conn) ioError(step, op string, err error) error {
	var class error
	var ne net.Error
	switch {
	case errors.Is(err, os.ErrDeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		class = ErrTimeout
	case errors.Is(err, net.ErrClosed), errors.Is(err, io.ErrClosedPipe):
		class = ErrClosed
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		class = ErrPeerClosed
	}
	if class != nil {
		err = fmt.Errorf("%w: %w", class, err)
	}
	return &ExchangeError{Step: step, Op: op, Server: c.role == Server, Err: err}
}

func (c *Conn) needVersion(step string) error {
	if !c.haveVer {
		return fmt.Errorf("oob: exchange %s: peer version not exchanged yet: %w", step, ErrIncompatible)
	}
	return nil
}

// ExchangeVersion exchanges the 16-byte version strings and returns the
// peer's. If the peer is older than 5.70 it also returns a *VersionError
// (wrapping ErrIncompatible): perftest prints its message and exits.
func (c *Conn) ExchangeVersion() (string, error) {
	out, err := encodeVersion(c.local)
	if err != nil { // cannot happen: NewConn checked it
		return "", fmt.Errorf("oob: exchange version: %w", err)
	}
	var in [VersionSize]byte
	if err := c.exchange(stepVersion, out[:], in[:]); err != nil {
		return "", err
	}
	c.remote = versionString(in[:])
	c.remoteV = ParseVersion(c.remote)
	c.haveVer = true
	c.feat = FeaturesFor(c.localV, c.remoteV)
	if c.remoteV < MinPeerVersion {
		return c.remote, &VersionError{Remote: c.remote, Value: c.remoteV}
	}
	return c.remote, nil
}

// SysData is perftest's system data exchange: the page size (its
// cycle_buffer) and the L1 cache line size.
type SysData struct {
	PageSize      int32
	CacheLineSize int32
}

// Max returns the field-wise maximum, which both sides use after the
// exchange.
func (s SysData) Max(o SysData) SysData {
	return SysData{PageSize: max(s.PageSize, o.PageSize), CacheLineSize: max(s.CacheLineSize, o.CacheLineSize)}
}

// ExchangeSysData exchanges the page size and then the cache line size
// (two exchanges of 4 bytes big-endian) if Features.SysData, and returns
// the values to use: the maximum of both sides, or local if there was no
// exchange.
func (c *Conn) ExchangeSysData(local SysData) (SysData, error) {
	if err := c.needVersion(stepPageSize); err != nil {
		return local, err
	}
	if !c.feat.SysData {
		return local, nil
	}
	var remote SysData
	var out, in [4]byte
	binary.BigEndian.PutUint32(out[:], uint32(local.PageSize))
	if err := c.exchange(stepPageSize, out[:], in[:]); err != nil {
		return local, err
	}
	remote.PageSize = int32(binary.BigEndian.Uint32(in[:]))
	if err := c.checkSize(stepPageSize, in[:], remote.PageSize, maxPageSize); err != nil {
		return local, err
	}
	binary.BigEndian.PutUint32(out[:], uint32(local.CacheLineSize))
	if err := c.exchange(stepCacheLine, out[:], in[:]); err != nil {
		return local, err
	}
	remote.CacheLineSize = int32(binary.BigEndian.Uint32(in[:]))
	sd := local.Max(remote)
	if err := c.checkSize(stepCacheLine, in[:], remote.CacheLineSize, sd.PageSize); err != nil {
		return local, err
	}
	return sd, nil
}

// The largest page size a peer may announce: buffers are sized and aligned
// by it, once per QP.
const maxPageSize = 1 << 20

// checkSize refuses a page or cache line size from the peer that is not a
// power of two up to limit. Zero or less means none (the local one is
// used, as perftest's maximum of both does).
func (c *Conn) checkSize(step string, msg []byte, v, limit int32) error {
	if v <= 0 || v&(v-1) == 0 && v <= limit {
		return nil
	}
	return &ExchangeError{Step: step, Op: "decode", Server: c.role == Server, Data: bytes.Clone(msg),
		Err: fmt.Errorf("%d, want a power of two up to %d: %w", v, limit, ErrMalformed)}
}

// ExchangeMTU exchanges the MTU (Features.MTUSize bytes of ASCII) if
// Features.MTU and returns the MTU to use (EffectiveMTU), or local if there
// was no exchange. RawEth tests do not call it.
func (c *Conn) ExchangeMTU(local MTU) (MTU, error) {
	if err := c.needVersion(stepMTU); err != nil {
		return local, err
	}
	if !c.feat.MTU {
		return local, nil
	}
	in := make([]byte, c.feat.MTUSize)
	if err := c.exchange(stepMTU, EncodeMTU(local, c.feat.MTUSize), in); err != nil {
		return local, err
	}
	return EffectiveMTU(local, ParseMTU(in)), nil
}

// Negotiate exchanges the parameter-negotiation struct (in the Conn's
// ParamsSize, or a server's client's; see Config) if Features.Negotiate,
// and returns the peer's struct, or nil
// if there was no exchange. If the peer's settings differ it also returns
// the first difference as a *MismatchError (see Compare): perftest prints
// its message, then " Failed to negotiate parameters\n", and exits 1.
func (c *Conn) Negotiate(local *Params) (*Params, error) {
	if err := c.needVersion(stepNegotiate); err != nil {
		return nil, err
	}
	if !c.feat.Negotiate {
		return nil, nil
	}
	var in []byte
	size := c.paramsSize
	if c.paramsAny { // the client's struct first, to learn its size
		var err error
		if in, err = c.readParamsAny(); err != nil {
			return nil, err
		}
		size = len(in)
	}
	out, err := local.Marshal(size)
	if err != nil {
		return nil, err
	}
	if c.paramsAny {
		err = c.write(stepNegotiate, out)
	} else {
		in = make([]byte, size)
		err = c.exchange(stepNegotiate, out, in)
	}
	if err != nil {
		return nil, err
	}
	remote, err := ParseParams(in)
	if err != nil { // cannot happen: the size is right
		return nil, fmt.Errorf("oob: exchange %s: %w", stepNegotiate, err)
	}
	return &remote, Compare(local, &remote)
}

// paramsTail is how long a server waits for the last bytes of a client's
// 320-byte negotiation struct once 312 have come. A client writes the
// struct at once and then waits for the answer, so the bytes of a
// 320-byte struct come with the others; a 312-byte client sends no more.
var paramsTail = 250 * time.Millisecond // a variable for tests

// readParamsAny sets the exchange's deadline and reads a client's
// negotiation struct of either size.
func (c *Conn) readParamsAny() ([]byte, error) {
	var deadline time.Time
	if c.timeout > 0 {
		deadline = time.Now().Add(c.timeout)
	}
	if err := c.nc.SetDeadline(deadline); err != nil {
		return nil, c.ioError(stepNegotiate, "read", err)
	}
	b := make([]byte, ParamsSize)
	if mc, ok := c.nc.(MessageConn); ok {
		n, err := mc.ReadMessage(b)
		if err != nil {
			return nil, c.ioError(stepNegotiate, "read", err)
		}
		if n != ParamsSize && n != ParamsSizeNoMLX5DV {
			return nil, &ExchangeError{Step: stepNegotiate, Op: "read", Server: true, Data: b[:n],
				Err: fmt.Errorf("a message of %d bytes, want %d or %d: %w", n, ParamsSize, ParamsSizeNoMLX5DV, ErrMalformed)}
		}
		return b[:n], nil
	}
	short := ParamsSizeNoMLX5DV
	if err := c.read(stepNegotiate, b[:short]); err != nil {
		return nil, err
	}
	tail := time.Now().Add(paramsTail)
	if !deadline.IsZero() && deadline.Before(tail) {
		tail = deadline
	}
	if err := c.nc.SetReadDeadline(tail); err != nil {
		return nil, c.ioError(stepNegotiate, "read", err)
	}
	n, err := io.ReadFull(c.nc, b[short:])
	if err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			err = fmt.Errorf("got %d of %d bytes: %w", short+n, ParamsSize, err)
		}
		return nil, c.ioError(stepNegotiate, "read", err)
	}
	if err := c.nc.SetReadDeadline(deadline); err != nil {
		return nil, c.ioError(stepNegotiate, "read", err)
	}
	switch {
	case err == nil:
		return b, nil
	case n == 0:
		return b[:short], nil
	}
	// Part of the tail came: a 320-byte struct, the rest on its way.
	if err := c.read(stepNegotiate, b[short+n:]); err != nil {
		return nil, err
	}
	return b, nil
}

// Handshake exchanges one key message each way (perftest's
// ctx_hand_shake) in format f, and returns the peer's key. Both sides must
// use the same format.
func (c *Conn) Handshake(f KeyFormat, local perftest.Dest) (perftest.Dest, error) {
	if f == KeyRaw {
		return c.rawHandshake(local)
	}
	out, err := MarshalKey(&local, f)
	if err != nil {
		return perftest.Dest{}, err
	}
	in := make([]byte, len(out))
	if err := c.exchange(stepKey, out, in); err != nil {
		return perftest.Dest{}, err
	}
	remote, err := parseKey(in, f)
	if err != nil {
		return perftest.Dest{}, &ExchangeError{Step: stepKey, Op: "decode", Server: c.role == Server, Data: in, Err: err}
	}
	return remote, nil
}

// rawHandshake is Handshake over the rdma_cm exchange: this side sends
// the layout its peer's version reads, and reads the peer's own, of
// either size.
func (c *Conn) rawHandshake(local perftest.Dest) (perftest.Dest, error) {
	mc, ok := c.nc.(MessageConn)
	if !ok {
		return perftest.Dest{}, fmt.Errorf("oob: exchange %s: raw keys need a message connection: %w", stepKey, ErrIncompatible)
	}
	if err := c.needVersion(stepKey); err != nil {
		return perftest.Dest{}, err
	}
	out, err := MarshalRawKey(&local, rawKeySizeFor(c.remoteV))
	if err != nil {
		return perftest.Dest{}, err
	}
	if err := c.setDeadline(stepKey); err != nil {
		return perftest.Dest{}, err
	}
	var in [RawKeySize + 1]byte
	var n int
	read := func() error {
		var err error
		if n, err = mc.ReadMessage(in[:]); err != nil {
			return c.ioError(stepKey, "read", err)
		}
		return nil
	}
	if c.role == Client {
		if err := c.write(stepKey, out); err != nil {
			return perftest.Dest{}, err
		}
		if err := read(); err != nil {
			return perftest.Dest{}, err
		}
	} else {
		if err := read(); err != nil {
			return perftest.Dest{}, err
		}
		if err := c.write(stepKey, out); err != nil {
			return perftest.Dest{}, err
		}
	}
	remote, err := parseRawKey(in[:n])
	if err != nil {
		return perftest.Dest{}, &ExchangeError{Step: stepKey, Op: "decode", Server: c.role == Server, Data: in[:n], Err: err}
	}
	return remote, nil
}

// doneMsg is what perftest before 6.17 writes after the close handshake.
var doneMsg = []byte("done\x00")

// CloseHandshake is perftest's ctx_close_connection: one more key
// handshake, then (if Features.SendDone) a best-effort "done\0", then
// closing the connection (unless KeepOpen was called). The connection is closed even if the handshake
// fails.
func (c *Conn) CloseHandshake(f KeyFormat, local perftest.Dest) (perftest.Dest, error) {
	remote, err := c.Handshake(f, local)
	if err == nil && c.haveVer && c.feat.SendDone {
		// The peer never reads it and may have closed already (the race
		// perftest 6.17 fixed by removing the write): errors do not count.
		if c.setDeadline(stepDone) == nil {
			_ = c.write(stepDone, doneMsg)
		}
	}
	if c.keepOpen {
		return remote, err
	}
	if cerr := c.Close(); err == nil && cerr != nil {
		err = cerr
	}
	return remote, err
}

// KeepOpen has CloseHandshake leave the connection open, for pvperf's own
// message after it (see ExchangeExtra); Close still closes it.
func (c *Conn) KeepOpen() { c.keepOpen = true }

// BWReport is one side's BW result (perftest's struct bw_report_data), in
// the sender's units (MiB/s or Gb/s, per --report_gbits).
type BWReport struct {
	Size         uint64
	Iters        uint64 // 32 bits on the wire with peers older than 5.33
	BWPeak       float64
	BWAvg        float64
	MsgRateAvg   float64
	BWAvgP1      float64 // --report-per-port only
	MsgRateAvgP1 float64
	BWAvgP2      float64
	MsgRateAvgP2 float64
}

// ExchangeReports exchanges BW reports (perftest's xchg_bw_reports): size,
// iters, bw_peak, bw_avg, msgRate_avg and, with perPort
// (--report-per-port), bw_avg_p1, msgRate_avg_p1, bw_avg_p2,
// msgRate_avg_p2, each as its own exchange, big-endian (doubles as their
// IEEE-754 bits). It returns the peer's report.
func (c *Conn) ExchangeReports(local BWReport, perPort bool) (BWReport, error) {
	var remote BWReport
	if err := c.needVersion(stepReportSize); err != nil {
		return remote, err
	}
	be := binary.BigEndian
	var out, in [8]byte
	u64 := func(step string, v uint64, n int) (uint64, error) {
		if n == 4 {
			be.PutUint32(out[:], uint32(v))
		} else {
			be.PutUint64(out[:], v)
		}
		if err := c.exchange(step, out[:n], in[:n]); err != nil {
			return 0, err
		}
		if n == 4 {
			return uint64(be.Uint32(in[:])), nil
		}
		return be.Uint64(in[:]), nil
	}
	f64 := func(step string, v float64, dst *float64) error {
		bits, err := u64(step, math.Float64bits(v), 8)
		*dst = math.Float64frombits(bits)
		return err
	}
	var err error
	if remote.Size, err = u64(stepReportSize, local.Size, 8); err != nil {
		return remote, err
	}
	if remote.Iters, err = u64(stepReportIters, local.Iters, c.feat.ReportItersSize); err != nil {
		return remote, err
	}
	steps := []struct {
		step string
		v    float64
		dst  *float64
	}{
		{stepReportPeak, local.BWPeak, &remote.BWPeak},
		{stepReportAvg, local.BWAvg, &remote.BWAvg},
		{stepReportRate, local.MsgRateAvg, &remote.MsgRateAvg},
	}
	if perPort {
		steps = append(steps, []struct {
			step string
			v    float64
			dst  *float64
		}{
			{stepReportAvgP1, local.BWAvgP1, &remote.BWAvgP1},
			{stepReportRateP1, local.MsgRateAvgP1, &remote.MsgRateAvgP1},
			{stepReportAvgP2, local.BWAvgP2, &remote.BWAvgP2},
			{stepReportRateP2, local.MsgRateAvgP2, &remote.MsgRateAvgP2},
		}...)
	}
	for _, s := range steps {
		if err := f64(s.step, s.v, s.dst); err != nil {
			return remote, err
		}
	}
	return remote, nil
}
