package hdr

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
)

// exactQuantile returns the sample of rank ceil(q*n) (at least 1) of sorted.
func exactQuantile(sorted []int64, q float64) int64 {
	r := max(int(math.Ceil(q*float64(len(sorted)))), 1)
	return sorted[min(r, len(sorted))-1]
}

func TestBucketLayout(t *testing.T) {
	// Every bucket is contiguous with the next, maps back to itself at
	// both edges and is at most 1/256 of its low edge wide.
	next := int64(0)
	for i := range numBuckets {
		low, high := bounds(i)
		if low != next {
			t.Fatalf("bucket %d starts at %d, want %d", i, low, next)
		}
		if high < low {
			t.Fatalf("bucket %d: [%d, %d]", i, low, high)
		}
		if got := index(uint64(low)); got != uint(i) {
			t.Fatalf("index(%d) = %d, want %d", low, got, i)
		}
		if got := index(uint64(high)); got != uint(i) {
			t.Fatalf("index(%d) = %d, want %d", high, got, i)
		}
		if i < exactLimit && high != low {
			t.Fatalf("bucket %d is not exact: [%d, %d]", i, low, high)
		}
		if w := high - low + 1; w > 1 && float64(w) > float64(low)/256 {
			t.Fatalf("bucket %d: width %d for low edge %d", i, w, low)
		}
		next = high + 1
	}
	if next-1 != maxValue {
		t.Fatalf("last bucket ends at %d, want %d", next-1, int64(maxValue))
	}
	if maxValue < 1<<40 {
		t.Fatalf("buckets end below 2^40")
	}
	if size := reflect.TypeFor[Histogram]().Size(); size != 69672 {
		t.Errorf("Histogram is %d bytes, the documentation says 69672", size)
	}
}

func TestSmallValuesExact(t *testing.T) {
	h := New()
	for v := range int64(exactLimit) {
		h.Record(v)
	}
	n := float64(exactLimit)
	for r := 1; r <= exactLimit; r++ {
		if got := h.Quantile(float64(r) / n); got != int64(r-1) {
			t.Fatalf("Quantile(%d/%d) = %d, want %d", r, exactLimit, got, r-1)
		}
	}
	if got, want := h.Mean(), (n-1)/2; got != want {
		t.Errorf("Mean = %v, want %v", got, want)
	}
	for b := range h.All() {
		if b.Low != b.High || b.Count != 1 {
			t.Fatalf("bucket %+v, want one exact value", b)
		}
	}
}

func TestRelativeError(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	const n = 200_000
	xs := make([]int64, n)
	h := New()
	var sum float64
	for i := range xs {
		// Log-uniform over [1, 2^40].
		v := int64(math.Exp2(rng.Float64() * 40))
		xs[i] = v
		sum += float64(v)
		h.Record(v)
	}
	slices.Sort(xs)
	if h.Count() != n || h.Min() != xs[0] || h.Max() != xs[n-1] {
		t.Fatalf("Count, Min, Max = %d, %d, %d; want %d, %d, %d",
			h.Count(), h.Min(), h.Max(), n, xs[0], xs[n-1])
	}
	if got, want := h.Mean(), sum/n; math.Abs(got-want) > 1e-9*want {
		t.Errorf("Mean = %v, want %v", got, want)
	}
	qs := append([]float64{0, 1e-5, 0.001, 0.01, 0.1, 0.25, 0.333, 0.75, 1}, Percentiles...)
	for i := range 1000 {
		qs = append(qs, float64(i)/1000)
	}
	for _, q := range qs {
		want := exactQuantile(xs, q)
		got := h.Quantile(q)
		if got < want || float64(got-want) > float64(want)/256 {
			t.Errorf("Quantile(%v) = %d, exact %d: relative error %.3g",
				q, got, want, float64(got-want)/float64(want))
		}
	}
}

func TestQuantileEnds(t *testing.T) {
	h := New()
	for _, v := range []int64{1001, 5000, 123456789, 77777} {
		h.Record(v)
	}
	if got := h.Quantile(0); got != h.Min() || got != 1001 {
		t.Errorf("Quantile(0) = %d, Min = %d, want 1001", got, h.Min())
	}
	if got := h.Quantile(1); got != h.Max() || got != 123456789 {
		t.Errorf("Quantile(1) = %d, Max = %d, want 123456789", got, h.Max())
	}
	for _, q := range []float64{-1, math.Inf(-1), math.NaN()} {
		if got := h.Quantile(q); got != h.Min() {
			t.Errorf("Quantile(%v) = %d, want Min %d", q, got, h.Min())
		}
	}
	if got := h.Quantile(2); got != h.Max() {
		t.Errorf("Quantile(2) = %d, want Max %d", got, h.Max())
	}
	// Rank 2 of 4: 5000 is in bucket [4992, 5007].
	if got := h.Quantile(0.5); got != 5007 {
		t.Errorf("Quantile(0.5) = %d, want 5007", got)
	}
}

