// Package comparecli is the compare command (pvperf compare): it runs two
// implementations of a perftest test, typically perftest's ib_write_bw and
// pvperf's write_bw, with the same options on the same device, each as a
// server and a client on this machine, in interleaved rounds, and prints
// the median of the rounds' ratios with a bootstrap confidence interval
// (rounds resampled whole).
//
// It owns the child processes of a round and ends them (an interrupt, then
// a kill) before the next round starts. Nothing is shared between calls of
// Main; nothing needs closing.
package comparecli
