package reports_test

import (
	"fmt"
	"os"

	"github.com/pvperf/pvperf/perftest"
	"github.com/pvperf/pvperf/reports"
)

// A client of ib_write_bw with 4 iterations: the engine hands over its
// post and completion timestamps (nanoseconds), the statistics follow
// perftest's formulas and the row is printed as perftest prints it.
func Example() {
	ti := reports.NewTestInfo(perftest.Write, perftest.Bandwidth)
	ti.Device = "emu0"
	ti.TxDepth = 4

	r, err := reports.ComputeBW(reports.BWInput{
		Size:      65536,
		Iters:     4,
		CQMod:     1,
		Posted:    []int64{1000, 1010, 1020, 1030},
		Completed: []int64{1100, 1130, 1150, 1400},
		Clock:     reports.Nanoseconds,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	_ = reports.WriteBWHeader(os.Stdout, &ti)
	_ = reports.WriteBWReport(os.Stdout, &ti, r, nil)
	_ = reports.WriteResultLine(os.Stdout, &ti)
	// Output:
	// ---------------------------------------------------------------------------------------
	//  #bytes     #iterations    BW peak[MiB/sec]    BW average[MiB/sec]   MsgRate[Mpps]
	//  65536      4                1250000.00            625000.00		     10.000000
	// ---------------------------------------------------------------------------------------
}

// Latency statistics from the post timestamps of a ping-pong (SEND: half
// round trips), and the JSON file of the run.
func ExampleComputeLatency() {
	posted := []int64{0, 3000, 5500, 14500, 17100, 19800, 69800, 72600, 75700, 78350}
	r, err := reports.ComputeLatency(reports.LatencyInput{
		Size:      2,
		Iters:     uint64(len(posted)),
		Samples:   reports.PostedDeltas(posted),
		RTTFactor: perftest.Send.RTTFactor(),
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("t_min %.2f t_max %.2f t_typical %.2f t_avg %.2f p99 %.2f %s\n",
		r.Min, r.Max, r.Typical, r.Avg, r.P99, r.Unit)

	ti := reports.NewTestInfo(perftest.Send, perftest.Latency)
	var doc reports.Record
	doc.AddLatency(r)
	_ = reports.WriteJSON(os.Stdout, &ti, &doc, nil)
	// Output:
	// t_min 1.25 t_max 4.50 t_typical 1.35 t_avg 1.38 p99 4.50 usec
	// {
	// "test_info": {
	// "test": "Send_Latency_Test",
	// "Dual_port": "OFF",
	// "Device": "",
	// "Number_of_qps": 1,
	// "Transport_type": "IB",
	// "Connection_type": "RC",
	// "Using_SRQ": "OFF",
	// "PCIe_relax_order": "ON",
	// "ibv_wr_API": "OFF",
	// "TX_depth": 0,
	// "Mtu": 1024,
	// "Link_type": "IB",
	// "Max_inline_data": 0,
	// "rdma_cm_QPs": "OFF",
	// "Use_ROCm_memory": "OFF",
	// "Use_MUSA_memory": "OFF",
	// "Data_ex_method": "Ethernet"
	// },
	// "results": {
	// "MsgSize": 2,
	// "n_iterations": 10,
	// "t_min": 1.25,
	// "t_max": 4.50,
	// "t_typical": 1.35,
	// "t_avg": 1.38,
	// "t_stdev": 0.00,
	// "percentile_99": 4.50,
	// "percentile_99.9": 4.50,
	// "unit": "usec",
	// "percentile_50": 1.35,
	// "percentile_90": 4.50,
	// "percentile_95": 4.50,
	// "percentile_99.99": 4.50
	// }
	// }
}
