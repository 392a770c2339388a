package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
	"strings"
	"time"

	"github.com/pvperf/pvperf/bench/oob"
	"github.com/pvperf/pvperf/internal/clock"
	"github.com/pvperf/pvperf/internal/unix"
	"github.com/pvperf/pvperf/perftest"
	"github.com/pvperf/pvperf/reports"
	"github.com/pvperf/pvperf/verbs"
)

// session is one side of a test: perftest's main for one binary.
type session struct {
	cfg Config
	// listens tells the side that listens for the out-of-band connection;
	// server is the side that receives the test's traffic (perftest's
	// machine == SERVER): the same, unless --reversed swaps them.
	listens bool
	server  bool
	dev     verbs.Device
	out     io.Writer
	errOut  io.Writer
	// valOut, when set, gets the validation's verdict in place of out
	// (a loopback server's, which the client's output shows).
	valOut io.Writer
	conn   *oob.Conn
	ep     *endpoint
	// turn is the loops' turns with the scheduler (nil: locked thread).
	turn *turns
	plan plan
	ti   reports.TestInfo
	kf   oob.KeyFormat
	// cm is the connection manager's state with -z and -R.
	cm cmState
	// rec holds every measured row once; info describes the run in
	// pvperf's results model. The text, the JSON, CSV and HTML files and
	// the Run that Run returns are views of them.
	rec   reports.Record
	info  reports.RunInfo
	start time.Time
	// stop ends the test when the peer's connection closes.
	cancel context.CancelCauseFunc
	// ready, if set, learns the port a server listens on.
	ready func(port int)
	// limitRows counts the rows checked against -w and -y (a WRITE or
	// READ server checks none: perftest's returns before its limit
	// check); bwPassed and ratePassed tell whether any of them met the
	// limits, as perftest ORs every row it checks.
	limitRows            int
	bwPassed, ratePassed bool
	// cyclesMHz is -C's cycles per microsecond, once known.
	cyclesMHz float64
	// ivOut is where "--interval_json -" writes its lines when it is
	// not out: the standard output of a repeated series, whose later
	// runs print no text.
	ivOut io.Writer
	// ivJSON writes --interval_json's lines (nil: none).
	ivJSON *json.Encoder
	// repeated marks a run of a repeated test: it writes no files (they
	// come after the last run) and prints no additions; redial retries
	// the client's connection while the server gets ready again.
	repeated, redial bool
	// lnHold, in a repeated series' listening side, holds the listener
	// its runs share (see oob.Listener.Keep), nil until the first run
	// listens.
	lnHold **oob.Listener
	// runNo is the run's number in a repeated test, from 1 (0: not
	// repeated).
	runNo int
	// beforeCheck, if set, runs before the received data is checked (a
	// test's way to spoil it).
	beforeCheck func()
	// afterSetup, if set, runs once the buffers are filled (a test's way
	// to change what is sent).
	afterSetup func()
	// setupDone tells the peer's setup message arrived.
	setupDone bool
	// resourcesReady tells the endpoint's resources were made (after
	// the setup exchanges): --wait_destroy keeps them a while.
	resourcesReady bool
	// cpu is this side's CPU use per message size, peerCPU the peer's
	// (between two pvperf sides).
	cpu, peerCPU []reports.CPUSpan
	// prog shows a sweep's progress on a terminal (nil: none);
	// sizeIndex counts the sizes started.
	prog      *progress
	sizeIndex int
	// repeats summarises a repeated test's runs, in the files.
	repeats *reports.Repeats
	// incomplete is why the run stopped before its end, for the files
	// written all the same ("" when it did not).
	incomplete string
}

// failure is an error whose text is already what perftest prints (on
// stderr, lines ending in newlines).
type failure struct {
	msg  string
	err  error
	loop bool   // the measurement loop failed (perftest's run_iter_*)
	tail string // with loop, the line perftest's main prints after the loop failed, when known
	// setup marks a failure of what perftest does before its loop
	// (allocating the timestamps), met by pvperf as the loop starts: it
	// is not the loop's failure.
	setup bool
}

func (f *failure) Error() string {
	if f.err != nil && f.msg == "" {
		return f.err.Error()
	}
	return strings.TrimRight(strings.TrimLeft(f.msg, " \n"), "\n")
}

func (f *failure) Unwrap() error { return f.err }

