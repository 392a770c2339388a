// Command pvperf is every pvperf command in one binary. Run as
//
//	pvperf write_bw [OPTION]... [SERVER]
//
// it runs the test named by its first argument; run under a test's perftest
// name (ib_write_bw, a symlink to it) or pvperf's (write_bw), it is that
// test, so a link makes it a drop-in for scripts written for perftest.
// devinfo, report and cm_setup are subcommands too. "pvperf links DIR" creates the
// links in DIR.
package main

import (
	"debug/buildinfo"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/pvperf/pvperf/internal/cli"
	"github.com/pvperf/pvperf/internal/clustercli"
	"github.com/pvperf/pvperf/internal/comparecli"
	"github.com/pvperf/pvperf/internal/reportcli"
	"github.com/pvperf/pvperf/internal/setupcli"
	"github.com/pvperf/pvperf/internal/version"
)

func main() {
	os.Exit(run(os.Args, os.Stdout, os.Stderr))
}

// run dispatches on the program name, then on the first argument.
func run(argv []string, stdout, stderr io.Writer) int {
	if len(argv) > 0 {
		prog := filepath.Base(argv[0])
		if name, ok := command(prog); ok {
			args := argv[1:]
			if strings.HasPrefix(prog, "ib_") {
				// Under perftest's name, perftest's text alone, for
				// the scripts that read it.
				args = append([]string{"--perftest_output"}, args...)
			}
			return dispatch(name, argv[0], args, stdout, stderr)
		}
	}
	if len(argv) < 2 {
		usage(stderr)
		return 2
	}
	switch sub := argv[1]; sub {
	case "-h", "--help", "help":
		usage(stdout)
		return 0
	case "-V", "--version", "version":
		fmt.Fprintf(stdout, "pvperf %s\n", version.Version)
		return 0
	case "links":
		return links(argv[2:], stdout, stderr)
	default:
		if name, ok := command(sub); ok {
			return dispatch(name, argv[0]+" "+sub, argv[2:], stdout, stderr)
		}
		fmt.Fprintf(stderr, "pvperf: unknown command %q\n", sub)
		if prog := filepath.Base(argv[0]); prog != "pvperf" {
			// A link whose name is no command (ib_write_bw.sh): the
			// name is the problem, not the argument.
			fmt.Fprintf(stderr, "pvperf: run as %q, which is no command's name either: link it as one (ib_write_bw, write_bw, ...)\n", prog)
		}
		usage(stderr)
		return 2
	}
}

// command maps a program or subcommand name to the command it runs:
// write_bw and ib_write_bw are the test write_bw.
func command(name string) (string, bool) {
	switch name {
	case "devinfo", "report", setupcli.Name, clustercli.Name, comparecli.Name:
		return name, true
	}
	t := strings.TrimPrefix(name, "ib_")
	if slices.Contains(cli.Tests(), t) {
		return t, true
	}
	return "", false
}

// dispatch runs command name with args; a test names itself prog in its
// usage text and its option parser's messages (argv[0] under a link,
// "pvperf write_bw" as a subcommand), as perftest names its argv[0].
func dispatch(name, prog string, args []string, stdout, stderr io.Writer) int {
	switch name {
	case "devinfo":
		return cli.DevInfo(args, stdout, stderr)
	case "report":
		return reportcli.Run(args, stdout, stderr)
	case setupcli.Name:
		return setupcli.Main(args, stdout, stderr)
	case clustercli.Name:
		return clustercli.Main(args, stdout, stderr)
	case comparecli.Name:
		return comparecli.Main(args, stdout, stderr)
	}
	return cli.MainAs(name, prog, args, stdout, stderr)
}

