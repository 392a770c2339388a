package cli

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/pvperf/pvperf/bench"
	"github.com/pvperf/pvperf/internal/version"
	"github.com/pvperf/pvperf/perftest"
	"github.com/pvperf/pvperf/verbs"
)

// opt is one option of the command line.
type opt struct {
	long  string // perftest's spelling of the long name
	short byte   // 0 when there is no short form
	arg   bool   // takes an argument
	// pvperf marks options perftest does not have; their names are
	// matched as abbreviations only when no perftest name matches.
	pvperf bool
	// unsupported, when not empty, is why pvperf rejects the option.
	unsupported string
	// noop, when not empty, says why the option is accepted and ignored.
	noop string
	// rel tells whether the option belongs in the usage text of a test
	// (perftest's usage() conditions); nil means every test.
	rel func(t testSpec) bool
	// other marks rejected options that belong to no test of pvperf (raw
	// Ethernet, accelerators, vendor features): every usage text lists
	// them at its end.
	other bool
	// set applies the option, in command line order, like the body of
	// perftest's switch.
	set func(p *parser, val string) error
}

// display names the option in messages: "-R/--rdma_cm" or "--odp".
func (o *opt) display() string {
	if o.short != 0 {
		return fmt.Sprintf("-%c/--%s", o.short, o.long)
	}
	return "--" + o.long
}

// dupKey identifies the option for perftest's duplicate check, which
// shares one slot between a short option and its long form.
func (o *opt) dupKey() string {
	if o.short != 0 {
		return string(o.short)
	}
	return o.long
}

func (o *opt) relevant(t testSpec) bool { return o.rel == nil || o.rel(t) }

// optName is one long name; an option may have several (an alias).
type optName struct {
	name   string
	o      *opt
	pvperf bool
}

// optTable is the option set: perftest's long options in perftest's order,
// then pvperf's.
type optTable struct {
	opts  []*opt
	names []optName
	short map[byte]*opt
	byKey map[string]*opt
}

// Reasons for rejecting options, shared by families of them.
const (
	whyRawEth    = "raw Ethernet tests are not part of pvperf"
	whyMcast     = "multicast is not implemented"
	whyDualPort  = "dual-port mode is not implemented"
	whyAccel     = "accelerator and device memory are not supported: buffers are host memory from the device"
	whyBuffers   = "buffers always come from the device's own host memory allocation"
	whyRateLimit = "the rate limiter is not implemented"
	whyMlx5      = "mlx5 vendor feature"
	whyDC        = "DC transport is not supported"
	whyTPH       = "PCIe TPH is not supported"
)

var (
	relBW      = func(t testSpec) bool { return t.bw() }
	relLAT     = func(t testSpec) bool { return t.lat() }
	relSend    = func(t testSpec) bool { return t.send() }
	relSendBW  = func(t testSpec) bool { return t.send() && t.bw() }
	relNotAtom = func(t testSpec) bool { return !t.atomic() }
	relRdAtom  = func(t testSpec) bool { return t.read() || t.atomic() }
	relAtomic  = func(t testSpec) bool { return t.atomic() }
	relInline  = func(t testSpec) bool { return t.send() || t.write() }
	relWrite   = func(t testSpec) bool { return t.write() }
	relWrRd    = func(t testSpec) bool { return t.write() || t.read() }
	relPayload = func(t testSpec) bool { return !t.write() || !t.lat() }
)

