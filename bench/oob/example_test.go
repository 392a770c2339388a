package oob_test

import (
	"context"
	"fmt"
	"os"

	"github.com/pvperf/pvperf/bench/oob"
	"github.com/pvperf/pvperf/perftest"
)

// The client side of a unidirectional ib_write_bw run with one QP, RoCE
// (GID) keys, facing a real perftest server.
func Example_writeBWClient() {
	ctx := context.Background()
	c, err := oob.Dial(ctx, "192.0.2.10", oob.Addr{}, oob.Config{})
	if err != nil {
		fmt.Fprint(os.Stderr, oob.PerftestMessage(err)) // "Couldn't connect to 192.0.2.10:18515\n"
		return
	}
	defer c.Close()
	fail := func(err error) {
		fmt.Fprint(os.Stderr, oob.PerftestMessage(err))
	}
	if _, err := c.ExchangeVersion(); err != nil {
		fail(err)
		return
	}
	sys, err := c.ExchangeSysData(oob.SysData{PageSize: 4096, CacheLineSize: 64})
	if err != nil {
		fail(err)
		return
	}
	mtu, err := c.ExchangeMTU(oob.MTU1024)
	if err != nil {
		fail(err)
		return
	}
	local := &oob.Params{Verb: perftest.Write, Tst: perftest.Bandwidth, ReportFmt: oob.MBS, Size: 65536, Iters: 5000, NumQPs: 1, Duration: 5}
	if _, err := c.Negotiate(local); err != nil {
		fail(err) // " size mismatch: local=65536, remote=4096\n"
		fmt.Fprint(os.Stderr, " Failed to negotiate parameters\n")
		return
	}
	_, _ = sys, mtu // size buffers, connect the QP ...
	my := perftest.Dest{OutReads: 1, QPN: 0x11, PSN: 0x86e396, RKey: 0x3b4, VAddr: 0x7f69fd0f2000}
	f := oob.KeyFormatFor(true, false)
	for range 3 { // round 1, round 2 (the "remote address"), barrier after RTR
		if _, err := c.Handshake(f, my); err != nil {
			fail(err)
			return
		}
	}
	// ... traffic ...
	if _, err := c.Handshake(f, my); err != nil {
		fail(err)
		return
	}
	if _, err := c.ExchangeReports(oob.BWReport{Size: 65536, Iters: 5000, BWAvg: 1000}, false); err != nil {
		fail(err)
		return
	}
	if _, err := c.CloseHandshake(f, my); err != nil {
		fail(err)
	}
}