// links creates, in the directory given, a symbolic link to this binary
// under each test's perftest name and pvperf name: relative when the
// binary is in that directory, else absolute. A separately built pvperf
// command already there under its own name stays.
func links(args []string, stdout, stderr io.Writer) int {
	switch {
	case len(args) == 1 && (args[0] == "-h" || args[0] == "--help"):
		fmt.Fprintln(stdout, "usage: pvperf links DIR")
		return 0
	case len(args) == 1 && strings.HasPrefix(args[0], "-"):
		// A directory whose name begins with - is given as ./-name.
		fmt.Fprintf(stderr, "pvperf: links: unknown option %q\nusage: pvperf links DIR\n", args[0])
		return 2
	case len(args) != 1:
		fmt.Fprintln(stderr, "usage: pvperf links DIR")
		return 2
	}
	dir := args[0]
	self, err := os.Executable()
	if err == nil {
		self, err = filepath.EvalSymlinks(self)
	}
	if err != nil {
		fmt.Fprintf(stderr, "pvperf: links: %v\n", err)
		return 1
	}
	var names []string
	for _, t := range cli.Tests() {
		names = append(names, "ib_"+t, t)
	}
	names = append(names, "devinfo", "report", setupcli.Name)
	// First every name is checked: a file that is not a link to a pvperf
	// binary (a perftest built from source, another tool's link) is left
	// as it is, and nothing is linked, rather than half of the names.
	// A separate pvperf command under its own name (go build -o bin/
	// ./cmd/... makes them) already is that command: it stays.
	var conflicts, own []string
	for _, n := range names {
		p := filepath.Join(dir, n)
		fi, err := os.Lstat(p)
		if err != nil {
			continue
		}
		target, lerr := os.Readlink(p)
		switch {
		case fi.Mode()&os.ModeSymlink != 0 && lerr == nil && (target == self || target == filepath.Base(self) || filepath.Base(target) == "pvperf"):
		case fi.Mode().IsRegular() && ownCommand(p, n):
			own = append(own, n)
		default:
			conflicts = append(conflicts, p)
		}
	}
	if len(conflicts) > 0 {
		fmt.Fprintf(stderr, "pvperf: links: not a link to pvperf, left as it is: %s\npvperf: links: nothing linked; remove these, or link elsewhere\n", strings.Join(conflicts, ", "))
		return 1
	}
	if len(own) > 0 {
		fmt.Fprintf(stderr, "pvperf: links: pvperf's own commands, left as they are: %s\n", strings.Join(own, ", "))
		names = slices.DeleteFunc(names, func(n string) bool { return slices.Contains(own, n) })
	}
	// A link beside the binary names it relatively, so that the
	// directory may be moved whole (a staged install).
	link := self
	if d, err := filepath.Abs(dir); err == nil {
		if d, err = filepath.EvalSymlinks(d); err == nil && d == filepath.Dir(self) {
			link = filepath.Base(self)
		}
	}
	for _, n := range names {
		p := filepath.Join(dir, n)
		if _, err := os.Lstat(p); err == nil {
			if err := os.Remove(p); err != nil {
				fmt.Fprintf(stderr, "pvperf: links: %v\n", err)
				return 1
			}
		}
		if err := os.Symlink(link, p); err != nil {
			fmt.Fprintf(stderr, "pvperf: links: %v\n", err)
			return 1
		}
		fmt.Fprintln(stdout, p)
	}
	return 0
}

// ownCommand reports whether the file at p is pvperf's command name built
// on its own (./cmd/name of this module).
func ownCommand(p, name string) bool {
	bi, err := buildinfo.ReadFile(p)
	return err == nil && bi.Path == modulePath+"/cmd/"+name
}

// modulePath is the module this binary belongs to.
const modulePath = "github.com/pvperf/pvperf"

func usage(w io.Writer) {
	fmt.Fprintf(w, `Usage: pvperf COMMAND [OPTION]...

Tests (perftest's options and output; also run as ib_TEST or TEST through a link,
where ib_TEST prints perftest's text alone, as --perftest_output does):
  %s
Other commands:
  devinfo   devices, ports and GID tables (ibv_devinfo -v)
  report    JSON results to HTML, CSV or benchstat input
  cm_setup  time connection setup through rdma_cm, step by step (cmtime)
  cluster   a test between all pairs of ranks under srun, mpirun, Kubernetes
  compare   two implementations of a test side by side: ratio with a confidence interval
  links DIR create links ib_write_bw ... in DIR to this binary
  version   print pvperf's version

Run "pvperf TEST -h" for a test's options.
`, strings.Join(cli.Tests(), " "))
}
