// Package emu is an emulated VMware paravirtual RDMA (PVRDMA) device. It is
// a device model, not a mock: the driver side of every QP, CQ and SRQ is
// package pvrdma, which writes real pvrdma WQEs into rings and rings
// doorbells exactly as it would for a vmw_pvrdma device, and this package is
// the "hypervisor" behind those doorbells. It reads the WQEs and SGEs, moves
// the data with copy (the same-host memcpy mode of PVRDMA), performs atomics
// with atomic instructions on the responder's memory, and writes pvrdma CQEs.
//
// # Devices and configuration
//
// Devices are named emu0, emu1, ... and configured by the environment
// variable PVPERF_EMU (see EnvVar); with nothing configured there is one
// device, emu0, with the unrestricted profile, RoCE v2 and an active MTU of
// 1024. Profiles:
//
//   - pvrdma-hw13 (ESXi 6.5, VM hardware version 13): RoCE v1, RC and UD
//     queue pairs, at most 3 UD QPs, no SRQ, no inline data, no atomics.
//   - pvrdma-hw14 (ESXi 6.7 and later, hardware version 14): adds shared
//     receive queues; RoCE v1 or v2, chosen per device.
//   - unrestricted: adds UC queue pairs, atomic operations and inline data,
//     so that every perftest mode can run.
//
// The GID table is built like the real device's: index 0 is the link-local
// GID made from the MAC of the configured interface, then one GID per IPv4
// address (v4-mapped) and per global IPv6 address. Every GID of a device has
// the device's RoCE version; RoCE v1 and v2 endpoints do not reach each
// other, nor do IPv4 and IPv6 RoCE v2 GIDs.
//
// # Same-host memcpy, within and across processes
//
// Every byte the device can reach (registered memory, queue buffers and the
// device's object tables) lives in memfd-backed shared memory. Each process
// that opens an emulated device owns a slot: an abstract Unix socket,
// private to the user (peers' credentials are checked), through which other
// processes of the same user map its memory. QP numbers, memory keys and
// handles are unique across all processes of the user on the host
// (slot<<12|index for QP numbers). Two processes connect exactly as two
// perftest instances do, with only the QP number, PSN, GID, rkey and address
// exchanged out of band. Nothing outlives a process: memfds and abstract
// sockets vanish with it.
//
// # Network transports: RoCE v2 and TCP
//
// A device configured with an address of its own (addr=IP in EnvVar)
// reaches QPs on other hosts as PVRDMA does when the peer is not a VM of
// the same host: with RoCE v2 packets over UDP port 4791 of that address
// (RoCE v1 frames for a RoCE v1 device, below),
// which a kernel RoCE stack such as rdma_rxe understands, or over TCP
// connections to port 4791 of the peer when RoCE is not chosen or UDP 4791
// is taken. Its GID table is then that address alone. The transport is
// chosen per QP when it moves to RTR: memory copy when the destination QP
// is on this host (transport=auto, the default) and the network otherwise;
// transport=copy, roce or tcp forces one. In auto mode the two network
// transports meet: a device that fell back to TCP connects to its peer's
// TCP port 4791 when a QP moves to RTR or an address handle is created,
// and a RoCE v2 device (which listens there too) then sends to that peer
// over TCP; each end of a TCP link first says, in a hello, whether it
// receives over UDP as well. A link has a reader and a writer goroutine;
// senders, the reader's ACKs among them, queue frames for the writer and
// never wait for the socket. A RoCE v2 device creating an address handle
// asks the peer the same way; a kernel RoCE stack has no TCP port, and
// stays on UDP. A QP's DataPath and the context's Transports say which.
//
// On the network the device is rdma_rxe's peer: packets carry a BTH,
// the RETH, AETH, DETH, ImmDt and AtomicETH headers their opcodes need,
// and an ICRC (package roce). The requester segments messages to the path
// MTU, asks for an ACK on the last packet of each message and every 64
// packets, keeps a window of PSNs in flight (an RC QP: 128 at first, as
// rxe; it grows with ACKs up to 4096 and halves on a loss, as TCP's
// congestion window; a UC QP has none; a longer RDMA READ asks for its responses 128 packets at a time,
// in several read requests, since a responder sends a read's responses at
// once and nothing paces them), and goes back to the oldest
// unacknowledged PSN after a sequence NAK, an RNR NAK's timer or the local
// ACK timeout (retry_cnt and rnr_retry as on hardware, then RETRY_EXC_ERR
// or RNR_RETRY_EXC_ERR). The responder checks PSNs (one sequence NAK per
// gap; duplicates are acknowledged again, READs executed again, atomics
// answered from the saved result), opcode order, lengths against the path
// MTU, access rights, R_Keys and bounds (NAK and the error state, as
// rxe), and sends an RNR NAK when no receive is posted. UC and UD go
// without acknowledgements. Packets from the network are untrusted: each is
// parsed and its ICRC checked before it is used, and every drop is counted
// by reason (WireCounters). Over IPv4 the ICRC covers the IP
// identification, which a UDP socket does not report: the device sends 0
// (an unconnected socket with don't-fragment set, as the kernel then
// does) and accepts any value, which rdma_rxe's hashed identifications
// need. A RoCE v1 device (roce=v1) with an address sends raw Ethernet
// frames instead (Ethertype 0x8915: a GRH, then the same transport
// headers, with the InfiniBand ICRC over the GRH), on the interface that
// holds the address, to the MAC learnt from the peer's frames or from the
// neighbour table; that needs CAP_NET_RAW (without it, transport=roce
// fails saying so, and auto falls back to TCP).
//
// The port's receive goroutine executes requests under the QP's responder
// lock and handles responses under its send lock. Over UDP, a thread that
// finds a CQ empty (the POLL doorbell) reads and handles the datagrams
// already queued itself, while a QP of the device uses the network: one
// thread at a time, in arrival order, so that a thread spinning on a CQ
// needs no other thread to wake up for its responses.
//
// # Semantics
//
// Work is executed in the thread that rings the send doorbell (under the
// QP's send lock), as a hypervisor handles the doorbell's MMIO trap. A
// request that cannot complete yet stalls its send queue; the device retries
// it later:
//
//   - RNR: an RC SEND (or RDMA WRITE with immediate) finding no posted
//     receive is retried after the responder's min_rnr_timer, rnr_retry
//     times (7 = forever), then completes with RNR_RETRY_EXC_ERR.
//   - No response: a responder that does not exist, is not in RTR, RTS, SQD
//     or SQE, is unreachable by route (GIDs, RoCE version) or whose process
//     died, or a PSN that does not match, means the request is lost. RC
//     retries after the local ACK timeout (4.096 us * 2^timeout; 0 =
//     forever), retry_cnt times, then completes with RETRY_EXC_ERR. UC and
//     UD drop the message and complete successfully.
//
// Errors complete with the statuses of real hardware and move the
// requester to the error state (UD and UC send errors move it to SQE);
// errors the responder detects move the responder to the error state too:
//
//   - invalid local lkey, PD or bounds: LOC_PROT_ERR; malformed WQE (too many
//     SGEs, opcode not valid for the QP type): LOC_QP_OP_ERR; atomic whose
//     local buffer is not 8 bytes: LOC_LEN_ERR; UD message larger than the
//     port MTU: LOC_LEN_ERR.
//   - invalid rkey, bounds or MR access rights at the responder:
//     REM_ACCESS_ERR (responder: QP_ACCESS_ERR event, error state).
//   - responder QP without the remote access right, READ or atomic with
//     max_dest_rd_atomic 0, misaligned atomic: REM_INV_REQ_ERR (responder:
//     QP_REQ_ERR event, error state).
//   - receive buffer too small: the receiver completes with LOC_LEN_ERR and
//     the RC requester with REM_INV_REQ_ERR; receive SGE with an invalid lkey,
//     or whose written bytes leave its region: LOC_PROT_ERR at the receiver,
//     REM_OP_ERR at the requester (as rdma_rxe, only the bytes a message
//     writes are checked, not the whole SGE). The receiver QP goes to the
//     error state with a QP_FATAL event.
//   - a QP entering the error state completes all its pending work requests
//     with WR_FLUSH_ERR (a QP put in error by its peer is flushed when its
//     owner next polls a CQ, rings a doorbell, or within 20 ms).
//   - a full CQ loses the completion and raises CQ_ERR on its context.
//
// Posting fails at once, as the rdma-core provider's post does, for a QP not
// ready (send before RTS, receive in RESET), a full queue (ErrQueueFull,
// ENOMEM), too many SGEs (EINVAL) and opcodes the QP type or profile lacks.
// Objects must be destroyed children first: closing a PD, CQ, SRQ, memory,
// channel or context still in use fails with EBUSY.
//
// UD receives start with the 40-byte GRH area: an IPv6-style header for
// RoCE v1 and RoCE v2 over IPv6, and for RoCE v2 over IPv4, 20 zero bytes
// followed by the IPv4 header. Atomic operations act on the responder's
// memory in host byte order and return the original value in host order.
//
// The network transports follow rxe's semantics described above; their
// completion of a request waits for the peer's acknowledgement.
//
// # Connection manager
//
// NewCM returns a connection manager (verbs.CM) for the emulated devices
// with the kernel rdma_cm's call sequences, QP attributes and errors, so
// that a program connects its QPs the same way on kernel and emulated
// devices (docs/rdmacm.md). Its messages (REQ, REP, RTU, REJ, DREQ, DREP,
// SIDR_REQ, SIDR_REP; cmmsg.go gives the format) travel over TCP: a
// listener listens on its bound address and port, an active id connects to
// its destination. A loopback address resolves to the first emulated
// device, any other to the device whose GID table holds the local address
// that routes to it. A refused TCP connection, or one the listener's
// side ends before it answers the request (its listener closed), is the
// IB CM's rejection "no listener" (reason 8); a peer silent for
// CMResponseTimeout is
// verbs.ErrCMTimeout. It differs from the kernel's in that:
//
//   - the TCP and UDP port spaces share TCP ports, and Bind already
//     listens (requests before Listen wait instead of being rejected);
//   - peers on other hosts exchange data only when the devices have
//     addresses of their own (the network transports); without one the
//     data path is memcpy between processes of one host;
//   - a peer that closes or resets its TCP connection later in a
//     handshake fails the call at once with an error wrapping
//     io.ErrUnexpectedEOF;
//   - an active id's source port is its TCP connection's, known after
//     Connect;
//   - datagram rejections wrap verbs.ErrRejected (the kernel reports them
//     as UNREACHABLE), and WaitDisconnected on a datagram id fails at once;
//   - the RTS attributes' default ACK timeout is CMDefaultAckTimeout.
//
// # Concurrency and close order
//
// All objects are safe for concurrent use. Close them children first: QPs,
// then SRQs, AHs, MRs and CQs, then PDs, memory and completion channels,
// then the context.
package emu
