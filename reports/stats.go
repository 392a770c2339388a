package reports

import (
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/pvperf/pvperf/reports/hdr"
)

// Time base
//
// The statistics work on timestamps in ticks of a clock, as perftest works
// on CPU cycles (rdtsc). A tick value is an int64; only differences matter,
// and timestamps must not decrease where perftest expects them to increase
// (a completion after its post, the end of a window after its start).
// Differences are then taken in uint64, as perftest's cycles_t is unsigned
// long long, so for such inputs every integer division and truncation
// matches perftest's.
//
// Clock.MHz is the number of ticks per microsecond (perftest's
// get_cpu_mhz()). pvperf's engine uses nanoseconds from the monotonic
// clock: Nanoseconds (MHz = 1000). Cycles mode (-C) reports CPU cycles at
// the rate LatencyInput.CyclesMHz gives (ticks as they are without one).

// Clock is the time base of tick values.
type Clock struct {
	// MHz is ticks per microsecond (perftest's get_cpu_mhz()).
	MHz float64
}

// Nanoseconds is the clock of timestamps in nanoseconds.
var Nanoseconds = Clock{MHz: 1000}

// Format factors: bytes per reported unit of bandwidth.
const (
	// MiBFactor is 2^20 bytes (perftest's 0x100000): MiB/s.
	MiBFactor = 0x100000
	// GbitFactor is 10^9 bits = 125000000 bytes: Gb/s (--report_gbits).
	GbitFactor = 125000000
)

// FormatFactor returns the bytes per reported bandwidth unit:
// GbitFactor with --report_gbits, MiBFactor otherwise.
func FormatFactor(gbits bool) int64 {
	if gbits {
		return GbitFactor
	}
	return MiBFactor
}

// BWInput is what perftest's print_report_bw reads.
type BWInput struct {
	// Size is the message size in bytes.
	Size uint64
	// Iters is the number of messages per QP in iteration mode
	// (user_param->iters), or the completions counted in the sample window
	// in duration mode. For --run_infinitely pass the messages of the
	// interval (iters - last_iters).
	Iters uint64
	// NumQPs multiplies Iters in iteration mode. DC and XRC duplex runs
	// count half of their QPs: pass the halved number. 0 means 1.
	NumQPs int
	// Duration: -D (or --run_infinitely): Iters is not multiplied by
	// NumQPs. The peak is never measured in duration mode; set NoPeak.
	Duration bool
	// NoPeak: the peak is not measured (-N, -D, more than 20000 iterations,
	// the receiving server of SEND/WRITE_IMM). Posted[0] and Completed[0]
	// are then the start and end of the measurement.
	NoPeak bool
	// CQMod is the CQ moderation and PostList the post list size
	// (0 means 1): the steps of the peak window search.
	CQMod    int
	PostList int
	// Posted holds perftest's tposted: Posted[i] is the tick just before
	// message i was posted (only Posted[0] without peak).
	// Completed holds tcompleted: Completed[k-1] is the tick at which the
	// completion that brought the completed count to k was polled; only
	// every CQMod-th slot and the last one need to be filled (only
	// Completed[0], the end tick, without peak). With peak both need
	// Iters*NumQPs entries.
	//
	// Ticks must be positive and unfilled Completed slots 0, as in
	// perftest's zeroed array: with CQMod > 1 the initial window
	// Completed[0]-Posted[0] then wraps around in uint64 and never wins.
	// (A clock that starts at 0 would make that window 0 ticks long and the
	// peak infinite.)
	Posted    []int64
	Completed []int64
	// Clock is the tick rate; zero means Nanoseconds.
	Clock Clock
	// Gbits selects Gb/s (10^9 bits) instead of MiB/s.
	Gbits bool
	// BiFactor is perftest's run_inf_bi_factor: 2 for a bidirectional
	// --run_infinitely run of a non-SEND verb, 1 (or 0) otherwise.
	BiFactor int
	// ItersPerPort are the messages per port of a dual-port run
	// (--report-per-port); they give the per-port columns.
	ItersPerPort [2]uint64
	// CPUUtil is copied to the result (see CPUUtilization).
	CPUUtil float32
}

// BWResult is one BW table row: perftest's bw_report_data.
type BWResult struct {
	Size    uint64  // #bytes
	Iters   uint64  // #iterations
	Peak    float64 // BW peak, MiB/s or Gb/s
	Average float64 // BW average, MiB/s or Gb/s
	MsgRate float64 // MsgRate, Mpps
	// Per-port columns (--report-per-port).
	AvgPort1, MsgRatePort1 float64
	AvgPort2, MsgRatePort2 float64
	// CPUUtil is the CPU_Util[%] column (--cpu_util with -D).
	CPUUtil float32
}

