package reports

import (
	"bytes"
	"fmt"
	"image/color"
	"math"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"
)

// Charts of the HTML report
//
// The charts are drawn with gonum.org/v1/plot as SVG and inlined in the
// page. The message size is on a log2 axis; bandwidth and message rate on
// a linear one starting at 0, or a log10 one when overlaid runs differ by
// more than 20 times; latency on a log10 axis when it spans more than a
// decade, else on a linear one. Every series has point glyphs as
// well as a line, so that a run of one size still shows.

// chartWidth and chartHeight are the size of every chart.
const (
	chartWidth  = 120 * vg.Millimeter // two side by side fit 1280 px
	chartHeight = 80 * vg.Millimeter
)

// chartPalette are the line colors of the charts' series, in order: the
// i-th run of an overlay (or the i-th percentile of one latency run) is
// drawn in chartPalette[i % len(chartPalette)]. The colors are fixed so
// that a run keeps its color from one report to the next.
var chartPalette = []color.RGBA{
	{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}, // blue
	{R: 0xd6, G: 0x27, B: 0x28, A: 0xff}, // red
	{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff}, // green
	{R: 0xff, G: 0x7f, B: 0x0e, A: 0xff}, // orange
	{R: 0x94, G: 0x67, B: 0xbd, A: 0xff}, // purple
	{R: 0x8c, G: 0x56, B: 0x4b, A: 0xff}, // brown
	{R: 0xe3, G: 0x77, B: 0xc2, A: 0xff}, // pink
	{R: 0x17, G: 0xbe, B: 0xcf, A: 0xff}, // cyan
}

// chartFont is the charts' typeface; the page's style sheet names the
// same family first, then metric-compatible ones.
var chartFont = font.Font{Typeface: "Liberation", Variant: "Sans"}

// glyphs are the point shapes of the series, in order.
var glyphs = []draw.GlyphDrawer{
	draw.CircleGlyph{}, draw.SquareGlyph{}, draw.TriangleGlyph{}, draw.CrossGlyph{},
	draw.RingGlyph{}, draw.PyramidGlyph{}, draw.PlusGlyph{}, draw.BoxGlyph{},
}

// series is one line of a chart.
type series struct {
	label string
	xs    []float64 // message sizes, ascending
	ys    []float64
	// lineOnly draws the line without point glyphs (a fitted model, a
	// distribution).
	lineOnly bool
}

// chartSpec is one chart before drawing.
type chartSpec struct {
	title  string
	ylabel string
	// percentileX makes the x axis the percentile of a distribution
	// (x = log10(1/(1-p)), labelled 0%, 90%, 99%, ...) instead of the
	// message size.
	percentileX bool
	// ymode is how the y axis is scaled.
	ymode yMode
	// legendRight puts the legend in the top right corner (falling
	// curves) instead of the top left one (rising curves).
	legendRight bool
	series      []series
}

type yMode int

const (
	yLinearZero yMode = iota // linear, from 0
	yAuto                    // log10 when the data spans more than a decade, else linear from 0
	// yOverlay is linear from 0, but log10 when the series' largest values
	// are more than 20 times apart: an emulator's bandwidth beside a slow
	// device's would otherwise flatten the slow one onto the axis.
	yOverlay
)

// chartRun is a run with its number in the report (from 1).
type chartRun struct {
	n   int
	run *Run
}

