package reports

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pvperf/pvperf/perftest"
)

// The captures in testdata/perftest-6.06 and testdata/perftest-6.29 are the
// complete output of each side of real perftest runs (see
// testdata/README.md). Each test below rebuilds a side from the values the
// capture shows (typed in here: QP numbers, PSNs, keys, addresses, the
// result numbers) and checks that this package prints the same bytes.
//
// stdout was a pipe in those runs (fully buffered) and stderr was not, so
// what perftest wrote to stderr comes first in each capture, then all of
// stdout. The tests compose the expected side the same way.

// rxeGID is the GID of the captures' Soft-RoCE device, ::ffff:10.77.0.1.
var rxeGID = [16]byte{10: 255, 11: 255, 12: 10, 13: 77, 14: 0, 15: 1}

func dest(qpn, psn uint32) perftest.Dest { return perftest.Dest{QPN: qpn, PSN: psn, GID: rxeGID} }

func rdmaDest(qpn, psn, rkey uint32, vaddr uint64) perftest.Dest {
	return perftest.Dest{QPN: qpn, PSN: psn, RKey: rkey, VAddr: vaddr, GID: rxeGID}
}

func readDest(qpn, psn, rkey uint32, vaddr uint64) perftest.Dest {
	d := rdmaDest(qpn, psn, rkey, vaddr)
	d.OutReads = 0x80
	return d
}

// rxeInfo is the TestInfo of the captures' setup: rxe0, RoCE (GID index 1),
// MTU 1024, the old post-send path, relaxed ordering on, a NUMA node 0, and
// (6.29, fewer than 3000 iterations) dynamic CQE polling off with batch 16.
func rxeInfo(v Version, verb perftest.Verb, kind perftest.TestKind, server bool) TestInfo {
	ti := NewTestInfo(verb, kind)
	ti.Version = v
	ti.Server = server
	ti.Device = "rxe0"
	ti.Link = LinkEthernet
	ti.GIDIndex = 1
	ti.MTU = 1024
	ti.NUMANode = 0
	ti.OutReads = 128
	ti.TxDepth = 20
	ti.RxDepth = 20
	return ti
}

func bw(size, iters uint64, peak, avg, rate float64) BWResult {
	return BWResult{Size: size, Iters: iters, Peak: peak, Average: avg, MsgRate: rate}
}

func lat(size, iters uint64, tmin, tmax, typical, avg, stdev, p99, p999 float64) LatencyResult {
	return LatencyResult{Size: size, Iters: iters, Min: tmin, Max: tmax, Typical: typical,
		Avg: avg, Stdev: stdev, P99: p99, P999: p999, Unit: "usec"}
}

// side is one side of a captured run.
type side struct {
	ti TestInfo
	// stderr is what the side wrote to stderr that this package does not
	// print (the negotiation failure).
	stderr string
	// Messages before the banner and header.
	udClamped   int  // " Max msg size in UD is MTU <n>" (stderr)
	peakWarning bool // " WARNING: BW peak won't be measured in this run."
	pollingOff  bool // "Disabling dynamic polling"
	inline      bool // RESULT_LINE + "Device not recognized..." (stderr)
	// stopAfterBanner: the run failed before the header.
	stopAfterBanner bool
	local, remote   []perftest.Dest
	bwRows          []BWResult
	bwRemote        *BWResult // bidirectional: the peer's result summed into the row
	latRows         []LatencyResult
}

// render prints s as perftest's main does, stderr first.
func (s *side) render(t *testing.T) string {
	t.Helper()
	var out, errOut bytes.Buffer
	ti := &s.ti
	check := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	errOut.WriteString(s.stderr)
	if s.udClamped != 0 {
		check(WriteUDSizeClamped(&errOut, s.udClamped))
	}
	if s.peakWarning {
		check(WritePeakWarning(&out))
	}
	if s.pollingOff {
		check(WriteDynamicPollingDisabled(&out))
	}
	if s.inline {
		check(WriteInlineNotRecognized(&out, &errOut))
	}
	check(WriteWaitingBanner(&out, ti))
	if s.stopAfterBanner {
		return errOut.String() + out.String()
	}
	check(WriteHeader(&out, ti))
	check(WriteAddresses(&out, ti, s.local, s.remote))
	switch {
	case ti.Test == perftest.Bandwidth:
		check(WriteBWHeader(&out, ti))
		for _, r := range s.bwRows {
			check(WriteBWReport(&out, ti, r, s.bwRemote))
		}
	case len(s.latRows) > 0:
		check(WriteLatencyHeader(&out, ti))
		for i := range s.latRows {
			check(WriteLatencyReport(&out, ti, &s.latRows[i]))
		}
	}
	// The read/atomic latency server prints only the closing line.
	check(WriteResultLine(&out, ti))
	return errOut.String() + out.String()
}

