package reports

import (
	"bytes"
	"errors"
	"fmt"
	"html/template"
	"io"
	"math"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// HTML report
//
// WriteHTML writes one self-contained page: a small inline style sheet,
// no script and nothing loaded from elsewhere (the charts are inline SVG,
// their text uses locally installed fonts). The page is well-formed XML
// as well as HTML, and the same runs give the same bytes.

// WriteHTML writes a self-contained HTML report of runs: the test setup of
// every run side by side, charts that overlay the runs of each kind (see
// the package documentation) and a table of every run's results. It
// returns an error when runs is empty; a run without results gets a page
// that says so. The page is written with one Write call.
func WriteHTML(w io.Writer, runs []Run) error {
	if len(runs) == 0 {
		return errors.New("reports: html: no runs to report")
	}
	page := htmlPage{
		Title: "pvperf report: " + strings.Join(runTests(runs), ", "),
		Setup: setupTable(runs),
	}
	if len(runs) > 1 {
		page.Subtitle = strconv.Itoa(len(runs)) + " runs"
	}
	for i := range runs {
		page.Runs = append(page.Runs, resultTable(i+1, &runs[i]))
	}
	specs := buildCharts(runs)
	for i := range specs {
		svg, ok, err := renderChart(&specs[i])
		if err != nil {
			return fmt.Errorf("reports: html: %w", err)
		}
		if ok {
			// gonum/plot escapes the text it draws; cleanLabel kept it
			// free of control characters.
			page.Charts = append(page.Charts, template.HTML(svg))
		}
	}
	var buf bytes.Buffer
	if err := htmlTemplate.Execute(&buf, &page); err != nil {
		return fmt.Errorf("reports: html: %w", err)
	}
	if _, err := w.Write(buf.Bytes()); err != nil {
		return fmt.Errorf("reports: html: %w", err)
	}
	return nil
}

// htmlPage is what the template shows.
type htmlPage struct {
	Title    string
	Subtitle string
	Setup    htmlSetup
	Charts   []template.HTML
	Runs     []htmlRun
}

// htmlSetup is the test setup table: one column per run.
type htmlSetup struct {
	Runs []string
	Rows []htmlSetupRow
}

type htmlSetupRow struct {
	Field  string
	Values []string
	// Differs marks a field whose value is not the same in every run.
	Differs bool
}

// htmlRun is one run's result table, with the Hockney fit of a sweep and
// the summary of a repeated test. Its table is drawn by the same template
// as htmlTable's (Caption "": none).
type htmlRun struct {
	Heading string
	// Incomplete is why the run stopped before its end ("": it did not).
	Incomplete string
	Caption    string
	Columns    []htmlColumn
	Rows       [][]htmlCell
	Fit        string
	Repeats    *htmlTable
}

// htmlTable is a table with a caption.
type htmlTable struct {
	Caption string
	Columns []htmlColumn
	Rows    [][]htmlCell
}

type htmlColumn struct {
	Name    string
	Numeric bool
}

type htmlCell struct {
	Text    string
	Numeric bool
}

// none is what the page shows for a value that is not set or was not
// measured.
const none = "–"

// runTests are the runs' tests, each once, in order.
func runTests(runs []Run) []string {
	var tests []string
	for i := range runs {
		t := cleanLabel(runs[i].Info.Test)
		if t == "" {
			t = "run " + strconv.Itoa(i+1)
		}
		if !slices.Contains(tests, t) {
			tests = append(tests, t)
		}
	}
	return tests
}

// runName is the heading of run n: "Run n", with the base name of its
// source when it has one.
func runName(n int, r *Run) string {
	s := "Run " + strconv.Itoa(n)
	if r.Source != "" {
		s += " (" + cleanLabel(filepath.Base(r.Source)) + ")"
	}
	return s
}

func orNone(s string) string {
	if s == "" {
		return none
	}
	return s
}

// setupTable describes the runs, one column each.
func setupTable(runs []Run) htmlSetup {
	var t htmlSetup
	for i := range runs {
		t.Runs = append(t.Runs, runName(i+1, &runs[i]))
	}
	itoa := func(v int) string { return strconv.Itoa(v) }
	anyDuration, anyIterations := false, false
	for i := range runs {
		if runs[i].Info.DurationSeconds > 0 {
			anyDuration = true
		} else {
			anyIterations = true
		}
	}
	fields := []struct {
		name string
		show bool
		get  func(*RunInfo) string
	}{
		{"Test", true, func(in *RunInfo) string { return in.Test }},
		{"Title", true, func(in *RunInfo) string { return in.Title }},
		{"Verb", true, func(in *RunInfo) string { return in.Verb }},
		{"Bidirectional", true, func(in *RunInfo) string { return yesNo(in.Bidirectional) }},
		{"Role", true, func(in *RunInfo) string {
			if in.Loopback {
				return orNone(in.Role) + " (loopback)"
			}
			return in.Role
		}},
		{"Device", true, func(in *RunInfo) string { return in.Device }},
		{"Driver", true, func(in *RunInfo) string { return in.Driver }},
		{"Link layer", true, func(in *RunInfo) string { return in.LinkLayer }},
		{"RoCE version", true, func(in *RunInfo) string {
			if in.RoCEVersion <= 0 {
				return ""
			}
			return "v" + itoa(in.RoCEVersion)
		}},
		{"GID index", true, func(in *RunInfo) string {
			if in.GIDIndex < 0 {
				return ""
			}
			return itoa(in.GIDIndex)
		}},
		{"Connection", true, func(in *RunInfo) string { return in.Connection }},
		{"QPs", true, func(in *RunInfo) string { return positive(in.QPs) }},
		{"MTU [B]", true, func(in *RunInfo) string { return positive(in.MTU) }},
		{"Iterations", anyIterations, func(in *RunInfo) string {
			if in.DurationSeconds > 0 || in.Iterations == 0 {
				return ""
			}
			return strconv.FormatUint(in.Iterations, 10)
		}},
		{"Duration [s]", anyDuration, func(in *RunInfo) string { return positive(in.DurationSeconds) }},
		{"TX depth", true, func(in *RunInfo) string { return positive(in.TxDepth) }},
		{"Host", true, func(in *RunInfo) string { return in.Host }},
		{"Peer", true, func(in *RunInfo) string { return in.Peer }},
		{"pvperf version", true, func(in *RunInfo) string { return in.PvperfVersion }},
		{"perftest version", true, func(in *RunInfo) string { return in.PerftestVersion }},
		{"Time", true, func(in *RunInfo) string {
			if in.Time.IsZero() {
				return ""
			}
			return in.Time.Format(time.RFC3339)
		}},
	}
	for _, f := range fields {
		if !f.show {
			continue
		}
		row := htmlSetupRow{Field: f.name}
		for i := range runs {
			row.Values = append(row.Values, orNone(cleanLabel(f.get(&runs[i].Info))))
		}
		row.Differs = len(runs) > 1 && slices.ContainsFunc(row.Values, func(v string) bool { return v != row.Values[0] })
		t.Rows = append(t.Rows, row)
	}
	return t
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// positive is v in decimal, or "" when it is not set (0 or less).
func positive(v int) string {
	if v <= 0 {
		return ""
	}
	return strconv.Itoa(v)
}

// resultColumn is a numeric column of a result table.
type resultColumn struct {
	name string
	get  func(*Result) Num
}

func bwColumn(name string, f func(*BWStats) Num) resultColumn {
	return resultColumn{name, func(r *Result) Num {
		if r.BW == nil {
			return NaN
		}
		return f(r.BW)
	}}
}

func latColumn(name string, f func(*LatencyStats) Num) resultColumn {
	return resultColumn{name, func(r *Result) Num { return latField(r, f) }}
}

// peak is a BW peak, NaN when it was not measured (0).
func peak(v Num) Num {
	if v == 0 {
		return NaN
	}
	return v
}

// resultColumns are the numeric columns of the result tables, in order; a
// table keeps those with at least one value.
var resultColumns = []resultColumn{
	bwColumn("BW peak [MiB/s]", func(b *BWStats) Num { return peak(b.PeakMiBps) }),
	bwColumn("BW average [MiB/s]", func(b *BWStats) Num { return b.AverageMiBps }),
	bwColumn("BW peak [Gb/s]", func(b *BWStats) Num { return peak(b.PeakGbps) }),
	bwColumn("BW average [Gb/s]", func(b *BWStats) Num { return b.AverageGbps }),
	bwColumn("Message rate [Mpps]", func(b *BWStats) Num { return b.MsgRateMpps }),
	latColumn("min [µs]", func(l *LatencyStats) Num { return l.MinUs }),
	latColumn("max [µs]", func(l *LatencyStats) Num { return l.MaxUs }),
	latColumn("typical [µs]", func(l *LatencyStats) Num { return l.TypicalUs }),
	latColumn("mean [µs]", func(l *LatencyStats) Num { return l.MeanUs }),
	latColumn("stdev [µs]", func(l *LatencyStats) Num { return l.StdevUs }),
	latColumn("p50 [µs]", func(l *LatencyStats) Num { return l.P50Us }),
	latColumn("p90 [µs]", func(l *LatencyStats) Num { return l.P90Us }),
	latColumn("p99 [µs]", func(l *LatencyStats) Num { return l.P99Us }),
	latColumn("p99.9 [µs]", func(l *LatencyStats) Num { return l.P999Us }),
	latColumn("p99.99 [µs]", func(l *LatencyStats) Num { return l.P9999Us }),
	latColumn("p99.999 [µs]", func(l *LatencyStats) Num { return l.P99999Us }),
	latColumn("TPS [1/s]", func(l *LatencyStats) Num { return l.TPS }),
	{"CPU [%]", func(r *Result) Num { return r.CPUUtil }},
}

// sideRank orders the rows of one size: local, remote, sum.
func sideRank(side string) int {
	switch side {
	case SideLocal:
		return 0
	case SideRemote:
		return 1
	case SideSum:
		return 2
	}
	return 3
}

// resultTable is run n's results, one row per size and side, by size.
func resultTable(n int, r *Run) htmlRun {
	t := htmlRun{Heading: runName(n, r), Incomplete: r.Incomplete}
	if r.Info.Test != "" {
		t.Heading += ": " + cleanLabel(r.Info.Test)
	}
	if len(r.Results) == 0 {
		return t
	}
	rows := slices.Clone(r.Results)
	slices.SortStableFunc(rows, func(a, b Result) int {
		switch {
		case a.Size < b.Size:
			return -1
		case a.Size > b.Size:
			return 1
		}
		return sideRank(a.Side) - sideRank(b.Side)
	})
	var cols []resultColumn
	for _, c := range resultColumns {
		if slices.ContainsFunc(rows, func(res Result) bool { return c.get(&res).Valid() }) {
			cols = append(cols, c)
		}
	}
	t.Columns = []htmlColumn{{Name: "Side"}, {Name: "Size [B]", Numeric: true}, {Name: "Iterations", Numeric: true}}
	for _, c := range cols {
		t.Columns = append(t.Columns, htmlColumn{Name: c.name, Numeric: true})
	}
	for i := range rows {
		res := &rows[i]
		row := []htmlCell{
			{Text: orNone(cleanLabel(res.Side))},
			{Text: strconv.FormatUint(res.Size, 10), Numeric: true},
			{Text: strconv.FormatUint(res.Iterations, 10), Numeric: true},
		}
		for _, c := range cols {
			row = append(row, htmlCell{Text: formatNum(c.get(res)), Numeric: true})
		}
		t.Rows = append(t.Rows, row)
	}
	t.Fit = fitSentence(r.Fit)
	t.Repeats = repeatsTable(r.Repeats)
	return t
}

// fitSentence states a run's Hockney fit under its table ("" for none).
func fitSentence(f *Fit) string {
	if f == nil {
		return ""
	}
	what := "the average bandwidth (t = n / BW)"
	if f.Metric == "typical_us" {
		what = "t_typical"
	}
	return fmt.Sprintf("Hockney model t(n) = α + n/β fitted to %s over %d sizes from %d to %d bytes: α = %s µs, β = %s MiB/s (%s Gb/s), n½ = %.0f bytes, R² = %.4f.",
		what, f.Points, f.MinSize, f.MaxSize, formatNum(f.AlphaUs), formatNum(f.BetaMiBps), formatNum(f.BetaGbps), float64(f.NHalfBytes), float64(f.RSquared))
}

// repeatsTable is the summary of a repeated test (nil for none).
func repeatsTable(rep *Repeats) *htmlTable {
	if rep == nil {
		return nil
	}
	tab := &htmlTable{Caption: fmt.Sprintf("%d runs: median, range and %g%% bootstrap confidence interval of the median (%d resamples)",
		rep.Runs, rep.Level*100, rep.Resamples)}
	if rep.TargetPercent.Valid() {
		state := "reached"
		if !rep.Converged {
			state = "not reached"
		}
		tab.Caption += fmt.Sprintf("; target ±%g%%, %s", float64(rep.TargetPercent), state)
	}
	for _, name := range []string{"Size [B]", "Side", "Metric", "Median", "Min", "Max", "CI low", "CI high", "±%"} {
		tab.Columns = append(tab.Columns, htmlColumn{Name: name, Numeric: name != "Side" && name != "Metric"})
	}
	num := func(v Num) htmlCell { return htmlCell{Text: formatNum(v), Numeric: true} }
	for _, row := range rep.Rows {
		tab.Rows = append(tab.Rows, []htmlCell{
			{Text: strconv.FormatUint(row.Size, 10), Numeric: true}, {Text: cleanLabel(row.Side)}, {Text: cleanLabel(row.Metric)},
			num(row.Median), num(row.Min), num(row.Max), num(row.CILow), num(row.CIHigh), num(row.HalfWidthPercent),
		})
	}
	return tab
}

// formatNum formats v for a table: 2 decimals from 1 up, 3 significant
// digits below (0.0144, 0.000298), none for a value that was not measured.
func formatNum(v Num) string {
	if !v.Valid() {
		return none
	}
	f := float64(v)
	dec := 2
	if a := math.Abs(f); a != 0 && a < 1 {
		dec = min(2-int(math.Floor(math.Log10(a))), 12)
	}
	return strconv.FormatFloat(f, 'f', dec, 64)
}

// htmlStyle is the page's style sheet. The charts' text is drawn with
// Liberation Sans metrics; Arimo, Arial and Helvetica have the same.
const htmlStyle = `
body{font-family:"Liberation Sans",Arimo,Arial,Helvetica,sans-serif;color:#222;background:#fff;margin:1.5em;line-height:1.35}
h1{font-size:1.5em;margin:0 0 .2em}
h2{font-size:1.2em;margin:1.6em 0 .5em;padding-bottom:.15em;border-bottom:1px solid #ccc}
h3{font-size:1em;margin:1.2em 0 .4em}
p.sub{margin:0;color:#555}
p.incomplete{color:#b00;font-weight:bold}
.wide{overflow-x:auto}
table{border-collapse:collapse;font-size:.85em}
th,td{border:1px solid #ccc;padding:.2em .55em;text-align:left;white-space:nowrap}
thead th{background:#eee}
tbody th{font-weight:normal;color:#444}
td.n,th.n{text-align:right;font-variant-numeric:tabular-nums}
tr.diff th,tr.diff td{font-weight:bold}
.charts{display:flex;flex-wrap:wrap;gap:1em}
.charts svg{max-width:100%;height:auto}
svg text{font-family:"Liberation Sans",Arimo,Arial,Helvetica,sans-serif!important}
@media print{body{margin:0}.charts svg,table{break-inside:avoid}h2{break-after:avoid}}
`

var htmlTemplate = template.Must(template.New("report").Parse(`<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8"/>
<meta name="viewport" content="width=device-width, initial-scale=1"/>
<title>{{.Title}}</title>
<style>` + htmlStyle + `</style>
</head>
<body>
<h1>{{.Title}}</h1>
{{- if .Subtitle}}
<p class="sub">{{.Subtitle}}</p>
{{- end}}
<h2>Test setup</h2>
<div class="wide">
<table>
<thead>
<tr><th>Field</th>{{range .Setup.Runs}}<th>{{.}}</th>{{end}}</tr>
</thead>
<tbody>
{{- range .Setup.Rows}}
<tr{{if .Differs}} class="diff"{{end}}><th>{{.Field}}</th>{{range .Values}}<td>{{.}}</td>{{end}}</tr>
{{- end}}
</tbody>
</table>
</div>
<h2>Charts</h2>
{{- if .Charts}}
<div class="charts">
{{- range .Charts}}
{{.}}
{{- end}}
</div>
{{- else}}
<p>No results to chart.</p>
{{- end}}
<h2>Results</h2>
{{- range .Runs}}
<h3>{{.Heading}}</h3>
{{- with .Incomplete}}
<p class="incomplete">Incomplete: the run stopped before its end ({{.}}); below are what it measured before.</p>
{{- end}}
{{- if .Rows}}
{{template "table" .}}
{{- else}}
<p>No results.</p>
{{- end}}
{{- if .Fit}}
<p>{{.Fit}}</p>
{{- end}}
{{- with .Repeats}}
{{template "table" .}}
{{- end}}
{{- end}}
</body>
</html>
{{- define "table"}}<div class="wide">
<table>
{{- with .Caption}}
<caption>{{.}}</caption>
{{- end}}
<thead>
<tr>{{range .Columns}}<th{{if .Numeric}} class="n"{{end}}>{{.Name}}</th>{{end}}</tr>
</thead>
<tbody>
{{- range .Rows}}
<tr>{{range .}}<td{{if .Numeric}} class="n"{{end}}>{{.Text}}</td>{{end}}</tr>
{{- end}}
</tbody>
</table>
</div>
{{- end}}
`))
