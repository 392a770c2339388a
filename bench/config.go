package bench

import (
	"time"

	"github.com/pvperf/pvperf/perftest"
	"github.com/pvperf/pvperf/verbs"
)

// Defaults shared by the command line and the engine (perftest.md §2.2).
const (
	DefaultPort      = 18515
	DefaultQPTimeout = 14
	// DefaultRetryCount is --retry_count's default: the retry counts of the
	// connection manager's connections (-z, -R).
	DefaultRetryCount   = 7
	DefaultCQMod        = 100
	DefaultBWTxDepth    = 128
	DefaultLatTxDepth   = 1
	DefaultBWSize       = 65536
	DefaultLatSize      = 2
	DefaultAtomicSize   = 8
	DefaultIters        = 1000
	DefaultWriteBWIters = 5000
	DefaultRecvRxDepth  = 512
	DefaultDuration     = 5
	MaxSize             = 8388608 // largest size of -a (2^23)
	UDAddition          = 40      // GRH room in UD receive buffers
	// ProtocolVersion is the perftest version whose out-of-band protocol
	// pvperf speaks.
	ProtocolVersion = "6.29"
)

// Config describes one test run, as perftest's parameters do after the
// command line is parsed and checked. It is a plain value; nothing touches
// a device before Run.
type Config struct {
	Test       perftest.TestKind
	Verb       perftest.Verb
	AtomicType perftest.AtomicType
	Connection perftest.Connection

	// Roles and the out-of-band connection.
	Server       string // peer to connect to; "" makes this side the server
	Loopback     bool   // run both sides in this process (pvperf only)
	Port         int
	IPv6Addr     bool   // --ipv6-addr: out-of-band socket over IPv6
	BindSourceIP string // --bind_source_ip
	Version      string // protocol version advertised to the peer
	PeerTimeout  time.Duration
	// ParamsSize is the size of perftest's parameter struct this side
	// sends (--params-size): 0 sends 320 bytes and, as a server, answers
	// in the client's size; 312 or 320 fixes it.
	ParamsSize int
	// RdmaCM (-R) connects the test's QPs through the connection manager
	// and implies CMExchange (-z): the out-of-band exchange runs over an
	// RC QP the connection manager connects, not TCP. CM is the
	// connection manager of the device (internal/cli sets it); TOS (-T,
	// -1 = unset) and RetryCount (--retry_count) go to its ids.
	RdmaCM     bool
	CMExchange bool
	CM         verbs.CM
	TOS        int
	RetryCount int

	// Device and addressing.
	Device     string // -d; "" = first device
	IBPort     int    // -i
	GIDIndex   int    // -x; -1 = automatic
	PreferIPv6 bool   // --ipv6: prefer IPv6 GIDs in the automatic choice
	MTU        int    // -m in bytes; 0 = the port's active MTU
	SL         int
	TClass     int
	FlowLabel  []int
	PKeyIndex  int
	QPTimeout  int // -u
	DLID       int // --dlid; 0 = the peer's

	// What to run.
	Size      uint64 // -s
	SizeGiven bool   // -s was on the command line (UD sizes above the MTU are then an error)
	AllSizes  bool   // -a
	Iters     uint64 // -n
	Duration  int    // -D seconds; 0 = iteration mode (--run_infinitely: the period of its rows)
	// RunInfinitely is --run_infinitely: the client of write_bw, read_bw
	// or atomic_bw sends until the user stops it, printing a row for
	// every Duration seconds.
	RunInfinitely bool
	// StopTraffic, for RunInfinitely, is called as the endless loop
	// starts: the loop ends when the channel it returns is closed (the
	// command closes it on the first SIGINT, as perftest's handler ends
	// its loop), and release is called when the loop has ended. With
	// StopTraffic nil only the context ends the loop.
	StopTraffic   func() (stop <-chan struct{}, release func())
	Margin        int // -f seconds
	TxDepth       int
	RxDepth       int
	CQMod         int
	PostList      int
	RecvPostList  int
	NumQPs        int
	Inline        int  // -I; -1 = the test's default
	InlineGiven   bool // -I was on the command line
	OutReads      int  // -o; 0 = the device's maximum
	UseSRQ        bool
	Events        bool // -e
	CompVector    int  // -X
	Bidirectional bool // -b
	Reversed      bool
	WarmUp        bool
	LatencyGap    int // --latency_gap in microseconds
	NoPeak        bool

	// PollBatch is how many completions a bandwidth loop polls at once
	// (perftest's cqe_poll: 16, 64 for many QPs with large messages, or
	// --cqe_poll); DynamicPolling starts the batch at 1024 and adapts it
	// during the first completions (perftest's dynamic CQE polling).
	PollBatch      int
	DynamicPolling bool
	// PayloadFile is --payload_file_path: a file of comma-separated
	// 32-bit words ("0xaabbccdd,...") whose bytes, little-endian, fill the
	// buffers in place of random data.
	PayloadFile string
	// WaitDestroy is --wait_destroy: how long a bandwidth test waits,
	// connection closed, before it destroys its resources.
	WaitDestroy time.Duration
	// NoRelaxedOrdering is --disable_pcie_relaxed: memory regions are
	// registered without relaxed ordering.
	NoRelaxedOrdering bool
	// ForceLink is --force-link: the link layer to assume in place of the
	// port's (verbs.LinkUnspecified: the port's own).
	ForceLink verbs.LinkLayer
	// DataValidation is perftest's --data_validation (write_bw and
	// read_bw over RC): the sender moves three fill patterns through a
	// ring of slots on the receiver and bumps a tail marker there with a
	// fetch-and-add after each chunk; the receiving side (WRITE's server,
	// READ's client) checks each chunk whose marker moved, and prints
	// VALIDATION: PASSED or FAILED after the results. The key messages
	// carry the markers' address.
	DataValidation bool
	// DataValidationDebug is --data_validation_debug: the validation's
	// parameters and counters as well.
	DataValidationDebug bool

	// Reporting.
	ReportGbits     bool
	ReportBoth      bool
	Output          perftest.Output
	Cycles          bool // -C
	ReportUnsorted  bool // -U
	ReportHistogram bool // -H
	CPUUtil         bool
	LimitBW         float64 // -w: fail below this BW
	LimitMsgRate    float64 // -y: fail below this message rate
	// LimitBWSet tells that -w was given, even as 0: perftest checks both
	// limits only then.
	LimitBWSet bool
	JSON       bool
	JSONFile   string
	CSVFile    string // --out_csv: "" = none
	HTMLFile   string // --out_html: "" = none
	// PvperfVersion is pvperf's version, recorded in the results.
	PvperfVersion string
	// Extras prints pvperf's additions to perftest's text: latency
	// percentiles, the Hockney fit of a sweep, -D's intervals. Off, the
	// text is perftest's alone (--perftest_output, or a perftest name).
	Extras bool
	// IntervalJSON is --interval_json: with -D, one JSON line per second
	// of the run to this file ("-": standard output, in place of the
	// interval lines of the text).
	IntervalJSON string
	// Repeat is --repeat: run the test this many times (at most, with
	// RepeatCI) and summarise the runs; 0 or 1 runs it once. A server
	// serves that many clients one after the other.
	Repeat int
	// RepeatCI is --repeat_ci, in percent: the client stops repeating
	// once the confidence interval of the median of every size is within
	// that much of the median (after at least MinRepeats runs), and ends
	// the server's series with an empty connection.
	RepeatCI float64
	// CheckData is --check_data (always on with Loopback): after the test
	// each receiving side checks that what landed in its buffer is what
	// a pvperf sender sends (see ErrDataMismatch).
	CheckData bool
	// NoLatencyHistogram leaves the latency loops without their HDR
	// histogram (for benchmarks of its cost; percentiles then come from
	// the samples alone, and duration runs have none).
	NoLatencyHistogram bool
	// Listening, when set, is called once a server listens for its
	// client (on the out-of-band port, or the connection manager's),
	// with the port: a client started after it finds the server.
	Listening func(port int)
}

// TestName is the command that runs cfg's test: "write_bw", "send_lat",
// ... (SEND and WRITE with immediate data are options of send and write).
func (cfg *Config) TestName() string {
	var verb string
	switch cfg.Verb {
	case perftest.Send, perftest.SendImm:
		verb = "send"
	case perftest.Write, perftest.WriteImm:
		verb = "write"
	case perftest.Read:
		verb = "read"
	default:
		verb = "atomic"
	}
	if cfg.Test == perftest.Latency {
		return verb + "_lat"
	}
	return verb + "_bw"
}
