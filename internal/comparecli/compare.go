package comparecli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/pvperf/pvperf/internal/outfile"
	"github.com/pvperf/pvperf/internal/version"
	"github.com/pvperf/pvperf/reports/estimate"
)

// Name is the command's name.
const Name = "compare"

const (
	level     = 0.95
	resamples = 4000
	seed      = 1
)

// options are the command line.
type options struct {
	rounds, maxRounds int
	ci                float64
	metric            string
	host              string
	port              int
	timeout           time.Duration
	listen            time.Duration
	jsonFile          string
	base, cand        []string
	args              []string
}

// Main runs the command with args (without the program name) and returns
// the exit status: 0 when every run gave a value, 1 when one failed, 2
// for a bad command line.
func Main(args []string, stdout, stderr io.Writer) int {
	o, err := parse(args, stderr)
	if errors.Is(err, pflag.ErrHelp) {
		return 0
	}
	if errors.Is(err, errVersion) {
		fmt.Fprintf(stdout, "pvperf %s\n", version.Version)
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "compare: %v\n", err)
		return 2
	}
	// The JSON file is written after every round: a path that cannot be
	// written is a usage error now, not after them.
	if err := outfile.Check(o.jsonFile); err != nil {
		fmt.Fprintf(stderr, "compare: --json: %v\n", err)
		return 2
	}
	if err := run(context.Background(), o, stdout, stderr); err != nil {
		fmt.Fprintf(stderr, "compare: %v\n", err)
		return 1
	}
	return 0
}

// errVersion is parse's answer to -V.
var errVersion = errors.New("version requested")

