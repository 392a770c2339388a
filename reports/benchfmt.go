package reports

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode"
)

// Go benchmark format
//
// WriteBenchfmt writes runs in the Go benchmark format that `go test
// -bench` prints and benchstat (golang.org/x/perf) reads, one line per
// message size of each run's primary rows (see Run.Primary), named as the
// bench package's benchmarks are:
//
//	BenchmarkWriteBW/qp=1/size=65536  5000  4661 ns/op  14060.91 MB/s  0.2145 Mpps
//	BenchmarkSendLat/qp=1/size=2      1000  1650 ns/op  1580 p50-ns/op  2100 p99-ns/op  0.606 Mpps
//
// For BW runs ns/op is the time per message (1/message rate), MB/s the
// average bandwidth in 10^6 bytes per second (the unit of `go test`'s
// MB/s) and Mpps the message rate. For latency runs ns/op is the mean
// latency (t_avg) and Mpps its inverse; p50-ns/op and p99-ns/op are the
// percentiles. Before each run's lines come configuration lines (test,
// device, driver, RoCE version, connection, host, ...), which benchstat can
// group or filter by, and the Unit lines that tell benchstat which way is
// better. Several runs of the same test and size are several samples of one
// benchmark, as with -count; so are the runs of a repeated series
// (--repeat), one line each, from its summary's values.

// benchSample is one line's figures: a BW run's message rate and average
// bandwidth, or a latency run's mean and percentiles (NaN where absent).
type benchSample struct {
	bw                 bool
	rateMpps, avgMiBps Num
	meanUs, p50, p99   Num
}

func sampleOf(res *Result) benchSample {
	switch {
	case res.BW != nil:
		return benchSample{bw: true, rateMpps: res.BW.MsgRateMpps, avgMiBps: res.BW.AverageMiBps, meanUs: NaN, p50: NaN, p99: NaN}
	case res.Latency != nil:
		l := res.Latency
		return benchSample{rateMpps: NaN, avgMiBps: NaN, meanUs: l.MeanUs, p50: l.P50Us, p99: l.P99Us}
	}
	return benchSample{rateMpps: NaN, avgMiBps: NaN, meanUs: NaN, p50: NaN, p99: NaN}
}

// repeatSamples are the samples of res's row in each run of a repeated
// series (nil for a single run): benchstat then has every run, not only
// the first, whose rows the file holds.
func repeatSamples(r *Run, res *Result) []benchSample {
	if r.Repeats == nil || r.Repeats.Runs < 2 {
		return nil
	}
	vals := map[string][]Num{}
	n := -1
	for _, row := range r.Repeats.Rows {
		if row.Side == res.Side && row.Size == res.Size {
			vals[row.Metric] = row.Values
			if n < 0 || len(row.Values) < n {
				n = len(row.Values)
			}
		}
	}
	if n < 2 {
		return nil
	}
	at := func(metric string, i int) Num {
		if v, ok := vals[metric]; ok {
			return v[i]
		}
		return NaN
	}
	out := make([]benchSample, n)
	for i := range out {
		if res.BW != nil {
			out[i] = benchSample{bw: true, rateMpps: at("msg_rate_Mpps", i), avgMiBps: at("average_MiB_per_s", i), meanUs: NaN, p50: NaN, p99: NaN}
		} else {
			// No p50: the series keeps t_typical, perftest's median,
			// which is not the histogram's p50 a single run gives.
			out[i] = benchSample{rateMpps: NaN, avgMiBps: NaN, meanUs: at("mean_us", i), p50: NaN, p99: at("p99_us", i)}
		}
	}
	return out
}

