package hdr_test

import (
	"fmt"

	"github.com/pvperf/pvperf/reports/hdr"
)

func ExampleHistogram() {
	h := hdr.New()
	for i := range int64(10_000) {
		h.Record(1000 + i%997) // latencies of 1000..1996 ns
	}
	fmt.Println("count", h.Count(), "min", h.Min(), "max", h.Max())
	for _, q := range hdr.Percentiles[:3] {
		fmt.Printf("p%g %d\n", 100*q, h.Quantile(q))
	}
	// Output:
	// count 10000 min 1000 max 1996
	// p50 1499
	// p90 1899
	// p99 1987
}