// ErrTooFewSamples is returned when there are not enough samples for the
// statistics perftest computes.
var ErrTooFewSamples = errors.New("reports: too few samples")

func (c Clock) mhz() float64 {
	if c.MHz == 0 {
		return Nanoseconds.MHz
	}
	return c.MHz
}

// ComputeBW computes a BW row exactly as perftest's print_report_bw:
//
//	N          = Iters * NumQPs (Iters alone in duration mode)
//	T          = Completed[N-1] - Posted[0]  (Completed[0] - Posted[0] without peak)
//	F          = MHz * 10^6 ticks per second
//	BW average = Size * N * F / (T * format_factor)           (double)
//	MsgRate    = N * F / (T * 10^6)                           (double)
//	BW peak    = (Size * (uint64)F) / (best * format_factor)  (uint64 operands, double division)
//
// where best is the smallest integer average time per message over every
// window of consecutive messages [i, j]: i steps by PostList, j runs over
// the filled completion slots (ROUND_UP(i+1, CQMod)-1, then every CQMod, plus
// N-1 when N is not a multiple of CQMod), and
// best = min((Completed[j] - Posted[i]) / (j - i + 1)) in uint64 integer
// division, starting from Completed[0] - Posted[0]. The search is
// O(N^2/CQMod), which is why perftest disables the peak above 20000
// iterations. Without peak, BW peak is 0.
func ComputeBW(in BWInput) (BWResult, error) {
	if len(in.Posted) == 0 || len(in.Completed) == 0 {
		return BWResult{}, fmt.Errorf("%w: BW needs Posted[0] and Completed[0]", ErrTooFewSamples)
	}
	qps := uint64(max(in.NumQPs, 1))
	cqMod := max(in.CQMod, 1)
	postList := max(in.PostList, 1)
	bi := uint64(max(in.BiFactor, 1))
	iters := in.Iters
	total := iters * qps // the peak search runs over iters*num_of_qps in any mode

	optDelta := uint64(in.Completed[0] - in.Posted[0])
	if !in.NoPeak {
		if total == 0 {
			return BWResult{}, fmt.Errorf("%w: BW peak needs at least one message", ErrTooFewSamples)
		}
		if uint64(len(in.Posted)) < total || uint64(len(in.Completed)) < total {
			return BWResult{}, fmt.Errorf("%w: BW peak over %d messages needs %d posted and completed ticks, have %d and %d",
				ErrTooFewSamples, total, total, len(in.Posted), len(in.Completed))
		}
		optDelta = bestWindow(in.Posted, in.Completed, int(total), cqMod, postList, optDelta)
	}

	cyclesToUnits := in.Clock.mhz() * 1000000
	tsize := bi * in.Size
	n := iters
	if !in.Duration {
		n = total
	}
	loc := uint64(0)
	if !in.NoPeak {
		loc = n - 1
	}
	if loc >= uint64(len(in.Completed)) {
		return BWResult{}, fmt.Errorf("%w: need Completed[%d]", ErrTooFewSamples, loc)
	}
	formatFactor := FormatFactor(in.Gbits)
	// sum_of_test_cycles = (double)(tcompleted[location_arr] - tposted[0]).
	sum := float64(uint64(in.Completed[loc] - in.Posted[0]))
	// Each expression keeps perftest's evaluation order; the explicit
	// float64 conversions keep every step rounded as C does (no fused
	// multiply-add).
	denom := float64(sum * float64(formatFactor))
	rateDenom := float64(sum * 1000000)
	r := BWResult{
		Size:    in.Size,
		Iters:   n,
		Average: float64(float64(float64(tsize)*float64(n))*cyclesToUnits) / denom,
		MsgRate: float64(float64(float64(n)*cyclesToUnits)*float64(bi)) / rateDenom,
		AvgPort1: float64(float64(float64(tsize)*float64(in.ItersPerPort[0]))*cyclesToUnits) /
			denom,
		MsgRatePort1: float64(float64(float64(in.ItersPerPort[0])*cyclesToUnits)*float64(bi)) / rateDenom,
		AvgPort2: float64(float64(float64(tsize)*float64(in.ItersPerPort[1]))*cyclesToUnits) /
			denom,
		MsgRatePort2: float64(float64(float64(in.ItersPerPort[1])*cyclesToUnits)*float64(bi)) / rateDenom,
		CPUUtil:      in.CPUUtil,
	}
	// peak_up = !noPeak * (cycles_t)tsize * (cycles_t)cycles_to_units;
	// peak_down = (cycles_t)opt_delta * format_factor;
	// bw_peak = (double)peak_up / peak_down.
	var peakUp uint64
	if !in.NoPeak {
		peakUp = tsize * uint64(cyclesToUnits)
	}
	peakDown := optDelta * uint64(formatFactor)
	r.Peak = float64(peakUp) / float64(peakDown)
	return r, nil
}

