package cli

import (
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/pvperf/pvperf/bench"
	"github.com/pvperf/pvperf/perftest"
)

// usage prints the help text to stdout, as perftest's usage() does: the
// options relevant to the test, in perftest's order and words, each marked
// when pvperf does not support it or ignores it; then pvperf's own options
// and the recognised options that belong to no test of pvperf.
func (p *parser) usage() {
	writeUsage(p.stdout, p.prog, p.test, p.verb, p.tbl)
}

func writeUsage(w io.Writer, prog string, t testSpec, verb perftest.Verb, tbl *optTable) {
	u := &usageWriter{w: w, tbl: tbl}
	bw, lat := t.bw(), t.lat()
	writeVerb := verb == perftest.Write || verb == perftest.WriteImm
	sendVerb := verb == perftest.Send || verb == perftest.SendImm

	u.printf("Usage:\n")
	u.printf("  %s            start a server and wait for connection\n", prog)
	u.printf("  %s <host>     connect to server at <host>\n", prog)
	u.printf("\n")
	u.printf("Note: Some options must match on both server and client for consistent behavior (marked 'SYMMETRIC').\n")
	u.printf("\n")
	u.printf("Options:\n")

	if verb != perftest.Atomic {
		u.opt("all", "  -a, --all ", " Run sizes from 2 till 2^23 (SYMMETRIC)")
	}
	if verb == perftest.Atomic {
		u.opt("atomic_type", "  -A, --atomic_type=<type> ",
			" type of atomic operation from {CMP_AND_SWAP,FETCH_AND_ADD} (default FETCH_AND_ADD) (SYMMETRIC)")
	}
	if bw {
		u.opt("bidirectional", "  -b, --bidirectional ", " Measure bidirectional bandwidth (default unidirectional) (SYMMETRIC)")
	}
	conns := "RC"
	switch {
	case sendVerb:
		conns = "RC/UC/UD"
	case writeVerb:
		conns = "RC/UC"
	}
	u.opt("connection", fmt.Sprintf("  -c, --connection=<%s> ", conns),
		fmt.Sprintf(" Connection type %s (default RC) (SYMMETRIC) [XRC, DC and SRD are not supported by pvperf]", conns))
	if lat {
		u.opt("report-cycles", "  -C, --report-cycles ", " report times in cpu cycle units (default microseconds)")
	}
	u.opt("ib-dev", "  -d, --ib-dev=<dev> ", " Use IB device <dev> (default first device found)")
	u.opt("duration", "  -D, --duration ", " Run test for a customized period of seconds. (SYMMETRIC)")
	imm := ""
	if verb == perftest.Write {
		imm = " (write tests: with --write_with_imm only)"
	}
	u.opt("events", "  -e, --events ", " Sleep on CQ events (default poll)"+imm)
	u.opt("vector", "  -X, --vector=<completion vector> ", " Set <completion vector> used for events"+imm)
	u.opt("margin", "  -f, --margin ", " measure results within margins. (default duration/4 sec) (SYMMETRIC)")
	u.opt("CPU-freq", "  -F, --CPU-freq ",
		" Do not show a warning even if cpufreq_ondemand module is loaded, and cpu-freq is not on max.")
	if verb == perftest.Send {
		u.opt("mcg", "  -g, --mcg ", " Send messages to multicast group with 1 QP attached to it. (SYMMETRIC)")
		u.printf("         When there is no multicast gid specified, a default IPv6 typed gid will be used.\n")
	}
	u.opt("help", "  -h, --help ", " Show this help screen.")
	if lat {
		u.opt("report-histogrm", "  -H, --report-histogram (or --report-histogrm) ",
			" Print out all results (default print summary only)")
	}
	u.opt("ib-port", "  -i, --ib-port=<port> ", " Use port <port> of IB device (default 1)")
	if verb != perftest.Read && verb != perftest.Atomic {
		u.opt("inline_size", "  -I, --inline_size=<size> ", " Max size of message to be sent in inline")
	}
	if bw {
		u.opt("post_list", "  -l, --post_list=<list size>\n",
			" Post list of send WQEs of <list size> size (instead of single post)")
		u.opt("recv_post_list", "      --recv_post_list=<list size>",
			" Post list of receive WQEs of <list size> size (instead of single post)")
	}
	u.opt("hop_limit", "  -L, --hop_limit=<hop_limit> ",
		" Set hop limit value (ttl for IPv4 RawEth QP). Values 0-255 (default 64) [only 64: RawEth QPs are not supported by pvperf]")
	u.opt("mtu", "  -m, --mtu=<mtu> ", " MTU size : 256 - 4096 (default port mtu) (SYMMETRIC)")
	if verb == perftest.Send {
		u.opt("MGID", "  -M, --MGID=<multicast_gid> ", " In multicast, uses <multicast_gid> as the group MGID.")
		if bw {
			u.opt("connectionless", "      --connectionless ", " Open a connectionless server instance for multicast traffic.")
		}
	}
	iters := bench.DefaultIters
	if writeVerb && bw {
		iters = bench.DefaultWriteBWIters
	}
	u.opt("iters", "  -n, --iters=<iters> ", fmt.Sprintf(" Number of exchanges (at least %d, default %d) (SYMMETRIC)", 5, iters))
	if bw {
		u.opt("noPeak", "  -N, --noPeak", " Cancel peak-bw calculation (default with peak up to iters=20000)")
	}
	if verb == perftest.Read || verb == perftest.Atomic {
		u.opt("outs", "  -o, --outs=<num> ", " num of outstanding read/atom(default max of device)")
	}
	if bw {
		u.opt("dualport", "  -O, --dualport ", " Run test in dual-port mode. (SYMMETRIC)")
	}
	u.opt("port", "  -p, --port=<port> ", fmt.Sprintf(" Listen on/connect to port <port> (default %d) (SYMMETRIC)", bench.DefaultPort))
	if bw {
		u.opt("qp", "  -q, --qp=<num of qp's> ", " Num of qp's(default 1) (SYMMETRIC)")
		u.opt("cq-mod", "  -Q, --cq-mod ", " Generate Cqe only after <--cq-mod> completion")
	}
	if verb.HasReceives() || verb == perftest.Write {
		u.opt("rx-depth", "  -r, --rx-depth=<dep> ",
			fmt.Sprintf(" Rx queue size (default %d). If using srq, rx-depth controls max-wr size of the srq%s",
				bench.DefaultRecvRxDepth, imm))
	}
	u.opt("rdma_cm", "  -R, --rdma_cm ", " Connect QPs with rdma_cm and run test on those QPs")
	if verb != perftest.Atomic {
		size := bench.DefaultBWSize
		if lat {
			size = bench.DefaultLatSize
		}
		u.opt("size", "  -s, --size=<size> ", fmt.Sprintf(" Size of message to exchange (default %d) (SYMMETRIC)", size))
	}
	u.opt("sl", "  -S, --sl=<sl> ", " SL (default 0)")
	if bw {
		u.opt("tx-depth", "  -t, --tx-depth=<dep> ", fmt.Sprintf(" Size of tx queue (default %d)", bench.DefaultBWTxDepth))
	}
	u.opt("tos", "  -T, --tos=<tos value> ",
		" Set <tos_value> to RDMA-CM QPs. available only with -R flag. values 0-256 (default off)")
	u.opt("qp-timeout", "  -u, --qp-timeout=<timeout> ",
		fmt.Sprintf(" QP timeout, timeout value is 4 usec * 2 ^(timeout), default %d", bench.DefaultQPTimeout))
	if lat {
		u.opt("report-unsorted", "  -U, --report-unsorted ", " (implies -H) print out unsorted results (default sorted)")
	}
	u.opt("version", "  -V, --version ", " Display version number")
	if bw {
		u.opt("limit_bw", "  -w, --limit_bw=<value> ", " Set verifier limit for bandwidth")
	}
	u.opt("report-counters", "  -W, --report-counters=<list of counter names> ",
		" Report performance counter change (example: \"counters/port_xmit_data,hw_counters/out_of_buffer\")")
	u.opt("gid-index", "  -x, --gid-index=<index> ", " Test uses GID with GID index")
	if bw {
		u.opt("limit_msgrate", "  -y, --limit_msgrate=<value> ", " Set verifier limit for Msg Rate")
		u.opt("disable_dynamic_polling", "      --disable_dynamic_polling ",
			" Disable dynamic CQE polling adaptation (default enabled)")
		u.opt("data_validation", "      --data_validation ", " Enable data validation (tx_depth must be same on both sides)")
		u.printf("                          In DURATION mode, bytes_validated = duration/(duration-2*margin) * iters * size\n")
		u.opt("data_validation_debug", "      --data_validation_debug ", " Enable verbose debug output for data validation")
	}
	u.opt("comm_rdma_cm", "  -z, --comm_rdma_cm ",
		" Communicate with rdma_cm module to exchange data - use regular QPs (SYMMETRIC)")

	u.printf("\n")
	u.opt("out_json", "      --out_json ", " Save the report in a json file")
	u.opt("out_json_file", "      --out_json_file=<file> ",
		fmt.Sprintf(" Name of the report json file. (Default: %s in the working directory) ", defaultJSONFile))
	u.opt("cpu_util", "      --cpu_util ", " Show CPU Utilization in report, valid only in Duration mode ")
	u.opt("cqe_poll", "      --cqe_poll ", " Number of CQEs polled per iteration ")
	u.opt("pin_cores", "      --pin_cores=<cpu_list> ",
		"Set CPU affinity. Accepts: single (0), list (0, 1, 2), range (0-3), or mixed (0-3,8,12-15).")
	u.opt("numa_node", "      --numa_node=<numa_node_id> ", "Specify the NUMA node ID that should run the test.")
	u.opt("disable_numa", "      --disable_numa ", "Disable NUMA auto-detection and binding.")
	u.opt("dlid", "      --dlid ", " Set a Destination LID instead of getting it from the other side.")
	u.opt("dont_xchg_versions", "      --dont_xchg_versions ", " Do not exchange versions and MTU with other side ")
	u.opt("force-link", "      --force-link=<value> ", " Force the link(s) to a specific type: IB or Ethernet.")
	if sendVerb {
		u.opt("use-srq", "      --use-srq ", " Use a Shared Receive Queue. --rx-depth controls max-wr size of the SRQ ")
	}
	u.opt("ipv6", "      --ipv6 ", " Use IPv6 GID. Default is IPv4")
	u.opt("ipv6-addr", "      --ipv6-addr (SYMMETRIC)", " Use IPv6 address for parameters negotiation. Default is IPv4")
	u.opt("bind_source_ip", "      --bind_source_ip ",
		" Source IP of the interface used for connection establishment. By default taken from routing table.")
	u.printf(" --ipv6-addr flag must be used when specifying an IPv6 source IP.\n")
	if lat {
		u.opt("latency_gap", "      --latency_gap=<delay_time> ", " delay time between each post send")
	}
	u.opt("mmap", "      --mmap=file ", " Use an mmap'd file as the buffer for testing P2P transfers.")
	u.opt("mmap-offset", "      --mmap-offset=<offset> ", " Use an mmap'd file as the buffer for testing P2P transfers.")
	if bw {
		u.opt("mr_per_qp", "      --mr_per_qp ", " Create memory region for each qp.")
	}
	u.opt("odp", "      --odp ", " Use On Demand Paging instead of Memory Registration.")
	u.opt("output", "      --output=<units>", " Set verbosity output level: bandwidth , message_rate, latency ")
	if !writeVerb || !lat {
		u.opt("payload_file_path", "      --payload_file_path=<payload_txt_file_path>",
			" Set the payload by passing a txt file containing a pattern in the next form(little endian): '0xaaaaaaaa,0xbbbbbbbb,...' .")
	}
	u.printf(" Latency measurement is Average calculation \n")
	u.opt("use_old_post_send", "      --use_old_post_send", " Use old post send flow (ibv_post_send).")
	u.opt("perform_warm_up", "      --perform_warm_up",
		" Perform some iterations before start measuring in order to warming-up memory cache, valid in Atomic, Read and Write BW tests")
	u.opt("pkey_index", "      --pkey_index=<pkey index>", " PKey index to use for QP")
	if bw {
		u.opt("report-both", "      --report-both ", " Report RX & TX results separately on Bidirectional BW tests")
		u.opt("report_gbits", "      --report_gbits ",
			" Report Max/Average BW of test in Gbit/sec (instead of MiB/sec) (SYMMETRIC)")
		u.printf("        Note: MiB=2^20 byte, while Gb=10^9 bits. Use these formulas for conversion:\n")
		u.printf("        Factor=10^9/(2^20*8)=119.2; MiB=Gb_result * factor; Gb=MiB_result / factor\n")
		u.opt("report-per-port", "      --report-per-port ",
			" Report BW data on both ports when running Dualport and Duration mode")
		u.opt("reversed", "      --reversed ", " Reverse traffic direction - Server send to client (SYMMETRIC)")
		inf := " Run test forever, print results every <duration> seconds (SYMMETRIC)"
		switch {
		case sendVerb:
			inf += " [not supported by pvperf in send_bw: the endless loop of a receiving server is not implemented]"
		case writeVerb:
			inf += " [pvperf: not with -b or --write_with_imm]"
		default:
			inf += " [pvperf: not with -b]"
		}
		u.opt("run_infinitely", "      --run_infinitely ", inf)
	}
	u.opt("retry_count", "      --retry_count=<value> ", " Set retry count value in rdma_cm mode")
	u.opt("tclass", "      --tclass=<value> ", " Set the Traffic Class in GRH (if GRH is in use)")
	u.opt("flow_label", "      --flow_label=<fl0,fl1,fl2,...> ",
		" Set the flow_label in GRH for each qp in roundrobin method(if GRH is in use)")
	u.opt("use_hugepages", "      --use_hugepages ", " Use Hugepages instead of contig, memalign allocations.")
	if writeVerb || verb == perftest.Read {
		u.opt("use-null-mr", "      --use-null-mr ", " Allocate a null memory region with ibv_alloc_null_mr.")
	}
	if bw {
		u.opt("wait_destroy", "      --wait_destroy=<seconds> ",
			" Wait <seconds> before destroying allocated resources (QP/CQ/PD/MR..)")
		u.opt("disable_pcie_relaxed", "      --disable_pcie_relaxed", " Disable PCIe relaxed ordering")
		u.printf("\n Rate Limiter:\n")
		u.opt("burst_size", "      --burst_size=<size>",
			" Set the amount of messages to send in a burst when using rate limiter")
		u.opt("typical_pkt_size", "      --typical_pkt_size=<bytes>",
			" Set the size of packet to send in a burst. Only supports PP rate limiter")
		u.opt("rate_limit", "      --rate_limit=<rate>",
			" Set the maximum rate of sent packages. default unit is [Gbps]. use --rate_units to change that.")
		u.opt("rate_units", "      --rate_units=<units>",
			" [Mgp] Set the units for rate limit to MiBps (M), Gbps (g) or pps (p). default is Gbps (g).")
		u.printf("        Note (1): pps not supported with HW limit.\n")
		u.printf("        Note (2): When using PP rate_units is forced to Kbps.\n")
		u.opt("rate_limit_type", "      --rate_limit_type=<type>",
			" [HW/SW/PP] Limit the QP's by HW, PP or by SW. Disabled by default. When rate_limit is not specified HW limit is Default.")
		u.printf("        Note: in Latency under load test SW rate limit is forced\n")
	}
	if verb == perftest.Write {
		u.opt("write_with_imm", "      --write_with_imm ", " Use write-with-immediate verb instead of write (SYMMETRIC)")
	}
	if verb == perftest.Send {
		u.opt("send_with_imm", "      --send_with_imm ", " Use send-with-immediate verb instead of send")
	}
	u.printf("\n")

	u.printf(" pvperf options:\n")
	u.opt("loopback", "      --loopback ",
		" Run the server and the client in this process, for tests without a peer (give no <host>)")
	u.opt("peer-timeout", "      --peer-timeout=<duration> ",
		fmt.Sprintf(" Fail when the peer stays silent this long: a duration (500ms, 10s, 2m) or seconds (default %v)",
			bench.DefaultPeerTimeout))
	u.opt("params-size", "      --params-size=<312|320> ",
		" Size of the parameter struct sent to a perftest 6.28+ peer: 312 for a perftest built without mlx5dv (default 320; a server answers in its client's size)")
	u.opt("out_csv", "      --out_csv=<file> ",
		" Save the results in a CSV file: one row per message size and side, units in the column names")
	u.opt("out_html", "      --out_html=<file> ",
		" Save the results in an HTML report with charts (one file, viewable offline)")
	u.opt("repeat", "      --repeat=<n> ",
		" Run the test n times (a server serves n clients) and print the median, range and 95% confidence interval of each result")
	u.opt("repeat_ci", "      --repeat_ci=<percent> ",
		fmt.Sprintf(" Repeat until the confidence interval of the median is within <percent> of it (at least %d runs, at most --repeat, default %d)", bench.MinRepeats, defaultRepeatMax))
	u.opt("check_data", "      --check_data ",
		" After the test, check that the bytes received are those a pvperf peer sent (always on with --loopback; not for atomics or a payload file)")
	u.opt("perftest_output", "      --perftest_output ",
		" Print perftest's text alone: no percentiles, fits, intervals or summaries (the default under an ib_ name)")
	u.opt("interval_json", "      --interval_json=<file> ",
		" With -D, write one JSON line per second of the run to <file> (- for standard output, in place of the interval lines)")
	u.printf("\n")
	u.unsupportedRest()
}

