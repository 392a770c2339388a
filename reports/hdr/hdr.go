package hdr

import (
	"iter"
	"math"
	"math/bits"
)

const (
	// subBits is the precision: each power of two above exactLimit is
	// split into 2^subBits buckets.
	subBits = 8
	// exactBits is the bit length of the values counted exactly, one
	// bucket per value: 0 to exactLimit-1.
	exactBits  = subBits + 1
	exactLimit = 1 << exactBits
	exactMask  = exactLimit - 1
	// topBits is the bit length of the largest value with a bucket of
	// its own; larger values share the last bucket.
	topBits  = 41
	maxValue = 1<<topBits - 1
	// numBuckets is one more than the index of maxValue:
	// (topBits-exactBits)<<subBits + exactLimit-1.
	numBuckets = (topBits - subBits + 1) << subBits
)

// Percentiles are the quantiles that reports print.
var Percentiles = []float64{0.50, 0.90, 0.99, 0.999, 0.9999, 0.99999}

// Histogram counts values in log-linear buckets. See the package
// documentation for its precision and memory.
type Histogram struct {
	counts [numBuckets]uint64
	count  uint64
	// sumHi and sumLo are the 128-bit sum of the recorded values.
	sumHi, sumLo uint64
	// minInv is math.MaxInt64 minus the minimum, so that the zero value
	// stands for "no minimum yet".
	minInv int64
	max    int64
}

// Bucket is a range of values [Low, High] and the number of recorded values
// that fell in it.
type Bucket struct {
	Low, High int64
	Count     uint64
}

// New returns an empty histogram.
func New() *Histogram {
	return new(Histogram)
}

// index returns the bucket of u, which must be at most maxValue: values
// below exactLimit index themselves; a larger value of bit length L drops
// its L-exactBits low bits and keeps 2^subBits..2^(subBits+1)-1 as the
// sub-bucket.
func index(u uint64) uint {
	s := uint(bits.Len64(u|exactMask)) - exactBits
	return s<<subBits + uint(u>>s)
}

// bounds returns the lowest and highest value counted in bucket i.
func bounds(i int) (low, high int64) {
	if i < exactLimit {
		return int64(i), int64(i)
	}
	s := uint(i>>subBits) - 1
	low = int64(i-int(s<<subBits)) << s
	return low, low + 1<<s - 1
}

// Record counts one value. Negative values count as 0.
func (h *Histogram) Record(v int64) {
	v = max(v, 0)
	u := min(uint64(v), maxValue)
	// index(u), written out to keep Record within the compiler's
	// inlining budget.
	s := uint(bits.Len64(u|exactMask)) - exactBits
	h.counts[s<<subBits+uint(u>>s)]++
	h.count++
	var carry uint64
	h.sumLo, carry = bits.Add64(h.sumLo, uint64(v), 0)
	h.sumHi += carry
	h.max = max(h.max, v)
	h.minInv = max(h.minInv, math.MaxInt64-v)
}

// RecordN counts n occurrences of one value. Negative values count as 0.
func (h *Histogram) RecordN(v int64, n uint64) {
	if n == 0 {
		return
	}
	v = max(v, 0)
	h.counts[index(min(uint64(v), maxValue))] += n
	h.count += n
	hi, lo := bits.Mul64(uint64(v), n)
	var carry uint64
	h.sumLo, carry = bits.Add64(h.sumLo, lo, 0)
	h.sumHi += hi + carry
	h.max = max(h.max, v)
	h.minInv = max(h.minInv, math.MaxInt64-v)
}

// Count returns the number of recorded values.
func (h *Histogram) Count() uint64 {
	return h.count
}

// Min returns the smallest recorded value, or 0 if there is none.
func (h *Histogram) Min() int64 {
	if h.count == 0 {
		return 0
	}
	return math.MaxInt64 - h.minInv
}

// Max returns the largest recorded value, or 0 if there is none.
func (h *Histogram) Max() int64 {
	return h.max
}

// Mean returns the exact mean of the recorded values (up to float64
// rounding), or 0 if there is none.
func (h *Histogram) Mean() float64 {
	if h.count == 0 {
		return 0
	}
	sum := float64(h.sumHi)*0x1p64 + float64(h.sumLo)
	return sum / float64(h.count)
}

// Quantile returns the value at quantile q of the recorded values: the
// highest value of the bucket that holds the value of rank ceil(q*Count)
// (at least 1) in increasing order, clamped to [Min, Max]. Rank 1 gives
// Min and rank Count gives Max exactly, so Quantile(0) == Min() and
// Quantile(1) == Max(). A q outside [0, 1] is taken as the nearer end, NaN
// as 0. An empty histogram returns 0.
func (h *Histogram) Quantile(q float64) int64 {
	if h.count == 0 {
		return 0
	}
	rank := h.rank(q)
	if rank <= 1 {
		return h.Min()
	}
	if rank >= h.count {
		return h.max
	}
	var seen uint64
	for i, c := range h.counts {
		seen += c
		if seen >= rank {
			_, high := bounds(i)
			return min(max(high, h.Min()), h.max)
		}
	}
	return h.max
}

// rank returns ceil(q*Count) limited to [1, Count].
func (h *Histogram) rank(q float64) uint64 {
	if !(q > 0) {
		return 1
	}
	if q >= 1 {
		return h.count
	}
	r := math.Ceil(q * float64(h.count))
	if r >= float64(h.count) {
		return h.count
	}
	return max(uint64(r), 1)
}

// Merge adds the values recorded in o to h. o is left unchanged (unless it
// is h, which then counts everything twice).
func (h *Histogram) Merge(o *Histogram) {
	if o == nil || o.count == 0 {
		return
	}
	for i, c := range o.counts {
		h.counts[i] += c
	}
	h.count += o.count
	var carry uint64
	h.sumLo, carry = bits.Add64(h.sumLo, o.sumLo, 0)
	h.sumHi += o.sumHi + carry
	h.max = max(h.max, o.max)
	h.minInv = max(h.minInv, o.minInv)
}

// Reset empties the histogram.
func (h *Histogram) Reset() {
	clear(h.counts[:])
	h.count, h.sumHi, h.sumLo, h.minInv, h.max = 0, 0, 0, 0, 0
}

// All yields the non-empty buckets in increasing order of values. The last
// bucket also holds every value above its range; when it does, its High is
// Max.
func (h *Histogram) All() iter.Seq[Bucket] {
	return func(yield func(Bucket) bool) {
		for i, c := range h.counts {
			if c == 0 {
				continue
			}
			low, high := bounds(i)
			if i == numBuckets-1 {
				high = max(high, h.max)
			}
			if !yield(Bucket{Low: low, High: high, Count: c}) {
				return
			}
		}
	}
}
