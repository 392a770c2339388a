package cli

import (
	"errors"
	"strings"
	"testing"
)

// TestErrors checks every command line error of perftest's parser and
// force_dependecies that concerns pvperf's tests (perftest.md §2.3, §2.4):
// the exact text on each stream, and that Parse fails with a *Failure.
func TestErrors(t *testing.T) {
	cases := []struct {
		test, args     string
		stdout, stderr string
	}{
		// Connection types (change_conn_type exits by itself: no parser line).
		{"write_bw", "-c UD localhost", "", " UD connection only possible in SEND verb\n"},
		{"read_bw", "-c UD", "", " UD connection only possible in SEND verb\n"},
		{"atomic_lat", "-c UD", "", " UD connection only possible in SEND verb\n"},
		{"write_lat", "-c UD", "", " UD connection only possible in SEND verb\n"},
		{"read_bw", "-c UC", "", " UC connection not possible in READ/ATOMIC verbs\n"},
		{"atomic_bw", "-c UC", "", " UC connection not possible in READ/ATOMIC verbs\n"},
		{"send_bw", "-c rc", "", " Invalid Connection type. Please choose from {RC,UC,UD,XRC,DC,SRD}\n"},
		{"send_bw", "-c XRC", "", " -c XRC is not supported by pvperf (pvperf's verbs API has RC, UC and UD queue pairs only)\n"},
		{"write_bw", "-c DC", "", " -c DC is not supported by pvperf (DC is an mlx5 vendor transport)\n"},
		{"read_bw", "-c SRD", "", " -c SRD is not supported by pvperf (SRD is an EFA vendor transport)\n"},
		{"atomic_bw", "-c SRD", "", " SRD connection only possible in SEND/READ/WRITE/WRITE_IMM verbs\n"},

		// Values (CHECK_VALUE and friends).
		{"write_bw", "-p abc", "", " Port argument abc should be int\n" + PF},
		{"write_bw", "-p 18515x", "", " Port argument 18515x should be int\n" + PF},
		{"write_bw", "-p 08", "", " Port argument 08 should be int\n" + PF},
		{"write_bw", "-i x", "", " IB Port argument x should be uint8_t\n" + PF},
		{"write_bw", "-i 0", "", "IB Port can't be less than 1\n" + PF},
		{"write_bw", "-i 256", "", "IB Port can't be less than 1\n" + PF},
		{"write_bw", "-m 1k", "", " MTU argument 1k should be int\n" + PF},
		{"write_bw", "-n 4", "", " Iteration num should be between 5 and 4294967296\n" + PF},
		{"write_bw", "-n 4294967297", "", " Iteration num should be between 5 and 4294967296\n" + PF},
		{"write_bw", "-n -1", "", " Iteration num should be between 5 and 4294967296\n" + PF},
		{"write_bw", "-n 1e3", "", " Iteration num argument 1e3 should be uint64_t\n" + PF},
		{"write_bw", "-p 0", "", " Port should be between 1 and 65535\n" + PF},
		{"write_bw", "-p -1", "", " Port should be between 1 and 65535\n" + PF},
		{"write_bw", "-p 65536", "", " Port should be between 1 and 65535\n" + PF},
		{"write_bw", "-t 0", "", " Tx depth should be between 1 and 15000\n" + PF},
		{"write_bw", "-t 15001", "", " Tx depth should be between 1 and 15000\n" + PF},
		{"write_bw", "-u q", "", " QP Timeout argument q should be uint8_t\n" + PF},
		{"write_bw", "-S 16", "", " Only 15 Service levels\n" + PF},
		{"write_bw", "-S -1", "", " Only 15 Service levels\n" + PF},
		{"write_bw", "-x 65", "", " Gid index should be between 0 and 64\n" + PF},
		{"write_bw", "-x -1", "", " Gid index should be between 0 and 64\n" + PF},
		{"write_bw", "-q 0", "", " num of Qps should be between 1 and 16384\n" + PF},
		{"write_bw", "-q 16385", "", " num of Qps should be between 1 and 16384\n" + PF},
		{"send_bw", "-I 1025", "", " Max inline should be between 0 and 1024\n" + PF},
		{"send_bw", "-r 0", "", "  Rx depth should be between 1 and 16384\n" + PF},
		{"send_bw", "-r 16385", "", "  Rx depth should be between 1 and 16384\n" + PF},
		{"write_bw", "-Q 0", "", " CQ moderation should be between 1 and 1024\n" + PF},
		{"write_bw", "-Q 1025", "", " CQ moderation should be between 1 and 1024\n" + PF},
		{"write_bw", "-l x", "", " Send Post List size argument x should be int\n" + PF},
		{"write_bw", "-l 0", "", " Send Post List size must be positive\n" + PF},
		{"send_bw", "--recv_post_list=0", "", " Receive Post List size must be positive\n" + PF},
		{"write_bw", "-D 0", "", " Duration period must be positive\n" + PF},
		{"write_bw", "-D -3", "", " Duration period must be positive\n" + PF},
		{"write_bw", "-f -1", "", " Margin must be non-negative int\n" + PF},
		{"write_bw", "-T 256", "", " TOS should be between 0 and 255\n" + PF},
		{"write_bw", "-L 256", "", " Hop Limit should be between 0 and 255\n" + PF},
		{"send_bw", "-X 2049 -e", "", " EQN should be between 0 and 2048\n" + PF},
		{"write_bw", "-s 0", "", " Message Size should be between 1 and 2147483647\n" + PF},
		{"write_bw", "-s abc", "", " Message Size should be between 1 and 2147483647\n" + PF},
		{"write_bw", "-s 2048M", "", " Message Size should be between 1 and 2147483647\n" + PF},
		{"write_bw", "-s -1", "", " Message Size should be between 1 and 2147483647\n" + PF},
		{"write_bw", "-w -1", "", " Invalid Minimum BW Limit\n" + PF},
		{"write_bw", "-y -0.5", "", " Invalid Minimum msgRate Limit\n" + PF},
		{"write_lat", "--latency_gap=-1", "", " Latency gap time must be non-negative int\n" + PF},
		{"write_bw", "--pkey_index=a", "", " Pkey index argument a should be int\n" + PF},
		{"write_bw", "--dlid=0x1g", "", " dlid argument 0x1g should be uint16_t\n" + PF},
		{"write_bw", "--tclass=z", "", " traffic class argument z should be uint16_t\n" + PF},
		{"write_bw", "--wait_destroy=1s", "", " wait_destroy argument 1s should be uint32_t\n" + PF},
		{"write_bw", "--retry_count=-1", "", " Retry Count must be non-negative int\n" + PF},
		{"write_bw", "--repeat 4 --repeat_ci 5 host", "", " --repeat_ci needs at least 5 runs: --repeat 4 is too few\n" + PF},
		{"write_bw", "--loopback -p 20000", "", " --loopback connects over a free port of 127.0.0.1: -p, --bind_source_ip and --ipv6-addr do not apply\n" + PF},
		{"send_lat", "--loopback --bind_source_ip 127.0.0.1", "", " --loopback connects over a free port of 127.0.0.1: -p, --bind_source_ip and --ipv6-addr do not apply\n" + PF},
		{"write_bw", "-R --repeat_ci 5 host", "", " --repeat_ci cannot end the server's series over rdma_cm (-z, -R): use --repeat alone\n" + PF},
		{"send_lat", "-z --repeat_ci 5 host", "", " --repeat_ci cannot end the server's series over rdma_cm (-z, -R): use --repeat alone\n" + PF},
		{"write_bw", "--interval_json iv.json host", "", " --interval_json writes the seconds of a duration run: give -D too\n" + PF},
		{"send_lat", "--loopback --interval_json=-", "", " --interval_json writes the seconds of a duration run: give -D too\n" + PF},
		{"write_bw", "--cqe_poll=0", "", " CQE Poll should be between 1 and 65535\n" + PF},
		{"write_bw", "--cqe_poll=65536", "", " CQE Poll should be between 1 and 65535\n" + PF},
		{"write_bw", "--force-link=eth", "", "Invalid link layer value should be IB or ETHERNET.\n" + PF},
		{"write_bw", "--output=gbits", "", " Invalid verbosity level output flag. Please use bandwidth, latency, message_rate\n" + PF},
		{"atomic_bw", "-A ADD", "", " Invalid Atomic type! please choose from {CMP_AND_SWAP,FETCH_AND_ADD}\n"},

		// Options that belong to other tests (checked while parsing).
		{"write_bw", "-A CMP_AND_SWAP", "", " You are not running the atomic_lat/bw test!\n" +
			" To change the atomic action type, you must run one of the atomic tests\n" + PF},
		{"write_lat", "-b", "", " Bidirectional is only available in BW test\n" + PF},
		{"send_lat", "-N", "", " NoPeak only valid for BW tests\n" + PF},
		{"write_bw", "-C", "", " Available only on Latency tests\n" + PF},
		{"read_bw", "-H", "", " Available only on Latency tests\n" + PF},
		{"send_bw", "--report-histogram", "", " Available only on Latency tests\n" + PF},
		{"atomic_bw", "-U", "", " is Available only on Latency tests\n" + PF},
		{"send_lat", "-q 2", "", " Multiple QPs only available on bw tests\n" + PF},
		{"read_bw", "-I 10", "", " Inline feature not available on READ/Atomic verbs\n" + PF},
		{"atomic_lat", "-I 10", "", " Inline feature not available on READ/Atomic verbs\n" + PF},
		{"write_bw", "-o 4", "", " Setting Outstanding reads only available on READ verb\n" + PF},
		{"send_lat", "-o 4", "", " Setting Outstanding reads only available on READ verb\n" + PF},
		{"read_bw", "-r 2", "", " On RDMA verbs rx depth can be only 1\n" + PF},
		{"atomic_lat", "-r 4", "", " On RDMA verbs rx depth can be only 1\n" + PF},
		{"write_bw", "-X 1", "", " Events feature not available on WRITE verb\n" + PF},
		{"write_lat", "--write_with_imm -X 1 -e", "", " Events feature not available on WRITE verb\n" + PF},
		{"send_bw", "--write_with_imm", "", "Write_with_imm can only be used with write_lat and write_bw tests\n" + PF},
		{"read_lat", "--write_with_imm", "", "Write_with_imm can only be used with write_lat and write_bw tests\n" + PF},
		{"write_bw", "--send_with_imm", "", "Send_with_imm can only be used with send_lat and send_bw tests\n" + PF},

		// getopt: duplicates, operands, unknown options (usage on stdout).
		{"write_bw", "-s 8 -s 8", "", " Duplicated argument: -s \n" + PF},
		{"write_bw", "--size=8 -s 8", "", " Duplicated argument: -s \n" + PF},
		{"write_bw", "-aa", "", " Duplicated argument: -a \n" + PF},
		{"write_bw", "--report_gbits --report-gbits", "", " Duplicated argument: report_gbits \n" + PF},
		{"write_lat", "--report-histogrm --report-histogram", "", " Duplicated argument: -H \n" + PF},
		{"write_bw", "--cpu_util --cpu_u", "", " Duplicated argument: cpu_util \n" + PF},
		{"write_bw", "host1 host2", "", " Invalid Command line. Please check command rerun \n" + PF},
		{"write_bw", "-s 8 a -- b", "", " Invalid Command line. Please check command rerun \n" + PF},

		// force_dependecies, in its order.
		{"atomic_bw", "-s 16", RL + "Message size cannot be changed for Atomic tests \n", ""},
		{"atomic_lat", "-a", RL + "Message size cannot be changed for Atomic tests \n", ""},
		{"write_bw", "--use-srq", RL + " Using SRQ only avavilible in SEND / SEND_IMM tests.\n", ""},
		{"send_bw", "--use-srq -q 4 -r 2 host", RL + " Using SRQ depth should be greater than number of QPs.\n", ""},
		{"send_bw", "--data_validation", RL, " --data_validation is only supported with WRITE or READ verb\n"},
		{"atomic_bw", "--data_validation", RL, " --data_validation is only supported with WRITE or READ verb\n"},
		{"write_lat", "--data_validation", RL, " --data_validation is only supported in bandwidth tests\n"},
		{"write_bw", "--data_validation -l 2", RL, " --data_validation is incompatible with --post_list > 1\n"},
		{"write_bw", "--data_validation -c UC", RL, " --data_validation requires RC connection type\n"},
		{"write_bw", "--data_validation -a", RL, " --data_validation is incompatible with -a (run all sizes)\n"},
		{"write_bw", "--data_validation -t 16", RL, " --data_validation requires tx_depth >= 32 (use -t)\n"},
		{"write_bw", "--data_validation -n 20", RL, " --data_validation requires tx_depth >= 32 (use -t)\n"},
		{"write_lat", "-l 2", RL, "Post list is supported in BW tests only\n"},
		{"write_bw", "-l 3", RL, "Number of iterations must be a multiple of post list size\n"},
		{"write_bw", "-l 4 -Q 3", RL + "Warning: Large message requested and CQ moderation enabled\n" +
			"Warning: It can lead to inaccurate results\n" + RL, "Post list size must be a multiple of CQ moderation\n"},
		{"send_lat", "--recv_post_list=2", RL, "Receive post list is supported in BW tests only\n"},
		{"send_bw", "--recv_post_list=3 host", RL, "Number of iterations must be a multiple of receive post list size\n"},
		{"send_bw", "-D 4 -e host", " WARNING: BW peak won't be measured in this run.\n" + RL, "Duration mode doesn't work with events.\n"},
		{"send_lat", "-D 4 -a", RL, "Duration mode currently doesn't support running on all sizes.\n"},
		{"write_bw", "-T 3", " TOS only valid for rdma_cm based QP and RawEth QP \n", ""},
		{"write_bw", "-L 3", " Hop limit only valid for RawEth QP \n", ""},
		{"write_bw", "-e", RL, " Events feature not available on WRITE verb\n"},
		{"write_bw", "--output=latency", RL, " Output verbosity level for BW can be: bandwidth, message_rate\n"},
		{"read_lat", "--output=bandwidth", RL, " Output verbosity level for LAT can be: latency\n"},
		{"write_bw", "--latency_gap=3", RL, " Latency gap feature is only for latency tests\n"},
		{"write_bw", "-D 2 -f 1", " WARNING: BW peak won't be measured in this run.\n" + RL, "please check that DURATION > 2*MARGIN\n"},
		{"write_lat", "-f 3", RL, "please check that DURATION > 2*MARGIN\n"},
		{"send_bw", "-c RawEth", RL, " Invalid Command line.\n you must enter source mac by this format -B XX:XX:XX:XX:XX:XX\n"},
		{"write_lat", "-c RawEth host", RL, " Invalid Command line.\n you must enter source mac by this format -B XX:XX:XX:XX:XX:XX\n"},
		{"write_bw", "-c RawEth -a", "", "Raw Ethernet tests do not support -a / --all flag.\n"},
		{"send_bw", "-c RawEth -z", "", " RDMA CM isn't supported for Raw Ethernet tests\n"},
		{"read_lat", "-c RawEth -x 0", "", " GID index isn't supported for Raw Ethernet tests\n"},
		{"send_bw", "-X 3 host", "", " Events must be enabled to select a completion vector\n"},
		{"send_bw", "-b -D 2 --report-both", " WARNING: BW peak won't be measured in this run.\n",
			" --report-both: a bidirectional send_bw run with -D exchanges no results, so there is no remote result to report\n"},
		{"write_bw", "--write_with_imm -b -D 2 --report-both", " WARNING: BW peak won't be measured in this run.\n",
			" --report-both: a bidirectional write_bw --write_with_imm run with -D exchanges no results, so there is no remote result to report\n"},
		{"write_bw", "-l 64 -t 32 -n 1024", RL + "Post List requested - CQ moderation will be the size of the post list\n" + RL,
			" Post list size (64) is larger than the send queue depth (32): nothing could be posted (raise -t or lower -l)\n"},
		{"send_bw", "--recv_post_list=64 -r 32 -n 1024 host", RL,
			" Receive post list size (64) is larger than the receive queue depth per QP (32): no receive could be posted (raise -r or lower --recv_post_list)\n"},
		{"send_bw", "--recv_post_list=16 -r 32 -q 4 --use-srq -n 1024 host", RL,
			" Receive post list size (16) is larger than the receive queue depth per QP (8): no receive could be posted (raise -r or lower --recv_post_list)\n"},

		{"write_bw", "--data_validation --run_infinitely", RL, " --data_validation is incompatible with --run_infinitely\n"},
		{"send_lat", "--run_infinitely", RL, " run_infinitely exists only in BW tests for now.\n"},
		{"read_bw", "--run_infinitely -e", " WARNING: BW peak won't be measured in this run.\n" + RL, " run_infinitely does not support events feature yet.\n"},
		{"send_bw", "--run_infinitely -b host", " WARNING: BW peak won't be measured in this run.\n" + RL,
			" run_infinitely mode is not supported in SEND, SEND_IMM or WRITE_IMM Bidirectional BW test\n"},

		// pvperf's own options.
		{"send_bw", "--run_infinitely", " WARNING: BW peak won't be measured in this run.\n",
			" --run_infinitely runs write_bw, read_bw and atomic_bw in pvperf (the endless loop of a receiving server is not implemented)\n"},
		{"write_bw", "--run_infinitely --write_with_imm", " WARNING: BW peak won't be measured in this run.\n",
			" --run_infinitely does not go with --write_with_imm in pvperf (the endless loop of a receiving server is not implemented)\n"},
		{"write_bw", "--run_infinitely -b", " WARNING: BW peak won't be measured in this run.\n",
			" --run_infinitely runs unidirectional tests only in pvperf (-b is not implemented with it)\n"},
		{"write_bw", "--run_infinitely --out_json", " WARNING: BW peak won't be measured in this run.\n",
			" --run_infinitely prints a row per period and no result at its end: --repeat, --out_json, --out_csv, --out_html, --interval_json and the limits (-w, -y) do not go with it\n"},
		{"write_bw", "--loopback host", "", " --loopback runs the server and the client in this process: give no <host>\n" + PF},
		{"write_bw", "--peer-timeout=soon", "", " Peer timeout argument soon should be a duration (such as 500ms, 10s or 2m) or seconds\n" + PF},
		{"write_bw", "--peer-timeout=0s", "", " Peer timeout must be positive\n" + PF},
	}
	for _, c := range cases {
		t.Run(c.test+" "+c.args, func(t *testing.T) {
			r := parse(t, c.test, c.args)
			var f *Failure
			if !errors.As(r.err, &f) || !errors.Is(r.err, ErrUsage) {
				t.Fatalf("error %v, want a *Failure wrapping ErrUsage", r.err)
			}
			if r.stdout != c.stdout {
				t.Errorf("stdout\n%q\nwant\n%q", r.stdout, c.stdout)
			}
			if r.stderr != c.stderr {
				t.Errorf("stderr\n%q\nwant\n%q", r.stderr, c.stderr)
			}
			if f.Parser != strings.HasSuffix(c.stderr, PF) {
				t.Errorf("Failure.Parser = %v", f.Parser)
			}
		})
	}
}