// Message returns the text perftest prints for the failure.
func (f *failure) Message() string { return f.msg }

// PerftestMessage returns the text to print on stderr for an error Run
// returned: perftest's own words where it has them.
func PerftestMessage(err error) string {
	var f *failure
	if errors.As(err, &f) && f.msg != "" {
		return f.msg
	}
	if m := oob.PerftestMessage(err); m != "" {
		return m
	}
	return " " + err.Error() + "\n"
}

func fail(err error, lines ...string) error {
	return &failure{msg: strings.Join(lines, ""), err: err}
}

func (s *session) printf(format string, args ...any) { fmt.Fprintf(s.out, format, args...) }

func (s *session) full() bool { return s.cfg.Output == perftest.OutputFull }

// run is the whole test.
func (s *session) run(ctx context.Context) (err error) {
	// The polling loops stay on one OS thread, as perftest's do, and time
	// with the cycle counter where it is usable, as perftest's do. With
	// one processor (the commands' choice on a kernel device) nothing can
	// move the goroutine to another thread while the loops run, and they
	// take turns with the scheduler instead (see turns).
	if s.turn = newTurns(runtime.GOMAXPROCS(0)); s.turn == nil {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
	}
	clock.Calibrate()
	s.start = time.Now()
	cfg := &s.cfg
	if err := s.openDevice(); err != nil {
		return err
	}
	outer := ctx
	defer func() {
		// When the caller's context ended the run (an interrupt), that
		// is the reason, whatever wait it cut short.
		if err != nil && outer.Err() != nil {
			if cause := context.Cause(outer); !errors.Is(err, cause) {
				err = cause
			}
		}
	}()
	defer func() {
		// perftest waits in destroy_ctx, which a run that failed
		// before its resources were made does not reach.
		if s.resourcesReady {
			s.waitDestroy(outer)
		}
		s.closeCM()
		if cerr := s.ep.close(); cerr != nil && err == nil {
			err = fail(cerr, "Failed to destroy resources\n")
		}
	}()
	if cfg.CMExchange || cfg.RdmaCM {
		err = s.connectCM(ctx)
	} else {
		err = s.connect(ctx)
	}
	if err != nil {
		return err
	}
	defer s.conn.Close()
	if cfg.CPUUtil && !cfg.CMExchange && !cfg.RdmaCM {
		s.conn.KeepOpen()
	}
	ctx, s.cancel = context.WithCancelCause(ctx)
	defer s.cancel(nil)
	// The exchanges wait for the peer with the peer timeout, or none
	// while the peer runs its test, and know nothing of ctx: closing the
	// connection ends them when ctx ends (an interrupt, or the peer lost:
	// over rdma_cm, only the connection manager tells that).
	defer context.AfterFunc(ctx, func() { _ = s.conn.Close() })()

	if err := s.exchangeSetup(); err != nil {
		return err
	}
	s.setupDone = true
	if err := s.ep.setup(); err != nil {
		return fail(err, " "+err.Error()+"\n", " Couldn't create IB resources\n")
	}
	s.resourcesReady = true
	if s.afterSetup != nil {
		s.afterSetup()
	}
	if err := s.chooseGID(); err != nil {
		return err
	}
	if cfg.CMExchange || cfg.RdmaCM {
		s.kf = oob.KeyRaw
	}
	if cfg.RdmaCM {
		if err := s.connectQPsCM(ctx); err != nil {
			return err
		}
	}
	s.ep.localDests()
	s.fillTestInfo()
	_ = reports.WriteHeader(s.out, &s.ti)

	// Setup is done allocating: collect its garbage and give free memory
	// back to the system now, so that the runtime's background scavenger
	// has nothing to return during the measurement (its madvise calls
	// interrupt the polling thread wherever it runs).
	debug.FreeOSMemory()

	closeIv, err := s.openIntervals()
	if err != nil {
		return err
	}
	defer func() {
		if cerr := closeIv(); cerr != nil && err == nil {
			err = fail(cerr, fmt.Sprintf(" Couldn't write interval output file %s: %v\n", cfg.IntervalJSON, cerr))
		}
	}()
	// A sweep's rows show its progress on a terminal; the progress line is
	// for output sent elsewhere.
	if cfg.Extras && len(s.plan.msgs) > 1 && !s.repeated && !unix.IsTerminal(s.out) {
		s.prog = newProgress(s.errOut, len(s.plan.msgs))
		defer s.prog.done()
	}
	switch {
	case cfg.Test == perftest.Bandwidth && (cfg.Verb == perftest.Send || cfg.Verb == perftest.SendImm):
		err = s.runSendBW(ctx)
	case cfg.Test == perftest.Bandwidth:
		err = s.runRDMABW(ctx)
	case cfg.Verb == perftest.Send || cfg.Verb == perftest.SendImm:
		err = s.runSendLat(ctx)
	case cfg.Verb == perftest.Write || cfg.Verb == perftest.WriteImm:
		err = s.runWriteLat(ctx)
	default:
		err = s.runReadAtomicLat(ctx)
	}
	if err != nil {
		if cause := context.Cause(ctx); cause != nil && !errors.Is(err, cause) && errors.Is(err, context.Canceled) {
			err = cause
		}
		if cfg.Extras {
			// Packets lost or refused on the way often explain a
			// test that stopped making progress.
			s.writeWireCounters()
		}
		if !s.repeated && len(s.results().Results) > 0 {
			// The sizes done before an interrupt or a failure are
			// kept, as perftest keeps the rows it printed (it writes
			// its file after each); an older file is not left to be
			// read as this run's. They say that the run is
			// incomplete, and why.
			s.incomplete = firstLine(err)
			_ = s.writeFiles()
		}
		return err
	}
	if cfg.CheckData {
		if s.beforeCheck != nil {
			s.beforeCheck()
		}
		if err := s.checkReceived(); err != nil {
			return fail(err, " Data check failed: "+err.Error()+"\n")
		}
	}
	if cfg.CPUUtil && !cfg.CMExchange && !cfg.RdmaCM {
		s.exchangeCPU()
	}
	if cfg.Extras && cfg.Output == perftest.OutputFull {
		// --output=...: one number alone, for the scripts that read it.
		s.writeExtras()
	}
	if s.repeated {
		return s.checkLimits()
	}
	if err := s.writeFiles(); err != nil {
		return err
	}
	return s.checkLimits()
}

