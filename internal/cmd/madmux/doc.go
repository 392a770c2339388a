// Command madmux is the helper that QEMU's pvrdma device model (QEMU 7.2 and
// earlier; the device was removed in 9.1) needs on its mad-chardev socket,
// for the nested vmw_pvrdma lab (scripts/pvrdma-lab.sh). It replaces QEMU's
// rdmacm-mux, which Debian does not package, for traffic that does not use
// the RDMA connection manager.
//
// The device writes one fixed-size request (the rdmacm-mux message, 360
// bytes on x86-64) for every GID the guest adds or removes (REG, UNREG) and
// for every send on the guest's QP1 (MAD), and blocks its vCPU, with QEMU's
// global lock held, until a reply of the same size arrives. madmux answers
// every request at once. For REG and UNREG it also does what libvirt does
// on the device's RDMA_GID_STATUS_CHANGED event: it puts the GID's address
// on the network interface of the backend RDMA device (-netdev), so that
// the backend's GID table holds the guest's GID (QEMU looks guest GIDs up
// in it by value), waits until the backend device (-ibdev) shows it, and
// removes the addresses it added when the guest removes the GID. MADs are
// answered and dropped: RDMA-CM connections from the guest time out.
//
// Usage:
//
//	madmux -socket PATH [-netdev IFACE -ibdev DEV] [-ip PATH]
//
// It listens on the Unix socket PATH (start it before QEMU, whose
// client-mode chardev connects at start-up), serves each connection until
// QEMU closes it, and exits on SIGTERM or SIGINT. It logs every request on
// standard error.
package main