// TestGetoptErrors checks getopt's complaints, perftest's invalid-flag
// message and the usage text that follows on stdout.
func TestGetoptErrors(t *testing.T) {
	const invalid = " Invalid Command or flag.\n Please check command line and run again.\n\n"
	cases := []struct {
		args, getopt string
	}{
		{"--foo", "write_bw: unrecognized option '--foo'\n"},
		{"--foo=3 host", "write_bw: unrecognized option '--foo=3'\n"},
		{"-Y 0x800", "write_bw: invalid option -- 'Y'\n"},
		{"-G", "write_bw: invalid option -- 'G'\n"},
		{"-aG", "write_bw: invalid option -- 'G'\n"},
		{"-s", "write_bw: option requires an argument -- 's'\n"},
		{"host -n", "write_bw: option requires an argument -- 'n'\n"},
		{"--size", "write_bw: option '--size' requires an argument\n"},
		{"--all=1", "write_bw: option '--all' doesn't allow an argument\n"},
		{"--report-g=1", "write_bw: option '--report_gbits' doesn't allow an argument\n"},
		{"--report", "write_bw: option '--report' is ambiguous; possibilities: '--report-cycles' '--report-histogrm'" +
			" '--report-unsorted' '--report-counters' '--report_gbits' '--report-both' '--report-per-port'\n"},
		{"--use_n", "write_bw: option '--use_n' is ambiguous; possibilities: '--use_neuron' '--use_neuron_dmabuf'\n"},
		{"--i=1", "write_bw: option '--i=1' is ambiguous; possibilities: '--ib-dev' '--ib-port' '--iters' '--inline_size'" +
			" '--ipv6' '--ipv6-addr'\n"},
	}
	var usage strings.Builder
	writeUsage(&usage, "write_bw", testSpecs[1], testSpecs[1].verb, options())
	for _, c := range cases {
		t.Run(c.args, func(t *testing.T) {
			r := parse(t, "write_bw", c.args)
			var f *Failure
			if !errors.As(r.err, &f) || !f.Parser {
				t.Fatalf("error %v, want a parser *Failure", r.err)
			}
			if want := c.getopt + invalid + PF; r.stderr != want {
				t.Errorf("stderr\n%q\nwant\n%q", r.stderr, want)
			}
			if r.stdout != usage.String() {
				t.Errorf("stdout is not the usage text:\n%s", r.stdout)
			}
		})
	}
}

