package reports

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/pvperf/pvperf/perftest"
)

// The results model
//
// Run is what every machine-readable output is made from: the JSON file's
// "pvperf" object, the CSV rows, the HTML report and the benchfmt lines.
// It holds numbers in fixed units named by their keys (bytes, MiB/s, Gb/s,
// Mpps, microseconds), whatever --report_gbits or -C chose for the text.

// SchemaVersion is the version of the "pvperf" object of the JSON file.
// It changes when a key is removed or changes meaning; adding keys does
// not change it. Version 2: stdev_us is the samples' standard deviation
// (in version 1, perftest's t_stdev, each deviation truncated to a whole
// microsecond). Version 3: repeats.converged is null without a target (in
// version 2, true). ParseRun reads MinSchemaVersion to SchemaVersion.
const (
	SchemaVersion    = 3
	MinSchemaVersion = 1
)

// Sides of a result row.
const (
	// SideLocal is this side's own measurement.
	SideLocal = "local"
	// SideRemote is the peer's measurement, received over the out-of-band
	// connection (the server of a unidirectional BW test prints the
	// client's numbers; a bidirectional run has both).
	SideRemote = "remote"
	// SideSum is local plus remote: the row a bidirectional run prints.
	SideSum = "sum"
)

// Kinds of run.
const (
	KindBW              = "bw"
	KindLatency         = "latency"
	KindLatencyDuration = "latency_duration"
)

// Run is one run of one test on one side: its description and its rows,
// one per (message size, side).
type Run struct {
	Info    RunInfo  `json:"info"`
	Results []Result `json:"results"`
	// Repeats summarises the runs of a repeated test (nil: one run);
	// Results are then the last run's.
	Repeats *Repeats `json:"repeats,omitempty"`
	// Fit is Hockney's model fitted to a sweep of sizes (nil: none).
	Fit *Fit `json:"hockney_fit,omitempty"`
	// Incomplete says why the run stopped before its end (an interrupt, a
	// peer that died, a failed repeat): Results then hold only the sizes
	// done before, and Repeats only the runs done; "" for a run that ended
	// as it should.
	Incomplete string `json:"incomplete,omitempty"`
	// Source is where the run was read from (a file name), for legends
	// and error messages; it is not written.
	Source string `json:"-"`
}

// RunInfo describes a run.
type RunInfo struct {
	// Test is the command: "write_bw", "send_lat", ...
	Test string `json:"test"`
	// Title is perftest's test name, e.g. "RDMA_Write_BW_Test".
	Title string `json:"title"`
	// Kind is KindBW, KindLatency or KindLatencyDuration.
	Kind string `json:"kind"`
	// Verb is perftest's verb: "RDMA_Write", "Send", "Atomic", ...
	Verb          string `json:"verb"`
	Bidirectional bool   `json:"bidirectional"`
	// Role is "client" or "server"; Loopback marks a run of both sides in
	// one process (the client's results).
	Role     string `json:"role"`
	Loopback bool   `json:"loopback"`
	// Device is the device's name and Driver what drives it ("rdma_rxe",
	// "vmw_pvrdma", "emu/pvrdma-hw14").
	Device string `json:"device"`
	Driver string `json:"driver"`
	// LinkLayer is "IB" or "Ethernet"; RoCEVersion is the version of the
	// GID used (1 or 2) on Ethernet, 0 otherwise; GIDIndex is -1 when no
	// GID is used.
	LinkLayer   string `json:"link_layer"`
	RoCEVersion int    `json:"roce_version"`
	GIDIndex    int    `json:"gid_index"`
	// Connection is "RC", "UC" or "UD"; QPs the number of queue pairs.
	Connection string `json:"connection"`
	QPs        int    `json:"qps"`
	MTU        int    `json:"mtu_bytes"`
	// Iterations is -n (per QP); DurationSeconds is -D (0: iteration
	// mode).
	Iterations      uint64 `json:"iterations"`
	DurationSeconds int    `json:"duration_s"`
	TxDepth         int    `json:"tx_depth"`
	// Host is this machine's host name, Peer the server's address given
	// to the client ("" on a server).
	Host string `json:"host"`
	Peer string `json:"peer"`
	// PvperfVersion is pvperf's version; PerftestVersion the perftest
	// protocol version spoken.
	PvperfVersion   string `json:"pvperf_version"`
	PerftestVersion string `json:"perftest_version"`
	// Time is when the run started.
	Time time.Time `json:"time"`
	// DataPath is how an emulated device reached the peer (the header's
	// " Data path" line: "memory copy", "RoCE v2, a -> b", ...); empty for
	// a kernel device.
	DataPath string `json:"data_path,omitempty"`
}

