// Package version holds pvperf's own version, which the commands print
// with -V (--version; the tests after perftest's protocol version) and
// write into their result files. It has no state
// but the one string, set at link time and never changed after.
package version
