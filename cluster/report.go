package cluster

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"html/template"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
)

// Schema names the version of the JSON report; a change that breaks its
// readers changes the number.
const Schema = "pvperf-cluster/1"

// Thresholds make links fail: a bandwidth below MinBW, a latency above
// MaxLat, or a link worse than MedianPct percent of the median link (a
// bandwidth below MedianPct% of the median; a latency above the median
// times 100/MedianPct). Zero values check nothing.
type Thresholds struct {
	MinBW     float64 `json:"min_bw,omitempty"`
	MaxLat    float64 `json:"max_lat,omitempty"`
	MedianPct float64 `json:"median_pct,omitempty"`
}

// Metric is what a run's value measures.
type Metric struct {
	Name           string `json:"name"` // "bw_average", "latency_typical"
	Unit           string `json:"unit"` // "MiB/s", "usec"
	HigherIsBetter bool   `json:"higher_is_better"`
}

// Link is one pair's line of a report.
type Link struct {
	PairResult
	ServerHost string `json:"server_host"`
	ClientHost string `json:"client_host"`
	// Status is "ok", "failed" (the test did not run to its end) or
	// "threshold" (a threshold failed it; Err says which).
	Status string `json:"status"`
	// Measured is the value, nil when the pair failed (null in JSON, in
	// place of PairResult's value).
	Measured *float64 `json:"value"`
}

// NodeLinks counts a rank's failing links.
type NodeLinks struct {
	Rank    int    `json:"rank"`
	Host    string `json:"host"`
	Failing int    `json:"failing"`
	Links   int    `json:"links"`
}

// Report is a run's report: what rank 0 writes as JSON, CSV, HTML and
// text.
type Report struct {
	Schema     string      `json:"schema"`
	Test       string      `json:"test"`
	Args       []string    `json:"args"`
	Pattern    Pattern     `json:"pattern"`
	Size       int         `json:"size"`
	Launcher   string      `json:"launcher"`
	Metric     Metric      `json:"metric"`
	Thresholds *Thresholds `json:"thresholds,omitempty"` // nil: none set
	Members    []Member    `json:"members"`
	Rounds     int         `json:"rounds"`
	Links      []Link      `json:"links"`
	// Matrix[server][client] is the link's value; null where the pair
	// did not run or failed.
	Matrix [][]*float64 `json:"matrix"`
	// Median is the median of the links that ran; NaN (null) if none.
	Median       *float64    `json:"median"`
	Failing      []Link      `json:"failing"`
	FailingNodes []NodeLinks `json:"failing_nodes"`
	// Paths counts the links by the kind of data path their client's
	// device used (PathKind); none for devices that do not say.
	Paths             []PathCount `json:"data_paths,omitempty"`
	RendezvousSeconds float64     `json:"rendezvous_seconds"`
	Seconds           float64     `json:"seconds"`
	// Refused is what rank 0 turned away at the rendezvous
	// (Results.Refused).
	Refused []string `json:"refused,omitempty"`
}

// PathCount is the number of links whose data path was of one kind.
type PathCount struct {
	Kind  string `json:"kind"`
	Links int    `json:"links"`
}

// PathKind is the kind of a data path as an emulated device describes it
// ("RoCE v2, 10.0.0.2 -> 10.0.0.1 (emulated device)"): its transport
// without the addresses ("RoCE v2", "TCP", "memory copy", and for a UD QP
// that may use either "memory copy or RoCE v2").
func PathKind(path string) string {
	p := strings.TrimSuffix(path, " (emulated device)")
	if _, after, ok := strings.Cut(p, ", else "); ok {
		p = "memory copy or " + after
	}
	for _, sep := range []string{",", " from ", " ("} {
		p, _, _ = strings.Cut(p, sep)
	}
	return p
}

