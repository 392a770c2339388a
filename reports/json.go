package reports

import (
	"io"
	"math"
	"strconv"
	"strings"

	"github.com/pvperf/pvperf/perftest"
)

// JSON output
//
// perftest's --out_json writes {"test_info": {...}, "results": {...}}, with
// fixed key order and one key per line, and rewrites the file for every
// printed row: an -a run keeps only the last size, --report-both leaves the
// remote side's row, and --output writes a trailing comma (invalid JSON).
// pvperf writes the file as perftest's ends, so that scripts that read
// perftest's (.results.BW_average) read pvperf's, and adds the "pvperf"
// object, which has every row of every size and side:
//
//	{
//	"test_info": { perftest's keys, in perftest's order },
//	"results": { perftest's result keys, of the last row printed },
//	"pvperf": { see Run }
//	}
//
// "results" keeps perftest's keys, order and precision: MsgSize, n_iterations, BW_peak,
// BW_average (%.2f, %.6f for the 6-decimal Gb/s rows), MsgRate (%.6f),
// [CPU_util] for BW; MsgSize, n_iterations, t_min, t_max, t_typical, t_avg,
// t_stdev, percentile_99, percentile_99.9 (%.2f), [CPU_util] for latency;
// MsgSize, n_iterations, t_avg, tps_average for duration-mode latency.
// With --output an object holds perftest's single key (bw_avg, msgRate_avg,
// avg_lat, or t_avg for duration latency, %f) without the trailing comma.
// Latency objects add, after perftest's keys, "unit" ("usec" or "cycles")
// and percentile_50, percentile_90, percentile_95 and percentile_99.99
// (perftest's percentile rule, see LatencyResult.Percentile). Values that
// are not finite (a zero-length window) are written as null.

// jsonObject builds one object in perftest's layout: "{", one
// `"key": value` per line, "}".
type jsonObject struct {
	keys, values []string
}

func (o *jsonObject) add(key, value string) {
	o.keys = append(o.keys, key)
	o.values = append(o.values, value)
}

func (o *jsonObject) str(key, value string) { o.add(key, jsonString(value)) }
func (o *jsonObject) integer(key string, v int64) {
	o.add(key, strconv.FormatInt(v, 10))
}
func (o *jsonObject) unsigned(key string, v uint64) {
	o.add(key, strconv.FormatUint(v, 10))
}

// float adds v formatted with a C format (%.2f, %.6f, %lf), or null.
func (o *jsonObject) float(key, format string, v float64) {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		o.add(key, "null")
		return
	}
	o.add(key, cSprintf(format, v))
}

func (o *jsonObject) String() string {
	var b strings.Builder
	b.WriteString("{\n")
	for i, k := range o.keys {
		b.WriteString(jsonString(k))
		b.WriteString(": ")
		b.WriteString(o.values[i])
		if i < len(o.keys)-1 {
			b.WriteString(",")
		}
		b.WriteString("\n")
	}
	b.WriteString("}")
	return b.String()
}

func jsonString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"':
			b.WriteString(`\"`)
		case r == '\\':
			b.WriteString(`\\`)
		case r < 0x20:
			b.WriteString(`\u00`)
			b.WriteByte("0123456789abcdef"[r>>4])
			b.WriteByte("0123456789abcdef"[r&0xf])
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// testInfoJSON is perftest's write_test_info_to_file.
func testInfoJSON(ti *TestInfo) *jsonObject {
	o := &jsonObject{}
	o.str("test", ti.JSONTestName())
	if ti.Events {
		o.str("Test with events", "Using_"+ti.Device+"_comp"+strconv.Itoa(ti.CompVector))
	}
	if ti.Multicast {
		o.str("MultiCast_runs", "on_UD")
	}
	o.str("Dual_port", onOff(ti.DualPort))
	o.str("Device", ti.Device)
	o.integer("Number_of_qps", int64(ti.NumQPs))
	o.str("Transport_type", ti.Transport.String())
	o.str("Connection_type", ti.Connection.String())
	o.str("Using_SRQ", onOff(ti.SRQ))
	o.str("PCIe_relax_order", orDefault(ti.RelaxedOrdering, On))
	if ti.RelaxedOrderingWarning {
		o.str("WARNING1", "CPU is not PCIe relaxed ordering compliant")
		o.str("WARNING2", "You should disable PCIe RO with --disable_pcie_relaxed for both server and client")
	}
	o.str("ibv_wr_API", onOff(ti.WRAPI))
	if !ti.Server || ti.Duplex {
		o.integer("TX_depth", int64(ti.TxDepth))
	}
	if ti.PostList > 1 {
		o.integer("Post_List", int64(ti.PostList))
	}
	if ti.RecvPostList > 1 {
		o.integer("Recv_Post_List", int64(ti.RecvPostList))
	}
	if ti.Verb.HasReceives() && (ti.Server || ti.Duplex) {
		o.integer("RX_depth", int64(ti.RxDepth))
	}
	if ti.Test == perftest.Bandwidth {
		o.integer("CQ_Moderation", int64(ti.CQMod))
	}
	o.integer("Mtu", int64(ti.MTU))
	o.str("Link_type", ti.Link.String())
	if ti.MACForwarding {
		o.integer("Buffer_size", int64(ti.BufferSize))
	}
	if ti.GIDIndex != NotSet {
		o.integer("GID_index", int64(ti.GIDIndex))
	}
	if ti.DualPort && ti.GIDIndex2 != NotSet {
		o.integer("GID_index2", int64(ti.GIDIndex2))
	}
	if ti.Verb != perftest.Read && ti.Verb != perftest.Atomic {
		o.integer("Max_inline_data", int64(ti.InlineSize))
	} else {
		o.integer("Outstand_reads", int64(ti.OutReads))
	}
	o.str("rdma_cm_QPs", onOff(ti.RdmaCMQPs))
	o.str("Use_ROCm_memory", orDefault(ti.ROCmMemory, Off))
	o.str("Use_MUSA_memory", orDefault(ti.MUSAMemory, Off))
	o.str("Data_ex_method", exchangeMethod(ti))
	if ti.RdmaCMQPs && ti.TOS != NotSet {
		o.integer("TOS", int64(ti.TOS))
	}
	return o
}

