package oob

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pvperf/pvperf/perftest"
)

// A capture is one recorded run of real perftest binaries (testdata/captures;
// see its README.md): both outputs and every
// out-of-band chunk.
type capture struct {
	name      string
	args      string
	serverOut []string // stdout+stderr lines of the server
	clientOut []string
	chunks    []chunk
}

// chunk is what one read of the recording relay returned, or an end marker
// (EOF, read error) with no data.
type chunk struct {
	fromClient bool
	data       []byte
	marker     string
}

var (
	chunkHeader = regexp.MustCompile(`^(client->server|server->client) \+\d+ms len=(\d+)$`)
	chunkMarker = regexp.MustCompile(`^(client->server|server->client) (EOF|error .*)$`)
	hexLine     = regexp.MustCompile(`^[0-9a-f]{8}  `)
)

func loadCapture(t testing.TB, name string) *capture {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", "captures", name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	c := &capture{name: name}
	section := ""
	want, cur := -1, -1 // bytes the current chunk header announced, and its index
	checkLen := func(line int) {
		if cur >= 0 && len(c.chunks[cur].data) != want {
			t.Fatalf("%s:%d: chunk has %d bytes, header said %d", name, line, len(c.chunks[cur].data), want)
		}
	}
	sc := bufio.NewScanner(f)
	line := 0
	for sc.Scan() {
		line++
		l := sc.Text()
		switch {
		case strings.HasPrefix(l, "@@@ARGS "):
			c.args = strings.TrimPrefix(l, "@@@ARGS ")
			continue
		case strings.HasPrefix(l, "@@@perftest.RC "):
			continue
		case l == "@@@SERVER", l == "@@@CLIENT", l == "@@@OOB":
			section = l
			continue
		}
		switch section {
		case "@@@SERVER":
			c.serverOut = append(c.serverOut, l)
		case "@@@CLIENT":
			c.clientOut = append(c.clientOut, l)
		case "@@@OOB":
			if m := chunkHeader.FindStringSubmatch(l); m != nil {
				checkLen(line)
				want, _ = strconv.Atoi(m[2])
				cur = len(c.chunks)
				c.chunks = append(c.chunks, chunk{fromClient: m[1] == "client->server", data: []byte{}})
				continue
			}
			if m := chunkMarker.FindStringSubmatch(l); m != nil {
				checkLen(line)
				cur = -1
				c.chunks = append(c.chunks, chunk{fromClient: m[1] == "client->server", marker: m[2]})
				continue
			}
			if hexLine.MatchString(l) && cur >= 0 {
				ch := &c.chunks[cur]
				for _, field := range strings.Fields(l[10:]) {
					if len(field) != 2 || strings.HasPrefix(field, "|") {
						break
					}
					b, err := hex.DecodeString(field)
					if err != nil {
						break
					}
					ch.data = append(ch.data, b...)
				}
				continue
			}
			if strings.TrimSpace(l) != "" {
				t.Fatalf("%s:%d: unexpected line %q", name, line, l)
			}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	checkLen(line)
	if len(c.chunks) == 0 {
		t.Fatalf("%s: no chunks", name)
	}
	return c
}

// sideMsgs is what one side of a capture sent, sorted by message type (the
// sizes are all distinct in these runs).
type sideMsgs struct {
	version  []byte
	sys      [][]byte // page size, cache line size
	mtu      []byte
	params   []byte
	keys     [][]byte // 108 bytes each (a 113-byte chunk is a key + "done\0")
	reports  [][]byte
	doneSent bool
}

func (c *capture) side(client bool) sideMsgs {
	var s sideMsgs
	for _, ch := range c.chunks {
		if ch.marker != "" || ch.fromClient != client {
			continue
		}
		d := ch.data
		switch len(d) {
		case VersionSize:
			s.version = d
		case 4:
			s.sys = append(s.sys, d)
		case 2:
			s.mtu = d
		case ParamsSize:
			s.params = d
		case 108:
			s.keys = append(s.keys, d)
		case 113:
			s.keys = append(s.keys, d[:108])
			s.doneSent = true
		case 5:
			s.doneSent = true
		case 8:
			s.reports = append(s.reports, d)
		default:
			panic(fmt.Sprintf("%s: unexpected %d-byte chunk", c.name, len(d)))
		}
	}
	return s
}

// scenario is a test as perftest runs it: enough to know the order of the
// out-of-band messages (as perftest's test mains order them).
type scenario struct {
	file   string
	verb   perftest.Verb
	lat    bool
	duplex bool // -b
	qps    int
}

// values is what one side sends, decoded from the capture.
type values struct {
	version string
	sys     SysData
	mtu     MTU
	params  *Params
	keys    []perftest.Dest // per QP
	report  BWReport
}

// received is what one side got from the peer, in order.
type received struct {
	version string
	sys     SysData
	mtu     MTU
	params  *Params
	keys    []perftest.Dest
	report  *BWReport
}

func mustKey(t testing.TB, b []byte) perftest.Dest {
	t.Helper()
	k, err := parseKey(b, KeyGID)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func decodeReport(t testing.TB, msgs [][]byte) *BWReport {
	t.Helper()
	if len(msgs) == 0 {
		return nil
	}
	if len(msgs) != 5 {
		t.Fatalf("%d report messages, want 5", len(msgs))
	}
	be := binary.BigEndian
	return &BWReport{
		Size:       be.Uint64(msgs[0]),
		Iters:      be.Uint64(msgs[1]),
		BWPeak:     math.Float64frombits(be.Uint64(msgs[2])),
		BWAvg:      math.Float64frombits(be.Uint64(msgs[3])),
		MsgRateAvg: math.Float64frombits(be.Uint64(msgs[4])),
	}
}

// valuesOf decodes what one side of the capture sent.
func valuesOf(t testing.TB, sc scenario, s sideMsgs) values {
	t.Helper()
	v := values{
		version: versionString(s.version),
		sys: SysData{
			PageSize:      int32(binary.BigEndian.Uint32(s.sys[0])),
			CacheLineSize: int32(binary.BigEndian.Uint32(s.sys[1])),
		},
		mtu: MTU(ParseMTU(s.mtu)),
	}
	if s.params != nil {
		p, err := ParseParams(s.params)
		if err != nil {
			t.Fatal(err)
		}
		v.params = &p
	}
	first := 0 // round 1 starts after the latency tests' extra handshake
	if sc.lat && sc.verb != perftest.Send {
		first = 1
	}
	for i := 0; i < sc.qps; i++ {
		v.keys = append(v.keys, mustKey(t, s.keys[first+i]))
	}
	if r := decodeReport(t, s.reports); r != nil {
		v.report = *r
	}
	return v
}

// runSequence is the caller's side of a whole test, composed from the
// package's primitives in perftest's order.
func runSequence(c *Conn, sc scenario, v values) (received, error) {
	var r received
	var err error
	if r.version, err = c.ExchangeVersion(); err != nil {
		return r, err
	}
	if r.sys, err = c.ExchangeSysData(v.sys); err != nil {
		return r, err
	}
	if r.mtu, err = c.ExchangeMTU(v.mtu); err != nil {
		return r, err
	}
	local := v.params
	if local == nil {
		local = &Params{}
	}
	if r.params, err = c.Negotiate(local); err != nil {
		return r, err
	}
	hs := func(qp int) error {
		k, err := c.Handshake(KeyGID, v.keys[qp])
		if err == nil {
			r.keys = append(r.keys, k)
		}
		return err
	}
	var steps []int // QP of each handshake before the end of the test
	if sc.lat && sc.verb != perftest.Send {
		steps = append(steps, 0) // extra handshake of the latency tests
	}
	for i := 0; i < sc.qps; i++ {
		steps = append(steps, i) // round 1
	}
	if sc.verb == perftest.Send {
		steps = append(steps, 0)
	}
	for i := 0; i < sc.qps; i++ {
		steps = append(steps, i) // round 2
	}
	if sc.verb != perftest.Send {
		steps = append(steps, 0) // barrier after RTR
	}
	if sc.verb == perftest.Send || sc.duplex {
		steps = append(steps, 0) // start barrier
	}
	for _, qp := range steps {
		if err := hs(qp); err != nil {
			return r, err
		}
	}
	// (traffic)
	closeHS := func() error {
		k, err := c.CloseHandshake(KeyGID, v.keys[0])
		if err == nil {
			r.keys = append(r.keys, k)
		}
		return err
	}
	switch {
	case sc.lat && sc.verb == perftest.Write:
		// write_lat: no final handshake, the process just exits.
		return r, c.Close()
	case !sc.lat && sc.verb != perftest.Send:
		if !sc.duplex {
			if err := hs(0); err != nil {
				return r, err
			}
		}
		rep, err := c.ExchangeReports(v.report, false)
		if err != nil {
			return r, err
		}
		r.report = &rep
		return r, closeHS()
	default:
		return r, closeHS()
	}
}

// fakePeer plays one side of a capture on nc: it writes that side's chunks
// and reads the other side's, requiring them to be identical to the capture,
// then requires the other side to close.
func fakePeer(nc net.Conn, c *capture, peerIsClient bool) error {
	defer nc.Close()
	lastOurs := -1 // index of the last chunk the side under test sends
	for i, ch := range c.chunks {
		if ch.marker == "" && ch.fromClient != peerIsClient {
			lastOurs = i
		}
	}
	for i, ch := range c.chunks {
		if ch.marker != "" {
			continue
		}
		if ch.fromClient == peerIsClient {
			_ = nc.SetWriteDeadline(time.Now().Add(2 * time.Second))
			if _, err := nc.Write(ch.data); err != nil && i < lastOurs {
				return fmt.Errorf("chunk %d: write: %w", i, err)
			}
			continue
		}
		_ = nc.SetReadDeadline(time.Now().Add(2 * time.Second))
		got := make([]byte, len(ch.data))
		if n, err := io.ReadFull(nc, got); err != nil {
			return fmt.Errorf("chunk %d: read %d of %d bytes (%q so far): %w", i, n, len(got), got[:n], err)
		}
		if !bytes.Equal(got, ch.data) {
			return fmt.Errorf("chunk %d differs:\ngot:\n%swant:\n%s", i, hex.Dump(got), hex.Dump(ch.data))
		}
	}
	_ = nc.SetReadDeadline(time.Now().Add(2 * time.Second))
	var one [1]byte
	n, err := nc.Read(one[:])
	if n > 0 {
		return fmt.Errorf("extra byte %#x after the captured sequence", one[0])
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return fmt.Errorf("the side under test did not close the connection")
	}
	return nil // EOF, or a reset when it closed with unread data ("done")
}

var replays = []scenario{
	{file: "perftest-6.29/write_bw.txt", verb: perftest.Write, qps: 1},
	{file: "perftest-6.29/write_bw_a.txt", verb: perftest.Write, qps: 1},
	{file: "perftest-6.29/read_bw.txt", verb: perftest.Read, qps: 1},
	{file: "perftest-6.29/atomic_bw.txt", verb: perftest.Atomic, qps: 1},
	{file: "perftest-6.29/send_bw.txt", verb: perftest.Send, qps: 1},
	{file: "perftest-6.29/send_lat.txt", verb: perftest.Send, lat: true, qps: 1},
	{file: "perftest-6.29/write_lat.txt", verb: perftest.Write, lat: true, qps: 1},
	{file: "perftest-6.29/read_lat.txt", verb: perftest.Read, lat: true, qps: 1},
	{file: "perftest-6.29/mixed_srv606_cli629_write_bw.txt", verb: perftest.Write, qps: 1},
	{file: "perftest-6.29/mixed_srv629_cli606_write_bw.txt", verb: perftest.Write, qps: 1},
	{file: "perftest-6.06/write_bw.txt", verb: perftest.Write, qps: 1},
	{file: "perftest-6.06/write_bw_nogid.txt", verb: perftest.Write, qps: 1},
	{file: "perftest-6.06/write_bw_gbits_a.txt", verb: perftest.Write, qps: 1},
	{file: "perftest-6.06/write_bw_b.txt", verb: perftest.Write, duplex: true, qps: 1},
	{file: "perftest-6.06/write_bw_q2.txt", verb: perftest.Write, qps: 2},
	{file: "perftest-6.06/write_bw_D.txt", verb: perftest.Write, qps: 1},
	{file: "perftest-6.06/read_bw.txt", verb: perftest.Read, qps: 1},
	{file: "perftest-6.06/atomic_bw.txt", verb: perftest.Atomic, qps: 1},
	{file: "perftest-6.06/send_bw.txt", verb: perftest.Send, qps: 1},
	{file: "perftest-6.06/send_bw_ud.txt", verb: perftest.Send, qps: 1},
	{file: "perftest-6.06/send_lat.txt", verb: perftest.Send, lat: true, qps: 1},
	{file: "perftest-6.06/write_lat.txt", verb: perftest.Write, lat: true, qps: 1},
	{file: "perftest-6.06/read_lat.txt", verb: perftest.Read, lat: true, qps: 1},
	{file: "perftest-6.06/atomic_lat.txt", verb: perftest.Atomic, lat: true, qps: 1},
}

// TestReplayCaptures drives our client against a fake server that replays
// the captured server chunks, and our server against a fake client, for
// every capture: what we send must be the captured bytes exactly, and what
// we decode must be what the peer sent.
func TestReplayCaptures(t *testing.T) {
	for _, sc := range replays {
		for _, ourClient := range []bool{true, false} {
			role := "server"
			if ourClient {
				role = "client"
			}
			t.Run(strings.TrimSuffix(sc.file, ".txt")+"/"+role, func(t *testing.T) {
				t.Parallel()
				c := loadCapture(t, sc.file)
				ours, theirs := c.side(ourClient), c.side(!ourClient)
				v := valuesOf(t, sc, ours)
				r, err := replay(t, c, ourClient, func(conn *Conn) (received, error) {
					return runSequence(conn, sc, v)
				}, v.version)
				if err != nil {
					t.Fatalf("our %s: %v", role, err)
				}
				checkReceived(t, sc, r, v, theirs)
			})
		}
	}
}

// replay runs fn on our side of a capture against a fake peer over TCP
// loopback, through Listen/Accept or Dial.
func replay(t *testing.T, c *capture, ourClient bool, fn func(*Conn) (received, error), version string) (received, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cfg := Config{Version: version, Timeout: 2 * time.Second}
	peerErr := make(chan error, 1)
	var conn *Conn
	if ourClient {
		ln, err := net.Listen("tcp4", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		go func() {
			nc, err := ln.Accept()
			if err != nil {
				peerErr <- err
				return
			}
			peerErr <- fakePeer(nc, c, false)
		}()
		conn, err = Dial(ctx, "127.0.0.1", Addr{Port: ln.Addr().(*net.TCPAddr).Port}, cfg)
		if err != nil {
			t.Fatal(err)
		}
	} else {
		ln, err := Listen(ctx, Addr{Port: AnyPort, BindSourceIP: "127.0.0.1"})
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			nc, err := net.Dial("tcp4", ln.Addr().String())
			if err != nil {
				peerErr <- err
				return
			}
			peerErr <- fakePeer(nc, c, true)
		}()
		conn, err = ln.Accept(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
	}
	r, err := fn(conn)
	conn.Close()
	if perr := <-peerErr; perr != nil {
		t.Errorf("fake peer: %v", perr)
	}
	return r, err
}

func checkReceived(t *testing.T, sc scenario, r received, v values, theirs sideMsgs) {
	t.Helper()
	if want := versionString(theirs.version); r.version != want {
		t.Errorf("remote version %q, want %q", r.version, want)
	}
	tv := valuesOf(t, sc, theirs)
	if want := v.sys.Max(tv.sys); r.sys != want {
		t.Errorf("sys data %+v, want %+v", r.sys, want)
	}
	if want := min(v.mtu, tv.mtu); r.mtu != want {
		t.Errorf("mtu %v, want %v", r.mtu, want)
	}
	switch {
	case v.params != nil && tv.params != nil:
		if r.params == nil || !reflect.DeepEqual(*r.params, *tv.params) {
			t.Errorf("remote params %+v, want %+v", r.params, tv.params)
		}
	case r.params != nil:
		t.Errorf("negotiated with a peer that does not negotiate")
	}
	if len(r.keys) != len(theirs.keys) {
		t.Fatalf("%d remote keys, want %d", len(r.keys), len(theirs.keys))
	}
	for i, b := range theirs.keys {
		if want := mustKey(t, b); r.keys[i] != want {
			t.Errorf("remote key %d: %+v, want %+v", i, r.keys[i], want)
		}
	}
	want := decodeReport(t, theirs.reports)
	switch {
	case (r.report == nil) != (want == nil):
		t.Errorf("remote report %+v, want %+v", r.report, want)
	case want != nil && !sameReport(*r.report, *want):
		t.Errorf("remote report %+v, want %+v", *r.report, *want)
	}
}

// sameReport compares bit patterns (the 6.06 server sends garbage, NaNs
// included).
func sameReport(a, b BWReport) bool {
	return a.Size == b.Size && a.Iters == b.Iters &&
		math.Float64bits(a.BWPeak) == math.Float64bits(b.BWPeak) &&
		math.Float64bits(a.BWAvg) == math.Float64bits(b.BWAvg) &&
		math.Float64bits(a.MsgRateAvg) == math.Float64bits(b.MsgRateAvg)
}

// TestReplayMismatchSize replays the run where the server used -s 4096 and
// the client -s 8192: both sides must fail the negotiation with exactly the
// line the real binaries printed.
func TestReplayMismatchSize(t *testing.T) {
	const file = "perftest-6.29/mismatch_size.txt"
	for _, ourClient := range []bool{true, false} {
		role := "server"
		if ourClient {
			role = "client"
		}
		t.Run(role, func(t *testing.T) {
			c := loadCapture(t, file)
			ours := c.side(ourClient)
			sc := scenario{verb: perftest.Write, qps: 0}
			v := valuesOf(t, sc, ours)
			output := c.serverOut
			if ourClient {
				output = c.clientOut
			}
			_, err := replay(t, c, ourClient, func(conn *Conn) (received, error) {
				return runSequence(conn, sc, v)
			}, v.version)
			var me *MismatchError
			if !errors.As(err, &me) || !errors.Is(err, ErrMismatch) {
				t.Fatalf("got %v, want a *MismatchError", err)
			}
			if got, want := PerftestMessage(err), output[0]+"\n"; got != want {
				t.Errorf("message %q, want %q (captured)", got, want)
			}
			if output[1] != " Failed to negotiate parameters" {
				t.Errorf("captured second line %q", output[1])
			}
		})
	}
}

// TestCaptureCompare checks Compare on the captured structs directly.
func TestCaptureCompare(t *testing.T) {
	c := loadCapture(t, "perftest-6.29/mismatch_size.txt")
	srv, err := ParseParams(c.side(false).params)
	if err != nil {
		t.Fatal(err)
	}
	cli, err := ParseParams(c.side(true).params)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := PerftestMessage(Compare(&srv, &cli)), c.serverOut[0]+"\n"; got != want {
		t.Errorf("server: %q, want %q", got, want)
	}
	if got, want := PerftestMessage(Compare(&cli, &srv)), c.clientOut[0]+"\n"; got != want {
		t.Errorf("client: %q, want %q", got, want)
	}
	if err := Compare(&srv, &srv); err != nil {
		t.Errorf("equal structs: %v", err)
	}
}
