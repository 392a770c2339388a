// Package rdmacm speaks the kernel's RDMA connection manager without cgo
// and without librdmacm: commands written to /dev/infiniband/rdma_cm (the
// rdma_ucm write() ABI, version 4: an 8-byte header, then the command's
// struct) and events read with its GET_EVENT command.
//
// The connection manager resolves an IP address to an RDMA device, port
// and GID, resolves the route, and carries the connection handshake (the
// IB CM's REQ, REP and RTU; SIDR for datagram QPs). The QPs stay the
// program's own, made through package verbs: the package asks the kernel
// for the attributes of each state transition (INIT_QP_ATTR) and applies
// them with the QP's Modify.
//
// abi.go declares every struct the package writes or reads; abi_test.go
// pins their sizes and field offsets to the kernel's. docs/rdmacm.md gives
// the command sequences and their kernel sources.
//
// Every system call is in package internal/unix; this package builds and
// parses the kernel's structures as bytes.
package rdmacm
