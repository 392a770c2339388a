package unix

import "golang.org/x/sys/unix"

// IsTerminal reports whether w is a terminal (a file whose descriptor
// answers the TCGETS ioctl).
func IsTerminal(w any) bool {
	f, ok := w.(interface{ Fd() uintptr })
	if !ok {
		return false
	}
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}