func TestEmpty(t *testing.T) {
	for name, h := range map[string]*Histogram{"New": New(), "zero": {}} {
		if h.Count() != 0 || h.Min() != 0 || h.Max() != 0 || h.Mean() != 0 {
			t.Errorf("%s: Count, Min, Max, Mean = %d, %d, %d, %v",
				name, h.Count(), h.Min(), h.Max(), h.Mean())
		}
		for _, q := range []float64{0, 0.5, 1} {
			if got := h.Quantile(q); got != 0 {
				t.Errorf("%s: Quantile(%v) = %d", name, q, got)
			}
		}
		for b := range h.All() {
			t.Errorf("%s: bucket %+v", name, b)
		}
	}
	var h Histogram
	h.Record(42)
	if h.Min() != 42 || h.Max() != 42 || h.Quantile(0.5) != 42 {
		t.Errorf("zero value after Record(42): Min %d, Max %d", h.Min(), h.Max())
	}
}

func TestNegative(t *testing.T) {
	h := New()
	h.Record(-5)
	h.RecordN(math.MinInt64, 3)
	if h.Count() != 4 || h.Min() != 0 || h.Max() != 0 || h.Mean() != 0 || h.Quantile(0.5) != 0 {
		t.Errorf("Count, Min, Max, Mean, median = %d, %d, %d, %v, %d; want 4 and zeros",
			h.Count(), h.Min(), h.Max(), h.Mean(), h.Quantile(0.5))
	}
	h.Record(10)
	if h.Min() != 0 || h.Max() != 10 {
		t.Errorf("Min, Max = %d, %d; want 0, 10", h.Min(), h.Max())
	}
}

func TestAboveTop(t *testing.T) {
	h := New()
	h.Record(1 << 50)
	h.Record(math.MaxInt64)
	h.Record(math.MaxInt64)
	if h.Min() != 1<<50 || h.Max() != math.MaxInt64 {
		t.Errorf("Min, Max = %d, %d", h.Min(), h.Max())
	}
	if got, want := h.Mean(), (float64(1<<50)+2*float64(math.MaxInt64))/3; got != want {
		t.Errorf("Mean = %v, want %v", got, want)
	}
	// Both values share the last bucket; rank 2 answers with its upper
	// edge, clamped to [Min, Max].
	if got := h.Quantile(0.5); got != 1<<50 {
		t.Errorf("Quantile(0.5) = %d, want %d", got, int64(1<<50))
	}
	var bs []Bucket
	for b := range h.All() {
		bs = append(bs, b)
	}
	low, _ := bounds(numBuckets - 1)
	want := []Bucket{{Low: low, High: math.MaxInt64, Count: 3}}
	if !slices.Equal(bs, want) {
		t.Errorf("All = %+v, want %+v", bs, want)
	}
}

func TestRecordN(t *testing.T) {
	a, b := New(), New()
	for _, v := range []int64{0, 3, 700, 1 << 30, 1 << 45, -1} {
		a.RecordN(v, 5)
		for range 5 {
			b.Record(v)
		}
	}
	a.RecordN(99, 0)
	if *a != *b {
		t.Error("RecordN(v, 5) differs from five Record(v)")
	}
	// The sum carries into its high word.
	h := New()
	h.RecordN(math.MaxInt64, 1<<40)
	if got, want := h.Mean(), float64(math.MaxInt64); got != want {
		t.Errorf("Mean = %v, want %v", got, want)
	}
}

func TestMerge(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	a, b, both := New(), New(), New()
	for i := range 10_000 {
		v := rng.Int64N(1 << 36)
		if i%3 == 0 {
			a.Record(v)
		} else {
			b.Record(v)
		}
		both.Record(v)
	}
	b.Record(math.MaxInt64)
	both.Record(math.MaxInt64)
	bCopy := *b
	a.Merge(b)
	if *a != *both {
		t.Error("Merge differs from recording both")
	}
	if *b != bCopy {
		t.Error("Merge changed its argument")
	}
	c := New()
	c.Merge(a)
	c.Merge(New())
	c.Merge(nil)
	if *c != *both {
		t.Error("Merge into an empty histogram differs from the original")
	}
	c.Merge(c)
	if c.Count() != 2*both.Count() || c.Quantile(0.3) != both.Quantile(0.3) {
		t.Error("Merge of a histogram with itself does not double it")
	}
}