// buildCharts returns the charts of runs: the BW runs' bandwidth and
// message rate, the latency runs' percentiles and the duration-mode runs'
// mean latency, each overlaying the runs of its kind.
func buildCharts(runs []Run) []chartSpec {
	var bw, lat, dur []chartRun
	for i := range runs {
		cr := chartRun{n: i + 1, run: &runs[i]}
		switch runKind(&runs[i]) {
		case KindBW:
			bw = append(bw, cr)
		case KindLatency:
			lat = append(lat, cr)
		case KindLatencyDuration:
			dur = append(dur, cr)
		}
	}
	var charts []chartSpec
	if len(bw) > 0 {
		labels := legendLabels(bw)
		avg := chartSpec{title: chartTitle(bw, "BW average"), ylabel: "BW average [MiB/s]", ymode: yOverlay}
		rate := chartSpec{title: chartTitle(bw, "message rate"), ylabel: "message rate [Mpps]", ymode: yOverlay, legendRight: true}
		for i, cr := range bw {
			avg.series = append(avg.series, runSeries(cr.run, labels[i], func(r *Result) Num {
				if r.BW == nil {
					return NaN
				}
				return r.BW.AverageMiBps
			}))
			if f := cr.run.Fit; f != nil && f.Metric == "average_MiB_per_s" {
				avg.series = append(avg.series, fitSeries(cr.run, labels[i]+" Hockney fit", func(n float64) float64 {
					return f.Model().Bandwidth(n) / MiBFactor
				}))
			}
			rate.series = append(rate.series, runSeries(cr.run, labels[i], func(r *Result) Num {
				if r.BW == nil {
					return NaN
				}
				return r.BW.MsgRateMpps
			}))
		}
		charts = append(charts, avg, rate)
	}
	if len(lat) == 1 {
		c := chartSpec{title: chartTitle(lat, "latency"), ylabel: "latency [µs]", ymode: yAuto}
		for _, p := range latPercentiles {
			c.series = append(c.series, runSeries(lat[0].run, p.name, p.get))
		}
		if f := lat[0].run.Fit; f != nil && f.Metric == "typical_us" {
			c.series = append(c.series, fitSeries(lat[0].run, "Hockney fit of t_typical", func(n float64) float64 {
				return f.Model().Time(n) * 1e6
			}))
		}
		charts = append(charts, c)
	} else if len(lat) > 1 {
		labels := legendLabels(lat)
		for _, p := range latPercentiles {
			if !p.overlay {
				continue
			}
			c := chartSpec{title: chartTitle(lat, p.name+" latency"), ylabel: p.name + " latency [µs]", ymode: yAuto}
			for i, cr := range lat {
				c.series = append(c.series, runSeries(cr.run, labels[i], p.get))
				// t_typical, which the fit is of, is the median.
				if f := cr.run.Fit; p.name == "p50" && f != nil && f.Metric == "typical_us" {
					c.series = append(c.series, fitSeries(cr.run, labels[i]+" Hockney fit of t_typical", func(n float64) float64 {
						return f.Model().Time(n) * 1e6
					}))
				}
			}
			charts = append(charts, c)
		}
	}
	if len(dur) > 0 {
		labels := legendLabels(dur)
		c := chartSpec{title: chartTitle(dur, "mean latency"), ylabel: "mean latency [µs]", ymode: yAuto}
		for i, cr := range dur {
			c.series = append(c.series, runSeries(cr.run, labels[i], func(r *Result) Num {
				if r.Latency == nil {
					return NaN
				}
				return r.Latency.MeanUs
			}))
		}
		charts = append(charts, c)
	}
	for _, cr := range append(lat, dur...) {
		if c, ok := distributionChart(cr); ok {
			charts = append(charts, c)
		}
	}
	return charts
}

// fitSeries is a model's values at the run's message sizes, as a line.
func fitSeries(r *Run, label string, model func(n float64) float64) series {
	s := runSeries(r, label, func(*Result) Num { return 0 })
	for i, x := range s.xs {
		s.ys[i] = model(x)
	}
	s.lineOnly = true
	return s
}

// maxDistributions is the most message sizes a distribution chart
// draws: the smallest, the largest and sizes evenly between.
const maxDistributions = 4

// distributionChart is the latency distribution of a run's primary rows
// that have one: latency against percentile, a line per size.
func distributionChart(cr chartRun) (chartSpec, bool) {
	var rows []Result
	for _, r := range cr.run.Primary() {
		if r.Distribution != nil && r.Distribution.Samples > 1 {
			rows = append(rows, r)
		}
	}
	if len(rows) == 0 {
		return chartSpec{}, false
	}
	if len(rows) > maxDistributions {
		pick := make([]Result, 0, maxDistributions)
		for k := range maxDistributions {
			pick = append(pick, rows[k*(len(rows)-1)/(maxDistributions-1)])
		}
		rows = pick
	}
	c := chartSpec{title: chartTitle([]chartRun{cr}, "latency distribution"), ylabel: "latency [µs]", ymode: yAuto, percentileX: true}
	for _, r := range rows {
		d := r.Distribution
		s := series{label: sizeLabel(r.Size) + "B", lineOnly: true}
		var cum uint64
		for _, b := range d.Buckets {
			cum += b.Count
			if cum >= d.Samples || !b.HighUs.Valid() || b.HighUs <= 0 {
				continue
			}
			s.xs = append(s.xs, math.Log10(float64(d.Samples)/float64(d.Samples-cum)))
			s.ys = append(s.ys, float64(b.HighUs))
		}
		// The maximum, at the percentile of the last sample.
		if d.MaxUs.Valid() && d.MaxUs > 0 {
			s.xs = append(s.xs, math.Log10(float64(d.Samples)))
			s.ys = append(s.ys, float64(d.MaxUs))
		}
		c.series = append(c.series, s)
	}
	return c, true
}

