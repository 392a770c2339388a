package reports

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"errors"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pvperf/pvperf/perftest"
)

// The machine-readable formats: the "pvperf" object of the JSON file, CSV
// and benchfmt, from the fixture runs.

func fixtureRuns() map[string]Run {
	return map[string]Run{
		"write_bw":  fixtureBW(2, 1100, 2),
		"send_lat":  fixtureLat(3),
		"send_bw_b": fixtureBidi(),
		"write_lat": fixtureDuration(),
	}
}

func TestRunJSONGolden(t *testing.T) {
	// A whole --out_json file: perftest's keys, then the model.
	ti := jsonRXE(perftest.Write, perftest.Bandwidth)
	var r Record
	run := Run{Info: fixtureInfo("write_bw", KindBW, "RDMA_Write", 2)}
	for _, size := range []uint64{2, 65536} {
		res := bw(size, 1000, 1100, 1000, 0.25)
		r.AddBW(SideLocal, res)
		run.Results = append(run.Results, bwRow(SideLocal, res, false))
	}
	got, err := JSON(&ti, &r, &run)
	if err != nil {
		t.Fatal(err)
	}
	if !json.Valid([]byte(got)) {
		t.Fatalf("invalid JSON:\n%s", got)
	}
	golden(t, "json_run_write_bw", got)
	back, err := ParseRun([]byte(got), "x.json")
	if err != nil {
		t.Fatal(err)
	}
	if back.Source != "x.json" || len(back.Results) != 2 || back.Results[1].Size != 65536 ||
		back.Results[1].BW.AverageMiBps != 1000 {
		t.Errorf("read back: %+v", back)
	}
	// 1000 MiB/s = 8.388608 Gb/s.
	if g := float64(back.Results[1].BW.AverageGbps); g < 8.3886079 || g > 8.3886081 {
		t.Errorf("Gb/s: %v", g)
	}
}

// TestRunRoundTrip writes every fixture with MarshalRun, reads it back and
// writes it again: the same bytes, NaN (not measured) kept as null.
func TestRunRoundTrip(t *testing.T) {
	for name, run := range fixtureRuns() {
		t.Run(name, func(t *testing.T) {
			a, err := MarshalRun(&run)
			if err != nil {
				t.Fatal(err)
			}
			back, err := ParseRun(a, name)
			if err != nil {
				t.Fatal(err)
			}
			b, err := MarshalRun(&back)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(a, b) {
				t.Errorf("second write differs:\n%s", lineDiff(string(a), string(b)))
			}
			if !back.Info.Time.Equal(run.Info.Time) || len(back.Results) != len(run.Results) {
				t.Errorf("read back %+v", back.Info)
			}
		})
	}
	d := fixtureDuration()
	b, _ := MarshalRun(&d)
	if !strings.Contains(string(b), `"p99_us": null`) || !strings.Contains(string(b), `"cpu_util_percent": null`) {
		t.Errorf("unmeasured values are not null:\n%s", b)
	}
}

// TestJSONToCSV goes from a JSON file to CSV as the report command does and
// checks the CSV against the numbers in the JSON.
func TestJSONToCSV(t *testing.T) {
	run := fixtureBW(2, 1100, 2)
	data, err := MarshalRun(&run)
	if err != nil {
		t.Fatal(err)
	}
	back, err := ParseRun(data, "w.json")
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := WriteCSV(&buf, []Run{back}); err != nil {
		t.Fatal(err)
	}
	rows, err := csv.NewReader(&buf).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1+len(fixtureSizes()) {
		t.Fatalf("%d rows, want a header and one per size (%d)", len(rows), len(fixtureSizes()))
	}
	col := func(name string) int {
		i := slices.Index(rows[0], name)
		if i < 0 {
			t.Fatalf("no column %q in %q", name, rows[0])
		}
		return i
	}
	size, avg, lat := col("msg_size_bytes"), col("bw_average_MiB_per_s"), col("lat_p99_us")
	for i, row := range rows[1:] {
		res := run.Results[i]
		if row[size] != csvNum(Num(res.Size)) || row[avg] != csvNum(res.BW.AverageMiBps) || row[lat] != "" {
			t.Errorf("row %d: size %s avg %s p99 %q; want %d %v \"\"", i, row[size], row[avg], row[lat], res.Size, res.BW.AverageMiBps)
		}
		if len(row) != len(CSVColumns) {
			t.Errorf("row %d has %d fields", i, len(row))
		}
	}
}

