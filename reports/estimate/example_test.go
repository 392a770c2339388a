package estimate_test

import (
	"fmt"

	"github.com/pvperf/pvperf/reports/estimate"
)

func Example_summarize() {
	// Bandwidth of ten repeated runs, in Gb/s.
	runs := []float64{92.1, 92.4, 91.8, 92.3, 92.0, 93.5, 92.2, 91.9, 92.2, 92.6}
	s, err := estimate.Summarize(runs, 0.95, 2000, 1)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("median %.2f Gb/s, %.0f%% CI [%.2f, %.2f], ±%.2f%%\n",
		s.Median, 100*s.Level, s.Lo, s.Hi, 100*s.HalfWidth())
	fmt.Printf("n=%d mean %.2f stdev %.2f range [%.1f, %.1f]\n", s.N, s.Mean, s.Stdev, s.Min, s.Max)
	// Output:
	// median 92.20 Gb/s, 95% CI [92.00, 92.45], ±0.27%
	// n=10 mean 92.30 stdev 0.48 range [91.8, 93.5]
}

func ExampleFitHockney() {
	// Times of a sweep on a link with 1.5 µs latency and 12.5 GB/s.
	var sizes, seconds []float64
	for n := 64.0; n <= 1<<20; n *= 4 {
		sizes = append(sizes, n)
		seconds = append(seconds, 1.5e-6+n/12.5e9)
	}
	h, err := estimate.FitHockney(sizes, seconds)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("α %.2f µs, β %.2f GB/s, n½ %.0f bytes, R² %.3f, %d points\n",
		h.Alpha*1e6, h.Beta/1e9, h.NHalf, h.R2, h.Points)
	fmt.Printf("64 KiB: %.2f µs, %.2f GB/s\n", h.Time(65536)*1e6, h.Bandwidth(65536)/1e9)
	// Output:
	// α 1.50 µs, β 12.50 GB/s, n½ 18750 bytes, R² 1.000, 8 points
	// 64 KiB: 6.74 µs, 9.72 GB/s
}
