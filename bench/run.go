package bench

import (
	"context"
	"errors"
	"io"

	"github.com/pvperf/pvperf/verbs"
)

// ErrUsage marks errors in the configuration that perftest reports before
// touching a device (exit status 1, message already in perftest's words).
var ErrUsage = errors.New("invalid configuration")

// Run runs the test described by cfg on dev and writes perftest's output
// (header, address lines, result table) to out and diagnostics to errOut.
func Run(ctx context.Context, cfg Config, dev verbs.Device, out, errOut io.Writer) error {
	return errors.New("bench: engine not implemented yet")
}
