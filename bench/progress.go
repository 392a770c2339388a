package bench

import (
	"fmt"
	"io"

	"github.com/pvperf/pvperf/internal/unix"
)

// progress shows how far a repeated test or a sweep of sizes is, on one
// line of a terminal that it rewrites; on anything else it prints
// nothing.
type progress struct {
	w     io.Writer
	total int
	shown bool
}

func newProgress(w io.Writer, total int) *progress {
	if !unix.IsTerminal(w) {
		return &progress{total: total}
	}
	return &progress{w: w, total: total}
}

// set shows that step n of the total is under way or done, with a note.
func (p *progress) set(n int, note string) {
	if p.w == nil {
		return
	}
	fmt.Fprintf(p.w, "\r\033[K %d of %d %s", n, p.total, note)
	p.shown = true
}

// done clears the line.
func (p *progress) done() {
	if p.w == nil || !p.shown {
		return
	}
	fmt.Fprint(p.w, "\r\033[K")
	p.shown = false
}
