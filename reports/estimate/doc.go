// Package estimate owns the statistics that summarise repeated benchmark
// runs and message-size sweeps: the median of repeated runs with a
// bootstrap confidence interval (Summarize), the ratio of two medians with
// its interval for side-by-side comparisons (RatioCI), and a fit of
// Hockney's latency-bandwidth model to a sweep (FitHockney, FitHockneyBW).
// Means, standard deviations, quantiles and regressions are computed with
// gonum.org/v1/gonum/stat.
//
// # Bootstrap
//
// The intervals are percentile bootstraps: the data are resampled with
// replacement, the statistic (a median, or a ratio of medians) is taken of
// each resample, and the interval at confidence level L runs from the
// (1-L)/2 to the 1-(1-L)/2 quantile of those statistics, interpolated
// linearly (stat.LinInterp). The median of an even number of values is the
// midpoint of the two middle ones. Resampling draws from math/rand/v2's
// PCG generator seeded by the caller, so the same data, arguments and seed
// always give the same interval.
//
// # Hockney model
//
// Hockney's model gives the time of an n-byte message as t(n) = α + n/β: a
// fixed latency α and an asymptotic bandwidth β. FitHockney fits it by
// weighted least squares with weights proportional to 1/t², which
// minimises relative rather than absolute residuals: without them the
// largest messages, whose times are orders of magnitude longer, would
// decide the fit alone and leave α to their noise. A fitted α below 0 is
// reported as 0 (β is kept, and NHalf is then 0).
//
// # Concurrency and lifetime
//
// Every function is a pure function of its arguments: there is no package
// state, inputs are never modified, and the functions are safe to call from
// several goroutines. Nothing needs closing.
package estimate
