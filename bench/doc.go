// Package bench is pvperf's benchmark engine: perftest's test flows over
// any verbs device. [Run] takes a [Config] (what perftest's command line
// describes), a device and two writers, and runs one side of a test (the
// server when Config.Server is empty, the client otherwise) or both sides
// in one process (Config.Loopback).
//
// A run follows perftest step for step: open the device and create the
// resources (PD, memory region, CQs, QPs, SRQ), connect the out-of-band
// channel (package oob), exchange versions, system data, MTU and the
// parameter negotiation, exchange queue pair keys, move the QPs to RTS,
// run the measurement loop, exchange the results and close with perftest's
// end-of-test handshakes. The loops are perftest's:
//
//   - bandwidth (run_iter_bw, run_iter_bw_server, run_iter_bi): up to
//     tx_depth outstanding per QP, every cq_mod-th and the last work
//     request signalled, post lists, QPs served round robin, iteration or
//     duration mode (-D, with its margin), all sizes (-a);
//   - latency (run_iter_lat_send, run_iter_lat_write, run_iter_lat): ping
//     pong with perftest's roles, write_lat polling the last byte of the
//     receive buffer, READ and atomic round trips timed whole.
//
// The numbers are computed by package reports exactly as perftest computes
// them, and printed in perftest's format.
//
// # Concurrency and threads
//
// Each side of a test runs on one goroutine (the caller's for a server or
// client, plus one for the server side of a loopback run) that stays on
// one OS thread: locked to it, or, in a process with one scheduler
// processor (GOMAXPROCS=1, as the commands run on a kernel device), held
// there by having the only processor; such a loop hands the processor to
// the scheduler every 4 ms itself, so that the runtime seldom preempts it
// (see turns.go). The loops allocate nothing per work request. Two helper goroutines exist
// during a test: the duration clock (perftest's SIGALRM state machine) and
// a watcher that notices the peer closing the out-of-band connection while
// no exchange is due; with --data_validation a third, the validator, reads
// the markers and the receive slots the peer's device writes (never the
// loop's state), and is stopped and joined before its verdict is printed. When the peer vanishes the test's context is
// cancelled and every loop returns within milliseconds; a silent peer costs
// at most the out-of-band timeout (Config.PeerTimeout, 5 s by default), a
// frozen one at most StallTimeout in a loop that waits for it. Nothing
// hangs. Cancelling the context given to Run stops a test the same way.
//
// # Configuration, plan and results
//
// Run never changes the Config it is given. What perftest adjusts in its
// parameters once the device and the peer are known (inline size,
// outstanding reads, MTU, GID index, UD's size limit, the sizes of the run,
// the buffer layout and how each size is posted) is computed once into a
// plan of its own. Each measured row is recorded once, in a
// reports.Record: the printed row, the JSON, CSV and HTML files and the
// reports.Run that Run returns are all views of it.
//
// # Ownership and close order
//
// Run owns everything it creates and releases it before returning, in the
// reverse order of creation: the out-of-band connection, then address
// handles, QPs, the SRQ, CQs, the memory region, completion channels, the
// memory, the PD and the device context, which Run opened. The caller keeps
// the device. Run never writes to out or errOut after returning.
//
// This package never imports a backend: it sees devices only through the
// verbs interfaces.
package bench
