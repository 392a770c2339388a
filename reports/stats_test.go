package reports

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/stat"

	"github.com/pvperf/pvperf/perftest"
	"github.com/pvperf/pvperf/reports/hdr"
)

// The expected values below are computed by hand following perftest's code
// (print_report_bw, print_report_lat, print_report_lat_duration); they were
// also checked against a C program made of perftest's own statistics code
// (gcc, x86-64), whose "%.17g" outputs are the float literals used here.

func TestComputeBWPeakWindows(t *testing.T) {
	// 4 messages, 1 QP, cq_mod 1, post_list 1, 65536 bytes, ns clock
	// (F = 1000 MHz * 10^6 = 10^9 ticks/s), MiB/s.
	//   Posted    = [0, 10, 20, 30]
	//   Completed = [100, 130, 150, 400]
	// opt starts at Completed[0]-Posted[0] = 100; the windows (t = (C[j]-P[i])/(j-i+1)):
	//   i=0: j=0 100/1=100, j=1 130/2=65, j=2 150/3=50, j=3 400/4=100
	//   i=1: j=1 120/1=120, j=2 140/2=70, j=3 390/3=130
	//   i=2: j=2 130/1=130, j=3 380/2=190
	//   i=3: j=3 370/1=370
	// best = 50 ticks per message.
	// peak    = 65536*10^9 / (50*2^20) = 65536000000000/52428800 = 1250000
	// average = 65536*4*10^9 / (400*2^20) = 625000 (T = C[3]-P[0] = 400)
	// rate    = 4*10^9 / (400*10^6) = 10
	r, err := ComputeBW(BWInput{
		Size: 65536, Iters: 4, NumQPs: 1, CQMod: 1, PostList: 1,
		Posted:    []int64{0, 10, 20, 30},
		Completed: []int64{100, 130, 150, 400},
		Clock:     Nanoseconds,
	})
	if err != nil {
		t.Fatal(err)
	}
	want := BWResult{Size: 65536, Iters: 4, Peak: 1250000, Average: 625000, MsgRate: 10}
	if r != want {
		t.Errorf("got %+v, want %+v", r, want)
	}
}

func TestComputeBWCQModAndTruncation(t *testing.T) {
	// 5 messages, cq_mod 2 (slots 1, 3 and the always-signalled last slot
	// 4 are filled; unfilled slots are 0 as in perftest's zeroed array),
	// 4096 bytes, a 2000 MHz clock (F = 2*10^9), Gb/s.
	//   Posted    = [1000, 1007, 1015, 1022, 1031]
	//   Completed = [0, 1050, 0, 1095, 1121]
	// opt starts at C[0]-P[0] = 0-1000, which wraps around in uint64
	// (never the minimum). j starts at ROUND_UP(i+1, 2)-1, steps by 2, and
	// j = 4 is added because 5 % 2 != 0:
	//   i=0: j=1 50/2=25, j=3 95/4=23 (23.75 truncated), j=4 121/5=24
	//   i=1: j=1 43/1=43, j=3 88/3=29, j=4 114/4=28
	//   i=2: j=3 80/2=40, j=4 106/3=35
	//   i=3: j=3 73/1=73, j=4 99/2=49
	//   i=4: j starts at 5 (not < 5), j=4 90/1=90
	// best = 23.
	// peak    = 4096*2000000000 / (23*125000000) = 8192000000000/2875000000 = 2849.391304347826...
	// average = 4096*5*2e9 / (121*125e6) = 2708.0991735537...   (T = C[4]-P[0] = 121)
	// rate    = 5*2e9 / (121*1e6) = 82.6446280991...
	r, err := ComputeBW(BWInput{
		Size: 4096, Iters: 5, NumQPs: 1, CQMod: 2, PostList: 1,
		Posted:    []int64{1000, 1007, 1015, 1022, 1031},
		Completed: []int64{0, 1050, 0, 1095, 1121},
		Clock:     Clock{MHz: 2000},
		Gbits:     true,
	})
	if err != nil {
		t.Fatal(err)
	}
	want := BWResult{Size: 4096, Iters: 5, Peak: 2849.391304347826, Average: 2708.0991735537191, MsgRate: 82.644628099173559}
	if r != want {
		t.Errorf("got %+v, want %+v", r, want)
	}
	// The row perftest prints for it.
	ti := NewTestInfo(perftest.Write, perftest.Bandwidth)
	ti.Gbits = true
	if got, want := BWReport(&ti, r, nil), " 4096       5                2849.39            2708.10\t\t     82.644628\n"; got != want {
		t.Errorf("row = %q, want %q", got, want)
	}
}