// write appends the sample's figures to a benchmark line.
func (m benchSample) write(bw *strings.Builder) {
	if m.bw {
		if m.rateMpps.Valid() && m.rateMpps > 0 {
			fmt.Fprintf(bw, "\t%s ns/op", benchNum(1e3/float64(m.rateMpps)))
		}
		if m.avgMiBps.Valid() {
			fmt.Fprintf(bw, "\t%s MB/s", benchNum(float64(m.avgMiBps)*MiBFactor/1e6))
		}
		if m.rateMpps.Valid() {
			fmt.Fprintf(bw, "\t%s Mpps", benchNum(float64(m.rateMpps)))
		}
		return
	}
	if m.meanUs.Valid() && m.meanUs > 0 {
		fmt.Fprintf(bw, "\t%s ns/op", benchNum(float64(m.meanUs)*1e3))
	}
	if m.p50.Valid() {
		fmt.Fprintf(bw, "\t%s p50-ns/op", benchNum(float64(m.p50)*1e3))
	}
	if m.p99.Valid() {
		fmt.Fprintf(bw, "\t%s p99-ns/op", benchNum(float64(m.p99)*1e3))
	}
	if m.meanUs.Valid() && m.meanUs > 0 {
		fmt.Fprintf(bw, "\t%s Mpps", benchNum(1/float64(m.meanUs)))
	}
}

// BenchUnits are the Unit lines that declare the direction of pvperf's
// custom metrics to benchstat.
const BenchUnits = "Unit Mpps better=higher\nUnit p50-ns/op better=lower\nUnit p99-ns/op better=lower\n"

// WriteBenchfmt writes runs in the Go benchmark format.
func WriteBenchfmt(w io.Writer, runs []Run) error {
	var bw strings.Builder
	bw.WriteString(BenchUnits)
	for i := range runs {
		r := &runs[i]
		in := &r.Info
		bw.WriteString("\n")
		for _, kv := range [][2]string{
			{"pvperf-test", in.Test}, {"device", in.Device}, {"driver", in.Driver},
			{"link", in.LinkLayer}, {"roce", strconv.Itoa(in.RoCEVersion)}, {"connection", in.Connection},
			{"mtu", strconv.Itoa(in.MTU)}, {"host", in.Host}, {"pvperf-version", in.PvperfVersion},
		} {
			if v := configValue(kv[1]); v != "" {
				fmt.Fprintf(&bw, "%s: %s\n", kv[0], v)
			}
		}
		name := "Benchmark" + BenchName(in.Test)
		for _, res := range r.Primary() {
			samples := repeatSamples(r, &res)
			if samples == nil {
				samples = []benchSample{sampleOf(&res)}
			}
			for _, m := range samples {
				fmt.Fprintf(&bw, "%s/qp=%d/size=%d \t%d", name, in.QPs, res.Size, max(res.Iterations, 1))
				m.write(&bw)
				bw.WriteString("\n")
			}
		}
	}
	if err := writeString(w, bw.String()); err != nil {
		return fmt.Errorf("reports: benchfmt: %w", err)
	}
	return nil
}

// BenchName turns a command name into a benchmark name: "write_bw" is
// "WriteBW", "send_lat" is "SendLat".
func BenchName(test string) string {
	var b strings.Builder
	for _, part := range strings.Split(test, "_") {
		switch part {
		case "":
		case "bw":
			b.WriteString("BW")
		default:
			r := []rune(part)
			r[0] = unicode.ToUpper(r[0])
			b.WriteString(string(r))
		}
	}
	name := b.String()
	// A benchmark name is one field: no spaces.
	return strings.Map(func(r rune) rune {
		if unicode.IsSpace(r) || r == '/' {
			return '_'
		}
		return r
	}, name)
}

// configValue keeps a configuration value on its line.
func configValue(s string) string {
	return strings.TrimSpace(strings.Map(func(r rune) rune {
		if r == '\n' || r == '\r' {
			return ' '
		}
		return r
	}, s))
}

// benchNum formats a metric with enough digits for benchstat.
func benchNum(v float64) string {
	return strconv.FormatFloat(v, 'g', 6, 64)
}