// latPercentiles are the lines of a latency run's chart; overlay marks
// those that get a chart of their own when several runs are compared.
// p99.99 is left out: with the usual thousands of samples it is the
// maximum, most often equal to p99.9, and would hide that line.
var latPercentiles = []struct {
	name    string
	overlay bool
	get     func(*Result) Num
}{
	{"p50", true, func(r *Result) Num {
		if r.Latency == nil {
			return NaN
		}
		if r.Latency.P50Us.Valid() {
			return r.Latency.P50Us
		}
		return r.Latency.TypicalUs
	}},
	{"p90", false, func(r *Result) Num { return latField(r, func(l *LatencyStats) Num { return l.P90Us }) }},
	{"p99", true, func(r *Result) Num { return latField(r, func(l *LatencyStats) Num { return l.P99Us }) }},
	{"p99.9", true, func(r *Result) Num { return latField(r, func(l *LatencyStats) Num { return l.P999Us }) }},
}

func latField(r *Result, f func(*LatencyStats) Num) Num {
	if r.Latency == nil {
		return NaN
	}
	return f(r.Latency)
}

// runKind is the run's kind, or the kind its rows show when Info.Kind is
// not one of the known ones.
func runKind(r *Run) string {
	switch r.Info.Kind {
	case KindBW, KindLatency, KindLatencyDuration:
		return r.Info.Kind
	}
	for _, res := range r.Results {
		switch {
		case res.BW != nil:
			return KindBW
		case res.Latency != nil && (res.Latency.P50Us.Valid() || res.Latency.TypicalUs.Valid()):
			return KindLatency
		case res.Latency != nil:
			return KindLatencyDuration
		}
	}
	return ""
}

// runSeries is the run's primary rows as a series of get against the
// message size, sorted by size, without the values that were not measured
// and the sizes a log axis cannot show.
func runSeries(r *Run, label string, get func(*Result) Num) series {
	rows := r.Primary()
	slices.SortStableFunc(rows, func(a, b Result) int {
		switch {
		case a.Size < b.Size:
			return -1
		case a.Size > b.Size:
			return 1
		}
		return 0
	})
	s := series{label: label}
	for i := range rows {
		v := get(&rows[i])
		if rows[i].Size == 0 || !v.Valid() {
			continue
		}
		s.xs = append(s.xs, float64(rows[i].Size))
		s.ys = append(s.ys, float64(v))
	}
	return s
}

// chartTitle is what, prefixed by the runs' test when they all ran the
// same one.
func chartTitle(runs []chartRun, what string) string {
	test := runs[0].run.Info.Test
	for _, cr := range runs[1:] {
		if cr.run.Info.Test != test {
			test = ""
		}
	}
	if test == "" {
		return what
	}
	return cleanLabel(test) + ": " + what
}

// legendLabels names each run of a chart by the description fields whose
// values differ between them; the start time joins them only when the
// other fields do not tell the runs apart (today against yesterday), not
// when they do (the runs of one sweep start seconds apart). When the
// description does not tell them apart, the base names of their sources
// do, else "run N".
func legendLabels(runs []chartRun) []string {
	fields := []func(*RunInfo) string{
		func(in *RunInfo) string { return in.Test },
		func(in *RunInfo) string { return in.Driver },
		func(in *RunInfo) string { return in.Device },
		func(in *RunInfo) string {
			if in.RoCEVersion > 0 {
				return "RoCE v" + strconv.Itoa(in.RoCEVersion)
			}
			return in.LinkLayer
		},
		func(in *RunInfo) string { return in.Connection },
		func(in *RunInfo) string { return "qps=" + strconv.Itoa(in.QPs) },
		func(in *RunInfo) string { return in.Host },
	}
	labels := fieldLabels(runs, fields)
	if distinct(labels) {
		return labels
	}
	labels = fieldLabels(runs, append(fields, runTimeLabel(runs)))
	if distinct(labels) {
		return labels
	}
	for i, cr := range runs {
		labels[i] = ""
		if cr.run.Source != "" {
			labels[i] = shorten(cleanLabel(filepath.Base(cr.run.Source)), 32)
		}
	}
	if distinct(labels) {
		return labels
	}
	for i, cr := range runs {
		labels[i] = "run " + strconv.Itoa(cr.n)
	}
	return labels
}

