package reports

import (
	"fmt"
	"io"
	"strings"

	"github.com/pvperf/pvperf/reports/hdr"
)

// Distribution is a latency row's HDR histogram in microseconds: its
// percentiles and its non-empty buckets. Percentiles name the upper edge
// of the bucket holding the sample of that rank, within hdr's resolution
// (1/256 of the value) of the exact sample; MinUs and MaxUs are exact.
type Distribution struct {
	Samples  uint64 `json:"samples"`
	MinUs    Num    `json:"min_us"`
	MeanUs   Num    `json:"mean_us"`
	P50Us    Num    `json:"p50_us"`
	P90Us    Num    `json:"p90_us"`
	P99Us    Num    `json:"p99_us"`
	P999Us   Num    `json:"p99.9_us"`
	P9999Us  Num    `json:"p99.99_us"`
	P99999Us Num    `json:"p99.999_us"`
	MaxUs    Num    `json:"max_us"`
	// Buckets are the histogram's non-empty buckets in increasing order.
	Buckets []Bucket `json:"buckets"`
}

// Bucket is a histogram bucket: Count samples from LowUs to HighUs.
type Bucket struct {
	LowUs  Num    `json:"low_us"`
	HighUs Num    `json:"high_us"`
	Count  uint64 `json:"count"`
}

// newDistribution converts h, in ticks, with q ticks per microsecond; nil
// for no histogram or an empty one.
func newDistribution(h *hdr.Histogram, q float64) *Distribution {
	if h == nil || h.Count() == 0 || q <= 0 {
		return nil
	}
	us := func(v int64) Num { return Num(float64(v) / q) }
	d := &Distribution{
		Samples:  h.Count(),
		MinUs:    us(h.Min()),
		MeanUs:   Num(h.Mean() / q),
		P50Us:    us(h.Quantile(0.50)),
		P90Us:    us(h.Quantile(0.90)),
		P99Us:    us(h.Quantile(0.99)),
		P999Us:   us(h.Quantile(0.999)),
		P9999Us:  us(h.Quantile(0.9999)),
		P99999Us: us(h.Quantile(0.99999)),
		MaxUs:    us(h.Max()),
	}
	for b := range h.All() {
		d.Buckets = append(d.Buckets, Bucket{LowUs: us(b.Low), HighUs: us(b.High), Count: b.Count})
	}
	return d
}

// percentilesTitle and percentilesColumns open the table of latency
// percentiles that pvperf prints after perftest's results.
const (
	percentilesTitle = " Latency percentiles[usec], HDR histogram of every sample (resolution 0.4%)\n"
)

// percentilesColumns is the column header, aligned with the rows.
var percentilesColumns = fmt.Sprintf(" %-10s %-10s%10s%10s%10s%10s%10s%10s%10s\n",
	"#bytes", "#samples", "p50", "p90", "p99", "p99.9", "p99.99", "p99.999", "max")

// WritePercentiles prints, after perftest's result table, the percentiles
// of the latency rows that have a distribution: one line per message
// size. It prints nothing when no row has one.
func WritePercentiles(w io.Writer, rows []Result) error {
	var b strings.Builder
	for _, r := range rows {
		d := r.Distribution
		if d == nil {
			continue
		}
		if b.Len() == 0 {
			b.WriteString(percentilesTitle + percentilesColumns)
		}
		fmt.Fprintf(&b, " %-10d %-10d", r.Size, d.Samples)
		for _, v := range []Num{d.P50Us, d.P90Us, d.P99Us, d.P999Us, d.P9999Us, d.P99999Us, d.MaxUs} {
			fmt.Fprintf(&b, " %9.2f", float64(v))
		}
		b.WriteString("\n")
	}
	if b.Len() == 0 {
		return nil
	}
	b.WriteString(ResultLine)
	return writeString(w, b.String())
}