func parse(args []string, stderr io.Writer) (*options, error) {
	o := &options{}
	fs := pflag.NewFlagSet(Name, pflag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.SortFlags = false
	fs.IntVarP(&o.rounds, "rounds", "r", 10, "rounds, each a run of both (order alternating)")
	fs.Float64Var(&o.ci, "ci", 0, "after --rounds, go on until the ratio's interval is within this many percent of it")
	fs.IntVar(&o.maxRounds, "max-rounds", 40, "the most rounds --ci makes")
	fs.StringVar(&o.metric, "metric", "auto", "the value compared: bw, rate, typical, avg, tps (auto: bw for bandwidth tests, typical for latency, avg with -D)")
	fs.StringVar(&o.host, "host", "127.0.0.1", "the address the clients connect to (the servers' out-of-band port)")
	fs.IntVarP(&o.port, "port", "p", 18515, "the servers' port, as the test options give it (-p)")
	fs.DurationVar(&o.timeout, "timeout", 2*time.Minute, "the longest a run may take")
	ver := fs.BoolP("version", "V", false, "print pvperf's version")
	fs.DurationVar(&o.listen, "listen-timeout", 20*time.Second, "the longest a server may take to listen")
	fs.StringVar(&o.jsonFile, "json", "", "write every value, the medians and the ratio to this JSON file")
	fs.Usage = func() {
		fmt.Fprintf(stderr, `Usage: pvperf compare [OPTION]... BASE CANDIDATE -- TEST OPTIONS...

Runs BASE and CANDIDATE (commands, such as /usr/bin/ib_write_bw and
"pvperf write_bw"), each as a server then a client on this machine with the
same TEST OPTIONS, in interleaved rounds, and prints the median of each and
the ratio CANDIDATE/BASE: the median of the rounds' ratios, with a %g%%
bootstrap confidence interval that resamples whole rounds.

`, level*100)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if *ver {
		return nil, errVersion
	}
	pos := fs.Args()
	dash := fs.ArgsLenAtDash()
	if dash < 0 {
		dash = len(pos)
	}
	if dash != 2 {
		fs.Usage()
		return nil, fmt.Errorf("want two commands before --, have %d", dash)
	}
	o.base, o.cand, o.args = strings.Fields(pos[0]), strings.Fields(pos[1]), pos[2:]
	if len(o.base) == 0 || len(o.cand) == 0 {
		return nil, errors.New("empty command")
	}
	switch o.metric {
	case "auto", "bw", "rate", "typical", "avg", "tps":
	default:
		return nil, fmt.Errorf("unknown metric %q (bw, rate, typical, avg or tps)", o.metric)
	}
	if o.rounds < 2 || o.maxRounds < o.rounds {
		return nil, fmt.Errorf("--rounds must be at least 2 and at most --max-rounds (%d)", o.maxRounds)
	}
	if o.ci < 0 || o.ci >= 100 {
		return nil, fmt.Errorf("--ci %g is not a percentage below 100", o.ci)
	}
	for i, a := range o.args {
		if (a == "-p" || a == "--port") && i+1 < len(o.args) {
			p, err := strconv.Atoi(o.args[i+1])
			if err != nil {
				return nil, fmt.Errorf("bad port %q", o.args[i+1])
			}
			o.port = p
		}
	}
	return o, nil
}

// result is the JSON file's content.
type result struct {
	Base      string    `json:"base"`
	Candidate string    `json:"candidate"`
	Args      []string  `json:"args"`
	Metric    string    `json:"metric"`
	Rounds    int       `json:"rounds"`
	BaseVals  []float64 `json:"base_values"`
	CandVals  []float64 `json:"candidate_values"`
	BaseMed   float64   `json:"base_median"`
	CandMed   float64   `json:"candidate_median"`
	Ratio     float64   `json:"ratio"`
	Lo        float64   `json:"ratio_ci_low"`
	Hi        float64   `json:"ratio_ci_high"`
	Level     float64   `json:"confidence_level"`
	HalfWidth float64   `json:"half_width_percent"`
	// The wall time of each run, server start to exit, in seconds, and
	// their ratio (median of the rounds').
	BaseWall  []float64 `json:"base_wall_s"`
	CandWall  []float64 `json:"candidate_wall_s"`
	WallRatio float64   `json:"wall_ratio"`
	WallLo    float64   `json:"wall_ratio_ci_low"`
	WallHi    float64   `json:"wall_ratio_ci_high"`
}

func run(ctx context.Context, o *options, stdout, stderr io.Writer) error {
	// vals are each command's values, walls the wall time of each of its
	// runs, server start to exit: a figure no clock calibration of either
	// tool can distort.
	var vals, walls [2][]float64
	var label string
	names := [2]string{strings.Join(o.base, " "), strings.Join(o.cand, " ")}
	cmds := [2][]string{o.base, o.cand}
	fmt.Fprintf(stdout, "compare: %s against %s, options: %s\n", names[1], names[0], strings.Join(o.args, " "))
	var ratio, lo, hi float64
	// A round whose value is not usable (perftest may print 0 or inf when
	// it cannot measure its clock) is left out, up to as many again.
	for r, done := 1, 0; done < o.maxRounds && r <= 2*o.maxRounds; r++ {
		order := [2]int{0, 1}
		if r%2 == 0 {
			order = [2]int{1, 0}
		}
		var got, wall [2]float64
		var labels [2]string
		usable := true
		for _, i := range order {
			t0 := time.Now()
			out, err := pair(ctx, o, cmds[i])
			if err != nil {
				return fmt.Errorf("round %d, %s: %w", r, names[i], err)
			}
			wall[i] = time.Since(t0).Seconds()
			v, l, err := value(out, o.metric)
			if errors.Is(err, errUnusable) {
				fmt.Fprintf(stdout, " round %2d  %s: left out: %v\n", r, names[i], err)
				usable = false
				continue
			}
			if err != nil {
				return fmt.Errorf("round %d, %s: %w", r, names[i], err)
			}
			got[i], labels[i], label = v, l, l
		}
		if labels[0] != "" && labels[1] != "" && labels[0] != labels[1] {
			return fmt.Errorf("round %d: the two commands print different results (%s: %s, %s: %s): compare runs of one test", r, names[0], labels[0], names[1], labels[1])
		}
		if !usable {
			if done == 0 && r >= o.rounds {
				return fmt.Errorf("the first %d rounds gave no usable value (see above)", r)
			}
			continue
		}
		done++
		vals[0], vals[1] = append(vals[0], got[0]), append(vals[1], got[1])
		walls[0], walls[1] = append(walls[0], wall[0]), append(walls[1], wall[1])
		fmt.Fprintf(stdout, " round %2d  %-24s %12.6g  %-24s %12.6g  ratio %.4f\n", r, names[0], got[0], names[1], got[1], got[1]/got[0])
		if done < o.rounds {
			continue
		}
		var err error
		ratio, lo, hi, err = pairedRatio(vals[0], vals[1])
		if err != nil {
			return err
		}
		if o.ci == 0 || halfWidth(ratio, lo, hi) <= o.ci {
			break
		}
	}
	if len(vals[0]) < o.rounds {
		return fmt.Errorf("%d rounds with usable values of the %d asked", len(vals[0]), o.rounds)
	}
	sb, err := estimate.Summarize(vals[0], level, resamples, seed)
	if err != nil {
		return err
	}
	sc, err := estimate.Summarize(vals[1], level, resamples, seed)
	if err != nil {
		return err
	}
	n := len(vals[0])
	fmt.Fprintf(stdout, " %s, %d rounds, medians with their %g%% bootstrap confidence intervals:\n", label, n, level*100)
	fmt.Fprintf(stdout, "   %-28s %12.6g  [%.6g, %.6g]\n", names[0], sb.Median, sb.Lo, sb.Hi)
	fmt.Fprintf(stdout, "   %-28s %12.6g  [%.6g, %.6g]\n", names[1], sc.Median, sc.Lo, sc.Hi)
	hw := halfWidth(ratio, lo, hi)
	fmt.Fprintf(stdout, " ratio %.4f  [%.4f, %.4f]  ±%.2f%%  (median of the rounds' ratios %s / %s; ratio of the medians %.4f)\n",
		ratio, lo, hi, hw, names[1], names[0], sc.Median/sb.Median)
	wr, wlo, whi, err := pairedRatio(walls[0], walls[1])
	if err != nil {
		return err
	}
	wb, err := estimate.Summarize(walls[0], level, 1, seed)
	if err != nil {
		return err
	}
	wc, err := estimate.Summarize(walls[1], level, 1, seed)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, " wall time of a run (server start to exit), ratio %.4f  [%.4f, %.4f]  (medians %.3g s and %.3g s)\n",
		wr, wlo, whi, wc.Median, wb.Median)
	if o.ci > 0 && hw > o.ci {
		fmt.Fprintf(stdout, " the interval is wider than ±%g%% after %d rounds\n", o.ci, n)
	}
	if o.jsonFile != "" {
		res := result{Base: names[0], Candidate: names[1], Args: o.args, Metric: label, Rounds: n,
			BaseVals: vals[0], CandVals: vals[1], BaseMed: sb.Median, CandMed: sc.Median,
			Ratio: ratio, Lo: lo, Hi: hi, Level: level, HalfWidth: hw,
			BaseWall: walls[0], CandWall: walls[1], WallRatio: wr, WallLo: wlo, WallHi: whi}
		b, err := json.MarshalIndent(res, "", "  ")
		if err != nil {
			return err
		}
		if err := outfile.Write(o.jsonFile, 0o644, func(w io.Writer) error {
			_, err := w.Write(append(b, '\n'))
			return err
		}); err != nil {
			return err
		}
	}
	return nil
}

// pairedRatio is the median of the rounds' ratios cand/base, with a
// bootstrap interval that resamples whole rounds: the two runs of a round
// share its conditions (the machine's load, the guest's clock), so their
// ratio is steadier than the ratio of the two medians.
func pairedRatio(base, cand []float64) (ratio, lo, hi float64, err error) {
	rs := make([]float64, len(base))
	for i := range base {
		rs[i] = cand[i] / base[i]
	}
	s, err := estimate.Summarize(rs, level, resamples, seed)
	if err != nil {
		return 0, 0, 0, err
	}
	return s.Median, s.Lo, s.Hi, nil
}

// halfWidth is the larger half of [lo, hi] around r, in percent of r.
func halfWidth(r, lo, hi float64) float64 {
	return max(r-lo, hi-r) / r * 100
}

// pair runs cmd as a server, waits for it to listen, runs it as the
// client and returns the client's output.
func pair(ctx context.Context, o *options, cmd []string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	var sout, serrOut, cout, cerrOut bytes.Buffer
	srv := command(ctx, cmd, o.args, &sout, &serrOut)
	if err := srv.Start(); err != nil {
		return "", fmt.Errorf("server: %w", err)
	}
	// sdone is closed when the server has ended, with serr its error.
	sdone := make(chan struct{})
	var serr error
	go func() { serr = srv.Wait(); close(sdone) }()
	stopServer := func() {
		_ = srv.Process.Signal(os.Interrupt)
		select {
		case <-sdone:
		case <-time.After(2 * time.Second):
			_ = srv.Process.Kill()
			<-sdone
		}
	}
	deadline := time.Now().Add(o.listen)
	for !listening(o.port) {
		select {
		case <-sdone:
			return "", fmt.Errorf("server exited before listening (%v): %s", serr, diagnostic(&serrOut, &sout))
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			stopServer()
			return "", fmt.Errorf("server not listening on port %d after %s", o.port, o.listen)
		}
	}
	cli := command(ctx, cmd, append(append([]string(nil), o.args...), o.host), &cout, &cerrOut)
	if err := cli.Run(); err != nil {
		stopServer()
		return "", fmt.Errorf("client: %v: %s", err, diagnostic(&cerrOut, &cout))
	}
	select {
	case <-sdone:
		if serr != nil {
			return "", fmt.Errorf("server: %v: %s", serr, diagnostic(&serrOut, &sout))
		}
	case <-time.After(10 * time.Second):
		stopServer()
		return "", errors.New("server still running 10s after its client ended")
	}
	return cout.String(), nil
}

func command(ctx context.Context, cmd, args []string, stdout, stderr *bytes.Buffer) *exec.Cmd {
	c := exec.CommandContext(ctx, cmd[0], append(append([]string(nil), cmd[1:]...), args...)...)
	c.Stdout, c.Stderr = stdout, stderr
	c.Cancel = func() error { return c.Process.Signal(os.Interrupt) }
	c.WaitDelay = 2 * time.Second
	return c
}

// listening tells whether a TCP socket listens on port, from /proc/net.
func listening(port int) bool {
	want := fmt.Sprintf(":%04X ", port)
	for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(bytes.NewReader(b))
		for sc.Scan() {
			fs := strings.Fields(sc.Text())
			// sl local_address rem_address st ...: state 0A is LISTEN.
			if len(fs) > 3 && strings.HasSuffix(fs[1]+" ", want) && fs[3] == "0A" {
				return true
			}
		}
	}
	return false
}

