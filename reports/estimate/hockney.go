package estimate

import (
	"errors"
	"fmt"
	"math"

	"gonum.org/v1/gonum/stat"
)

// ErrNoFit is returned when a sweep's times do not grow with the message
// size, so that the fitted bandwidth is not positive and finite.
var ErrNoFit = errors.New("no Hockney fit")

// Hockney is Hockney's model of a message-size sweep: a message of n bytes
// takes t(n) = Alpha + n/Beta seconds.
type Hockney struct {
	// Alpha is the latency in seconds, never below 0.
	Alpha float64
	// Beta is the asymptotic bandwidth in bytes per second.
	Beta float64
	// NHalf is Alpha·Beta, the message size in bytes that reaches half of
	// Beta.
	NHalf float64
	// R2 is the coefficient of determination of the model, with the
	// fit's weights.
	R2 float64
	// Points is the number of points fitted.
	Points int
}

// Time returns the model's time in seconds for a message of n bytes.
func (h Hockney) Time(n float64) float64 {
	return h.Alpha + n/h.Beta
}

// Bandwidth returns the model's bandwidth in bytes per second for messages
// of n bytes: n / Time(n).
func (h Hockney) Bandwidth(n float64) float64 {
	return n / h.Time(n)
}

// FitHockney fits Hockney's model to message sizes in bytes and their
// times in seconds, by weighted least squares on t = α + n/β with weights
// proportional to 1/t², so that every point counts by its relative error
// and small messages weigh as much as large ones (see the package
// documentation). R2 is stat.RSquared with the same weights, for the model
// as returned (with α clamped to 0 if it is). A fitted α below 0 is
// clamped to 0, which makes NHalf 0.
//
// It fails for fewer than 2 points, slices of different lengths, sizes or
// times that are not positive and finite, or fewer than 2 distinct sizes,
// and with ErrNoFit when the fitted slope is not positive (times that do
// not grow with size) or the bandwidth it gives is not finite.
func FitHockney(sizes, seconds []float64) (Hockney, error) {
	n := len(sizes)
	if n != len(seconds) {
		return Hockney{}, fmt.Errorf("estimate: %d sizes and %d times", n, len(seconds))
	}
	if n < 2 {
		return Hockney{}, fmt.Errorf("estimate: a Hockney fit needs at least 2 points, have %d", n)
	}
	distinct := false
	for i := range n {
		if !positive(sizes[i]) {
			return Hockney{}, fmt.Errorf("estimate: size %d is %v, not positive and finite", i, sizes[i])
		}
		if !positive(seconds[i]) {
			return Hockney{}, fmt.Errorf("estimate: time %d is %v, not positive and finite", i, seconds[i])
		}
		distinct = distinct || sizes[i] != sizes[0]
	}
	if !distinct {
		return Hockney{}, fmt.Errorf("estimate: a Hockney fit needs at least 2 distinct sizes, all are %v", sizes[0])
	}

	// Weights (tmin/t)², scaled to sum to n: proportional to 1/t², and
	// clear of gonum's unbiased estimators dividing by (sum of weights - 1).
	tmin := math.Inf(1)
	for _, t := range seconds {
		tmin = min(tmin, t)
	}
	weights := make([]float64, n)
	var sum float64
	for i, t := range seconds {
		r := tmin / t
		weights[i] = r * r
		sum += weights[i]
	}
	for i := range weights {
		weights[i] *= float64(n) / sum
	}

	alpha, slope := stat.LinearRegression(sizes, seconds, weights, false)
	if !(slope > 0) || math.IsNaN(alpha) || math.IsInf(alpha, 0) {
		return Hockney{}, fmt.Errorf("estimate: %w: slope %v s/byte, intercept %v s", ErrNoFit, slope, alpha)
	}
	beta := 1 / slope
	if math.IsInf(beta, 0) {
		return Hockney{}, fmt.Errorf("estimate: %w: slope %v s/byte gives an infinite bandwidth", ErrNoFit, slope)
	}
	alpha = max(alpha, 0)
	return Hockney{
		Alpha:  alpha,
		Beta:   beta,
		NHalf:  alpha * beta,
		R2:     stat.RSquared(sizes, seconds, weights, alpha, slope),
		Points: n,
	}, nil
}

// FitHockneyBW fits Hockney's model to message sizes in bytes and their
// bandwidths in bytes per second, converted to times n/bw; see FitHockney.
// Bandwidths must be positive and finite.
func FitHockneyBW(sizes, bytesPerSecond []float64) (Hockney, error) {
	if len(sizes) != len(bytesPerSecond) {
		return Hockney{}, fmt.Errorf("estimate: %d sizes and %d bandwidths", len(sizes), len(bytesPerSecond))
	}
	seconds := make([]float64, len(sizes))
	for i, bw := range bytesPerSecond {
		if !positive(bw) {
			return Hockney{}, fmt.Errorf("estimate: bandwidth %d is %v, not positive and finite", i, bw)
		}
		seconds[i] = sizes[i] / bw
	}
	return FitHockney(sizes, seconds)
}

// positive reports whether x is positive and finite.
func positive(x float64) bool {
	return x > 0 && !math.IsInf(x, 1)
}