func (ti *TestInfo) cpuJSON(o *jsonObject, cpu float32) {
	if ti.CPUUtil {
		o.float("CPU_util", "%.2f", float64(cpu))
	}
}

// bwJSON is perftest's write_bw_report_to_file for one row.
func bwJSON(ti *TestInfo, row BWRow) *jsonObject {
	o := &jsonObject{}
	r := row.BWResult
	switch ti.Output {
	case perftest.OutputBandwidth:
		o.float("bw_avg", "%lf", r.Average)
	case perftest.OutputMessageRate:
		o.float("msgRate_avg", "%lf", r.MsgRate)
	default:
		f := "%.2lf"
		if row.ExtendedAccuracy {
			f = "%.6lf"
		}
		o.unsigned("MsgSize", r.Size)
		o.unsigned("n_iterations", r.Iters)
		o.float("BW_peak", f, r.Peak)
		o.float("BW_average", f, r.Average)
		o.float("MsgRate", "%.6lf", r.MsgRate)
		ti.cpuJSON(o, r.CPUUtil)
	}
	return o
}

// latencyJSON is perftest's write_report_lat_to_file, with pvperf's extra
// keys after perftest's.
func latencyJSON(ti *TestInfo, r *LatencyResult) *jsonObject {
	o := &jsonObject{}
	if ti.Output == perftest.OutputLatency {
		o.float("avg_lat", "%lf", r.Avg)
		return o
	}
	o.unsigned("MsgSize", r.Size)
	o.unsigned("n_iterations", r.Iters)
	o.float("t_min", "%.2f", r.Min)
	o.float("t_max", "%.2f", r.Max)
	o.float("t_typical", "%.2f", r.Typical)
	o.float("t_avg", "%.2f", r.Avg)
	o.float("t_stdev", "%.2f", r.Stdev)
	o.float("percentile_99", "%.2f", r.P99)
	o.float("percentile_99.9", "%.2f", r.P999)
	ti.cpuJSON(o, r.CPUUtil)
	o.str("unit", orDefault(r.Unit, "usec"))
	o.float("percentile_50", "%.2f", r.Percentile(0.50))
	o.float("percentile_90", "%.2f", r.Percentile(0.90))
	o.float("percentile_95", "%.2f", r.Percentile(0.95))
	o.float("percentile_99.99", "%.2f", r.Percentile(0.9999))
	return o
}

// latencyDurationJSON is perftest's write_report_lat_duration_to_file.
func latencyDurationJSON(ti *TestInfo, r LatencyDurationResult) *jsonObject {
	o := &jsonObject{}
	if ti.Output == perftest.OutputLatency {
		o.float("t_avg", "%lf", r.Avg)
		return o
	}
	o.unsigned("MsgSize", r.Size)
	o.unsigned("n_iterations", r.Iters)
	o.float("t_avg", "%.2f", r.Avg)
	o.float("tps_average", "%.2f", r.TPS)
	ti.cpuJSON(o, r.CPUUtil)
	return o
}

// JSON returns the JSON document for a run (see the schema above): the
// perftest part is what perftest's file holds after the rows of rec were
// printed, and run, when not nil, is the "pvperf" object (see Run), which
// has every row.
func JSON(ti *TestInfo, rec *Record, run *Run) (string, error) {
	last := &jsonObject{}
	if n := len(rec.rows); n > 0 {
		row := &rec.rows[n-1]
		switch {
		case row.bw != nil && row.both:
			// perftest's --report-both prints the local row, then the
			// remote one, each rewriting the file.
			last = bwJSON(ti, NewBWRow(ti, remoteAsPrinted(*row.bw, *row.remote), nil))
		case row.bw != nil:
			last = bwJSON(ti, NewBWRow(ti, *row.bw, row.remote))
		case row.lat != nil:
			last = latencyJSON(ti, row.lat)
		default:
			last = latencyDurationJSON(ti, *row.dur)
		}
	}
	var b strings.Builder
	b.WriteString("{\n\"test_info\": ")
	b.WriteString(testInfoJSON(ti).String())
	b.WriteString(",\n\"results\": ")
	b.WriteString(last.String())
	if run != nil {
		s, err := runJSON(run)
		if err != nil {
			return "", err
		}
		b.WriteString(",\n\"pvperf\": ")
		b.WriteString(s)
	}
	b.WriteString("\n}\n")
	return b.String(), nil
}

// WriteJSON writes JSON(ti, rec, run) to w.
func WriteJSON(w io.Writer, ti *TestInfo, rec *Record, run *Run) error {
	s, err := JSON(ti, rec, run)
	if err != nil {
		return err
	}
	return writeString(w, s)
}
