package interrupt

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync"
	"time"

	"github.com/pvperf/pvperf/internal/unix"
)

// Grace is how long a command may take to end after the first signal
// before Context's goroutine ends the process: the run's own waits for a
// peer are bounded, so a longer cleanup is a hang.
const Grace = 10 * time.Second

// ExitStatus is the process's exit status when the grace period is over.
const ExitStatus = 1

// ErrInterrupted is what the cause (context.Cause) of a context that a
// signal cancelled wraps; the messages of what the signal ended say
// "interrupted by SIGTERM" rather than "context canceled". The cause is
// also context.Canceled for errors.Is, as a cancellation without a cause.
var ErrInterrupted = errors.New("interrupted")

// interrupted is the cause of a context a signal cancelled.
type interrupted struct{ sig os.Signal }

func (e interrupted) Error() string { return fmt.Sprintf("%v by %s", ErrInterrupted, name(e.sig)) }

// name is the signal's name: SIGINT, SIGTERM.
func name(s os.Signal) string {
	switch s {
	case os.Interrupt:
		return "SIGINT"
	case unix.SIGTERM:
		return "SIGTERM"
	}
	return s.String()
}

func (e interrupted) Is(target error) bool {
	return target == ErrInterrupted || target == context.Canceled
}

// Context returns a context cancelled by the first interrupt or SIGTERM,
// with a cause wrapping ErrInterrupted that names the signal.
// After that signal the default action of both is restored, so a second
// one kills the process at once; and if stop has not been called within
// grace, a line naming the command goes to stderr and the process exits
// with ExitStatus. stop releases the signals and the goroutine.
//
// While a loop holds a Soft stop of ctx, an interrupt closes that stop
// instead, and the next signal does the above.
func Context(cmd string, grace time.Duration, stderr io.Writer) (ctx context.Context, stop func()) {
	ss := &softStop{}
	ctx, cancelCause := context.WithCancelCause(context.WithValue(context.Background(), softKey{}, ss))
	cancel := func() { cancelCause(nil) }
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, unix.SIGTERM)
	done := make(chan struct{})
	var once sync.Once
	stop = func() {
		once.Do(func() {
			signal.Stop(sig)
			close(done)
			cancel()
		})
	}
	go func() {
		var s os.Signal
		for {
			select {
			case s = <-sig:
			case <-done:
				return
			}
			if s != os.Interrupt || !ss.take() {
				break
			}
		}
		signal.Stop(sig)
		cancelCause(interrupted{s})
		t := time.NewTimer(grace)
		defer t.Stop()
		select {
		case <-done:
		case <-t.C:
			fmt.Fprintf(stderr, "%s: not done %v after %s; exiting\n", cmd, grace, name(s))
			os.Exit(ExitStatus)
		}
	}()
	return ctx, stop
}

// softStop is the stop a loop holds (Soft), if any.
type softStop struct {
	mu   sync.Mutex
	stop chan struct{}
}

type softKey struct{}

// take closes the stop held, if any, and reports whether there was one.
func (s *softStop) take() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stop == nil {
		return false
	}
	close(s.stop)
	s.stop = nil
	return true
}

// Soft has the next interrupt (SIGINT) of ctx's Context close stop rather
// than cancel ctx, until release is called: a loop that the user ends
// (perftest's --run_infinitely, ended by its SIGINT handler) then
// finishes the run as usual. SIGTERM, and an interrupt after that first
// one, cancel ctx as always. For a ctx that Context did not make, nothing
// closes stop.
func Soft(ctx context.Context) (stop <-chan struct{}, release func()) {
	ss, ok := ctx.Value(softKey{}).(*softStop)
	ch := make(chan struct{})
	if !ok {
		return ch, func() {}
	}
	ss.mu.Lock()
	ss.stop = ch
	ss.mu.Unlock()
	return ch, func() {
		ss.mu.Lock()
		if ss.stop == ch {
			ss.stop = nil
		}
		ss.mu.Unlock()
	}
}
