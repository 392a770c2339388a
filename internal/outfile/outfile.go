package outfile

import (
	"bufio"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// Check tells whether the file name can be written, without changing it
// or anything beside it: a regular file must open for writing; a name that
// does not exist (or a symbolic link to one) must be creatable in its
// directory; a directory fails; anything else (a pipe, a terminal,
// /dev/stdout) passes, untouched, since opening a pipe would wait for its
// reader. "" and "-" (standard output) pass.
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

// Write writes the file name with write, through a buffer. A regular file,
// or a new one, is written beside name and renamed over it once complete:
// a failed write (write's error, a full disk) leaves the previous file
// whole, or none. Anything else (a symbolic link, a pipe, /dev/stdout) is
// written in place. A new file gets mode perm. Errors are *fs.PathError of
// name, with Op "open" when nothing could be written and "write" after.
func Write(name string, perm fs.FileMode, write func(io.Writer) error) error {
	var f *os.File
	var err error
	inPlace := false
	if fi, serr := os.Lstat(name); serr == nil && !fi.Mode().IsRegular() {
		if fi.IsDir() {
			return &fs.PathError{Op: "open", Path: name, Err: errors.New("is a directory")}
		}
		inPlace = true
		f, err = os.OpenFile(name, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, perm)
	} else {
		f, err = os.CreateTemp(filepath.Dir(name), "."+filepath.Base(name)+".*.tmp")
	}
	if err != nil {
		return &fs.PathError{Op: "open", Path: name, Err: cause(err)}
	}
	w := bufio.NewWriter(f)
	err = write(w)
	werr := err // write's own, kept whole
	if err == nil {
		err = w.Flush()
	}
	if err == nil && !inPlace {
		err = f.Chmod(perm)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil && !inPlace {
		err = os.Rename(f.Name(), name)
	}
	if err != nil {
		if !inPlace {
			_ = os.Remove(f.Name())
		}
		if err != werr {
			err = cause(err)
		}
		return &fs.PathError{Op: "write", Path: name, Err: err}
	}
	return nil
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
