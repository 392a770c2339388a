// Package version holds pvperf's own version, which every command prints
// with -V (--version) and writes into its result files. It has no state
// but the one string, set at link time and never changed after.
package version
