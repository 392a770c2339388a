package cluster

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"strings"
	"testing"
)

func results() *Results {
	return &Results{
		Members: []Member{{Rank: 0, Host: "a"}, {Rank: 1, Host: "b"}, {Rank: 2, Host: "c"}, {Rank: 3, Host: "d"}},
		Rounds:  3,
		Pairs: []PairResult{
			{Round: 1, Server: 0, Client: 1, Value: 100}, {Round: 1, Server: 2, Client: 3, Value: 40},
			{Round: 2, Server: 0, Client: 2, Value: 98}, {Round: 2, Server: 3, Client: 1, Value: 45},
			{Round: 3, Server: 0, Client: 3, Value: 50}, {Round: 3, Server: 1, Client: 2, Err: "client (rank 2): gone"},
		},
	}
}

var bw = Metric{Name: "bw_average", Unit: "MiB/s", HigherIsBetter: true}

func TestReportThresholds(t *testing.T) {
	r := NewReport("write_bw", nil, "flags", bw, Thresholds{MedianPct: 80}, AllPairs, results())
	// The median of 100, 40, 98, 45, 50 is 50: links below 40 fail.
	if *r.Median != 50 || len(r.Failing) != 1 || r.Failing[0].Status != "failed" || r.OK() {
		t.Fatalf("median %v, failing %+v", *r.Median, r.Failing)
	}
	r = NewReport("write_bw", nil, "flags", bw, Thresholds{MinBW: 60}, AllPairs, results())
	var below []string
	for _, l := range r.Failing {
		if l.Status == "threshold" {
			below = append(below, l.Err)
		}
	}
	if len(below) != 3 || !strings.Contains(below[0], "below --min_bw 60.00") {
		t.Errorf("below --min_bw: %q", below)
	}
	// Rank 3's links all fail (40, 45, 50 below 60): a failing node; so
	// do rank 2's (40 and the failed one) and rank 1's (45, failed).
	var nodes []int
	for _, n := range r.FailingNodes {
		nodes = append(nodes, n.Rank)
	}
	if len(nodes) != 3 || nodes[0] != 1 || nodes[1] != 2 || nodes[2] != 3 {
		t.Errorf("failing nodes %v", nodes)
	}
	lat := Metric{Name: "latency_typical", Unit: "usec"}
	r = NewReport("send_lat", nil, "flags", lat, Thresholds{MaxLat: 99}, AllPairs, results())
	if len(r.Failing) != 2 || !strings.Contains(r.Failing[0].Err, "100.00 usec above --max_lat 99.00") {
		t.Errorf("--max_lat: %+v", r.Failing)
	}
}

func TestReportFormats(t *testing.T) {
	r := NewReport("write_bw", []string{"-s", "4096"}, "slurm", bw, Thresholds{MinBW: 60}, AllPairs, results())
	var b bytes.Buffer
	if err := r.WriteJSON(&b); err != nil {
		t.Fatal(err)
	}
	var back Report
	if err := json.Unmarshal(b.Bytes(), &back); err != nil {
		t.Fatalf("JSON: %v\n%s", err, b.String())
	}
	if back.Schema != Schema || back.Size != 4 || len(back.Links) != 6 || *back.Matrix[0][1] != 100 || back.Matrix[1][0] != nil || back.Matrix[1][2] != nil {
		t.Errorf("JSON back: %+v", back)
	}
	b.Reset()
	if err := r.WriteCSV(&b); err != nil {
		t.Fatal(err)
	}
	rows, err := csv.NewReader(&b).ReadAll()
	if err != nil || len(rows) != 7 || rows[0][5] != "bw_average_MiB/s" || rows[6][6] != "failed" || rows[6][5] != "" {
		t.Errorf("CSV %v: %q", err, rows)
	}
	b.Reset()
	if err := r.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"median link: 50.00 MiB/s", "FAILING link 1 (b) -> 2 (c): client (rank 2): gone", "FAILING node 3 (d): 3 of its 3 links", "4 of 6 links failing"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("text lacks %q:\n%s", want, b.String())
		}
	}
	b.Reset()
	if err := r.WriteHTML(&b); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(b.String(), "%!") {
		t.Errorf("HTML has a formatting error:\n%s", b.String())
	}
	for _, want := range []string{`id="matrix"`, `title="0 -&gt; 1: 100.00 MiB/s"`, "outline:3px solid", "Failing links (4)", "median link 50.00 MiB/s"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("HTML lacks %q", want)
		}
	}
}

// TestReportFailedLinks: a failed link has no value: null in the JSON's
// links as in its matrix, "failed" in the text matrix (where "-" is a
// direction not measured), and no thresholds object when none is set.
func TestReportFailedLinks(t *testing.T) {
	r := NewReport("write_bw", nil, "flags", bw, Thresholds{}, AllPairs, results())
	var b bytes.Buffer
	if err := r.WriteJSON(&b); err != nil {
		t.Fatal(err)
	}
	var raw struct {
		Links []map[string]any `json:"links"`
	}
	if err := json.Unmarshal(b.Bytes(), &raw); err != nil {
		t.Fatal(err)
	}
	for _, l := range raw.Links {
		v, ok := l["value"]
		switch {
		case !ok:
			t.Errorf("link %v has no value key", l)
		case l["status"] == "failed" && v != nil:
			t.Errorf("failed link %v has value %v, want null", l, v)
		case l["status"] != "failed" && v == nil:
			t.Errorf("link %v that ran has a null value", l)
		}
	}
	if strings.Contains(b.String(), `"thresholds"`) {
		t.Errorf("thresholds written though none was set:\n%s", b.String())
	}
	b.Reset()
	if err := r.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	// Row 1 (server 1): - to 0 (not measured), itself, failed to 2, - to 3.
	found := false
	for l := range strings.SplitSeq(b.String(), "\n") {
		if strings.Join(strings.Fields(l), " ") == "1 - - failed -" {
			found = true
		}
	}
	if !found {
		t.Errorf("text matrix does not mark 1 -> 2 failed:\n%s", b.String())
	}
}

