package estimate

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"
)

const (
	testAlpha = 2e-6 // seconds
	testBeta  = 10e9 // bytes per second
)

// sweep returns the sizes 1 B to 4 MiB by powers of two and their model
// times, each multiplied by 1+noise·z with z standard normal.
func sweep(noise float64, seed uint64) (sizes, seconds []float64) {
	rng := rand.New(rand.NewPCG(seed, 1))
	for n := 1.0; n <= 1<<22; n *= 2 {
		sizes = append(sizes, n)
		seconds = append(seconds, (testAlpha+n/testBeta)*(1+noise*rng.NormFloat64()))
	}
	return sizes, seconds
}

func relErr(got, want float64) float64 {
	return math.Abs(got-want) / math.Abs(want)
}

func TestFitHockneyExact(t *testing.T) {
	sizes, seconds := sweep(0, 0)
	h, err := FitHockney(sizes, seconds)
	if err != nil {
		t.Fatal(err)
	}
	if relErr(h.Alpha, testAlpha) > 1e-9 || relErr(h.Beta, testBeta) > 1e-9 ||
		relErr(h.NHalf, testAlpha*testBeta) > 1e-9 || math.Abs(h.R2-1) > 1e-9 || h.Points != len(sizes) {
		t.Errorf("fit = %+v, want α %v, β %v, NHalf %v, R2 1, %d points",
			h, testAlpha, testBeta, testAlpha*testBeta, len(sizes))
	}
	for _, n := range []float64{1, 20000, 1 << 30} {
		want := testAlpha + n/testBeta
		if relErr(h.Time(n), want) > 1e-9 {
			t.Errorf("Time(%v) = %v, want %v", n, h.Time(n), want)
		}
		if relErr(h.Bandwidth(n), n/want) > 1e-9 {
			t.Errorf("Bandwidth(%v) = %v, want %v", n, h.Bandwidth(n), n/want)
		}
	}
	if relErr(h.Bandwidth(h.NHalf), h.Beta/2) > 1e-9 {
		t.Errorf("Bandwidth(NHalf) = %v, want β/2 = %v", h.Bandwidth(h.NHalf), h.Beta/2)
	}
}

func TestFitHockneyNoise(t *testing.T) {
	for seed := range uint64(20) {
		sizes, seconds := sweep(0.01, seed)
		h, err := FitHockney(sizes, seconds)
		if err != nil {
			t.Fatal(err)
		}
		if relErr(h.Alpha, testAlpha) > 0.02 || relErr(h.Beta, testBeta) > 0.03 || h.R2 < 0.99 {
			t.Errorf("seed %d: fit = %+v, want α ≈ %v, β ≈ %v", seed, h, testAlpha, testBeta)
		}
	}
}

func TestFitHockneyNegativeAlpha(t *testing.T) {
	// Times a little below pure transfer time: the line crosses 0 below
	// zero latency.
	sizes := []float64{1000, 2000, 4000, 8000}
	seconds := make([]float64, len(sizes))
	for i, n := range sizes {
		seconds[i] = n/testBeta - 1e-8
	}
	h, err := FitHockney(sizes, seconds)
	if err != nil {
		t.Fatal(err)
	}
	if h.Alpha != 0 || h.NHalf != 0 || relErr(h.Beta, testBeta) > 1e-9 {
		t.Errorf("fit = %+v, want α 0, NHalf 0, β %v", h, testBeta)
	}
	if !(h.R2 < 1) {
		t.Errorf("R2 = %v for the clamped model, want below 1", h.R2)
	}
}

func TestFitHockneyErrors(t *testing.T) {
	inf, nan := math.Inf(1), math.NaN()
	for _, tc := range []struct {
		name           string
		sizes, seconds []float64
		is             error
	}{
		{"no points", nil, nil, nil},
		{"one point", []float64{1}, []float64{1}, nil},
		{"lengths", []float64{1, 2, 3}, []float64{1, 2}, nil},
		{"zero size", []float64{0, 2}, []float64{1, 2}, nil},
		{"negative size", []float64{1, -2}, []float64{1, 2}, nil},
		{"infinite size", []float64{1, inf}, []float64{1, 2}, nil},
		{"NaN size", []float64{nan, 2}, []float64{1, 2}, nil},
		{"zero time", []float64{1, 2}, []float64{0, 2}, nil},
		{"negative time", []float64{1, 2}, []float64{1, -2}, nil},
		{"NaN time", []float64{1, 2}, []float64{1, nan}, nil},
		{"infinite time", []float64{1, 2}, []float64{inf, 2}, nil},
		{"one size", []float64{8, 8, 8}, []float64{1, 2, 3}, nil},
		{"flat", []float64{1, 2, 4}, []float64{1, 1, 1}, ErrNoFit},
		{"falling", []float64{1, 2, 4}, []float64{3, 2, 1}, ErrNoFit},
	} {
		_, err := FitHockney(tc.sizes, tc.seconds)
		if err == nil {
			t.Errorf("%s: no error", tc.name)
			continue
		}
		if tc.is != nil && !errors.Is(err, tc.is) {
			t.Errorf("%s: error %q is not %q", tc.name, err, tc.is)
		}
		if tc.is == nil && errors.Is(err, ErrNoFit) {
			t.Errorf("%s: invalid input reported as %q", tc.name, err)
		}
	}
}

func TestFitHockneyBW(t *testing.T) {
	sizes, seconds := sweep(0.01, 3)
	bw := make([]float64, len(sizes))
	for i := range sizes {
		bw[i] = sizes[i] / seconds[i]
	}
	want, err := FitHockney(sizes, seconds)
	if err != nil {
		t.Fatal(err)
	}
	got, err := FitHockneyBW(sizes, bw)
	if err != nil {
		t.Fatal(err)
	}
	if relErr(got.Alpha, want.Alpha) > 1e-9 || relErr(got.Beta, want.Beta) > 1e-9 ||
		relErr(got.NHalf, want.NHalf) > 1e-9 || math.Abs(got.R2-want.R2) > 1e-9 || got.Points != want.Points {
		t.Errorf("FitHockneyBW = %+v, FitHockney = %+v", got, want)
	}

	if _, err := FitHockneyBW(sizes, bw[1:]); err == nil {
		t.Error("lengths differ: no error")
	}
	for name, bad := range map[string][]float64{
		"zero":     {0, 1},
		"negative": {1, -1},
		"infinite": {math.Inf(1), 1},
		"NaN":      {math.NaN(), 1},
	} {
		if _, err := FitHockneyBW([]float64{1, 2}, bad); err == nil {
			t.Errorf("%s bandwidth: no error", name)
		}
	}
	if _, err := FitHockneyBW([]float64{-1, 2}, []float64{1, 1}); err == nil {
		t.Error("negative size: no error")
	}
}
