// Package pvrdma is the data path of the VMware paravirtual RDMA device
// (vmw_pvrdma), exactly as the device expects it: rings with a generation
// bit, send and receive WQEs, SGEs, UD address vectors, 64-byte CQEs and
// doorbell values (vmw_pvrdma-abi.h and pvrdma_ring.h).
//
// Both sides of the data path live here. The driver side (QP, CQ, SRQ, AH)
// encodes work requests into rings and decodes completions, as rdma-core's
// vmw_pvrdma provider does; backends embed these types in their verbs
// objects. The device side (Queue, SendWQE, RecvWQE, CQE, AV) reads the same
// bytes back; the emulator uses it to execute work requests as the hypervisor
// would. Tests pin every layout byte by byte.
//
// Memory: every buffer is supplied by the backend (page-aligned, zeroed,
// outside the Go heap) and must stay mapped until the object using it is
// gone. Nothing here allocates on the post, poll or doorbell paths.
//
// Concurrency: QP.PostSend, QP.PostRecv, SRQ.PostRecv and CQ.Poll are each
// serialized by a lock of their own and are safe for concurrent use. Ring
// indices are published with atomic stores after the slot contents and read
// with atomic loads. A device model that executes a send queue outside a
// doorbell takes the send lock with QP.LockSend.
package pvrdma
