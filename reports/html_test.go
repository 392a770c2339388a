package reports

import (
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"gonum.org/v1/plot"
)

// htmlOverlayRuns are two write_bw runs, RoCE v1 against RoCE v2.
func htmlOverlayRuns() []Run {
	a, b := fixtureBW(1, 1000, 3), fixtureBW(2, 1100, 2)
	a.Source, b.Source = "results/v1.json", "results/v2.json"
	return []Run{a, b}
}

// htmlCases are the golden pages: the runs, the number of charts and the
// legend labels each must show.
var htmlCases = []struct {
	name   string
	runs   func() []Run
	charts int
	labels []string
}{
	{"html_write_bw", func() []Run { return []Run{fixtureBW(2, 1100, 2)} }, 2, nil},
	{"html_overlay", htmlOverlayRuns, 2, []string{"RoCE v1", "RoCE v2"}},
	{"html_send_lat", func() []Run { return []Run{fixtureLat(3)} }, 1, []string{"p50", "p90", "p99", "p99.9"}},
	{"html_mixed", func() []Run { return []Run{fixtureBidi(), fixtureDuration(), fixtureLat(3)} }, 4,
		[]string{"p50", "p99.9"}},
}

func writeHTML(t *testing.T, runs []Run) string {
	t.Helper()
	var buf bytes.Buffer
	if err := WriteHTML(&buf, runs); err != nil {
		t.Fatal(err)
	}
	return buf.String()
}

func TestHTMLGolden(t *testing.T) {
	for _, c := range htmlCases {
		t.Run(c.name, func(t *testing.T) {
			page := writeHTML(t, c.runs())
			checkSelfContained(t, page)
			doc := checkPage(t, page)
			if doc.svgs != c.charts {
				t.Errorf("%d charts, want %d", doc.svgs, c.charts)
			}
			for _, l := range c.labels {
				if !slices.Contains(doc.svgText, l) {
					t.Errorf("no chart text %q in %q", l, doc.svgText)
				}
			}
			// The same runs give the same bytes.
			if again := writeHTML(t, c.runs()); again != page {
				t.Errorf("second rendering differs:\n%s", lineDiff(page, again))
			}
			golden(t, c.name, page)
		})
	}
}

// pageDoc is what checkPage found in a page.
type pageDoc struct {
	svgs    int      // <svg> elements
	svgText []string // the text of the charts' <text> elements
	text    string   // all text outside the charts
}

// reporter is the part of testing.T the page checks use.
type reporter interface {
	Helper()
	Errorf(format string, args ...any)
}

// recorder is a reporter that keeps the errors.
type recorder struct{ errs []string }

func (*recorder) Helper() {}
func (r *recorder) Errorf(format string, args ...any) {
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}

// checkSelfContained fails when page has text that could load a resource
// or run a script anywhere, even in text (the fixtures have none).
func checkSelfContained(t reporter, page string) {
	t.Helper()
	for _, bad := range []string{"src=", "<script", "<link", "@import", "url(", "href=", "<iframe", "<object", "<embed", "<img"} {
		if strings.Contains(strings.ToLower(page), bad) {
			t.Errorf("page contains %q", bad)
		}
	}
}

