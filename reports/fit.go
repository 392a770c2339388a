package reports

import (
	"fmt"
	"io"
	"slices"

	"github.com/pvperf/pvperf/reports/estimate"
)

// Fit is Hockney's model t(n) = α + n/β fitted to a sweep of message
// sizes (-a): from the average bandwidth of each size for a bandwidth
// test (t = n / BW, the time per message in a stream), from t_typical
// for a latency test. NHalfBytes is n½ = α·β, the size that reaches half
// of β.
type Fit struct {
	// Metric names the values fitted: "average_MiB_per_s" or
	// "typical_us".
	Metric     string `json:"metric"`
	AlphaUs    Num    `json:"alpha_us"`
	BetaMiBps  Num    `json:"beta_MiB_per_s"`
	BetaGbps   Num    `json:"beta_Gb_per_s"`
	NHalfBytes Num    `json:"n_half_bytes"`
	RSquared   Num    `json:"r_squared"`
	Points     int    `json:"points"`
	MinSize    uint64 `json:"min_size_bytes"`
	MaxSize    uint64 `json:"max_size_bytes"`
}

// FitSweep fits Hockney's model to the primary rows of a run of at least
// three message sizes; nil when the run has fewer sizes or its times do not
// grow with the size (estimate.ErrNoFit).
func FitSweep(r *Run) (*Fit, error) {
	rows := r.Primary()
	if len(rows) < 3 {
		return nil, nil
	}
	var sizes, secs []float64
	metric := "average_MiB_per_s"
	for _, row := range rows {
		switch {
		case row.BW != nil && row.BW.AverageMiBps.Valid() && row.BW.AverageMiBps > 0:
			sizes = append(sizes, float64(row.Size))
			secs = append(secs, float64(row.Size)/(float64(row.BW.AverageMiBps)*MiBFactor))
		case row.Latency != nil && row.Latency.TypicalUs.Valid() && row.Latency.TypicalUs > 0:
			metric = "typical_us"
			sizes = append(sizes, float64(row.Size))
			secs = append(secs, float64(row.Latency.TypicalUs)*1e-6)
		}
	}
	if len(sizes) < 3 {
		return nil, nil
	}
	h, err := estimate.FitHockney(sizes, secs)
	if err != nil {
		return nil, fmt.Errorf("fit sweep: %w", err)
	}
	return &Fit{
		Metric:     metric,
		AlphaUs:    Num(h.Alpha * 1e6),
		BetaMiBps:  Num(h.Beta / MiBFactor),
		BetaGbps:   Num(h.Beta / GbitFactor),
		NHalfBytes: Num(h.NHalf),
		RSquared:   Num(h.R2),
		Points:     h.Points,
		MinSize:    uint64(slices.Min(sizes)),
		MaxSize:    uint64(slices.Max(sizes)),
	}, nil
}

// Model returns the fitted model in seconds and bytes per second.
func (f *Fit) Model() estimate.Hockney {
	return estimate.Hockney{Alpha: float64(f.AlphaUs) * 1e-6, Beta: float64(f.BetaMiBps) * MiBFactor,
		NHalf: float64(f.NHalfBytes), R2: float64(f.RSquared), Points: f.Points}
}

// WriteFit prints the fit after perftest's text (gbits: β in Gb/s).
func WriteFit(w io.Writer, f *Fit, gbits bool) error {
	what := "the average bandwidth of each size, t(n) = n / BW"
	if f.Metric == "typical_us" {
		what = "t_typical of each size"
	}
	beta := fmt.Sprintf("%.2f MiB/sec", float64(f.BetaMiBps))
	if gbits {
		beta = fmt.Sprintf("%.2f Gb/sec", float64(f.BetaGbps))
	}
	s := fmt.Sprintf(" Hockney model t(n) = α + n/β fitted to %s, %d sizes from %d to %d bytes (R² %.4f):\n"+
		" α %.3f usec   β %s   n½ %.0f bytes\n", what, f.Points, f.MinSize, f.MaxSize, float64(f.RSquared),
		float64(f.AlphaUs), beta, float64(f.NHalfBytes))
	return writeString(w, s+ResultLine)
}
