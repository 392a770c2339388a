package outfile

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"

	"github.com/pvperf/pvperf/internal/unix"
)

// Check tells whether the file name can be written, without changing it
// or anything beside it: an existing regular file must open for writing;
// a name that does not exist (or a symbolic link to one) must be creatable
// in its directory; a directory fails; anything else (a pipe, a terminal,
// /dev/stdout) passes, untouched, since opening a pipe would wait for its
// reader. "" and "-" pass: the callers that take "-" for standard output
// do not come here with it, and the others write a file of that name,
// which a check of "-" in the current directory would not foresee any
// better.
func Check(name string) error {
	if name == "" || name == "-" {
		return nil
	}
	fi, err := os.Lstat(name)
	if err == nil && fi.Mode()&fs.ModeSymlink != 0 {
		t, terr := os.Stat(name)
		if terr == nil {
			return checkExisting(name, t)
		}
		target, err := os.Readlink(name)
		if err != nil {
			return err
		}
		if !filepath.IsAbs(target) {
			target = filepath.Join(filepath.Dir(name), target)
		}
		return checkNew(name, target)
	}
	if err == nil {
		return checkExisting(name, fi)
	}
	return checkNew(name, name)
}

func checkExisting(name string, fi fs.FileInfo) error {
	switch {
	case fi.IsDir():
		return &fs.PathError{Op: "open", Path: name, Err: errors.New("is a directory")}
	case fi.Mode().IsRegular():
		// Write replaces it, or, where its directory takes no new
		// file, writes it in place: opening it for writing is enough.
		f, err := os.OpenFile(name, os.O_WRONLY, 0)
		if err != nil {
			return err
		}
		return f.Close()
	}
	return nil
}

// checkNew tells whether a file can be created where target is (name is
// what the user gave).
func checkNew(name, target string) error {
	f, err := os.CreateTemp(filepath.Dir(target), "."+filepath.Base(target)+".*.tmp")
	if err != nil {
		return &fs.PathError{Op: "open", Path: name, Err: cause(err)}
	}
	f.Close()
	return os.Remove(f.Name())
}

// Write writes the file name with write, through a buffer.
//
// A new file, or an existing regular one, is written beside name and
// renamed over it once complete: a failed write (write's error, a full
// disk) leaves the previous file whole, or none. An existing file keeps
// its mode and, when the caller may give it back (root), its owner. Where
// that cannot be done (a directory that takes no new file, a file
// bind-mounted on its own, an owner that cannot be given back), the file
// is written in place, as anything else is (a symbolic link, a pipe,
// /dev/stdout); write may then be called a second time. A new file gets
// mode perm less the process's umask.
//
// Errors are *fs.PathError of name, with Op "open" when nothing could be
// written and "write" after; a write error of write itself is kept whole
// in the chain.
func Write(name string, perm fs.FileMode, write func(io.Writer) error) error {
	fi, err := os.Lstat(name)
	switch {
	case err == nil && fi.IsDir():
		return &fs.PathError{Op: "open", Path: name, Err: errors.New("is a directory")}
	case err == nil && !fi.Mode().IsRegular():
		return inPlace(name, perm, write)
	case err == nil:
		if done, err := replace(name, fi.Mode().Perm(), fi, write); done {
			return err
		}
		return inPlace(name, perm, write)
	}
	_, err = replace(name, perm&^umask(), nil, write)
	return err
}

// replace writes name through a new file renamed over it, of mode perm
// and, for an existing file old, of old's owner. done is false when the
// new file could not be made or put in place (nothing was changed).
func replace(name string, perm fs.FileMode, old fs.FileInfo, write func(io.Writer) error) (done bool, err error) {
	f, err := os.CreateTemp(filepath.Dir(name), "."+filepath.Base(name)+".*.tmp")
	if err != nil {
		return false, &fs.PathError{Op: "open", Path: name, Err: cause(err)}
	}
	tmp := f.Name()
	defer func() {
		if err != nil || !done {
			_ = os.Remove(tmp)
		}
	}()
	werr := fill(f, write)
	if werr == nil {
		werr = f.Chmod(perm)
	}
	if werr == nil && old != nil {
		if uid, gid, ok := unix.FileOwner(old); ok && (uid != os.Geteuid() || gid != os.Getegid()) {
			if f.Chown(uid, gid) != nil {
				f.Close()
				return false, nil
			}
		}
	}
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		return true, writeErr(name, werr)
	}
	if err := os.Rename(tmp, name); err != nil {
		if old != nil {
			return false, nil
		}
		return true, &fs.PathError{Op: "write", Path: name, Err: cause(err)}
	}
	return true, nil
}

// inPlace writes name in place (truncated, or created with perm).
func inPlace(name string, perm fs.FileMode, write func(io.Writer) error) error {
	f, err := os.OpenFile(name, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, perm)
	if err != nil {
		return &fs.PathError{Op: "open", Path: name, Err: cause(err)}
	}
	werr := fill(f, write)
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		return writeErr(name, werr)
	}
	return nil
}

// fill runs write on f through a buffer.
func fill(f *os.File, write func(io.Writer) error) error {
	w := bufio.NewWriter(f)
	if err := write(w); err != nil {
		return writerError{err}
	}
	return w.Flush()
}

// writerError marks an error of the caller's write function, kept whole.
type writerError struct{ err error }

func (e writerError) Error() string { return e.err.Error() }
func (e writerError) Unwrap() error { return e.err }

// writeErr is the error of a failed write of name.
func writeErr(name string, err error) error {
	var we writerError
	if errors.As(err, &we) {
		return &fs.PathError{Op: "write", Path: name, Err: we.err}
	}
	return &fs.PathError{Op: "write", Path: name, Err: cause(err)}
}

// umask is the process's file mode creation mask, from /proc/self/status
// (Linux 4.7 and later), else the usual 022.
func umask() fs.FileMode {
	b, err := os.ReadFile("/proc/self/status")
	if err == nil {
		for line := range bytes.SplitSeq(b, []byte("\n")) {
			if v, ok := bytes.CutPrefix(line, []byte("Umask:")); ok {
				if m, err := strconv.ParseUint(string(bytes.TrimSpace(v)), 8, 32); err == nil {
					return fs.FileMode(m) & fs.ModePerm
				}
			}
		}
	}
	return 0o022
}

// cause strips the path of a temporary file, which means nothing to the
// user, from err.
func cause(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	var le *os.LinkError
	if errors.As(err, &le) {
		return le.Err
	}
	return err
}

// Cause is err's reason without the file's name and the operation, for
// messages that name the file their own way (perftest's "Couldn't open
// JSON output file x: permission denied").
func Cause(err error) error { return cause(err) }
