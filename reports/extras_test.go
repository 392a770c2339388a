package reports

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/pvperf/pvperf/reports/hdr"
)

// TestDistribution: a latency row's histogram becomes its distribution in
// microseconds (ticks over the quotient), percentiles within the
// histogram's resolution of the exact samples, and the percentile table.
func TestDistribution(t *testing.T) {
	h := hdr.New()
	var samples []int64
	for i := range int64(100000) {
		v := 2000 + i%1000 // 2.000 to 2.999 µs round trip in ns
		if i%10000 == 0 {
			v = 50000 + i
		}
		h.Record(v)
		samples = append(samples, v)
	}
	res, err := ComputeLatency(LatencyInput{Size: 2, Iters: 100001, Samples: samples, RTTFactor: 2, Hist: h})
	if err != nil {
		t.Fatal(err)
	}
	row := latencyRow(SideLocal, &res, Nanoseconds)
	d := row.Distribution
	if d == nil || d.Samples != 100000 {
		t.Fatalf("distribution %+v", d)
	}
	// One way: half the round trip.
	if float64(d.MinUs) != 1.0 || float64(d.MaxUs) != 0.5*140.000 {
		t.Errorf("min %v max %v, want 1 and 70", d.MinUs, d.MaxUs)
	}
	for _, c := range []struct{ got, exact Num }{{d.P50Us, row.Latency.P50Us}, {d.P90Us, row.Latency.P90Us}, {d.P99Us, row.Latency.P99Us}} {
		if math.Abs(float64(c.got-c.exact)) > float64(c.exact)/256+0.0005 {
			t.Errorf("histogram percentile %v, exact %v", c.got, c.exact)
		}
	}
	var n uint64
	for _, b := range d.Buckets {
		n += b.Count
		if b.LowUs > b.HighUs {
			t.Errorf("bucket %+v", b)
		}
	}
	if n != d.Samples {
		t.Errorf("buckets hold %d samples of %d", n, d.Samples)
	}
	var out bytes.Buffer
	if err := WritePercentiles(&out, []Result{row}); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(out.String(), "\n")
	if len(lines) != 5 || !strings.Contains(lines[1], "p99.999") || !strings.HasPrefix(lines[2], " 2          100000") ||
		!strings.HasSuffix(lines[2], "70.00") || lines[3] != strings.TrimSuffix(ResultLine, "\n") {
		t.Errorf("percentile table:\n%s", out.String())
	}
	// No histogram: no table.
	out.Reset()
	row.Distribution = nil
	if err := WritePercentiles(&out, []Result{row}); err != nil || out.Len() != 0 {
		t.Errorf("without a histogram: %q %v", out.String(), err)
	}
}

// TestDurationDistribution: a duration run keeps no samples, so its
// percentiles come from the histogram.
func TestDurationDistribution(t *testing.T) {
	h := hdr.New()
	for range 1000 {
		h.Record(4000)
	}
	res := ComputeLatencyDuration(LatencyDurationInput{Size: 2, Iters: 1000, Start: 0, End: 4000000, RTTFactor: 2, Hist: h})
	row := latencyDurationRow(SideLocal, res)
	if row.Latency.P99Us != 2 || row.Latency.MinUs != 2 || row.Latency.P99999Us != 2 {
		t.Errorf("duration row %+v", *row.Latency)
	}
	b, err := json.Marshal(row)
	if err != nil || !strings.Contains(string(b), `"p99.999_us":2`) || !strings.Contains(string(b), `"latency_distribution":{"samples":1000`) {
		t.Errorf("JSON %s %v", b, err)
	}
}

