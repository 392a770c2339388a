package cli

import (
	"slices"

	"github.com/pvperf/pvperf/perftest"
)

// testSpec is one of the eight binaries: what perftest's main sets before
// calling its parser.
type testSpec struct {
	name string
	verb perftest.Verb // the base verb (--write_with_imm/--send_with_imm change it)
	tst  perftest.TestKind
}

var testSpecs = []testSpec{
	{"send_bw", perftest.Send, perftest.Bandwidth},
	{"write_bw", perftest.Write, perftest.Bandwidth},
	{"read_bw", perftest.Read, perftest.Bandwidth},
	{"atomic_bw", perftest.Atomic, perftest.Bandwidth},
	{"send_lat", perftest.Send, perftest.Latency},
	{"write_lat", perftest.Write, perftest.Latency},
	{"read_lat", perftest.Read, perftest.Latency},
	{"atomic_lat", perftest.Atomic, perftest.Latency},
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

func (t testSpec) bw() bool  { return t.tst == perftest.Bandwidth }
func (t testSpec) lat() bool { return t.tst == perftest.Latency }

func (t testSpec) send() bool   { return t.verb == perftest.Send }
func (t testSpec) write() bool  { return t.verb == perftest.Write }
func (t testSpec) read() bool   { return t.verb == perftest.Read }
func (t testSpec) atomic() bool { return t.verb == perftest.Atomic }
