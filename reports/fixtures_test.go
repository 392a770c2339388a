package reports

import (
	"math"
	"time"
)

// Fixed runs for the golden files of the machine-readable formats: numbers
// shaped like real ones (bandwidth saturating with size, latency growing
// with it), made from formulas so that every format sees the same values.

// fixtureTime is the start time of every fixture run.
var fixtureTime = time.Date(2026, 11, 22, 10, 30, 0, 0, time.UTC)

// fixtureSizes are the sizes of an -a sweep: 2 B to 8 MiB.
func fixtureSizes() []uint64 {
	var s []uint64
	for size := uint64(2); size <= 1<<23; size *= 2 {
		s = append(s, size)
	}
	return s
}

func fixtureInfo(test, kind, verb string, roce int) RunInfo {
	return RunInfo{
		Test: test, Title: verb + "_BW_Test", Kind: kind, Verb: verb,
		Role: "client", Device: "rxe0", Driver: "rdma_rxe", LinkLayer: "Ethernet",
		RoCEVersion: roce, GIDIndex: 1, Connection: "RC", QPs: 1, MTU: 1024,
		Iterations: 1000, TxDepth: 128, Host: "host-a", Peer: "10.0.0.2",
		PvperfVersion: "1.0.0", PerftestVersion: "6.29", Time: fixtureTime,
	}
}

// fixtureBW is write_bw -a on RoCE v<roce>: the link saturates at peak
// MiB/s, each message costs overhead microseconds.
func fixtureBW(roce int, peak, overhead float64) Run {
	r := Run{Info: fixtureInfo("write_bw", KindBW, "RDMA_Write", roce)}
	for _, size := range fixtureSizes() {
		mib := float64(size) / (1 << 20)
		t := overhead + mib/peak*1e6 // µs per message
		avg := mib / t * 1e6
		res := BWResult{Size: size, Iters: 1000, Average: avg, Peak: avg * 1.05, MsgRate: 1 / t}
		r.Results = append(r.Results, bwRow(SideLocal, res, false))
	}
	return r
}

// fixtureLat is send_lat -a: latency grows with size; the tail is longer.
func fixtureLat(base float64) Run {
	r := Run{Info: fixtureInfo("send_lat", KindLatency, "Send", 2)}
	r.Info.Title = "Send_Lat_Test"
	for _, size := range fixtureSizes() {
		t := base + float64(size)/2000
		var samples []int64
		for i := range 1000 {
			// A spread that gives distinct percentiles.
			f := 1 + 0.5*math.Pow(float64(i)/1000, 8) + 0.02*float64(i%7)
			samples = append(samples, int64(t*1000*f*2))
		}
		res, err := ComputeLatency(LatencyInput{Size: size, Iters: 1001, Samples: samples, RTTFactor: 2})
		if err != nil {
			panic(err)
		}
		r.Results = append(r.Results, latencyRow(SideLocal, &res, Nanoseconds))
	}
	return r
}

// fixtureBidi is send_bw -b on the server at one size: local, remote and
// sum rows, with CPU usage.
func fixtureBidi() Run {
	r := Run{Info: fixtureInfo("send_bw", KindBW, "Send", 2)}
	r.Info.Title = "Send_Bidirectional_BW_Test"
	r.Info.Bidirectional = true
	r.Info.Role = "server"
	r.Info.Peer = ""
	local := BWResult{Size: 65536, Iters: 1000, Peak: 1000.5, Average: 900.25, MsgRate: 0.0144, CPUUtil: 12.5}
	remote := BWResult{Size: 65536, Iters: 1000, Peak: 1001.5, Average: 901.25, MsgRate: 0.0145, CPUUtil: 13.5}
	r.Results = append(r.Results, bwRow(SideLocal, local, false))
	r.Results = append(r.Results, bwRow(SideRemote, remote, false))
	r.Results = append(r.Results, bwRow(SideSum, SumBW(local, remote), false))
	return r
}

// fixtureDuration is write_lat -D: mean and TPS only.
func fixtureDuration() Run {
	r := Run{Info: fixtureInfo("write_lat", KindLatencyDuration, "RDMA_Write", 2)}
	r.Info.Title = "RDMA_Write_Latency_Test"
	r.Info.Iterations = 0
	r.Info.DurationSeconds = 5
	r.Results = append(r.Results, latencyDurationRow(SideLocal, ComputeLatencyDuration(LatencyDurationInput{Size: 2, Iters: 200000, Start: 1, End: 1 + 4e9, RTTFactor: 2})))
	return r
}