// bestWindow is perftest's peak search: the smallest integer average
// ticks per message over the windows described at ComputeBW, starting
// from opt.
func bestWindow(posted, completed []int64, total, cqMod, postList int, opt uint64) uint64 {
	for i := 0; i < total; i += postList {
		for j := roundUp(i+1, cqMod) - 1; j < total; j += cqMod {
			t := uint64(completed[j]-posted[i]) / uint64(j-i+1)
			if t < opt {
				opt = t
			}
		}
		// The last WR is always signalled: its slot is filled even when
		// total is not a multiple of cqMod.
		if total%cqMod != 0 {
			j := total - 1
			t := uint64(completed[j]-posted[i]) / uint64(j-i+1)
			if t < opt {
				opt = t
			}
		}
	}
	return opt
}

// roundUp is perftest's ROUND_UP(value, alignment).
func roundUp(v, align int) int {
	if v%align == 0 {
		return v
	}
	return align * (v/align + 1)
}

// SumBW is the row a bidirectional (-b) run prints: peaks, averages and
// rates (also per port) added, #iterations and size of the local side.
// The text output does the same sum itself (see WriteBWReport), because
// perftest chooses the row format from the local average alone.
func SumBW(local, remote BWResult) BWResult {
	s := local
	s.Peak += remote.Peak
	s.Average += remote.Average
	s.MsgRate += remote.MsgRate
	s.AvgPort1 += remote.AvgPort1
	s.MsgRatePort1 += remote.MsgRatePort1
	s.AvgPort2 += remote.AvgPort2
	s.MsgRatePort2 += remote.MsgRatePort2
	return s
}

// CPUUtilization is perftest's calc_cpu_util: the share of user time in
// user+idle time between two reads of /proc/stat's first line, in percent,
// computed in float as perftest does. (perftest ignores system, irq and the
// other fields: that is its documented behaviour, reproduced here.)
func CPUUtilization(user0, idle0, user1, idle1 int64) float32 {
	du := user1 - user0
	di := idle1 - idle0
	if du+di == 0 {
		return 0
	}
	return float32(float32(float32(du)/float32(du+di)) * 100)
}

// LatencyInput is what perftest's print_report_lat reads.
type LatencyInput struct {
	// Size is the message size and Iters the printed #iterations
	// (user_param->iters).
	Size  uint64
	Iters uint64
	// Samples are the measured round trips in ticks, in measurement order
	// (perftest's delta array before sorting). For the latency tests they
	// are PostedDeltas(tposted): iters-1 samples.
	Samples []int64
	// Clock is the tick rate; zero means Nanoseconds.
	Clock Clock
	// RTTFactor divides every sample: Verb.RTTFactor() (2 for SEND and
	// WRITE, 1 for READ and ATOMIC). 0 means 1.
	RTTFactor int
	// Cycles is -C: report CPU cycles instead of microseconds, at
	// CyclesMHz cycles per microsecond; with CyclesMHz 0, the ticks as
	// they are (the clock's MHz taken as 1).
	Cycles    bool
	CyclesMHz float64
	// CPUUtil is copied to the result (see CPUUtilization).
	CPUUtil float32
	// Hist, if set, is the loop's histogram of the same samples, in
	// ticks; it is kept in the result.
	Hist *hdr.Histogram
}

// PostedDeltas returns perftest's latency samples from the post
// timestamps: posted[i+1] - posted[i] for i < len(posted)-1.
func PostedDeltas(posted []int64) []int64 {
	if len(posted) < 2 {
		return nil
	}
	d := make([]int64, len(posted)-1)
	for i := range d {
		d[i] = posted[i+1] - posted[i]
	}
	return d
}