// TestReportThresholdPrecision: a link just beyond a threshold is not
// said to be at it: the figures get the decimals that tell them apart;
// a threshold is shown as given, not rounded to 0.00.
func TestReportThresholdPrecision(t *testing.T) {
	lat := Metric{Name: "latency_typical", Unit: "usec"}
	for _, c := range []struct {
		v, limit float64
		want     string
	}{
		{0.2205, 0.22, "0.221 usec above --max_lat 0.22"},
		{0.25, 0.001, "0.25 usec above --max_lat 0.001"},
		{3.5, 2, "3.50 usec above --max_lat 2.00"},
	} {
		res := &Results{Members: []Member{{Rank: 0, Host: "a"}, {Rank: 1, Host: "b"}}, Rounds: 1,
			Pairs: []PairResult{{Round: 1, Server: 0, Client: 1, Value: c.v}}}
		r := NewReport("send_lat", nil, "flags", lat, Thresholds{MaxLat: c.limit}, AllPairs, res)
		if len(r.Failing) != 1 || r.Failing[0].Err != c.want {
			t.Errorf("%v over %v: failing %+v, want %q", c.v, c.limit, r.Failing, c.want)
		}
	}
}

// TestReportDataPaths: the links' data paths are counted by kind in the
// JSON, the text and the HTML, and each link's is in its CSV line and its
// HTML cell's title; a report whose devices say nothing has none.
func TestReportDataPaths(t *testing.T) {
	res := results()
	for i := range res.Pairs {
		res.Pairs[i].Path = "memory copy (emulated device)"
	}
	res.Pairs[0].Path = "RoCE v2, 10.0.0.2 -> 10.0.0.1 (emulated device)"
	r := NewReport("write_bw", nil, "flags", bw, Thresholds{}, AllPairs, res)
	if len(r.Paths) != 2 || r.Paths[0] != (PathCount{"RoCE v2", 1}) || r.Paths[1] != (PathCount{"memory copy", 5}) {
		t.Errorf("paths %+v", r.Paths)
	}
	var b bytes.Buffer
	_ = r.WriteText(&b)
	if !strings.Contains(b.String(), " data path: RoCE v2 (1 link), memory copy (5 links)\n") {
		t.Errorf("text:\n%s", b.String())
	}
	b.Reset()
	_ = r.WriteCSV(&b)
	rows, err := csv.NewReader(&b).ReadAll()
	if err != nil || rows[0][8] != "data_path" || rows[1][8] != res.Pairs[0].Path || rows[6][8] != "memory copy (emulated device)" {
		t.Errorf("CSV %v: %q", err, rows)
	}
	b.Reset()
	_ = r.WriteHTML(&b)
	for _, want := range []string{"Data path: RoCE v2 (1 link), memory copy (5 links).", `title="0 -&gt; 1: 100.00 MiB/s (RoCE v2, 10.0.0.2 -&gt; 10.0.0.1 (emulated device))"`} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("HTML lacks %q", want)
		}
	}
	// A link that ran but missed a threshold keeps its path in its
	// tooltip (2 -> 3: 40 MiB/s, below 60).
	b.Reset()
	_ = NewReport("write_bw", nil, "flags", bw, Thresholds{MinBW: 60}, AllPairs, res).WriteHTML(&b)
	if !strings.Contains(b.String(), `title="2 -&gt; 3: 40.00 MiB/s below --min_bw 60.00 (memory copy (emulated device))"`) {
		t.Errorf("the failing link's tooltip has no data path")
	}
	b.Reset()
	_ = NewReport("write_bw", nil, "flags", bw, Thresholds{}, AllPairs, results()).WriteText(&b)
	if strings.Contains(b.String(), "data path") {
		t.Errorf("a report without paths has a data path line:\n%s", b.String())
	}
}

func TestPathKind(t *testing.T) {
	for in, want := range map[string]string{
		"memory copy (emulated device)":                                                              "memory copy",
		"RoCE v2, 10.0.0.2 -> 10.0.0.1 (emulated device)":                                            "RoCE v2",
		"TCP, 10.79.0.2 -> 10.79.0.1 (emulated device)":                                              "TCP",
		"RoCE v1 (Ethertype 0x8915), 10.0.0.2 -> 10.0.0.1 (emulated device)":                         "RoCE v1",
		"memory copy on this host, else RoCE v2 from 10.80.0.2 (TCP to 10.80.0.1) (emulated device)": "memory copy or RoCE v2",
		"RoCE v2 from 10.80.0.2 (emulated device)":                                                   "RoCE v2",
	} {
		if got := PathKind(in); got != want {
			t.Errorf("PathKind(%q) = %q, want %q", in, got, want)
		}
	}
}