// checkPage parses page as XML (the report is written so that it is) and
// fails on any element or attribute that would load a resource or run a
// script.
func checkPage(t reporter, page string) pageDoc {
	t.Helper()
	if !strings.HasPrefix(page, "<!DOCTYPE html>\n") {
		t.Errorf("page starts with %.40q", page)
	}
	var doc pageDoc
	d := xml.NewDecoder(strings.NewReader(page))
	d.Strict = true
	var stack []string
	inSVG, inText := 0, false
	var text strings.Builder
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Errorf("page is not well-formed: %v", err)
			return doc
		}
		switch tok := tok.(type) {
		case xml.StartElement:
			name := tok.Name.Local
			stack = append(stack, name)
			switch name {
			case "script", "link", "img", "image", "iframe", "object", "embed", "use", "a", "foreignObject":
				t.Errorf("page has a <%s> element", name)
			case "svg":
				doc.svgs++
				inSVG++
			case "text":
				inText = inSVG > 0
				text.Reset()
			}
			for _, a := range tok.Attr {
				ns := a.Name.Space == "xmlns" || (a.Name.Space == "" && a.Name.Local == "xmlns")
				if ns {
					if name != "svg" {
						t.Errorf("namespace declaration %s=%q on <%s>", a.Name.Local, a.Value, name)
					}
					continue
				}
				switch strings.ToLower(a.Name.Local) {
				case "src", "href", "srcset", "action", "data", "poster", "background":
					t.Errorf("<%s %s=%q>", name, a.Name.Local, a.Value)
				}
				if strings.HasPrefix(strings.ToLower(a.Name.Local), "on") {
					t.Errorf("<%s %s=%q>: event handler", name, a.Name.Local, a.Value)
				}
				if v := strings.ToLower(a.Value); strings.Contains(v, "http:") || strings.Contains(v, "https:") || strings.Contains(v, "url(") {
					t.Errorf("<%s %s=%q>: a URL", name, a.Name.Local, a.Value)
				}
			}
		case xml.EndElement:
			name := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			switch name {
			case "svg":
				inSVG--
			case "text":
				if inText {
					doc.svgText = append(doc.svgText, text.String())
				}
				inText = false
			}
		case xml.CharData:
			switch {
			case inText:
				text.Write(tok)
			case inSVG == 0:
				doc.text += string(tok)
			}
			if len(stack) > 0 && stack[len(stack)-1] == "style" {
				css := strings.ToLower(string(tok))
				if strings.Contains(css, "@import") || strings.Contains(css, "url(") || strings.Contains(css, "@font-face") {
					t.Errorf("style sheet loads a resource:\n%s", tok)
				}
			}
		case xml.ProcInst:
			t.Errorf("processing instruction <?%s?> in the page", tok.Target)
		}
	}
	if len(stack) != 0 {
		t.Errorf("unclosed elements %v", stack)
	}
	return doc
}

func TestHTMLChecksFail(t *testing.T) {
	// The checks above find what they look for.
	good := writeHTML(t, []Run{fixtureBidi()})
	var r recorder
	checkSelfContained(&r, good)
	checkPage(&r, good)
	if len(r.errs) != 0 {
		t.Fatalf("good page: %q", r.errs)
	}
	body := strings.Index(good, "<body>") + len("<body>")
	for _, bad := range []string{
		`<script src="x.js"></script>`,
		`<script>throw new Error("x")</script>`,
		`<img src="http://example.com/x.png"/>`,
		`<link rel="stylesheet" href="https://example.com/x.css"/>`,
		`<style>@import "x.css";</style>`,
		`<div style="background:url(http://example.com/x.png)"></div>`,
		`<svg xmlns="http://www.w3.org/2000/svg"><image href="x.png"/></svg>`,
		`<p onclick="f()">x</p>`,
		`<p>unclosed`,
		`<br>`,
	} {
		var r recorder
		page := good[:body] + bad + good[body:]
		checkSelfContained(&r, page)
		checkPage(&r, page)
		if len(r.errs) == 0 {
			t.Errorf("no error for %s", bad)
		}
	}
}

func TestHTMLContents(t *testing.T) {
	page := writeHTML(t, htmlOverlayRuns())
	checkSelfContained(t, page)
	doc := checkPage(t, page)
	for _, want := range []string{
		"pvperf report: write_bw",
		"Run 1 (v1.json)", "Run 2 (v2.json)",
		"RDMA_Write_BW_Test", "rdma_rxe", "host-a", "10.0.0.2", "2026-11-22T10:30:00Z",
		"BW average [MiB/s]", "BW peak [Gb/s]", "Message rate [Mpps]",
		"8388608", "999.63",
	} {
		if !strings.Contains(doc.text, want) {
			t.Errorf("page text lacks %q", want)
		}
	}
	// The differing field is marked; the others are not.
	if !strings.Contains(page, `<tr class="diff"><th>RoCE version</th><td>v1</td><td>v2</td></tr>`) {
		t.Errorf("RoCE version row not marked as differing")
	}
	if strings.Count(page, `class="diff"`) != 1 {
		t.Errorf("%d rows marked as differing, want 1", strings.Count(page, `class="diff"`))
	}
	// The size axis labels.
	for _, l := range []string{"2", "64", "1K", "64K", "1M", "8M"} {
		if !slices.Contains(doc.svgText, l) {
			t.Errorf("no tick label %q in %q", l, doc.svgText)
		}
	}
	if slices.ContainsFunc(doc.svgText, func(s string) bool { return strings.Contains(s, "e+") }) {
		t.Errorf("exponent in a tick label: %q", doc.svgText)
	}

	// Percentile columns of a latency run carry units; a duration run
	// shows only the columns it has.
	lat := checkPage(t, writeHTML(t, []Run{fixtureLat(3), fixtureDuration()}))
	for _, want := range []string{"p99 [µs]", "p99.9 [µs]", "typical [µs]", "TPS [1/s]", "mean latency [µs]"} {
		if !strings.Contains(lat.text, want) && !slices.Contains(lat.svgText, want) {
			t.Errorf("latency page lacks %q", want)
		}
	}
}