func TestCSVGolden(t *testing.T) {
	var buf bytes.Buffer
	runs := []Run{fixtureBidi(), fixtureDuration(), fixtureLat(3)}
	runs[2].Results = runs[2].Results[:3]
	if err := WriteCSV(&buf, runs); err != nil {
		t.Fatal(err)
	}
	golden(t, "csv_mixed", buf.String())
	for _, name := range CSVColumns {
		if strings.ContainsAny(name, " ,\"") {
			t.Errorf("column %q needs quoting", name)
		}
	}
}

func TestBenchfmtGolden(t *testing.T) {
	var buf bytes.Buffer
	runs := []Run{fixtureBW(2, 1100, 2), fixtureLat(3), fixtureBidi()}
	runs[0].Results = runs[0].Results[:4]
	runs[1].Results = runs[1].Results[:2]
	if err := WriteBenchfmt(&buf, runs); err != nil {
		t.Fatal(err)
	}
	golden(t, "benchfmt_mixed", buf.String())
	for _, line := range strings.Split(buf.String(), "\n") {
		if !strings.HasPrefix(line, "Benchmark") {
			continue
		}
		f := strings.Fields(line)
		// name, iterations, then value-unit pairs.
		if len(f) < 4 || len(f)%2 != 0 {
			t.Errorf("malformed benchmark line %q", line)
		}
	}
}