// fieldLabels joins, for each run, the values of the fields that are not
// the same in every run.
func fieldLabels(runs []chartRun, fields []func(*RunInfo) string) []string {
	labels := make([]string, len(runs))
	for _, f := range fields {
		first := f(&runs[0].run.Info)
		same := true
		for _, cr := range runs[1:] {
			if f(&cr.run.Info) != first {
				same = false
				break
			}
		}
		if same {
			continue
		}
		for i, cr := range runs {
			v := shorten(cleanLabel(f(&cr.run.Info)), 24)
			if v == "" {
				continue
			}
			if labels[i] != "" {
				labels[i] += ", "
			}
			labels[i] += v
		}
	}
	return labels
}

// runTimeLabel formats the runs' start times: the time of day when they
// all started on the same day, else date and time.
func runTimeLabel(runs []chartRun) func(*RunInfo) string {
	layout := "15:04:05"
	day := runs[0].run.Info.Time.Format(time.DateOnly)
	for _, cr := range runs[1:] {
		if cr.run.Info.Time.Format(time.DateOnly) != day {
			layout = "2006-01-02 15:04"
		}
	}
	return func(in *RunInfo) string {
		if in.Time.IsZero() {
			return ""
		}
		return in.Time.Format(layout)
	}
}

// distinct reports whether the labels are all set and all different.
func distinct(labels []string) bool {
	seen := make(map[string]bool, len(labels))
	for _, l := range labels {
		if l == "" || seen[l] {
			return false
		}
		seen[l] = true
	}
	return true
}

// cleanLabel makes s safe to draw: invalid UTF-8 and control characters
// become U+FFFD (the SVG must stay well-formed XML; a newline would split
// the label).
func cleanLabel(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	return strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return '\uFFFD'
		}
		return r
	}, s)
}

// shorten cuts s to at most n runes, ending it with "…" when cut.
func shorten(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n-1]) + "…"
}

// logY reports whether c's y axis is logarithmic, given the smallest and
// largest value of its series.
func (c *chartSpec) logY(ymin, ymax float64) bool {
	switch c.ymode {
	case yAuto:
		return ymin > 0 && ymax/ymin > 10
	case yOverlay:
		lo, hi := math.Inf(1), math.Inf(-1)
		for _, s := range c.series {
			if len(s.ys) > 0 {
				m := slices.Max(s.ys)
				lo, hi = min(lo, m), max(hi, m)
			}
		}
		return ymin > 0 && hi/lo > 20
	}
	return false
}

