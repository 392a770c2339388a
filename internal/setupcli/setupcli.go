// Package setupcli is the cm_setup command (cmd/cm_setup, and the cm_setup
// subcommand of cmd/pvperf): the connection-setup benchmark of package
// cmbench on the command line, in the manner of librdmacm's cmtime. Main
// holds no state between calls.
package setupcli

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"runtime"
	"runtime/pprof"
	"strings"
	"sync"
	"time"

	"github.com/spf13/pflag"

	"github.com/pvperf/pvperf/cmbench"
	"github.com/pvperf/pvperf/devices"
	"github.com/pvperf/pvperf/internal/cli"
	"github.com/pvperf/pvperf/internal/interrupt"
	"github.com/pvperf/pvperf/internal/outfile"
	"github.com/pvperf/pvperf/internal/version"
)

// Name is the command's name.
const Name = "cm_setup"

// Exit statuses.
const (
	ExitOK    = 0
	ExitError = 1 // the benchmark failed
	ExitUsage = 2 // bad command line
)

// DefaultPort is the server's port (perftest's).
const DefaultPort = 18515

const usage = `Usage: cm_setup [OPTION]... [SERVER]

Times the setup of RDMA connections through the connection manager
(rdma_cm), step by step, in the manner of librdmacm's cmtime: without
SERVER, accepts a client's connections; with SERVER, opens --connections
RC connections to it, each phase (create ids, resolve addresses, resolve
routes, create QPs, connect, disconnect, destroy) for all of them before
the next, and prints per step the phase's time and the distribution over
connections. Start the server first. --loopback runs both sides here.

`

// options is the parsed command line.
type options struct {
	device      string
	port        int
	conns       int
	bind        string
	timeoutMS   int
	retries     int
	peerTimeout time.Duration
	loopback    bool
	jsonFile    string
	csvFile     string
	cpuProfile  string
	server      string
}

// Main runs the command with args and returns its exit status.
func Main(args []string, stdout, stderr io.Writer) int {
	o, code, ok := parse(args, stdout, stderr)
	if !ok {
		return code
	}
	for _, name := range []string{o.jsonFile, o.csvFile, o.cpuProfile} {
		if err := outfile.Check(name); err != nil {
			// Found before the connections are measured, not after.
			fmt.Fprintf(stderr, "%s: %v\n", Name, err)
			return ExitUsage
		}
	}
	ctx, stop := interrupt.Context(Name, interrupt.Grace, stderr)
	defer stop()
	if o.cpuProfile != "" {
		f, err := os.Create(o.cpuProfile)
		if err != nil {
			fmt.Fprintf(stderr, "%s: %v\n", Name, err)
			return ExitError
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintf(stderr, "%s: cpu profile: %v\n", Name, err)
			return ExitError
		}
		defer pprof.StopCPUProfile()
	}
	if err := run(ctx, o, stdout); err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", Name, err)
		return ExitError
	}
	return ExitOK
}