func TestHTMLMixedKinds(t *testing.T) {
	// BW charts show the BW runs only, latency charts the latency runs.
	runs := []Run{fixtureBW(1, 1000, 3), fixtureLat(3), fixtureBW(2, 1100, 2), fixtureLat(4)}
	runs[1].Info.Host, runs[3].Info.Host = "lat-a", "lat-b"
	charts := buildCharts(runs)
	var titles []string
	for _, c := range charts {
		titles = append(titles, c.title)
	}
	want := []string{"write_bw: BW average", "write_bw: message rate",
		"send_lat: p50 latency", "send_lat: p99 latency", "send_lat: p99.9 latency"}
	if !slices.Equal(titles, want) {
		t.Fatalf("charts %q, want %q", titles, want)
	}
	if l := seriesLabels(charts[0]); !slices.Equal(l, []string{"RoCE v1", "RoCE v2"}) {
		t.Errorf("BW legend %q", l)
	}
	if l := seriesLabels(charts[2]); !slices.Equal(l, []string{"lat-a", "lat-b"}) {
		t.Errorf("latency legend %q", l)
	}
	doc := checkPage(t, writeHTML(t, runs))
	if doc.svgs != len(want) {
		t.Errorf("%d charts, want %d", doc.svgs, len(want))
	}
}

func seriesLabels(c chartSpec) []string {
	var l []string
	for _, s := range c.series {
		l = append(l, s.label)
	}
	return l
}

