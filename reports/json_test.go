package reports

import (
	"encoding/csv"
	"encoding/json"
	"flag"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/pvperf/pvperf/perftest"
)

var update = flag.Bool("update", false, "rewrite the testdata/*.golden files")

// golden compares got with testdata/name.golden, or rewrites the file with
// -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./reports -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("%s differs (run go test ./reports -update after checking):\n%s", path, lineDiff(string(want), got))
	}
}

// jsonRXE is a 6.29 client on the captures' device.
func jsonRXE(verb perftest.Verb, kind perftest.TestKind) TestInfo {
	ti := rxeInfo(Perftest629, verb, kind, false)
	return ti
}

func mustLatency(t *testing.T, in LatencyInput) LatencyResult {
	t.Helper()
	r, err := ComputeLatency(in)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func jsonCases(t *testing.T) map[string]struct {
	ti TestInfo
	r  Record
} {
	cases := map[string]struct {
		ti TestInfo
		r  Record
	}{}

	// ib_write_bw -a --report_gbits: every size kept, the small ones with 6
	// decimals.
	{
		ti := jsonRXE(perftest.Write, perftest.Bandwidth)
		ti.Gbits = true
		var r Record
		r.AddBW(SideLocal, bw(2, 10, 0.000298, 0.000112, 0.006974))
		r.AddBW(SideLocal, bw(1024, 10, 0.168366, 0.095275, 0.011630))
		r.AddBW(SideLocal, bw(2048, 10, 0.35, 0.23, 0.013960))
		cases["json_write_bw_a_gbits"] = struct {
			ti TestInfo
			r  Record
		}{ti, r}
	}
	// ib_send_bw -b --report-both on the server, with --cpu_util: the summed
	// rows and both sides' own.
	{
		ti := rxeInfo(Perftest629, perftest.Send, perftest.Bandwidth, true)
		ti.Duplex = true
		ti.CPUUtil = true
		var r Record
		local := BWResult{Size: 65536, Iters: 1000, Peak: 1000.5, Average: 900.25, MsgRate: 0.0144, CPUUtil: 12.5}
		remote := BWResult{Size: 65536, Iters: 1000, Peak: 1001.5, Average: 901.25, MsgRate: 0.0145, CPUUtil: 13.5}
		r.AddBidirectionalBW(local, remote)
		cases["json_send_bw_bidirectional"] = struct {
			ti TestInfo
			r  Record
		}{ti, r}
	}
	// ib_read_lat -a (two sizes) from computed statistics.
	{
		ti := jsonRXE(perftest.Read, perftest.Latency)
		ti.TxDepth = 1
		var r Record
		r.AddLatency(mustLatency(t, LatencyInput{Size: 2, Iters: 10, Samples: []int64{3000, 2500, 9000, 2600, 2700, 50000, 2800, 3100, 2650}, RTTFactor: 1}))
		r.AddLatency(mustLatency(t, LatencyInput{Size: 4, Iters: 9, Samples: []int64{100, 107, 98, 250, 103, 99, 1000, 101}, RTTFactor: 1, Clock: Clock{MHz: 2.5}}))
		cases["json_read_lat"] = struct {
			ti TestInfo
			r  Record
		}{ti, r}
	}
	// ib_write_lat -D: duration-mode rows.
	{
		ti := jsonRXE(perftest.Write, perftest.Latency)
		ti.Duration = true
		var r Record
		r.AddLatencyDuration(ComputeLatencyDuration(LatencyDurationInput{Size: 2, Iters: 200000, Start: 1, End: 1 + 4e9, RTTFactor: 2}))
		cases["json_write_lat_duration"] = struct {
			ti TestInfo
			r  Record
		}{ti, r}
	}
	// --output=bandwidth: perftest's single key, without its trailing comma.
	{
		ti := jsonRXE(perftest.Write, perftest.Bandwidth)
		ti.Output = perftest.OutputBandwidth
		var r Record
		r.AddBW(SideLocal, bw(65536, 20, 33.45, 28.66, 0.000459))
		r.AddBW(SideLocal, bw(8388608, 20, 33.45, math.Inf(1), 0.000459)) // not finite: null
		cases["json_output_bandwidth"] = struct {
			ti TestInfo
			r  Record
		}{ti, r}
	}
	// Every optional test_info key.
	{
		ti := NewTestInfo(perftest.Send, perftest.Bandwidth)
		ti.Server = true
		ti.Duplex = true
		ti.Events = true
		ti.CompVector = 2
		ti.Multicast = true
		ti.Device = "dev\"0"
		ti.RelaxedOrderingWarning = true
		ti.PostList = 8
		ti.RecvPostList = 4
		ti.TxDepth = 128
		ti.RxDepth = 512
		ti.CQMod = 8
		ti.MACForwarding = true
		ti.BufferSize = 2048
		ti.GIDIndex = 0
		ti.DualPort = true
		ti.GIDIndex2 = 1
		ti.RdmaCMQPs = true
		ti.RdmaCMExchange = true
		ti.TOS = 32
		ti.ROCmMemory = On
		ti.Output = perftest.OutputMessageRate
		var r Record
		r.AddBidirectionalBW(BWResult{MsgRate: 1.25}, BWResult{MsgRate: 2})
		cases["json_all_test_info"] = struct {
			ti TestInfo
			r  Record
		}{ti, r}
	}
	return cases
}

func TestJSONGolden(t *testing.T) {
	for name, c := range jsonCases(t) {
		t.Run(name, func(t *testing.T) {
			got, err := JSON(&c.ti, &c.r, nil)
			if err != nil {
				t.Fatal(err)
			}
			if !json.Valid([]byte(got)) {
				t.Fatalf("invalid JSON:\n%s", got)
			}
			golden(t, name, got)
		})
	}
}

// TestJSONKeepsPerftestKeysAndOrder: the perftest part of the file is
// what perftest's file holds at the end: test_info, then "results", one
// object, of the last row printed (an -a sweep's last size), with
// perftest's keys in perftest's order.
func TestJSONKeepsPerftestKeysAndOrder(t *testing.T) {
	ti := jsonRXE(perftest.Write, perftest.Bandwidth)
	var r Record
	for _, size := range []uint64{2, 4, 8} {
		r.AddBW(SideLocal, bw(size, 10, 1, 0.5+float64(size), 0.25))
	}
	out, _ := JSON(&ti, &r, nil)
	var doc struct {
		TestInfo map[string]any `json:"test_info"`
		Results  map[string]any `json:"results"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatal(err)
	}
	if doc.Results["MsgSize"] != 8.0 || doc.Results["BW_average"] != 8.5 {
		t.Errorf("results: %v", doc.Results)
	}
	// perftest's key order (§3.9) for this test.
	order := []string{"test", "Dual_port", "Device", "Number_of_qps", "Transport_type", "Connection_type",
		"Using_SRQ", "PCIe_relax_order", "ibv_wr_API", "TX_depth", "CQ_Moderation", "Mtu", "Link_type",
		"GID_index", "Max_inline_data", "rdma_cm_QPs", "Use_ROCm_memory", "Use_MUSA_memory", "Data_ex_method",
		"MsgSize", "n_iterations", "BW_peak", "BW_average", "MsgRate"}
	pos := 0
	for _, k := range order {
		i := strings.Index(out[pos:], "\""+k+"\": ")
		if i < 0 {
			t.Fatalf("key %q missing or out of order in\n%s", k, out)
		}
		pos += i
	}
	if doc.TestInfo["test"] != "RDMA_Write_BW_Test" || doc.TestInfo["Mtu"] != 1024.0 || doc.TestInfo["GID_index"] != 1.0 {
		t.Errorf("test_info: %v", doc.TestInfo)
	}
	// perftest's precision: "BW_peak": %.2f, "MsgRate": %.6f.
	if !strings.Contains(out, "\"BW_peak\": 1.00,\n\"BW_average\": 8.50,\n\"MsgRate\": 0.250000\n") {
		t.Errorf("precision:\n%s", out)
	}
}

func TestJSONEmpty(t *testing.T) {
	ti := NewTestInfo(perftest.Read, perftest.Latency)
	got, _ := JSON(&ti, &Record{}, nil)
	if !json.Valid([]byte(got)) || !strings.Contains(got, "\"results\": {\n}\n}") {
		t.Errorf("empty report:\n%s", got)
	}
}

// TestUnmeasuredPeak: a BW peak perftest did not measure (its 0.00 with
// -N, -D, or on a server of SEND) is null in pvperf's JSON and an empty
// cell in CSV, so that no chart or summary takes it for a measured 0; a
// measured one is kept.
func TestUnmeasuredPeak(t *testing.T) {
	for _, c := range []struct {
		peak       float64
		gbits      bool
		wantJSON   string
		wantMiBCSV string
	}{
		{0, false, `"peak_MiB_per_s":null,"average_MiB_per_s":100,"peak_Gb_per_s":null`, ""},
		{0, true, `"peak_MiB_per_s":null,`, ""},
		{120, false, `"peak_MiB_per_s":120,"average_MiB_per_s":100,`, "120"},
	} {
		res := BWResult{Size: 65536, Iters: 1000, Peak: c.peak, Average: 100, MsgRate: 0.0016}
		row := bwRow(SideLocal, res, c.gbits)
		b, err := json.Marshal(row.BW)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(b), c.wantJSON) {
			t.Errorf("peak %v (gbits %v): JSON %s, want it to hold %s", c.peak, c.gbits, b, c.wantJSON)
		}
		run := Run{Info: fixtureInfo("write_bw", KindBW, "RDMA_Write", 2), Results: []Result{row}}
		var out strings.Builder
		if err := WriteCSV(&out, []Run{run}); err != nil {
			t.Fatal(err)
		}
		recs, err := csv.NewReader(strings.NewReader(out.String())).ReadAll()
		if err != nil || len(recs) != 2 {
			t.Fatalf("CSV %q: %v", out.String(), err)
		}
		col := slices.Index(recs[0], "bw_peak_MiB_per_s")
		if col < 0 {
			t.Fatalf("no bw_peak_MiB_per_s column in %q", recs[0])
		}
		if got := recs[1][col]; got != c.wantMiBCSV {
			t.Errorf("peak %v: CSV bw_peak_MiB_per_s %q, want %q", c.peak, got, c.wantMiBCSV)
		}
	}
}

// TestJSONBidirectional: perftest's file holds a bidirectional run's
// summed row, or with --report-both (the local, then the remote row
// printed after it) the remote row, with this side's CPU_util, as
// perftest prints every row.
func TestJSONBidirectional(t *testing.T) {
	ti := jsonRXE(perftest.Write, perftest.Bandwidth)
	ti.Duplex, ti.CPUUtil = true, true
	results := func(r *Record) map[string]any {
		out, _ := JSON(&ti, r, nil)
		var doc struct {
			Results map[string]any `json:"results"`
		}
		if err := json.Unmarshal([]byte(out), &doc); err != nil {
			t.Fatal(err)
		}
		return doc.Results
	}
	local, remote := bw(65536, 10, 0, 100, 0.25), bw(65536, 10, 0, 40, 0.25)
	local.CPUUtil = 12.5
	var r Record
	r.AddBidirectionalBW(local, remote)
	if got := results(&r); got["BW_average"] != 140.0 || got["CPU_util"] != 12.5 {
		t.Errorf("-b: %v, want the sum 140 and CPU_util 12.5", got)
	}
	r.PrintedBoth()
	if got := results(&r); got["BW_average"] != 40.0 || got["CPU_util"] != 12.5 {
		t.Errorf("-b --report-both: %v, want the remote 40 and this side's CPU_util 12.5", got)
	}
	var b strings.Builder
	_ = WriteBWReportBoth(&b, &ti, local, remote)
	if !strings.Contains(b.String(), " Remote results: ") || strings.Count(b.String(), "12.50") != 2 {
		t.Errorf("--report-both block: both rows must have this side's CPU_Util:\n%s", b.String())
	}
}