// LatencyResult holds perftest's latency statistics (in microseconds, or
// ticks with -C) and the samples the -U and -H dumps print.
type LatencyResult struct {
	Size  uint64
	Iters uint64
	// Min, Max, Typical, Avg, Stdev, P99 and P999 are t_min, t_max,
	// t_typical, t_avg, t_stdev and the 99% and 99.9% percentiles.
	Min, Max, Typical, Avg, Stdev, P99, P999 float64
	// Deviation is the standard deviation of the same samples, without
	// perftest's truncation of each deviation to a whole unit (which
	// makes t_stdev 0 for samples that differ by less than one).
	Deviation float64
	// Unit is "usec", or "cycles" with -C.
	Unit string
	// Measured is the number of samples the statistics use (all samples
	// but the 2 largest).
	Measured int
	// Quotient is the divisor from ticks to the unit (MHz*RTTFactor, or
	// with -C RTTFactor: the samples are then whole cycles, as
	// perftest's).
	Quotient float64
	// UsPerUnit converts the unit to microseconds: 1, or with -C the
	// microseconds of a cycle.
	UsPerUnit float64
	// Unsorted are the samples in measurement order, and Sorted the
	// samples sorted ascending (all of them, including the 2 dropped), in
	// ticks (with -C and CyclesMHz, in cycles). Unsorted is what -U
	// prints; Sorted[:Measured] what -H prints.
	Unsorted []int64
	Sorted   []int64
	// CPUUtil is the CPU_Util[%] column (--cpu_util with -D).
	CPUUtil float32
	// Hist is the loop's HDR histogram of the samples, in ticks (nil
	// without one); divide by HistPerUs for microseconds.
	Hist      *hdr.Histogram
	HistPerUs float64
}

// latencyTail is perftest's LAT_MEASURE_TAIL: the largest samples dropped.
const latencyTail = 2

// ComputeLatency computes perftest's latency statistics (print_report_lat)
// from n samples:
//
//   - q = MHz*RTTFactor (RTTFactor with -C); every printed value is ticks/q
//     (with -C and CyclesMHz, the samples are first made whole cycles, and
//     the values are cycles/q);
//   - the samples are sorted ascending and the 2 largest dropped: m = n-2;
//   - t_min = d[0], t_max = d[m] (the second largest of all samples);
//   - t_typical = d[m/2] for odd m, (d[m/2-1] + d[m/2]) / 2 in integer ticks
//     for even m;
//   - t_avg = (sum of d[i]/q for i < m) / m;
//   - t_stdev = sqrt(sum of int(int(t_avg - d[i]/q)^2) / m): each deviation
//     is truncated to a C int before squaring and the square is truncated to
//     a C int again (x86-64: out-of-range conversions give INT_MIN, so
//     deviations of 46341 units or more add -2^31, and a negative sum gives
//     "-nan" as on x86-64);
//   - p99 = d[ceil(m*0.99)], p99.9 = d[ceil(m*0.999)] (indexes into all n
//     sorted samples).
//
// n must be at least 3 (perftest needs -n >= 5: n = iters-1 >= 4).
func ComputeLatency(in LatencyInput) (LatencyResult, error) {
	n := len(in.Samples)
	if n < latencyTail+1 {
		return LatencyResult{}, fmt.Errorf("%w: latency statistics need at least %d samples, have %d",
			ErrTooFewSamples, latencyTail+1, n)
	}
	rtt := float64(max(in.RTTFactor, 1))
	unitsPerTick := in.Clock.mhz()
	unit, usPerUnit := "usec", 1.0
	samples := in.Samples
	if in.Cycles {
		unit = "cycles"
		unitsPerTick, usPerUnit = 1, 1/in.Clock.mhz()
		if in.CyclesMHz > 0 {
			// perftest's samples are differences of the cycle
			// counter, whole cycles: so are these.
			perTick := in.CyclesMHz / in.Clock.mhz()
			samples = make([]int64, n)
			for i, t := range in.Samples {
				samples[i] = int64(math.Round(float64(t) * perTick))
			}
			usPerUnit = 1 / in.CyclesMHz
		}
	}
	q := float64(unitsPerTick * rtt)

	sorted := slices.Clone(samples)
	// perftest's cycles_compare compares unsigned cycles_t values.
	slices.SortFunc(sorted, func(a, b int64) int {
		ua, ub := uint64(a), uint64(b)
		switch {
		case ua < ub:
			return -1
		case ua > ub:
			return 1
		}
		return 0
	})
	m := n - latencyTail
	val := func(i int) float64 { return float64(uint64(sorted[i])) / q }

	// get_median(m, delta): (m-1)%2 != 0 means m is even.
	var median uint64
	if (m-1)%2 != 0 {
		median = (uint64(sorted[m/2]) + uint64(sorted[m/2-1])) / 2
	} else {
		median = uint64(sorted[m/2])
	}

	var avgSum float64
	for i := 0; i < m; i++ {
		avgSum += val(i)
	}
	avg := avgSum / float64(m)

	var stdevSum, devSum float64
	for i := 0; i < m; i++ {
		tempVar := cInt(avg - val(i))
		powVar := cInt(float64(float64(tempVar) * float64(tempVar)))
		stdevSum += float64(powVar)
		d := avg - val(i)
		devSum += d * d
	}
	stdev := cSqrt(stdevSum / float64(m))

	i99 := int(math.Ceil(float64(m) * 0.99))
	i999 := int(math.Ceil(float64(m) * 0.999))
	return LatencyResult{
		Size:      in.Size,
		Iters:     in.Iters,
		Min:       val(0),
		Max:       val(m),
		Typical:   float64(median) / q,
		Avg:       avg,
		Stdev:     stdev,
		Deviation: math.Sqrt(devSum / float64(m)),
		P99:       val(i99),
		P999:      val(i999),
		Unit:      unit,
		Measured:  m,
		Quotient:  q,
		UsPerUnit: usPerUnit,
		Unsorted:  slices.Clone(samples),
		Sorted:    sorted,
		CPUUtil:   in.CPUUtil,
		Hist:      in.Hist,
		HistPerUs: in.Clock.mhz() * rtt,
	}, nil
}