// Result is one row: one message size on one side.
type Result struct {
	Side       string `json:"side"`
	Size       uint64 `json:"msg_size_bytes"`
	Iterations uint64 `json:"iterations"`
	// BW is set for bandwidth runs, Latency for latency runs.
	BW      *BWStats      `json:"bw,omitempty"`
	Latency *LatencyStats `json:"latency,omitempty"`
	// CPUUtil is --cpu_util's CPU usage in percent (NaN: not measured).
	CPUUtil Num `json:"cpu_util_percent"`
	// CPU is the CPU use and service demand of both sides over the row's
	// measurement (nil: not measured).
	CPU *CPUStats `json:"cpu,omitempty"`
	// Distribution is a latency row's HDR histogram (nil: none kept).
	Distribution *Distribution `json:"latency_distribution,omitempty"`
}

// BWStats are a bandwidth row's numbers in both of perftest's units.
// Peaks are 0 when the peak was not measured.
type BWStats struct {
	PeakMiBps    Num `json:"peak_MiB_per_s"`
	AverageMiBps Num `json:"average_MiB_per_s"`
	PeakGbps     Num `json:"peak_Gb_per_s"`
	AverageGbps  Num `json:"average_Gb_per_s"`
	MsgRateMpps  Num `json:"msg_rate_Mpps"`
}

// LatencyStats are a latency row's numbers in microseconds (one-way for
// SEND and WRITE, round trip for READ and ATOMIC, as perftest reports
// them). Stdev is the standard deviation of the samples t_avg is the mean
// of (perftest's t_stdev, in the text, truncates each deviation to a
// whole microsecond first, which makes it 0 for samples less than 1 µs
// apart). Duration-mode rows have only Mean
// and TPS; the others are NaN there (null in JSON). Percentiles follow
// perftest's rule (see LatencyResult.Percentile).
type LatencyStats struct {
	MinUs     Num `json:"min_us"`
	MaxUs     Num `json:"max_us"`
	TypicalUs Num `json:"typical_us"`
	MeanUs    Num `json:"mean_us"`
	StdevUs   Num `json:"stdev_us"`
	P50Us     Num `json:"p50_us"`
	P90Us     Num `json:"p90_us"`
	P99Us     Num `json:"p99_us"`
	P999Us    Num `json:"p99.9_us"`
	P9999Us   Num `json:"p99.99_us"`
	P99999Us  Num `json:"p99.999_us"`
	// TPS is transactions per second (duration mode; NaN otherwise).
	TPS Num `json:"tps"`
}

// Num is a float64 that is written to JSON as null when it is not finite
// (NaN, ±Inf) and read back from null as NaN.
type Num float64

// NaN is a Num that is not a number: a value that was not measured.
var NaN = Num(math.NaN())

// Valid reports whether n is a finite number.
func (n Num) Valid() bool {
	f := float64(n)
	return !math.IsNaN(f) && !math.IsInf(f, 0)
}

// MarshalJSON writes the shortest decimal (no exponent) that reads back the same
// float64, or null.
func (n Num) MarshalJSON() ([]byte, error) {
	if !n.Valid() {
		return []byte("null"), nil
	}
	return strconv.AppendFloat(nil, float64(n), 'f', -1, 64), nil
}

// UnmarshalJSON reads a number or null (NaN).
func (n *Num) UnmarshalJSON(b []byte) error {
	if string(bytes.TrimSpace(b)) == "null" {
		*n = NaN
		return nil
	}
	var f float64
	if err := json.Unmarshal(b, &f); err != nil {
		return err
	}
	*n = Num(f)
	return nil
}

