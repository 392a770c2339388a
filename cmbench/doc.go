// Package cmbench measures how fast connections are set up through a
// connection manager (a verbs.CM: the kernel's rdma_cm, or the emulator's),
// step by step, in the spirit of librdmacm's cmtime.
//
// A client sets up N RC connections to a server in phases, each phase
// running for all connections before the next starts: create the ids,
// resolve the addresses, resolve the routes (concurrently), create the QPs
// and move them to INIT (one by one), connect (concurrently: the request,
// INIT again and RTR once the answer is in, RTS, the RTU), then disconnect
// (concurrently) and destroy. The server accepts each request as it
// arrives: create the QP, INIT, RTR and RTS with the kernel's attributes,
// accept, wait for the connection to be established; then it waits for
// the client's disconnection, answers it and destroys. Each side times
// every step of every connection and reports, per step, the wall time of
// the phase and the distribution over connections (mean, min, percentiles,
// max), and connections per second.
//
// Ownership: Run opens nothing but ids and the QPs, PD and CQ on the
// context it is given, and closes all of them before it returns, whatever
// the outcome; the caller owns the context and the CM and closes them
// after Run (the context last). Run may be called from several goroutines
// with different configurations (a client and a server in one process).
//
// Every wait for the peer is bounded by Config.PeerTimeout, except the
// server's wait for its first request.
package cmbench