type capture struct {
	file           string // under testdata, without .server.txt/.client.txt
	server, client side
}

func captures() []capture {
	const (
		v606 = Perftest606
		v629 = Perftest629
	)
	var cs []capture
	add := func(c capture) { cs = append(cs, c) }

	// ---- perftest 6.06 ----

	// ib_atomic_bw -d rxe0 -F -x 1 -n 20
	{
		s := side{ti: rxeInfo(v606, perftest.Atomic, perftest.Bandwidth, true), inline: true,
			local: []perftest.Dest{dest(0x23, 0xbacff7)}, remote: []perftest.Dest{dest(0x24, 0x171843)},
			bwRows: []BWResult{bw(8, 20, 0.13, 0.06, 0.007498)}}
		s.ti.CQMod = 20
		c := s
		c.ti.Server = false
		c.local, c.remote = s.remote, s.local
		add(capture{"perftest-6.06/atomic_bw", s, c})
	}
	// ib_atomic_lat -d rxe0 -F -x 1 -n 20
	{
		s := side{ti: rxeInfo(v606, perftest.Atomic, perftest.Latency, true), inline: true,
			local: []perftest.Dest{dest(0x2b, 0xc3738e)}, remote: []perftest.Dest{dest(0x2c, 0x10f1d6)}}
		c := s
		c.ti.Server = false
		c.ti.TxDepth = 1
		c.local, c.remote = s.remote, s.local
		c.latRows = []LatencyResult{lat(8, 20, 30.49, 95.60, 31.63, 33.69, 4.84, 95.60, 95.60)}
		add(capture{"perftest-6.06/atomic_lat", s, c})
	}
	// ib_read_bw -d rxe0 -F -x 1 -n 20
	{
		s := side{ti: rxeInfo(v606, perftest.Read, perftest.Bandwidth, true), inline: true,
			local:  []perftest.Dest{readDest(0x1e, 0xfa8999, 0x000cb6, 0x007fd2edbb7000)},
			remote: []perftest.Dest{readDest(0x1d, 0x4ecfd5, 0x000d2f, 0x007fc196e4a000)},
			bwRows: []BWResult{bw(65536, 20, 46.80, 43.46, 0.000695)}}
		c := s
		c.ti.Server = false
		c.local, c.remote = s.remote, s.local
		add(capture{"perftest-6.06/read_bw", s, c})
	}
	// ib_read_lat -d rxe0 -F -x 1 -n 20
	{
		s := side{ti: rxeInfo(v606, perftest.Read, perftest.Latency, true), inline: true,
			local:  []perftest.Dest{readDest(0x2a, 0x48a43d, 0x0018ff, 0x005621fe931000)},
			remote: []perftest.Dest{readDest(0x29, 0xa0654d, 0x001950, 0x005560bcf84000)}}
		c := s
		c.ti.Server = false
		c.ti.TxDepth = 1
		c.local, c.remote = s.remote, s.local
		c.latRows = []LatencyResult{lat(2, 20, 53.18, 268.53, 58.54, 69.12, 18.25, 268.53, 268.53)}
		add(capture{"perftest-6.06/read_lat", s, c})
	}
	// ib_send_bw -d rxe0 -F -x 1 -n 20 (6.06 prints no peak warning)
	{
		s := side{ti: rxeInfo(v606, perftest.Send, perftest.Bandwidth, true),
			local: []perftest.Dest{dest(0x1f, 0x549cc2)}, remote: []perftest.Dest{dest(0x20, 0xde7d36)},
			bwRows: []BWResult{bw(65536, 20, 0, 20.69, 0.000331)}}
		c := s
		c.ti.Server = false
		c.local, c.remote = s.remote, s.local
		c.bwRows = []BWResult{bw(65536, 20, 28.46, 18.17, 0.000291)}
		add(capture{"perftest-6.06/send_bw", s, c})
	}
	// ib_send_bw -d rxe0 -F -x 1 -n 20 -c UD
	{
		s := side{ti: rxeInfo(v606, perftest.Send, perftest.Bandwidth, true), udClamped: 1024,
			local: []perftest.Dest{dest(0x21, 0x727502)}, remote: []perftest.Dest{dest(0x22, 0xe58962)},
			bwRows: []BWResult{bw(1024, 20, 0, 7.99, 0.008179)}}
		s.ti.Connection = perftest.UD
		s.ti.CQMod = 20
		c := s
		c.ti.Server = false
		c.local, c.remote = s.remote, s.local
		c.bwRows = []BWResult{bw(1024, 20, 11.29, 5.08, 0.005204)}
		add(capture{"perftest-6.06/send_bw_ud", s, c})
	}
	// ib_send_lat -d rxe0 -F -x 1 -n 20
	{
		s := side{ti: rxeInfo(v606, perftest.Send, perftest.Latency, true),
			local: []perftest.Dest{dest(0x25, 0xd16a78)}, remote: []perftest.Dest{dest(0x26, 0xd110ac)},
			latRows: []LatencyResult{lat(2, 20, 18.73, 55.52, 20.71, 21.96, 3.16, 55.52, 55.52)}}
		c := s
		c.ti.Server = false
		c.ti.TxDepth = 1
		c.local, c.remote = s.remote, s.local
		c.latRows = []LatencyResult{lat(2, 20, 18.87, 101.12, 21.22, 22.54, 3.85, 101.12, 101.12)}
		add(capture{"perftest-6.06/send_lat", s, c})
	}
	// ib_write_bw -d rxe0 -F -x 1 -n 20, and -n 20 without -x (the
	// device's auto-selected GID index is also 1).
	for _, w := range []struct {
		file          string
		local, remote perftest.Dest
		row           BWResult
	}{
		{"perftest-6.06/write_bw",
			rdmaDest(0x12, 0xb121a6, 0x000205, 0x007f099e71e000),
			rdmaDest(0x11, 0x589622, 0x00038d, 0x007fc8e9dea000),
			bw(65536, 20, 36.88, 30.79, 0.000493)},
		{"perftest-6.06/write_bw_nogid",
			rdmaDest(0x14, 0xc40dd4, 0x0004c7, 0x007fa7560a2000),
			rdmaDest(0x13, 0x54b63c, 0x000506, 0x007f6dafacd000),
			bw(65536, 20, 30.87, 29.61, 0.000474)},
	} {
		s := side{ti: rxeInfo(v606, perftest.Write, perftest.Bandwidth, true),
			local: []perftest.Dest{w.local}, remote: []perftest.Dest{w.remote}, bwRows: []BWResult{w.row}}
		c := s
		c.ti.Server = false
		c.local, c.remote = s.remote, s.local
		add(capture{w.file, s, c})
	}
	// ib_write_bw -d rxe0 -F -x 1 -D 4: 1024 completions counted, no peak,
	// TX depth not capped by iterations.
	{
		s := side{ti: rxeInfo(v606, perftest.Write, perftest.Bandwidth, true),
			local:  []perftest.Dest{rdmaDest(0x2d, 0xa7ac61, 0x001c43, 0x007f6b116a1000)},
			remote: []perftest.Dest{rdmaDest(0x2e, 0x94aecc, 0x001d3f, 0x007f2e8fd06000)},
			bwRows: []BWResult{bw(65536, 1024, 0, 31.97, 0.000512)}}
		s.ti.Duration = true
		s.ti.TxDepth = 128
		c := s
		c.ti.Server = false
		c.local, c.remote = s.remote, s.local
		add(capture{"perftest-6.06/write_bw_D", s, c})
	}
	// ib_write_bw -d rxe0 -F -x 1 -n 20 -b: both sides print the summed
	// row (here the captured sum plus a zero remote).
	{
		s := side{ti: rxeInfo(v606, perftest.Write, perftest.Bandwidth, true),
			local:    []perftest.Dest{rdmaDest(0x17, 0x93ecd6, 0x0008fb, 0x007f55ac704000)},
			remote:   []perftest.Dest{rdmaDest(0x18, 0x623186, 0x000986, 0x007f51b29bd000)},
			bwRows:   []BWResult{bw(65536, 20, 64.08, 48.12, 0.000770)},
			bwRemote: &BWResult{}}
		s.ti.Duplex = true
		c := s
		c.ti.Server = false
		c.local, c.remote = s.remote, s.local
		add(capture{"perftest-6.06/write_bw_b", s, c})
	}
	// ib_write_bw -d rxe0 -F -x 1 -n 10 -a --report_gbits: the server
	// prints only the last size; rows below 0.1 Gb/s use 6 decimals.
	{
		s := side{ti: rxeInfo(v606, perftest.Write, perftest.Bandwidth, true),
			local:  []perftest.Dest{rdmaDest(0x15, 0x7c66bf, 0x0006cb, 0x007fefdcd61000)},
			remote: []perftest.Dest{rdmaDest(0x16, 0x5d767b, 0x000799, 0x007f07bb65e000)},
			bwRows: []BWResult{bw(8388608, 10, 0.30, 0.30, 0.000004)}}
		s.ti.Gbits = true
		s.ti.CQMod = 10
		s.ti.TxDepth = 10
		c := s
		c.ti.Server = false
		c.local, c.remote = s.remote, s.local
		c.bwRows = []BWResult{
			bw(2, 10, 0.000298, 0.000112, 0.006974),
			bw(4, 10, 0.001077, 0.000386, 0.012074),
			bw(8, 10, 0.001986, 0.001033, 0.016144),
			bw(16, 10, 0.004345, 0.001999, 0.015614),
			bw(32, 10, 0.007338, 0.003915, 0.015293),
			bw(64, 10, 0.014486, 0.006573, 0.012838),
			bw(128, 10, 0.020811, 0.010697, 0.010446),
			bw(256, 10, 0.045894, 0.024066, 0.011751),
			bw(512, 10, 0.077293, 0.044229, 0.010798),
			bw(1024, 10, 0.168366, 0.095275, 0.011630),
			bw(2048, 10, 0.35, 0.23, 0.013960),
			bw(4096, 10, 0.23, 0.18, 0.005499),
			bw(8192, 10, 0.32, 0.22, 0.003330),
			bw(16384, 10, 0.34, 0.27, 0.002045),
			bw(32768, 10, 0.28, 0.26, 0.001001),
			bw(65536, 10, 0.35, 0.29, 0.000551),
			bw(131072, 10, 0.29, 0.28, 0.000265),
			bw(262144, 10, 0.29, 0.29, 0.000137),
			bw(524288, 10, 0.40, 0.36, 0.000085),
			bw(1048576, 10, 0.28, 0.28, 0.000033),
			bw(2097152, 10, 0.32, 0.32, 0.000019),
			bw(4194304, 10, 0.41, 0.41, 0.000012),
			bw(8388608, 10, 0.30, 0.30, 0.000004),
		}
		add(capture{"perftest-6.06/write_bw_gbits_a", s, c})
	}
	// ib_write_bw -d rxe0 -F -x 1 -n 20 -q 2: all local lines, then all
	// remote ones; #iterations = iters * QPs.
	{
		s := side{ti: rxeInfo(v606, perftest.Write, perftest.Bandwidth, true),
			local: []perftest.Dest{
				rdmaDest(0x19, 0x8e58dc, 0x000a5e, 0x007ff502b96000),
				rdmaDest(0x1a, 0x08e796, 0x000a5e, 0x007ff502ba6000),
			},
			remote: []perftest.Dest{
				rdmaDest(0x1b, 0xac08e2, 0x000b1d, 0x007f77b6043000),
				rdmaDest(0x1c, 0x5a3e24, 0x000b1d, 0x007f77b6053000),
			},
			bwRows: []BWResult{bw(65536, 40, 32.89, 28.45, 0.000455)}}
		s.ti.NumQPs = 2
		c := s
		c.ti.Server = false
		c.local, c.remote = s.remote, s.local
		add(capture{"perftest-6.06/write_bw_q2", s, c})
	}
	// ib_write_lat -d rxe0 -F -x 1 -n 20: relaxed ordering OFF for
	// write_lat; both sides print a row.
	{
		s := side{ti: rxeInfo(v606, perftest.Write, perftest.Latency, true),
			local:   []perftest.Dest{rdmaDest(0x27, 0xaea7d8, 0x00163c, 0x005610fb2cd000)},
			remote:  []perftest.Dest{rdmaDest(0x28, 0x29be48, 0x001755, 0x0055a832bcb000)},
			latRows: []LatencyResult{lat(2, 20, 28.43, 266.53, 29.69, 42.82, 42.06, 266.53, 266.53)}}
		s.ti.RelaxedOrdering = Off
		c := s
		c.ti.Server = false
		c.ti.TxDepth = 1
		c.local, c.remote = s.remote, s.local
		c.latRows = []LatencyResult{lat(2, 20, 28.21, 196.56, 30.56, 37.85, 21.45, 196.56, 196.56)}
		add(capture{"perftest-6.06/write_lat", s, c})
	}

	// ---- perftest 6.29 ----

	// pt29_atomic_bw -d rxe0 -F -x 1 -n 20
	{
		s := side{ti: rxeInfo(v629, perftest.Atomic, perftest.Bandwidth, true), pollingOff: true, inline: true,
			local: []perftest.Dest{dest(0x1f, 0x86c1cb)}, remote: []perftest.Dest{dest(0x20, 0x2d5d60)},
			bwRows: []BWResult{bw(8, 20, 0.27, 0.10, 0.013602)}}
		s.ti.CQMod = 20
		c := s
		c.ti.Server = false
		c.local, c.remote = s.remote, s.local
		add(capture{"perftest-6.29/atomic_bw", s, c})
	}
	// Server -s 4096, client -s 8192: both fail the negotiation (stderr),
	// after the dynamic polling line (and the server's banner).
	{
		s := side{ti: rxeInfo(v629, perftest.Write, perftest.Bandwidth, true), pollingOff: true, stopAfterBanner: true,
			stderr: " size mismatch: local=4096, remote=8192\n Failed to negotiate parameters\n"}
		c := s
		c.ti.Server = false
		c.stderr = " size mismatch: local=8192, remote=4096\n Failed to negotiate parameters\n"
		add(capture{"perftest-6.29/mismatch_size", s, c})
	}
	// Mixed versions: each side prints its own version's format.
	{
		s := side{ti: rxeInfo(v606, perftest.Write, perftest.Bandwidth, true),
			local:  []perftest.Dest{rdmaDest(0x22, 0x154390, 0x001297, 0x007f701365e000)},
			remote: []perftest.Dest{rdmaDest(0x21, 0xa51311, 0x001347, 0x007fa05f589000)},
			bwRows: []BWResult{bw(65536, 20, 59.97, 52.38, 0.000838)}}
		c := s
		c.ti = rxeInfo(v629, perftest.Write, perftest.Bandwidth, false)
		c.pollingOff = true
		c.local, c.remote = s.remote, s.local
		add(capture{"perftest-6.29/mixed_srv606_cli629_write_bw", s, c})
	}
	{
		s := side{ti: rxeInfo(v629, perftest.Write, perftest.Bandwidth, true), pollingOff: true,
			local:  []perftest.Dest{rdmaDest(0x23, 0xc61eb7, 0x00149a, 0x007f84d8fb3000)},
			remote: []perftest.Dest{rdmaDest(0x24, 0x01fba6, 0x0015ac, 0x007fc7315ac000)},
			bwRows: []BWResult{bw(65536, 20, 60.67, 57.95, 0.000927)}}
		c := s
		c.ti = rxeInfo(v606, perftest.Write, perftest.Bandwidth, false)
		c.pollingOff = false
		c.local, c.remote = s.remote, s.local
		add(capture{"perftest-6.29/mixed_srv629_cli606_write_bw", s, c})
	}
	// pt29_read_bw -d rxe0 -F -x 1 -n 20
	{
		s := side{ti: rxeInfo(v629, perftest.Read, perftest.Bandwidth, true), pollingOff: true, inline: true,
			local:  []perftest.Dest{readDest(0x16, 0x56b51b, 0x00075f, 0x007fca009ea000)},
			remote: []perftest.Dest{readDest(0x15, 0x1b5a82, 0x000688, 0x007ff483ec0000)},
			bwRows: []BWResult{bw(65536, 20, 41.28, 40.38, 0.000646)}}
		c := s
		c.ti.Server = false
		c.local, c.remote = s.remote, s.local
		add(capture{"perftest-6.29/read_bw", s, c})
	}
	// pt29_read_lat -d rxe0 -F -x 1 -n 20
	{
		s := side{ti: rxeInfo(v629, perftest.Read, perftest.Latency, true), pollingOff: true, inline: true,
			local:  []perftest.Dest{readDest(0x1d, 0x8cd3ea, 0x000e7e, 0x005592a5156000)},
			remote: []perftest.Dest{readDest(0x1e, 0xab2d3a, 0x000fad, 0x0055b4db1cd000)}}
		c := s
		c.ti.Server = false
		c.ti.TxDepth = 1
		c.local, c.remote = s.remote, s.local
		c.latRows = []LatencyResult{lat(2, 20, 56.60, 159.87, 65.54, 66.54, 6.50, 159.87, 159.87)}
		add(capture{"perftest-6.29/read_lat", s, c})
	}
	// pt29_send_bw -d rxe0 -F -x 1 -n 20: the receiving server warns
	// that the peak is not measured.
	{
		s := side{ti: rxeInfo(v629, perftest.Send, perftest.Bandwidth, true), peakWarning: true, pollingOff: true,
			local: []perftest.Dest{dest(0x17, 0x2e8be6)}, remote: []perftest.Dest{dest(0x18, 0x62183e)},
			bwRows: []BWResult{bw(65536, 20, 0, 28.43, 0.000455)}}
		c := s
		c.ti.Server = false
		c.peakWarning = false
		c.local, c.remote = s.remote, s.local
		c.bwRows = []BWResult{bw(65536, 20, 32.17, 31.10, 0.000498)}
		add(capture{"perftest-6.29/send_bw", s, c})
	}
	// pt29_send_lat -d rxe0 -F -x 1 -n 20
	{
		s := side{ti: rxeInfo(v629, perftest.Send, perftest.Latency, true), pollingOff: true,
			local: []perftest.Dest{dest(0x19, 0xf40d6f)}, remote: []perftest.Dest{dest(0x1a, 0xf3989b)},
			latRows: []LatencyResult{lat(2, 20, 20.51, 50.28, 23.48, 24.13, 3.14, 50.28, 50.28)}}
		c := s
		c.ti.Server = false
		c.ti.TxDepth = 1
		c.local, c.remote = s.remote, s.local
		c.latRows = []LatencyResult{lat(2, 20, 20.23, 113.48, 23.84, 24.73, 3.51, 113.48, 113.48)}
		add(capture{"perftest-6.29/send_lat", s, c})
	}
	// pt29_write_bw -d rxe0 -F -x 1 -n 20
	{
		s := side{ti: rxeInfo(v629, perftest.Write, perftest.Bandwidth, true), pollingOff: true,
			local:  []perftest.Dest{rdmaDest(0x12, 0x40b376, 0x0002a1, 0x007f9bbf3c1000)},
			remote: []perftest.Dest{rdmaDest(0x11, 0x86e396, 0x0003b4, 0x007f69fd0f2000)},
			bwRows: []BWResult{bw(65536, 20, 33.45, 28.66, 0.000459)}}
		c := s
		c.ti.Server = false
		c.local, c.remote = s.remote, s.local
		add(capture{"perftest-6.29/write_bw", s, c})
	}
	// pt29_write_bw -d rxe0 -F -x 1 -n 10 -a
	{
		s := side{ti: rxeInfo(v629, perftest.Write, perftest.Bandwidth, true), pollingOff: true,
			local:  []perftest.Dest{rdmaDest(0x13, 0x32ba4f, 0x000443, 0x007f3799fb2000)},
			remote: []perftest.Dest{rdmaDest(0x14, 0x8d75cb, 0x000524, 0x007f197c7ef000)},
			bwRows: []BWResult{bw(8388608, 10, 45.54, 45.54, 0.000006)}}
		s.ti.CQMod = 10
		s.ti.TxDepth = 10
		c := s
		c.ti.Server = false
		c.local, c.remote = s.remote, s.local
		c.bwRows = []BWResult{
			bw(2, 10, 0.03, 0.01, 0.006353),
			bw(4, 10, 0.18, 0.08, 0.019780),
			bw(8, 10, 0.40, 0.17, 0.022816),
			bw(16, 10, 0.78, 0.32, 0.020787),
			bw(32, 10, 1.54, 0.68, 0.022124),
			bw(64, 10, 3.14, 1.33, 0.021767),
			bw(128, 10, 2.62, 1.16, 0.009541),
			bw(256, 10, 11.65, 5.44, 0.022294),
			bw(512, 10, 10.80, 5.83, 0.011950),
			bw(1024, 10, 17.54, 10.84, 0.011102),
			bw(2048, 10, 29.47, 19.08, 0.009769),
			bw(4096, 10, 52.44, 38.68, 0.009903),
			bw(8192, 10, 58.06, 43.80, 0.005606),
			bw(16384, 10, 30.08, 27.42, 0.001755),
			bw(32768, 10, 34.02, 31.52, 0.001009),
			bw(65536, 10, 64.01, 59.78, 0.000956),
			bw(131072, 10, 63.23, 60.38, 0.000483),
			bw(262144, 10, 47.24, 46.58, 0.000186),
			bw(524288, 10, 37.53, 37.20, 0.000074),
			bw(1048576, 10, 36.20, 36.03, 0.000036),
			bw(2097152, 10, 37.98, 37.98, 0.000019),
			bw(4194304, 10, 37.81, 37.81, 0.000009),
			bw(8388608, 10, 45.54, 45.54, 0.000006),
		}
		add(capture{"perftest-6.29/write_bw_a", s, c})
	}
	// pt29_write_lat -d rxe0 -F -x 1 -n 20
	{
		s := side{ti: rxeInfo(v629, perftest.Write, perftest.Latency, true), pollingOff: true,
			local:   []perftest.Dest{rdmaDest(0x1c, 0xc6dc96, 0x000c4b, 0x0056396e2be000)},
			remote:  []perftest.Dest{rdmaDest(0x1b, 0x5283cb, 0x000d28, 0x00558912e9e000)},
			latRows: []LatencyResult{lat(2, 20, 17.70, 159.05, 19.03, 20.01, 2.00, 159.05, 159.05)}}
		s.ti.RelaxedOrdering = Off
		c := s
		c.ti.Server = false
		c.ti.TxDepth = 1
		c.local, c.remote = s.remote, s.local
		c.latRows = []LatencyResult{lat(2, 20, 17.61, 34.35, 18.94, 19.74, 2.01, 34.35, 34.35)}
		add(capture{"perftest-6.29/write_lat", s, c})
	}
	return cs
}

