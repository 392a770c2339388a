// Package perftest is the vocabulary pvperf shares with perftest: the test
// kinds, verbs, atomic operations, connection types and output modes of
// perftest's command line, numbered as perftest's C enumerations (the
// numbers travel in the out-of-band parameter negotiation), and [Dest], the
// queue pair address both sides exchange.
//
// It is a leaf: it imports nothing of pvperf's, and the command line
// (internal/cli), the engine (bench), the out-of-band codec (bench/oob)
// and the reports (reports) all speak it, so a verb or a test kind has one
// type and one numbering everywhere.
//
// Every type is a plain value, safe to copy and to use from any goroutine;
// nothing here owns a resource.
package perftest
