// Package reports owns perftest's numbers and perftest's output for pvperf:
// the statistics perftest computes from its timestamps, the console text
// byte for byte as perftest prints it, and a JSON file with perftest's keys.
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
// microsecond), and -C (cycles mode) then reports nanoseconds. A MiB is
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
// WriteJSON writes perftest's --out_json object extended to valid JSON that
// keeps every row: "results" is an array with one object per printed row
// (every size of an -a run), and a bidirectional run adds "local_results"
// and "remote_results". See JSONReport.
//
// # Concurrency
//
// Everything here is a pure function of its arguments or writes to the
// io.Writer it is given: there is no package state, and the functions are
// safe to call from several goroutines as long as each uses its own writer.
// The text functions write their whole output with one Write call.
//
// The package depends on nothing of pvperf: the engine (bench) and the CLI
// fill plain structs (TestInfo, BWInput, LatencyInput, Dest) and call it.
package reports
