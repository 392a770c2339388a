package cli

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/pvperf/pvperf/bench"
	"github.com/pvperf/pvperf/perftest"
	"github.com/pvperf/pvperf/verbs"
)

// base is the configuration every test starts from.
func base(test string) bench.Config {
	spec, _ := lookupTest(test)
	return bench.Config{
		Test:         spec.tst,
		Verb:         spec.verb,
		Connection:   perftest.RC,
		Port:         18515,
		Version:      "6.29",
		PeerTimeout:  5 * time.Second,
		IBPort:       1,
		GIDIndex:     -1,
		QPTimeout:    14,
		PostList:     1,
		RecvPostList: 1,
		NumQPs:       1,
		Inline:       -1,
		JSONFile:     "perftest_out.json",
		TOS:          -1,
		RetryCount:   7,
		Extras:       true,
	}
}

// TestDefaults checks perftest's per-test defaults (perftest.md §2.2), after
// the derived adjustments, on both sides, with the lines perftest prints.
func TestDefaults(t *testing.T) {
	const (
		noPeak  = " WARNING: BW peak won't be measured in this run.\n"
		noDynam = "Disabling dynamic polling\n"
	)
	cases := []struct {
		test, args string
		edit       func(c *bench.Config)
		stdout     string
	}{
		{"send_bw", "", func(c *bench.Config) {
			c.Size, c.Iters, c.TxDepth, c.RxDepth, c.CQMod, c.NoPeak = 65536, 1000, 128, 512, 1, true
		}, noPeak + noDynam},
		{"send_bw", "host", func(c *bench.Config) {
			c.Server, c.Size, c.Iters, c.TxDepth, c.RxDepth, c.CQMod = "host", 65536, 1000, 128, 512, 1
		}, noDynam},
		{"write_bw", "", func(c *bench.Config) {
			c.Size, c.Iters, c.TxDepth, c.RxDepth, c.CQMod = 65536, 5000, 128, 1, 1
		}, ""},
		{"write_bw", "host", func(c *bench.Config) {
			c.Server, c.Size, c.Iters, c.TxDepth, c.RxDepth, c.CQMod = "host", 65536, 5000, 128, 1, 1
		}, ""},
		{"read_bw", "host", func(c *bench.Config) {
			c.Server, c.Size, c.Iters, c.TxDepth, c.RxDepth, c.CQMod, c.Inline = "host", 65536, 1000, 128, 1, 1, 0
		}, noDynam},
		{"atomic_bw", "host", func(c *bench.Config) {
			c.Server, c.Size, c.Iters, c.TxDepth, c.RxDepth, c.CQMod, c.Inline = "host", 8, 1000, 128, 1, 100, 0
			c.AtomicType = perftest.FetchAndAdd
		}, noDynam},
		{"send_lat", "host", func(c *bench.Config) {
			c.Server, c.Size, c.Iters, c.TxDepth, c.RxDepth, c.CQMod = "host", 2, 1000, 1, 512, 1
		}, noDynam},
		{"send_lat", "", func(c *bench.Config) {
			c.Size, c.Iters, c.TxDepth, c.RxDepth, c.CQMod = 2, 1000, 1, 512, 1
		}, noDynam},
		{"write_lat", "host", func(c *bench.Config) {
			c.Server, c.Size, c.Iters, c.TxDepth, c.RxDepth, c.CQMod = "host", 2, 1000, 1, 1, 1
		}, noDynam},
		{"read_lat", "host", func(c *bench.Config) {
			c.Server, c.Size, c.Iters, c.TxDepth, c.RxDepth, c.CQMod, c.Inline = "host", 2, 1000, 1, 1, 1, 0
		}, noDynam},
		{"atomic_lat", "", func(c *bench.Config) {
			c.Size, c.Iters, c.TxDepth, c.RxDepth, c.CQMod, c.Inline = 8, 1000, 1, 1, 1, 0
			c.AtomicType = perftest.FetchAndAdd
		}, noDynam},
	}
	for _, c := range cases {
		t.Run(c.test+" "+c.args, func(t *testing.T) {
			r := mustParse(t, c.test, c.args)
			want := base(c.test)
			c.edit(&want)
			want.PollBatch = 16
			want.DynamicPolling = !strings.Contains(c.stdout, noDynam)
			if !reflect.DeepEqual(r.opts, want) {
				t.Errorf("config\n%+v\nwant\n%+v", r.opts, want)
			}
			if r.stdout != c.stdout || r.stderr != "" {
				t.Errorf("stdout %q, stderr %q; want stdout %q", r.stdout, r.stderr, c.stdout)
			}
		})
	}
}

