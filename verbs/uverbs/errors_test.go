//go:build linux

package uverbs

import (
	"errors"
	"strings"
	"testing"

	"github.com/pvperf/pvperf/internal/unix"
)

// The kernel's EAGAIN for a new object (the rdma cgroup's limit) is named
// as a limit, and still matches the errno.
func TestErrLimit(t *testing.T) {
	c := &Context{dev: &Device{name: "rxe0"}}
	err := c.err("create qp", unix.EAGAIN)
	if !errors.Is(err, unix.EAGAIN) || !strings.Contains(err.Error(), "rdma.max") || !strings.HasPrefix(err.Error(), "rxe0: create qp: ") {
		t.Errorf("EAGAIN: %v", err)
	}
	if err := c.err("create qp", unix.ENOMEM); !errors.Is(err, unix.ENOMEM) || strings.Contains(err.Error(), "rdma.max") {
		t.Errorf("ENOMEM: %v", err)
	}
}
