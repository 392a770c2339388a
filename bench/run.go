package bench

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"time"

	"github.com/pvperf/pvperf/bench/oob"
	"github.com/pvperf/pvperf/reports"
	"github.com/pvperf/pvperf/verbs"
)

// DefaultPeerTimeout bounds each out-of-band exchange with the peer that
// should be immediate; a peer silent that long is taken for dead.
const DefaultPeerTimeout = 5 * time.Second

// Run runs the test described by cfg on dev: as the server when
// cfg.Server is empty, as the client otherwise, or both sides in this
// process with cfg.Loopback. It writes perftest's output (header, address
// lines, result table) to out and perftest's diagnostics to errOut, and
// returns an error, whose PerftestMessage is what to print, when the test
// failed. It also returns the run's results (on a loopback run, the
// client's), complete when the error is nil.
func Run(ctx context.Context, cfg Config, dev verbs.Device, out, errOut io.Writer) (reports.Run, error) {
	if cfg.Version == "" {
		cfg.Version = ProtocolVersion
	}
	if cfg.PeerTimeout == 0 {
		cfg.PeerTimeout = DefaultPeerTimeout
	}
	if cfg.Port == 0 {
		cfg.Port = DefaultPort
	}
	if err := checkOutputs(&cfg); err != nil {
		return reports.Run{}, err
	}
	if cfg.Repeat > 1 {
		return runRepeated(ctx, cfg, dev, out, errOut)
	}
	s, err := runOnce(ctx, cfg, dev, out, errOut, nil)
	if s == nil {
		return reports.Run{}, err
	}
	return s.results(), err
}

// runOnce runs the test once and returns the session whose results are
// the run's (nil if none started); adjust, if set, adjusts each session
// before it runs.
func runOnce(ctx context.Context, cfg Config, dev verbs.Device, out, errOut io.Writer, adjust func(*session)) (*session, error) {
	if cfg.Loopback {
		// Both sides are pvperf's: what arrives is checked.
		cfg.CheckData = true
		return runLoopback(ctx, cfg, dev, out, errOut, adjust)
	}
	listens := cfg.Server == ""
	s := &session{cfg: cfg, listens: listens, server: listens != cfg.Reversed, dev: dev, out: out, errOut: errOut, ready: cfg.Listening}
	if adjust != nil {
		adjust(s)
	}
	err := s.run(ctx)
	return s, err
}

// runLoopback runs the server in a goroutine, listening on a free port of
// the loopback interface, and the client here; the client's output is the
// run's output.
func runLoopback(ctx context.Context, cfg Config, dev verbs.Device, out, errOut io.Writer, adjust func(*session)) (*session, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	scfg := cfg
	scfg.Server = ""
	scfg.Port = oob.AnyPort
	scfg.BindSourceIP = "127.0.0.1"
	scfg.IPv6Addr = false
	scfg.JSON = false
	scfg.CSVFile = ""
	scfg.HTMLFile = ""
	scfg.IntervalJSON = ""
	port := make(chan int, 1)
	// The server's output is dropped, but for the verdict of a validation
	// it ran (WRITE's), printed after the client's.
	var valOut bytes.Buffer
	srv := &session{cfg: scfg, listens: true, server: !cfg.Reversed, dev: dev, out: io.Discard, errOut: io.Discard,
		valOut: &valOut, ready: func(p int) { port <- p }}
	if adjust != nil {
		adjust(srv)
	}
	srvErr := make(chan error, 1)
	go func() { srvErr <- srv.run(ctx) }()
	var p int
	select {
	case p = <-port:
	case err := <-srvErr:
		return nil, err
	}
	ccfg := cfg
	ccfg.Server = "127.0.0.1"
	ccfg.Port = p
	ccfg.IPv6Addr = false
	ccfg.BindSourceIP = ""
	cli := &session{cfg: ccfg, server: cfg.Reversed, dev: dev, out: out, errOut: errOut}
	if adjust != nil {
		adjust(cli)
	}
	err := cli.run(ctx)
	if err != nil {
		cancel()
		// A server ended by the cancellation (or by the caller's
		// interrupt, which session.run reports as its reason) only
		// echoes the client's failure.
		if serr := <-srvErr; serr != nil && !errors.Is(serr, context.Canceled) {
			return cli, &failure{msg: PerftestMessage(err) + " (server side: " + strings.TrimSpace(PerftestMessage(serr)) + ")\n", err: err}
		}
		return cli, err
	}
	err = <-srvErr
	_, _ = valOut.WriteTo(out)
	if err != nil {
		return cli, errors.Join(errors.New("loopback server failed"), err)
	}
	return cli, nil
}
