package oob

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"math"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pvperf/pvperf/perftest"
)

// pair returns our Conn in role and the raw other end of a TCP loopback
// connection.
func pair(t *testing.T, role Role, cfg Config) (*Conn, net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			accepted <- nil
			return
		}
		accepted <- c
	}()
	ours, err := net.Dial("tcp4", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	peer := <-accepted
	if peer == nil {
		t.Fatal("accept failed")
	}
	c, err := NewConn(ours, role, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(); peer.Close() })
	return c, peer
}

func version(v string) []byte {
	b, _ := encodeVersion(v)
	return b[:]
}

func readN(t *testing.T, c net.Conn, n int) []byte {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
	b := make([]byte, n)
	if _, err := io.ReadFull(c, b); err != nil {
		t.Fatalf("peer read %d bytes: %v", n, err)
	}
	return b
}

func TestTimeoutSilentPeer(t *testing.T) {
	for _, role := range []Role{Client, Server} {
		t.Run(role.String(), func(t *testing.T) {
			const timeout = 150 * time.Millisecond
			c, _ := pair(t, role, Config{Timeout: timeout})
			start := time.Now()
			_, err := c.ExchangeVersion()
			elapsed := time.Since(start)
			if !errors.Is(err, ErrTimeout) || !errors.Is(err, os.ErrDeadlineExceeded) {
				t.Fatalf("got %v, want ErrTimeout", err)
			}
			// Below: the deadline fired early. Above: generous, for a
			// loaded machine; a hang is what it catches.
			if elapsed < timeout || elapsed > timeout+10*time.Second {
				t.Errorf("failed after %v, timeout %v", elapsed, timeout)
			}
			var ee *ExchangeError
			if !errors.As(err, &ee) || ee.Step != "version" || ee.Op != "read" || ee.Server != (role == Server) {
				t.Errorf("error %#v", ee)
			}
			if !strings.HasPrefix(err.Error(), "oob: exchange version: read: peer did not respond in time: ") {
				t.Errorf("message %q", err)
			}
		})
	}
}

// A peer that stops in the middle of a message must not make us hang.
func TestTimeoutPartialMessage(t *testing.T) {
	c, peer := pair(t, Server, Config{Timeout: 100 * time.Millisecond})
	_, _ = peer.Write([]byte("6.2")) // 3 of 16 bytes, then silence
	start := time.Now()
	_, err := c.ExchangeVersion()
	if !errors.Is(err, ErrTimeout) {
		t.Fatalf("got %v, want ErrTimeout", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("took %v", d)
	}
}

func TestPeerClosesMidExchange(t *testing.T) {
	t.Run("after our version", func(t *testing.T) {
		c, peer := pair(t, Client, Config{Timeout: 5 * time.Second})
		go func() {
			_, _ = io.ReadFull(peer, make([]byte, VersionSize))
			peer.Close()
		}()
		_, err := c.ExchangeVersion()
		if !errors.Is(err, ErrPeerClosed) || !errors.Is(err, io.EOF) {
			t.Fatalf("got %v, want ErrPeerClosed", err)
		}
	})
	t.Run("short message", func(t *testing.T) {
		c, peer := pair(t, Server, Config{Timeout: 5 * time.Second})
		_, _ = peer.Write([]byte("6.29\x00\x00"))
		peer.Close()
		_, err := c.ExchangeVersion()
		if !errors.Is(err, ErrPeerClosed) || !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Fatalf("got %v, want ErrPeerClosed", err)
		}
		if !strings.Contains(err.Error(), "got 6 of 16 bytes") {
			t.Errorf("message %q", err)
		}
	})
	t.Run("key handshake", func(t *testing.T) {
		c, peer := pair(t, Server, Config{Timeout: 5 * time.Second})
		_, _ = peer.Write(bytes.Repeat([]byte("0"), 50))
		peer.Close()
		_, err := c.Handshake(KeyGID, captureKey)
		if !errors.Is(err, ErrPeerClosed) {
			t.Fatalf("got %v, want ErrPeerClosed", err)
		}
		want := "ethernet_read_keys: Couldn't read remote address\n Unable to read to socket/rdma_cm\n"
		if got := PerftestMessage(err); got != want {
			t.Errorf("message %q, want %q", got, want)
		}
	})
}

