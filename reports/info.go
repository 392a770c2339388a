package reports

import "github.com/pvperf/pvperf/perftest"

// Version selects which perftest release's console format the text output
// reproduces. The zero value is the current format.
type Version int

const (
	// Perftest629 is perftest 6.29 (upstream commit 00b55b6), the current
	// format: "MiB/sec" labels, the Lock-free and Enhanced Reorder
	// columns, the CQE Poll Batch and NUMA node lines.
	Perftest629 Version = iota
	// Perftest606 is perftest 6.06 (Debian's package): "MB/sec" labels
	// (the unit was already 2^20 bytes), " PCIe relax order" and
	// " ibv_wr* API" alone on their lines, no CQE Poll Batch or NUMA node
	// line, RX depth only for SEND, and three spaces instead of five
	// before the BW table's MsgRate column.
	Perftest606
)

func (v Version) String() string {
	switch v {
	case Perftest629:
		return "6.29"
	case Perftest606:
		return "6.06"
	}
	return "unknown"
}

// Transport is the device's transport type as perftest's transport_str
// prints it.
type Transport int

const (
	TransportIB Transport = iota
	TransportIWARP
	TransportUnknown
)

func (t Transport) String() string {
	switch t {
	case TransportIB:
		return "IB"
	case TransportIWARP:
		return "IW"
	}
	return "Unknown"
}

// LinkLayer is the port's link layer as perftest's link_layer_str prints it
// (an unspecified link layer prints as IB).
type LinkLayer int

const (
	LinkIB LinkLayer = iota
	LinkEthernet
	LinkUnknown
)

func (l LinkLayer) String() string {
	switch l {
	case LinkIB:
		return "IB"
	case LinkEthernet:
		return "Ethernet"
	}
	return "Unknown"
}

// Strings for TestInfo.RelaxedOrdering and TestInfo.LockFree.
const (
	On          = "ON"
	Off         = "OFF"
	Unsupported = "Unsupported"
)

// NotSet is the value of the TestInfo fields whose perftest default is -1
// (GIDIndex, GIDIndex2, TOS, NUMANode): the line is not printed.
const NotSet = -1

// TestInfo is everything the header block, the address lines, the result
// tables and the JSON test_info need to know about a run: perftest's
// user_param as the report functions read it. It is a plain value; the
// engine or the CLI fills it once per run.
//
// Integer fields whose perftest default is -1 use NotSet for "not set";
// NewTestInfo returns a TestInfo with those already NotSet.
type TestInfo struct {
	// Version selects the perftest release whose format is reproduced.
	Version Version

	// Title: "<Verb> [<AtomicType>] [Bidirectional] [Post List] BW|Latency
	// [forwarding] [Multicast] Test".
	Verb          perftest.Verb
	Test          perftest.TestKind
	AtomicType    perftest.AtomicType // printed for Atomic only
	Duplex        bool                // -b: "Bidirectional", TX depth on both sides
	PostList      int                 // -l: "Post List" in BW titles and a line when > 1
	RecvPostList  int                 // --recv_post_list: a line when > 1
	MACForwarding bool                // raw Ethernet --mac_fwd: "forwarding" and the Buffer size line
	BufferSize    int                 // printed by the Buffer size line (perftest's buff_size/2)
	Multicast     bool                // -g: "Multicast" and " MultiCast runs on UD!"

	Events     bool // -e: " Test with events. Using <dev>_comp<vector>"
	CompVector int  // -X

	DualPort   bool // -O
	Device     string
	NumQPs     int // as perftest prints it (doubled by -O, DC/XRC duplex)
	Transport  Transport
	Connection perftest.Connection
	SRQ        bool

	// DataPath, when set, is printed after the address lines as
	// " Data path       : <DataPath>": how an emulated device reaches its
	// peer (memory copy, RoCE v2, TCP). It is pvperf's addition, left
	// empty for perftest's text alone.
	DataPath string

	// RelaxedOrdering is "ON", "OFF" or "Unsupported" (a build without
	// relaxed-ordering support); LockFree is "ON", "OFF" or
	// "Unsupported" (a build without the thread-domain API). When both are
	// "Unsupported", 6.29 prints its tab-separated variant of the line.
	// Perftest606 prints only RelaxedOrdering.
	RelaxedOrdering string
	LockFree        string
	// RelaxedOrderingWarning adds the two " WARNING: CPU is not PCIe
	// relaxed ordering compliant." lines (RO build, RO on, CPU not
	// compliant).
	RelaxedOrderingWarning bool

	WRAPI           bool // " ibv_wr* API : ON" (not --use_old_post_send)
	EnhancedReorder bool // "Using Enhanced Reorder : ON" (6.29)

	// Server is the side that waits for the connection (no host argument).
	Server bool

	TxDepth          int // printed on the client, or with -b
	RxDepth          int // printed for recv verbs on the server, or with -b
	DCSStreams       int // DC: " DCS num streams" when > 0
	DCSActiveStreams int // DC: " DCS active num streams" when > 0

	CQMod          int  // BW tests: " CQ Moderation"
	DynamicCQEPoll bool // BW tests, 6.29: " CQE Poll Batch  : Dynamic"
	CQEPollBatch   int  // BW tests, 6.29: the batch printed when not dynamic

	MTU        int // bytes
	Link       LinkLayer
	GIDIndex   int // NotSet: no GID line
	GIDIndex2  int // printed with DualPort only; NotSet: no line
	InlineSize int // " Max inline data" (not READ/ATOMIC)
	OutReads   int // " Outstand reads" (READ/ATOMIC)

	RdmaCMQPs      bool // -R: " rdma_cm QPs : ON"
	RdmaCMExchange bool // -z/-R: " Data ex. method : rdma_cm"; address lines lose their verb fields
	TOS            int  // -T with -R; NotSet: not printed

	// ROCmMemory and MUSAMemory are the " Use ROCm memory" and
	// " Use MUSA memory" lines, which only builds with that support print:
	// "" prints no line, otherwise "ON" or "OFF".
	ROCmMemory string
	MUSAMemory string

	NUMANode int // 6.29: " NUMA node" when >= 0; NotSet: no line

	// DLID is --dlid: it replaces the remote LID in the address lines
	// (0: not given).
	DLID uint16

	// Report options.
	Gbits         bool            // --report_gbits: Gb/s (10^9 bits) instead of MiB/s
	Output        perftest.Output // --output
	CPUUtil       bool            // --cpu_util with -D: the CPU_Util column
	ReportPerPort bool            // --report-per-port
	Duration      bool            // -D: duration mode (latency tables change)
	// ReportUnsorted (-U) and ReportHistogram (-H) dump the latency
	// samples before the row.
	ReportUnsorted  bool
	ReportHistogram bool
}