func TestCaptures(t *testing.T) {
	seen := map[string]bool{}
	for _, c := range captures() {
		for _, role := range []struct {
			name string
			s    *side
		}{{"server", &c.server}, {"client", &c.client}} {
			file := filepath.Join("testdata", c.file+"."+role.name+".txt")
			seen[file] = true
			t.Run(c.file+"/"+role.name, func(t *testing.T) {
				want, err := os.ReadFile(file)
				if err != nil {
					t.Fatal(err)
				}
				got := role.s.render(t)
				if got != string(want) {
					t.Errorf("%s differs:\n%s", file, lineDiff(string(want), got))
				}
			})
		}
	}
	// Every capture file has a test.
	files, err := filepath.Glob(filepath.Join("testdata", "perftest-*", "*.txt"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if !seen[f] {
			t.Errorf("%s has no test", f)
		}
	}
}

// lineDiff shows the first differing lines of want and got, with tabs and
// line ends visible.
func lineDiff(want, got string) string {
	wl := strings.SplitAfter(want, "\n")
	gl := strings.SplitAfter(got, "\n")
	vis := func(s string) string {
		return strings.NewReplacer("\t", "\\t", "\n", "$").Replace(s)
	}
	var b strings.Builder
	shown := 0
	for i := 0; i < max(len(wl), len(gl)) && shown < 5; i++ {
		var w, g string
		if i < len(wl) {
			w = wl[i]
		}
		if i < len(gl) {
			g = gl[i]
		}
		if w != g {
			b.WriteString("line " + itoa(i+1) + ":\n  want " + vis(w) + "\n  got  " + vis(g) + "\n")
			shown++
		}
	}
	return b.String()
}

func itoa(i int) string { return cSprintf("%d", i) }
