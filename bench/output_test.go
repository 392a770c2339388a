package bench

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
)

// TestWriteFile: a failed write leaves the previous file as it was;
// perftest's JSON file is private (0600) as perftest makes it; a device
// such as /dev/null is written in place.
func TestWriteFile(t *testing.T) {
	name := filepath.Join(t.TempDir(), "out.json")
	ok := func(w io.Writer) error { _, err := io.WriteString(w, "{\"a\": 1}\n"); return err }
	if err := writeFile(name, "JSON", ok); err != nil {
		t.Fatal(err)
	}
	broken := errors.New("broken")
	err := writeFile(name, "JSON", func(w io.Writer) error {
		_, _ = io.WriteString(w, "{\"a\": ")
		return broken
	})
	if !errors.Is(err, broken) {
		t.Errorf("failed write: %v", err)
	}
	if b, err := os.ReadFile(name); err != nil || string(b) != "{\"a\": 1}\n" {
		t.Errorf("after a failed write the file holds %q (%v), want the previous one", b, err)
	}
	if fi, err := os.Stat(name); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("JSON file mode %v (%v), want 0600", fi.Mode().Perm(), err)
	}
	if left, _ := filepath.Glob(filepath.Join(filepath.Dir(name), ".*.tmp")); len(left) != 0 {
		t.Errorf("temporary files left: %v", left)
	}
	if err := writeFile(os.DevNull, "CSV", ok); err != nil {
		t.Errorf("write to %s: %v", os.DevNull, err)
	}
}