// TestFitSweep recovers Hockney's parameters from a sweep made by the
// model, for bandwidth and latency runs; fewer than three sizes give no
// fit.
func TestFitSweep(t *testing.T) {
	const alpha, beta = 2e-6, 10e9 // s, B/s
	bw := Run{Info: fixtureInfo("write_bw", KindBW, "RDMA_Write", 2)}
	lat := Run{Info: fixtureInfo("send_lat", KindLatency, "Send", 2)}
	for _, n := range fixtureSizes() {
		tm := alpha + float64(n)/beta
		bw.Results = append(bw.Results, Result{Side: SideLocal, Size: n, BW: &BWStats{AverageMiBps: Num(float64(n) / tm / MiBFactor)}})
		lat.Results = append(lat.Results, Result{Side: SideLocal, Size: n, Latency: &LatencyStats{TypicalUs: Num(tm * 1e6)}})
	}
	for _, r := range []*Run{&bw, &lat} {
		f, err := FitSweep(r)
		if err != nil || f == nil {
			t.Fatalf("%s: %v %v", r.Info.Test, f, err)
		}
		if math.Abs(float64(f.AlphaUs)-2) > 1e-6 || math.Abs(float64(f.BetaMiBps)*MiBFactor/beta-1) > 1e-9 ||
			math.Abs(float64(f.NHalfBytes)-alpha*beta) > 1e-3 || f.Points != 23 || f.MinSize != 2 || f.MaxSize != 8388608 {
			t.Errorf("%s: fit %+v", r.Info.Test, *f)
		}
		var out bytes.Buffer
		if err := WriteFit(&out, f, false); err != nil || !strings.Contains(out.String(), " α 2.000 usec   β 9536.74 MiB/sec   n½ 20000 bytes\n") {
			t.Errorf("%s: fit text %q %v", r.Info.Test, out.String(), err)
		}
	}
	short := Run{Info: bw.Info, Results: bw.Results[:2]}
	if f, err := FitSweep(&short); f != nil || err != nil {
		t.Errorf("two sizes: %v %v", f, err)
	}
	// The range is that of the points fitted: sizes without a figure
	// are not in it.
	gaps := Run{Info: bw.Info, Results: slices.Clone(bw.Results)}
	for _, i := range []int{0, len(gaps.Results) - 1} {
		gaps.Results[i].BW = &BWStats{AverageMiBps: NaN}
	}
	if f, err := FitSweep(&gaps); err != nil || f == nil || f.Points != 21 || f.MinSize != 4 || f.MaxSize != 4194304 {
		t.Errorf("sizes without a figure at both ends: %+v %v", f, err)
	}
}