func TestHTMLLegendLabels(t *testing.T) {
	n := 0
	mk := func(f func(*Run)) chartRun {
		r := fixtureBW(2, 1000, 2)
		f(&r)
		n++
		return chartRun{n: n, run: &r}
	}
	cases := []struct {
		name string
		runs []chartRun
		want []string
	}{
		{"driver", []chartRun{
			mk(func(r *Run) { r.Info.Driver = "emu/pvrdma-hw14" }),
			mk(func(r *Run) {}),
		}, []string{"emu/pvrdma-hw14", "rdma_rxe"}},
		{"several fields", []chartRun{
			mk(func(r *Run) { r.Info.QPs = 4; r.Info.Connection = "UC" }),
			mk(func(r *Run) {}),
		}, []string{"UC, qps=4", "RC, qps=1"}},
		{"days", []chartRun{
			mk(func(r *Run) { r.Info.Time = r.Info.Time.Add(-24 * time.Hour) }),
			mk(func(r *Run) {}),
		}, []string{"2026-11-21 10:30", "2026-11-22 10:30"}},
		{"same day", []chartRun{
			mk(func(r *Run) { r.Info.Time = r.Info.Time.Add(-90 * time.Minute) }),
			mk(func(r *Run) {}),
		}, []string{"09:00:00", "10:30:00"}},
		{"sources", []chartRun{
			mk(func(r *Run) { r.Source = "/tmp/a/today.json" }),
			mk(func(r *Run) { r.Source = "/tmp/b/yesterday.json" }),
		}, []string{"today.json", "yesterday.json"}},
		{"numbers", []chartRun{
			{n: 3, run: &Run{}}, {n: 7, run: &Run{Source: "x.json"}},
		}, []string{"run 3", "run 7"}},
		{"not distinct", []chartRun{
			mk(func(r *Run) { r.Info.Host = "a"; r.Source = "same" }),
			mk(func(r *Run) { r.Info.Host = "b"; r.Source = "same" }),
			mk(func(r *Run) { r.Info.Host = "b"; r.Source = "same" }),
		}, []string{"run 11", "run 12", "run 13"}},
		{"long", []chartRun{
			mk(func(r *Run) { r.Info.Host = strings.Repeat("h", 40) }),
			mk(func(r *Run) { r.Info.Host = "b\x00\n" }),
		}, []string{strings.Repeat("h", 23) + "…", "b\uFFFD\uFFFD"}},
	}
	for _, c := range cases {
		if got := legendLabels(c.runs); !slices.Equal(got, c.want) {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}

func TestHTMLSizeTicks(t *testing.T) {
	labels := func(ticks []plot.Tick) []string {
		var l []string
		for _, tk := range ticks {
			if tk.Label != "" {
				l = append(l, tk.Label)
			}
		}
		return l
	}
	cases := []struct {
		lo, hi float64
		want   []string
		n      int // number of ticks
	}{
		{2, 8 << 20, []string{"2", "64", "1K", "64K", "1M", "8M"}, 23},
		{32 << 10, 128 << 10, []string{"32K", "64K", "128K"}, 3},
		{1, 4, []string{"1", "2", "4"}, 3},
		{1 << 10, 1 << 30, []string{"1K", "64K", "1M", "8M", "64M", "1G"}, 21},
		{4 << 10, 1 << 20, []string{"64K", "1M"}, 9},
		{3, 3, nil, 0},
	}
	for _, c := range cases {
		ticks := sizeTicker{}.Ticks(c.lo, c.hi)
		if got := labels(ticks); !slices.Equal(got, c.want) || len(ticks) != c.n {
			t.Errorf("Ticks(%g, %g): %d ticks, labels %q; want %d, %q", c.lo, c.hi, len(ticks), got, c.n, c.want)
		}
	}
	if l := labels(sizeTicker{}.Ticks(16, 1<<11)); !slices.Equal(l, []string{"64", "1K"}) {
		t.Errorf("16..2K: %q", l)
	}
	if l := labels(sizeTicker{}.Ticks(128, 512)); !slices.Equal(l, []string{"128", "256", "512"}) {
		t.Errorf("128..512: %q", l)
	}
	if l := labels(log10Ticker{}.Ticks(3, 6700)); !slices.Equal(l, []string{"10", "100", "1000"}) {
		t.Errorf("log10 3..6700: %q", l)
	}
	if l := labels(log10Ticker{}.Ticks(3, 60)); !slices.Equal(l, []string{"5", "10", "20", "50"}) {
		t.Errorf("log10 3..60: %q", l)
	}
	for _, c := range []struct {
		size uint64
		want string
	}{{2, "2"}, {1000, "1000"}, {1024, "1K"}, {1536, "1536"}, {3 << 20, "3M"}, {1 << 30, "1G"}, {65 << 10, "65K"}} {
		if got := sizeLabel(c.size); got != c.want {
			t.Errorf("sizeLabel(%d) = %q, want %q", c.size, got, c.want)
		}
	}
}

func TestHTMLEmpty(t *testing.T) {
	for _, runs := range [][]Run{nil, {}} {
		err := WriteHTML(io.Discard, runs)
		if err == nil || !strings.HasPrefix(err.Error(), "reports: html: ") {
			t.Errorf("WriteHTML(%v) = %v, want a reports: html: error", runs, err)
		}
	}
	// A run without results, and one with nothing measured: a page that
	// says so, without charts.
	nan := Run{Info: fixtureInfo("write_bw", KindBW, "RDMA_Write", 2)}
	nan.Results = []Result{{Side: SideLocal, Size: 64, BW: &BWStats{NaN, NaN, NaN, NaN, NaN}, CPUUtil: NaN}}
	empty := Run{Info: fixtureInfo("send_lat", KindLatency, "Send", 2)}
	page := writeHTML(t, []Run{empty, nan, {}})
	doc := checkPage(t, page)
	if doc.svgs != 0 {
		t.Errorf("%d charts of no results", doc.svgs)
	}
	if !strings.Contains(doc.text, "No results.") || !strings.Contains(doc.text, "No results to chart.") {
		t.Errorf("page does not say there are no results:\n%s", page)
	}
}

func TestHTMLOddValues(t *testing.T) {
	// One size, unsorted sizes, NaN, infinite, zero and negative values
	// draw without a panic.
	r := fixtureLat(3)
	r.Results = []Result{r.Results[5], r.Results[1], r.Results[3]}
	r.Results[0].Latency.P99Us = NaN
	r.Results[1].Latency.P50Us = Num(math.Inf(1))
	r.Results[2].Latency.P90Us = 0
	r.Results[2].Latency.P999Us = -1
	one := fixtureBW(2, 1000, 2)
	one.Results = one.Results[4:5]
	zero := fixtureBW(1, 1000, 2)
	for i := range zero.Results {
		zero.Results[i].BW.AverageMiBps = 0
		zero.Results[i].BW.MsgRateMpps = 0
	}
	zero.Results = append(zero.Results, Result{Side: SideLocal, Size: 0, BW: &BWStats{AverageMiBps: 5}})
	doc := checkPage(t, writeHTML(t, []Run{r, one, zero, {Info: RunInfo{Kind: "other"}}}))
	if doc.svgs != 3 {
		t.Errorf("%d charts, want 3", doc.svgs)
	}
	s := runSeries(&r, "x", latPercentiles[2].get) // p99
	if !slices.IsSorted(s.xs) || len(s.xs) != 2 {
		t.Errorf("series sizes %v, want two sorted", s.xs)
	}
}

func TestHTMLEscapes(t *testing.T) {
	evil := `<script>alert("x")</script> & 'q' ` + "\x00\x01\xff"
	a, b := fixtureBW(2, 1000, 2), fixtureBW(2, 1100, 2)
	a.Info.Device, a.Info.Host, a.Info.Test, a.Source = evil, evil, evil, evil+".json"
	b.Info.Host = `<img src="http://example.com/x.png">`
	page := writeHTML(t, []Run{a, b})
	doc := checkPage(t, page)
	if doc.svgs != 2 {
		t.Errorf("%d charts, want 2", doc.svgs)
	}
	if !strings.Contains(doc.text, `<script>alert("x")</script> & 'q'`) {
		t.Errorf("device name not shown as text")
	}
	if !slices.ContainsFunc(doc.svgText, func(s string) bool { return strings.HasPrefix(s, "<script>alert(") }) {
		t.Errorf("legend label not shown as text: %q", doc.svgText)
	}
}

func TestHTMLWriteError(t *testing.T) {
	err := WriteHTML(failWriter{}, []Run{fixtureBidi()})
	if !errors.Is(err, errWrite) || !strings.HasPrefix(err.Error(), "reports: html: ") {
		t.Errorf("err = %v", err)
	}
}

func TestHTMLConcurrent(t *testing.T) {
	want := writeHTML(t, htmlOverlayRuns())
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			var buf bytes.Buffer
			if err := WriteHTML(&buf, htmlOverlayRuns()); err != nil {
				t.Error(err)
			} else if buf.String() != want {
				t.Error("concurrent rendering differs")
			}
		})
	}
	wg.Wait()
}