// NewReport builds the report of res, judging each link by th.
func NewReport(test string, args []string, launcher string, m Metric, th Thresholds, p Pattern, res *Results) *Report {
	r := &Report{Schema: Schema, Test: test, Args: args, Pattern: p, Size: len(res.Members), Launcher: launcher,
		Metric: m, Members: res.Members, Rounds: res.Rounds,
		RendezvousSeconds: res.RendezvousSeconds, Seconds: res.Seconds, Failing: []Link{}, FailingNodes: []NodeLinks{},
		Refused: res.Refused}
	if th != (Thresholds{}) {
		r.Thresholds = &th
	}
	var ran []float64
	for _, pr := range res.Pairs {
		if pr.Err == "" {
			ran = append(ran, pr.Value)
		}
	}
	median := math.NaN()
	if len(ran) > 0 {
		slices.Sort(ran)
		median = ran[len(ran)/2]
		if len(ran)%2 == 0 {
			median = (ran[len(ran)/2-1] + ran[len(ran)/2]) / 2
		}
		r.Median = &median
	}
	r.Matrix = make([][]*float64, r.Size)
	for i := range r.Matrix {
		r.Matrix[i] = make([]*float64, r.Size)
	}
	nodes := make([]NodeLinks, r.Size)
	for i := range nodes {
		nodes[i] = NodeLinks{Rank: i, Host: res.Members[i].Host}
	}
	for _, pr := range res.Pairs {
		l := Link{PairResult: pr, ServerHost: res.Members[pr.Server].Host, ClientHost: res.Members[pr.Client].Host, Status: "ok"}
		if pr.Err != "" {
			l.Status = "failed"
		} else {
			v := pr.Value
			r.Matrix[pr.Server][pr.Client] = &v
			l.Measured = &v
			if why := th.judge(v, median, m); why != "" {
				l.Status, l.Err = "threshold", why
			}
		}
		r.Links = append(r.Links, l)
		if pr.Path != "" {
			k := PathKind(pr.Path)
			i := slices.IndexFunc(r.Paths, func(c PathCount) bool { return c.Kind == k })
			if i < 0 {
				i = len(r.Paths)
				r.Paths = append(r.Paths, PathCount{Kind: k})
			}
			r.Paths[i].Links++
		}
		for _, rank := range []int{pr.Server, pr.Client} {
			nodes[rank].Links++
			if l.Status != "ok" {
				nodes[rank].Failing++
			}
		}
		if l.Status != "ok" {
			r.Failing = append(r.Failing, l)
		}
	}
	// A node fails when at least half of its links do: one bad link
	// blames both ends, a bad node all its links.
	for _, n := range nodes {
		if n.Links > 0 && 2*n.Failing >= n.Links && n.Failing > 0 {
			r.FailingNodes = append(r.FailingNodes, n)
		}
	}
	return r
}

// judge says why v fails the thresholds ("" when it passes).
func (th Thresholds) judge(v, median float64, m Metric) string {
	f := func(x float64) string { return strconv.FormatFloat(x, 'f', 2, 64) }
	if m.HigherIsBetter {
		switch {
		case th.MinBW > 0 && v < th.MinBW:
			a, b := distinct(v, th.MinBW)
			return fmt.Sprintf("%s %s below --min_bw %s", a, m.Unit, b)
		case th.MedianPct > 0 && !math.IsNaN(median) && v < median*th.MedianPct/100:
			return fmt.Sprintf("%s %s below %s%% of the median link (%s)", f(v), m.Unit, limit(th.MedianPct), f(median))
		}
		return ""
	}
	switch {
	case th.MaxLat > 0 && v > th.MaxLat:
		a, b := distinct(v, th.MaxLat)
		return fmt.Sprintf("%s %s above --max_lat %s", a, m.Unit, b)
	case th.MedianPct > 0 && !math.IsNaN(median) && v > median*100/th.MedianPct:
		return fmt.Sprintf("%s %s above the median link (%s) by more than %s%% allows", f(v), m.Unit, f(median), limit(th.MedianPct))
	}
	return ""
}

// distinct formats a and b with two decimals, or as many more as it takes
// for the two texts to differ (a link 0.2205 above a limit of 0.22 is not
// "0.22 above 0.22").
func distinct(a, b float64) (string, string) {
	for prec := 2; ; prec++ {
		x, y := strconv.FormatFloat(a, 'f', prec, 64), strconv.FormatFloat(b, 'f', prec, 64)
		if x != y || prec >= 9 {
			return x, limit(b)
		}
	}
}

// limit formats a threshold as given: two decimals, or all of its digits
// when two would change it (--max_lat 0.001 is not "0.00").
func limit(x float64) string {
	s := strconv.FormatFloat(x, 'f', 2, 64)
	if v, err := strconv.ParseFloat(s, 64); err == nil && v == x {
		return s
	}
	return strconv.FormatFloat(x, 'f', -1, 64)
}