// TestRepeats: the summary of repeated runs, the convergence test of
// --repeat_ci, its text, its CSV columns and its HTML table.
func TestRepeats(t *testing.T) {
	var runs []Run
	for i, v := range []float64{100, 101, 99, 100.5, 99.5} {
		r := fixtureBW(2, 1000, 0)
		r.Results = r.Results[:2]
		r.Results[0].BW = &BWStats{AverageMiBps: Num(v), AverageGbps: Num(v / 100), MsgRateMpps: Num(v / 1000)}
		r.Results[1].BW = &BWStats{AverageMiBps: Num(10 * v * float64(1+i%2)), AverageGbps: Num(v), MsgRateMpps: Num(v)}
		runs = append(runs, r)
	}
	rep, err := SummarizeRepeats(runs, 0.95, 2000, 2)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Runs != 5 || len(rep.Rows) != 6 || rep.Converged {
		t.Fatalf("repeats %+v", rep)
	}
	r0 := rep.Rows[0]
	if r0.Metric != "average_MiB_per_s" || r0.Median != 100 || r0.Min != 99 || r0.Max != 101 || len(r0.Values) != 5 ||
		!(r0.CILow <= 100 && r0.CIHigh >= 100) {
		t.Errorf("first row %+v", r0)
	}
	// The second size varies by 2x: the first metric of every size must
	// be within the target for the repeats to stop.
	if w := rep.Widest(KindBW); !(w > 2) {
		t.Errorf("widest %v", w)
	}
	if rep1, _ := SummarizeRepeats(runs[:5], 0.95, 2000, 200); !rep1.Converged {
		t.Error("200%: not converged")
	}
	// "converged" is null in JSON without a target (there was none to
	// reach), a boolean with one; both read back.
	for _, c := range []struct {
		target float64
		want   string
	}{{0, `"converged":null`}, {200, `"converged":true`}, {2, `"converged":false`}} {
		r, _ := SummarizeRepeats(runs[:5], 0.95, 2000, c.target)
		b, err := json.Marshal(r)
		if err != nil || bytes.Count(b, []byte(`"converged"`)) != 1 || !bytes.Contains(b, []byte(c.want)) {
			t.Errorf("target %v: %s %v, want %s", c.target, b, err, c.want)
		}
		var back Repeats
		if err := json.Unmarshal(b, &back); err != nil || back.Converged != r.Converged || len(back.Rows) != len(r.Rows) {
			t.Errorf("target %v: read back %+v %v", c.target, back, err)
		}
	}
	// Runs that measured nothing do not count: one valid value of five
	// has an interval of no width, which is no evidence.
	sparse := make([]Run, len(runs))
	for i := range runs {
		sparse[i] = runs[i]
		sparse[i].Results = []Result{runs[i].Results[0]}
		bw := *runs[i].Results[0].BW
		if i > 0 {
			bw.AverageMiBps = NaN
		}
		sparse[i].Results[0].BW = &bw
	}
	if rep1, _ := SummarizeRepeats(sparse, 0.95, 2000, 200); rep1.Converged {
		t.Error("one valid value of five: converged")
	}
	// One run (a series cut short) has no interval: null, "-", and not
	// converged even without a target.
	one, _ := SummarizeRepeats(runs[:1], 0.95, 2000, 0)
	if r := one.Rows[0]; one.Converged || r.Median != 100 || r.CILow.Valid() || r.CIHigh.Valid() || r.HalfWidthPercent.Valid() || r.Stdev.Valid() {
		t.Errorf("one run: converged %v, row %+v", one.Converged, r)
	}
	var ob bytes.Buffer
	_ = WriteRepeats(&ob, one, KindBW, false)
	if !strings.Contains(ob.String(), "       100.00       100.00            -            -        -\n") {
		t.Errorf("one run's text:\n%s", ob.String())
	}
	if w := one.Widest(KindBW); !math.IsInf(w, 1) {
		t.Errorf("one run: widest %v, want +Inf", w)
	}
	var out bytes.Buffer
	if err := WriteRepeats(&out, rep, KindBW, false); err != nil {
		t.Fatal(err)
	}
	text := out.String()
	if !strings.Contains(text, " 5 runs: median, range and 95% confidence interval") || !strings.Contains(text, "target: interval within ±2% of the median, not reached") ||
		strings.Contains(text, "Gb/sec") || !strings.Contains(text, " 2          local   BW average[MiB/sec]          100.00        99.00       101.00") {
		t.Errorf("text:\n%s", text)
	}
	last := runs[4]
	last.Repeats = rep
	var cb bytes.Buffer
	if err := WriteCSV(&cb, []Run{last}); err != nil {
		t.Fatal(err)
	}
	recs, err := csv.NewReader(&cb).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	col := map[string]int{}
	for i, c := range recs[0] {
		col[c] = i
	}
	if recs[1][col["repeat_runs"]] != "5" || recs[1][col["repeat_median"]] != "100" || recs[1][col["repeat_metric"]] != "average_MiB_per_s" {
		t.Errorf("CSV row %v", recs[1])
	}
	var hb bytes.Buffer
	if err := WriteHTML(&hb, []Run{last}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(hb.String(), "<caption>5 runs: median, range and 95% bootstrap confidence interval of the median (2000 resamples); target ±2%, not reached</caption>") {
		t.Error("no repeats table in the HTML page")
	}
}

// TestHTMLFitAndDistribution: a sweep's fit is drawn over its points and
// stated under its table; a latency run with histograms gets a
// distribution chart.
func TestHTMLFitAndDistribution(t *testing.T) {
	r := fixtureLat(1)
	h := hdr.New()
	for i := range int64(1000) {
		h.Record(1000 + i)
	}
	for i := range r.Results {
		r.Results[i].Distribution = newDistribution(h, 1000)
	}
	f, err := FitSweep(&r)
	if err != nil || f == nil {
		t.Fatal(f, err)
	}
	r.Fit = f
	var b bytes.Buffer
	if err := WriteHTML(&b, []Run{r}); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	for _, want := range []string{"Hockney fit of t_typical", "send_lat: latency distribution", "99.9%", "fitted to t_typical over 23 sizes from 2 to 8388608 bytes: α = "} {
		if !strings.Contains(page, want) {
			t.Errorf("no %q in the page", want)
		}
	}
	// Overlaid with another latency run, each fit is drawn on the p50
	// chart (t_typical is the median).
	r2 := r
	r2.Info.Device = "emu1"
	b.Reset()
	if err := WriteHTML(&b, []Run{r, r2}); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(b.String(), " Hockney fit of t_typical"); n < 2 {
		t.Errorf("%d fits named in the overlay, want one per run", n)
	}
}

// TestAttachCPU: rows get this side's and the peer's CPU by size; a side
// that counted no messages (a WRITE server) takes the other's count, over
// the other's window: at 25% of a CPU, 0.25 s of its 1 s wait, it spent
// 0.5 s over the other side's 2 s, 500 µs for each of its 1000 messages.
func TestAttachCPU(t *testing.T) {
	r := Run{Results: []Result{{Side: SideLocal, Size: 2}, {Side: SideLocal, Size: 64}, {Side: SideLocal, Size: 128}}}
	r.AttachCPU([]CPUSpan{{Size: 2, CPUSeconds: 1, WallSeconds: 2, Messages: 1000}, {Size: 64, CPUSeconds: 0.5, WallSeconds: 1}},
		[]CPUSpan{{Size: 2, CPUSeconds: 0.25, WallSeconds: 1, Messages: 0}, {Size: 64, CPUSeconds: 0.1, WallSeconds: 1, Messages: 100}})
	c := r.Results[0].CPU
	if c == nil || c.LocalPercent != 50 || c.LocalUsPerMsg != 1000 || c.RemotePercent != 25 || c.RemoteUsPerMsg != 500 {
		t.Errorf("size 2: %+v", c)
	}
	c = r.Results[1].CPU
	if c == nil || c.LocalUsPerMsg != 5000 || c.RemoteUsPerMsg != 1000 {
		t.Errorf("size 64: %+v", c)
	}
	if r.Results[2].CPU != nil {
		t.Errorf("size 128: %+v", r.Results[2].CPU)
	}
	var b bytes.Buffer
	if err := WriteCPU(&b, r.Results); err != nil || !strings.Contains(b.String(), " 2                 50.00        25.00          1000.0000           500.0000\n") {
		t.Errorf("%q %v", b.String(), err)
	}
}

// TestExtrasRoundTrip: a run with a distribution, CPU figures, a fit and
// repeats reads back from its JSON as it was written.
func TestExtrasRoundTrip(t *testing.T) {
	r := fixtureLat(1)
	h := hdr.New()
	for i := range int64(100) {
		h.Record(900 + i)
	}
	r.Results[0].Distribution = newDistribution(h, 1000)
	r.AttachCPU([]CPUSpan{{Size: 2, CPUSeconds: 1, WallSeconds: 2, Messages: 10}}, nil)
	f, err := FitSweep(&r)
	if err != nil {
		t.Fatal(err)
	}
	r.Fit = f
	r.Repeats, err = SummarizeRepeats([]Run{r, r}, 0.95, 100, 1)
	if err != nil {
		t.Fatal(err)
	}
	a, err := MarshalRun(&r)
	if err != nil {
		t.Fatal(err)
	}
	back, err := ParseRun(a, "x.json")
	if err != nil {
		t.Fatal(err)
	}
	b, err := MarshalRun(&back)
	if err != nil || !bytes.Equal(a, b) {
		t.Fatalf("second write differs (%v):\n%s", err, lineDiff(string(a), string(b)))
	}
	for _, key := range []string{`"latency_distribution"`, `"buckets"`, `"cpu": {`, `"remote_percent": null`, `"hockney_fit"`, `"repeats"`, `"ci_low"`} {
		if !strings.Contains(string(a), key) {
			t.Errorf("no %s in:\n%s", key, a)
		}
	}
}