// Percentile returns the nearest-rank p-quantile, in the report unit, of
// the samples perftest reports from: the sorted samples up to its t_max,
// sorted[0] to sorted[m] (m = Measured). That is sample ceil((m+1)*p),
// counting from 1: the median of those samples at 0.5, t_max at 1, and
// nearly always perftest's own p99 and p99.9 (which take sample ceil(m*p)
// counting from 0). It is 0 for a result without samples.
func (r *LatencyResult) Percentile(p float64) float64 {
	if len(r.Sorted) == 0 || r.Quotient == 0 {
		return 0
	}
	last := min(r.Measured, len(r.Sorted)-1)
	i := int(math.Ceil(float64(last+1)*p)) - 1
	i = min(max(i, 0), last)
	return float64(uint64(r.Sorted[i])) / r.Quotient
}

// cInt is C's conversion of a double to a 32-bit int on x86-64
// (cvttsd2si): truncation toward zero, and INT_MIN for NaN or values out of
// range.
func cInt(x float64) int32 {
	if math.IsNaN(x) || x >= 2147483648.0 || x <= -2147483649.0 {
		return math.MinInt32
	}
	return int32(x)
}

// cSqrt is glibc's sqrt on x86-64: the square root of a negative number is
// the default NaN, whose sign bit is set (printf prints "-nan").
func cSqrt(x float64) float64 {
	if x < 0 {
		return math.Copysign(math.NaN(), -1)
	}
	return math.Sqrt(x)
}

// LatencyDurationInput is what perftest's print_report_lat_duration reads.
type LatencyDurationInput struct {
	Size uint64
	// Iters is the number of round trips completed in the sample window.
	Iters uint64
	// Start and End are the ticks at the start and end of the window
	// (tposted[0] and tcompleted[0]).
	Start, End int64
	Clock      Clock   // zero means Nanoseconds
	RTTFactor  int     // 0 means 1
	CPUUtil    float32 // copied to the result (see CPUUtilization)
	// Hist, if set, is the histogram of the times between posts in the
	// window, in ticks; it is kept in the result.
	Hist *hdr.Histogram
}

// LatencyDurationResult is a duration-mode latency row.
type LatencyDurationResult struct {
	Size  uint64
	Iters uint64
	// Avg is t_avg in microseconds: ((T/MHz)/RTTFactor)/Iters.
	Avg float64
	// TPS is the transactions per second: Iters / (T/(MHz*10^6)).
	TPS float64
	// CPUUtil is the CPU_Util[%] column (--cpu_util).
	CPUUtil float32
	// Hist is the histogram of the window's latencies in ticks (nil
	// without one), and Quotient the divisor from ticks to microseconds.
	Hist     *hdr.Histogram
	Quotient float64
}

// ComputeLatencyDuration computes a duration-mode latency row as perftest
// does (no cycles mode there: -C does not apply).
func ComputeLatencyDuration(in LatencyDurationInput) LatencyDurationResult {
	t := float64(uint64(in.End - in.Start))
	mhz := in.Clock.mhz()
	rtt := float64(max(in.RTTFactor, 1))
	return LatencyDurationResult{
		Size:     in.Size,
		Iters:    in.Iters,
		Avg:      ((t / mhz) / rtt) / float64(in.Iters),
		TPS:      float64(in.Iters) / (t / float64(mhz*1000000)),
		CPUUtil:  in.CPUUtil,
		Hist:     in.Hist,
		Quotient: mhz * rtt,
	}
}