// TestChartLogY: an overlay of runs far apart (an emulator and a slow
// device) gets a log axis for bandwidth, runs of one order a linear one.
func TestChartLogY(t *testing.T) {
	bwChart := func(runs ...Run) *chartSpec {
		t.Helper()
		for _, c := range buildCharts(runs) {
			if strings.Contains(c.title, "BW average") {
				return &c
			}
		}
		t.Fatal("no BW average chart")
		return nil
	}
	bounds := func(c *chartSpec) (float64, float64) {
		lo, hi := math.Inf(1), math.Inf(-1)
		for _, s := range c.series {
			for _, y := range s.ys {
				lo, hi = min(lo, y), max(hi, y)
			}
		}
		return lo, hi
	}
	for _, tc := range []struct {
		name string
		runs []Run
		log  bool
	}{
		{"one run", []Run{fixtureBW(2, 1100, 2)}, false},
		{"same order", []Run{fixtureBW(1, 1000, 3), fixtureBW(2, 1100, 2)}, false},
		{"100 times apart", []Run{fixtureBW(1, 10000, 0.2), fixtureBW(2, 20, 50)}, true},
	} {
		c := bwChart(tc.runs...)
		lo, hi := bounds(c)
		if got := c.logY(lo, hi); got != tc.log {
			t.Errorf("%s: log axis %v, want %v", tc.name, got, tc.log)
		}
	}
}
