package reports

import "io"

// Record holds a run's results, each kept once, in the order they were
// measured: one entry per row perftest prints. Every output is a view of
// it: the text row ([Record.WriteRow], printed as the row is recorded),
// the rows of perftest's JSON file ([JSON]) and the rows of the results
// model ([Record.Results]: the JSON file's "pvperf" object, CSV, HTML and
// benchfmt). The zero value is an empty record.
type Record struct {
	rows []recordRow
}

// recordRow is one measured row: exactly one of bw, lat and dur is set.
type recordRow struct {
	// side is whose measurement bw is: SideLocal, or SideRemote for the
	// server of a unidirectional test, which prints the client's numbers.
	side string
	bw   *BWResult
	// remote is the peer's own result of a bidirectional row, which
	// prints the sum of bw and remote.
	remote *BWResult
	// both: the --report-both block (local, then remote row) was printed
	// after the row.
	both bool
	lat  *LatencyResult
	dur  *LatencyDurationResult
}

// AddBW records a bandwidth row measured by side (SideLocal or
// SideRemote).
func (r *Record) AddBW(side string, res BWResult) {
	r.rows = append(r.rows, recordRow{side: side, bw: &res})
}

// AddBidirectionalBW records a bidirectional row: this side's and the
// peer's results, which the row prints summed.
func (r *Record) AddBidirectionalBW(local, remote BWResult) {
	r.rows = append(r.rows, recordRow{side: SideLocal, bw: &local, remote: &remote})
}

// PrintedBoth records that the last (bidirectional) row was followed by
// the --report-both block, its local and then its remote row: perftest's
// JSON file then holds the remote row.
func (r *Record) PrintedBoth() {
	if n := len(r.rows); n > 0 && r.rows[n-1].remote != nil {
		r.rows[n-1].both = true
	}
}

// AddLatency records an iteration-mode latency row.
func (r *Record) AddLatency(res LatencyResult) {
	r.rows = append(r.rows, recordRow{side: SideLocal, lat: &res})
}

// AddLatencyDuration records a duration-mode latency row.
func (r *Record) AddLatencyDuration(res LatencyDurationResult) {
	r.rows = append(r.rows, recordRow{side: SideLocal, dur: &res})
}

// Len is the number of rows recorded.
func (r *Record) Len() int { return len(r.rows) }

// WriteRow writes row i (0 is the first recorded) as perftest prints it:
// the BW row (summed for a bidirectional row), the latency row with its
// -U/-H dump, or the duration-mode latency row.
func (r *Record) WriteRow(w io.Writer, ti *TestInfo, i int) error {
	row := &r.rows[i]
	switch {
	case row.bw != nil:
		return WriteBWReport(w, ti, *row.bw, row.remote)
	case row.lat != nil:
		return WriteLatencyReport(w, ti, row.lat)
	default:
		return WriteLatencyDurationReport(w, ti, *row.dur)
	}
}

// Results returns the rows of the results model: one per recorded row,
// and for a bidirectional row three (local, remote and their sum). gbits
// tells the unit of the BW results (true: Gb/s, as with --report_gbits;
// false: MiB/s); clock is the tick rate latency results were computed
// with, which converts a cycles-mode (-C) result to microseconds.
func (r *Record) Results(gbits bool, clock Clock) []Result {
	var out []Result
	for i := range r.rows {
		row := &r.rows[i]
		switch {
		case row.remote != nil:
			out = append(out, bwRow(SideLocal, *row.bw, gbits), bwRow(SideRemote, *row.remote, gbits),
				bwRow(SideSum, SumBW(*row.bw, *row.remote), gbits))
		case row.bw != nil:
			out = append(out, bwRow(row.side, *row.bw, gbits))
		case row.lat != nil:
			out = append(out, latencyRow(row.side, row.lat, clock))
		default:
			out = append(out, latencyDurationRow(row.side, *row.dur))
		}
	}
	return out
}
