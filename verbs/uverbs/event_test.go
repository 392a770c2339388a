package uverbs

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"
)

// TestReadEventCancelOne: of two readers waiting on one event file, the
// one whose context is cancelled returns; the other goes on waiting and
// gets the next event.
func TestReadEventCancelOne(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	cctx, cancel := context.WithCancel(context.Background())
	cancelled := make(chan error, 1)
	go func() { cancelled <- readEvent(cctx, r, make([]byte, 8)) }()
	other := make(chan error, 1)
	go func() { other <- readEvent(context.Background(), r, make([]byte, 8)) }()
	time.Sleep(50 * time.Millisecond) // both block in their reads
	cancel()
	if err := <-cancelled; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled reader: %v", err)
	}
	select {
	case err := <-other:
		t.Fatalf("the other reader returned when the first was cancelled: %v", err)
	case <-time.After(100 * time.Millisecond):
	}
	if _, err := w.Write(make([]byte, 8)); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-other:
		if err != nil {
			t.Fatalf("the other reader: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the other reader did not get the event")
	}
}