// diagnostic is what a failed command said: its standard error (where
// perftest's tests and pvperf's put their diagnostics, apart from the usage
// text that follows a bad option on standard output), else the end of its
// standard output; lines joined by "; ".
func diagnostic(stderr, stdout *bytes.Buffer) string {
	if l := textLines(stderr.String()); len(l) > 0 {
		// The first line names the problem ("unrecognized option");
		// the last ones are perftest's closing lines, after it.
		if len(l) > 5 {
			l = append(l[:1:1], append([]string{"..."}, l[len(l)-3:]...)...)
		}
		return strings.Join(l, "; ")
	}
	l := textLines(stdout.String())
	return strings.Join(l[max(len(l)-3, 0):], "; ")
}

// textLines are the lines of s that hold text, trimmed (rules of dashes
// and stars left out).
func textLines(s string) []string {
	var keep []string
	for l := range strings.SplitSeq(s, "\n") {
		if l = strings.TrimSpace(l); l != "" && strings.Trim(l, "-*") != "" {
			keep = append(keep, l)
		}
	}
	return keep
}

// errUnusable: the result row has no usable value where the metric is.
var errUnusable = errors.New("no usable value")

// intervalLine is a line of pvperf's per-second results of a -D run
// ("   0.00-  1.00 sec  65536  815872 messages ..."), printed between the
// column header and the result row.
var intervalLine = regexp.MustCompile(`^\s*[0-9]+\.[0-9]+-\s*[0-9]+\.[0-9]+ sec `)

