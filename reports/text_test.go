package reports

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/pvperf/pvperf/perftest"
)

// The expected strings here are perftest's format strings applied by hand
// to the arguments (see format.go for the formats); the captured runs
// (capture_test.go) cover the default lines, these tests the conditional
// ones the captures do not show.

const rl = ResultLine

func TestResultLines(t *testing.T) {
	if len(ResultLine) != 88 || strings.Count(ResultLine, "-") != 87 || !strings.HasSuffix(ResultLine, "\n") {
		t.Errorf("ResultLine = %q", ResultLine)
	}
	if len(ResultLinePerPort) != 164 || strings.Count(ResultLinePerPort, "-") != 163 {
		t.Errorf("ResultLinePerPort has %d dashes", strings.Count(ResultLinePerPort, "-"))
	}
}

func TestHeaderAllConditionalLines(t *testing.T) {
	ti := NewTestInfo(perftest.Send, perftest.Bandwidth)
	ti.Server = true
	ti.Duplex = true
	ti.PostList = 4
	ti.RecvPostList = 2
	ti.Multicast = true
	ti.Events = true
	ti.CompVector = 3
	ti.DualPort = true
	ti.Device = "mlx5_0"
	ti.NumQPs = 2
	ti.Transport = TransportIWARP
	ti.Connection = perftest.UD
	ti.SRQ = true
	ti.LockFree = On
	ti.RelaxedOrderingWarning = true
	ti.WRAPI = true
	ti.EnhancedReorder = true
	ti.TxDepth = 128
	ti.RxDepth = 512
	ti.DCSStreams = 2
	ti.DCSActiveStreams = 1
	ti.CQMod = 4
	ti.DynamicCQEPoll = true
	ti.MTU = 4096
	ti.Link = LinkIB
	ti.GIDIndex = 3
	ti.GIDIndex2 = 4
	ti.InlineSize = 236
	ti.RdmaCMQPs = true
	ti.RdmaCMExchange = true
	ti.TOS = 96
	ti.ROCmMemory = Off
	ti.MUSAMemory = Off
	ti.NUMANode = 1
	want := rl +
		"                    Send Bidirectional Post List BW Multicast Test\n" +
		" Test with events. Using mlx5_0_comp3\n" +
		" MultiCast runs on UD!\n" +
		" Dual-port       : ON\t\tDevice         : mlx5_0\n" +
		" Number of qps   : 2\t\tTransport type : IW\n" +
		" Connection type : UD\t\tUsing SRQ      : ON\n" +
		" PCIe relax order: ON\t\tLock-free      : ON\n" +
		" WARNING: CPU is not PCIe relaxed ordering compliant.\n" +
		" WARNING: You should disable PCIe RO with `--disable_pcie_relaxed` for both server and client.\n" +
		" ibv_wr* API     : ON\t\tUsing Enhanced Reorder      : ON\n" +
		" TX depth        : 128\n" +
		" Post List       : 4\n" +
		" Recv Post List  : 2\n" +
		" RX depth        : 512\n" +
		" DCS num streams : 2\n" +
		" DCS active num streams : 1\n" +
		" CQ Moderation   : 4\n" +
		" CQE Poll Batch  : Dynamic\n" +
		" Mtu             : 4096[B]\n" +
		" Link type       : IB\n" +
		" GID index       : 3\n" +
		" GID index2      : 4\n" +
		" Max inline data : 236[B]\n" +
		" rdma_cm QPs\t : ON\n" +
		" Use ROCm memory : OFF\n" +
		" Use MUSA memory : OFF\n" +
		" Data ex. method : rdma_cm \tTOS    : 96\n" +
		rl +
		" Waiting for client rdma_cm QP to connect\n" +
		" Please run the same command with the IB/RoCE interface IP\n" +
		" NUMA node       : 1\n" +
		rl
	if got := Header(&ti); got != want {
		t.Errorf("header differs:\n%s", lineDiff(want, got))
	}
	if got, want := ti.JSONTestName(), "Send_Bidirectional_Post_List_BW_Multicast_Test"; got != want {
		t.Errorf("JSONTestName = %q, want %q", got, want)
	}

	// The same on the client: no rdma_cm waiting lines, TX depth only
	// because of -b; without -b no RX depth.
	ti.Server = false
	ti.Duplex = false
	got := Header(&ti)
	for _, line := range []string{" Waiting for client rdma_cm", " RX depth"} {
		if strings.Contains(got, line) {
			t.Errorf("client header has %q", line)
		}
	}
	if !strings.Contains(got, " Data ex. method : rdma_cm \tTOS    : 96\n NUMA node") ||
		!strings.Contains(got, " TX depth        : 128\n") ||
		!strings.Contains(got, "Send Post List BW Multicast Test\n") {
		t.Errorf("client header:\n%s", got)
	}
}