// waitDestroy is --wait_destroy: it keeps the resources for a while
// before they are destroyed (perftest's destroy_ctx), or until ctx ends.
func (s *session) waitDestroy(ctx context.Context) {
	d := s.cfg.WaitDestroy
	if d <= 0 {
		return
	}
	s.printf(" Waiting %d seconds before releasing resources...\n", int64(d/time.Second))
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// runErr turns a loop error into perftest's report.
func runErr(err error, what string) error {
	return loopErr(err, " Failed to complete "+what+" function successfully\n")
}

// loopErr is runErr with the line perftest's main prints after the
// loop's own message.
func loopErr(err error, tail string) error {
	var f *failure
	var ce *errCompletion
	switch {
	case errors.As(err, &ce):
		f = &failure{msg: ce.Error() + tail, err: err}
	case errors.As(err, &f):
		f.loop = !f.setup
		return err
	default:
		f = &failure{msg: " " + err.Error() + "\n" + tail, err: err}
	}
	f.loop, f.tail = true, tail
	return f
}

// MeasurementFailed reports whether err ended the measurement loop itself
// (perftest's run_iter_* returned an error): some of perftest's tests exit
// with status 17 then, not 1.
func MeasurementFailed(err error) bool {
	switch e := err.(type) {
	case nil:
		return false
	case *failure:
		if e.loop {
			return true
		}
	case interface{ Unwrap() []error }:
		for _, x := range e.Unwrap() {
			if MeasurementFailed(x) {
				return true
			}
		}
		return false
	}
	return MeasurementFailed(errors.Unwrap(err))
}

// peerErr prefers the peer's death, when that is what ended the test, to
// the error it caused. A measurement loop that the death ended has failed
// all the same: the error says so (and the exit status is the loop's),
// whether the loop saw an error completion first or the watch of the
// connection ended it.
func (s *session) peerErr(ctx context.Context, err error) error {
	if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, context.Canceled) {
		var f *failure
		if errors.As(cause, &f) {
			var lf *failure
			if !errors.As(err, &lf) || !lf.loop {
				return cause
			}
			msg := f.msg
			msg += lf.tail
			return &failure{msg: msg, err: cause, loop: true, tail: lf.tail}
		}
	}
	return err
}
