package verbstest

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/pvperf/pvperf/verbs"
)

// Target is a device the suite runs against.
type Target struct {
	// Name identifies the target in test names and in the environment of
	// peer processes; it must be unique among the targets given to Main.
	Name string
	// Device returns the device. It is called once per test (and once in
	// each peer process) and must return the same device every time.
	Device func() (verbs.Device, error)
	// Quirks are the device's documented departures from what the suite
	// checks; the zero value means none.
	Quirks Quirks
}

// Quirks describe how a device departs from the behaviour the suite
// checks, which the InfiniBand specification prescribes. Each non-empty
// string field is the reason: the suite then skips that check, saying so,
// or accepts the device's alternative and logs it.
type Quirks struct {
	// RecvPostedInErr: a receive posted while the QP is in the error
	// state stays queued instead of completing with WR_FLUSH_ERR.
	RecvPostedInErr string
	// ResetKeepsCompletions: resetting a QP leaves its completions in its
	// CQs.
	ResetKeepsCompletions string
	// NoQPErrorEvents: no QP_ACCESS_ERR, QP_REQ_ERR or QP_FATAL
	// asynchronous event reaches the responder of a failed request.
	NoQPErrorEvents string
	// NoLinkLocalGID: the GID table has no link-local GID at index 0
	// (a device whose only GID is its own IP address).
	NoLinkLocalGID string
	// UDOversize: a UD send larger than the path MTU completes without
	// error (the receiver drops it).
	UDOversize string
	// NoGRHChecksum: the IPv4 header in the GRH area of a UD receive has
	// no header checksum.
	NoGRHChecksum string
	// Statuses gives the completion status the device reports in a
	// situation where the suite expects another, for the reason
	// StatusesReason.
	Statuses       map[Situation]verbs.WCStatus
	StatusesReason string
	// SendOnly: the device executes every send work request as a plain
	// SEND (no RDMA WRITE, READ or atomics reach the peer). Tests of the
	// data path that need no remote access (Allocs) use SENDs instead.
	SendOnly string
	// Skip names subtests the device cannot pass, each with its reason:
	// a key is the end of a subtest's name ("Opcodes/Each/RC/RDMA_READ"),
	// matched at a "/" boundary; the subtest and those under it are skipped.
	Skip map[string]string
}

// skipReason is the reason of the Skip entry that names t, if any.
func (q *Quirks) skipReason(name string) (string, bool) {
	for k, why := range q.Skip {
		if strings.HasSuffix(name, "/"+k) {
			return why, true
		}
	}
	return "", false
}

// current is the target the suite runs against: Run runs one target at a
// time, one subtest after the other.
var current *Target

// Situation names a failure whose completion status devices report
// differently.
type Situation string

// Situations.
const (
	// RecvTooSmall: the receiver's completion of a message larger than its
	// receive buffer (LOC_LEN_ERR).
	RecvTooSmall Situation = "receive too small"
	// MessageTooLarge: the requester's completion of that message
	// (REM_INV_REQ_ERR).
	MessageTooLarge Situation = "requester of a message too large for the receive"
	// BadLKey: a local key that is not valid in the QP's protection domain
	// (LOC_PROT_ERR).
	BadLKey Situation = "local key not valid for the QP"
)

// status returns the completion status tg's device reports in situation s,
// where the suite expects want, logging a substitution.
func (tg Target) status(t testing.TB, s Situation, want verbs.WCStatus) verbs.WCStatus {
	t.Helper()
	if alt, ok := tg.Quirks.Statuses[s]; ok {
		t.Logf("%s: expecting %s instead of %s (device quirk: %s)", s, alt.Name(), want.Name(), tg.Quirks.StatusesReason)
		return alt
	}
	return want
}

// skipIf skips t, with the reason, when a quirk applies.
func skipIf(t *testing.T, quirk string) {
	t.Helper()
	if quirk != "" {
		t.Skip("device quirk: " + quirk)
	}
}

// PeerEnv is the environment variable that makes a test binary a peer of
// the suite instead of running tests. Its value is "role:target-name".
const PeerEnv = "PVPERF_VERBSTEST_PEER"

// Run runs the whole suite against tg, one subtest after the other.
func Run(t *testing.T, tg Target) {
	if tg.Device == nil {
		t.Fatalf("target %q has no Device function", tg.Name)
	}
	current = &tg
	defer func() { current = nil }()
	run(t, "Lifecycle", func(t *testing.T) { testLifecycle(t, tg) })
	run(t, "MemoryRegion", func(t *testing.T) { testMemoryRegion(t, tg) })
	run(t, "QPState", func(t *testing.T) { testQPState(t, tg) })
	run(t, "Opcodes", func(t *testing.T) { testOpcodes(t, tg) })
	run(t, "SRQ", func(t *testing.T) { testSRQ(t, tg) })
	run(t, "UD", func(t *testing.T) { testUD(t, tg) })
	run(t, "Errors", func(t *testing.T) { testErrors(t, tg) })
	run(t, "TwoProcesses", func(t *testing.T) { testTwoProcesses(t, tg) })
	run(t, "Allocs", func(t *testing.T) { testAllocs(t, tg) })
}

// Main is for TestMain. In a process the suite started as a peer (PeerEnv
// is set) it runs the requested role with the named target and exits;
// otherwise it runs the tests: os.Exit(m.Run()).
func Main(m *testing.M, targets ...Target) {
	if v := os.Getenv(PeerEnv); v != "" {
		role, name, _ := strings.Cut(v, ":")
		for _, tg := range targets {
			if tg.Name == name {
				os.Exit(runPeer(role, tg))
			}
		}
		fmt.Fprintf(os.Stderr, "verbstest: %s=%q names no known target\n", PeerEnv, v)
		os.Exit(2)
	}
	os.Exit(m.Run())
}