// NewRunInfo fills the parts of a RunInfo that TestInfo knows: title,
// kind, verb, direction, role, device, link, GID index, connection, QPs,
// MTU and TX depth. The caller adds the rest.
func NewRunInfo(test string, ti *TestInfo) RunInfo {
	kind := KindBW
	if ti.Test == perftest.Latency {
		kind = KindLatency
		if ti.Duration {
			kind = KindLatencyDuration
		}
	}
	role := "client"
	if ti.Server {
		role = "server"
	}
	gid := ti.GIDIndex
	if gid == NotSet {
		gid = -1
	}
	return RunInfo{
		Test:          test,
		Title:         ti.JSONTestName(),
		Kind:          kind,
		Verb:          ti.Verb.String(),
		Bidirectional: ti.Duplex,
		Role:          role,
		Device:        ti.Device,
		LinkLayer:     ti.Link.String(),
		GIDIndex:      gid,
		Connection:    ti.Connection.String(),
		QPs:           ti.NumQPs,
		MTU:           ti.MTU,
		TxDepth:       ti.TxDepth,
	}
}

// bwRow is a BW result of side in the model's units. gbits tells the unit
// of res (true: Gb/s, as with --report_gbits; false: MiB/s).
func bwRow(side string, res BWResult, gbits bool) Result {
	// Multiplying first keeps exact products exact (1000 MiB/s is
	// 8.388608 Gb/s, not 8.388608000000001).
	toGb := func(mib float64) Num { return Num(mib * MiBFactor / GbitFactor) }
	toMiB := func(gb float64) Num { return Num(gb * GbitFactor / MiBFactor) }
	var st BWStats
	if gbits {
		st.PeakGbps, st.AverageGbps = Num(res.Peak), Num(res.Average)
		st.PeakMiBps, st.AverageMiBps = toMiB(res.Peak), toMiB(res.Average)
	} else {
		st.PeakMiBps, st.AverageMiBps = Num(res.Peak), Num(res.Average)
		st.PeakGbps, st.AverageGbps = toGb(res.Peak), toGb(res.Average)
	}
	if res.Peak == 0 {
		// perftest prints a peak it did not measure (-N, -D, a server
		// of SEND) as 0.00; measured, it is never 0.
		st.PeakMiBps, st.PeakGbps = NaN, NaN
	}
	st.MsgRateMpps = Num(res.MsgRate)
	return Result{Side: side, Size: res.Size, Iterations: res.Iters, BW: &st, CPUUtil: cpuNum(res.CPUUtil)}
}

// latencyRow is an iteration-mode latency result of side in the model's
// units. clock is the tick rate the result was computed with, used to
// convert a cycles-mode (-C) result to microseconds.
func latencyRow(side string, res *LatencyResult, clock Clock) Result {
	f := 1.0
	switch {
	case res.Unit != "cycles":
	case res.UsPerUnit > 0:
		f = res.UsPerUnit
	default:
		f = 1 / clock.mhz()
	}
	us := func(v float64) Num { return Num(v * f) }
	st := LatencyStats{
		MinUs:     us(res.Min),
		MaxUs:     us(res.Max),
		TypicalUs: us(res.Typical),
		MeanUs:    us(res.Avg),
		StdevUs:   us(res.Deviation),
		P50Us:     us(res.Percentile(0.50)),
		P90Us:     us(res.Percentile(0.90)),
		P99Us:     us(res.P99),
		P999Us:    us(res.P999),
		P9999Us:   us(res.Percentile(0.9999)),
		P99999Us:  us(res.Percentile(0.99999)),
		TPS:       NaN,
	}
	return Result{Side: side, Size: res.Size, Iterations: res.Iters, Latency: &st, CPUUtil: cpuNum(res.CPUUtil),
		Distribution: newDistribution(res.Hist, res.HistPerUs)}
}