// options builds the option table. Each call returns a fresh table (they
// hold no state, but building per parse keeps Parse free of globals).
func options() *optTable {
	t := &optTable{short: map[byte]*opt{}, byKey: map[string]*opt{}}
	add := func(o *opt, aliases ...string) {
		t.opts = append(t.opts, o)
		t.names = append(t.names, optName{name: o.long, o: o, pvperf: o.pvperf})
		for _, a := range aliases {
			t.names = append(t.names, optName{name: a, o: o, pvperf: true})
		}
		if o.short != 0 {
			t.short[o.short] = o
		}
		t.byKey[o.long] = o
	}
	unsup := func(long string, short byte, arg bool, why string, rel func(testSpec) bool) {
		add(&opt{long: long, short: short, arg: arg, unsupported: why, rel: rel})
	}
	other := func(long string, short byte, arg bool, why string) {
		add(&opt{long: long, short: short, arg: arg, unsupported: why, other: true})
	}

	// perftest's long_options, in its order (abbreviations are resolved,
	// and ambiguities listed, in this order).
	add(&opt{long: "port", short: 'p', arg: true, set: func(p *parser, v string) error {
		// perftest takes any int and hands it to getaddrinfo (0: a
		// server on a random port no client knows; -1: no such
		// service); a TCP port is refused here instead.
		return p.intRange(v, "Port", 1, 65535, &p.cfg.Port)
	}})
	add(&opt{long: "ib-dev", short: 'd', arg: true, set: func(p *parser, v string) error {
		p.cfg.Device = v
		return nil
	}})
	add(&opt{long: "ib-port", short: 'i', arg: true, set: func(p *parser, v string) error {
		n, err := p.checkValue(v, "IB Port", "uint8_t")
		if err != nil {
			return err
		}
		p.cfg.IBPort = int(uint8(n))
		if p.cfg.IBPort < 1 {
			return p.parserFail("IB Port can't be less than %d\n", 1)
		}
		return nil
	}})
	add(&opt{long: "mtu", short: 'm', arg: true, set: func(p *parser, v string) error {
		return p.intVal(v, "MTU", &p.cfg.MTU)
	}})
	add(&opt{long: "size", short: 's', arg: true, rel: relNotAtom, set: (*parser).setSize})
	add(&opt{long: "iters", short: 'n', arg: true, set: func(p *parser, v string) error {
		n, err := p.checkValue(v, "Iteration num", "uint64_t")
		if err != nil {
			return err
		}
		u := uint64(n)
		if u < 5 || u > 4294967296 {
			return p.parserFail(" %s should be between %d and %d\n", "Iteration num", uint64(5), uint64(4294967296))
		}
		p.cfg.Iters = u
		return nil
	}})
	add(&opt{long: "tx-depth", short: 't', arg: true, rel: relBW, set: func(p *parser, v string) error {
		return p.intRange(v, "Tx depth", 1, 15000, &p.cfg.TxDepth)
	}})
	add(&opt{long: "qp-timeout", short: 'u', arg: true, set: func(p *parser, v string) error {
		n, err := p.checkValue(v, "QP Timeout", "uint8_t")
		p.cfg.QPTimeout = int(uint8(n))
		return err
	}})
	add(&opt{long: "sl", short: 'S', arg: true, set: func(p *parser, v string) error {
		n, err := p.checkValue(v, "Service Level", "uint8_t")
		if err != nil {
			return err
		}
		p.cfg.SL = int(uint8(n))
		if p.cfg.SL > 15 {
			return p.parserFail(" Only %d Service levels\n", 15)
		}
		return nil
	}})
	add(&opt{long: "gid-index", short: 'x', arg: true, set: func(p *parser, v string) error {
		n, err := p.checkValue(v, "Gid index", "uint8_t")
		if err != nil {
			return err
		}
		p.cfg.GIDIndex = int(uint8(n))
		if p.cfg.GIDIndex > 64 {
			return p.parserFail(" %s should be between %d and %d\n", "Gid index", 0, 64)
		}
		return nil
	}})
	add(&opt{long: "all", short: 'a', rel: relNotAtom, set: func(p *parser, _ string) error {
		p.method = runAll
		return nil
	}})
	add(&opt{long: "CPU-freq", short: 'F', noop: "pvperf's clock does not depend on the CPU frequency, so there is no frequency warning to silence",
		set: func(*parser, string) error { return nil }})
	add(&opt{long: "connection", short: 'c', arg: true, set: (*parser).setConnection})
	add(&opt{long: "qp", short: 'q', arg: true, rel: relBW, set: func(p *parser, v string) error {
		if err := p.intRange(v, "num of Qps", 1, 16384, &p.cfg.NumQPs); err != nil {
			return err
		}
		if !p.test.bw() && p.cfg.NumQPs > 1 {
			return p.parserFail(" Multiple QPs only available on bw tests\n")
		}
		return nil
	}})
	add(&opt{long: "events", short: 'e', set: func(p *parser, _ string) error {
		p.cfg.Events = true
		return nil
	}})
	add(&opt{long: "vector", short: 'X', arg: true, set: func(p *parser, v string) error {
		if p.verb == perftest.Write || p.verb == perftest.WriteImm {
			return p.parserFail(" Events feature not available on WRITE verb\n")
		}
		p.useEqNum = true
		return p.intRange(v, "EQN", 0, 2048, &p.cfg.CompVector)
	}})
	add(&opt{long: "inline_size", short: 'I', arg: true, rel: relInline, set: func(p *parser, v string) error {
		if err := p.intRange(v, "Max inline", 0, 1024, &p.cfg.Inline); err != nil {
			return err
		}
		p.cfg.InlineGiven = true
		if p.verb == perftest.Read || p.verb == perftest.Atomic {
			return p.parserFail(" Inline feature not available on READ/Atomic verbs\n")
		}
		return nil
	}})
	add(&opt{long: "outs", short: 'o', arg: true, rel: relRdAtom, set: func(p *parser, v string) error {
		if err := p.intVal(v, "Outstanding Reads", &p.cfg.OutReads); err != nil {
			return err
		}
		if p.verb != perftest.Read && p.verb != perftest.Atomic {
			return p.parserFail(" Setting Outstanding reads only available on READ verb\n")
		}
		return nil
	}})
	unsup("mcg", 'g', false, whyMcast, relSend)
	add(&opt{long: "comm_rdma_cm", short: 'z', set: func(p *parser, _ string) error {
		p.cfg.CMExchange = true
		return nil
	}})
	add(&opt{long: "rdma_cm", short: 'R', set: func(p *parser, _ string) error {
		p.cfg.RdmaCM = true
		return nil
	}})
	add(&opt{long: "tos", short: 'T', arg: true, set: func(p *parser, v string) error {
		if err := p.intRange(v, "TOS", 0, 255, &p.tos); err != nil {
			return err
		}
		p.cfg.TOS = p.tos
		return nil
	}})
	add(&opt{long: "hop_limit", short: 'L', arg: true, set: func(p *parser, v string) error {
		return p.intRange(v, "Hop Limit", 0, 255, &p.hopLimit)
	}})
	add(&opt{long: "help", short: 'h', set: func(p *parser, _ string) error {
		p.usage()
		return ErrHelp
	}})
	unsup("MGID", 'M', true, whyMcast, relSend)
	add(&opt{long: "rx-depth", short: 'r', arg: true, rel: func(t testSpec) bool { return t.send() || t.write() },
		set: func(p *parser, v string) error {
			if err := p.intRange(v, " Rx depth", 1, 16384, &p.cfg.RxDepth); err != nil {
				return err
			}
			if !p.verb.HasReceives() && p.verb != perftest.Write && p.cfg.RxDepth > 1 {
				return p.parserFail(" On RDMA verbs rx depth can be only 1\n")
			}
			return nil
		}})
	add(&opt{long: "bidirectional", short: 'b', rel: relBW, set: func(p *parser, _ string) error {
		p.cfg.Bidirectional = true
		if p.test.lat() {
			return p.parserFail(" Bidirectional is only available in BW test\n")
		}
		return nil
	}})
	add(&opt{long: "cq-mod", short: 'Q', arg: true, rel: relBW, set: func(p *parser, v string) error {
		p.reqCQMod = true
		return p.intRange(v, "CQ moderation", 1, 1024, &p.cfg.CQMod)
	}})
	add(&opt{long: "noPeak", short: 'N', rel: relBW, set: func(p *parser, _ string) error {
		p.cfg.NoPeak = true
		if p.test.lat() {
			return p.parserFail(" NoPeak only valid for BW tests\n")
		}
		return nil
	}})
	add(&opt{long: "version", short: 'V', set: func(p *parser, _ string) error {
		if !p.cfg.Extras {
			// perftest's text alone (--perftest_output before -V, as
			// under an ib_ name): its line, for the scripts that
			// compare it whole.
			fmt.Fprintf(p.stdout, "Version: %s\n", bench.ProtocolVersion)
			return ErrVersion
		}
		fmt.Fprintf(p.stdout, "Version: %s (pvperf %s)\n", bench.ProtocolVersion, version.Version)
		return ErrVersion
	}})
	add(&opt{long: "report-cycles", short: 'C', rel: relLAT, set: func(p *parser, _ string) error {
		if !p.test.lat() {
			return p.parserFail(" Available only on Latency tests\n")
		}
		p.cfg.Cycles = true
		return nil
	}})
	add(&opt{long: "report-histogrm", short: 'H', rel: relLAT, set: func(p *parser, _ string) error {
		if p.test.bw() {
			return p.parserFail(" Available only on Latency tests\n")
		}
		p.cfg.ReportHistogram = true
		return nil
	}}, "report-histogram")
	add(&opt{long: "report-unsorted", short: 'U', rel: relLAT, set: func(p *parser, _ string) error {
		if p.test.bw() {
			return p.parserFail(" is Available only on Latency tests\n")
		}
		p.cfg.ReportUnsorted = true
		return nil
	}})
	add(&opt{long: "atomic_type", short: 'A', arg: true, rel: relAtomic, set: func(p *parser, v string) error {
		if p.verb != perftest.Atomic {
			return p.parserFail(" You are not running the atomic_lat/bw test!\n" +
				" To change the atomic action type, you must run one of the atomic tests\n")
		}
		switch v {
		case "CMP_AND_SWAP":
			p.cfg.AtomicType = perftest.CmpAndSwap
		case "FETCH_AND_ADD":
			p.cfg.AtomicType = perftest.FetchAndAdd
		default:
			return p.exitErr(" Invalid Atomic type! please choose from {CMP_AND_SWAP,FETCH_AND_ADD}\n")
		}
		return nil
	}})
	unsup("dualport", 'O', false, whyDualPort, relBW)
	add(&opt{long: "post_list", short: 'l', arg: true, rel: relBW, set: func(p *parser, v string) error {
		return p.intVal(v, "Send Post List size", &p.cfg.PostList)
	}})
	add(&opt{long: "duration", short: 'D', arg: true, set: func(p *parser, v string) error {
		n, err := p.checkValue(v, "Duration period", "int")
		if err != nil {
			return err
		}
		p.duration = int(int32(n))
		if p.duration <= 0 {
			return p.parserFail(" %s must be positive\n", "Duration period")
		}
		p.durationMode = true
		return nil
	}})
	add(&opt{long: "margin", short: 'f', arg: true, set: func(p *parser, v string) error {
		n, err := p.checkValue(v, "Margin", "int")
		if err != nil {
			return err
		}
		p.margin = int(int32(n))
		if p.margin < 0 {
			return p.parserFail(" %s must be non-negative %s\n", "Margin", "int")
		}
		return nil
	}})
	other("source_mac", 'B', true, whyRawEth)
	other("dest_mac", 'E', true, whyRawEth)
	other("dest_ip", 'J', true, whyRawEth)
	other("source_ip", 'j', true, whyRawEth)
	other("dest_port", 'K', true, whyRawEth)
	other("source_port", 'k', true, whyRawEth)
	other("ethertype", 0, true, whyRawEth) // -Y: long form only
	add(&opt{long: "limit_bw", short: 'w', arg: true, rel: relBW, set: func(p *parser, v string) error {
		p.cfg.LimitBWSet = true
		p.cfg.LimitBW = strtof(v)
		if p.cfg.LimitBW < 0 {
			return p.parserFail(" Invalid Minimum BW Limit\n")
		}
		return nil
	}})
	add(&opt{long: "limit_msgrate", short: 'y', arg: true, rel: relBW, set: func(p *parser, v string) error {
		p.cfg.LimitMsgRate = strtof(v)
		if p.cfg.LimitMsgRate < 0 {
			return p.parserFail(" Invalid Minimum msgRate Limit\n")
		}
		return nil
	}})
	other("server", 'Z', false, whyRawEth)
	other("client", 'P', false, whyRawEth)
	other("mac_fwd", 'v', false, whyRawEth)
	other("use_rss", 0, false, whyRawEth) // -G: long form only
	unsup("report-counters", 'W', true, "port counters are not available through pvperf's verbs API", nil)
	add(&opt{long: "force-link", arg: true, set: func(p *parser, v string) error {
		switch {
		case len(v) >= 2 && strings.EqualFold(v[:2], "IB"):
			p.cfg.ForceLink = verbs.LinkInfiniBand
		case len(v) >= 8 && strings.EqualFold(v[:8], "Ethernet"):
			p.cfg.ForceLink = verbs.LinkEthernet
		default:
			return p.parserFail("Invalid link layer value should be IB or ETHERNET.\n")
		}
		return nil
	}})
	other("remote_mac", 0, true, whyRawEth)
	other("local_mac", 0, true, whyRawEth)
	other("remote_ip", 0, true, whyRawEth)
	other("local_ip", 0, true, whyRawEth)
	other("remote_port", 0, true, whyRawEth)
	other("local_port", 0, true, whyRawEth)
	add(&opt{long: "run_infinitely", rel: relBW, set: func(p *parser, _ string) error {
		p.runInf = true
		return nil
	}})
	add(&opt{long: "report_gbits", rel: relBW, set: func(p *parser, _ string) error {
		p.cfg.ReportGbits = true
		return nil
	}})
	add(&opt{long: "use-srq", rel: relSend, set: func(p *parser, _ string) error {
		p.cfg.UseSRQ = true
		return nil
	}})
	other("no_lock", 0, false, whyMlx5+" (thread domains)")
	unsup("use-null-mr", 0, false, "null memory regions are not available in pvperf's verbs API", relWrRd)
	add(&opt{long: "report-both", rel: relBW, set: func(p *parser, _ string) error {
		p.cfg.ReportBoth = true
		return nil
	}})
	add(&opt{long: "reversed", rel: relBW, set: func(p *parser, _ string) error {
		p.cfg.Reversed = true
		return nil
	}})
	add(&opt{long: "pkey_index", arg: true, set: func(p *parser, v string) error {
		return p.intVal(v, "Pkey index", &p.cfg.PKeyIndex)
	}})
	other("tcp", 0, false, whyRawEth)
	unsup("burst_size", 0, true, whyRateLimit, relBW)
	unsup("typical_pkt_size", 0, true, whyRateLimit, relBW)
	unsup("rate_limit", 0, true, whyRateLimit, relBW)
	unsup("rate_limit_type", 0, true, whyRateLimit, relBW)
	unsup("rate_units", 0, true, whyRateLimit, relBW)
	add(&opt{long: "output", arg: true, set: func(p *parser, v string) error {
		switch v {
		case "bandwidth":
			p.cfg.Output = perftest.OutputBandwidth
		case "message_rate":
			p.cfg.Output = perftest.OutputMessageRate
		case "latency":
			p.cfg.Output = perftest.OutputLatency
		default:
			return p.parserFail(" Invalid verbosity level output flag. Please use bandwidth, latency, message_rate\n")
		}
		return nil
	}})
	add(&opt{long: "cpu_util", set: func(p *parser, _ string) error {
		p.cfg.CPUUtil = true
		return nil
	}})
	add(&opt{long: "out_json", set: func(p *parser, _ string) error {
		p.cfg.JSON = true
		return nil
	}})
	add(&opt{long: "out_json_file", arg: true, set: func(p *parser, v string) error {
		p.cfg.JSONFile = v
		return nil
	}})
	add(&opt{long: "latency_gap", arg: true, rel: relLAT, set: func(p *parser, v string) error {
		n, err := p.checkValue(v, "Latency gap time", "int")
		if err != nil {
			return err
		}
		p.cfg.LatencyGap = int(int32(n))
		if p.cfg.LatencyGap < 0 {
			return p.parserFail(" %s must be non-negative %s\n", "Latency gap time", "int")
		}
		return nil
	}})
	add(&opt{long: "flow_label", arg: true, set: func(p *parser, v string) error {
		p.cfg.FlowLabel = nil
		for f := range strings.SplitSeq(v, ",") {
			n, _ := strtol(f)
			p.cfg.FlowLabel = append(p.cfg.FlowLabel, int(int32(n)))
		}
		return nil
	}})
	add(&opt{long: "retry_count", arg: true,
		set: func(p *parser, v string) error {
			n, err := p.checkValue(v, "Retry Count", "int")
			if err != nil {
				return err
			}
			if int32(n) < 0 {
				return p.parserFail(" %s must be non-negative %s\n", "Retry Count", "int")
			}
			p.cfg.RetryCount = int(int32(n))
			return nil
		}})
	unsup("dont_xchg_versions", 0, false,
		"perftest 6.29 cannot run with it either: it then takes its peer for a version older than 5.70 and exits", nil)
	add(&opt{long: "payload_file_path", arg: true, rel: relPayload, set: func(p *parser, v string) error {
		p.cfg.PayloadFile = v
		return nil
	}})
	for _, n := range []struct {
		name string
		arg  bool
	}{
		{"use_cuda", true}, {"use_cuda_bus_id", true}, {"use_cuda_dmabuf", false},
		{"use_cuda_pcie_mapping", false}, {"use_data_direct", false}, {"cuda_mem_type", true},
		{"use_musa", true}, {"use_musa_bus_id", true}, {"use_musa_dmabuf", false},
		{"use_musa_pcie_mapping", false}, {"use_rocm", true}, {"use_rocm_dmabuf", false},
		{"use_neuron", true}, {"use_neuron_dmabuf", false}, {"use_hl", true}, {"use_mlu", true},
		{"use_mlu_dmabuf", false}, {"use_opencl", true}, {"opencl_platform_id", true},
		{"use_ib_dm_dmabuf", true}, {"gpu_touch", true},
	} {
		other(n.name, 0, n.arg, whyAccel)
	}
	unsup("mmap", 0, true, whyBuffers, nil)
	unsup("mmap-offset", 0, true, whyBuffers, nil)
	add(&opt{long: "ipv6", set: func(p *parser, _ string) error {
		p.cfg.PreferIPv6 = true
		return nil
	}})
	add(&opt{long: "ipv6-addr", set: func(p *parser, _ string) error {
		p.cfg.IPv6Addr = true
		return nil
	}})
	other("raw_ipv6", 0, false, whyRawEth)
	unsup("report-per-port", 0, false, whyDualPort, relBW)
	unsup("odp", 0, false, "on-demand paging is not available in pvperf's verbs API", nil)
	unsup("use_hugepages", 0, false, whyBuffers, nil)
	add(&opt{long: "use_old_post_send", noop: "pvperf has one posting path, which builds the work requests ibv_post_send would; the header always says ibv_wr* API OFF",
		set: func(*parser, string) error { return nil }})
	other("promiscuous", 0, false, whyRawEth)
	other("sniffer", 0, false, whyRawEth)
	other("raw_mcast", 0, false, whyRawEth)
	unsup("mr_per_qp", 0, false, "one memory region per QP is not implemented: all QPs share one", relBW)
	add(&opt{long: "dlid", arg: true, set: func(p *parser, v string) error {
		n, err := p.checkValue(v, "dlid", "uint16_t")
		p.cfg.DLID = int(uint16(n))
		return err
	}})
	add(&opt{long: "tclass", arg: true, set: func(p *parser, v string) error {
		n, err := p.checkValue(v, "traffic class", "uint16_t")
		p.cfg.TClass = int(uint8(n)) // perftest keeps it in a uint8_t
		return err
	}})
	add(&opt{long: "wait_destroy", arg: true, rel: relBW, set: func(p *parser, v string) error {
		n, err := p.checkValue(v, "wait_destroy", "uint32_t")
		p.cfg.WaitDestroy = time.Duration(uint32(n)) * time.Second
		return err
	}})
	other("flows", 0, true, whyRawEth)
	other("flows_burst", 0, true, whyRawEth)
	other("reply_every", 0, true, whyRawEth)
	add(&opt{long: "perform_warm_up", set: func(p *parser, _ string) error {
		p.cfg.WarmUp = true
		return nil
	}})
	other("vlan_en", 0, false, whyRawEth)
	other("vlan_pcp", 0, true, whyRawEth)
	add(&opt{long: "recv_post_list", arg: true, rel: relBW, set: func(p *parser, v string) error {
		return p.intVal(v, "Receive Post List size", &p.cfg.RecvPostList)
	}})
	for _, n := range []struct {
		name string
		arg  bool
	}{
		{"aes_xts", false}, {"encrypt_on_tx", false}, {"sig_before", false}, {"aes_block_size", true},
		{"kek_path", true}, {"credentials_path", true}, {"data_enc_keys_number", true},
		{"data_enc_key_app_path", true},
	} {
		other(n.name, 0, n.arg, whyMlx5+" (AES-XTS encryption)")
	}
	other("log_dci_streams", 0, true, whyDC)
	other("log_active_dci_streams", 0, true, whyDC)
	add(&opt{long: "disable_pcie_relaxed", rel: relBW, set: func(p *parser, _ string) error {
		p.cfg.NoRelaxedOrdering = true
		return nil
	}})
	other("use_ooo", 0, false, whyMlx5+" (out-of-order placement)")
	other("congest_type", 0, true, "hns vendor feature (congestion control)")
	add(&opt{long: "bind_source_ip", arg: true, set: func(p *parser, v string) error {
		p.cfg.BindSourceIP = v
		return nil
	}})
	add(&opt{long: "write_with_imm", rel: relWrite, set: func(p *parser, _ string) error {
		if p.verb != perftest.Write {
			return p.parserFail("Write_with_imm can only be used with write_lat and write_bw tests\n")
		}
		p.verb = perftest.WriteImm
		return nil
	}})
	add(&opt{long: "send_with_imm", rel: relSend, set: func(p *parser, _ string) error {
		if p.verb != perftest.Send {
			return p.parserFail("Send_with_imm can only be used with send_lat and send_bw tests\n")
		}
		p.verb = perftest.SendImm
		return nil
	}})
	other("no_enhanced_reorder", 0, false, whyMlx5+" (enhanced reorder)")
	other("unsolicited_write", 0, false, "EFA SRD feature")
	unsup("connectionless", 0, false, whyMcast, relSendBW)
	add(&opt{long: "cqe_poll", arg: true, set: func(p *parser, v string) error {
		n, err := p.checkValue(v, "CQE Poll", "uint16_t")
		if err != nil {
			return err
		}
		poll := int(uint16(n))
		if poll < 1 {
			return p.parserFail(" %s should be between %d and %d\n", "CQE Poll", 1, 65535)
		}
		p.cfg.PollBatch = poll
		p.useCQEPoll = true
		p.cfg.DynamicPolling = false
		return nil
	}})
	other("tph_mem", 0, true, whyTPH)
	other("cpu_id", 0, true, whyTPH)
	other("ph", 0, true, whyTPH)
	add(&opt{long: "disable_dynamic_polling", rel: relBW, set: func(p *parser, _ string) error {
		p.cfg.DynamicPolling = false
		return nil
	}})
	other("sig_offload", 0, false, whyMlx5+" (signature offload)")
	add(&opt{long: "data_validation", rel: relBW, set: func(p *parser, _ string) error {
		p.cfg.DataValidation = true
		return nil
	}})
	add(&opt{long: "data_validation_debug", rel: relBW, set: func(p *parser, _ string) error {
		p.cfg.DataValidationDebug = true
		return nil
	}})
	unsup("pin_cores", 0, true, "use taskset(1) to choose CPUs", nil)
	unsup("numa_node", 0, true, "use numactl(8) to choose a NUMA node", nil)
	add(&opt{long: "disable_numa", noop: "pvperf does not bind itself to a NUMA node",
		set: func(*parser, string) error { return nil }})

	// pvperf's own options.
	add(&opt{long: "loopback", pvperf: true, set: func(p *parser, _ string) error {
		p.cfg.Loopback = true
		return nil
	}})
	add(&opt{long: "peer-timeout", pvperf: true, arg: true, set: (*parser).setPeerTimeout})
	add(&opt{long: "params-size", pvperf: true, arg: true, set: func(p *parser, v string) error {
		if v != "312" && v != "320" { // perftest built without mlx5dv, with it
			return p.parserFail(" --params-size takes 312 or 320 (bytes of perftest's parameter struct), not %q\n", v)
		}
		p.cfg.ParamsSize, _ = strconv.Atoi(v)
		return nil
	}})
	add(&opt{long: "out_csv", pvperf: true, arg: true, set: func(p *parser, v string) error {
		p.cfg.CSVFile = v
		return nil
	}})
	add(&opt{long: "out_html", pvperf: true, arg: true, set: func(p *parser, v string) error {
		p.cfg.HTMLFile = v
		return nil
	}})
	add(&opt{long: "repeat", pvperf: true, arg: true, set: func(p *parser, v string) error {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 10000 {
			return p.parserFail(" --repeat takes a number of runs from 1 to 10000, not %q\n", v)
		}
		p.cfg.Repeat = n
		return nil
	}})
	add(&opt{long: "repeat_ci", pvperf: true, arg: true, set: func(p *parser, v string) error {
		x, err := strconv.ParseFloat(strings.TrimSuffix(v, "%"), 64)
		if err != nil || !(x > 0 && x < 100) {
			return p.parserFail(" --repeat_ci takes a half-width in percent of the median, above 0 and below 100, not %q\n", v)
		}
		p.cfg.RepeatCI = x
		return nil
	}})
	add(&opt{long: "check_data", pvperf: true, set: func(p *parser, _ string) error {
		p.cfg.CheckData = true
		return nil
	}})
	add(&opt{long: "perftest_output", pvperf: true, set: func(p *parser, _ string) error {
		p.cfg.Extras = false
		return nil
	}})
	add(&opt{long: "interval_json", pvperf: true, arg: true, set: func(p *parser, v string) error {
		if v == "" {
			return p.parserFail(" --interval_json needs a file name, or - for standard output\n")
		}
		p.cfg.IntervalJSON = v
		return nil
	}})
	return t
}
