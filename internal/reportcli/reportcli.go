package reportcli

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"

	"github.com/olekukonko/tablewriter"
	"github.com/olekukonko/tablewriter/renderer"
	"github.com/olekukonko/tablewriter/tw"
	"github.com/spf13/pflag"

	"github.com/pvperf/pvperf/internal/outfile"
	"github.com/pvperf/pvperf/internal/version"
	"github.com/pvperf/pvperf/reports"
)

// Exit statuses.
const (
	ExitOK    = 0
	ExitError = 1 // unreadable input, or an output that could not be written
	ExitUsage = 2 // bad command line
)

const usage = `Usage: report [--html FILE] [--csv FILE] [--benchfmt FILE] RESULT.json...

Reads the JSON files written by pvperf's tests (--out_json) and writes them
as an HTML report with charts, as CSV, or in the Go benchmark format. With
no output option, prints a summary table. FILE "-" is the standard output.

`

// Run is the report command: it returns the exit status.
func Run(args []string, stdout, stderr io.Writer) int {
	fs := pflag.NewFlagSet("report", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.SortFlags = false
	html := fs.String("html", "", "write an HTML report with charts to `FILE`")
	csvFile := fs.String("csv", "", "write CSV, one row per test, size and side, to `FILE`")
	bench := fs.String("benchfmt", "", "write Go benchmark lines for benchstat to `FILE`")
	ver := fs.BoolP("version", "V", false, "print pvperf's version")
	noMerge := fs.Bool("no-merge", false, "keep every file a run of its own (by default, runs of the same setup\nwith different message sizes, such as one size per file, are joined into one)")
	fs.Usage = func() {
		fmt.Fprint(stderr, usage)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return ExitOK
		}
		fmt.Fprintf(stderr, "report: %v\n", err)
		fmt.Fprint(stderr, "Run 'report --help' for usage.\n")
		return ExitUsage
	}
	if *ver {
		fmt.Fprintf(stdout, "report (pvperf) %s\n", version.Version)
		return ExitOK
	}
	if fs.NArg() == 0 {
		fmt.Fprint(stderr, "report: no result files given\n\n")
		fs.Usage()
		return ExitUsage
	}
	stdoutUsers := 0
	for _, f := range []string{*html, *csvFile, *bench} {
		if f == "-" {
			stdoutUsers++
		}
	}
	if stdoutUsers > 1 {
		fmt.Fprint(stderr, "report: only one output can go to the standard output (-)\n")
		return ExitUsage
	}
	if msg := clash(map[string]string{"--html": *html, "--csv": *csvFile, "--benchfmt": *bench}, fs.Args()); msg != "" {
		fmt.Fprintf(stderr, "report: %s\n", msg)
		return ExitUsage
	}

	runs, err := readRuns(fs.Args())
	if err != nil {
		fmt.Fprintf(stderr, "report: %v\n", err)
		return ExitError
	}
	if !*noMerge {
		runs = reports.Merge(runs)
	}
	outputs := []struct {
		name  string
		write func(io.Writer, []reports.Run) error
	}{
		{*html, reports.WriteHTML},
		{*csvFile, reports.WriteCSV},
		{*bench, reports.WriteBenchfmt},
	}
	wrote := false
	for _, o := range outputs {
		if o.name == "" {
			continue
		}
		wrote = true
		if err := writeOutput(o.name, stdout, func(w io.Writer) error { return o.write(w, runs) }); err != nil {
			fmt.Fprintf(stderr, "report: %v\n", err)
			return ExitError
		}
	}
	if !wrote {
		if err := writeSummary(stdout, runs); err != nil {
			fmt.Fprintf(stderr, "report: %v\n", err)
			return ExitError
		}
	}
	return ExitOK
}

// clash tells why the output files (by option) cannot be written: one that
// is an input, which it would replace, or two outputs that are one file;
// "" when none clash.
func clash(outputs map[string]string, inputs []string) string {
	opts := make([]string, 0, len(outputs))
	for o, name := range outputs {
		if name != "" && name != "-" {
			opts = append(opts, o)
		}
	}
	sort.Strings(opts)
	for i, o := range opts {
		for _, in := range inputs {
			if sameFile(outputs[o], in) {
				return fmt.Sprintf("%s %s is also an input: give the report a name of its own", o, outputs[o])
			}
		}
		for _, p := range opts[i+1:] {
			if sameFile(outputs[o], outputs[p]) {
				return fmt.Sprintf("%s and %s name the same file (%s): give each its own", o, p, outputs[o])
			}
		}
	}
	return ""
}

// sameFile tells whether names a and b are one file: the same file where
// both exist (links included), else the same absolute path.
func sameFile(a, b string) bool {
	fa, erra := os.Stat(a)
	fb, errb := os.Stat(b)
	if erra == nil && errb == nil {
		return os.SameFile(fa, fb)
	}
	aa, erra := filepath.Abs(a)
	ab, errb := filepath.Abs(b)
	return erra == nil && errb == nil && aa == ab
}

// readRuns reads every file; the first error stops it. Files of other
// schema versions, perftest's own JSON and files without results are
// errors, so that a report never silently leaves an input out.
func readRuns(names []string) ([]reports.Run, error) {
	var runs []reports.Run
	for _, name := range names {
		data, err := os.ReadFile(name)
		if err != nil {
			return nil, err
		}
		run, err := reports.ParseRun(data, name)
		if err != nil {
			return nil, err
		}
		if len(run.Results) == 0 {
			return nil, fmt.Errorf("%s: no results (the run ended before its first message size)", name)
		}
		runs = append(runs, run)
	}
	return runs, nil
}

// writeOutput writes to the file name, or to stdout for "-". A file is
// written whole or not at all, so that a failed run leaves no truncated
// report behind.
func writeOutput(name string, stdout io.Writer, write func(io.Writer) error) error {
	if name == "-" {
		return write(stdout)
	}
	return outfile.Write(name, 0o644, write)
}

// writeSummary prints one table row per file and size (primary rows).
func writeSummary(w io.Writer, runs []reports.Run) error {
	table := tablewriter.NewTable(w,
		tablewriter.WithRenderer(renderer.NewBlueprint(tw.Rendition{Symbols: tw.NewSymbols(tw.StyleASCII)})),
		tablewriter.WithHeaderAutoFormat(tw.Off),
		tablewriter.WithHeaderAlignment(tw.AlignLeft),
		tablewriter.WithRowAlignment(tw.AlignRight),
	)
	table.Header("file", "test", "device", "driver", "side", "size [B]", "BW avg [MiB/s]", "rate [Mpps]",
		"lat p50 [us]", "lat p99 [us]")
	num := func(n reports.Num, prec int) string {
		if !n.Valid() {
			return "-"
		}
		return strconv.FormatFloat(float64(n), 'f', prec, 64)
	}
	for _, r := range runs {
		for _, res := range r.Primary() {
			row := []string{filepath.Base(r.Source), r.Info.Test, r.Info.Device, r.Info.Driver, res.Side,
				strconv.FormatUint(res.Size, 10)}
			if b := res.BW; b != nil {
				row = append(row, num(b.AverageMiBps, 2), num(b.MsgRateMpps, 6), "-", "-")
			} else {
				l := res.Latency
				row = append(row, "-", "-", num(l.P50Us, 2), num(l.P99Us, 2))
				if !l.P50Us.Valid() {
					// Duration mode: the mean is all there is.
					row[len(row)-2] = "mean " + num(l.MeanUs, 2)
				}
			}
			if err := table.Append(row); err != nil {
				return err
			}
		}
	}
	return table.Render()
}
