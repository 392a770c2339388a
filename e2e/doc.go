// Package e2e holds end-to-end tests of pvperf's commands: each test
// binary is built, run as perftest's users run it (a server process and a
// client process on one host, or one process with --loopback) on an
// emulated device, and its output is compared with golden files in which
// the measured numbers and per-run addresses are masked.
//
// The package has no non-test code. Golden files are refreshed with
//
//	go test ./e2e -update
package e2e