// OK tells whether every link ran and passed the thresholds.
func (r *Report) OK() bool { return len(r.Failing) == 0 }

// WriteJSON writes the report as JSON.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// WriteCSV writes one line per link.
func (r *Report) WriteCSV(w io.Writer) error {
	cw := csv.NewWriter(w)
	_ = cw.Write([]string{"round", "server", "client", "server_host", "client_host", r.Metric.Name + "_" + r.Metric.Unit, "status", "error", "data_path"})
	for _, l := range r.Links {
		v := ""
		if l.Status != "failed" {
			v = strconv.FormatFloat(l.Value, 'f', 2, 64)
		}
		_ = cw.Write([]string{strconv.Itoa(l.Round), strconv.Itoa(l.Server), strconv.Itoa(l.Client), l.ServerHost, l.ClientHost, v, l.Status, l.Err, l.Path})
	}
	cw.Flush()
	return cw.Error()
}

// WriteText writes the matrix (up to 32 ranks) and the failing links and
// nodes.
func (r *Report) WriteText(w io.Writer) error {
	fmt.Fprintf(w, "---------------------------------------------------------------------------------------\n")
	fmt.Fprintf(w, " %s %s over %d ranks (%s, %s): %s, %s\n", r.Test, r.Metric.Name, r.Size, r.Pattern, r.Launcher, plural(r.Rounds, "round"), plural(len(r.Links), "link"))
	if r.Median != nil {
		fmt.Fprintf(w, " median link: %.2f %s\n", *r.Median, r.Metric.Unit)
	}
	if len(r.Paths) > 0 {
		fmt.Fprintf(w, " data path: %s\n", r.pathsText())
	}
	if r.Size <= 32 {
		fmt.Fprintf(w, " %-12s", "server\\client")
		for c := range r.Size {
			fmt.Fprintf(w, " %10d", c)
		}
		fmt.Fprintln(w)
		failed := map[[2]int]bool{}
		for _, l := range r.Links {
			if l.Status == "failed" {
				failed[[2]int{l.Server, l.Client}] = true
			}
		}
		dash := false
		for s, row := range r.Matrix {
			fmt.Fprintf(w, " %-12d ", s)
			for c, v := range row {
				switch {
				case v != nil:
					fmt.Fprintf(w, " %10.2f", *v)
				case failed[[2]int{s, c}]:
					fmt.Fprintf(w, " %10s", "failed")
				default:
					fmt.Fprintf(w, " %10s", "-")
					dash = dash || s != c
				}
			}
			fmt.Fprintln(w)
		}
		if dash {
			fmt.Fprintf(w, " (-: not measured in this direction)\n")
		}
	}
	for _, l := range r.Failing {
		fmt.Fprintf(w, " FAILING link %d (%s) -> %d (%s): %s\n", l.Server, l.ServerHost, l.Client, l.ClientHost, l.Err)
	}
	for _, n := range r.FailingNodes {
		fmt.Fprintf(w, " FAILING node %d (%s): %d of its %d links\n", n.Rank, n.Host, n.Failing, n.Links)
	}
	for _, why := range r.Refused {
		fmt.Fprintf(w, " refused at the rendezvous: %s\n", why)
	}
	_, err := fmt.Fprintf(w, " %d of %d links failing; rendezvous %.2f s, run %.2f s\n---------------------------------------------------------------------------------------\n",
		len(r.Failing), len(r.Links), r.RendezvousSeconds, r.Seconds)
	return err
}

