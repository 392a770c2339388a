package outfile

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pvperf/pvperf/internal/unix"
)

func TestCheck(t *testing.T) {
	dir := t.TempDir()
	existing := filepath.Join(dir, "old.json")
	if err := os.WriteFile(existing, []byte("keep"), 0o644); err != nil {
		t.Fatal(err)
	}
	dangling := filepath.Join(dir, "link.json")
	if err := os.Symlink("target.json", dangling); err != nil {
		t.Fatal(err)
	}
	broken := filepath.Join(dir, "broken.json")
	if err := os.Symlink("no/such/dir/target.json", broken); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		ok   bool
	}{
		{"", true},
		{"-", true},
		{existing, true},
		{filepath.Join(dir, "new.json"), true},
		{dangling, true},
		{broken, false},
		{dir, false},
		{filepath.Join(dir, "no", "new.json"), false},
	} {
		err := Check(c.name)
		if (err == nil) != c.ok {
			t.Errorf("Check(%q) = %v, want ok %v", c.name, err, c.ok)
		}
	}
	// Nothing was created or changed.
	entries, _ := os.ReadDir(dir)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if got := strings.Join(names, " "); got != "broken.json link.json old.json" {
		t.Errorf("the directory holds %q after the checks", got)
	}
	if b, _ := os.ReadFile(existing); string(b) != "keep" {
		t.Errorf("the existing file holds %q", b)
	}
	var pe *fs.PathError
	if err := Check(dir); !errors.As(err, &pe) || pe.Path != dir || !strings.Contains(err.Error(), "is a directory") {
		t.Errorf("Check of a directory: %v", err)
	}
	if err := Check(filepath.Join(dir, "no", "new.json")); !errors.Is(err, fs.ErrNotExist) || strings.Contains(err.Error(), ".tmp") {
		t.Errorf("Check in a missing directory: %v (want ErrNotExist, without the temporary name)", err)
	}
}

// A pipe is checked without being opened: opening it for writing would
// wait for a reader.
func TestCheckPipe(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "fifo")
	mkfifo(t, fifo)
	done := make(chan error, 1)
	go func() { done <- Check(fifo) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Check of a pipe without a reader did not return")
	}
}

func TestWrite(t *testing.T) {
	dir := t.TempDir()
	name := filepath.Join(dir, "out.csv")
	hello := func(w io.Writer) error { _, err := io.WriteString(w, "hello\n"); return err }
	if err := Write(name, 0o600, hello); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(name); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("new file: %v, %v; want mode 0600", fi, err)
	}
	// A failed write leaves the previous file whole, and nothing beside.
	boom := errors.New("boom")
	err := Write(name, 0o600, func(w io.Writer) error {
		_, _ = io.WriteString(w, "partial")
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("Write = %v, want the writer's error", err)
	}
	var pe *fs.PathError
	if !errors.As(err, &pe) || pe.Op != "write" || pe.Path != name {
		t.Errorf("Write error %#v, want a write PathError of %s", err, name)
	}
	if b, _ := os.ReadFile(name); string(b) != "hello\n" {
		t.Errorf("after a failed write the file holds %q", b)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("%d files beside the output after a failed write", len(entries))
	}
	// A directory that does not exist: an open error naming the file.
	err = Write(filepath.Join(dir, "no", "x.csv"), 0o644, hello)
	if !errors.As(err, &pe) || pe.Op != "open" || !errors.Is(err, fs.ErrNotExist) || strings.Contains(err.Error(), ".tmp") {
		t.Errorf("Write into a missing directory: %v", err)
	}
	if err := Write(dir, 0o644, hello); err == nil {
		t.Error("Write over a directory succeeded")
	}
}

// A pipe is written in place, not replaced by a file.
func TestWritePipe(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "fifo")
	mkfifo(t, fifo)
	got := make(chan string, 1)
	go func() {
		f, err := os.Open(fifo)
		if err != nil {
			got <- err.Error()
			return
		}
		defer f.Close()
		b, _ := io.ReadAll(f)
		got <- string(b)
	}()
	if err := Write(fifo, 0o644, func(w io.Writer) error { _, err := io.WriteString(w, "through\n"); return err }); err != nil {
		t.Fatal(err)
	}
	select {
	case s := <-got:
		if s != "through\n" {
			t.Errorf("the reader got %q", s)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the reader got nothing")
	}
	if fi, err := os.Lstat(fifo); err != nil || fi.Mode()&fs.ModeNamedPipe == 0 {
		t.Errorf("the pipe was replaced: %v %v", fi, err)
	}
}

func mkfifo(t *testing.T, name string) {
	t.Helper()
	if out, err := exec.Command("mkfifo", name).CombinedOutput(); err != nil {
		t.Fatalf("mkfifo: %v: %s", err, out)
	}
}

// An existing file keeps its mode and owner; a new one gets perm less the
// umask.
func TestWriteKeepsModeAndOwner(t *testing.T) {
	dir := t.TempDir()
	name := filepath.Join(dir, "r.json")
	if err := os.WriteFile(name, []byte("old"), 0o640); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(name, 0o640); err != nil {
		t.Fatal(err)
	}
	owned := os.Geteuid() == 0
	if owned {
		// As root: a file of another user, which root's write must
		// give back to that user (nobody).
		if err := os.Chown(name, 65534, 65534); err != nil {
			t.Fatal(err)
		}
	}
	if err := Write(name, 0o600, func(w io.Writer) error { _, err := io.WriteString(w, "new"); return err }); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(name)
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(name); string(b) != "new" || fi.Mode().Perm() != 0o640 {
		t.Errorf("after the write: %q, mode %v; want \"new\", -rw-r-----", b, fi.Mode())
	}
	if uid, gid, ok := unix.FileOwner(fi); owned && ok && (uid != 65534 || gid != 65534) {
		t.Errorf("owner %d:%d after root's write, want 65534:65534", uid, gid)
	}
	fresh := filepath.Join(dir, "new.csv")
	if err := Write(fresh, 0o666, func(w io.Writer) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(fresh); err != nil || fi.Mode().Perm() != 0o666&^umask() {
		t.Errorf("new file: %v %v, want mode %v (0666 less the umask)", fi, err, 0o666&^umask())
	}
}
