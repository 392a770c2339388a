// Package clustercli is the cluster command (the cluster subcommand of
// cmd/pvperf): one of perftest's tests between every pair of ranks of a
// job that a launcher (Slurm, Open MPI, MPICH, Kubernetes, ...) started,
// in rounds of disjoint pairs, gathered by rank 0 into a matrix. Main holds
// no state between calls.
package clustercli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/pvperf/pvperf/bench"
	"github.com/pvperf/pvperf/cluster"
	"github.com/pvperf/pvperf/internal/cli"
	"github.com/pvperf/pvperf/internal/interrupt"
	"github.com/pvperf/pvperf/internal/outfile"
	"github.com/pvperf/pvperf/internal/version"
	"github.com/pvperf/pvperf/launch"
	"github.com/pvperf/pvperf/perftest"
	"github.com/pvperf/pvperf/reports"
)

// Name is the command's name.
const Name = "cluster"

// Exit statuses.
const (
	ExitOK      = 0
	ExitFailing = 1 // a link failed or missed a threshold, or the run failed
	ExitUsage   = 2
)

// Default ports: rank 0 listens for the ranks on DefaultRendezvousPort,
// the servers of a round's pairs on DefaultBasePort and up.
const (
	DefaultRendezvousPort = 18600
	DefaultBasePort       = 18700
)

const usage = `Usage: pvperf cluster [OPTION]... TEST [TEST OPTION]...

Runs TEST (write_bw, send_lat, ...) with its perftest options between
every pair of ranks of a job (or a ring of them, or rank 0 against each),
in rounds of disjoint pairs that run at once. Start one process per rank
with the launcher of the cluster: srun, mpirun, a Kubernetes Indexed Job,
or by hand with --rank and --size. Rank 0 gathers the results and prints
the matrix; it exits 1 when a link fails or misses a threshold.

`

type options struct {
	pattern     string
	rank, size  int
	rendezvous  string
	addr        string
	basePort    int
	pairTimeout time.Duration
	rdvTimeout  time.Duration
	minBW       float64
	maxLat      float64
	medianPct   float64
	jsonFile    string
	csvFile     string
	htmlFile    string
	verbose     bool
	test        string
	testArgs    []string
	testConfig  bench.Config
	metric      cluster.Metric
}

// Main runs the command with args and returns its exit status.
func Main(args []string, stdout, stderr io.Writer) int {
	return MainEnv(args, os.LookupEnv, stdout, stderr)
}

// MainEnv is Main with the environment read through getenv.
func MainEnv(args []string, getenv func(string) (string, bool), stdout, stderr io.Writer) int {
	o, code, ok := parse(args, stdout, stderr)
	if !ok {
		return code
	}
	ctx, stop := interrupt.Context("pvperf cluster", interrupt.Grace, stderr)
	defer stop()
	code, err := run(ctx, o, getenv, stdout, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "pvperf cluster: %s\n", strings.TrimPrefix(err.Error(), "cluster: "))
	}
	return code
}