// WriteHTML writes a page with the matrix as a heatmap (a table whose
// cells are coloured from the worst link to the best), then the failing
// links and nodes.
func (r *Report) WriteHTML(w io.Writer) error {
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, row := range r.Matrix {
		for _, v := range row {
			if v != nil {
				lo, hi = min(lo, *v), max(hi, *v)
			}
		}
	}
	type cell struct {
		Text, Title string
		Style       template.CSS // built here from numbers, never from input
	}
	rows := make([][]cell, r.Size)
	for s, row := range r.Matrix {
		rows[s] = make([]cell, r.Size)
		for c, v := range row {
			switch {
			case s == c:
				rows[s][c] = cell{Style: "background:#eee"}
			case v == nil:
				rows[s][c] = cell{Text: "", Style: "background:#fff", Title: "not measured in this direction"}
			default:
				q := 0.5
				if hi > lo {
					q = (*v - lo) / (hi - lo)
				}
				if !r.Metric.HigherIsBetter {
					q = 1 - q
				}
				// Red (worst) to green (best).
				rows[s][c] = cell{Text: strconv.FormatFloat(*v, 'f', 2, 64),
					Style: template.CSS(fmt.Sprintf("background:hsl(%.0f,70%%,75%%)", 120*q)),
					Title: fmt.Sprintf("%d -> %d: %.2f %s", s, c, *v, r.Metric.Unit)}
			}
		}
	}
	for _, l := range r.Links {
		if c := &rows[l.Server][l.Client]; l.Path != "" && l.Measured != nil && c.Title != "" {
			c.Title += " (" + l.Path + ")"
		}
	}
	for _, l := range r.Failing {
		c := &rows[l.Server][l.Client]
		c.Style += ";outline:3px solid #b00;outline-offset:-3px"
		c.Title = fmt.Sprintf("%d -> %d: %s", l.Server, l.Client, l.Err)
		if l.Path != "" && l.Measured != nil {
			c.Title += " (" + l.Path + ")"
		}
		if c.Text == "" {
			c.Text = "✗"
		}
	}
	median := ""
	if r.Median != nil {
		median = strconv.FormatFloat(*r.Median, 'f', 2, 64)
	}
	return htmlPage.Execute(w, struct {
		*Report
		Rows       [][]cell
		MedianText string
		PathsText  string
	}{r, rows, median, r.pathsText()})
}

var htmlPage = template.Must(template.New("page").Parse(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>pvperf cluster: {{.Test}} over {{.Size}} ranks</title>
<style>
body{font-family:sans-serif;margin:2em}
table.m{border-collapse:collapse;font-size:12px}
table.m td,table.m th{border:1px solid #ccc;padding:3px 5px;text-align:right;min-width:3em}
table.l{border-collapse:collapse}table.l td,table.l th{border-bottom:1px solid #ddd;padding:3px 8px;text-align:left}
</style></head><body>
<h1>{{.Test}} over {{.Size}} ranks</h1>
<p>{{.Metric.Name}} in {{.Metric.Unit}}, pattern {{.Pattern}}, launcher {{.Launcher}}, {{.Rounds}} rounds, {{len .Links}} links{{with .MedianText}}, median link {{.}} {{$.Metric.Unit}}{{end}}; rendezvous {{printf "%.2f" .RendezvousSeconds}} s, run {{printf "%.2f" .Seconds}} s.</p>
{{with .PathsText}}<p id="paths">Data path: {{.}}.</p>{{end}}
<h2>Matrix (server row, client column)</h2>
<table class="m" id="matrix"><tr><th>server \ client</th>{{range $i, $m := .Members}}<th title="{{$m.Host}}">{{$i}}</th>{{end}}</tr>
{{range $s, $row := .Rows}}<tr><th title="{{(index $.Members $s).Host}}">{{$s}}</th>{{range $row}}<td style="{{.Style}}" title="{{.Title}}">{{.Text}}</td>{{end}}</tr>
{{end}}</table>
<h2>Failing links ({{len .Failing}})</h2>
{{if .Failing}}<table class="l" id="failing"><tr><th>round</th><th>server</th><th>client</th><th>why</th></tr>
{{range .Failing}}<tr><td>{{.Round}}</td><td>{{.Server}} ({{.ServerHost}})</td><td>{{.Client}} ({{.ClientHost}})</td><td>{{.Err}}</td></tr>
{{end}}</table>{{else}}<p>None.</p>{{end}}
<h2>Failing nodes ({{len .FailingNodes}})</h2>
{{if .FailingNodes}}<ul>{{range .FailingNodes}}<li>{{.Rank}} ({{.Host}}): {{.Failing}} of its {{.Links}} links</li>{{end}}</ul>{{else}}<p>None.</p>{{end}}
</body></html>
`))

// pathsText lists the kinds of data path with their links: "RoCE v2 (10
// links), memory copy (2 links)"; "" when no link said.
func (r *Report) pathsText() string {
	var b strings.Builder
	for i, p := range r.Paths {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s (%s)", p.Kind, plural(p.Links, "link"))
	}
	return b.String()
}

// plural is n and the noun, with an s unless n is 1.
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
