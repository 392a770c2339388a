// Package guest holds the checks pvperf runs on a real kernel RDMA device
// inside a guest: a test binary, built on the host with
//
//	CGO_ENABLED=0 go test -c -o guest.test ./e2e/guest
//
// and run in the guest with the device, pvperf's commands and perftest's
// commands as flags (see the -guest.* flags; without -guest.device every
// check skips, so `go test ./...` on a host without the guest does nothing
// here). Each group of checks is a test: TestSanity (the emulated device),
// TestConformance (the verbs conformance suite of verbs/uverbs, run from
// its own test binary), TestPvperf (the eight tests, pvperf against
// pvperf), TestReference (perftest against perftest), TestInterop (pvperf
// against perftest both ways: a table of configurations), TestRunInfinitely
// (--run_infinitely both ways, the client stopped by SIGINT), TestReports
// (result files of an -a sweep on both sides), TestSideBySide (perftest
// and pvperf alternately; medians and ratios are logged, not judged), and
// TestWire and TestWireFaults (pvperf on the emulator's wire transport,
// in a network namespace, against perftest on an rxe device: both ways,
// then under netem faults, where pvperf also runs against a second
// emulator in another namespace (-guest.wire-ns2) with --check_data;
// -guest.wire-ns enables them).
// -test.run selects groups; -test.v prints every check's outputs, and the
// "--- PASS/FAIL/SKIP" lines are the summary. The verdict is the binary's
// exit status.
//
// The scripts that boot the guests (scripts/guest-test.sh) set up the
// device and run the binary. The package has no non-test code.
package guest
