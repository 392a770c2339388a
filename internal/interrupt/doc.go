// Package interrupt gives the commands their context: cancelled by the
// first interrupt (Ctrl-C) or SIGTERM, so that a run ends with a message
// and its cleanup, and a bound on that cleanup, so that a process told to
// stop always stops. A loop the user ends by design (--run_infinitely)
// holds a Soft stop: the first Ctrl-C then ends that loop alone, and the
// run finishes as usual.
//
// Ownership and concurrency: Context starts one goroutine, which waits for
// the signal and ends with the stop function. Close order: call stop once
// the command is done (before it returns its exit status); stop may be
// called more than once.
package interrupt
