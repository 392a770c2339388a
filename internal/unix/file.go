//go:build unix

package unix

import (
	"os"
	"syscall"
)

// FileOwner returns the owner and group of the file fi describes.
func FileOwner(fi os.FileInfo) (uid, gid int, ok bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, 0, false
	}
	return int(st.Uid), int(st.Gid), true
}
