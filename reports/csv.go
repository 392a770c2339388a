package reports

import (
	"encoding/csv"
	"fmt"
	"io"
	"strconv"
	"time"
)

// CSV output
//
// WriteCSV writes one header line and one row per (run, message size,
// side). Every row repeats its run's description, so that the rows of
// several files can be concatenated (keep one header) and filtered alone.
// Units are part of the column names; a value that was not measured (a
// BW column of a latency run, a percentile of a duration-mode run, CPU
// usage without --cpu_util) is an empty field.

// CSVColumns are the CSV header's column names, in order.
var CSVColumns = []string{
	"test", "title", "kind", "side", "role", "bidirectional", "loopback",
	"device", "driver", "link_layer", "roce_version", "gid_index", "connection",
	"qps", "mtu_bytes", "tx_depth", "duration_s", "host", "peer",
	"pvperf_version", "perftest_version", "time",
	"msg_size_bytes", "iterations",
	"bw_peak_MiB_per_s", "bw_average_MiB_per_s", "bw_peak_Gb_per_s", "bw_average_Gb_per_s", "msg_rate_Mpps",
	"lat_min_us", "lat_max_us", "lat_typical_us", "lat_mean_us", "lat_stdev_us",
	"lat_p50_us", "lat_p90_us", "lat_p99_us", "lat_p99.9_us", "lat_p99.99_us", "lat_tps",
	"cpu_util_percent", "lat_p99.999_us",
	"repeat_runs", "repeat_metric", "repeat_median", "repeat_min", "repeat_max",
	"repeat_ci_low", "repeat_ci_high", "repeat_half_width_percent",
	"fit_alpha_us", "fit_beta_MiB_per_s", "fit_n_half_bytes", "fit_r_squared",
	"cpu_local_percent", "cpu_remote_percent", "cpu_local_us_per_msg", "cpu_remote_us_per_msg",
}

// WriteCSV writes runs as CSV (RFC 4180, "\n" line ends).
func WriteCSV(w io.Writer, runs []Run) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(CSVColumns); err != nil {
		return fmt.Errorf("reports: csv: %w", err)
	}
	for i := range runs {
		for _, res := range runs[i].Results {
			if err := cw.Write(csvRow(&runs[i], &res)); err != nil {
				return fmt.Errorf("reports: csv: %w", err)
			}
		}
	}
	cw.Flush()
	if err := cw.Error(); err != nil {
		return fmt.Errorf("reports: csv: %w", err)
	}
	return nil
}

func csvRow(run *Run, res *Result) []string {
	in := &run.Info
	itoa := strconv.Itoa
	u := func(v uint64) string { return strconv.FormatUint(v, 10) }
	row := []string{
		in.Test, in.Title, in.Kind, res.Side, in.Role, strconv.FormatBool(in.Bidirectional),
		strconv.FormatBool(in.Loopback),
		in.Device, in.Driver, in.LinkLayer, itoa(in.RoCEVersion), itoa(in.GIDIndex), in.Connection,
		itoa(in.QPs), itoa(in.MTU), itoa(in.TxDepth), itoa(in.DurationSeconds), in.Host, in.Peer,
		in.PvperfVersion, in.PerftestVersion, csvTime(in.Time),
		u(res.Size), u(res.Iterations),
	}
	if b := res.BW; b != nil {
		row = append(row, csvNum(b.PeakMiBps), csvNum(b.AverageMiBps), csvNum(b.PeakGbps),
			csvNum(b.AverageGbps), csvNum(b.MsgRateMpps))
	} else {
		row = append(row, "", "", "", "", "")
	}
	if l := res.Latency; l != nil {
		row = append(row, csvNum(l.MinUs), csvNum(l.MaxUs), csvNum(l.TypicalUs), csvNum(l.MeanUs),
			csvNum(l.StdevUs), csvNum(l.P50Us), csvNum(l.P90Us), csvNum(l.P99Us), csvNum(l.P999Us),
			csvNum(l.P9999Us), csvNum(l.TPS))
	} else {
		row = append(row, "", "", "", "", "", "", "", "", "", "", "")
	}
	row = append(row, csvNum(res.CPUUtil))
	if l := res.Latency; l != nil {
		row = append(row, csvNum(l.P99999Us))
	} else {
		row = append(row, "")
	}
	// The summary of a repeated test: the metric --repeat_ci watches, for
	// this row's size and side.
	rep := []string{"", "", "", "", "", "", "", ""}
	if r := run.Repeats; r != nil {
		first := repeatMetrics(runKind(run))[0].key
		for _, x := range r.Rows {
			if x.Side == res.Side && x.Size == res.Size && x.Metric == first {
				rep = []string{itoa(r.Runs), x.Metric, csvNum(x.Median), csvNum(x.Min), csvNum(x.Max),
					csvNum(x.CILow), csvNum(x.CIHigh), csvNum(x.HalfWidthPercent)}
			}
		}
	}
	row = append(row, rep...)
	if f := run.Fit; f != nil {
		row = append(row, csvNum(f.AlphaUs), csvNum(f.BetaMiBps), csvNum(f.NHalfBytes), csvNum(f.RSquared))
	} else {
		row = append(row, "", "", "", "")
	}
	if c := res.CPU; c != nil {
		return append(row, csvNum(c.LocalPercent), csvNum(c.RemotePercent), csvNum(c.LocalUsPerMsg), csvNum(c.RemoteUsPerMsg))
	}
	return append(row, "", "", "", "")
}

// csvNum is the shortest decimal that reads back as the same float64, or
// "" for a value that was not measured.
func csvNum(n Num) string {
	if !n.Valid() {
		return ""
	}
	return strconv.FormatFloat(float64(n), 'f', -1, 64)
}

func csvTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.Format(time.RFC3339Nano)
}
