// Package hdr owns a latency histogram in the manner of HdrHistogram:
// log-linear buckets of fixed memory, filled inside a benchmark's timed
// loop without allocating, and read afterwards for quantiles, the mean and
// the shape of the distribution.
//
// # Values and precision
//
// A Histogram counts non-negative int64 values: nanoseconds, or ticks of
// any clock. Negative values count as 0. Values below 512 each have a
// bucket of their own and are exact. Above that, every power of two
// [2^k, 2^(k+1)) is split into 256 buckets of equal width 2^(k-8), so a
// value is known to within 1/256 (about 0.4 %) of itself. Buckets reach
// up to 2^41-1 (about 36 minutes in nanoseconds); larger values are
// counted in the last bucket. The exact minimum, maximum, count and sum
// are kept apart from the buckets, so Min, Max and Mean are exact whatever
// the values.
//
// Quantile returns the upper edge of the bucket that holds the sample of
// the requested rank (the "highest equivalent value"), clamped to
// [Min, Max]: the result is never below the true sample and exceeds it by
// at most 1/256 of it. The ranks 1 and Count are answered with the exact
// Min and Max.
//
// # Memory
//
// A Histogram is one fixed block of 69,672 bytes: 8,704 bucket counters of
// 8 bytes and 40 bytes of count, sum, minimum and maximum. Record,
// RecordN, Merge and Reset allocate nothing; Record is a handful of
// instructions and is inlined by the compiler. Pass histograms by pointer:
// copying one copies the whole block.
//
// # Concurrency and lifetime
//
// A Histogram is not safe for concurrent use: give each goroutine its own
// and Merge them afterwards. The zero value is an empty histogram ready to
// use, and New returns one on the heap. Nothing needs closing.
package hdr