// TestFirstErrorWins checks that options are handled in command line
// order, getopt's errors included, as perftest's loop does.
func TestFirstErrorWins(t *testing.T) {
	cases := []struct {
		args, stderr string
	}{
		{"-q 2 -q 3", " Multiple QPs only available on bw tests\n" + PF},
		{"-b --foo", " Bidirectional is only available in BW test\n" + PF},
		{"-g -b", " -g/--mcg is not supported by pvperf (" + whyMcast + ")\n" + PF},
		{"-s 0 -s 1", " Message Size should be between 1 and 2147483647\n" + PF},
	}
	for _, c := range cases {
		r := parse(t, "send_lat", c.args)
		if r.err == nil || r.stderr != c.stderr {
			t.Errorf("send_lat %s: stderr %q, want %q", c.args, r.stderr, c.stderr)
		}
	}
	// pvperf's refusals of -R's combinations.
	for _, c := range []struct{ test, args, stdout, stderr string }{
		{"send_bw", "-R -c UC", " UC is not supported in librdmacm\n", ""},
		{"send_lat", "-R -c UD", "", "-R/--rdma_cm with UD runs unidirectional bandwidth tests only"},
		{"send_bw", "-R -c UD -b", "", "-R/--rdma_cm with UD runs unidirectional bandwidth tests only"},
		{"write_bw", "--tos 3", " TOS only valid for rdma_cm based QP and RawEth QP \n", ""},
	} {
		r := parse(t, c.test, c.args)
		if r.err == nil || !strings.Contains(r.stdout, c.stdout) || !strings.Contains(r.stderr, c.stderr) {
			t.Errorf("%s %s: err %v, stdout %q, stderr %q", c.test, c.args, r.err, r.stdout, r.stderr)
		}
	}
	// -h and -V end the parse: what follows is not looked at.
	if r := parse(t, "write_bw", "-h --foo -s 0"); !errors.Is(r.err, ErrHelp) || r.stderr != "" {
		t.Errorf("-h then errors: %v, stderr %q", r.err, r.stderr)
	}
	if r := parse(t, "write_bw", "-V -Y"); !errors.Is(r.err, ErrVersion) || r.stderr != "" {
		t.Errorf("-V then errors: %v, stderr %q", r.err, r.stderr)
	}
	// An error before -h wins.
	if r := parse(t, "write_bw", "-s 0 -h"); r.stdout != "" || !strings.HasPrefix(r.stderr, " Message Size") {
		t.Errorf("error then -h: stdout %q, stderr %q", r.stdout, r.stderr)
	}
}

// TestUnsupported checks that every option pvperf recognises and does not
// implement is rejected with its reason, and is not an invalid flag.
func TestUnsupported(t *testing.T) {
	n := 0
	for _, o := range options().opts {
		if o.unsupported == "" {
			continue
		}
		n++
		for _, spelling := range spellings(o) {
			args := []string{spelling}
			if o.arg {
				args = append(args, "1")
			}
			for _, test := range []string{"send_bw", "read_lat"} {
				r := parseArgs(t, test, args)
				want := " " + o.display() + " is not supported by pvperf (" + o.unsupported + ")\n" + PF
				if r.err == nil || r.stderr != want || r.stdout != "" {
					t.Errorf("%s %v: err %v, stdout %q, stderr %q; want stderr %q", test, args, r.err, r.stdout, r.stderr, want)
				}
			}
		}
	}
	if n < 70 {
		t.Errorf("only %d unsupported options", n)
	}
}

func spellings(o *opt) []string {
	s := []string{"--" + o.long, "--" + normalizeName(o.long)}
	if o.short != 0 {
		s = append(s, "-"+string(o.short))
	}
	return s
}