// usageWriter prints usage lines and remembers which options it named.
type usageWriter struct {
	w     io.Writer
	tbl   *optTable
	shown map[*opt]bool
}

func (u *usageWriter) printf(format string, args ...any) {
	fmt.Fprintf(u.w, format, args...)
}

// opt prints one option's line (head and text, as perftest's two printf
// calls), marked when pvperf rejects or ignores the option.
func (u *usageWriter) opt(name, head, text string) {
	o := u.tbl.byKey[name]
	if o == nil {
		panic("cli: usage names unknown option " + name)
	}
	if u.shown == nil {
		u.shown = map[*opt]bool{}
	}
	u.shown[o] = true
	mark := ""
	switch {
	case o.unsupported != "":
		mark = " [not supported by pvperf: " + o.unsupported + "]"
	case o.noop != "":
		mark = " [no effect in pvperf: " + o.noop + "]"
	}
	fmt.Fprintf(u.w, "%s%s%s\n", head, text, mark)
}

// unsupportedRest lists, grouped by reason, the options pvperf recognises
// and rejects that belong to no test of pvperf.
func (u *usageWriter) unsupportedRest() {
	groups := map[string][]string{}
	for _, o := range u.tbl.opts {
		if !o.other {
			continue
		}
		groups[o.unsupported] = append(groups[o.unsupported], o.display())
	}
	reasons := make([]string, 0, len(groups))
	for r := range groups {
		reasons = append(reasons, r)
	}
	sort.Strings(reasons)
	u.printf(" Recognised but not supported by pvperf (the run stops with an error):\n")
	for _, r := range reasons {
		u.printf("   %s:\n", r)
		line := "     "
		for i, n := range groups[r] {
			sep := ", "
			if i == len(groups[r])-1 {
				sep = ""
			}
			if len(line)+len(n)+len(sep) > 100 {
				u.printf("%s\n", strings.TrimRight(line, " "))
				line = "     "
			}
			line += n + sep
		}
		u.printf("%s\n", line)
	}
	u.printf("\n")
}