// parse reads the command line; ok is false when the command must exit
// with code (help, version, a usage error).
func parse(args []string, stdout, stderr io.Writer) (o options, code int, ok bool) {
	fs := pflag.NewFlagSet(Name, pflag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.SortFlags = false
	fs.StringVarP(&o.device, "ib-dev", "d", "", "use RDMA device `NAME` (default: the first; emu0 where there is none)")
	fs.IntVarP(&o.port, "port", "p", DefaultPort, "the server's `PORT`")
	fs.IntVarP(&o.conns, "connections", "c", cmbench.DefaultConns, "number of connections")
	fs.StringVarP(&o.bind, "bind", "b", "", "the client's source `ADDRESS`, the server's listening address")
	fs.IntVarP(&o.timeoutMS, "timeout", "t", int(cmbench.DefaultResolveTimeout/time.Millisecond), "timeout of an address or route resolution, in `ms`")
	fs.IntVarP(&o.retries, "retries", "r", cmbench.DefaultRetries, "times a failed resolution is tried again")
	fs.DurationVar(&o.peerTimeout, "peer-timeout", cmbench.DefaultPeerTimeout, "bound of each wait for the peer (answers, requests, disconnections)")
	fs.BoolVar(&o.loopback, "loopback", false, "run the server and the client in this process (on 127.0.0.1, or --bind)")
	fs.StringVar(&o.jsonFile, "out_json_file", "", "also write the results as JSON to `FILE` (\"-\": instead of the table, to the standard output)")
	fs.StringVar(&o.csvFile, "out_csv", "", "also write the results as CSV to `FILE` (\"-\": instead of the table, to the standard output)")
	fs.StringVar(&o.cpuProfile, "cpuprofile", "", "write a CPU profile of the run to `FILE` (go tool pprof)")
	help := fs.BoolP("help", "h", false, "print this help")
	ver := fs.BoolP("version", "V", false, "print the version")
	fs.Usage = func() {
		fmt.Fprint(stderr, usage)
		fs.PrintDefaults()
	}
	fail := func(format string, a ...any) (options, int, bool) {
		fmt.Fprintf(stderr, "%s: %s\nRun '%s --help' for usage.\n", Name, fmt.Sprintf(format, a...), Name)
		return o, ExitUsage, false
	}
	if err := fs.Parse(args); err != nil {
		return fail("%v", err)
	}
	switch {
	case *help:
		fs.SetOutput(stdout)
		fmt.Fprint(stdout, usage)
		fs.PrintDefaults()
		return o, ExitOK, false
	case *ver:
		fmt.Fprintf(stdout, "%s (pvperf) %s\n", Name, version.Version)
		return o, ExitOK, false
	case fs.NArg() > 1:
		return fail("more than one server: %s", strings.Join(fs.Args(), " "))
	case o.conns < 1:
		return fail("--connections %d: at least 1", o.conns)
	case o.port < 0 || o.port > 65535 || (o.port == 0 && !o.loopback):
		return fail("--port %d: not a port (1 to 65535)", o.port)
	case o.timeoutMS < 1:
		return fail("--timeout %d: at least 1 ms", o.timeoutMS)
	case o.retries < 0:
		return fail("--retries %d: not negative", o.retries)
	case o.peerTimeout <= 0:
		return fail("--peer-timeout %v: must be positive", o.peerTimeout)
	case o.jsonFile == "-" && o.csvFile == "-":
		return fail("only one output can go to the standard output (-)")
	}
	if fs.NArg() == 1 {
		o.server = fs.Arg(0)
		if o.loopback {
			return fail("--loopback takes no server")
		}
	}
	return o, ExitOK, true
}

// run opens the device and runs the benchmark's side (or both).
func run(ctx context.Context, o options, stdout io.Writer) error {
	dev, err := devices.Find(o.device)
	if err != nil {
		return err
	}
	// A run on a kernel device is system calls and waits for the
	// kernel's events: one processor, as the other commands choose (a
	// second only adds thread wake-ups, which cost more than the
	// commands on an emulated CPU). The emulator keeps every processor.
	if n := cli.Procs(dev, false, os.Getenv("GOMAXPROCS")); n > 0 {
		defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(n))
	}
	vctx, err := dev.Open()
	if err != nil {
		return fmt.Errorf("open %s: %w", dev.Name(), err)
	}
	defer vctx.Close()
	m, err := devices.CM(dev)
	if err != nil {
		return fmt.Errorf("%s: the connection manager: %w", dev.Name(), err)
	}
	defer m.Close()

	cfg := cmbench.Config{Context: vctx, CM: m, Conns: o.conns, Retries: o.retries,
		ResolveTimeout: time.Duration(o.timeoutMS) * time.Millisecond, PeerTimeout: o.peerTimeout}
	var results []*cmbench.Result
	switch {
	case o.loopback:
		results, err = loopback(ctx, o, cfg)
	case o.server == "":
		cfg.Role = cmbench.Server
		if cfg.Addr, err = listenAddr(ctx, o); err != nil {
			return err
		}
		var r *cmbench.Result
		if r, err = cmbench.Run(ctx, cfg); err == nil {
			results = append(results, r)
		}
	default:
		cfg.Role = cmbench.Client
		a, lerr := lookup(ctx, o.server)
		if lerr != nil {
			return lerr
		}
		cfg.Addr = netip.AddrPortFrom(a, uint16(o.port))
		if o.bind != "" {
			if cfg.Src, err = lookup(ctx, o.bind); err != nil {
				return err
			}
		}
		var r *cmbench.Result
		if r, err = cmbench.Run(ctx, cfg); err == nil {
			results = append(results, r)
		}
	}
	if err != nil {
		return err
	}
	return write(o, results, stdout)
}