func parse(args []string, stdout, stderr io.Writer) (o options, code int, ok bool) {
	fs := pflag.NewFlagSet(Name, pflag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.SortFlags = false
	fs.SetInterspersed(false)
	fs.StringVar(&o.pattern, "pattern", string(cluster.AllPairs), "pairs to test: all-pairs, ring or one-to-all")
	fs.IntVar(&o.rank, "rank", -1, "this process's rank (overrides the launcher's)")
	fs.IntVar(&o.size, "size", -1, "the number of ranks (overrides the launcher's)")
	fs.StringVar(&o.rendezvous, "rendezvous", "", "rank 0's `HOST:PORT` (default: the first node of Slurm's node list, or 127.0.0.1 when every rank is on this node, port 18600)")
	fs.StringVar(&o.addr, "addr", "", "the address peers reach this rank's tests at (default: the one it reaches rank 0 from)")
	fs.IntVar(&o.basePort, "base-port", DefaultBasePort, "the servers of a round listen on `PORT` and up")
	fs.DurationVar(&o.pairTimeout, "pair-timeout", cluster.DefaultPairTimeout, "bound of each pair's test")
	fs.DurationVar(&o.rdvTimeout, "rendezvous-timeout", cluster.DefaultRendezvousTimeout, "bound of the wait for every rank")
	fs.Float64Var(&o.minBW, "min_bw", 0, "a link below this bandwidth (MiB/s, or Gb/s with --report_gbits) fails")
	fs.Float64Var(&o.maxLat, "max_lat", 0, "a link above this latency (usec) fails")
	fs.Float64Var(&o.medianPct, "below_median", 0, "a link worse than `PERCENT` of the median link fails")
	fs.StringVar(&o.jsonFile, "out_json", "", "rank 0 writes the report as JSON to `FILE`")
	fs.StringVar(&o.csvFile, "out_csv", "", "rank 0 writes one CSV line per link to `FILE`")
	fs.StringVar(&o.htmlFile, "out_html", "", "rank 0 writes an HTML page with the matrix as a heatmap to `FILE`")
	fs.BoolVarP(&o.verbose, "verbose", "v", false, "every rank copies its tests' output to its standard error")
	help := fs.BoolP("help", "h", false, "print this help")
	ver := fs.BoolP("version", "V", false, "print pvperf's version")
	fs.Usage = func() { fmt.Fprint(stderr, usage); fs.PrintDefaults() }
	fail := func(format string, a ...any) (options, int, bool) {
		fmt.Fprintf(stderr, "pvperf cluster: %s\nRun 'pvperf cluster --help' for usage.\n", fmt.Sprintf(format, a...))
		return o, ExitUsage, false
	}
	if err := fs.Parse(args); err != nil {
		return fail("%v", err)
	}
	if *help {
		fs.SetOutput(stdout)
		fmt.Fprint(stdout, usage)
		fs.PrintDefaults()
		return o, ExitOK, false
	}
	if *ver {
		fmt.Fprintf(stdout, "pvperf %s\n", version.Version)
		return o, ExitOK, false
	}
	if _, err := cluster.ParsePattern(o.pattern); err != nil {
		return fail("--pattern: %v", err)
	}
	switch {
	case fs.NArg() == 0:
		return fail("no test: name one of %s", strings.Join(cli.Tests(), ", "))
	case !finite(o.minBW) || !finite(o.maxLat) || !finite(o.medianPct) || o.minBW < 0 || o.maxLat < 0 || o.medianPct < 0 || o.medianPct > 100:
		return fail("thresholds: --min_bw %v, --max_lat %v, --below_median %v: not negative, and a percentage at most 100", o.minBW, o.maxLat, o.medianPct)
	case o.pairTimeout <= 0 || o.rdvTimeout <= 0:
		return fail("timeouts must be positive")
	case o.basePort < 1 || o.basePort > 65535:
		return fail("--base-port %d: not a port", o.basePort)
	case fs.Changed("size") && o.size < 2:
		return fail("--size %d: a pair needs 2 ranks", o.size)
	case fs.Changed("rank") && (o.rank < 0 || (o.size > 0 && o.rank >= o.size)):
		return fail("--rank %d: ranks count from 0 to the size less 1", o.rank)
	}
	o.test = strings.TrimPrefix(fs.Arg(0), "ib_")
	o.testArgs = fs.Args()[1:]
	// The cluster gives each test its peer: a host, or --loopback, of the
	// command line is refused before the host is added.
	if alone, err := cli.Parse(o.test, o.testArgs, io.Discard, io.Discard); err == nil {
		switch {
		case alone.Server != "":
			return fail("%s %s: the cluster chooses each pair's peer: give no host (%s)", o.test, strings.Join(o.testArgs, " "), alone.Server)
		case alone.Loopback:
			return fail("--loopback: not with the cluster")
		}
	}
	// The test's options, checked as the test would (with a server, since
	// every pair has one); the cluster chooses ports and peers.
	var perr bytes.Buffer
	cfg, err := cli.Parse(o.test, append(append([]string(nil), o.testArgs...), "127.0.0.1"), io.Discard, &perr)
	if err != nil {
		cmdline := strings.Join(append([]string{o.test}, o.testArgs...), " ")
		return fail("%s: %s", cmdline, strings.TrimSpace(perr.String()+" "+strings.TrimPrefix(errText(err), "cli: ")))
	}
	for _, bad := range []struct {
		set  bool
		name string
	}{
		{cfg.AllSizes, "-a (one size per run)"}, {cfg.RunInfinitely, "--run_infinitely (a pair's test must end)"}, {cfg.Loopback, "--loopback"}, {cfg.Port != bench.DefaultPort, "-p (the cluster chooses the ports)"},
		{cfg.JSON || cfg.CSVFile != "" || cfg.HTMLFile != "", "a test's own output files (use --out_json, --out_csv, --out_html)"},
	} {
		if bad.set {
			return fail("%s: not with the cluster", bad.name)
		}
	}
	if o.maxLat > 0 && cfg.Test != perftest.Latency {
		return fail("--max_lat with a bandwidth test")
	}
	if o.minBW > 0 && cfg.Test == perftest.Latency {
		return fail("--min_bw with a latency test")
	}
	o.testConfig = cfg
	o.metric = cluster.Metric{Name: "bw_average", Unit: "MiB/s", HigherIsBetter: true}
	if cfg.ReportGbits {
		o.metric.Unit = "Gb/s"
	}
	if cfg.Test == perftest.Latency {
		o.metric = cluster.Metric{Name: "latency_typical", Unit: "usec"}
		if cfg.Duration > 0 {
			o.metric.Name = "latency_average"
		}
	}
	return o, ExitOK, true
}

func errText(err error) string {
	var f *cli.Failure
	if errors.As(err, &f) {
		return ""
	}
	return err.Error()
}

// run finds the rank, meets the others and runs the pairs.
func run(ctx context.Context, o options, getenv func(string) (string, bool), stdout, stderr io.Writer) (int, error) {
	info, err := launch.Detect(getenv, launch.Overrides{Rank: o.rank, Size: o.size})
	if err != nil {
		return ExitUsage, err
	}
	if info.Size < 2 {
		return ExitUsage, fmt.Errorf("%d rank(s): a pair needs 2", info.Size)
	}
	var addr string
	var ln net.Listener
	_, given := getenv("PVPERF_RENDEZVOUS")
	if info.Launcher == launch.PMI && o.rendezvous == "" && !given {
		// Rank 0 listens on a port of its own and tells the others
		// through the PMI server's key-value space.
		addr, ln, err = pmiRendezvous(o, info, getenv)
		if err != nil {
			if errors.As(err, new(usageError)) {
				return ExitUsage, err
			}
			return ExitFailing, err
		}
	} else if addr, err = rendezvousAddr(o, info, getenv); err != nil {
		return ExitUsage, err
	}
	cfg := cluster.Config{Size: info.Size, Pattern: cluster.Pattern(o.pattern), BasePort: o.basePort,
		RendezvousTimeout: o.rdvTimeout, PairTimeout: o.pairTimeout, Job: info.JobID}
	host, _ := os.Hostname()
	me := cluster.Member{Rank: info.Rank, Host: host, Addr: o.addr, Device: o.testConfig.Device}
	var verbose io.Writer
	if o.verbose {
		verbose = stderr
	}
	test := func(ctx context.Context, t cluster.Task, ready func()) cluster.Outcome {
		return runTask(ctx, o, t, ready, verbose)
	}
	if info.Rank != 0 {
		if err := cluster.Join(ctx, addr, cfg, me, test); err != nil {
			return ExitFailing, err
		}
		return ExitOK, nil
	}
	// The report files are written after the run: a path that cannot be
	// written is a usage error now, not after it.
	for _, name := range []string{o.jsonFile, o.csvFile, o.htmlFile} {
		if err := outfile.Check(name); err != nil {
			return ExitUsage, fmt.Errorf("report file: %w", err)
		}
	}
	if ln == nil {
		if ln, err = listen(addr); err != nil {
			return ExitFailing, err
		}
	}
	at := ln.Addr().String()
	if ap, err := netip.ParseAddrPort(at); err == nil && ap.Addr().IsUnspecified() && addr != "" {
		at = addr // where the ranks reach it, rather than the socket's any-address
	}
	fmt.Fprintf(stdout, " pvperf cluster: %s over %d ranks (%s, %s), rank 0 at %s\n", o.test, info.Size, o.pattern, info.Launcher, at)
	cfg.Round = func(r cluster.RoundResult) {
		var parts []string
		for _, p := range r.Pairs {
			if p.Err != "" {
				parts = append(parts, fmt.Sprintf("%d->%d failed", p.Server, p.Client))
			} else {
				parts = append(parts, fmt.Sprintf("%d->%d %.2f", p.Server, p.Client, p.Value))
			}
		}
		fmt.Fprintf(stdout, " round %d/%d (%.2f s): %s\n", r.Round, r.Rounds, r.Seconds, shorten(parts, 8))
	}
	joined := make(chan error, 1)
	jctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() { joined <- cluster.Join(jctx, addr, cfg, me, test) }()
	res, err := cluster.Coordinate(ctx, ln, cfg)
	if jerr := <-joined; err == nil && jerr != nil {
		err = jerr
	}
	if err != nil {
		return ExitFailing, err
	}
	th := cluster.Thresholds{MinBW: o.minBW, MaxLat: o.maxLat, MedianPct: o.medianPct}
	rep := cluster.NewReport(o.test, o.testArgs, info.Launcher, o.metric, th, cfg.Pattern, res)
	if err := rep.WriteText(stdout); err != nil {
		return ExitFailing, err
	}
	for _, f := range []struct {
		name  string
		write func(io.Writer) error
	}{{o.jsonFile, rep.WriteJSON}, {o.csvFile, rep.WriteCSV}, {o.htmlFile, rep.WriteHTML}} {
		if f.name == "" {
			continue
		}
		if err := outfile.Write(f.name, 0o644, f.write); err != nil {
			return ExitFailing, err
		}
	}
	if !rep.OK() {
		return ExitFailing, fmt.Errorf("%d of %d links failing", len(rep.Failing), len(rep.Links))
	}
	return ExitOK, nil
}

func shorten(parts []string, n int) string {
	if len(parts) <= n {
		return strings.Join(parts, ", ")
	}
	return strings.Join(parts[:n], ", ") + fmt.Sprintf(" and %d more", len(parts)-n)
}

// rendezvousAddr is rank 0's address: --rendezvous (or PVPERF_RENDEZVOUS),
// <job>-0.<service> in a Kubernetes Indexed Job (PVPERF_SERVICE), the
// first node of Slurm's list, or 127.0.0.1 when every rank runs on this
// node (or the launcher is the command line).
func rendezvousAddr(o options, info launch.Info, getenv func(string) (string, bool)) (string, error) {
	a := o.rendezvous
	if a == "" {
		a, _ = getenv("PVPERF_RENDEZVOUS")
	}
	if a == "" {
		switch {
		case info.Launcher == launch.Kubernetes:
			// An Indexed Job's pods are <job>-<index>, named in DNS under
			// the Job's headless service: rank 0 is <job>-0.<service>.
			svc, _ := getenv("PVPERF_SERVICE")
			host, _ := getenv("HOSTNAME")
			job, ok := strings.CutSuffix(host, "-"+strconv.Itoa(info.Rank))
			switch {
			case svc == "":
				return "", fmt.Errorf("no rendezvous: in a Kubernetes Indexed Job, set PVPERF_SERVICE to the Job's headless service, or give --rendezvous HOST:PORT")
			case !ok || job == "":
				return "", fmt.Errorf("no rendezvous: HOSTNAME=%q is not the pod's name <job>-<index> for index %d (JOB_COMPLETION_INDEX); give --rendezvous HOST:PORT", host, info.Rank)
			}
			a = job + "-0." + svc
		case len(info.Nodes) > 0:
			a = info.Nodes[0]
		case info.Launcher == launch.Flags || allLocal(info, getenv):
			a = "127.0.0.1"
		default:
			return "", fmt.Errorf("no rendezvous: the %s launcher does not say where rank 0 runs; give --rendezvous HOST:PORT (or PVPERF_RENDEZVOUS)", info.Launcher)
		}
	}
	if _, _, err := net.SplitHostPort(a); err != nil {
		a = net.JoinHostPort(a, strconv.Itoa(DefaultRendezvousPort))
	}
	_, port, err := net.SplitHostPort(a)
	if n, perr := strconv.Atoi(port); err != nil || perr != nil || n < 1 || n > 65535 {
		return "", fmt.Errorf("rendezvous %q: not HOST:PORT with a port from 1 to 65535", a)
	}
	return a, nil
}

// usageError is an error of the command line or the launcher's
// environment (exit status ExitUsage).
type usageError struct{ error }

func (e usageError) Unwrap() error { return e.error }

// allLocal tells whether the launcher says every rank is on this node.
func allLocal(info launch.Info, getenv func(string) (string, bool)) bool {
	for _, name := range []string{"OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS", "PMIX_LOCAL_SIZE"} {
		if v, ok := getenv(name); ok {
			n, err := strconv.Atoi(v)
			return err == nil && n == info.Size
		}
	}
	for _, name := range []string{"SLURM_STEP_NUM_NODES", "SLURM_NNODES"} {
		if v, ok := getenv(name); ok {
			return v == "1"
		}
	}
	return false
}

// pmiKey is the key under which rank 0 publishes its address.
const pmiKey = "pvperf-rendezvous"

// pmiRendezvous shares rank 0's address through PMI-1: rank 0 listens on
// a free port (of 127.0.0.1 when every rank is on this node, else of
// every interface) and puts its address (--addr, or this host's name),
// then every rank meets at the barrier and the others get it. Rank 0
// returns its listener.
func pmiRendezvous(o options, info launch.Info, getenv func(string) (string, bool)) (string, net.Listener, error) {
	p, err := launch.OpenPMI(info.PMIFD, 30*time.Second)
	if err != nil {
		return "", nil, usageError{err}
	}
	defer p.Close()
	var ln net.Listener
	if info.Rank == 0 {
		host := o.addr
		bind := ""
		switch {
		case host == "" && allLocal(info, getenv):
			host, bind = "127.0.0.1", "127.0.0.1"
		case host == "":
			if host, err = os.Hostname(); err != nil {
				return "", nil, err
			}
		}
		if ln, err = net.Listen("tcp", net.JoinHostPort(bind, "0")); err != nil {
			return "", nil, fmt.Errorf("rank 0: rendezvous: %w", err)
		}
		port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
		if err := p.Put(pmiKey, net.JoinHostPort(host, port)); err != nil {
			ln.Close()
			return "", nil, err
		}
	}
	if err := p.Barrier(o.rdvTimeout); err != nil {
		if ln != nil {
			ln.Close()
		}
		return "", nil, err
	}
	addr, err := p.Get(pmiKey)
	if err == nil && addr == "" {
		err = fmt.Errorf("rank 0 published no %s", pmiKey)
	}
	if err != nil {
		if ln != nil {
			ln.Close()
		}
		return "", nil, err
	}
	return addr, ln, nil
}

// listen opens rank 0's rendezvous socket on addr's port: on addr's host
// when it is (or names only) loopback addresses, else on every address.
func listen(addr string) (net.Listener, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	if !loopbackOnly(host) {
		host = ""
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(host, port))
	if err != nil {
		return nil, fmt.Errorf("rank 0: rendezvous: %w", err)
	}
	return ln, nil
}

// loopbackOnly tells whether host is a loopback address, or a name whose
// addresses are all loopback ones ("localhost").
func loopbackOnly(host string) bool {
	if ip := net.ParseIP(host); ip != nil {
		return ip.IsLoopback()
	}
	ips, err := net.LookupIP(host)
	if err != nil || len(ips) == 0 {
		return false
	}
	for _, ip := range ips {
		if !ip.IsLoopback() {
			return false
		}
	}
	return true
}

// runTask runs one side of a pair's test; a server calls ready once it
// listens. With verbose set, the test's output is copied there.
func runTask(ctx context.Context, o options, t cluster.Task, ready func(), verbose io.Writer) cluster.Outcome {
	args := append(append([]string(nil), o.testArgs...), "-p", strconv.Itoa(t.Port))
	if !t.Server {
		args = append(args, t.Peer.Addr)
	}
	var out, errOut bytes.Buffer
	var w, ew io.Writer = &out, &errOut
	if verbose != nil {
		fmt.Fprintf(verbose, "--- round %d: %s %s\n", t.Round, o.test, strings.Join(args, " "))
		w, ew = io.MultiWriter(&out, verbose), io.MultiWriter(&errOut, verbose)
	}
	cfg, err := cli.Parse(o.test, args, w, ew)
	if err != nil {
		return cluster.Outcome{Err: o.test + " " + strings.Join(args, " ") + ": " + oneLine(errOut.String(), err.Error())}
	}
	cfg.Listening = func(int) { ready() }
	res, err := cli.Run(ctx, cfg, w, ew)
	if err != nil {
		msg := errOut.String()
		if strings.TrimSpace(msg) == "" {
			msg = bench.PerftestMessage(err)
		}
		return cluster.Outcome{Err: oneLine(err.Error(), msg)}
	}
	if t.Server {
		return cluster.Outcome{}
	}
	return cluster.Outcome{Value: value(res, o.metric), Path: res.Info.DataPath}
}

// oneLine is a failed test's texts on one line, for the report's line
// (and CSV field) of its link: their lines in order, each said once, joined
// by "; ", and at most maxErrLen bytes (the end kept: the last lines say
// what ended the test).
func oneLine(texts ...string) string {
	var lines []string
	seen := map[string]bool{}
	for _, t := range texts {
		for l := range strings.SplitSeq(t, "\n") {
			l = strings.TrimSpace(l)
			if l == "" || seen[l] {
				continue
			}
			seen[l] = true
			lines = append(lines, l)
		}
	}
	s := strings.Join(lines, "; ")
	if len(s) > maxErrLen {
		s = "..." + s[len(s)-maxErrLen:]
	}
	return s
}

// maxErrLen bounds a link's error text.
const maxErrLen = 400

// value is the run's figure of metric m: the last result row's, or of a
// repeated test (--repeat), the median of that row's runs.
func value(r reports.Run, m cluster.Metric) float64 {
	if len(r.Results) == 0 {
		return 0
	}
	row := r.Results[len(r.Results)-1]
	var key string
	var v reports.Num
	switch {
	case row.BW != nil && m.Unit == "Gb/s":
		key, v = "average_Gb_per_s", row.BW.AverageGbps
	case row.BW != nil:
		key, v = "average_MiB_per_s", row.BW.AverageMiBps
	case row.Latency != nil && m.Name == "latency_average":
		key, v = "mean_us", row.Latency.MeanUs
	case row.Latency != nil:
		key, v = "typical_us", row.Latency.TypicalUs
	default:
		return 0
	}
	if r.Repeats != nil {
		for _, rr := range r.Repeats.Rows {
			if rr.Side == row.Side && rr.Size == row.Size && rr.Metric == key {
				return float64(rr.Median)
			}
		}
	}
	return float64(v)
}

// finite tells that x is a number, not NaN or an infinity.
func finite(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }
