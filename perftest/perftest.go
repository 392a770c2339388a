package perftest

import "strconv"

// Verb is what a test does: perftest's enum VerbType.
type Verb int32

// Verbs.
const (
	Send     Verb = 0
	SendImm  Verb = 1
	Write    Verb = 2
	WriteImm Verb = 3
	Read     Verb = 4
	Atomic   Verb = 5
)

var verbTitles = [...]string{"Send", "Send_imm", "RDMA_Write", "RDMA_Write_imm", "RDMA_Read", "Atomic"}

// String returns the verb as perftest's test titles spell it
// ("RDMA_Write"), or "Verb(n)" for a number perftest has no verb for.
func (v Verb) String() string {
	if v >= 0 && int(v) < len(verbTitles) {
		return verbTitles[v]
	}
	return "Verb(" + strconv.Itoa(int(v)) + ")"
}

// HasReceives reports whether the responder posts receive work requests
// and gets receive completions (SEND, SEND with immediate, WRITE with
// immediate): perftest's has_recv_comp.
func (v Verb) HasReceives() bool { return v == Send || v == SendImm || v == WriteImm }

// RTTFactor is the divisor that turns a measured round trip into the
// reported latency: 2 (half a round trip) for SEND and WRITE, 1 (the whole
// round trip) for READ and ATOMIC.
func (v Verb) RTTFactor() int {
	if v == Read || v == Atomic {
		return 1
	}
	return 2
}

// TestKind is perftest's TestType (its "tst" field): latency or bandwidth.
type TestKind int32

// Test kinds.
const (
	Latency          TestKind = 0
	Bandwidth        TestKind = 1
	LatencyByBW      TestKind = 2 // perftest's LAT_BY_BW; pvperf never runs it
	FlowSteeringRate TestKind = 3 // perftest's FS_RATE; pvperf never runs it
)

var testKindNames = [...]string{"LAT", "BW", "LAT_BY_BW", "FS_RATE"}

// String returns perftest's name of the kind ("BW").
func (k TestKind) String() string { return name(testKindNames[:], int32(k), "TestKind") }

// AtomicType is the operation of the atomic tests: perftest's enum
// AtomicType.
type AtomicType int32

// Atomic operations.
const (
	CmpAndSwap  AtomicType = 0
	FetchAndAdd AtomicType = 1 // the atomic tests' default
)

var atomicNames = [...]string{"CMP_AND_SWAP", "FETCH_AND_ADD"}

// String returns the operation as perftest prints it ("FETCH_AND_ADD").
func (a AtomicType) String() string { return name(atomicNames[:], int32(a), "AtomicType") }

// Connection is the queue pair type of a test (-c): perftest's connection
// types, in the order of its connStr table.
type Connection int32

// Connection types.
const (
	RC     Connection = 0
	UC     Connection = 1
	UD     Connection = 2
	RawEth Connection = 3
	XRC    Connection = 4
	DC     Connection = 5
	SRD    Connection = 6
)

var connNames = [...]string{"RC", "UC", "UD", "RawEth", "XRC", "DC", "SRD"}

// String returns the type as perftest prints it ("RC").
func (c Connection) String() string { return name(connNames[:], int32(c), "Connection") }

// Output is perftest's --output: what a run prints.
type Output int32

// Output modes.
const (
	OutputFull        Output = 0 // no --output: header, addresses and table
	OutputBandwidth   Output = 1 // --output=bandwidth: the average bandwidth alone
	OutputMessageRate Output = 2 // --output=message_rate: the message rate alone
	OutputLatency     Output = 3 // --output=latency: the average latency alone
)

var outputNames = [...]string{"full", "bandwidth", "message_rate", "latency"}

// String returns the --output value that selects o ("full" for none).
func (o Output) String() string { return name(outputNames[:], int32(o), "Output") }

func name(names []string, v int32, typ string) string {
	if v >= 0 && int(v) < len(names) {
		return names[v]
	}
	return typ + "(" + strconv.Itoa(int(v)) + ")"
}

// Dest is what one queue pair tells its peer out of band: perftest's
// struct pingpong_dest, enough to connect to the QP and to address its
// memory.
type Dest struct {
	LID      uint16
	OutReads uint16 // outstanding RDMA reads and atomics the QP accepts
	QPN      uint32 // 24 bits
	PSN      uint32 // 24 bits
	RKey     uint32
	VAddr    uint64
	GID      [16]byte
	SRQN     uint32
	// TailMarkersVAddr is the address of the data-validation tail markers
	// (--data_validation formats only).
	TailMarkersVAddr uint64
}