func TestComputeBWPostListStep(t *testing.T) {
	// post_list 2, cq_mod 2, 4 messages, 1000 bytes, ns clock, MiB/s.
	//   Posted    = [100, 130, 140, 150]
	//   Completed = [0, 135, 0, 300]
	// Windows start at i = 0 and 2 only:
	//   i=0: j=1 35/2=17, j=3 200/4=50
	//   i=2: j=3 160/2=80
	// best = 17 (a window from i=1 would give 5/1=5: perftest never tries it).
	// peak    = 1000*1e9 / (17*2^20) = 56098.48920036765
	// average = 1000*4*1e9 / (200*2^20) = 19073.486328125
	// rate    = 4*1e9 / (200*1e6) = 20
	in := BWInput{
		Size: 1000, Iters: 4, NumQPs: 1, CQMod: 2, PostList: 2,
		Posted:    []int64{100, 130, 140, 150},
		Completed: []int64{0, 135, 0, 300},
	}
	r, err := ComputeBW(in)
	if err != nil {
		t.Fatal(err)
	}
	if want := (BWResult{Size: 1000, Iters: 4, Peak: 56098.48920036765, Average: 19073.486328125, MsgRate: 20}); r != want {
		t.Errorf("got %+v, want %+v", r, want)
	}
	// With post_list 1 the window i=1..1 wins: 1000*1e9/(5*2^20).
	in.PostList = 1
	r, err = ComputeBW(in)
	if err != nil {
		t.Fatal(err)
	}
	if r.Peak != 190734.86328125 {
		t.Errorf("post_list 1: peak %v, want 190734.86328125", r.Peak)
	}
}

func TestComputeBWMultiQP(t *testing.T) {
	// 2 QPs x 2 iterations = 4 messages, cq_mod 1, 2 bytes, a 2394.455 MHz
	// clock (F = 2394455000), Gb/s.
	//   Posted    = [1000, 1010, 1020, 1030]
	//   Completed = [1040, 1050, 1070, 1090]
	//   i=0: 40/1=40, 50/2=25, 70/3=23, 90/4=22
	//   i=1: 40/1=40, 60/2=30, 80/3=26
	//   i=2: 50/1=50, 70/2=35
	//   i=3: 60/1=60
	// best = 22; peak = 2*2394455000/(22*125e6) = 1.7414218181818182
	// average = 2*4*2394455000/(90*125e6) = 1.7027235555555555, rate = 4*2394455000/(90*1e6)
	r, err := ComputeBW(BWInput{
		Size: 2, Iters: 2, NumQPs: 2, CQMod: 1, PostList: 1,
		Posted:    []int64{1000, 1010, 1020, 1030},
		Completed: []int64{1040, 1050, 1070, 1090},
		Clock:     Clock{MHz: 2394.455},
		Gbits:     true,
	})
	if err != nil {
		t.Fatal(err)
	}
	want := BWResult{Size: 2, Iters: 4, Peak: 1.7414218181818182, Average: 1.7027235555555555, MsgRate: 106.42022222222222}
	if r != want {
		t.Errorf("got %+v, want %+v", r, want)
	}
	// 1.70 Gb/s is not below 0.1: the normal row.
	ti := NewTestInfo(perftest.Write, perftest.Bandwidth)
	ti.Gbits = true
	if got, want := BWReport(&ti, r, nil), " 2          4                1.74               1.70   \t\t     106.420222\n"; got != want {
		t.Errorf("row = %q, want %q", got, want)
	}
}

