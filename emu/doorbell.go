//go:build linux

package emu

import (
	"sync/atomic"

	"github.com/pvperf/pvperf/verbs"
	"github.com/pvperf/pvperf/verbs/pvrdma"
)

// Write32 is a store into the context's UAR page: the doorbells of the
// pvrdma data path. The device model acts on it at once, in the caller's
// thread, as a hypervisor handles the MMIO trap: a send doorbell executes
// the send queue (the driver rings it holding the send lock), an ARM
// doorbell arms the CQ, a POLL doorbell lets the device catch up.
func (c *devContext) Write32(off, v uint32) {
	handle := v & pvrdma.UARHandleMask
	if handle == 0 {
		return
	}
	h := c.h
	switch off {
	case pvrdma.UARQPOffset:
		if handle > maxQPs {
			return
		}
		q := h.qps[handle-1].Load()
		if q == nil || q.c != c {
			return
		}
		if v&pvrdma.UARQPSend != 0 {
			q.execute()
		}
		if v&pvrdma.UARQPRecv != 0 && q.state() == verbs.StateErr {
			q.flushRQ()
		}
	case pvrdma.UARCQOffset:
		if handle > maxCQs {
			return
		}
		q := h.cqs[handle-1].Load()
		if q == nil || q.c != c {
			return
		}
		ctx := q.view.ctx
		switch {
		case v&pvrdma.UARCQPoll != 0:
			h.housekeeping()
			if c.wire != nil {
				c.wire.pollRx()
			}
		case v&pvrdma.UARCQArm != 0:
			store(&ctx.notify, 1)
		case v&pvrdma.UARCQArmSol != 0:
			atomic.CompareAndSwapUint32(&ctx.notify, 0, 2)
		}
	case pvrdma.UARSRQOffset:
		// Receives on an SRQ are taken by the requesters that need them.
	}
}