// NewTestInfo returns a TestInfo for verb and kind with perftest's
// defaults for the fields the caller usually does not change: one QP, IB
// transport and link, RC, FETCH_AND_ADD, relaxed ordering ON, lock-free OFF, post lists
// of 1, CQ moderation 1, CQE poll batch 16 (not dynamic), MTU 1024, and
// NotSet for GIDIndex, GIDIndex2, TOS and NUMANode.
func NewTestInfo(verb perftest.Verb, kind perftest.TestKind) TestInfo {
	return TestInfo{
		Verb:            verb,
		Test:            kind,
		AtomicType:      perftest.FetchAndAdd,
		PostList:        1,
		RecvPostList:    1,
		NumQPs:          1,
		RelaxedOrdering: On,
		LockFree:        Off,
		CQMod:           1,
		CQEPollBatch:    16,
		MTU:             1024,
		GIDIndex:        NotSet,
		GIDIndex2:       NotSet,
		TOS:             NotSet,
		NUMANode:        NotSet,
	}
}

// titleParts returns the words of the test title, e.g.
// ["RDMA_Write", "Bidirectional", "BW"] ("Test" excluded).
func (ti *TestInfo) titleParts() []string {
	parts := []string{ti.Verb.String()}
	if ti.Verb == perftest.Atomic {
		parts = append(parts, ti.AtomicType.String())
	}
	switch ti.Test {
	case perftest.Bandwidth:
		if ti.Duplex {
			parts = append(parts, "Bidirectional")
		}
		if ti.PostList > 1 {
			parts = append(parts, "Post List")
		}
		parts = append(parts, "BW")
	case perftest.Latency:
		parts = append(parts, "Latency")
	}
	if ti.MACForwarding {
		parts = append(parts, "forwarding")
	}
	if ti.Multicast {
		parts = append(parts, "Multicast")
	}
	return parts
}

// Title is the header's test title without its indentation, e.g.
// "Atomic FETCH_AND_ADD Latency Test".
func (ti *TestInfo) Title() string {
	s := ""
	for _, p := range ti.titleParts() {
		s += p + " "
	}
	return s + "Test"
}

// JSONTestName is the title as perftest's JSON spells it, e.g.
// "RDMA_Write_Bidirectional_BW_Test" ("Post List" becomes "Post_List").
func (ti *TestInfo) JSONTestName() string {
	s := ""
	for _, p := range ti.titleParts() {
		if p == "Post List" {
			p = "Post_List"
		}
		s += p + "_"
	}
	return s + "Test"
}

// full reports whether the run prints everything (no --output).
func (ti *TestInfo) full() bool { return ti.Output == perftest.OutputFull }

// recvDepthShown reports whether the header shows RX depth.
func (ti *TestInfo) recvDepthShown() bool {
	recv := ti.Verb.HasReceives()
	if ti.Version == Perftest606 {
		recv = ti.Verb == perftest.Send // 6.06 tests verb == SEND only
	}
	return recv && (ti.Server || ti.Duplex)
}
