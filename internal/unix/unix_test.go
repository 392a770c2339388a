package unix

import (
	"errors"
	"fmt"
	"net"
	"os"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func TestMmapAnon(t *testing.T) {
	b, err := MmapAnon(5000)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) != 5000 || cap(b) != 2*os.Getpagesize() {
		t.Errorf("len %d cap %d, want 5000 and two pages", len(b), cap(b))
	}
	for i := range b {
		if b[i] != 0 {
			t.Fatalf("byte %d is %d, want zeroed memory", i, b[i])
		}
	}
	b[4999] = 1
	if err := MadviseDontFork(b); err != nil {
		t.Error(err)
	}
	if err := Munmap(b); err != nil {
		t.Error(err)
	}
}

// TestMemfdShared: two mappings of one memfd see each other's writes, and
// the file has the rounded size.
func TestMemfdShared(t *testing.T) {
	fd, err := MemfdCreate("pvperf-test", 100)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = Close(fd) }()
	st, err := os.Stat(fmt.Sprintf("/proc/self/fd/%d", fd))
	if err != nil || st.Size() != int64(os.Getpagesize()) {
		t.Fatalf("stat: %v, %v; want one page", st, err)
	}
	a, err := MmapFile(fd, 100)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = Munmap(a) }()
	b, err := MmapFile(fd, 100)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = Munmap(b) }()
	a[42] = 7
	if b[42] != 7 {
		t.Error("the second mapping does not see the first one's write")
	}
}

func TestFutex(t *testing.T) {
	var w uint32
	// A value other than the expected one returns at once.
	if err := FutexWait(&w, 1, time.Second); err != nil && !errors.Is(err, unix.EAGAIN) {
		t.Errorf("wait on a changed value: %v", err)
	}
	// A timeout returns.
	start := time.Now()
	_ = FutexWait(&w, 0, 20*time.Millisecond)
	if time.Since(start) < 10*time.Millisecond {
		t.Error("wait returned before its timeout with nothing to wake it")
	}
	// A wake ends a wait.
	woke := make(chan struct{})
	go func() {
		for atomic.LoadUint32(&w) == 0 {
			_ = FutexWait(&w, 0, time.Minute)
		}
		close(woke)
	}()
	time.Sleep(10 * time.Millisecond)
	atomic.StoreUint32(&w, 1)
	FutexWake(&w, 1)
	select {
	case <-woke:
	case <-time.After(10 * time.Second):
		t.Fatal("FutexWake did not wake the waiter")
	}
}

func TestUnixRights(t *testing.T) {
	fd, err := MemfdCreate("pvperf-test", 1)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = Close(fd) }()
	oob := UnixRights(fd, fd)
	if len(oob) != CmsgSpace(2) {
		t.Errorf("control message of %d bytes, want %d", len(oob), CmsgSpace(2))
	}
	fds, err := ParseUnixRights(oob)
	if err != nil || len(fds) != 2 || fds[0] != fd {
		t.Errorf("ParseUnixRights: %v, %v", fds, err)
	}
	if fds, err := ParseUnixRights([]byte{1, 2, 3}); len(fds) != 0 {
		t.Errorf("a truncated control message gave descriptors %v (%v)", fds, err)
	}
}

func TestPeerUID(t *testing.T) {
	a, b, err := socketPair()
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	defer b.Close()
	uid, err := PeerUID(a)
	if err != nil || uid != Getuid() {
		t.Errorf("PeerUID = %d, %v; want %d", uid, err, Getuid())
	}
}

func socketPair() (*net.UnixConn, *net.UnixConn, error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, err
	}
	conn := func(fd int) (*net.UnixConn, error) {
		f := os.NewFile(uintptr(fd), "socket")
		defer f.Close()
		c, err := net.FileConn(f)
		if err != nil {
			return nil, err
		}
		return c.(*net.UnixConn), nil
	}
	a, err := conn(fds[0])
	if err != nil {
		return nil, nil, err
	}
	b, err := conn(fds[1])
	if err != nil {
		a.Close()
		return nil, nil, err
	}
	return a, b, nil
}

func TestWaitPeerClosed(t *testing.T) {
	t.Run("peer closes", func(t *testing.T) {
		a, b, err := socketPair()
		if err != nil {
			t.Fatal(err)
		}
		defer a.Close()
		go func() { time.Sleep(10 * time.Millisecond); b.Close() }()
		if !WaitPeerClosed(a, nil) {
			t.Error("a closed peer was not noticed")
		}
	})
	t.Run("done", func(t *testing.T) {
		a, b, err := socketPair()
		if err != nil {
			t.Fatal(err)
		}
		defer a.Close()
		defer b.Close()
		done := make(chan struct{})
		go func() { time.Sleep(10 * time.Millisecond); close(done) }()
		if WaitPeerClosed(a, done) {
			t.Error("reported closed, but the peer is alive")
		}
		// The connection is still usable: no deadline is left behind and
		// nothing was consumed.
		if _, err := b.Write([]byte("x")); err != nil {
			t.Fatal(err)
		}
		var buf [1]byte
		if _, err := a.Read(buf[:]); err != nil || buf[0] != 'x' {
			t.Errorf("read after WaitPeerClosed: %q, %v", buf[:], err)
		}
	})
	t.Run("data is not consumed", func(t *testing.T) {
		a, b, err := socketPair()
		if err != nil {
			t.Fatal(err)
		}
		defer a.Close()
		defer b.Close()
		if _, err := b.Write([]byte("y")); err != nil {
			t.Fatal(err)
		}
		if WaitPeerClosed(a, nil) {
			t.Error("data taken for a close")
		}
		var buf [1]byte
		if _, err := a.Read(buf[:]); err != nil || buf[0] != 'y' {
			t.Errorf("read: %q, %v", buf[:], err)
		}
	})
}