// renderChart draws c as SVG, without the XML prolog. It reports whether
// the chart has any point to draw.
func renderChart(c *chartSpec) (svg string, ok bool, err error) {
	xmin, xmax := math.Inf(1), math.Inf(-1)
	ymin, ymax := math.Inf(1), math.Inf(-1)
	for _, s := range c.series {
		for i := range s.xs {
			xmin, xmax = min(xmin, s.xs[i]), max(xmax, s.xs[i])
			ymin, ymax = min(ymin, s.ys[i]), max(ymax, s.ys[i])
		}
	}
	if xmin > xmax {
		return "", false, nil
	}
	logY := c.logY(ymin, ymax)

	defer func() {
		// gonum/plot panics on what it cannot draw; a report must not.
		if r := recover(); r != nil {
			err = fmt.Errorf("chart %q: %v", c.title, r)
		}
	}()
	p := plot.New()
	setFonts(p)
	p.Title.Text = c.title
	p.X.Label.Text = "message size [bytes]"
	p.Y.Label.Text = c.ylabel
	p.X.Scale = plot.LogScale{}
	p.X.Tick.Marker = sizeTicker{}
	if c.percentileX {
		p.X.Label.Text = "percentile"
		p.X.Scale = plot.LinearScale{}
		p.X.Tick.Marker = percentileTicker{}
	}
	if logY {
		p.Y.Scale = plot.LogScale{}
		p.Y.Tick.Marker = log10Ticker{}
	}
	legend := len(c.series) > 1
	for i, s := range c.series {
		if len(s.xs) == 0 {
			continue
		}
		// runSeries left out what was not measured; logY means every
		// value is positive.
		xys := make(plotter.XYs, len(s.xs))
		for j := range s.xs {
			xys[j] = plotter.XY{X: s.xs[j], Y: s.ys[j]}
		}
		line, points, err := plotter.NewLinePoints(xys)
		if err != nil {
			return "", false, fmt.Errorf("chart %q: %w", c.title, err)
		}
		col := chartPalette[i%len(chartPalette)]
		line.LineStyle = draw.LineStyle{Color: col, Width: vg.Points(1.5)}
		if k := i / len(chartPalette); k > 0 {
			line.LineStyle.Dashes = []vg.Length{vg.Points(float64(2 + 2*k)), vg.Points(2)}
		}
		points.GlyphStyle = draw.GlyphStyle{Color: col, Radius: vg.Points(2.2), Shape: glyphs[i%len(glyphs)]}
		if len(xys) == 1 {
			// A lone point is all there is to see.
			points.GlyphStyle.Radius = vg.Points(4)
		}
		switch {
		case s.lineOnly && len(xys) > 1:
			line.LineStyle.Dashes = []vg.Length{vg.Points(5), vg.Points(3)}
			if c.percentileX {
				line.LineStyle.Dashes = nil
			}
			p.Add(line)
			if legend {
				p.Legend.Add(s.label, line)
			}
		default:
			p.Add(line, points)
			if legend {
				p.Legend.Add(s.label, line, points)
			}
		}
	}
	// A log axis needs a range: one size gets a factor of 2 either side.
	switch {
	case c.percentileX:
		p.X.Min, p.X.Max = 0, max(math.Ceil(xmax), 1)
	case xmin == xmax:
		p.X.Min, p.X.Max = xmin/2, xmax*2
	default:
		p.X.Min, p.X.Max = xmin, xmax
	}
	if logY {
		// Whole decades, so that labelled ticks bound the data.
		p.Y.Min = math.Pow(10, math.Floor(math.Log10(ymin)))
		p.Y.Max = math.Pow(10, math.Ceil(math.Log10(ymax)))
	} else {
		p.Y.Min = min(0, ymin)
		if ymax <= 0 {
			p.Y.Max = 1
		} else {
			// Headroom for the legend above the highest point.
			p.Y.Max = ymax * 1.08
		}
	}
	p.Legend.Top = true
	p.Legend.Left = !c.legendRight
	p.Legend.XOffs = vg.Points(6)
	if c.legendRight {
		p.Legend.XOffs = -vg.Points(6)
	}
	p.Legend.YOffs = -vg.Points(4)
	p.Legend.ThumbnailWidth = vg.Points(20)
	p.Legend.Padding = vg.Points(2.5)

	// vgsvg directly rather than p.WriterTo: the same SVG, and it still
	// works in a build with -tags minimal (no other gonum/plot backends).
	canvas := vgsvg.New(chartWidth, chartHeight)
	p.Draw(draw.New(canvas))
	var buf bytes.Buffer
	if _, err := canvas.WriteTo(&buf); err != nil {
		return "", false, fmt.Errorf("chart %q: %w", c.title, err)
	}
	out := buf.String()
	// Drop the XML declaration and the generator comment before <svg.
	i := strings.Index(out, "<svg")
	if i < 0 {
		return "", false, fmt.Errorf("chart %q: no <svg> element in the output", c.title)
	}
	return strings.TrimSpace(out[i:]), true, nil
}

// percentileTicker labels a percentile axis, x = log10(1/(1-p)): 0%,
// 90%, 99%, 99.9%, ... at the whole numbers.
type percentileTicker struct{}

