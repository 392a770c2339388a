// Package verbs is a backend-neutral RDMA verbs API for Go: what libibverbs
// offers for devices, protection domains, memory regions, completion queues
// and channels, queue pairs, shared receive queues and address handles,
// shaped for Go.
//
// Objects are interfaces implemented by each kind of device: kernel RDMA
// devices driven without cgo, and the emulated PVRDMA device of package emu.
// Package devices lists and opens them; programs and the benchmark engine
// use only this package, and behave the same on every device.
//
// # Memory
//
// Registered memory must never move: Context.AllocMemory returns memory
// outside the Go heap, and memory regions must lie in it. Work requests
// refer to it by virtual address and key, as in libibverbs (SGE.Addr,
// MR.Addr, MR.LKey, MR.RKey).
//
// # Work requests and completions
//
// PostSend and PostRecv take slices of work requests, the Go form of a
// chain; they copy them into the queue and keep no reference, so callers
// reuse their SendWR, RecvWR and SGE values. CQ.Poll fills a caller-owned
// slice. None of these allocate; errors on these paths (ErrQueueFull, state
// errors) are preallocated values.
//
// # Errors
//
// Failed verbs return errors that wrap an *OpError naming the verb and the
// device (but for the errors of PostSend, PostRecv and Poll, which are
// preallocated and name the verb alone); the underlying errno is reachable with errors.Is (EINVAL, EBUSY,
// ENOMEM, ...), as are ErrNotSupported, for anything the device does not
// offer (its DeviceAttr says so in advance), and ErrClosed. Failed work
// requests are reported in completions; WC.Err turns one into a *WCError.
//
// # Concurrency and close order
//
// Every object is safe for concurrent use; a QP's send queue and receive
// queue are each serialized by a lock of their own. Close objects children
// first (QPs; then SRQs, address handles, memory regions and CQs; then
// protection domains, memory and completion channels; then the context):
// closing an object that still has children fails with EBUSY. Close is
// idempotent.
package verbs
