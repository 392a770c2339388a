package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"

	"github.com/pvperf/pvperf/bench"
	"github.com/pvperf/pvperf/devices"
	"github.com/pvperf/pvperf/internal/interrupt"
	"github.com/pvperf/pvperf/internal/version"
	"github.com/pvperf/pvperf/reports"
	"github.com/pvperf/pvperf/verbs"
)

// Main runs test ("write_bw", ...) with the command line args (without the
// program name), as perftest's main does: it parses and checks the
// options, chooses the device and runs the benchmark. It returns the exit
// status: 0 on success, 1 on any error, and 1 after -h and -V as perftest.
// The first interrupt (Ctrl-C) or SIGTERM cancels the run's context, so the
// run ends with a message; a second one kills the process, and so does the
// end of interrupt.Grace (exit status 1) if the run is still not done.
func Main(test string, args []string, stdout, stderr io.Writer) int {
	return MainAs(test, test, args, stdout, stderr)
}

// MainAs is Main for a program invoked as prog (its argv[0]: the usage
// text and the option parser's messages name it, as perftest's do).
func MainAs(test, prog string, args []string, stdout, stderr io.Writer) int {
	ctx, stop := interrupt.Context(test, interrupt.Grace, stderr)
	defer stop()
	return mainContext(ctx, test, prog, args, stdout, stderr)
}

// MainContext is Main with the caller's context.
func MainContext(ctx context.Context, test string, args []string, stdout, stderr io.Writer) int {
	return mainContext(ctx, test, test, args, stdout, stderr)
}

func mainContext(ctx context.Context, test, prog string, args []string, stdout, stderr io.Writer) int {
	cfg, err := ParseAs(test, prog, args, stdout, stderr)
	if err != nil {
		var f *Failure
		if !errors.As(err, &f) && !errors.Is(err, ErrHelp) && !errors.Is(err, ErrVersion) {
			fmt.Fprintf(stderr, " %v\n", err)
		}
		return 1
	}
	if _, err := Run(ctx, cfg, stdout, stderr); err != nil {
		if !errors.Is(err, errReported) {
			fmt.Fprint(stderr, bench.PerftestMessage(err))
		}
		return failStatus(test, &cfg, err)
	}
	return 0
}

// failStatus is the exit status of a failed run: 1, as perftest's for
// every error, but 17 where perftest's main returns that for a failed
// measurement loop (send_bw, send_lat, read_lat, atomic_lat, and read_bw
// with -a).
func failStatus(test string, cfg *bench.Config, err error) int {
	if !bench.MeasurementFailed(err) {
		return 1
	}
	switch test {
	case "send_bw", "send_lat", "read_lat", "atomic_lat":
		return 17
	case "read_bw":
		if cfg.AllSizes {
			return 17
		}
	}
	return 1
}

// errReported: the error's message is already on stderr.
var errReported = errors.New("cli: reported")

// Run runs a configuration that Parse returned: it chooses the device
// (printing perftest's messages when there is none), opens the connection
// manager when -z or -R asks for it, and runs the benchmark. The error's
// perftest message (bench.PerftestMessage) is not printed.
func Run(ctx context.Context, cfg bench.Config, stdout, stderr io.Writer) (reports.Run, error) {
	dev, ok := findDevice(cfg.Device, stderr)
	if !ok {
		return reports.Run{}, fmt.Errorf("no device %q: %w", cfg.Device, errReported)
	}
	cfg.PvperfVersion = version.Version
	if cfg.RunInfinitely && cfg.StopTraffic == nil {
		// perftest's SIGINT handler ends the endless loop, and the run
		// then ends as usual.
		cfg.StopTraffic = func() (<-chan struct{}, func()) { return interrupt.Soft(ctx) }
	}
	if n := Procs(dev, cfg.Loopback || cfg.DataValidation, os.Getenv("GOMAXPROCS")); n > 0 {
		defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(n))
	}
	if cfg.CMExchange || cfg.RdmaCM {
		m, err := devices.CM(dev)
		if err != nil {
			fmt.Fprintf(stderr, " %v\n Unable to create RDMA_CM resources\n", err)
			return reports.Run{}, fmt.Errorf("%w: %w", err, errReported)
		}
		defer m.Close()
		cfg.CM = m
	}
	return bench.Run(ctx, cfg, dev, stdout, stderr)
}

// Procs is the number of processors Go's scheduler gets for a run on dev
// (0: leave it), given the environment's GOMAXPROCS. On a kernel device
// one side of a test is one goroutine polling the device, and with one
// processor its loop takes turns with the scheduler rather than being
// preempted by it (bench's turns). The emulator works in the process, a
// loopback run polls from two goroutines and --data_validation checks
// the data from a goroutine beside the loop (shared: any of them): they
// keep every processor. GOMAXPROCS, when set, decides.
func Procs(dev verbs.Device, shared bool, env string) int {
	if env != "" || shared || dev.Kind() == verbs.KindEmulated {
		return 0
	}
	return 1
}

// findDevice chooses the device as perftest's ctx_find_dev does: the one
// called name, or the first one, with perftest's messages when there is
// none.
func findDevice(name string, stderr io.Writer) (verbs.Device, bool) {
	dev, err := devices.Find(name)
	if err == nil {
		return dev, true
	}
	switch {
	case !errors.Is(err, devices.ErrNoDevice):
		fmt.Fprintf(stderr, " %v\n", err)
	case name == "":
		fmt.Fprint(stderr, " Did not detect devices \n If device exists, check if driver is up\n")
	default:
		if list, lerr := devices.List(); lerr == nil && len(list) == 0 {
			fmt.Fprint(stderr, " Did not detect devices \n If device exists, check if driver is up\n")
		} else {
			fmt.Fprintf(stderr, "IB device %s not found\n", name)
		}
	}
	fmt.Fprint(stderr, " Unable to find the Infiniband/RoCE device\n")
	if runtime.GOOS != "linux" {
		fmt.Fprintf(stderr, " pvperf drives RDMA devices, and runs its emulated device, on Linux only (this is %s)\n", runtime.GOOS)
	}
	return nil, false
}