// value finds the metric in the first result row of a perftest text and
// returns it with its column's name.
func value(out, metric string) (float64, string, error) {
	lines := strings.Split(out, "\n")
	for i, l := range lines {
		if !strings.Contains(l, "#bytes") {
			continue
		}
		j := i + 1
		for j < len(lines) && intervalLine.MatchString(lines[j]) {
			j++
		}
		if j >= len(lines) {
			continue
		}
		row := strings.Fields(lines[j])
		if len(row) < 3 {
			continue
		}
		var col int
		var label string
		switch {
		case strings.Contains(l, "BW average"):
			unit := "MiB/sec"
			if strings.Contains(l, "Gb/sec") {
				unit = "Gb/sec"
			}
			col, label = 3, "BW average["+unit+"]"
			switch metric {
			case "rate":
				col, label = 4, "MsgRate[Mpps]"
			case "auto", "bw":
			default:
				return 0, "", fmt.Errorf("metric %s is not in a bandwidth test's row", metric)
			}
		case strings.Contains(l, "t_typical"):
			col, label = 4, "t_typical[usec]"
			switch metric {
			case "avg":
				col, label = 5, "t_avg[usec]"
			case "auto", "typical":
			default:
				return 0, "", fmt.Errorf("metric %s is not in a latency test's row", metric)
			}
		case strings.Contains(l, "t_avg"):
			col, label = 2, "t_avg[usec]"
			switch metric {
			case "tps":
				col, label = 3, "tps"
			case "auto", "avg":
			default:
				return 0, "", fmt.Errorf("metric %s is not in a duration latency row", metric)
			}
		default:
			continue
		}
		if col >= len(row) {
			return 0, "", fmt.Errorf("short result row %q", lines[j])
		}
		v, err := strconv.ParseFloat(row[col], 64)
		if err != nil || !(v > 0) || v > 1e300 {
			return 0, "", fmt.Errorf("%w: %s in %q", errUnusable, label, lines[j])
		}
		return v, label, nil
	}
	return 0, "", errors.New("no result row in the output")
}
