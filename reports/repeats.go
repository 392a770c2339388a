package reports

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strings"

	"github.com/pvperf/pvperf/perftest"
	"github.com/pvperf/pvperf/reports/estimate"
)

// Repeats summarises the runs of a repeated test (--repeat): for each
// message size, side and metric, the median of the runs, their range and
// a bootstrap confidence interval of the median.
type Repeats struct {
	Runs      int     `json:"runs"`
	Level     float64 `json:"confidence_level"`
	Resamples int     `json:"bootstrap_resamples"`
	// TargetPercent is --repeat_ci: the half-width of the interval, in
	// percent of the median, at which the runs stop (NaN: a fixed count).
	// Converged tells whether every size reached it: false without a
	// target, and null in JSON then, since there was nothing to reach.
	TargetPercent Num         `json:"target_half_width_percent"`
	Converged     bool        `json:"converged"`
	Rows          []RepeatRow `json:"rows"`
}

// MarshalJSON writes Converged as null when there is no target.
func (r Repeats) MarshalJSON() ([]byte, error) {
	type plain Repeats
	v := struct {
		plain
		Converged *bool `json:"converged"`
	}{plain: plain(r)}
	if r.TargetPercent.Valid() {
		v.Converged = &r.Converged
	}
	return json.Marshal(v)
}

// RepeatRow is one metric of one size and side over the runs.
type RepeatRow struct {
	Side string `json:"side"`
	Size uint64 `json:"msg_size_bytes"`
	// Metric is the key of the value in a result row: "average_MiB_per_s",
	// "msg_rate_Mpps", "typical_us", ...
	Metric string `json:"metric"`
	Median Num    `json:"median"`
	Min    Num    `json:"min"`
	Max    Num    `json:"max"`
	Mean   Num    `json:"mean"`
	Stdev  Num    `json:"stdev"`
	CILow  Num    `json:"ci_low"`
	CIHigh Num    `json:"ci_high"`
	// HalfWidthPercent is the larger distance from the median to an end
	// of the interval, in percent of the median: the ± of "median ±X%"
	// (more than half the interval's width when it is not symmetric).
	// CILow, CIHigh, HalfWidthPercent and Stdev are NaN (null) for a row
	// of one value.
	HalfWidthPercent Num `json:"half_width_percent"`
	// Values are the runs' values in the order they ran.
	Values []Num `json:"values"`
}

// A repeatMetric is a value of a result row that repeats summarise.
type repeatMetric struct {
	key string
	get func(*Result) Num
	// label is the text output's name, with its unit.
	label string
}

func bwMetric(key, label string, f func(*BWStats) Num) repeatMetric {
	return repeatMetric{key, func(r *Result) Num {
		if r.BW == nil {
			return NaN
		}
		return f(r.BW)
	}, label}
}

func latMetric(key, label string, f func(*LatencyStats) Num) repeatMetric {
	return repeatMetric{key, func(r *Result) Num {
		if r.Latency == nil {
			return NaN
		}
		return f(r.Latency)
	}, label}
}

// repeatMetrics are the metrics of a kind of run, the first one the one
// --repeat_ci watches.
func repeatMetrics(kind string) []repeatMetric {
	switch kind {
	case KindLatency:
		return []repeatMetric{
			latMetric("typical_us", "t_typical[usec]", func(s *LatencyStats) Num { return s.TypicalUs }),
			latMetric("mean_us", "t_avg[usec]", func(s *LatencyStats) Num { return s.MeanUs }),
			latMetric("p99_us", "99% percentile[usec]", func(s *LatencyStats) Num { return s.P99Us }),
		}
	case KindLatencyDuration:
		return []repeatMetric{
			latMetric("mean_us", "t_avg[usec]", func(s *LatencyStats) Num { return s.MeanUs }),
			latMetric("tps", "tps", func(s *LatencyStats) Num { return s.TPS }),
		}
	}
	return []repeatMetric{
		bwMetric("average_MiB_per_s", "BW average[MiB/sec]", func(s *BWStats) Num { return s.AverageMiBps }),
		bwMetric("average_Gb_per_s", "BW average[Gb/sec]", func(s *BWStats) Num { return s.AverageGbps }),
		bwMetric("msg_rate_Mpps", "MsgRate[Mpps]", func(s *BWStats) Num { return s.MsgRateMpps }),
	}
}

// MinRepeatValues is the fewest valid values of a row's primary metric
// whose interval may count as within a target: an interval of fewer (of
// one value it has no width at all) says little.
const MinRepeatValues = 5

// RepeatSeed seeds the bootstrap, so that the same runs give the same
// interval.
const RepeatSeed = 1

