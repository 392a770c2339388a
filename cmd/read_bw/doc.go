// Command read_bw measures RDMA READ bandwidth between two queue pairs. It is
// pvperf's drop-in replacement for perftest's ib_read_bw: the same options,
// defaults, messages and output, and the same out-of-band protocol, so
// either side may be a real ib_read_bw.
//
// Usage:
//
//	read_bw [options]               start a server and wait for a client
//	read_bw [options] HOST          run the test against the server on HOST
//	read_bw --loopback [options]    run both sides in this process
//
// Without an RDMA device the test runs on the emulated device emu0.
// "read_bw -h" lists every option; exit status 1 reports a failure.
package main
