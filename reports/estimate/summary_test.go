package estimate

import (
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// normalSample returns n values drawn from N(mean, sd²) with a fixed seed.
func normalSample(n int, mean, sd float64, seed uint64) []float64 {
	rng := rand.New(rand.NewPCG(seed, 12345))
	xs := make([]float64, n)
	for i := range xs {
		xs[i] = mean + sd*rng.NormFloat64()
	}
	return xs
}

func TestSummarizeValues(t *testing.T) {
	xs := []float64{5, 1, 4, 2, 3}
	orig := slices.Clone(xs)
	s, err := Summarize(xs, 0.95, 1000, 1)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(xs, orig) {
		t.Errorf("Summarize modified its input: %v", xs)
	}
	if s.N != 5 || s.Median != 3 || s.Min != 1 || s.Max != 5 || s.Mean != 3 || s.Level != 0.95 {
		t.Errorf("Summary = %+v", s)
	}
	if want := math.Sqrt(2.5); math.Abs(s.Stdev-want) > 1e-15 {
		t.Errorf("Stdev = %v, want %v", s.Stdev, want)
	}
	if !(s.Min <= s.Lo && s.Lo <= s.Median && s.Median <= s.Hi && s.Hi <= s.Max) {
		t.Errorf("interval [%v, %v] is not around the median within [Min, Max]", s.Lo, s.Hi)
	}

	even, err := Summarize([]float64{4, 1, 3, 2}, 0.9, 10, 1)
	if err != nil {
		t.Fatal(err)
	}
	if even.Median != 2.5 {
		t.Errorf("median of 1..4 = %v, want 2.5", even.Median)
	}
}

func TestSummarizeOne(t *testing.T) {
	s, err := Summarize([]float64{7.5}, 0.95, 100, 1)
	if err != nil {
		t.Fatal(err)
	}
	want := Summary{N: 1, Median: 7.5, Min: 7.5, Max: 7.5, Mean: 7.5, Lo: 7.5, Hi: 7.5, Level: 0.95}
	if s != want {
		t.Errorf("Summary = %+v, want %+v", s, want)
	}
	if s.HalfWidth() != 0 {
		t.Errorf("HalfWidth = %v, want 0", s.HalfWidth())
	}
}

func TestSummarizeCoverage(t *testing.T) {
	// The 95 % interval should hold the true median (100) in about 95 of
	// 100 samples; the seeds are fixed, so the count is too.
	const trueMedian = 100
	hits := 0
	for seed := range uint64(100) {
		xs := normalSample(41, trueMedian, 10, seed)
		s, err := Summarize(xs, 0.95, 1000, seed)
		if err != nil {
			t.Fatal(err)
		}
		if s.Lo <= trueMedian && trueMedian <= s.Hi {
			hits++
		}
	}
	t.Logf("%d of 100 intervals hold the true median", hits)
	if hits < 85 {
		t.Errorf("%d of 100 intervals hold the true median, want at least 85", hits)
	}
}

func TestSummarizeDeterministic(t *testing.T) {
	xs := normalSample(30, 50, 5, 7)
	a, err := Summarize(xs, 0.95, 500, 42)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := Summarize(xs, 0.95, 500, 42)
	if a != b {
		t.Errorf("same seed, different results: %+v and %+v", a, b)
	}
	differ := false
	for seed := range uint64(5) {
		c, _ := Summarize(xs, 0.95, 500, 100+seed)
		differ = differ || c.Lo != a.Lo || c.Hi != a.Hi
	}
	if !differ {
		t.Error("the seed does not change the interval")
	}
}

func TestSummarizeNarrows(t *testing.T) {
	prev := math.Inf(1)
	for _, n := range []int{10, 40, 160, 640, 2560} {
		s, err := Summarize(normalSample(n, 1000, 50, uint64(n)), 0.95, 1000, 1)
		if err != nil {
			t.Fatal(err)
		}
		w := s.HalfWidth()
		t.Logf("N=%d: median %.2f, interval [%.2f, %.2f], ±%.2f %%", n, s.Median, s.Lo, s.Hi, 100*w)
		if !(w < prev) {
			t.Errorf("N=%d: half width %v, not below %v", n, w, prev)
		}
		prev = w
	}
}

func TestSummarizeErrors(t *testing.T) {
	ok := []float64{1, 2, 3}
	for _, tc := range []struct {
		name      string
		xs        []float64
		level     float64
		resamples int
		is        error
	}{
		{"nil", nil, 0.95, 100, ErrNoData},
		{"empty", []float64{}, 0.95, 100, ErrNoData},
		{"level 0", ok, 0, 100, nil},
		{"level 1", ok, 1, 100, nil},
		{"level negative", ok, -0.5, 100, nil},
		{"level NaN", ok, math.NaN(), 100, nil},
		{"no resamples", ok, 0.95, 0, nil},
		{"negative resamples", ok, 0.95, -1, nil},
		{"NaN", []float64{1, math.NaN()}, 0.95, 100, nil},
		{"+Inf", []float64{math.Inf(1), 1}, 0.95, 100, nil},
		{"-Inf", []float64{math.Inf(-1)}, 0.95, 100, nil},
	} {
		_, err := Summarize(tc.xs, tc.level, tc.resamples, 1)
		if err == nil {
			t.Errorf("%s: no error", tc.name)
			continue
		}
		if tc.is != nil && !errors.Is(err, tc.is) {
			t.Errorf("%s: error %q is not %q", tc.name, err, tc.is)
		}
	}
}

func TestHalfWidth(t *testing.T) {
	for _, tc := range []struct {
		s    Summary
		want float64
	}{
		{Summary{Median: 100, Lo: 98, Hi: 101}, 0.02},
		{Summary{Median: 100, Lo: 99.5, Hi: 103}, 0.03},
		{Summary{Median: -100, Lo: -102, Hi: -99}, 0.02},
		{Summary{Median: 0, Lo: -1, Hi: 1}, math.Inf(1)},
		{Summary{Median: 0}, math.Inf(1)},
	} {
		if got := tc.s.HalfWidth(); !(got == tc.want || math.Abs(got-tc.want) <= 1e-12) {
			t.Errorf("HalfWidth of %+v = %v, want %v", tc.s, got, tc.want)
		}
	}
}

func TestRatioCI(t *testing.T) {
	a := normalSample(25, 200, 10, 3)
	ratio, lo, hi, err := RatioCI(a, a, 0.95, 2000, 9)
	if err != nil {
		t.Fatal(err)
	}
	if ratio != 1 || !(lo <= 1 && 1 <= hi) || !(lo < hi) {
		t.Errorf("RatioCI(a, a) = %v [%v, %v], want 1 inside a proper interval", ratio, lo, hi)
	}

	double := slices.Clone(a)
	for i := range double {
		double[i] *= 2
	}
	ratio, lo, hi, err = RatioCI(double, a, 0.95, 2000, 9)
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(ratio-2) > 1e-15 || !(lo < 2 && 2 < hi) {
		t.Errorf("RatioCI(2a, a) = %v [%v, %v], want 2 inside", ratio, lo, hi)
	}
	r2, lo2, hi2, _ := RatioCI(double, a, 0.95, 2000, 9)
	if r2 != ratio || lo2 != lo || hi2 != hi {
		t.Error("same seed, different results")
	}

	// Different lengths, one value each side.
	ratio, lo, hi, err = RatioCI([]float64{3}, []float64{2, 2, 2, 2}, 0.9, 100, 1)
	if err != nil || ratio != 1.5 || lo != 1.5 || hi != 1.5 {
		t.Errorf("RatioCI of constants = %v [%v, %v], %v; want 1.5 [1.5, 1.5]", ratio, lo, hi, err)
	}
}

func TestRatioCIErrors(t *testing.T) {
	ok := []float64{1, 2, 3}
	for _, tc := range []struct {
		name  string
		a, b  []float64
		level float64
		n     int
		is    error
	}{
		{"empty a", nil, ok, 0.95, 100, ErrNoData},
		{"empty b", ok, []float64{}, 0.95, 100, ErrNoData},
		{"NaN in b", ok, []float64{math.NaN()}, 0.95, 100, nil},
		{"Inf in a", []float64{math.Inf(1)}, ok, 0.95, 100, nil},
		{"level", ok, ok, 1.5, 100, nil},
		{"resamples", ok, ok, 0.95, 0, nil},
		{"median of b 0", ok, []float64{-1, 0, 1}, 0.95, 100, nil},
		// The median of b is 1, but some resamples draw 0 twice.
		{"resample of b 0", ok, []float64{0, 1, 2}, 0.95, 1000, nil},
	} {
		_, _, _, err := RatioCI(tc.a, tc.b, tc.level, tc.n, 1)
		if err == nil {
			t.Errorf("%s: no error", tc.name)
			continue
		}
		if tc.is != nil && !errors.Is(err, tc.is) {
			t.Errorf("%s: error %q is not %q", tc.name, err, tc.is)
		}
	}
}

func TestResampleMedian(t *testing.T) {
	// Every resample median of 1..n lies in [1, n] and is a value of the
	// sample or a midpoint of two; over many draws the mean of the
	// resample medians is near the sample median.
	for _, n := range []int{2, 3, 10, 11} {
		sorted := make([]float64, n)
		for i := range sorted {
			sorted[i] = float64(i + 1)
		}
		src := rand.NewPCG(1, 2)
		counts := make([]int, n)
		var sum float64
		const draws = 20000
		for range draws {
			m := resampleMedian(src, sorted, counts)
			if m < 1 || m > float64(n) || math.Mod(2*m, 1) != 0 {
				t.Fatalf("n=%d: resample median %v", n, m)
			}
			sum += m
		}
		if got, want := sum/draws, median(sorted); math.Abs(got-want) > 0.05*want {
			t.Errorf("n=%d: mean resample median %v, sample median %v", n, got, want)
		}
	}
}

func BenchmarkSummarize(b *testing.B) {
	xs := normalSample(30, 100, 5, 1)
	for b.Loop() {
		if _, err := Summarize(xs, 0.95, 2000, 1); err != nil {
			b.Fatal(err)
		}
	}
}
