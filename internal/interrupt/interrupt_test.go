package interrupt

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/pvperf/pvperf/internal/unix"
)

// The helper process: a command whose cleanup never ends after the
// signal.
func TestMain(m *testing.M) {
	switch os.Getenv("INTERRUPT_HELPER") {
	case "hang":
		ctx, stop := Context("hanger", 500*time.Millisecond, os.Stderr)
		defer stop()
		os.Stdout.WriteString("ready\n")
		<-ctx.Done()
		os.Stdout.WriteString("cancelled\n")
		select {} // a cleanup that hangs
	case "clean":
		ctx, stop := Context("cleaner", 500*time.Millisecond, os.Stderr)
		os.Stdout.WriteString("ready\n")
		<-ctx.Done()
		stop()
		os.Stdout.WriteString("cancelled\n")
		// Longer than the grace period: stop disarmed it.
		time.Sleep(time.Second)
		os.Exit(0)
	case "soft":
		ctx, stop := Context("soft", 5*time.Second, os.Stderr)
		halt, release := Soft(ctx)
		os.Stdout.WriteString("ready\n")
		<-halt
		release()
		if ctx.Err() == nil {
			os.Stdout.WriteString("stopped, not cancelled\n")
		}
		<-ctx.Done()
		stop()
		os.Stdout.WriteString("cancelled\n")
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// helper starts the helper process in mode, waits for it to be ready and
// sends it SIGTERM n times, 100 ms apart.
func helper(t *testing.T, mode string, n int) (stdout, stderr string, took time.Duration, err error) {
	t.Helper()
	return helperSig(t, mode, n, unix.SIGTERM)
}

// helperSig is helper with the signal sig.
func helperSig(t *testing.T, mode string, n int, sig os.Signal) (stdout, stderr string, took time.Duration, err error) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "INTERRUPT_HELPER="+mode)
	var so, se bytes.Buffer
	r, w, perr := os.Pipe()
	if perr != nil {
		t.Fatal(perr)
	}
	cmd.Stdout, cmd.Stderr = w, &se
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	buf := make([]byte, 6)
	if _, err := r.Read(buf); err != nil || string(buf) != "ready\n" {
		_ = cmd.Process.Kill()
		t.Fatalf("helper not ready: %q %v", buf, err)
	}
	start := time.Now()
	for i := range n {
		if i > 0 {
			time.Sleep(100 * time.Millisecond)
		}
		_ = cmd.Process.Signal(sig)
	}
	read := make(chan struct{})
	go func() { _, _ = so.ReadFrom(r); close(read) }()
	select {
	case err = <-done:
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatalf("helper (%s) still running 30 s after SIGTERM", mode)
	}
	took = time.Since(start)
	<-read
	return so.String(), se.String(), took, err
}

func TestHangEndsAfterGrace(t *testing.T) {
	_, stderr, took, err := helper(t, "hang", 1)
	ee, ok := err.(*exec.ExitError)
	if !ok || ee.ExitCode() != ExitStatus {
		t.Fatalf("exit: %v, want status %d", err, ExitStatus)
	}
	if !strings.Contains(stderr, "hanger: not done 500ms after SIGTERM; exiting") {
		t.Errorf("stderr %q", stderr)
	}
	if took < 500*time.Millisecond {
		t.Errorf("exited %v after the signal, before the grace period", took)
	}
}

func TestSecondSignalKills(t *testing.T) {
	_, stderr, _, err := helper(t, "hang", 2)
	ee, ok := err.(*exec.ExitError)
	if !ok || ee.ExitCode() != -1 || !strings.Contains(ee.String(), "terminated") {
		t.Fatalf("exit: %v, want killed by SIGTERM", err)
	}
	if stderr != "" {
		t.Errorf("stderr %q: the second signal should kill before the grace period ends", stderr)
	}
}

func TestStopDisarms(t *testing.T) {
	stdout, stderr, _, err := helper(t, "clean", 1)
	if err != nil || stderr != "" || !strings.Contains(stdout, "cancelled") {
		t.Fatalf("exit %v, stdout %q, stderr %q", err, stdout, stderr)
	}
}

// TestSoftStop: while a loop holds a Soft stop, the first interrupt
// closes it and leaves the context alone; the second cancels the context.
func TestSoftStop(t *testing.T) {
	stdout, stderr, _, err := helperSig(t, "soft", 2, os.Interrupt)
	if err != nil || stderr != "" || stdout != "stopped, not cancelled\ncancelled\n" {
		t.Fatalf("exit %v, stdout %q, stderr %q", err, stdout, stderr)
	}
}

// TestSoftStopOtherContext: a context that Context did not make gives a
// stop that nothing closes.
func TestSoftStopOtherContext(t *testing.T) {
	halt, release := Soft(context.Background())
	defer release()
	select {
	case <-halt:
		t.Fatal("stop closed")
	default:
	}
}

func TestStopWithoutSignal(t *testing.T) {
	ctx, stop := Context("x", time.Millisecond, os.Stderr)
	stop()
	stop()
	if ctx.Err() == nil {
		t.Fatal("context not cancelled by stop")
	}
}

func TestCause(t *testing.T) {
	err := error(interrupted{unix.SIGTERM})
	if err.Error() != "interrupted by SIGTERM" {
		t.Errorf("message %q", err)
	}
	if !errors.Is(err, ErrInterrupted) || !errors.Is(err, context.Canceled) {
		t.Error("the cause is not ErrInterrupted and context.Canceled for errors.Is")
	}
}
