// Command send_bw measures SEND bandwidth between two queue pairs. It is
// pvperf's drop-in replacement for perftest's ib_send_bw: the same options,
// defaults, messages and output, and the same out-of-band protocol, so
// either side may be a real ib_send_bw.
//
// Usage:
//
//	send_bw [options]               start a server and wait for a client
//	send_bw [options] HOST          run the test against the server on HOST
//	send_bw --loopback [options]    run both sides in this process
//
// Without an RDMA device the test runs on the emulated device emu0.
// "send_bw -h" lists every option; exit status 1 reports a failure.
package main
