package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"time"

	"github.com/pvperf/pvperf/bench/oob"
	"github.com/pvperf/pvperf/perftest"
	"github.com/pvperf/pvperf/reports"
	"github.com/pvperf/pvperf/verbs"
)

// Repeated runs.
const (
	// MinRepeats is the fewest runs after which --repeat_ci may stop:
	// a bootstrap interval of fewer says little.
	MinRepeats = reports.MinRepeatValues
	// RepeatLevel is the confidence level of the repeats' intervals, and
	// RepeatResamples the bootstrap's resamples.
	RepeatLevel     = 0.95
	RepeatResamples = 2000
)

// runRepeated runs the test cfg.Repeat times (fewer once --repeat_ci is
// met), each run a whole test with a connection of its own; the first
// run's text is printed, the others' only counted. It then prints the
// summary of the runs after the last run's additions and writes the
// files, with the summary, from the first run, whose text was printed.
// --interval_json holds every run's seconds, each line with its run.
func runRepeated(ctx context.Context, cfg Config, dev verbs.Device, out, errOut io.Writer) (reports.Run, error) {
	var runs []reports.Run
	var first, last *session
	client := cfg.Loopback || cfg.Server != ""
	prog := newProgress(errOut, cfg.Repeat)
	defer prog.done()
	// The listening side keeps one listener for the whole series: a
	// client that ends its series tells it so with an empty connection
	// (endSeries), which must find it listening.
	var held *oob.Listener
	var hold **oob.Listener
	if !client && !cfg.CMExchange && !cfg.RdmaCM {
		hold = &held
		defer func() {
			if held != nil {
				_ = held.Close()
			}
		}()
	}
	for k := range cfg.Repeat {
		o := out
		if k > 0 || cfg.Output != perftest.OutputFull {
			// --output=...: the series prints its one number, the
			// runs' median, at its end.
			o = io.Discard
		}
		s, err := runOnce(ctx, cfg, dev, o, errOut, func(s *session) {
			s.repeated, s.redial, s.runNo, s.lnHold, s.ivOut = true, k > 0, k+1, hold, out
		})
		if err != nil {
			if k > 0 && !client && s != nil && !s.setupDone && errors.Is(err, oob.ErrPeerClosed) {
				// The client closed the connection before its first
				// message: its series ended early (--repeat_ci).
				break
			}
			if s == nil {
				return reports.Run{}, err
			}
			why := fmt.Sprintf("run %d of %d: %s", k+1, cfg.Repeat, firstLine(err))
			if client && !cfg.Loopback && !cfg.CMExchange && !cfg.RdmaCM && !errors.Is(err, oob.ErrConnect) {
				// The series stops here (an interrupt, a failed
				// check after the server's run ended): a server
				// waiting for the next run is told.
				endSeriesOnce(context.WithoutCancel(ctx), &cfg)
			}
			if k > 0 && client && !cfg.Loopback && ctx.Err() == nil && errors.Is(err, oob.ErrConnect) {
				// The server took no more runs: its --repeat was
				// smaller.
				err = fail(err, PerftestMessage(err), fmt.Sprintf(" Run %d of %d found no server: was it given a smaller --repeat? Give both sides the same.\n", k+1, cfg.Repeat))
				why = fmt.Sprintf("run %d of %d found no server", k+1, cfg.Repeat)
			}
			if first == nil {
				// No run ended: the sizes the first did are kept,
				// as a run without --repeat keeps them.
				if len(s.results().Results) > 0 {
					s.incomplete = why
					_ = s.writeFiles()
				}
				return s.results(), err
			}
			// The runs done (an interrupt, a lost peer, a server
			// that took no more) are summarised and written all the
			// same, saying why the series is short.
			first.incomplete = why
			if rep, serr := reports.SummarizeRepeats(runs, RepeatLevel, RepeatResamples, cfg.RepeatCI); serr == nil {
				first.repeats = rep
				writeSummary(out, cfg, rep, last)
			}
			return first.results(), errors.Join(err, first.writeFiles())
		}
		last = s
		if first == nil {
			first = s
		}
		runs = append(runs, s.results())
		prog.set(k+1, "runs")
		if client && cfg.RepeatCI > 0 && len(runs) >= MinRepeats {
			rep, err := reports.SummarizeRepeats(runs, RepeatLevel, RepeatResamples, cfg.RepeatCI)
			if err == nil && rep.Converged {
				if k+1 < cfg.Repeat && !cfg.Loopback {
					endSeries(ctx, &cfg)
				}
				break
			}
			if err == nil {
				prog.set(k+1, fmt.Sprintf("runs, interval ±%.2f%%", rep.Widest(runs[0].Info.Kind)))
			}
		}
	}
	prog.done()
	if client && !cfg.Loopback && !cfg.CMExchange && !cfg.RdmaCM && len(runs) == cfg.Repeat {
		// A server given a larger --repeat would wait for runs that
		// never come: it is told the series is over, as --repeat_ci
		// tells it. A server that has ended refuses the connection.
		endSeriesOnce(ctx, &cfg)
	}
	rep, err := reports.SummarizeRepeats(runs, RepeatLevel, RepeatResamples, cfg.RepeatCI)
	if err != nil {
		return last.results(), fail(err, " "+err.Error()+"\n")
	}
	first.repeats = rep
	writeSummary(out, cfg, rep, last)
	return first.results(), first.writeFiles()
}

// writeSummary prints the summary of a series: its table, or with
// --output=... the runs' median of that one number.
func writeSummary(out io.Writer, cfg Config, rep *reports.Repeats, last *session) {
	switch {
	case cfg.Output != perftest.OutputFull:
		_ = reports.WriteRepeatValues(out, rep, cfg.Output, cfg.ReportGbits)
	case cfg.Extras:
		_ = reports.WriteRepeats(out, rep, last.info.Kind, cfg.ReportGbits)
	}
}

// endSeriesOnce is endSeries in one attempt, at the end of a series the
// server may have ended too.
func endSeriesOnce(ctx context.Context, cfg *Config) {
	d := seriesDialer(cfg, min(cfg.PeerTimeout, 2*time.Second))
	if c, err := d.DialContext(ctx, "tcp", net.JoinHostPort(cfg.Server, strconv.Itoa(cfg.Port))); err == nil {
		_ = c.Close()
	}
}

// seriesDialer dials as the runs do: from --bind_source_ip when given.
func seriesDialer(cfg *Config, timeout time.Duration) net.Dialer {
	d := net.Dialer{Timeout: timeout}
	if ip := net.ParseIP(cfg.BindSourceIP); ip != nil {
		d.LocalAddr = &net.TCPAddr{IP: ip}
	}
	return d
}

// endSeries tells a repeating server that no more runs come: a
// connection closed before its first message.
func endSeries(ctx context.Context, cfg *Config) {
	d := seriesDialer(cfg, cfg.PeerTimeout)
	for deadline := time.Now().Add(cfg.PeerTimeout); time.Now().Before(deadline); {
		c, err := d.DialContext(ctx, "tcp", net.JoinHostPort(cfg.Server, strconv.Itoa(cfg.Port)))
		if err == nil {
			_ = c.Close()
			return
		}
		if ctx.Err() != nil {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}