func TestBenchName(t *testing.T) {
	for in, want := range map[string]string{"write_bw": "WriteBW", "send_lat": "SendLat", "atomic_bw": "AtomicBW",
		"read_lat": "ReadLat", "x y": "X_y"} {
		if got := BenchName(in); got != want {
			t.Errorf("BenchName(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestParseRunErrors(t *testing.T) {
	good, err := MarshalRun(&Run{Info: fixtureInfo("write_bw", KindBW, "RDMA_Write", 2)})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, in string
		want     error
		text     string
	}{
		{"empty", "", ErrEmpty, "f.json: empty input"},
		{"blank", " \n\t", ErrEmpty, "empty input"},
		{"truncated", string(good[:len(good)/2]), ErrMalformed, "f.json: malformed JSON: "},
		{"not json", "BW average 12\n", ErrMalformed, "line 1, column 1"},
		{"second line", "{\n\"a\": x}", ErrMalformed, "line 2, column 6"},
		{"array", "[1,2]", ErrMalformed, "malformed"},
		{"perftest", `{"test_info": {"test": "RDMA_Write_BW_Test"}, "results": {"MsgSize": 2}}`, ErrNoRun, "written by perftest"},
		{"other", `{"a": 1}`, ErrNoRun, "no \"pvperf\" object"},
		{"no version", `{"pvperf": {"info": {}}}`, ErrSchema, "no schema_version"},
		{"version 4", `{"pvperf": {"schema_version": 4}}`, ErrSchema, "schema_version 4, this pvperf reads 1 to 3"},
		{"version 0", `{"pvperf": {"schema_version": 0}}`, ErrSchema, "schema_version 0, this pvperf reads 1 to 3"},
		{"wrong type", `{"pvperf": {"schema_version": 1, "info": {"test": "w", "kind": "bw"}, "results": [{"side": "local", "msg_size_bytes": "big", "bw": {}}]}}`,
			ErrMalformed, "results.msg_size_bytes: JSON string where uint64 is expected"},
		{"bad kind", `{"pvperf": {"schema_version": 1, "info": {"test": "w", "kind": "fast"}}}`, ErrSchema, `info.kind "fast"`},
		{"no test", `{"pvperf": {"schema_version": 1, "info": {"kind": "bw"}}}`, ErrSchema, "info.test is empty"},
		{"bad side", `{"pvperf": {"schema_version": 1, "info": {"test": "w", "kind": "bw"}, "results": [{"side": "left", "bw": {}}]}}`,
			ErrSchema, `results[0].side "left"`},
		{"bw in latency", `{"pvperf": {"schema_version": 1, "info": {"test": "w", "kind": "latency"}, "results": [{"side": "local", "bw": {}}]}}`,
			ErrSchema, `results[0] of a latency run must have "latency"`},
		{"cluster report", `{"schema": "pvperf-cluster/1", "links": []}`, ErrNoRun, "a cluster report (pvperf-cluster/1)"},
		{"bad bucket", `{"pvperf": {"schema_version": 1, "info": {"test": "send_lat", "kind": "latency"}, "results": [{"side": "local", "latency": {}, "latency_distribution": {"buckets": [{"x": 1}]}}]}}`,
			ErrSchema, "results[0].latency_distribution.buckets[0] is not a non-empty bucket"},
		{"buckets out of order", `{"pvperf": {"schema_version": 1, "info": {"test": "send_lat", "kind": "latency"}, "results": [{"side": "local", "latency": {}, "latency_distribution": {"buckets": [{"low_us": 2, "high_us": 3, "count": 1}, {"low_us": 1, "high_us": 2, "count": 1}]}}]}}`,
			ErrSchema, "buckets[1] is not a non-empty bucket"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParseRun([]byte(c.in), "f.json")
			if !errors.Is(err, c.want) || !strings.Contains(err.Error(), c.text) {
				t.Errorf("error %v; want %v containing %q", err, c.want, c.text)
			}
		})
	}
}

// FuzzParseRun: any input gives a run or an error of the four kinds, never
// a panic; what parses writes and reads back to the same bytes.
func FuzzParseRun(f *testing.F) {
	for _, run := range fixtureRuns() {
		b, err := MarshalRun(&run)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(`{"pvperf": {"schema_version": 1}}`))
	f.Add([]byte(`{"test_info": {}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		run, err := ParseRun(data, "fuzz")
		if err != nil {
			if !errors.Is(err, ErrEmpty) && !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrNoRun) && !errors.Is(err, ErrSchema) {
				t.Fatalf("error of no known kind: %v", err)
			}
			return
		}
		a, err := MarshalRun(&run)
		if err != nil {
			t.Fatal(err)
		}
		back, err := ParseRun(a, "fuzz")
		if err != nil {
			t.Fatalf("written run does not read back: %v\n%s", err, a)
		}
		b, err := MarshalRun(&back)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(a, b) {
			t.Fatalf("not stable:\n%s\n%s", a, b)
		}
		var buf bytes.Buffer
		if err := WriteCSV(&buf, []Run{run}); err != nil {
			t.Fatal(err)
		}
		if err := WriteBenchfmt(&buf, []Run{run}); err != nil {
			t.Fatal(err)
		}
	})
}

func TestMerge(t *testing.T) {
	full := fixtureBW(2, 1100, 2)
	var parts []Run
	for i, res := range full.Results {
		p := Run{Info: full.Info, Results: []Result{res}, Source: "s" + strconv.Itoa(i)}
		p.Info.Time = p.Info.Time.Add(time.Duration(i) * time.Minute)
		parts = append(parts, p)
	}
	// Out of order, with a run of another setup in the middle and a second
	// run of the first size.
	other := fixtureBW(1, 1000, 3)
	again := parts[0]
	again.Source = "again"
	in := slices.Concat([]Run{parts[3], other}, parts[:3], parts[4:], []Run{again})
	got := Merge(in)
	if len(got) != 3 {
		t.Fatalf("%d runs, want 3 (the sweep, the other setup, the repeated size)", len(got))
	}
	if len(got[0].Results) != len(full.Results) || got[1].Info.RoCEVersion != 1 || got[2].Source != "again" {
		t.Fatalf("merged: %d rows, second RoCE v%d, third %q", len(got[0].Results), got[1].Info.RoCEVersion, got[2].Source)
	}
	for i, res := range got[0].Results {
		if res.Size != full.Results[i].Size {
			t.Errorf("row %d: size %d, want %d", i, res.Size, full.Results[i].Size)
		}
	}
	if got[0].Source != "s3 and 22 more" || !got[0].Info.Time.Equal(parts[3].Info.Time) {
		t.Errorf("source %q, time %v", got[0].Source, got[0].Info.Time)
	}
	if len(parts[3].Results) != 1 {
		t.Errorf("Merge changed its input: %d rows", len(parts[3].Results))
	}
	// A part that stopped early keeps saying so in the merged run.
	parts[5].Incomplete, parts[9].Incomplete = "interrupted by SIGINT", "peer lost"
	if m := Merge(parts); len(m) != 1 || m[0].Incomplete != "interrupted by SIGINT; peer lost" {
		t.Errorf("merged incomplete parts: %d runs, %q", len(m), m[0].Incomplete)
	}
}

// TestIncompleteRun: a run that stopped before its end says why in its
// file ("incomplete"), which report reads back and the HTML page shows;
// a complete run's file has no such field.
func TestIncompleteRun(t *testing.T) {
	run := fixtureBW(2, 1000, 0)
	if b, _ := MarshalRun(&run); strings.Contains(string(b), "incomplete") {
		t.Errorf("a complete run's file mentions incomplete:\n%s", b)
	}
	run.Incomplete = "interrupted by SIGINT"
	b, err := MarshalRun(&run)
	if err != nil || !strings.Contains(string(b), `"incomplete": "interrupted by SIGINT"`) {
		t.Fatalf("%v:\n%s", err, b)
	}
	back, err := ParseRun(b, "r.json")
	if err != nil || back.Incomplete != run.Incomplete {
		t.Fatalf("read back %q (%v)", back.Incomplete, err)
	}
	var h bytes.Buffer
	if err := WriteHTML(&h, []Run{back}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(h.String(), `<p class="incomplete">Incomplete: the run stopped before its end (interrupted by SIGINT)`) {
		t.Errorf("HTML does not say the run is incomplete")
	}
}

// TestBenchfmtRepeats: a repeated series gives benchstat one line per run,
// from the summary's values, not the first run's row alone.
func TestBenchfmtRepeats(t *testing.T) {
	bwRuns := []Run{fixtureBW(2, 1100, 2), fixtureBW(2, 900, 2), fixtureBW(2, 1000, 2)}
	latRuns := []Run{fixtureLat(3), fixtureLat(3), fixtureLat(3)}
	for i := range latRuns {
		latRuns[i].Results[0].Latency.MeanUs += Num(i)
	}
	for _, runs := range [][]Run{bwRuns, latRuns} {
		for i := range runs {
			runs[i].Results = runs[i].Results[:1]
		}
		rep, err := SummarizeRepeats(runs, 0.95, 200, 0)
		if err != nil {
			t.Fatal(err)
		}
		first := runs[0]
		first.Repeats = rep
		var one, series bytes.Buffer
		if err := WriteBenchfmt(&series, []Run{first}); err != nil {
			t.Fatal(err)
		}
		// The same lines as the three runs written as three runs.
		if err := WriteBenchfmt(&one, runs); err != nil {
			t.Fatal(err)
		}
		lines := func(s string) []string {
			var b []string
			for l := range strings.SplitSeq(s, "\n") {
				if strings.HasPrefix(l, "Benchmark") {
					b = append(b, l)
				}
			}
			return b
		}
		got, want := lines(series.String()), lines(one.String())
		// A series has no p50 (its summary keeps t_typical, not the
		// histogram's percentile): the runs' lines without theirs.
		p50 := regexp.MustCompile(`\t[0-9.e+]+ p50-ns/op`)
		for i := range want {
			want[i] = p50.ReplaceAllString(want[i], "")
		}
		if len(got) != 3 || strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("series:\n%s\nwant the runs':\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	}
	// Two series of other sizes, merged as report merges files: every
	// run of each.
	a, b := []Run{fixtureBW(2, 1100, 2), fixtureBW(2, 900, 2), fixtureBW(2, 1000, 2)}, []Run{fixtureBW(2, 1100, 2), fixtureBW(2, 900, 2), fixtureBW(2, 1000, 2)}
	for i := range a {
		a[i].Results, b[i].Results = a[i].Results[:1], b[i].Results[1:2]
	}
	var merged []Run
	for _, series := range [][]Run{a, b} {
		rep, err := SummarizeRepeats(series, 0.95, 200, 0)
		if err != nil {
			t.Fatal(err)
		}
		first := series[0]
		first.Repeats = rep
		merged = append(merged, first)
	}
	merged = Merge(merged)
	var buf bytes.Buffer
	if err := WriteBenchfmt(&buf, merged); err != nil {
		t.Fatal(err)
	}
	if len(merged) != 1 || strings.Count(buf.String(), "/size=") != 6 {
		t.Errorf("%d runs after merging; benchfmt:\n%s\nwant 3 lines for each of 2 sizes", len(merged), buf.String())
	}
}