func (percentileTicker) Ticks(lo, hi float64) []plot.Tick {
	var ticks []plot.Tick
	for k := math.Ceil(lo); k <= hi; k++ {
		label := "0%"
		if k > 0 {
			label = strconv.FormatFloat(100-100*math.Pow(10, -k), 'f', -1, 64) + "%"
		}
		ticks = append(ticks, plot.Tick{Value: k, Label: label})
	}
	return ticks
}

// setFonts gives every text of p the charts' typeface.
func setFonts(p *plot.Plot) {
	p.Title.TextStyle.Font = font.From(chartFont, 11)
	p.X.Label.TextStyle.Font = font.From(chartFont, 10)
	p.Y.Label.TextStyle.Font = font.From(chartFont, 10)
	p.X.Tick.Label.Font = font.From(chartFont, 9)
	p.Y.Tick.Label.Font = font.From(chartFont, 9)
	p.Legend.TextStyle.Font = font.From(chartFont, 9)
}

// sizeTicker marks every power of 2 of a message size axis and labels 2,
// 64, 1K, 64K, 1M, 8M, 64M and 1G; a range with fewer than two of those
// gets labels on its powers of 2 instead (at most 8).
type sizeTicker struct{}

// sizeLabelled are the sizes sizeTicker labels on a wide range.
var sizeLabelled = []float64{2, 64, 1 << 10, 64 << 10, 1 << 20, 8 << 20, 64 << 20, 1 << 30}

// Ticks implements plot.Ticker.
func (sizeTicker) Ticks(lo, hi float64) []plot.Tick {
	if !(lo > 0) || !(hi >= lo) || math.IsInf(hi, 0) {
		return nil
	}
	const eps = 1e-9
	var pows []float64
	for k := max(0, math.Floor(math.Log2(lo))); k <= math.Ceil(math.Log2(hi)) && k < 64; k++ {
		v := math.Exp2(k)
		if v >= lo*(1-eps) && v <= hi*(1+eps) {
			pows = append(pows, v)
		}
	}
	labelled := 0
	for _, v := range pows {
		if slices.Contains(sizeLabelled, v) {
			labelled++
		}
	}
	step := 0
	if labelled < 2 {
		step = (len(pows) + 7) / 8
	}
	ticks := make([]plot.Tick, len(pows))
	for i, v := range pows {
		ticks[i].Value = v
		if (step == 0 && slices.Contains(sizeLabelled, v)) || (step > 0 && i%step == 0) {
			ticks[i].Label = sizeLabel(uint64(v))
		}
	}
	return ticks
}

// sizeLabel is a message size as the charts label it: bytes below 1 KiB,
// else a whole number of KiB, MiB or GiB with the suffix K, M or G when
// it is one (1K, 64K, 8M), else the bytes.
func sizeLabel(size uint64) string {
	for _, u := range []struct {
		shift  uint
		suffix string
	}{{30, "G"}, {20, "M"}, {10, "K"}} {
		if size >= 1<<u.shift && size%(1<<u.shift) == 0 {
			return strconv.FormatUint(size>>u.shift, 10) + u.suffix
		}
	}
	return strconv.FormatUint(size, 10)
}

// log10Ticker labels the powers of 10 of a log axis and marks 2..9 times
// them; a range with fewer than two powers of 10 also gets labels at 2
// and 5 times them.
type log10Ticker struct{}

// Ticks implements plot.Ticker.
func (log10Ticker) Ticks(lo, hi float64) []plot.Tick {
	if !(lo > 0) || !(hi >= lo) || math.IsInf(hi, 0) {
		return nil
	}
	const eps = 1e-9
	inRange := func(v float64) bool { return v >= lo*(1-eps) && v <= hi*(1+eps) }
	first, last := math.Floor(math.Log10(lo)), math.Ceil(math.Log10(hi))
	decades := 0
	for e := first; e <= last; e++ {
		if inRange(math.Pow(10, e)) {
			decades++
		}
	}
	var ticks []plot.Tick
	for e := first; e <= last; e++ {
		for m := 1; m <= 9; m++ {
			v := float64(m) * math.Pow(10, e)
			if !inRange(v) {
				continue
			}
			t := plot.Tick{Value: v}
			if m == 1 || (decades < 2 && (m == 2 || m == 5)) {
				t.Label = strconv.FormatFloat(v, 'f', -1, 64)
			}
			ticks = append(ticks, t)
		}
	}
	return ticks
}