// TestAdjustments checks perftest's derived adjustments (force_dependecies,
// perftest.md §2.2): the resulting fields and the lines printed.
func TestAdjustments(t *testing.T) {
	const (
		noPeak   = " WARNING: BW peak won't be measured in this run.\n"
		noDynam  = "Disabling dynamic polling\n"
		largeMsg = RL + "Warning: Large message requested and CQ moderation enabled\n" +
			"Warning: It can lead to inaccurate results\n"
		postList = RL + "Post List requested - CQ moderation will be the size of the post list\n"
	)
	type check func(t *testing.T, o bench.Config)
	fields := func(want map[string]any) check {
		return func(t *testing.T, o bench.Config) {
			t.Helper()
			v := reflect.ValueOf(o)
			for name, w := range want {
				f := v.FieldByName(name)
				if !f.IsValid() {
					t.Fatalf("no field %s", name)
				}
				if got := f.Interface(); !reflect.DeepEqual(got, w) {
					t.Errorf("%s = %v, want %v", name, got, w)
				}
			}
		}
	}
	cases := []struct {
		test, args     string
		want           map[string]any
		stdout, stderr string
	}{
		// Depths capped by the iterations.
		{"write_bw", "-n 50 host", map[string]any{"TxDepth": 50, "CQMod": 1, "Iters": uint64(50)}, noDynam, ""},
		{"atomic_bw", "-n 50 host", map[string]any{"TxDepth": 50, "CQMod": 50}, noDynam, ""},
		{"send_bw", "-n 100 host", map[string]any{"TxDepth": 100, "RxDepth": 100}, noDynam, ""},
		{"send_bw", "-n 7 -t 200 -r 300 host", map[string]any{"TxDepth": 7, "RxDepth": 8}, noDynam, ""},
		{"write_bw", "-r 100 host", map[string]any{"RxDepth": 1}, "", ""},
		{"write_bw", "--write_with_imm host", map[string]any{"RxDepth": 512, "Verb": perftest.WriteImm}, "", ""},
		{"write_bw", "--write_with_imm", map[string]any{"RxDepth": 512, "NoPeak": true}, noPeak, ""},
		{"write_lat", "--write_with_imm -r 33", map[string]any{"RxDepth": 34, "Verb": perftest.WriteImm}, noDynam, ""},
		{"send_lat", "--send_with_imm host", map[string]any{"Verb": perftest.SendImm, "RxDepth": 512}, noDynam, ""},
		// UD and UC receive depths.
		{"send_bw", "-c UD host", map[string]any{"Connection": perftest.UD, "RxDepth": 1000, "CQMod": 100}, noDynam, ""},
		{"send_bw", "-c UC -n 20000 host", map[string]any{"Connection": perftest.UC, "RxDepth": 16000, "CQMod": 1}, "", ""},
		{"send_bw", "-c UD -n 300 host", map[string]any{"RxDepth": 300, "TxDepth": 128}, noDynam, ""},
		{"send_bw", "-c UD --use-srq -n 50 host", map[string]any{"RxDepth": 100, "TxDepth": 50, "UseSRQ": true}, noDynam, ""},
		{"send_lat", "-c UD -r 100", map[string]any{"RxDepth": 100}, noDynam, ""},
		// CQ moderation.
		{"write_bw", "-s 8192 host", map[string]any{"CQMod": 100, "Size": uint64(8192)}, "", ""},
		{"write_bw", "-s 8193 host", map[string]any{"CQMod": 1}, "", ""},
		{"write_bw", "-s 64K -Q 1 host", map[string]any{"CQMod": 1}, "", ""},
		{"write_bw", "-Q 16 host", map[string]any{"CQMod": 16}, largeMsg, ""},
		{"write_bw", "-a host", map[string]any{"CQMod": 100, "AllSizes": true, "Size": uint64(bench.MaxSize)}, "", ""},
		{"send_bw", "-e host", map[string]any{"CQMod": 100, "Events": true}, noDynam, ""},
		{"write_bw", "-t 10 -s 4 host", map[string]any{"CQMod": 10}, "", ""},
		{"send_lat", "-Q 50", map[string]any{"CQMod": 1}, noDynam, ""},
		// Post lists.
		{"write_bw", "-l 8 host", map[string]any{"PostList": 8, "CQMod": 8}, postList, ""},
		{"write_bw", "-l 8 -Q 4 -s 64 host", map[string]any{"PostList": 8, "CQMod": 4}, "", ""},
		{"write_bw", "-l 3 -D 5 host", map[string]any{"PostList": 3, "CQMod": 3}, postList + noPeak, ""},
		{"send_bw", "--recv_post_list=4 host", map[string]any{"RecvPostList": 4}, noDynam, ""},
		// Inline.
		{"read_lat", "", map[string]any{"Inline": 0}, noDynam, ""},
		{"send_lat", "-I 64", map[string]any{"Inline": 64, "InlineGiven": true}, noDynam, ""},
		{"send_lat", "-I 0", map[string]any{"Inline": 0, "InlineGiven": true}, noDynam, ""},
		{"send_bw", "-c UD -s 4096 host", map[string]any{"Size": uint64(4096), "SizeGiven": true}, noDynam, ""},
		{"send_bw", "-c UD -a host", map[string]any{"Size": uint64(bench.MaxSize), "SizeGiven": false}, noDynam, ""},
		// Peak.
		{"write_bw", "-n 20000 host", map[string]any{"NoPeak": false}, "", ""},
		{"write_bw", "-n 20001 host", map[string]any{"NoPeak": true}, noPeak, ""},
		{"write_bw", "-n 30000 -N host", map[string]any{"NoPeak": true}, "", ""},
		{"send_bw", "-b", map[string]any{"NoPeak": false, "Bidirectional": true}, noDynam, ""},
		{"send_bw", "--reversed", map[string]any{"NoPeak": false, "Reversed": true}, noDynam, ""},
		{"send_bw", "--reversed host", map[string]any{"NoPeak": true}, noPeak + noDynam, ""},
		{"send_bw", "--loopback", map[string]any{"NoPeak": false, "Loopback": true, "Server": ""}, noDynam, ""},
		{"read_bw", "", map[string]any{"NoPeak": false}, noDynam, ""},
		// Duration mode.
		{"write_bw", "-D 10 host", map[string]any{"Duration": 10, "Margin": 2, "Iters": uint64(0), "NoPeak": true}, noPeak, ""},
		{"write_bw", "-D 10 -f 4 host", map[string]any{"Duration": 10, "Margin": 4}, noPeak, ""},
		{"write_bw", "-D 1 host", map[string]any{"Duration": 1, "Margin": 0}, noPeak, ""},
		{"send_bw", "-D 5", map[string]any{"NoPeak": true}, noPeak, ""},
		{"write_lat", "-D 8 host", map[string]any{"Duration": 8, "Margin": 2, "Iters": uint64(0), "NoPeak": true}, noDynam, ""},
		{"write_bw", "-D 5 --cpu_util host", map[string]any{"CPUUtil": true}, noPeak, ""},
		{"write_bw", "--cpu_util host", map[string]any{"CPUUtil": true}, RL, " CPU Utilization works only with Duration mode.\n"},
		{"write_bw", "-f 2 host", map[string]any{"Duration": 0, "Margin": 2}, "", ""},
		// Dynamic polling.
		{"write_bw", "-n 2999 host", map[string]any{"DynamicPolling": false}, noDynam, ""},
		{"write_bw", "-n 3000 host", map[string]any{"DynamicPolling": true}, "", ""},
		{"send_bw", "-b -n 5000 host", map[string]any{"DynamicPolling": false}, noDynam, ""},
		{"send_bw", "--send_with_imm -b -n 5000 host", map[string]any{"DynamicPolling": true}, "", ""},
		{"write_bw", "--write_with_imm -b host", map[string]any{"DynamicPolling": true}, "", ""},
		{"write_bw", "--disable_dynamic_polling host", map[string]any{"DynamicPolling": false, "PollBatch": 16}, "", ""},
		{"write_bw", "--cqe_poll=32 -n 100 host", map[string]any{"DynamicPolling": false, "PollBatch": 32}, noDynam, ""},
		{"write_bw", "--cqe_poll=70000 host", map[string]any{"PollBatch": 4464}, "", ""},
		{"write_bw", "-q 2049 -n 100 host", map[string]any{"NumQPs": 2049, "PollBatch": 64}, noDynam +
			"Increasing CQE polling batch to 64\n", ""},
		{"write_bw", "-q 2049 -n 100 -s 8192 host", map[string]any{"PollBatch": 16}, noDynam, ""},
		{"write_bw", "-q 2049 -n 100 --cqe_poll=8 host", map[string]any{"PollBatch": 8}, noDynam, ""},
		// Plain values.
		{"read_bw", "-o 0x10 host", map[string]any{"OutReads": 16}, noDynam, ""},
		{"read_bw", "-o -3 host", map[string]any{"OutReads": 0}, noDynam, ""},
		{"atomic_lat", "-A CMP_AND_SWAP", map[string]any{"AtomicType": perftest.CmpAndSwap}, noDynam, ""},
		{"send_bw", "-e -X 3 host", map[string]any{"Events": true, "CompVector": 3}, noDynam, ""},
		{"write_bw", "-d emu1 -i 2 -x 3 -m 2048 -S 7 -u 300 host", map[string]any{"Device": "emu1", "IBPort": 2,
			"GIDIndex": 3, "MTU": 2048, "SL": 7, "QPTimeout": 44}, "", ""},
		{"write_bw", "--tclass=0x1ff --dlid=70000 --pkey_index=2 --flow_label=1,0x10,x host", map[string]any{
			"TClass": 255, "DLID": 4464, "PKeyIndex": 2, "FlowLabel": []int{1, 16, 0}}, "", ""},
		{"write_bw", "-w 11000.3 -y 0.5 host", map[string]any{"LimitBW": float64(float32(11000.3)), "LimitMsgRate": 0.5,
			"LimitBWSet": true}, "", ""},
		{"write_bw", "-w 0 host", map[string]any{"LimitBW": 0.0, "LimitBWSet": true}, "", ""},
		{"write_bw", "-w 10abc host", map[string]any{"LimitBW": 10.0}, "", ""},
		{"write_bw", "--report_gbits --report-both --reversed --perform_warm_up --ipv6 --ipv6-addr host",
			map[string]any{"ReportGbits": true, "ReportBoth": true, "Reversed": true, "WarmUp": true,
				"PreferIPv6": true, "IPv6Addr": true}, "", ""},
		{"write_bw", "--bind_source_ip=10.0.0.1 --out_json --out_json_file=x.json -F host", map[string]any{
			"BindSourceIP": "10.0.0.1", "JSON": true, "JSONFile": "x.json"}, "", ""},
		{"write_bw", "-a --out_csv w.csv --out_html=w.html host", map[string]any{"AllSizes": true,
			"CSVFile": "w.csv", "HTMLFile": "w.html"}, "", ""},
		{"write_lat", "-C -U -H --latency_gap=5 --output=latency", map[string]any{"Cycles": true, "ReportUnsorted": true,
			"ReportHistogram": true, "LatencyGap": 5, "Output": perftest.OutputLatency}, noDynam, ""},
		{"write_bw", "--output=message_rate host", map[string]any{"Output": perftest.OutputMessageRate}, "", ""},
		{"write_bw", "--output=bandwidth host", map[string]any{"Output": perftest.OutputBandwidth}, "", ""},
		{"write_bw", "--force-link=ethernet --wait_destroy=3 --use_old_post_send --payload_file_path=p.txt host",
			map[string]any{"ForceLink": verbs.LinkEthernet, "WaitDestroy": 3 * time.Second,
				"PayloadFile": "p.txt"}, "", ""},
		{"write_bw", "--force-link=ib host", map[string]any{"ForceLink": verbs.LinkInfiniBand}, "", ""},
		{"write_bw", "--peer-timeout=250ms host", map[string]any{"PeerTimeout": 250 * time.Millisecond}, "", ""},
		{"write_bw", "--peer-timeout 12 host", map[string]any{"PeerTimeout": 12 * time.Second}, "", ""},
		{"write_bw", "-L 64 --retry_count=3 --disable_numa --disable_pcie_relaxed host", map[string]any{}, "", ""},
	}
	for _, c := range cases {
		t.Run(c.test+" "+c.args, func(t *testing.T) {
			r := mustParse(t, c.test, c.args)
			fields(c.want)(t, r.opts)
			if r.stdout != c.stdout {
				t.Errorf("stdout\n%q\nwant\n%q", r.stdout, c.stdout)
			}
			if r.stderr != c.stderr {
				t.Errorf("stderr\n%q\nwant\n%q", r.stderr, c.stderr)
			}
		})
	}
}
