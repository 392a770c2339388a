// Command write_lat measures RDMA WRITE latency between two queue pairs. It is
// pvperf's drop-in replacement for perftest's ib_write_lat: the same options,
// defaults, messages and output, and the same out-of-band protocol, so
// either side may be a real ib_write_lat.
//
// Usage:
//
//	write_lat [options]               start a server and wait for a client
//	write_lat [options] HOST          run the test against the server on HOST
//	write_lat --loopback [options]    run both sides in this process
//
// Without an RDMA device the test runs on the emulated device emu0.
// "write_lat -h" lists every option; exit status 1 reports a failure.
package main