// Endpoint is what the peer of a QP needs to reach it: what perftest
// exchanges out of band (the rkey and address of its memory aside).
type Endpoint struct {
	QPN uint32
	PSN uint32 // the QP's first send PSN, the peer's expected receive PSN
	GID verbs.GID
}

// ConnParams are the attributes Connect gives a QP.
type ConnParams struct {
	SGIDIndex   uint8
	MTU         verbs.MTU    // path MTU (RC, UC)
	Access      verbs.Access // QP access flags (RC, UC)
	QKey        uint32       // UD
	Timeout     uint8        // local ACK timeout (RC)
	RetryCnt    uint8        // (RC)
	RNRRetry    uint8        // (RC)
	MinRNRTimer uint8        // RNR NAK timer this QP asks requesters to wait (RC)
	RdAtomic    uint8        // max_rd_atomic and max_dest_rd_atomic (RC)
}

// DefaultConnParams are the parameters perftest uses, on GID index 0 with
// a path MTU of 1024 and every remote access right.
func DefaultConnParams() ConnParams {
	return ConnParams{
		MTU:         verbs.MTU1024,
		Access:      verbs.AccessLocalWrite | verbs.AccessRemoteWrite | verbs.AccessRemoteRead | verbs.AccessRemoteAtomic,
		QKey:        0x11111111,
		Timeout:     14,
		RetryCnt:    7,
		RNRRetry:    7,
		MinRNRTimer: 12,
		RdAtomic:    1,
	}
}

// stepAttr returns the attributes and mask that move a QP of type typ into
// state to along RESET, INIT, RTR, RTS: exactly the required ones.
func stepAttr(typ verbs.QPType, to verbs.QPState, psn uint32, remote Endpoint, p ConnParams) (verbs.QPAttr, verbs.QPAttrMask) {
	a := verbs.QPAttr{State: to}
	m := verbs.AttrState
	switch to {
	case verbs.StateInit:
		a.PKeyIndex, a.Port = 0, 1
		m |= verbs.AttrPKeyIndex | verbs.AttrPort
		if typ == verbs.UD {
			a.QKey = p.QKey
			m |= verbs.AttrQKey
		} else {
			a.Access = p.Access
			m |= verbs.AttrAccessFlags
		}
	case verbs.StateRTR:
		if typ == verbs.UD {
			break
		}
		a.AH = verbs.AHAttr{IsGlobal: true, Port: 1, GRH: verbs.GRH{DGID: remote.GID, SGIDIndex: p.SGIDIndex, HopLimit: 64}}
		a.PathMTU, a.DestQPN, a.RQPSN = p.MTU, remote.QPN, remote.PSN
		m |= verbs.AttrAV | verbs.AttrPathMTU | verbs.AttrDestQPN | verbs.AttrRQPSN
		if typ == verbs.RC {
			a.MaxDestRdAtomic, a.MinRNRTimer = p.RdAtomic, p.MinRNRTimer
			m |= verbs.AttrMaxDestRdAtomic | verbs.AttrMinRNRTimer
		}
	case verbs.StateRTS:
		a.SQPSN = psn
		m |= verbs.AttrSQPSN
		if typ == verbs.RC {
			a.Timeout, a.RetryCnt, a.RNRRetry, a.MaxRdAtomic = p.Timeout, p.RetryCnt, p.RNRRetry, p.RdAtomic
			m |= verbs.AttrTimeout | verbs.AttrRetryCnt | verbs.AttrRNRRetry | verbs.AttrMaxQPRdAtomic
		}
	}
	return a, m
}

// Connect moves qp from RESET through INIT and RTR to RTS, connected to
// remote (RC, UC) or ready for datagrams (UD, which ignores remote). psn is
// the QP's first send PSN.
func Connect(qp verbs.QP, psn uint32, remote Endpoint, p ConnParams) error {
	for _, s := range []verbs.QPState{verbs.StateInit, verbs.StateRTR, verbs.StateRTS} {
		a, m := stepAttr(qp.Type(), s, psn, remote, p)
		if err := qp.Modify(&a, m); err != nil {
			return err
		}
	}
	return nil
}

// Side is one end of a Pair. Every object is its own: PD, memory and its
// memory region, a send and a receive CQ, the QP, and for UD an address
// handle that reaches the other side.
type Side struct {
	Ctx    verbs.Context
	PD     verbs.PD
	Mem    verbs.Memory
	MR     verbs.MR // all of Mem, with local write and every remote right
	SendCQ verbs.CQ
	RecvCQ verbs.CQ
	QP     verbs.QP
	GID    verbs.GIDEntry // the source GID of the QP
	PSN    uint32         // the QP's first send PSN
	AH     verbs.AH       // UD: address of the other side
}

// Endpoint returns what the other side needs to connect to s.
func (s *Side) Endpoint() Endpoint { return Endpoint{QPN: s.QP.Num(), PSN: s.PSN, GID: s.GID.GID} }

// Pair is two QPs of one type connected to each other (RC, UC) or ready to
// exchange datagrams (UD).
type Pair struct {
	A, B *Side
}

// NewPair makes a Pair with A on context a and B on context b (which may be
// the same context), each with 64 KiB of registered memory and room for 64
// work requests each way, connected with p. It fails t if anything fails.
// Everything is closed, children first, when t ends.
func NewPair(t testing.TB, a, b verbs.Context, typ verbs.QPType, p ConnParams) *Pair {
	t.Helper()
	return newPair(t, a, b, pairOpts{typ: typ, pa: p, pb: p})
}