// TestWriteMasked: the write happens, and the thread's signal mask is
// the one it had before.
func TestWriteMasked(t *testing.T) {
	r, w, err := Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = Close(r); _ = Close(w) }()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	before := sigBlk(t)
	if n, err := WriteMasked(w, []byte("cmd")); n != 3 || err != nil {
		t.Fatalf("WriteMasked: %d, %v", n, err)
	}
	if after := sigBlk(t); after != before {
		t.Errorf("signal mask %s after the call, %s before", after, before)
	}
	b := make([]byte, 8)
	if n, err := unix.Read(r, b); n != 3 || err != nil || string(b[:3]) != "cmd" {
		t.Fatalf("read %q, %v", b[:n], err)
	}
}

func sigBlk(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("/proc/thread-self/status")
	if err != nil {
		t.Skip(err)
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "SigBlk:"); ok {
			return strings.TrimSpace(v)
		}
	}
	t.Skip("no SigBlk in /proc/thread-self/status")
	return ""
}

// TestWriteWhenReadable: a write the kernel answers with EAGAIN waits for
// the descriptor to become readable, then succeeds; with nothing to read,
// the read deadline ends the wait.
func TestWriteWhenReadable(t *testing.T) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fds[1])
	f, err := EventFile(fds[0], "pair")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	// Fill the socket so that writes answer EAGAIN.
	msg := make([]byte, 1024)
	for {
		if _, err := unix.Write(fds[0], msg); err == unix.EAGAIN {
			break
		} else if err != nil {
			t.Fatal(err)
		}
	}
	if err := f.SetReadDeadline(time.Now().Add(50 * time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	if _, err := WriteWhenReadable(f, msg); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("nothing to read: %v, want the deadline", err)
	}
	if err := f.SetReadDeadline(time.Time{}); err != nil {
		t.Fatal(err)
	}
	go func() {
		time.Sleep(20 * time.Millisecond)
		// Make room for a message, then something to read.
		buf := make([]byte, 1024)
		_, _ = unix.Read(fds[1], buf)
		_, _ = unix.Write(fds[1], []byte("x"))
	}()
	if n, err := WriteWhenReadable(f, msg); err != nil || n != len(msg) {
		t.Fatalf("after the peer read and wrote: %d, %v", n, err)
	}
}

// TestWriteCommand: the raw write returns the count, or the bare errno
// and 0 bytes (EAGAIN from a full non-blocking pipe, EBADF from no
// descriptor).
func TestWriteCommand(t *testing.T) {
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_NONBLOCK|unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	defer unix.Close(p[0])
	if n, err := WriteCommand(p[1], []byte("cmd")); n != 3 || err != nil {
		t.Fatalf("WriteCommand: %d, %v", n, err)
	}
	buf := make([]byte, 8)
	if n, err := unix.Read(p[0], buf); n != 3 || err != nil || string(buf[:3]) != "cmd" {
		t.Fatalf("read back %d bytes %q, %v", n, buf[:max(n, 0)], err)
	}
	msg := make([]byte, 4096)
	for {
		n, err := WriteCommand(p[1], msg)
		if err == unix.EAGAIN {
			if n != 0 {
				t.Fatalf("EAGAIN with %d bytes", n)
			}
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	unix.Close(p[1])
	if n, err := WriteCommand(-1, msg); err != unix.EBADF || n != 0 {
		t.Fatalf("closed descriptor: %d, %v; want 0, EBADF", n, err)
	}
}

// TestInt64s: a large array is zeroed memory outside the Go heap, written
// and freed; a small one is a Go slice.
func TestInt64s(t *testing.T) {
	const n = 1 << 28 // 2 GiB, far more than the heap of this test
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	s, free, err := Int64s(n)
	if err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&after)
	if len(s) != n || s[0] != 0 || s[n/2] != 0 || s[n-1] != 0 {
		t.Fatalf("len %d, s[0] %d s[n/2] %d s[n-1] %d", len(s), s[0], s[n/2], s[n-1])
	}
	if grown := after.HeapSys - before.HeapSys; grown >= n*8 {
		t.Errorf("the heap grew by %d bytes for %d int64s", grown, n)
	}
	s[n-1] = 7
	free()
	free() // a second call does nothing
	small, free, err := Int64s(100)
	if err != nil || len(small) != 100 {
		t.Fatalf("small: len %d, %v", len(small), err)
	}
	free()
	if _, _, err := Int64s(-1); err == nil {
		t.Error("a negative count: no error")
	}
}
