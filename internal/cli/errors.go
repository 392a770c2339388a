package cli

import (
	"errors"
	"fmt"
	"strings"

	"github.com/pvperf/pvperf/reports"
)

// ErrHelp is returned by Parse after -h/--help printed the usage text.
// perftest exits with status 1 after it, and so does Main.
var ErrHelp = errors.New("help requested")

// ErrVersion is returned by Parse after -V/--version printed the version.
// perftest exits with status 1 after it, and so does Main.
var ErrVersion = errors.New("version requested")

// ErrUsage is wrapped by every *Failure: a command line perftest rejects.
var ErrUsage = errors.New("invalid command line")

// parserExitLine is what perftest's main prints when its parser returns an
// error (rather than exiting by itself).
const parserExitLine = " Parser function exited with Error\n"

// Failure is a command line error. Its message has already been written to
// the output streams, in perftest's words and on perftest's streams, when
// Parse returns it. It wraps ErrUsage.
type Failure struct {
	// Msg is the error message, as printed.
	Msg string
	// Parser tells that perftest's parser returned the error to its main
	// (which then adds " Parser function exited with Error"), rather than
	// calling exit(1) itself.
	Parser bool
}

func (f *Failure) Error() string { return strings.TrimSpace(f.Msg) }

func (f *Failure) Unwrap() error { return ErrUsage }

// parserFail prints msg to stderr and returns the error perftest's parser
// returns ("return FAILURE").
func (p *parser) parserFail(format string, args ...any) error {
	msg := fmt.Sprintf(format, args...)
	fmt.Fprint(p.stderr, msg)
	return &Failure{Msg: msg, Parser: true}
}

// exitErr prints msg to stderr for an error after which perftest calls
// exit(1) directly.
func (p *parser) exitErr(format string, args ...any) error {
	msg := fmt.Sprintf(format, args...)
	fmt.Fprint(p.stderr, msg)
	return &Failure{Msg: msg}
}

// depErr prints a RESULT_LINE to stdout and msg to stderr, then perftest
// exits: the usual form of force_dependecies' errors.
func (p *parser) depErr(format string, args ...any) error {
	fmt.Fprint(p.stdout, reports.ResultLine)
	return p.exitErr(format, args...)
}

// depErrOut is depErr for the few checks that print their message to
// stdout as well.
func (p *parser) depErrOut(format string, args ...any) error {
	msg := fmt.Sprintf(format, args...)
	fmt.Fprint(p.stdout, reports.ResultLine+msg)
	return &Failure{Msg: msg}
}

// unsupported rejects an option pvperf recognises but does not implement.
func (p *parser) unsupported(o *opt) error {
	return p.parserFail(" %s is not supported by pvperf (%s)\n", o.display(), o.unsupported)
}