// loopback runs a server and a client in this process.
func loopback(ctx context.Context, o options, cfg cmbench.Config) ([]*cmbench.Result, error) {
	addr := netip.AddrFrom4([4]byte{127, 0, 0, 1})
	if o.bind != "" {
		var err error
		if addr, err = lookup(ctx, o.bind); err != nil {
			return nil, err
		}
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	listening := make(chan netip.AddrPort, 1)
	srv := cfg
	srv.Role, srv.Addr = cmbench.Server, netip.AddrPortFrom(addr, uint16(o.port))
	srv.Listening = func(a netip.AddrPort) { listening <- netip.AddrPortFrom(addr, a.Port()) }
	var sres *cmbench.Result
	var serr error
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if sres, serr = cmbench.Run(ctx, srv); serr != nil {
			cancel(fmt.Errorf("server: %w", serr))
		}
	}()
	var cres *cmbench.Result
	var cerr error
	select {
	case a := <-listening:
		cli := cfg
		cli.Role, cli.Addr = cmbench.Client, a
		if cres, cerr = cmbench.Run(ctx, cli); cerr != nil {
			cancel(fmt.Errorf("client: %w", cerr))
		}
	case <-ctx.Done():
	}
	wg.Wait()
	if err := context.Cause(ctx); err != nil {
		return nil, err
	}
	return []*cmbench.Result{cres, sres}, nil
}

// listenAddr is where the server listens: --bind, or any address.
func listenAddr(ctx context.Context, o options) (netip.AddrPort, error) {
	a := netip.IPv4Unspecified()
	if o.bind != "" {
		var err error
		if a, err = lookup(ctx, o.bind); err != nil {
			return netip.AddrPort{}, err
		}
	}
	return netip.AddrPortFrom(a, uint16(o.port)), nil
}

// lookup resolves host (an address or a name; IPv4 first) to an address.
func lookup(ctx context.Context, host string) (netip.Addr, error) {
	if a, err := netip.ParseAddr(host); err == nil {
		return a.Unmap(), nil
	}
	ips, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return netip.Addr{}, err
	}
	for _, ip := range ips {
		if ip.Unmap().Is4() {
			return ip.Unmap(), nil
		}
	}
	if len(ips) == 0 {
		return netip.Addr{}, fmt.Errorf("no address for %s", host)
	}
	return ips[0], nil
}

// write prints the results: the tables (unless an output goes to the
// standard output instead), then the files.
func write(o options, results []*cmbench.Result, stdout io.Writer) error {
	if o.jsonFile != "-" && o.csvFile != "-" {
		for _, r := range results {
			if err := r.WriteText(stdout, "RDMA_CM connection setup (RC)"); err != nil {
				return err
			}
		}
	}
	if o.jsonFile != "" {
		if err := toFile(o.jsonFile, stdout, func(w io.Writer) error { return cmbench.WriteJSON(w, Name, version.Version, results) }); err != nil {
			return err
		}
	}
	if o.csvFile != "" {
		if err := toFile(o.csvFile, stdout, func(w io.Writer) error {
			for i, r := range results {
				if err := r.WriteCSV(w, i == 0); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			return err
		}
	}
	return nil
}

// toFile runs f on file name ("-": stdout), whole or not at all.
func toFile(name string, stdout io.Writer, f func(io.Writer) error) error {
	if name == "-" {
		return f(stdout)
	}
	return outfile.Write(name, 0o644, f)
}