func TestHeaderBuildVariants(t *testing.T) {
	for _, c := range []struct {
		name    string
		version Version
		ro, lf  string
		want    string
	}{
		{"6.29 no RO, no TD API", Perftest629, Unsupported, Unsupported, " PCIe relax order: Unsupported\t\tLock-free\t: Unsupported\n"},
		{"6.29 no RO, TD API", Perftest629, Unsupported, Off, " PCIe relax order: Unsupported\t\tLock-free      : OFF\n"},
		{"6.29 RO, no TD API", Perftest629, On, Unsupported, " PCIe relax order: ON\t\tLock-free      : Unsupported\n"},
		{"6.29 defaults", Perftest629, "", "", " PCIe relax order: ON\t\tLock-free      : OFF\n"},
		{"6.06 no RO", Perftest606, Unsupported, Unsupported, " PCIe relax order: Unsupported\n ibv_wr* API     : OFF\n"},
	} {
		ti := NewTestInfo(perftest.Write, perftest.Bandwidth)
		ti.Version = c.version
		ti.RelaxedOrdering = c.ro
		ti.LockFree = c.lf
		if got := Header(&ti); !strings.Contains(got, c.want) {
			t.Errorf("%s: header lacks %q:\n%s", c.name, c.want, got)
		}
	}
}

func TestHeaderLinesByTest(t *testing.T) {
	has := func(ti TestInfo, line string) bool { return strings.Contains(Header(&ti), line) }

	// RX depth: recv verbs on the server (6.29: SEND, SEND_IMM, WRITE_IMM;
	// 6.06: SEND only).
	for _, c := range []struct {
		verb    perftest.Verb
		version Version
		want    bool
	}{
		{perftest.Send, Perftest629, true}, {perftest.SendImm, Perftest629, true}, {perftest.WriteImm, Perftest629, true},
		{perftest.Write, Perftest629, false}, {perftest.Read, Perftest629, false},
		{perftest.Send, Perftest606, true}, {perftest.SendImm, Perftest606, false}, {perftest.WriteImm, Perftest606, false},
	} {
		ti := NewTestInfo(c.verb, perftest.Latency)
		ti.Version = c.version
		ti.Server = true
		ti.RxDepth = 512
		if got := has(ti, " RX depth        : 512\n"); got != c.want {
			t.Errorf("%v %v server: RX depth line %v, want %v", c.verb, c.version, got, c.want)
		}
	}

	// The CQE poll batch as a number (%hu), and no CQ lines in latency tests.
	ti := NewTestInfo(perftest.Write, perftest.Bandwidth)
	ti.CQEPollBatch = 64
	if !has(ti, " CQ Moderation   : 1\n CQE Poll Batch  : 64\n Mtu") {
		t.Error("BW test: no CQ moderation / poll batch lines")
	}
	ti.Test = perftest.Latency
	if has(ti, "CQ Moderation") || has(ti, "CQE Poll Batch") {
		t.Error("latency test has CQ lines")
	}
	// Outstanding reads instead of inline for READ and ATOMIC.
	ti = NewTestInfo(perftest.Atomic, perftest.Latency)
	ti.AtomicType = perftest.CmpAndSwap
	ti.OutReads = 16
	if !has(ti, "                    Atomic CMP_AND_SWAP Latency Test\n") || !has(ti, " Outstand reads  : 16\n") || has(ti, "Max inline") {
		t.Errorf("atomic header:\n%s", Header(&ti))
	}
	if got := ti.JSONTestName(); got != "Atomic_CMP_AND_SWAP_Latency_Test" {
		t.Errorf("JSONTestName = %q", got)
	}
	// No GID line without a GID index; TOS only with rdma_cm QPs; the
	// GID index2 line only in dual-port mode; NUMA only when known.
	ti = NewTestInfo(perftest.Send, perftest.Bandwidth)
	ti.GIDIndex2 = 2
	ti.TOS = 5
	if has(ti, "GID index") || has(ti, "TOS") || has(ti, "NUMA") || has(ti, "ROCm") || has(ti, "MUSA") {
		t.Errorf("header:\n%s", Header(&ti))
	}
	// Raw Ethernet forwarding.
	ti.MACForwarding = true
	ti.BufferSize = 4096
	if !has(ti, "                    Send BW forwarding Test\n") || !has(ti, " Link type       : IB\n Buffer size     : 4096[B]\n") {
		t.Errorf("forwarding header:\n%s", Header(&ti))
	}
	// 6.06 has neither the MUSA nor the NUMA line.
	ti = NewTestInfo(perftest.Send, perftest.Bandwidth)
	ti.Version = Perftest606
	ti.MUSAMemory = On
	ti.NUMANode = 0
	if has(ti, "MUSA") || has(ti, "NUMA") || has(ti, "CQE Poll") {
		t.Errorf("6.06 header:\n%s", Header(&ti))
	}
}