// SummarizeRepeats summarises runs of one test: for every (side, size)
// row of their primary results (see Run.Primary), each metric of the run's
// kind over the runs that have it. target is --repeat_ci in percent (0 or
// NaN: none).
func SummarizeRepeats(runs []Run, level float64, resamples int, target float64) (*Repeats, error) {
	if len(runs) == 0 {
		return nil, fmt.Errorf("summarize repeats: %w", estimate.ErrNoData)
	}
	rep := &Repeats{Runs: len(runs), Level: level, Resamples: resamples, TargetPercent: NaN, Converged: true}
	defer func() {
		if len(rep.Rows) == 0 {
			rep.Converged = false
		}
	}()
	if target > 0 {
		rep.TargetPercent = Num(target)
	} else {
		rep.Converged = false
	}
	type key struct {
		side string
		size uint64
	}
	var order []key
	vals := map[key][]*Result{}
	for i := range runs {
		for _, r := range runs[i].Primary() {
			k := key{r.Side, r.Size}
			if _, ok := vals[k]; !ok {
				order = append(order, k)
			}
			vals[k] = append(vals[k], &r)
		}
	}
	for _, k := range order {
		for mi, m := range repeatMetrics(runs[0].Info.Kind) {
			var xs []float64
			var values []Num
			for _, r := range vals[k] {
				v := m.get(r)
				values = append(values, v)
				if v.Valid() {
					xs = append(xs, float64(v))
				}
			}
			primary := mi == 0 && target > 0
			if primary && len(xs) < MinRepeatValues {
				// Runs that measured nothing (a duration run
				// without a round trip) do not count towards
				// the target.
				rep.Converged = false
			}
			if len(xs) == 0 {
				continue
			}
			s, err := estimate.Summarize(xs, level, resamples, RepeatSeed)
			if err != nil {
				return nil, fmt.Errorf("summarize repeats: %s of %d bytes: %w", m.key, k.size, err)
			}
			hw := s.HalfWidth() * 100
			row := RepeatRow{
				Side: k.side, Size: k.size, Metric: m.key,
				Median: Num(s.Median), Min: Num(s.Min), Max: Num(s.Max), Mean: Num(s.Mean), Stdev: Num(s.Stdev),
				CILow: Num(s.Lo), CIHigh: Num(s.Hi), HalfWidthPercent: Num(hw), Values: values,
			}
			if len(xs) < 2 {
				// One value has no interval (a bootstrap of it
				// would be that value alone) and no spread.
				row.CILow, row.CIHigh, row.HalfWidthPercent, row.Stdev = NaN, NaN, NaN, NaN
				if mi == 0 {
					rep.Converged = false
				}
			}
			if primary && !(float64(row.HalfWidthPercent) <= target) {
				rep.Converged = false
			}
			rep.Rows = append(rep.Rows, row)
		}
	}
	return rep, nil
}

// Widest is the largest half-width, in percent, of the rows of the metric
// --repeat_ci watches (+Inf when there is none, or when a row has no
// interval yet).
func (r *Repeats) Widest(kind string) float64 {
	first := repeatMetrics(kind)[0].key
	w, found := 0.0, false
	for _, row := range r.Rows {
		if row.Metric == first {
			if !row.HalfWidthPercent.Valid() {
				return math.Inf(1)
			}
			w, found = max(w, float64(row.HalfWidthPercent)), true
		}
	}
	if !found {
		return math.Inf(1)
	}
	return w
}

// WriteRepeats prints the summary of repeated runs after perftest's text,
// in the units of the text (gbits: --report_gbits).
func WriteRepeats(w io.Writer, r *Repeats, kind string, gbits bool) error {
	labels := map[string]string{}
	for _, m := range repeatMetrics(kind) {
		labels[m.key] = m.label
	}
	var b strings.Builder
	fmt.Fprintf(&b, " %d runs: median, range and %g%% confidence interval of the median (bootstrap, %d resamples)\n",
		r.Runs, r.Level*100, r.Resamples)
	if r.TargetPercent.Valid() {
		state := "reached"
		if !r.Converged {
			state = "not reached"
		}
		fmt.Fprintf(&b, " target: interval within ±%g%% of the median, %s\n", float64(r.TargetPercent), state)
	}
	fmt.Fprintf(&b, " %-10s %-7s %-22s %12s %12s %12s %12s %12s %8s\n",
		"#bytes", "side", "metric", "median", "min", "max", "CI low", "CI high", "±%")
	for _, row := range r.Rows {
		if (gbits && row.Metric == "average_MiB_per_s") || (!gbits && row.Metric == "average_Gb_per_s") {
			continue
		}
		prec := 2
		if row.Metric == "msg_rate_Mpps" {
			prec = 6
		}
		f := func(v Num) string {
			if !v.Valid() {
				return fmt.Sprintf("%12s", "-")
			}
			return fmt.Sprintf("%12.*f", prec, float64(v))
		}
		hw := fmt.Sprintf("%8s", "-")
		if row.HalfWidthPercent.Valid() {
			hw = fmt.Sprintf("%8.2f", float64(row.HalfWidthPercent))
		}
		fmt.Fprintf(&b, " %-10d %-7s %-22s %s %s %s %s %s %s\n", row.Size, row.Side, labels[row.Metric],
			f(row.Median), f(row.Min), f(row.Max), f(row.CILow), f(row.CIHigh), hw)
	}
	b.WriteString(ResultLine)
	return writeString(w, b.String())
}

// WriteRepeatValues writes, for --output=bandwidth, message_rate or
// latency with repeated runs, the median of the runs where a single run
// prints its one number ("%lf\n", as perftest's --output): per message
// size of the first side the rows hold, the median BW average (in Gb/s
// with gbits), message rate, or t_avg.
func WriteRepeatValues(w io.Writer, r *Repeats, output perftest.Output, gbits bool) error {
	key := ""
	switch output {
	case perftest.OutputBandwidth:
		key = "average_MiB_per_s"
		if gbits {
			key = "average_Gb_per_s"
		}
	case perftest.OutputMessageRate:
		key = "msg_rate_Mpps"
	case perftest.OutputLatency:
		key = "mean_us"
	default:
		return nil
	}
	var b strings.Builder
	side := ""
	for _, row := range r.Rows {
		if side == "" {
			side = row.Side
		}
		if row.Side == side && row.Metric == key {
			b.WriteString(cSprintf(valueFmt, float64(row.Median)))
		}
	}
	return writeString(w, b.String())
}
