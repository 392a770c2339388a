// Package reports owns perftest's numbers and pvperf's output: the
// statistics perftest computes from its timestamps, the console text byte
// for byte as perftest prints it, and the machine-readable results (JSON,
// CSV, HTML with charts, the Go benchmark format).
//
// # Statistics
//
// ComputeBW (BW average, message rate, BW peak), ComputeLatency (t_min,
// t_max, t_typical, t_avg, t_stdev, 99% and 99.9% percentiles) and
// ComputeLatencyDuration reproduce perftest's print_report_bw,
// print_report_lat and print_report_lat_duration, including their integer
// divisions and truncations. They take timestamps in ticks of a Clock:
// perftest counts CPU cycles and divides by the measured MHz; pvperf's
// engine passes nanoseconds with the Nanoseconds clock (1000 ticks per
// microsecond), and for -C (cycles mode) the CPU's cycle rate
// (LatencyInput.CyclesMHz), at which the results are then given. A MiB is
// 2^20 bytes and a Gb 10^9 bits (MiBFactor, GbitFactor).
//
// # Text
//
// TestInfo describes a run the way perftest's parameters do; the Write
// functions print the server's banner (WriteWaitingBanner), the header block
// (WriteHeader), the address lines (WriteAddresses), the BW and latency
// tables (WriteBWHeader, WriteBWReport, WriteBWReportBoth,
// WriteLatencyHeader, WriteLatencyReport, WriteLatencyDurationReport,
// WriteResultLine) and the messages perftest prints before its header
// (WritePeakWarning, WriteDynamicPollingDisabled, ...). Each applies
// perftest's own conditions (server or client, --output, test type), so
// calling them in the order of perftest's mains prints what perftest
// prints. TestInfo.Version selects perftest 6.29's format (the default) or
// 6.06's. Numbers are formatted with perftest's own printf format strings
// through a small implementation of C's printf (C's "%#x" of 0 is "0", C
// prints "inf" and "-nan", C's %g has precision 6), checked against glibc.
// Tests compare the output with captured runs of real perftest 6.06 and
// 6.29 (testdata/perftest-*).
//
// # JSON
//
// WriteJSON writes perftest's --out_json object as perftest's file ends:
// "results" is the object of the last row of a Record printed (an -a
// run's last size). When given a Run, which has every row, it adds it as a
// "pvperf" object with a schema_version (SchemaVersion), which ParseRun
// reads back; its errors match ErrEmpty, ErrMalformed, ErrNoRun or
// ErrSchema.
//
// # The results model
//
// Run is one run on one side: a RunInfo (test, role, device, driver,
// RoCE version, connection, QPs, MTU, iterations, host, versions, start
// time) and one Result per message size and side (SideLocal, SideRemote,
// SideSum), in fixed units named by the JSON keys: MiB/s and Gb/s, Mpps,
// microseconds. Num is a float64 whose NaN (not measured) is null in
// JSON. The engine records each measured row once in a Record, which
// prints the row's text, and takes the Run's rows (Record.Results) and the
// JSON file's perftest rows from the same record; Merge joins runs of one
// setup that hold different sizes.
//
// # CSV and benchfmt
//
// WriteCSV writes one row per run, size and side, every row with its run's
// setup, units in the column names (CSVColumns). WriteBenchfmt writes the
// lines `go test -bench` prints, named like the bench package's benchmarks
// (BenchmarkWriteBW/qp=1/size=65536), with Unit lines (BenchUnits) so that
// benchstat knows which way is better.
//
// # HTML
//
// WriteHTML writes runs (see Run) as one self-contained page with no
// script and nothing loaded from elsewhere: the test setup of every run
// side by side, SVG charts drawn with gonum.org/v1/plot and inlined (BW
// average and message rate against message size for BW runs, latency
// percentiles for latency runs, mean latency for duration-mode runs; the
// size on a log2 axis), and each run's results table. Several runs of a
// kind are overlaid in the same charts, with legend labels made of the
// description fields that differ between them (RoCE version, driver,
// host, time, ...). The same runs give the same bytes.
//
// # Concurrency
//
// Everything here is a pure function of its arguments or writes to the
// io.Writer it is given: there is no package state, and the functions are
// safe to call from several goroutines as long as each uses its own writer.
// The text functions write their whole output with one Write call.
//
// The package depends on no other part of pvperf than perftest (the
// shared vocabulary) and its own subpackages hdr and estimate: the engine
// (bench) and the CLI fill plain structs (TestInfo, BWInput, LatencyInput,
// Dest, Run) and call it.
package reports
