package estimate

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
	"math/rand/v2"
	"slices"

	"gonum.org/v1/gonum/stat"
)

// ErrNoData is returned for an empty sample.
var ErrNoData = errors.New("no data")

// seedStream is the second word of the PCG seed; the caller's seed is the
// first.
const seedStream = 0x9e3779b97f4a7c15

// Summary describes a sample of repeated measurements. [Lo, Hi] is a
// percentile-bootstrap confidence interval of the median at confidence
// Level (for example 0.95). Stdev is the sample standard deviation (with
// N-1 in the denominator), 0 when N is 1.
type Summary struct {
	N                             int
	Median, Min, Max, Mean, Stdev float64
	Lo, Hi                        float64
	Level                         float64
}

// HalfWidth returns the larger distance from the median to an end of the
// interval, as a fraction of the median's magnitude: 0.012 stands for
// ±1.2 %. It is +Inf when the median is 0.
func (s Summary) HalfWidth() float64 {
	if s.Median == 0 {
		return math.Inf(1)
	}
	return max(s.Median-s.Lo, s.Hi-s.Median) / math.Abs(s.Median)
}

// Summarize describes xs: count, median, extremes, mean and standard
// deviation, and a confidence interval of the median at the given level
// from a percentile bootstrap of resamples resamples. The result depends
// only on xs, level, resamples and seed. A single value has the interval
// [x, x]. xs is not modified.
//
// It fails with ErrNoData for an empty xs, and with an error for a level
// outside (0, 1), fewer than 1 resample, or a NaN or infinite value.
func Summarize(xs []float64, level float64, resamples int, seed uint64) (Summary, error) {
	if err := checkArgs(level, resamples); err != nil {
		return Summary{}, err
	}
	if err := checkData(xs); err != nil {
		return Summary{}, fmt.Errorf("estimate: %w", err)
	}
	sorted := slices.Clone(xs)
	slices.Sort(sorted)
	n := len(sorted)
	mean, sd := stat.MeanStdDev(xs, nil)
	if n == 1 {
		sd = 0
	}
	s := Summary{
		N:      n,
		Median: median(sorted),
		Min:    sorted[0],
		Max:    sorted[n-1],
		Mean:   mean,
		Stdev:  sd,
		Level:  level,
	}
	if n == 1 {
		s.Lo, s.Hi = sorted[0], sorted[0]
		return s, nil
	}
	src := rand.NewPCG(seed, seedStream)
	counts := make([]int, n)
	medians := make([]float64, resamples)
	for i := range medians {
		medians[i] = resampleMedian(src, sorted, counts)
	}
	s.Lo, s.Hi = interval(medians, level)
	return s, nil
}

// RatioCI returns the ratio of the medians of a and b, median(a)/median(b),
// and its confidence interval [lo, hi] at the given level from a percentile
// bootstrap that resamples a and b independently. It fails as Summarize
// does for either sample, and when the median of b, or of one of its
// resamples, is 0.
func RatioCI(a, b []float64, level float64, resamples int, seed uint64) (ratio, lo, hi float64, err error) {
	if err := checkArgs(level, resamples); err != nil {
		return 0, 0, 0, err
	}
	if err := checkData(a); err != nil {
		return 0, 0, 0, fmt.Errorf("estimate: a: %w", err)
	}
	if err := checkData(b); err != nil {
		return 0, 0, 0, fmt.Errorf("estimate: b: %w", err)
	}
	sa, sb := slices.Clone(a), slices.Clone(b)
	slices.Sort(sa)
	slices.Sort(sb)
	mb := median(sb)
	if mb == 0 {
		return 0, 0, 0, errors.New("estimate: the median of b is 0")
	}
	ratio = median(sa) / mb
	src := rand.NewPCG(seed, seedStream)
	ca, cb := make([]int, len(sa)), make([]int, len(sb))
	ratios := make([]float64, resamples)
	for i := range ratios {
		num := resampleMedian(src, sa, ca)
		den := resampleMedian(src, sb, cb)
		if den == 0 {
			return 0, 0, 0, fmt.Errorf("estimate: resample %d of b has median 0", i)
		}
		ratios[i] = num / den
	}
	lo, hi = interval(ratios, level)
	return ratio, lo, hi, nil
}

func checkArgs(level float64, resamples int) error {
	if !(level > 0 && level < 1) {
		return fmt.Errorf("estimate: confidence level %v is not in (0, 1)", level)
	}
	if resamples < 1 {
		return fmt.Errorf("estimate: %d bootstrap resamples, need at least 1", resamples)
	}
	return nil
}

func checkData(xs []float64) error {
	if len(xs) == 0 {
		return ErrNoData
	}
	for i, x := range xs {
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return fmt.Errorf("value %d is %v", i, x)
		}
	}
	return nil
}

// median returns the median of sorted, which must not be empty: the middle
// value, or the midpoint of the two middle values when their number is even.
func median(sorted []float64) float64 {
	n := len(sorted)
	if n%2 == 1 {
		return sorted[n/2]
	}
	return midpoint(sorted[n/2-1], sorted[n/2])
}

// midpoint returns (a+b)/2 without overflowing.
func midpoint(a, b float64) float64 {
	return a/2 + b/2
}

// interval sorts stats and returns their (1-level)/2 and 1-(1-level)/2
// quantiles.
func interval(stats []float64, level float64) (lo, hi float64) {
	slices.Sort(stats)
	tail := (1 - level) / 2
	return stat.Quantile(tail, stat.LinInterp, stats, nil),
		stat.Quantile(1-tail, stat.LinInterp, stats, nil)
}

// resampleMedian draws a resample with replacement of sorted, of the same
// size, and returns its median. The resample is held in counts (one per
// value of sorted: how many times it was drawn), which keeps it sorted
// without sorting.
func resampleMedian(src *rand.PCG, sorted []float64, counts []int) float64 {
	n := len(sorted)
	clear(counts)
	for range n {
		// The high word of a 64×64-bit product is uniform on [0, n) up to
		// a bias of n/2^64.
		i, _ := bits.Mul64(src.Uint64(), uint64(n))
		counts[i]++
	}
	// The middle ranks, counted from 0: (n-1)/2 and n/2, equal for odd n.
	lowRank, highRank := (n-1)/2, n/2
	var low float64
	seen := 0
	for i, c := range counts {
		if seen <= lowRank && lowRank < seen+c {
			low = sorted[i]
		}
		seen += c
		if highRank < seen {
			if lowRank == highRank {
				return low
			}
			return midpoint(low, sorted[i])
		}
	}
	panic("estimate: resample lost its values")
}