func TestOutputSuppressesEverythingButValues(t *testing.T) {
	ti := NewTestInfo(perftest.Write, perftest.Bandwidth)
	ti.Server = true
	ti.Output = perftest.OutputBandwidth
	var b bytes.Buffer
	must(t, WriteWaitingBanner(&b, &ti))
	must(t, WriteHeader(&b, &ti))
	must(t, WriteAddresses(&b, &ti, []perftest.Dest{{QPN: 1}}, []perftest.Dest{{QPN: 2}}))
	must(t, WriteBWHeader(&b, &ti))
	must(t, WriteBWReport(&b, &ti, BWResult{Size: 65536, Iters: 5000, Peak: 1, Average: 11031.1234567, MsgRate: 0.176498}, nil))
	must(t, WriteResultLine(&b, &ti))
	if got, want := b.String(), "11031.123457\n"; got != want {
		t.Errorf("--output=bandwidth: %q, want %q", got, want)
	}
	ti.Output = perftest.OutputMessageRate
	if got, want := BWReport(&ti, BWResult{MsgRate: 0.1764981}, nil), "0.176498\n"; got != want {
		t.Errorf("--output=message_rate: %q, want %q", got, want)
	}
	// Bidirectional: the sum.
	if got, want := BWReport(&ti, BWResult{MsgRate: 1.5}, &BWResult{MsgRate: 2}), "3.500000\n"; got != want {
		t.Errorf("--output=message_rate -b: %q, want %q", got, want)
	}

	lt := NewTestInfo(perftest.Send, perftest.Latency)
	lt.Output = perftest.OutputLatency
	r := LatencyResult{Size: 2, Iters: 1000, Avg: 1.234, Unit: "usec"}
	if got := LatencyHeader(&lt) + LatencyReport(&lt, &r); got != "1.234000\n" {
		t.Errorf("--output=latency: %q", got)
	}
	lt.Duration = true
	if got := LatencyDurationReport(&lt, LatencyDurationResult{Avg: 2.5, TPS: 7}); got != "2.500000\n" {
		t.Errorf("--output=latency -D: %q", got)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestWaitingBanner(t *testing.T) {
	ti := NewTestInfo(perftest.Write, perftest.Bandwidth)
	var b bytes.Buffer
	must(t, WriteWaitingBanner(&b, &ti))
	if b.Len() != 0 {
		t.Errorf("client banner: %q", b.String())
	}
	ti.Server = true
	must(t, WriteWaitingBanner(&b, &ti))
	want := "\n************************************\n* Waiting for client to connect... *\n************************************\n"
	if b.String() != want {
		t.Errorf("banner %q, want %q", b.String(), want)
	}
}

func TestAddressLines(t *testing.T) {
	gid := [16]byte{0xfe, 0x80, 15: 1}
	d := perftest.Dest{LID: 1, OutReads: 16, QPN: 0, PSN: 0x63ad7d, RKey: 0x17eedf, VAddr: 0x7f760c947000, GID: gid, SRQN: 0xa1}
	for _, c := range []struct {
		name string
		edit func(*TestInfo)
		side Side
		want string
	}{
		{"send IB", func(*TestInfo) {}, Local,
			" local address: LID 0x01 QPN 000000 PSN 0x63ad7d\n"},
		{"write RoCE", func(ti *TestInfo) { ti.Verb = perftest.Write; ti.GIDIndex = 0 }, Remote,
			" remote address: LID 0x01 QPN 000000 PSN 0x63ad7d RKey 0x17eedf VAddr 0x007f760c947000\n" +
				" GID: 254:128:00:00:00:00:00:00:00:00:00:00:00:00:00:01\n"},
		{"read", func(ti *TestInfo) { ti.Verb = perftest.Read }, Local,
			" local address: LID 0x01 QPN 000000 PSN 0x63ad7d OUT 0x10 RKey 0x17eedf VAddr 0x007f760c947000\n"},
		{"write_imm and atomic print no keys", func(ti *TestInfo) { ti.Verb = perftest.WriteImm }, Local,
			" local address: LID 0x01 QPN 000000 PSN 0x63ad7d\n"},
		{"rdma_cm drops the verb fields", func(ti *TestInfo) { ti.Verb = perftest.Read; ti.RdmaCMExchange = true; ti.Connection = perftest.DC }, Local,
			" local address: LID 0x01 QPN 000000 PSN 0x63ad7d\n"},
		{"XRC", func(ti *TestInfo) { ti.Connection = perftest.XRC }, Local,
			" local address: LID 0x01 QPN 000000 PSN 0x63ad7d SRQn 0x0000a1\n"},
		{"DC write", func(ti *TestInfo) { ti.Verb = perftest.Write; ti.Connection = perftest.DC }, Local,
			" local address: LID 0x01 QPN 000000 PSN 0x63ad7d RKey 0x17eedf VAddr 0x007f760c947000 SRQn 0x0000a1\n"},
		{"dlid on the remote side", func(ti *TestInfo) { ti.DLID = 0x1234 }, Remote,
			" remote address: LID 0x1234 QPN 000000 PSN 0x63ad7d\n"},
		{"dlid not on the local side", func(ti *TestInfo) { ti.DLID = 0x1234 }, Local,
			" local address: LID 0x01 QPN 000000 PSN 0x63ad7d\n"},
		{"multicast server local", func(ti *TestInfo) { ti.Multicast = true; ti.Server = true }, Local,
			" local address: LID 0x01 QPN 000000 PSN 0x63ad7d\n" +
				" MGID: 254:128:00:00:00:00:00:00:00:00:00:00:00:00:00:01\n"},
		{"multicast client local", func(ti *TestInfo) { ti.Multicast = true }, Local,
			" local address: LID 0x01 QPN 000000 PSN 0x63ad7d\n"},
		{"multicast client local with GID", func(ti *TestInfo) { ti.Multicast = true; ti.GIDIndex = 1 }, Local,
			" local address: LID 0x01 QPN 000000 PSN 0x63ad7d\n" +
				" GID: 254:128:00:00:00:00:00:00:00:00:00:00:00:00:00:01\n"},
		{"multicast client remote", func(ti *TestInfo) { ti.Multicast = true }, Remote,
			" remote address: LID 0x01 QPN 000000 PSN 0x63ad7d\n" +
				" MGID: 254:128:00:00:00:00:00:00:00:00:00:00:00:00:00:01\n"},
		{"raw ethernet has no GID line", func(ti *TestInfo) { ti.Connection = perftest.RawEth; ti.GIDIndex = 0 }, Local,
			" local address: LID 0x01 QPN 000000 PSN 0x63ad7d\n"},
		{"--output", func(ti *TestInfo) { ti.Output = perftest.OutputBandwidth }, Local, ""},
	} {
		ti := NewTestInfo(perftest.Send, perftest.Bandwidth)
		c.edit(&ti)
		if got := AddressLine(&ti, c.side, d); got != c.want {
			t.Errorf("%s:\n got %q\nwant %q", c.name, got, c.want)
		}
	}
}

func TestBWHeaders(t *testing.T) {
	for _, c := range []struct {
		name string
		edit func(*TestInfo)
		want string
	}{
		{"MiB", func(*TestInfo) {}, rl + " #bytes     #iterations    BW peak[MiB/sec]    BW average[MiB/sec]   MsgRate[Mpps]\n"},
		{"Gb", func(ti *TestInfo) { ti.Gbits = true }, rl + " #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]\n"},
		{"6.06", func(ti *TestInfo) { ti.Version = Perftest606 }, rl + " #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]\n"},
		{"CPU util", func(ti *TestInfo) { ti.CPUUtil = true }, rl + " #bytes     #iterations    BW peak[MiB/sec]    BW average[MiB/sec]   MsgRate[Mpps]    CPU_Util[%]\n"},
		{"per port", func(ti *TestInfo) { ti.ReportPerPort = true }, ResultLinePerPort +
			" #bytes     #iterations    BW peak[MiB/sec]    BW average[MiB/sec]   MsgRate[Mpps]   BW Port1[MiB/sec]   MsgRate Port1[Mpps]   BW Port2[MiB/sec]   MsgRate Port2[Mpps]\n"},
		{"per port Gb", func(ti *TestInfo) { ti.ReportPerPort = true; ti.Gbits = true }, ResultLinePerPort +
			" #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]   BW Port1[Gb/sec]   MsgRate Port1[Mpps]   BW Port2[Gb/sec]   MsgRate Port2[Mpps]\n"},
		{"per port 6.06", func(ti *TestInfo) { ti.ReportPerPort = true; ti.Version = Perftest606 }, ResultLinePerPort +
			" #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]   BW Port1[MB/sec]   MsgRate Port1[Mpps]   BW Port2[MB/sec]   MsgRate Port2[Mpps]\n"},
	} {
		ti := NewTestInfo(perftest.Write, perftest.Bandwidth)
		c.edit(&ti)
		if got := BWHeader(&ti); got != c.want {
			t.Errorf("%s:\n got %q\nwant %q", c.name, got, c.want)
		}
	}
}

func TestBWRows(t *testing.T) {
	r := BWResult{Size: 65536, Iters: 5000, Peak: 11034.234, Average: 11031.12, MsgRate: 0.176498,
		AvgPort1: 5515.56, MsgRatePort1: 0.088249, AvgPort2: 5515.56, MsgRatePort2: 0.088249, CPUUtil: 12.5}
	for _, c := range []struct {
		name string
		edit func(*TestInfo)
		want string
	}{
		// " %-7lu    %-10lu       %-7.2lf            %-7.2lf\t\t     %-7.6lf"
		{"6.29", func(*TestInfo) {}, " 65536      5000             11034.23            11031.12\t\t     0.176498\n"},
		// 6.06: three spaces after the tabs.
		{"6.06", func(ti *TestInfo) { ti.Version = Perftest606 }, " 65536      5000             11034.23            11031.12\t\t   0.176498\n"},
		// REPORT_EXT_CPU_UTIL "\t    %-3.2f\n"
		{"CPU util", func(ti *TestInfo) { ti.CPUUtil = true }, " 65536      5000             11034.23            11031.12\t\t     0.176498\t    12.50\n"},
		// " %-7lu    %-10lu     %-7.2lf            %-7.2lf\t\t   %-7.6lf        %-7.2lf            %-7.6lf              %-7.2lf            %-7.6lf"
		{"per port", func(ti *TestInfo) { ti.ReportPerPort = true },
			" 65536      5000           11034.23            11031.12\t\t   0.176498        5515.56            0.088249              5515.56            0.088249\n"},
	} {
		ti := NewTestInfo(perftest.Write, perftest.Bandwidth)
		c.edit(&ti)
		if got := BWReport(&ti, r, nil); got != c.want {
			t.Errorf("%s:\n got %q\nwant %q", c.name, got, c.want)
		}
	}
}

func TestBWRowExtendedAccuracy(t *testing.T) {
	ti := NewTestInfo(perftest.Write, perftest.Bandwidth)
	ti.Gbits = true
	// " %-7lu    %lu           %-7.6lf            %-7.6lf            %-7.6lf"
	small := BWResult{Size: 2, Iters: 10, Peak: 0.1, Average: 0.05, MsgRate: 1}
	large := BWResult{Size: 2, Iters: 10, Peak: 0.4, Average: 0.3, MsgRate: 2}
	if got, want := BWReport(&ti, small, nil), " 2          10           0.100000            0.050000            1.000000\n"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	// Bidirectional: perftest picks the format from the local average
	// (0.05 < 0.1) although the summed one is 0.35.
	if got, want := BWReport(&ti, small, &large), " 2          10           0.500000            0.350000            3.000000\n"; got != want {
		t.Errorf("summed, small local: got %q, want %q", got, want)
	}
	if got, want := BWReport(&ti, large, &small), " 2          10               0.50               0.35   \t\t     3.000000\n"; got != want {
		t.Errorf("summed, large local: got %q, want %q", got, want)
	}
	// MiB/s never uses the 6-decimal row.
	ti.Gbits = false
	if got := BWReport(&ti, small, nil); strings.Contains(got, "0.050000") {
		t.Errorf("MiB/s row %q", got)
	}
}

func TestBWReportBoth(t *testing.T) {
	local := BWResult{Size: 65536, Iters: 20, Peak: 32.1, Average: 30.5, MsgRate: 0.000488}
	remote := BWResult{Size: 65536, Iters: 20, Peak: 33.2, Average: 31.25, MsgRate: 0.0005}
	hdr := " #bytes     #iterations    BW peak[MiB/sec]    BW average[MiB/sec]   MsgRate[Mpps]\n"
	lrow := " 65536      20               32.10              30.50  \t\t     0.000488\n"
	rrow := " 65536      20               33.20              31.25  \t\t     0.000500\n"
	for _, verb := range []perftest.Verb{perftest.Write, perftest.Atomic} {
		ti := NewTestInfo(verb, perftest.Bandwidth)
		ti.Duplex = true
		sp := " " // "\n Local results: \n", but atomic_bw has no trailing space
		if verb == perftest.Atomic {
			sp = ""
		}
		want := rl + "\n Local results:" + sp + "\n" + rl + hdr + lrow + rl + "\n Remote results:" + sp + "\n" + rl + hdr + rrow
		var b bytes.Buffer
		must(t, WriteBWReportBoth(&b, &ti, local, remote))
		if b.String() != want {
			t.Errorf("%v:\n%s", verb, lineDiff(want, b.String()))
		}
	}
	// With --report-per-port the rows have the port columns but the
	// block's column header does not (perftest prints RESULT_FMT there).
	ti := NewTestInfo(perftest.Write, perftest.Bandwidth)
	ti.Duplex = true
	ti.ReportPerPort = true
	var b bytes.Buffer
	must(t, WriteBWReportBoth(&b, &ti, local, remote))
	if got := b.String(); strings.Count(got, hdr) != 2 || strings.Contains(got, "Port1[") || !strings.Contains(got, "0.000488        0.00") {
		t.Errorf("per port:\n%s", got)
	}
}

func TestLatencyHeaders(t *testing.T) {
	ti := NewTestInfo(perftest.Send, perftest.Latency)
	want := rl + " #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec] \n"
	if got := LatencyHeader(&ti); got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	ti.Duration = true
	if got, want := LatencyHeader(&ti), rl+" #bytes        #iterations       t_avg[usec]    tps average\n"; got != want {
		t.Errorf("duration: got %q, want %q", got, want)
	}
	ti.CPUUtil = true
	if got, want := LatencyHeader(&ti), rl+" #bytes        #iterations       t_avg[usec]    tps average    CPU_Util[%]\n"; got != want {
		t.Errorf("duration CPU: got %q, want %q", got, want)
	}
	// " %-7lu       %lu            %-7.2f        %-7.2f" + "\t    %-3.2f\n"
	r := LatencyDurationResult{Size: 2, Iters: 123456, Avg: 1.5, TPS: 333333.333, CPUUtil: 99.5}
	if got, want := LatencyDurationReport(&ti, r), " 2             123456            1.50           333333.33\t    99.50\n"; got != want {
		t.Errorf("duration row: got %q, want %q", got, want)
	}
}

func TestLatencySampleDumps(t *testing.T) {
	// 5 samples in ns, SEND (q = 2000): -U prints them in order, -H the 3
	// kept ones sorted; then the header again and the row.
	r, err := ComputeLatency(LatencyInput{Size: 2, Iters: 6, Samples: []int64{3000, 2500, 9000, 2600, 2700}, RTTFactor: 2})
	if err != nil {
		t.Fatal(err)
	}
	ti := NewTestInfo(perftest.Send, perftest.Latency)
	ti.ReportUnsorted = true
	ti.ReportHistogram = true
	row := " 2       6          1.25           1.50         1.30     \t       1.30        \t0.00   \t\t1.50    \t\t1.50   \n"
	want := "#, usec\n1, 1.5\n2, 1.25\n3, 4.5\n4, 1.3\n5, 1.35\n" +
		"#, usec\n1, 1.25\n2, 1.3\n3, 1.35\n" +
		LatencyHeader(&ti) + row
	if got := LatencyReport(&ti, &r); got != want {
		t.Errorf("dumps:\n%s", lineDiff(want, got))
	}
	// -H alone in cycles; with --output=latency no header is repeated.
	r, err = ComputeLatency(LatencyInput{Size: 2, Iters: 6, Samples: []int64{3000, 2500, 9000, 2600, 2700}, RTTFactor: 2, Cycles: true})
	if err != nil {
		t.Fatal(err)
	}
	ti = NewTestInfo(perftest.Send, perftest.Latency)
	ti.ReportHistogram = true
	ti.Output = perftest.OutputLatency
	if got, want := LatencyReport(&ti, &r), "#, cycles\n1, 1250\n2, 1300\n3, 1350\n1300.000000\n"; got != want {
		t.Errorf("cycles dump: got %q, want %q", got, want)
	}
}

func TestMessages(t *testing.T) {
	for _, c := range []struct {
		write func(*bytes.Buffer) error
		want  string
	}{
		{func(b *bytes.Buffer) error { return WritePeakWarning(b) }, " WARNING: BW peak won't be measured in this run.\n"},
		{func(b *bytes.Buffer) error { return WriteDynamicPollingDisabled(b) }, "Disabling dynamic polling\n"},
		{func(b *bytes.Buffer) error { return WritePollBatchIncreased(b, 64) }, "Increasing CQE polling batch to 64\n"},
		{func(b *bytes.Buffer) error { return WritePostListCQMod(b) }, rl + "Post List requested - CQ moderation will be the size of the post list\n"},
		{func(b *bytes.Buffer) error { return WriteLargeMessageCQModWarning(b) },
			rl + "Warning: Large message requested and CQ moderation enabled\nWarning: It can lead to inaccurate results\n"},
		{func(b *bytes.Buffer) error { return WriteUDSizeClamped(b, 4096) }, " Max msg size in UD is MTU 4096\n Changing to this MTU\n"},
	} {
		var b bytes.Buffer
		must(t, c.write(&b))
		if b.String() != c.want {
			t.Errorf("got %q, want %q", b.String(), c.want)
		}
	}
	var out, errOut bytes.Buffer
	must(t, WriteInlineNotRecognized(&out, &errOut))
	if out.String() != rl || errOut.String() != "Device not recognized to implement inline feature. Disabling it\n" {
		t.Errorf("inline: stdout %q stderr %q", out.String(), errOut.String())
	}
}

type failWriter struct{}

var errWrite = errors.New("write failed")

func (failWriter) Write([]byte) (int, error) { return 0, errWrite }

func TestWriteErrors(t *testing.T) {
	ti := NewTestInfo(perftest.Write, perftest.Bandwidth)
	ti.Server = true
	r := LatencyResult{Size: 2, Iters: 5, Unit: "usec"}
	for name, err := range map[string]error{
		"banner":    WriteWaitingBanner(failWriter{}, &ti),
		"header":    WriteHeader(failWriter{}, &ti),
		"addresses": WriteAddresses(failWriter{}, &ti, []perftest.Dest{{}}, nil),
		"bw header": WriteBWHeader(failWriter{}, &ti),
		"bw row":    WriteBWReport(failWriter{}, &ti, BWResult{}, nil),
		"both":      WriteBWReportBoth(failWriter{}, &ti, BWResult{}, BWResult{}),
		"line":      WriteResultLine(failWriter{}, &ti),
		"lat":       WriteLatencyReport(failWriter{}, &ti, &r),
		"lat hdr":   WriteLatencyHeader(failWriter{}, &ti),
		"dur":       WriteLatencyDurationReport(failWriter{}, &ti, LatencyDurationResult{}),
		"inline":    WriteInlineNotRecognized(failWriter{}, failWriter{}),
		"json":      WriteJSON(failWriter{}, &ti, &Record{}, nil),
	} {
		if !errors.Is(err, errWrite) {
			t.Errorf("%s: error %v, want the writer's", name, err)
		}
	}
}
