// Package uverbs drives kernel RDMA devices without cgo and without
// libibverbs: it finds them in sysfs (/sys/class/infiniband_verbs and
// /sys/class/infiniband), writes uverbs commands to their character devices
// (/dev/infiniband/uverbsN) and maps their queues and doorbell pages. It
// implements the whole verbs API of package verbs.
//
// The control path (context, protection domains, memory regions, CQs,
// QPs, SRQs, address handles, modify and query) is the uverbs write()
// ABI of include/uapi/rdma/ib_user_verbs.h, the same on every kernel from
// 4.x to 6.x; abi.go declares each command's structures field by field and
// abi_test.go pins their sizes and offsets. One verb uses the ioctl ABI:
// the GID table, read in one QUERY_GID_TABLE call (Linux 5.10 and later)
// instead of two sysfs files per entry, with sysfs as the fallback. The
// data path belongs to a provider, one per kernel driver:
//
//   - vmw_pvrdma, the paravirtual RDMA device of VMware vSphere: the program
//     allocates the rings, the kernel pins them, and doorbells are 32-bit
//     stores to a mapped page of the device. The rings, work requests,
//     completions and doorbells are those of package verbs/pvrdma, the very
//     code the emulated device of package emu executes.
//   - rdma_rxe, Soft-RoCE: the kernel allocates every queue and the program
//     maps it; work requests and completions use rxe's formats, and a
//     POST_SEND command without work requests is the send doorbell, a
//     write() made without telling the Go scheduler (it does not sleep).
//
// A device whose driver has no provider is listed, and fails to open with
// verbs.ErrNotSupported ("driver X is not supported").
//
// Every system call, mapping and unsafe conversion is in package
// internal/unix; this package builds and parses the kernel's structures as
// bytes. Command requests and responses live in memory outside the Go heap,
// since the kernel writes responses to addresses the requests carry.
//
// # Concurrency, ownership and close order
//
// A Context owns its descriptor and everything created through it.
// Creating and destroying objects is serialised by the context; posting to
// a QP's send queue, to its receive queue or to an SRQ, and polling a CQ,
// take only that queue's lock, and allocate nothing. An object refuses to
// close, with EBUSY, while objects made from it exist: close QPs, then
// SRQs, address handles and memory regions, then CQs, completion channels,
// memory and protection domains, and the context last. After Close every
// operation on an object fails with verbs.ErrClosed.
package uverbs
