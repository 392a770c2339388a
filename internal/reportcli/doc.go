// Package reportcli is the report command (cmd/report, and the report
// subcommand of cmd/pvperf): it reads the JSON files of pvperf's tests and
// writes them as HTML with charts, CSV, the Go benchmark format or a summary
// table, through package reports. Run holds no state between calls and may
// be called from several goroutines with different writers.
package reportcli
