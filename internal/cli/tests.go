package cli

import (
	"slices"

	"github.com/pvperf/pvperf/bench"
)

// testSpec is one of the eight binaries: what perftest's main sets before
// calling its parser.
type testSpec struct {
	name string
	verb bench.Verb // the base verb (--write_with_imm/--send_with_imm change it)
	tst  bench.Test
}

var testSpecs = []testSpec{
	{"send_bw", bench.Send, bench.Bandwidth},
	{"write_bw", bench.Write, bench.Bandwidth},
	{"read_bw", bench.Read, bench.Bandwidth},
	{"atomic_bw", bench.Atomic, bench.Bandwidth},
	{"send_lat", bench.Send, bench.Latency},
	{"write_lat", bench.Write, bench.Latency},
	{"read_lat", bench.Read, bench.Latency},
	{"atomic_lat", bench.Atomic, bench.Latency},
}

// Tests returns the names of the tests Main runs, in perftest's order.
func Tests() []string {
	names := make([]string, len(testSpecs))
	for i, t := range testSpecs {
		names[i] = t.name
	}
	return names
}

func lookupTest(name string) (testSpec, bool) {
	i := slices.IndexFunc(testSpecs, func(t testSpec) bool { return t.name == name })
	if i < 0 {
		return testSpec{}, false
	}
	return testSpecs[i], true
}

func (t testSpec) bw() bool  { return t.tst == bench.Bandwidth }
func (t testSpec) lat() bool { return t.tst == bench.Latency }

func (t testSpec) send() bool   { return t.verb == bench.Send }
func (t testSpec) write() bool  { return t.verb == bench.Write }
func (t testSpec) read() bool   { return t.verb == bench.Read }
func (t testSpec) atomic() bool { return t.verb == bench.Atomic }
