package bench

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"sort"
	"strings"

	"github.com/pvperf/pvperf/internal/outfile"
	"github.com/pvperf/pvperf/perftest"
	"github.com/pvperf/pvperf/reports"
)

func (s *session) resultLine() { _ = reports.WriteResultLine(s.out, &s.ti) }

// writeExtras prints pvperf's additions after perftest's text: the
// latency percentiles of each size.
func (s *session) writeExtras() {
	run := s.results()
	_ = reports.WritePercentiles(s.out, run.Results)
	if run.Fit != nil {
		_ = reports.WriteFit(s.out, run.Fit, s.cfg.ReportGbits)
	}
	if s.cfg.CPUUtil {
		_ = reports.WriteCPU(s.out, run.Results)
	}
	s.writeWireCounters()
}

// writeWireCounters prints the packet counters of an emulated device's
// network port, when the QPs used it: packets each way and every drop
// reason that occurred, so that losses and rejected packets are visible.
func (s *session) writeWireCounters() {
	c, ok := s.ep.ctx.(interface{ WireCounters() map[string]uint64 })
	if !ok || s.ti.DataPath == "" {
		return
	}
	m := c.WireCounters()
	if m == nil {
		return
	}
	line := fmt.Sprintf(" Network port    : %d packets received, %d sent", m["rx_packets"], m["tx_packets"])
	keys := make([]string, 0, len(m))
	for k, v := range m {
		if strings.HasPrefix(k, "drop_") && v > 0 {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	if len(keys) > 0 {
		line += "; dropped:"
		for _, k := range keys {
			line += fmt.Sprintf(" %s %d", strings.TrimPrefix(k, "drop_"), m[k])
		}
	}
	if n := m["ud_lost"]; n > 0 {
		line += fmt.Sprintf("; UD datagrams lost on the way: %d", n)
	}
	fmt.Fprintln(s.out, line)
}

// writeFiles writes --out_json, --out_csv and --out_html.
func (s *session) writeFiles() error {
	run := s.results()
	for _, o := range s.cfg.outputs() {
		name, format := o[0], o[1]
		var write func(io.Writer) error
		switch format {
		case "JSON":
			if s.rec.Len() == 0 {
				// perftest writes its file when it prints a row: a
				// side that prints none (the server of read_lat)
				// writes none.
				continue
			}
			write = func(w io.Writer) error { return reports.WriteJSON(w, &s.ti, &s.rec, &run) }
		case "CSV":
			write = func(w io.Writer) error { return reports.WriteCSV(w, []reports.Run{run}) }
		default:
			write = func(w io.Writer) error { return reports.WriteHTML(w, []reports.Run{run}) }
		}
		if err := writeFile(name, format, write); err != nil {
			return err
		}
	}
	return nil
}

// outputs are the files --out_json, --out_csv and --out_html write, with
// their formats' names.
func (cfg *Config) outputs() [][2]string {
	var o [][2]string
	if cfg.JSON {
		name := cfg.JSONFile
		if name == "" {
			name = "perftest_out.json"
		}
		o = append(o, [2]string{name, "JSON"})
	}
	if cfg.CSVFile != "" {
		o = append(o, [2]string{cfg.CSVFile, "CSV"})
	}
	if cfg.HTMLFile != "" {
		o = append(o, [2]string{cfg.HTMLFile, "HTML"})
	}
	return o
}

// checkOutputs tells, before the test runs, that an output file could not
// be written as writeFile will write it (see outfile.Check).
func checkOutputs(cfg *Config) error {
	for _, o := range cfg.outputs() {
		name, format := o[0], o[1]
		if err := outfile.Check(name); err != nil {
			return fail(err, fmt.Sprintf(" Couldn't open %s output file %s: %v\n", format, name, outfile.Cause(err)))
		}
	}
	return nil
}

// writeFile writes name with write, in perftest's words when that fails,
// whole or not at all (see outfile.Write). perftest's JSON file is created
// 0600, as perftest does; the others 0644.
func writeFile(name, format string, write func(io.Writer) error) error {
	mode := os.FileMode(0o644)
	if format == "JSON" {
		mode = 0o600
	}
	err := outfile.Write(name, mode, write)
	var pe *fs.PathError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &pe) && pe.Op == "open":
		return fail(err, fmt.Sprintf(" Couldn't open %s output file %s: %v\n", format, name, outfile.Cause(err)))
	}
	return fail(err, fmt.Sprintf(" Couldn't write %s output file %s: %v\n", format, name, outfile.Cause(err)))
}

// limitRow checks a printed row, of BW average avg and message rate rate,
// against -w and -y. perftest checks in print_full_bw_report: a side's own
// row in a unidirectional test, or in a bidirectional SEND test; the
// summed row (both sides' figures added) in a bidirectional one.
func (s *session) limitRow(avg, rate float64) {
	s.limitRows++
	if !s.cfg.LimitBWSet || avg >= s.cfg.LimitBW {
		s.bwPassed = true
	}
	if s.cfg.LimitMsgRate <= 0 || rate >= s.cfg.LimitMsgRate {
		s.ratePassed = true
	}
}

// checkLimits applies -w and -y: the run fails unless a checked row (of
// any size) met them. perftest checks the message rate only when -w is
// set too.
func (s *session) checkLimits() error {
	cfg := &s.cfg
	if !cfg.LimitBWSet || cfg.Test != perftest.Bandwidth || s.limitRows == 0 {
		return nil
	}
	if !s.bwPassed {
		return fail(nil, "Error: BW result is below bw limit\n")
	}
	if !s.ratePassed {
		return fail(nil, "Error: Msg rate  is below msg_rate limit\n")
	}
	return nil
}

// writeLastRow prints the row just recorded.
func (s *session) writeLastRow() { _ = s.rec.WriteRow(s.out, &s.ti, s.rec.Len()-1) }

// firstLine is err's text up to its first line break, for a file's
// "incomplete" field.
func firstLine(err error) string {
	l, _, _ := strings.Cut(strings.TrimSpace(err.Error()), "\n")
	return l
}

// results is the run in pvperf's results model, its rows taken from the
// record.
func (s *session) results() reports.Run {
	run := reports.Run{Info: s.info, Results: s.rec.Results(s.cfg.ReportGbits, reports.Nanoseconds), Repeats: s.repeats, Incomplete: s.incomplete}
	run.AttachCPU(s.cpu, s.peerCPU)
	if s.cfg.AllSizes {
		// A sweep whose times do not grow with the size has no fit.
		run.Fit, _ = reports.FitSweep(&run)
	}
	return run
}