func TestReset(t *testing.T) {
	h := New()
	for v := range int64(1000) {
		h.Record(v * 1000)
	}
	h.Reset()
	if *h != (Histogram{}) {
		t.Error("Reset does not empty the histogram")
	}
	h.Record(7)
	if h.Min() != 7 || h.Max() != 7 || h.Count() != 1 {
		t.Errorf("after Reset and Record(7): Min %d, Max %d, Count %d", h.Min(), h.Max(), h.Count())
	}
}

func TestAll(t *testing.T) {
	h := New()
	vals := []int64{5, 5, 600, 601, 1 << 20, 1<<20 + 1}
	for _, v := range vals {
		h.Record(v)
	}
	var got []Bucket
	for b := range h.All() {
		got = append(got, b)
	}
	want := []Bucket{
		{Low: 5, High: 5, Count: 2},
		{Low: 600, High: 601, Count: 2},
		{Low: 1 << 20, High: 1<<20 + 1<<12 - 1, Count: 2},
	}
	if !slices.Equal(got, want) {
		t.Errorf("All = %+v, want %+v", got, want)
	}
	n := 0
	for range h.All() {
		n++
		break
	}
	if n != 1 {
		t.Errorf("All went on after break")
	}
}

func TestAllocs(t *testing.T) {
	h, o := New(), New()
	o.Record(12345)
	v := int64(1)
	for name, f := range map[string]func(){
		"Record":   func() { h.Record(v); v = v*3 + 1 },
		"RecordN":  func() { h.RecordN(v, 2) },
		"Merge":    func() { h.Merge(o) },
		"Quantile": func() { _ = h.Quantile(0.99) },
	} {
		if n := testing.AllocsPerRun(1000, f); n != 0 {
			t.Errorf("%s allocates %v times per call", name, n)
		}
	}
}

func FuzzRecord(f *testing.F) {
	f.Add([]byte{}, 0.5)
	f.Add([]byte{1, 2, 3, 4, 5, 6, 7, 8}, 0.99)
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f, 0, 0, 0, 0, 0, 0, 0, 0x80}, 1.0)
	f.Add([]byte{0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0}, -3.0)
	f.Fuzz(func(t *testing.T, data []byte, q float64) {
		h := New()
		var n uint64
		lo, hi := int64(math.MaxInt64), int64(0)
		for len(data) > 0 {
			var b [8]byte
			m := copy(b[:], data)
			data = data[m:]
			v := int64(binary.LittleEndian.Uint64(b[:]))
			h.Record(v)
			n++
			lo, hi = min(lo, max(v, 0)), max(hi, v)
		}
		if h.Count() != n {
			t.Fatalf("Count = %d, want %d", h.Count(), n)
		}
		if n == 0 {
			lo = 0
		}
		if h.Min() != lo || h.Max() != hi {
			t.Fatalf("Min, Max = %d, %d; want %d, %d", h.Min(), h.Max(), lo, hi)
		}
		if got := h.Quantile(q); got < h.Min() || got > h.Max() {
			t.Fatalf("Quantile(%v) = %d outside [%d, %d]", q, got, h.Min(), h.Max())
		}
		if h.Quantile(0) != h.Min() || h.Quantile(1) != h.Max() {
			t.Fatalf("Quantile(0), Quantile(1) = %d, %d; want %d, %d",
				h.Quantile(0), h.Quantile(1), h.Min(), h.Max())
		}
		prev := h.Quantile(0)
		for i := 1; i <= 100; i++ {
			v := h.Quantile(float64(i) / 100)
			if v < prev {
				t.Fatalf("Quantile(%v) = %d below Quantile(%v) = %d", float64(i)/100, v, float64(i-1)/100, prev)
			}
			prev = v
		}
		var total uint64
		for b := range h.All() {
			total += b.Count
		}
		if total != n {
			t.Fatalf("buckets hold %d values, want %d", total, n)
		}
	})
}

func BenchmarkRecord(b *testing.B) {
	rng := rand.New(rand.NewPCG(5, 6))
	var vals [1024]int64
	for i := range vals {
		vals[i] = int64(math.Exp2(8 + rng.Float64()*16))
	}
	h := New()
	i := 0
	for b.Loop() {
		h.Record(vals[i&1023])
		i++
	}
}