func TestComputeBWDuration(t *testing.T) {
	// -D 4: 1024 completions counted in a 4 s window, no peak.
	// average = 65536*1024*1e9 / (4e9*2^20) = 16 MiB/s; rate = 1024e9/(4e9*1e6) = 0.000256;
	// peak = 0 / (4e9*2^20) = 0.
	r, err := ComputeBW(BWInput{
		Size: 65536, Iters: 1024, NumQPs: 2, Duration: true, NoPeak: true,
		Posted: []int64{5000}, Completed: []int64{4000005000},
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := (BWResult{Size: 65536, Iters: 1024, Peak: 0, Average: 16, MsgRate: 0.00025599999999999999}); r != want {
		t.Errorf("got %+v, want %+v", r, want)
	}
}

func TestComputeBWNoPeakIterations(t *testing.T) {
	// -N in iteration mode: #iterations = iters*QPs, T = Completed[0]-Posted[0].
	r, err := ComputeBW(BWInput{
		Size: 1 << 20, Iters: 10, NumQPs: 3, NoPeak: true,
		Posted: []int64{1}, Completed: []int64{1 + 3e9},
		ItersPerPort: [2]uint64{20, 10},
	})
	if err != nil {
		t.Fatal(err)
	}
	// average = 2^20*30*1e9/(3e9*2^20) = 10; rate = 30e9/(3e9*1e6) = 0.00001
	// port 1: 2^20*20*1e9/(3e9*2^20) = 6.666...; port 2: 3.333...
	if r.Iters != 30 || r.Peak != 0 || r.Average != 10 || r.MsgRate != 30e9/(3e9*1e6) {
		t.Errorf("got %+v", r)
	}
	if r.AvgPort1 != float64(1<<20)*20*1e9/(3e9*(1<<20)) || r.AvgPort2 != float64(1<<20)*10*1e9/(3e9*(1<<20)) {
		t.Errorf("per port: %+v", r)
	}
}

func TestComputeBWZeroWindow(t *testing.T) {
	// A window of 0 ticks gives an infinite peak, as perftest's double
	// division does; the text prints "inf" like glibc.
	r, err := ComputeBW(BWInput{Size: 8, Iters: 1, Posted: []int64{7}, Completed: []int64{7}})
	if err != nil {
		t.Fatal(err)
	}
	if !math.IsInf(r.Peak, 1) || !math.IsInf(r.Average, 1) {
		t.Errorf("got %+v", r)
	}
	ti := NewTestInfo(perftest.Write, perftest.Bandwidth)
	if got, want := BWReport(&ti, r, nil), " 8          1                inf                inf    \t\t     inf    \n"; got != want {
		t.Errorf("row = %q, want %q", got, want)
	}
}

func TestComputeBWErrors(t *testing.T) {
	for _, in := range []BWInput{
		{},
		{Iters: 4, Posted: []int64{1, 2}, Completed: []int64{3, 4}},
		{Iters: 0, Posted: []int64{1}, Completed: []int64{3}},
	} {
		if _, err := ComputeBW(in); !errors.Is(err, ErrTooFewSamples) {
			t.Errorf("ComputeBW(%+v) error = %v, want ErrTooFewSamples", in, err)
		}
	}
}

func TestRoundUp(t *testing.T) {
	for _, c := range []struct{ v, a, want int }{{1, 1, 1}, {1, 2, 2}, {2, 2, 2}, {3, 2, 4}, {5, 100, 100}, {100, 100, 100}, {101, 100, 200}} {
		if got := roundUp(c.v, c.a); got != c.want {
			t.Errorf("roundUp(%d, %d) = %d, want %d", c.v, c.a, got, c.want)
		}
	}
}

func TestSumBW(t *testing.T) {
	l := BWResult{Size: 64, Iters: 20, Peak: 1, Average: 2, MsgRate: 3, AvgPort1: 4, MsgRatePort1: 5, AvgPort2: 6, MsgRatePort2: 7, CPUUtil: 8}
	r := BWResult{Size: 1, Iters: 2, Peak: 10, Average: 20, MsgRate: 30, AvgPort1: 40, MsgRatePort1: 50, AvgPort2: 60, MsgRatePort2: 70, CPUUtil: 80}
	want := BWResult{Size: 64, Iters: 20, Peak: 11, Average: 22, MsgRate: 33, AvgPort1: 44, MsgRatePort1: 55, AvgPort2: 66, MsgRatePort2: 77, CPUUtil: 8}
	if got := SumBW(l, r); got != want {
		t.Errorf("SumBW = %+v, want %+v", got, want)
	}
}

func TestCPUUtilization(t *testing.T) {
	// user 100->400 (300), idle 1000->1900 (900): 300/1200*100 = 25.
	if got := CPUUtilization(100, 1000, 400, 1900); got != 25 {
		t.Errorf("got %v, want 25", got)
	}
	if got := CPUUtilization(1, 1, 1, 1); got != 0 {
		t.Errorf("no ticks: got %v, want 0", got)
	}
	// float arithmetic: 1/3 in float is 0.333333343, times 100 is 33.3333359.
	if got := CPUUtilization(0, 0, 1, 2); got != float32(float32(1.0/3.0)*100) {
		t.Errorf("got %v", got)
	}
}

func TestComputeLatencyOddCount(t *testing.T) {
	// ib_send_lat -n 10 on a ns clock: 9 samples (ns), rtt_factor 2, so
	// q = 1000*2 = 2000 ns per printed usec.
	//   samples = [3000 2500 9000 2600 2700 50000 2800 3100 2650]
	//   sorted  = [2500 2600 2650 2700 2800 3000 3100 9000 50000], m = 9-2 = 7
	// t_min = 2500/2000 = 1.25; t_max = d[7] = 9000/2000 = 4.50
	// t_typical: m odd -> d[3] = 2700 -> 1.35
	// t_avg = (1.25+1.30+1.325+1.35+1.40+1.50+1.55)/7 = 9.675/7 = 1.382142857...
	// t_stdev: every |t_avg - x| < 1 truncates to int 0 -> sqrt(0/7) = 0.00
	//          (the true standard deviation is about 0.1 us)
	// p99 = d[ceil(7*0.99)] = d[ceil(6.93)] = d[7]; p99.9 = d[ceil(6.993)] = d[7] -> 4.50
	samples := []int64{3000, 2500, 9000, 2600, 2700, 50000, 2800, 3100, 2650}
	r, err := ComputeLatency(LatencyInput{Size: 2, Iters: 10, Samples: samples, Clock: Nanoseconds, RTTFactor: perftest.Send.RTTFactor()})
	if err != nil {
		t.Fatal(err)
	}
	if r.Min != 1.25 || r.Max != 4.5 || r.Typical != 1.3500000000000001 || r.Avg != 1.3821428571428573 ||
		r.Stdev != 0 || r.P99 != 4.5 || r.P999 != 4.5 || r.Measured != 7 || r.Unit != "usec" || r.Quotient != 2000 {
		t.Errorf("got %+v", r)
	}
	ti := NewTestInfo(perftest.Send, perftest.Latency)
	want := " 2       10          1.25           4.50         1.35     \t       1.38        \t0.00   \t\t4.50    \t\t4.50   \n"
	if got := LatencyReport(&ti, &r); got != want {
		t.Errorf("row = %q, want %q", got, want)
	}
	// The input is not modified.
	if samples[0] != 3000 || samples[5] != 50000 {
		t.Errorf("samples modified: %v", samples)
	}
}

func TestComputeLatencyEvenCountCycles(t *testing.T) {
	// ib_read_lat -C -n 9: 8 samples in cycles, rtt_factor 1, q = 1.
	//   sorted = [98 99 100 101 103 107 250 1000], m = 6
	// t_min = 98, t_max = d[6] = 250
	// t_typical: m even -> (d[3] + d[2]) / 2 = (101+100)/2 = 100 in integer cycles (not 100.5)
	// t_avg = (98+99+100+101+103+107)/6 = 608/6 = 101.333...
	// t_stdev: deviations 3.33 2.33 1.33 0.33 -1.67 -5.67 truncate to
	//          3 2 1 0 -1 -5, squares 9+4+1+0+1+25 = 40, sqrt(40/6) = 2.5819888974716112
	//          (the true value is 2.98)
	// p99 = d[ceil(5.94)] = d[6] = 250; p99.9 = d[ceil(5.994)] = d[6] = 250
	r, err := ComputeLatency(LatencyInput{
		Size: 8, Iters: 9, Samples: []int64{100, 107, 98, 250, 103, 99, 1000, 101},
		Clock: Clock{MHz: 2394.455}, RTTFactor: perftest.Read.RTTFactor(), Cycles: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	if r.Min != 98 || r.Max != 250 || r.Typical != 100 || r.Avg != 101.33333333333333 ||
		r.Stdev != 2.5819888974716112 || r.P99 != 250 || r.P999 != 250 || r.Unit != "cycles" {
		t.Errorf("got %+v", r)
	}
	// -C keeps the [usec] header.
	ti := NewTestInfo(perftest.Read, perftest.Latency)
	if got, want := LatencyReport(&ti, &r), " 8       9          98.00          250.00       100.00   \t       101.33      \t2.58   \t\t250.00  \t\t250.00 \n"; got != want {
		t.Errorf("row = %q, want %q", got, want)
	}
}

func TestComputeLatencyPercentileIndexes(t *testing.T) {
	// iters = 1000: 999 samples, m = 997. Sample k+1 (in usec, q = 1000*1)
	// is at sorted index k.
	// p99 index = ceil(997*0.99) = ceil(987.03) = 988 -> 989 us
	// p99.9 index = ceil(997*0.999) = ceil(996.003) = 997 = t_max -> 998 us
	// t_typical = d[498] = 499 (m odd); t_avg = (997*998/2)/997 = 499;
	// t_stdev = sqrt(2*(1^2+...+498^2)/997) = sqrt(82585498/997) = sqrt(82834)
	samples := make([]int64, 999)
	for i := range samples {
		samples[i] = int64((i*7919)%999+1) * 1000 // a permutation of 1..999 us
	}
	r, err := ComputeLatency(LatencyInput{Size: 64, Iters: 1000, Samples: samples, RTTFactor: 1})
	if err != nil {
		t.Fatal(err)
	}
	if r.Min != 1 || r.Max != 998 || r.Typical != 499 || r.Avg != 499 || r.Stdev != math.Sqrt(82834) ||
		r.P99 != 989 || r.P999 != 998 || r.Measured != 997 {
		t.Errorf("got min %v max %v typical %v avg %v stdev %v p99 %v p99.9 %v m %d",
			r.Min, r.Max, r.Typical, r.Avg, r.Stdev, r.P99, r.P999, r.Measured)
	}
	ti := NewTestInfo(perftest.Read, perftest.Latency)
	if got, want := LatencyReport(&ti, &r), " 64      1000          1.00           998.00       499.00   \t       499.00      \t287.81 \t\t989.00  \t\t998.00 \n"; got != want {
		t.Errorf("row = %q, want %q", got, want)
	}
	// pvperf's percentiles are nearest-rank over d[0] to d[m] (t_min to
	// t_max): 998 samples.
	if p := r.Percentile(0.5); p != r.Typical { // d[ceil(499)-1] = d[498], the median
		t.Errorf("p50 = %v, want the median %v", p, r.Typical)
	}
	if p := r.Percentile(0.9); p != 899 { // d[ceil(898.2)-1] = d[898]
		t.Errorf("p90 = %v, want 899", p)
	}
	if p := r.Percentile(0.99); p != r.P99 { // d[ceil(988.02)-1] = d[988], as perftest's
		t.Errorf("p99 = %v, want perftest's %v", p, r.P99)
	}
	if p := r.Percentile(1.5); p != r.Max { // clamped to t_max
		t.Errorf("p150 = %v, want t_max %v", p, r.Max)
	}
}

func TestComputeLatencyStdevIntOverflow(t *testing.T) {
	// -C, rtt 1: kept samples [100 100 200000 200000] (m = 4), t_avg = 100050.
	// Each deviation is +-99950, and int(pow(99950, 2)) = int(9990002500.0)
	// is out of range: x86-64 gives INT_MIN. stdev_sum = 4*(-2147483648)
	// < 0, so sqrt gives -nan.
	r, err := ComputeLatency(LatencyInput{Size: 2, Iters: 7, Samples: []int64{100, 100, 200000, 200000, 300000, 400000}, RTTFactor: 1, Cycles: true})
	if err != nil {
		t.Fatal(err)
	}
	if !math.IsNaN(r.Stdev) || !math.Signbit(r.Stdev) || r.Typical != 100050 || r.Max != 300000 || r.P99 != 300000 {
		t.Errorf("got %+v", r)
	}
	ti := NewTestInfo(perftest.Read, perftest.Latency)
	if got, want := LatencyReport(&ti, &r), " 2       7          100.00         300000.00      100050.00  \t       100050.00     \t-nan   \t\t300000.00 \t\t300000.00\n"; got != want {
		t.Errorf("row = %q, want %q", got, want)
	}

	// kept [100 100 100000], t_avg = 33400: deviations 33300, 33300
	// (squares 1108890000 each) and -66600 (square 4435560000 -> INT_MIN):
	// sum = 2217780000 - 2147483648 = 70296352, stdev = sqrt(70296352/3).
	r, err = ComputeLatency(LatencyInput{Size: 2, Iters: 6, Samples: []int64{100, 100, 100000, 200000, 300000}, RTTFactor: 1, Cycles: true})
	if err != nil {
		t.Fatal(err)
	}
	if r.Stdev != 4840.6732314145447 || r.Typical != 100 {
		t.Errorf("got stdev %.17g typical %v", r.Stdev, r.Typical)
	}
}

func TestCInt(t *testing.T) {
	for _, c := range []struct {
		x    float64
		want int32
	}{
		{0.9, 0}, {-0.9, 0}, {2.5, 2}, {-2.5, -2}, {2147483647.9, 2147483647}, {-2147483648.9, -2147483648},
		{2147483648, math.MinInt32}, {-2147483649, math.MinInt32}, {1e300, math.MinInt32}, {math.NaN(), math.MinInt32},
	} {
		if got := cInt(c.x); got != c.want {
			t.Errorf("cInt(%v) = %d, want %d", c.x, got, c.want)
		}
	}
}

func TestComputeLatencyErrors(t *testing.T) {
	if _, err := ComputeLatency(LatencyInput{Samples: []int64{1, 2}}); !errors.Is(err, ErrTooFewSamples) {
		t.Errorf("error = %v, want ErrTooFewSamples", err)
	}
	// 3 samples is the minimum: m = 1.
	r, err := ComputeLatency(LatencyInput{Samples: []int64{3000, 1000, 2000}, RTTFactor: 1})
	if err != nil {
		t.Fatal(err)
	}
	if r.Min != 1 || r.Max != 2 || r.Typical != 1 || r.Avg != 1 || r.P99 != 2 || r.P999 != 2 {
		t.Errorf("got %+v", r)
	}
}

func TestPostedDeltas(t *testing.T) {
	got := PostedDeltas([]int64{10, 15, 27, 30})
	want := []int64{5, 12, 3}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("got %v, want %v", got, want)
		}
	}
	if PostedDeltas([]int64{1}) != nil {
		t.Error("one timestamp: want nil")
	}
}

func TestComputeLatencyDuration(t *testing.T) {
	// -D: 200000 round trips of WRITE (rtt 2) in a 4 s window on a ns clock:
	// t_avg = ((4e9/1000)/2)/200000 = 10 us; tps = 200000/(4e9/(1000*1e6)) = 50000.
	r := ComputeLatencyDuration(LatencyDurationInput{Size: 2, Iters: 200000, Start: 1000, End: 1000 + 4e9, RTTFactor: 2})
	if want := (LatencyDurationResult{Size: 2, Iters: 200000, Avg: 10, TPS: 50000, Quotient: 2000}); r != want {
		t.Errorf("got %+v, want %+v", r, want)
	}
	ti := NewTestInfo(perftest.Write, perftest.Latency)
	ti.Duration = true
	if got, want := LatencyDurationReport(&ti, r), " 2             200000            10.00          50000.00\n"; got != want {
		t.Errorf("row = %q, want %q", got, want)
	}
}

// The peak search is perftest's O(N^2/cq_mod) loop; it must stay usable
// at perftest's 20000-iteration limit.
func TestComputeBWLargeRunIsConsistent(t *testing.T) {
	const n = 1000
	rng := rand.New(rand.NewPCG(1, 2))
	posted := make([]int64, n)
	completed := make([]int64, n)
	tk := int64(1_000_000)
	for i := range posted {
		tk += 100 + rng.Int64N(50)
		posted[i] = tk
		completed[i] = tk + 5000 + rng.Int64N(500)
	}
	for i := 1; i < n; i++ { // completions are in order
		completed[i] = max(completed[i], completed[i-1])
	}
	r, err := ComputeBW(BWInput{Size: 4096, Iters: n, CQMod: 1, PostList: 1, Posted: posted, Completed: completed})
	if err != nil {
		t.Fatal(err)
	}
	// The best window is at least as good as the whole run.
	if r.Peak < r.Average {
		t.Errorf("peak %v < average %v", r.Peak, r.Average)
	}
	// Brute force over every window with the same truncation.
	best := uint64(completed[0] - posted[0])
	for i := 0; i < n; i++ {
		for j := i; j < n; j++ {
			best = min(best, uint64(completed[j]-posted[i])/uint64(j-i+1))
		}
	}
	if want := float64(4096*uint64(1e9)) / float64(best*MiBFactor); r.Peak != want {
		t.Errorf("peak %v, want %v", r.Peak, want)
	}
}

// TestComputeLatencyWholeCycles: with -C the samples are whole cycles,
// as perftest's differences of the cycle counter, so a READ's (round trip
// factor 1) figures have no fraction, and a SEND's at most a half.
func TestComputeLatencyWholeCycles(t *testing.T) {
	samples := []int64{151, 152, 157, 149, 150, 163, 171, 900, 1000} // ns, at 2596 MHz: fractions of cycles
	for _, rtt := range []int{1, 2} {
		r, err := ComputeLatency(LatencyInput{Size: 2, Iters: 10, Samples: samples, RTTFactor: rtt, Cycles: true, CyclesMHz: 2596})
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range []float64{r.Min, r.Max, r.Typical, r.P99, r.P999} {
			if v*float64(rtt) != math.Trunc(v*float64(rtt)) {
				t.Errorf("rtt %d: %v cycles is not a whole number of cycles over %d (min %v max %v typical %v)", rtt, v, rtt, r.Min, r.Max, r.Typical)
			}
		}
		if want := int64(math.Round(float64(samples[0]) * 2.596)); r.Unsorted[0] != want {
			t.Errorf("first sample %d cycles, want %d", r.Unsorted[0], want)
		}
	}
}

// TestComputeLatencyCyclesMHz: with -C at a known cycle rate, nanosecond
// samples are reported in cycles, and the model's microseconds and
// distribution stay microseconds.
func TestComputeLatencyCyclesMHz(t *testing.T) {
	samples := []int64{1000, 1000, 1000, 1000, 1000, 9000, 9000} // ns: half round trips of 500 ns
	h := hdr.New()
	for _, s := range samples {
		h.Record(s)
	}
	r, err := ComputeLatency(LatencyInput{Size: 2, Iters: 8, Samples: samples, RTTFactor: 2, Cycles: true, CyclesMHz: 2000, Hist: h})
	if err != nil {
		t.Fatal(err)
	}
	if r.Unit != "cycles" || r.Typical != 1000 || r.Min != 1000 {
		t.Errorf("unit %s, typical %v, min %v; want cycles, 1000, 1000 (500 ns at 2000 MHz)", r.Unit, r.Typical, r.Min)
	}
	row := latencyRow(SideLocal, &r, Nanoseconds)
	if got := float64(row.Latency.TypicalUs); math.Abs(got-0.5) > 1e-9 {
		t.Errorf("typical_us %v, want 0.5", got)
	}
	if d := row.Distribution; d == nil || math.Abs(float64(d.P50Us)-0.5) > 0.01 {
		t.Errorf("distribution %+v, want p50 0.5 us", d)
	}
}

// TestLatencyDeviation: pvperf's stdev (Deviation, the JSON's stdev_us) is
// the population standard deviation of the samples t_avg averages (all but
// the 2 largest), where perftest's t_stdev truncates each deviation to a
// whole unit: samples 0.2 to 0.8 µs apart have a t_stdev of 0.
func TestLatencyDeviation(t *testing.T) {
	const mhz = 1000 // ticks of 1 ns
	samples := make([]int64, 1002)
	for i := range samples {
		samples[i] = int64(1000 + 200*(i%4)) // 1.0, 1.2, 1.4, 1.6 µs
	}
	samples[10], samples[20] = 50000, 60000 // the 2 largest, dropped
	r, err := ComputeLatency(LatencyInput{Size: 2, Iters: 1003, Samples: samples, RTTFactor: 1, Clock: Clock{MHz: mhz}})
	if err != nil {
		t.Fatal(err)
	}
	var kept []float64
	for i, s := range samples {
		if i != 10 && i != 20 {
			kept = append(kept, float64(s)/mhz)
		}
	}
	mean, sd := stat.PopMeanStdDev(kept, nil)
	if math.Abs(r.Avg-mean) > 1e-9 || math.Abs(r.Deviation-sd) > 1e-9 || r.Stdev != 0 {
		t.Errorf("t_avg %v t_stdev %v deviation %v; want mean %v, t_stdev 0, deviation %v", r.Avg, r.Stdev, r.Deviation, mean, sd)
	}
}