func TestCloseUnblocks(t *testing.T) {
	c, _ := pair(t, Server, Config{Timeout: NoTimeout})
	if c.Timeout() != NoTimeout {
		t.Fatalf("timeout %v", c.Timeout())
	}
	errc := make(chan error, 1)
	go func() {
		_, err := c.ExchangeVersion()
		errc <- err
	}()
	time.Sleep(50 * time.Millisecond)
	var wg sync.WaitGroup
	for range 3 { // Close is idempotent and safe from several goroutines
		wg.Add(1)
		go func() { defer wg.Done(); c.Close() }()
	}
	wg.Wait()
	select {
	case err := <-errc:
		if !errors.Is(err, ErrClosed) {
			t.Errorf("got %v, want ErrClosed", err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("exchange still blocked after Close")
	}
}

func TestSetTimeout(t *testing.T) {
	c, peer := pair(t, Client, Config{})
	if c.Timeout() != DefaultTimeout {
		t.Errorf("default %v", c.Timeout())
	}
	c.SetTimeout(50 * time.Millisecond)
	go func() { _, _ = io.Copy(io.Discard, peer) }()
	if _, err := c.exchangeRaw([]byte{1}); !errors.Is(err, ErrTimeout) {
		t.Errorf("got %v", err)
	}
	c.SetTimeout(0)
	if c.Timeout() != DefaultTimeout {
		t.Errorf("SetTimeout(0): %v", c.Timeout())
	}
	c.SetTimeout(-5)
	if c.Timeout() != NoTimeout {
		t.Errorf("SetTimeout(-5): %v", c.Timeout())
	}
}

func TestNewConnErrors(t *testing.T) {
	for _, cfg := range []Config{{Version: "0123456789abcdef"}, {ParamsSize: 100}} {
		if _, err := NewConn(nil, Client, cfg); err == nil {
			t.Errorf("%+v: no error", cfg)
		}
	}
	if _, err := NewConn(nil, Role(3), Config{}); err == nil {
		t.Error("bad role: no error")
	}
}

func TestStepsNeedVersion(t *testing.T) {
	c, _ := pair(t, Client, Config{})
	if _, err := c.ExchangeSysData(SysData{}); !errors.Is(err, ErrIncompatible) {
		t.Errorf("sys data: %v", err)
	}
	if _, err := c.ExchangeMTU(MTU1024); !errors.Is(err, ErrIncompatible) {
		t.Errorf("mtu: %v", err)
	}
	if _, err := c.Negotiate(&Params{}); !errors.Is(err, ErrIncompatible) {
		t.Errorf("negotiate: %v", err)
	}
	if _, err := c.ExchangeReports(BWReport{}, false); !errors.Is(err, ErrIncompatible) {
		t.Errorf("reports: %v", err)
	}
	if ok := c.haveVer; ok {
		t.Error("features known before the version exchange")
	}
}

func TestOldPeer(t *testing.T) {
	c, peer := pair(t, Client, Config{})
	go func() { _, _ = peer.Write(version("5.5")) }()
	remote, err := c.ExchangeVersion()
	var ve *VersionError
	if remote != "5.5" || !errors.As(err, &ve) || !errors.Is(err, ErrIncompatible) || ve.Value != 5.5 {
		t.Fatalf("got %q, %v", remote, err)
	}
	if got, want := PerftestMessage(err), "Current implementation is not compatible with versions older than 5.70\n"; got != want {
		t.Errorf("message %q", got)
	}
	if got := readN(t, peer, VersionSize); string(got) != string(version("6.29")) {
		t.Errorf("sent %q", got)
	}
}

// A 5.32 peer (refused by perftest, but the thresholds are there): 2-byte
// MTU, sys data, 4-byte iterations in the report.
func TestOldPeerWireSizes(t *testing.T) {
	c, peer := pair(t, Server, Config{})
	done := make(chan []byte, 1)
	go func() {
		var got []byte
		w := func(b []byte) { _, _ = peer.Write(b) }
		r := func(n int) {
			b := make([]byte, n)
			_, _ = io.ReadFull(peer, b)
			got = append(got, b...)
		}
		w(version("5.32"))
		r(16)
		w([]byte{0, 0, 0x20, 0}) // page size 8192
		r(4)
		w([]byte{0, 0, 0, 128}) // cache line 128
		r(4)
		w([]byte("4\x00"))
		r(2)
		w([]byte{0, 0, 0, 0, 0, 0, 0, 8}) // size
		r(8)
		w([]byte{0, 0, 0, 20}) // iters, 4 bytes
		r(4)
		for i := range 7 { // peak, avg, rate, 4 per-port values
			w(binary.BigEndian.AppendUint64(nil, math.Float64bits(float64(i))))
			r(8)
		}
		done <- got
	}()
	if _, err := c.ExchangeVersion(); !errors.Is(err, ErrIncompatible) {
		t.Fatalf("version: %v", err)
	}
	f, ok := c.feat, c.haveVer
	if want := (Features{SysData: true, MTU: true, MTUSize: 2, ReportItersSize: 4}); !ok || f != want {
		t.Fatalf("features %+v", f)
	}
	sys, err := c.ExchangeSysData(SysData{PageSize: 4096, CacheLineSize: 64})
	if err != nil || sys != (SysData{PageSize: 8192, CacheLineSize: 128}) {
		t.Fatalf("sys data %+v, %v", sys, err)
	}
	mtu, err := c.ExchangeMTU(MTU4096)
	if err != nil || mtu != MTU2048 {
		t.Fatalf("mtu %v, %v", mtu, err)
	}
	if p, err := c.Negotiate(&Params{}); p != nil || err != nil {
		t.Fatalf("negotiate with 5.32: %v, %v", p, err)
	}
	rep, err := c.ExchangeReports(BWReport{Size: 65536, Iters: 0x1_0000_0014, BWPeak: 1.5, BWAvg: 2.5, MsgRateAvg: 3.5,
		BWAvgP1: 4.5, MsgRateAvgP1: 5.5, BWAvgP2: 6.5, MsgRateAvgP2: 7.5}, true)
	if err != nil {
		t.Fatal(err)
	}
	want := BWReport{Size: 8, Iters: 20, BWPeak: 0, BWAvg: 1, MsgRateAvg: 2, BWAvgP1: 3, MsgRateAvgP1: 4, BWAvgP2: 5, MsgRateAvgP2: 6}
	if rep != want {
		t.Errorf("report %+v, want %+v", rep, want)
	}
	got := <-done
	var exp []byte
	exp = append(exp, version("6.29")...)
	exp = append(exp, 0, 0, 0x10, 0, 0, 0, 0, 64, '5', 0)
	exp = binary.BigEndian.AppendUint64(exp, 65536)
	exp = binary.BigEndian.AppendUint32(exp, 20) // low 32 bits of iters
	for _, v := range []float64{1.5, 2.5, 3.5, 4.5, 5.5, 6.5, 7.5} {
		exp = binary.BigEndian.AppendUint64(exp, math.Float64bits(v))
	}
	if !bytes.Equal(got, exp) {
		t.Errorf("sent\n% x\nwant\n% x", got, exp)
	}
}

// Against a pre-5.31 peer the MTU message is 4 bytes; before 5.1 there is
// none; before 5.32 no sys data.
func TestVeryOldPeerWire(t *testing.T) {
	c, peer := pair(t, Client, Config{})
	go func() {
		_, _ = peer.Write(version("5.2"))
		_, _ = peer.Write([]byte("2\x00\x00\x00"))
	}()
	_, _ = c.ExchangeVersion() // a VersionError: 5.2 < 5.70
	if sys, err := c.ExchangeSysData(SysData{PageSize: 4096}); err != nil || sys.PageSize != 4096 {
		t.Fatalf("sys data %+v, %v", sys, err)
	}
	mtu, err := c.ExchangeMTU(MTU1024)
	if err != nil || mtu != MTU512 {
		t.Fatalf("mtu %v, %v", mtu, err)
	}
	got := readN(t, peer, 16+4)
	if string(got[16:]) != "3\x00\x00\x00" {
		t.Errorf("sent mtu %q", got[16:])
	}
}

// Two Conns must stay in step whatever versions they advertise: both decide
// the optional steps from both versions.
func TestConnPairVersions(t *testing.T) {
	for _, vv := range [][2]string{{"6.29", "6.29"}, {"6.29", "6.27"}, {"6.06", "6.29"}, {"6.28", "6.29"}, {"5.70", "6.29"}} {
		t.Run(vv[0]+"-"+vv[1], func(t *testing.T) {
			cli, raw := pair(t, Client, Config{Version: vv[0], Timeout: 2 * time.Second})
			srv, err := NewConn(raw, Server, Config{Version: vv[1], Timeout: 2 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			sc := scenario{verb: perftest.Write, qps: 2}
			mk := func(v string, qpn uint32) values {
				return values{
					version: v,
					sys:     SysData{PageSize: 4096, CacheLineSize: 64},
					mtu:     MTU1024,
					params:  &Params{Verb: perftest.Write, Tst: perftest.Bandwidth, ReportFmt: MBS, Size: 65536, Iters: 5000, NumQPs: 2, Duration: 5, Attr: rxeAttr},
					keys:    []perftest.Dest{{OutReads: 1, QPN: qpn, PSN: 7}, {OutReads: 1, QPN: qpn + 1, PSN: 8}},
					report:  BWReport{Size: 65536, Iters: 5000, BWAvg: 1000},
				}
			}
			cv, sv := mk(vv[0], 0x10), mk(vv[1], 0x20)
			type result struct {
				r   received
				err error
			}
			sres := make(chan result, 1)
			go func() {
				r, err := runSequence(srv, sc, sv)
				sres <- result{r, err}
			}()
			cr, err := runSequence(cli, sc, cv)
			if err != nil {
				t.Fatalf("client: %v", err)
			}
			s := <-sres
			if s.err != nil {
				t.Fatalf("server: %v", s.err)
			}
			if cr.version != vv[1] || s.r.version != vv[0] {
				t.Errorf("versions %q %q", cr.version, s.r.version)
			}
			negotiates := ParseVersion(vv[0]) >= 6.28 && ParseVersion(vv[1]) >= 6.28
			if (cr.params != nil) != negotiates || (s.r.params != nil) != negotiates {
				t.Errorf("negotiation: client %v server %v, want %v", cr.params != nil, s.r.params != nil, negotiates)
			}
			if len(cr.keys) != 7 || cr.keys[1].QPN != 0x21 || s.r.keys[1].QPN != 0x11 {
				t.Errorf("keys %+v / %+v", cr.keys, s.r.keys)
			}
			if *s.r.report != cv.report || *cr.report != sv.report {
				t.Errorf("reports %+v / %+v", s.r.report, cr.report)
			}
		})
	}
}

func TestHandshakeMalformedKey(t *testing.T) {
	c, peer := pair(t, Client, Config{})
	bad := bytes.Repeat([]byte("z"), 59)
	go func() {
		_, _ = io.ReadFull(peer, make([]byte, 59))
		_, _ = peer.Write(bad)
	}()
	_, err := c.Handshake(KeyPlain, perftest.Dest{})
	var ee *ExchangeError
	if !errors.Is(err, ErrMalformed) || !errors.As(err, &ee) || ee.Op != "decode" {
		t.Fatalf("got %v", err)
	}
	want := "Couldn't parse line <" + string(bad) + ">\n Unable to read from socket/rdma_cm\n"
	if got := PerftestMessage(err); got != want {
		t.Errorf("message %q, want %q", got, want)
	}
}

func TestCloseHandshakeDone(t *testing.T) {
	for _, tt := range []struct {
		version string
		done    bool
	}{{"6.06", true}, {"6.16", true}, {"6.17", false}, {"6.29", false}} {
		t.Run(tt.version, func(t *testing.T) {
			c, peer := pair(t, Server, Config{Version: tt.version})
			go func() { _, _ = peer.Write(version("6.29")) }()
			if _, err := c.ExchangeVersion(); err != nil {
				t.Fatal(err)
			}
			readN(t, peer, VersionSize)
			k, _ := MarshalKey(&captureKey, KeyPlain)
			go func() { _, _ = peer.Write(k) }()
			if _, err := c.CloseHandshake(KeyPlain, perftest.Dest{}); err != nil {
				t.Fatal(err)
			}
			readN(t, peer, KeyPlain.Size())
			rest, err := io.ReadAll(peer)
			if err != nil {
				t.Fatal(err)
			}
			want := ""
			if tt.done {
				want = "done\x00"
			}
			if string(rest) != want {
				t.Errorf("after the handshake: %q, want %q", rest, want)
			}
			if err := c.Close(); err != nil {
				t.Errorf("second Close: %v", err)
			}
			if _, err := c.exchangeRaw([]byte{1}); !errors.Is(err, ErrClosed) {
				t.Errorf("exchange after close: %v", err)
			}
		})
	}
}

func TestExchangeErrorMessages(t *testing.T) {
	tests := []struct {
		e    ExchangeError
		want string
	}{
		{ExchangeError{Step: stepKey, Op: "write"}, "Couldn't send local address\n Unable to write to socket/rdma_cm\n"},
		{ExchangeError{Step: stepKey, Op: "write", Server: true}, "Couldn't send local address\n Unable to write from socket/rdma_cm\n"},
		{ExchangeError{Step: stepVersion, Op: "read"}, "ethernet_read_data: Couldn't read reports\n Unable to read from socket/rdma_cm\n Failed to exchange data between server and clients\n"},
		{ExchangeError{Step: stepPageSize, Op: "read", Server: true}, "ethernet_read_data: Couldn't read reports\n Unable to read to socket/rdma_cm\n Failed to exchange Page Size data between server and client\n"},
		{ExchangeError{Step: stepCacheLine, Op: "write"}, "Couldn't send reports\n Unable to write to socket/rdma_cm\n Failed to exchange Cache Line Size data between server and client\n"},
		{ExchangeError{Step: stepNegotiate, Op: "read"}, "ethernet_read_data: Couldn't read reports\n Unable to read from socket/rdma_cm\n Failed to exchange negotiation parameters between server and client\n"},
		{ExchangeError{Step: stepReportIters, Op: "read"}, "ethernet_read_data: Couldn't read reports\n Unable to read from socket/rdma_cm\n Failed to exchange data between server and clients\n"},
	}
	for _, tt := range tests {
		if got := tt.e.PerftestMessage(); got != tt.want {
			t.Errorf("%+v:\n got %q\nwant %q", tt.e, got, tt.want)
		}
	}
	if PerftestMessage(io.EOF) != "" || PerftestMessage(nil) != "" {
		t.Error("message for a foreign error")
	}
}

// exchangeRaw is a raw one-message exchange in the order of c's role.
func (c *Conn) exchangeRaw(out []byte) ([]byte, error) {
	in := make([]byte, len(out))
	if err := c.exchange(stepRaw, out, in); err != nil {
		return nil, err
	}
	return in, nil
}

// TestSysDataBounds: a page size that is not a power of two up to 1 MiB,
// or a cache line longer than the page, is refused as malformed (buffers
// are sized by them, and a cache line longer than the page made the
// address arithmetic divide by zero); zero means the peer has none.
func TestSysDataBounds(t *testing.T) {
	for _, c := range []struct {
		name         string
		page, line   uint32
		step         string
		ok           bool
		page2, line2 int32
	}{
		{"ok", 16384, 128, "", true, 16384, 128},
		{"zero", 0, 0, "", true, 4096, 64},
		{"page not a power of two", 5000, 64, stepPageSize, false, 0, 0},
		{"page too big", 0x7fffffff, 64, stepPageSize, false, 0, 0},
		{"line past the page", 4096, 8192, stepCacheLine, false, 0, 0},
		{"line not a power of two", 4096, 96, stepCacheLine, false, 0, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			cl, peer := pair(t, Client, Config{})
			go func() { _, _ = peer.Write(version("6.29")) }()
			if _, err := cl.ExchangeVersion(); err != nil {
				t.Fatal(err)
			}
			readN(t, peer, VersionSize)
			go func() {
				_, _ = peer.Write(binary.BigEndian.AppendUint32(nil, c.page))
				_, _ = peer.Write(binary.BigEndian.AppendUint32(nil, c.line))
			}()
			go func() { _, _ = io.Copy(io.Discard, peer) }()
			sys, err := cl.ExchangeSysData(SysData{PageSize: 4096, CacheLineSize: 64})
			var ee *ExchangeError
			switch {
			case c.ok && (err != nil || sys != SysData{PageSize: c.page2, CacheLineSize: c.line2}):
				t.Fatalf("got %+v, %v", sys, err)
			case !c.ok && (!errors.Is(err, ErrMalformed) || !errors.As(err, &ee) || ee.Step != c.step):
				t.Fatalf("got %+v, %v; want a malformed %s", sys, err, c.step)
			}
		})
	}
}

// TestNegotiateClientSizes: a server with the default Config answers the
// negotiation in the size its client sent, 312 bytes (perftest built
// without mlx5dv) or 320, also when the last bytes of 320 come late (some
// of them after the wait for them), and the next exchange starts where
// the struct ended; a server told the size reads that many.
func TestNegotiateClientSizes(t *testing.T) {
	defer func(d time.Duration) { paramsTail = d }(paramsTail)
	for _, c := range []struct {
		name  string
		cfg   Config
		size  int
		split int           // the client writes its struct in two parts, split here
		gap   time.Duration // between the parts
		tail  time.Duration // paramsTail
	}{
		{"312", Config{}, ParamsSizeNoMLX5DV, 0, 0, 250 * time.Millisecond},
		{"320", Config{}, ParamsSize, 0, 0, 250 * time.Millisecond},
		{"320-late-tail", Config{}, ParamsSize, ParamsSizeNoMLX5DV + 3, 20 * time.Millisecond, 250 * time.Millisecond},
		{"320-tail-after-wait", Config{}, ParamsSize, ParamsSizeNoMLX5DV + 3, 200 * time.Millisecond, 20 * time.Millisecond},
		{"320-late-head", Config{}, ParamsSize, 100, 20 * time.Millisecond, 250 * time.Millisecond},
		{"explicit-312", Config{ParamsSize: ParamsSizeNoMLX5DV}, ParamsSizeNoMLX5DV, 0, 0, 250 * time.Millisecond},
	} {
		t.Run(c.name, func(t *testing.T) {
			paramsTail = c.tail
			srv, peer := pair(t, Server, c.cfg)
			local := Params{Size: 65536, Iters: 1000}
			sent, err := local.Marshal(c.size)
			if err != nil {
				t.Fatal(err)
			}
			key := perftest.Dest{LID: 7, QPN: 0x123, PSN: 0x456, RKey: 0x789, VAddr: 0xabc}
			keyMsg, err := MarshalKey(&key, KeyPlain)
			if err != nil {
				t.Fatal(err)
			}
			answer, done := make(chan []byte, 1), make(chan error, 1)
			go func() {
				_ = peer.SetReadDeadline(time.Now().Add(5 * time.Second))
				_, _ = peer.Write(version("6.29"))
				if _, err := io.ReadFull(peer, make([]byte, 16)); err != nil {
					answer <- nil
					done <- err
					return
				}
				if c.split == 0 {
					_, _ = peer.Write(sent)
				} else {
					_, _ = peer.Write(sent[:c.split])
					time.Sleep(c.gap)
					_, _ = peer.Write(sent[c.split:])
				}
				b := make([]byte, ParamsSize)
				n, _ := io.ReadAtLeast(peer, b, c.size)
				answer <- b[:n]
				_, _ = peer.Write(keyMsg)
				_, err := io.ReadFull(peer, make([]byte, len(keyMsg)))
				done <- err
			}()
			if _, err := srv.ExchangeVersion(); err != nil {
				t.Fatal(err)
			}
			remote, err := srv.Negotiate(&local)
			if err != nil {
				t.Fatalf("negotiate: %v", err)
			}
			if remote == nil || remote.Size != 65536 || remote.Iters != 1000 {
				t.Errorf("the client's struct read as %+v", remote)
			}
			if got := <-answer; len(got) != c.size {
				t.Errorf("answered %d bytes to a %d-byte struct", len(got), c.size)
			}
			got, err := srv.Handshake(KeyPlain, perftest.Dest{})
			if err != nil || got != key {
				t.Errorf("the key after the negotiation: %+v, %v; want %+v", got, err, key)
			}
			if err := <-done; err != nil {
				t.Errorf("the client's end: %v", err)
			}
		})
	}
}

// msgPipe16 is a message connection over a net.Pipe whose messages are a
// 2-byte length and the bytes.
type msgPipe16 struct{ net.Conn }

func (m msgPipe16) Write(b []byte) (int, error) {
	if _, err := m.Conn.Write(append(binary.BigEndian.AppendUint16(nil, uint16(len(b))), b...)); err != nil {
		return 0, err
	}
	return len(b), nil
}

func (m msgPipe16) ReadMessage(b []byte) (int, error) {
	var h [2]byte
	if _, err := io.ReadFull(m.Conn, h[:]); err != nil {
		return 0, err
	}
	buf := make([]byte, binary.BigEndian.Uint16(h[:]))
	if _, err := io.ReadFull(m.Conn, buf); err != nil {
		return 0, err
	}
	if len(buf) > len(b) {
		return 0, errors.New("message too long")
	}
	return copy(b, buf), nil
}

func (m msgPipe16) Read(b []byte) (int, error) { return m.ReadMessage(b) }

// TestNegotiateClientSizesMessages: over a message connection (rdma_cm's
// exchange) a server answers in the size of its client's message; a
// message of neither size is malformed.
func TestNegotiateClientSizesMessages(t *testing.T) {
	for _, size := range []int{ParamsSizeNoMLX5DV, ParamsSize, 300} {
		a, b := net.Pipe()
		t.Cleanup(func() { a.Close(); b.Close() })
		srv, err := NewConn(msgPipe16{a}, Server, Config{Timeout: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		cli := msgPipe16{b}
		answer := make(chan int, 1)
		go func() {
			_, _ = cli.Write(version("6.29"))
			_, _ = cli.ReadMessage(make([]byte, 16))
			_, _ = cli.Write(make([]byte, size))
			n, _ := cli.ReadMessage(make([]byte, 1024))
			answer <- n
		}()
		if _, err := srv.ExchangeVersion(); err != nil {
			t.Fatal(err)
		}
		_, err = srv.Negotiate(&Params{})
		if size == 300 {
			if !errors.Is(err, ErrMalformed) {
				t.Errorf("a %d-byte message: %v, want ErrMalformed", size, err)
			}
		} else if n := <-answer; err != nil || n != size {
			t.Errorf("a %d-byte message: answered %d bytes, %v", size, n, err)
		}
		srv.Close()
		b.Close()
	}
}