// latencyDurationRow is a duration-mode latency result of side in the
// model's units.
func latencyDurationRow(side string, res LatencyDurationResult) Result {
	st := LatencyStats{
		MinUs: NaN, MaxUs: NaN, TypicalUs: NaN, StdevUs: NaN,
		P50Us: NaN, P90Us: NaN, P99Us: NaN, P999Us: NaN, P9999Us: NaN, P99999Us: NaN,
		MeanUs: Num(res.Avg),
		TPS:    Num(res.TPS),
	}
	d := newDistribution(res.Hist, res.Quotient)
	if d != nil {
		// No samples are kept in a duration run: its percentiles are
		// the histogram's.
		st.MinUs, st.MaxUs = d.MinUs, d.MaxUs
		st.P50Us, st.P90Us, st.P99Us, st.P999Us, st.P9999Us, st.P99999Us = d.P50Us, d.P90Us, d.P99Us, d.P999Us, d.P9999Us, d.P99999Us
	}
	return Result{Side: side, Size: res.Size, Iterations: res.Iters, Latency: &st, CPUUtil: cpuNum(res.CPUUtil), Distribution: d}
}

// cpuNum is the CPU usage, NaN when it was not measured (0).
func cpuNum(c float32) Num {
	if c == 0 {
		return NaN
	}
	return Num(c)
}

// Primary returns the rows that stand for the run in charts and
// comparisons, in size order as recorded: the "sum" rows of a
// bidirectional run, else the local rows, else the remote ones (the
// server of a unidirectional BW test has only the client's numbers).
func (r *Run) Primary() []Result {
	for _, side := range []string{SideSum, SideLocal, SideRemote} {
		var rows []Result
		for _, res := range r.Results {
			if res.Side == side {
				rows = append(rows, res)
			}
		}
		if len(rows) > 0 {
			return rows
		}
	}
	return nil
}

// Merge joins runs that are parts of one sweep: runs whose descriptions
// are equal but for their start times, and whose message sizes do not
// overlap, become one run (the first one's description, rows sorted by
// size, Source "first.json and N more"). Other runs are kept as they are, in
// their order. A script that runs one size at a time thus gives one curve
// per configuration; two runs of the same sizes (today and yesterday)
// stay two curves.
func Merge(runs []Run) []Run {
	var out []Run
	var parts []int // how many runs each of out holds
	for _, r := range runs {
		merged := false
		for i := range out {
			if sameSetup(&out[i].Info, &r.Info) && !sizesOverlap(&out[i], &r) {
				out[i].Results = append(slices.Clip(out[i].Results), r.Results...)
				slices.SortStableFunc(out[i].Results, func(a, b Result) int { return cmp.Compare(a.Size, b.Size) })
				if r.Incomplete != "" {
					out[i].Incomplete = strings.TrimPrefix(out[i].Incomplete+"; "+r.Incomplete, "; ")
				}
				out[i].Repeats = mergeRepeats(out[i].Repeats, r.Repeats)
				parts[i]++
				merged = true
				break
			}
		}
		if !merged {
			out = append(out, r)
			parts = append(parts, 1)
		}
	}
	for i := range out {
		if parts[i] > 1 && out[i].Source != "" {
			out[i].Source = fmt.Sprintf("%s and %d more", filepath.Base(out[i].Source), parts[i]-1)
		}
	}
	return out
}

// mergeRepeats is the summary of two series of one setup whose sizes do
// not overlap: the rows of both (the first's settings, the larger count
// of runs, converged when both are).
func mergeRepeats(a, b *Repeats) *Repeats {
	switch {
	case b == nil:
		return a
	case a == nil:
		return b
	}
	m := *a
	m.Rows = append(slices.Clone(a.Rows), b.Rows...)
	m.Runs = max(a.Runs, b.Runs)
	m.Converged = a.Converged && b.Converged
	return &m
}

func sameSetup(a, b *RunInfo) bool {
	x, y := *a, *b
	x.Time, y.Time = time.Time{}, time.Time{}
	return x == y
}

func sizesOverlap(a, b *Run) bool {
	for _, x := range a.Results {
		for _, y := range b.Results {
			if x.Size == y.Size && x.Side == y.Side {
				return true
			}
		}
	}
	return false
}
