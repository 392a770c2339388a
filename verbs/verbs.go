package verbs

import "context"

// Device is an RDMA device that can be opened: a kernel device found in
// sysfs or an emulated one. Listing devices does not open them.
type Device interface {
	Name() string
	Kind() DeviceKind
	// Driver names what drives the device: "vmw_pvrdma", "rdma_rxe" or
	// "emu" followed by the emulated profile, e.g. "emu/pvrdma-hw14".
	Driver() string
	// Open opens the device and returns a context (ibv_open_device).
	Open() (Context, error)
}

// Context is an opened device (ibv_context). It owns every object created
// through it; closing it fails with EBUSY while any of them is still open.
type Context interface {
	Device() Device
	QueryDevice() (DeviceAttr, error)
	QueryPort(port int) (PortAttr, error)
	// QueryGID returns entry index of a port's GID table. An unused entry
	// is an error that matches EINVAL, as reading it from sysfs does.
	QueryGID(port, index int) (GIDEntry, error)
	// GIDTable returns the used entries of a port's GID table.
	GIDTable(port int) ([]GIDEntry, error)

	// AllocMemory returns n bytes of zeroed, page-aligned memory outside
	// the Go heap, suitable for registration with any PD of this context.
	// Memory regions must lie in memory allocated this way.
	AllocMemory(n int) (Memory, error)

	AllocPD() (PD, error)
	CreateCQ(init CQInit) (CQ, error)
	CreateCompChannel() (CompChannel, error)

	// AsyncEvent waits for the next asynchronous event of the context.
	AsyncEvent(ctx context.Context) (AsyncEvent, error)

	Close() error
}

// Memory is memory that the device can access: page-aligned, outside the Go
// heap, never moved. Close fails with EBUSY while a memory region uses it.
type Memory interface {
	Bytes() []byte
	Close() error
}

// PD is a protection domain.
type PD interface {
	Context() Context
	// RegMR registers b, which must lie in memory from AllocMemory.
	RegMR(b []byte, access Access) (MR, error)
	CreateQP(init QPInit) (QP, error)
	CreateSRQ(init SRQInit) (SRQ, error)
	CreateAH(attr AHAttr) (AH, error)
	Close() error
}

// MR is a registered memory region.
type MR interface {
	LKey() uint32
	RKey() uint32
	Addr() uint64 // virtual address of the first byte, as peers use it
	Bytes() []byte
	Access() Access
	Close() error
}

// CQ is a completion queue.
type CQ interface {
	// Poll moves up to len(wc) completions into wc and returns how many.
	// It never blocks and never allocates.
	Poll(wc []WC) (int, error)
	// ReqNotify arms the CQ: the next completion (or the next solicited
	// or error completion, with solicitedOnly) delivers one notification
	// to the CQ's completion channel.
	ReqNotify(solicitedOnly bool) error
	// Entries is the number of completions the CQ holds.
	Entries() int
	Close() error
}

// CompChannel delivers completion notifications of armed CQs.
type CompChannel interface {
	// Wait blocks until a CQ attached to this channel has a notification,
	// or ctx is done.
	Wait(ctx context.Context) (CQ, error)
	Close() error
}

// QP is a queue pair.
type QP interface {
	Num() uint32 // QP number, as peers address it
	Type() QPType
	// PostSend queues send work requests in order and returns how many
	// were queued. On error, wrs[n] is the one that failed and none after
	// it were queued. The QP keeps no reference to wrs.
	PostSend(wrs []SendWR) (n int, err error)
	// PostRecv queues receive work requests; see PostSend.
	PostRecv(wrs []RecvWR) (n int, err error)
	// Modify changes the attributes selected by mask (ibv_modify_qp).
	Modify(attr *QPAttr, mask QPAttrMask) error
	// Query returns the QP's current attributes.
	Query() (QPAttr, error)
	Close() error
}

// SRQ is a shared receive queue.
type SRQ interface {
	Num() uint32
	PostRecv(wrs []RecvWR) (n int, err error)
	Modify(attr SRQAttr, mask SRQAttrMask) error
	Query() (SRQAttr, error)
	Close() error
}

// AH is an address handle for UD sends.
type AH interface {
	Attr() AHAttr
	Close() error
}
