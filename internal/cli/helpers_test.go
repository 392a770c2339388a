package cli

import (
	"bytes"
	"strings"
	"testing"

	"github.com/pvperf/pvperf/bench"
	"github.com/pvperf/pvperf/reports"
)

// RL is perftest's RESULT_LINE, for expected outputs.
const RL = reports.ResultLine

// PF is the line perftest's main adds when its parser fails.
const PF = parserExitLine

type parsed struct {
	opts   bench.Config
	stdout string
	stderr string
	err    error
}

// parse runs Parse for test with a command line written as one
// string (split on spaces).
func parse(t *testing.T, test, cmdline string) parsed {
	t.Helper()
	return parseArgs(t, test, strings.Fields(cmdline))
}

func parseArgs(t *testing.T, test string, args []string) parsed {
	t.Helper()
	var out, errOut bytes.Buffer
	o, err := Parse(test, args, &out, &errOut)
	return parsed{opts: o, stdout: out.String(), stderr: errOut.String(), err: err}
}

// mustParse parses a command line that must be accepted.
func mustParse(t *testing.T, test, cmdline string) parsed {
	t.Helper()
	r := parse(t, test, cmdline)
	if r.err != nil {
		t.Fatalf("%s %s: %v\nstdout:\n%s\nstderr:\n%s", test, cmdline, r.err, r.stdout, r.stderr)
	}
	return r
}
