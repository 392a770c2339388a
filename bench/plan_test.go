package bench

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/pvperf/pvperf/perftest"
	"github.com/pvperf/pvperf/reports"
	"github.com/pvperf/pvperf/verbs"
)

// planConfig is the configuration internal/cli gives a test by default.
func planConfig(test perftest.TestKind, verb perftest.Verb, mod func(*Config)) Config {
	c := Config{Test: test, Verb: verb, Connection: perftest.RC, GIDIndex: -1, Inline: -1, Size: 65536,
		Iters: 1000, NumQPs: 1, TxDepth: 128, RxDepth: 512, CQMod: 100, PostList: 1, RecvPostList: 1}
	if test == perftest.Latency {
		c.Size = 2
	}
	if mod != nil {
		mod(&c)
	}
	return c
}

func TestPlanDevice(t *testing.T) {
	attr := verbs.DeviceAttr{MaxInlineData: 512, MaxQPRdAtom: 16, MaxPKeys: 4}
	noInline := attr
	noInline.MaxInlineData = 0
	eth := verbs.PortAttr{ActiveMTU: verbs.MTU1024, LinkLayer: verbs.LinkEthernet}
	ib := verbs.PortAttr{ActiveMTU: verbs.MTU4096, LinkLayer: verbs.LinkInfiniBand}
	bw, lat := perftest.Bandwidth, perftest.Latency
	for _, tt := range []struct {
		name  string
		cfg   Config
		attr  verbs.DeviceAttr
		port  verbs.PortAttr
		want  plan
		notes string // stdout|stderr of every note, joined
	}{
		{"write_bw RoCE: automatic GID, no inline", planConfig(bw, perftest.Write, nil), attr, eth,
			plan{outReads: 1, mtu: verbs.MTU1024, link: verbs.LinkEthernet, gidIndex: 0, autoGID: true}, ""},
		{"write_bw -x 3 on IB", planConfig(bw, perftest.Write, func(c *Config) { c.GIDIndex = 3 }), attr, ib,
			plan{outReads: 1, mtu: verbs.MTU4096, link: verbs.LinkInfiniBand, gidIndex: 3}, ""},
		{"--force-link=IB on RoCE", planConfig(bw, perftest.Write, func(c *Config) { c.ForceLink = verbs.LinkInfiniBand }), attr, eth,
			plan{outReads: 1, mtu: verbs.MTU1024, link: verbs.LinkInfiniBand, gidIndex: -1}, ""},
		{"write_lat inline 220", planConfig(lat, perftest.Write, nil), attr, ib,
			plan{inline: 220, outReads: 1, mtu: verbs.MTU4096, link: verbs.LinkInfiniBand, gidIndex: -1}, ""},
		{"send_lat inline 236", planConfig(lat, perftest.Send, nil), attr, ib,
			plan{inline: 236, outReads: 1, mtu: verbs.MTU4096, link: verbs.LinkInfiniBand, gidIndex: -1}, ""},
		{"send_lat UD inline 188", planConfig(lat, perftest.Send, func(c *Config) { c.Connection = perftest.UD }), attr, ib,
			plan{inline: 188, outReads: 1, mtu: verbs.MTU4096, link: verbs.LinkInfiniBand, gidIndex: -1}, ""},
		{"-I above the device's limit: asked of the QP, which the device refuses", planConfig(bw, perftest.Send, func(c *Config) { c.Inline, c.InlineGiven = 1024, true }), attr, ib,
			plan{inline: 1024, outReads: 1, mtu: verbs.MTU4096, link: verbs.LinkInfiniBand, gidIndex: -1}, ""},
		{"a default above the device's limit", planConfig(lat, perftest.Send, nil), verbs.DeviceAttr{MaxInlineData: 100, MaxQPRdAtom: 16, MaxPKeys: 4}, ib,
			plan{inline: 100, outReads: 1, mtu: verbs.MTU4096, link: verbs.LinkInfiniBand, gidIndex: -1}, ""},
		{"-I on a device without inline", planConfig(bw, perftest.Send, func(c *Config) { c.Inline, c.InlineGiven = 64, true }), noInline, ib,
			plan{outReads: 1, mtu: verbs.MTU4096, link: verbs.LinkInfiniBand, gidIndex: -1},
			reports.ResultLine + "|Device not recognized to implement inline feature. Disabling it\n"},
		{"read_bw: the device's outstanding reads", planConfig(bw, perftest.Read, nil), attr, ib,
			plan{outReads: 16, mtu: verbs.MTU4096, link: verbs.LinkInfiniBand, gidIndex: -1}, ""},
		{"read_bw -o 4", planConfig(bw, perftest.Read, func(c *Config) { c.OutReads = 4 }), attr, ib,
			plan{outReads: 4, mtu: verbs.MTU4096, link: verbs.LinkInfiniBand, gidIndex: -1}, ""},
		{"atomic_bw -o 64: above the maximum", planConfig(bw, perftest.Atomic, func(c *Config) { c.OutReads = 64 }), attr, ib,
			plan{outReads: 16, mtu: verbs.MTU4096, link: verbs.LinkInfiniBand, gidIndex: -1},
			reports.ResultLine + "| Number of outstanding reads is above max = 16\n Changing to that max value\n"},
		{"--pkey_index beyond the table", planConfig(bw, perftest.Write, func(c *Config) { c.PKeyIndex = 9 }), attr, ib,
			plan{outReads: 1, mtu: verbs.MTU4096, link: verbs.LinkInfiniBand, gidIndex: -1},
			reports.ResultLine + "| Specified PKey Index, 9, greater than allowed max, 3\n Changing to 0\n"},
		{"--pkey_index within the table", planConfig(bw, perftest.Write, func(c *Config) { c.PKeyIndex = 3 }), attr, ib,
			plan{outReads: 1, pkeyIndex: 3, mtu: verbs.MTU4096, link: verbs.LinkInfiniBand, gidIndex: -1}, ""},
		{"-m 2048 below the port's", planConfig(bw, perftest.Write, func(c *Config) { c.MTU = 2048 }), attr, ib,
			plan{outReads: 1, mtu: verbs.MTU2048, link: verbs.LinkInfiniBand, gidIndex: -1}, ""},
		{"-m 4096 above the port's", planConfig(bw, perftest.Write, func(c *Config) { c.MTU = 4096 }), attr, eth,
			plan{outReads: 1, mtu: verbs.MTU1024, link: verbs.LinkEthernet, gidIndex: 0, autoGID: true},
			"Requested mtu is higher than active mtu \nChanging to active mtu - 3\n|"},
		{"-m 1000: not an MTU", planConfig(bw, perftest.Write, func(c *Config) { c.MTU = 1000 }), attr, ib,
			plan{outReads: 1, mtu: verbs.MTU4096, link: verbs.LinkInfiniBand, gidIndex: -1},
			"| Invalid MTU - 1000 \n Please choose mtu from {256,512,1024,2048,4096}\n Will run with the port active mtu - 5\n"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, notes := planDevice(&tt.cfg, &tt.attr, &tt.port, true)
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("plan\n got %+v\nwant %+v", got, tt.want)
			}
			var b []string
			for _, n := range notes {
				b = append(b, n.stdout+"|"+n.stderr)
			}
			if s := strings.Join(b, ""); s != tt.notes {
				t.Errorf("notes %q, want %q", s, tt.notes)
			}
		})
	}
}

func TestPlanPeer(t *testing.T) {
	bw, lat := perftest.Bandwidth, perftest.Latency
	for _, tt := range []struct {
		name     string
		cfg      Config
		inline   int
		mtu      verbs.MTU
		size     int
		sizes    []int
		bufSize  int
		notes    string
		err      error
		firstMsg msgPlan
	}{
		{"write_bw 64 KiB", planConfig(bw, perftest.Write, nil), 0, verbs.MTU1024, 65536, []int{65536}, 65536, "", nil,
			msgPlan{size: 65536, step: 65536, cycle: 4096, wrap: 0, recvLength: 65536}},
		{"write_bw -s 2: small messages step through the cycle", planConfig(bw, perftest.Write, func(c *Config) { c.Size = 2 }), 0, verbs.MTU1024,
			2, []int{2}, 4096, "", nil,
			msgPlan{size: 2, step: 64, cycle: 4096, wrap: 4096, small: true, stepRemote: true, listStepRemote: true, recvLength: 2, recvSmall: true}},
		{"send_bw -s 100: the remote address of a SEND does not step", planConfig(bw, perftest.Send, func(c *Config) { c.Size = 100 }), 0, verbs.MTU1024,
			100, []int{100}, 4096, "", nil,
			msgPlan{size: 100, step: 128, cycle: 4096, wrap: 4096, small: true, listStepRemote: true, recvLength: 100, recvSmall: true}},
		{"atomic_bw: atomics step the remote address in a post list", planConfig(bw, perftest.Atomic, func(c *Config) { c.Size = 8 }), 0, verbs.MTU1024,
			8, []int{8}, 4096, "", nil,
			msgPlan{size: 8, step: 64, cycle: 4096, wrap: 4096, small: true, stepRemote: true, listStepRemote: true, recvLength: 8, recvSmall: true}},
		{"send_lat inline", planConfig(lat, perftest.Send, nil), 236, verbs.MTU1024, 2, []int{2}, 4096, "", nil,
			msgPlan{size: 2, step: 64, cycle: 4096, wrap: 4096, small: true, listStepRemote: true, inline: true, recvLength: 2, recvSmall: true}},
		{"read_lat never inline", planConfig(lat, perftest.Read, nil), 236, verbs.MTU1024, 2, []int{2}, 4096, "", nil,
			msgPlan{size: 2, step: 64, cycle: 4096, wrap: 4096, small: true, stepRemote: true, listStepRemote: true, recvLength: 2, recvSmall: true}},
		{"send_bw UD: default size clipped to the MTU", planConfig(bw, perftest.Send, func(c *Config) { c.Connection = perftest.UD }), 0, verbs.MTU1024,
			1024, []int{1024}, 4096, "| Max msg size in UD is MTU 1024\n Changing to this MTU\n", nil,
			msgPlan{size: 1024, step: 1024, cycle: 4096, wrap: 4096, small: true, listStepRemote: true, recvLength: 1064, recvSmall: true}},
		{"send_bw UD -s 2048: refused", planConfig(bw, perftest.Send, func(c *Config) { c.Connection, c.Size, c.SizeGiven = perftest.UD, 2048, true }), 0, verbs.MTU1024,
			0, nil, 0, "", errUDSize, msgPlan{}},
		{"send_bw UD -a: sizes up to the MTU, buffers for 8 MiB", planConfig(bw, perftest.Send, func(c *Config) { c.Connection, c.AllSizes = perftest.UD, true }), 0, verbs.MTU1024,
			1024, []int{2, 4, 8, 16, 32, 64, 128, 256, 512, 1024}, MaxSize, "| Max msg size in UD is MTU 1024\n Changing to this MTU\n", nil,
			msgPlan{size: 2, step: 64, cycle: 4096, wrap: 4096, small: true, listStepRemote: true, recvLength: 42, recvSmall: true}},
		{"send_bw SRQ: receive length rounded up to the MTU", planConfig(bw, perftest.Send, func(c *Config) { c.Size, c.UseSRQ = 100, true }), 0, verbs.MTU1024,
			100, []int{100}, 4096, "", nil,
			msgPlan{size: 100, step: 128, cycle: 4096, wrap: 4096, small: true, listStepRemote: true, recvLength: 1024, recvSmall: true}},
		{"write_bw --write_with_imm: no receive buffer", planConfig(bw, perftest.WriteImm, func(c *Config) { c.Size = 2 }), 0, verbs.MTU1024,
			2, []int{2}, 4096, "", nil,
			msgPlan{size: 2, step: 64, cycle: 4096, wrap: 4096, small: true, stepRemote: true, listStepRemote: true, recvSmall: true}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := plan{inline: tt.inline}
			notes, err := p.planPeer(&tt.cfg, 4096, 64, tt.mtu)
			if !errors.Is(err, tt.err) {
				t.Fatalf("error %v, want %v", err, tt.err)
			}
			if err != nil {
				return
			}
			var b []string
			for _, n := range notes {
				b = append(b, n.stdout+"|"+n.stderr)
			}
			if s := strings.Join(b, ""); s != tt.notes {
				t.Errorf("notes %q, want %q", s, tt.notes)
			}
			var sizes []int
			for _, m := range p.msgs {
				sizes = append(sizes, m.size)
			}
			if p.size != tt.size || !reflect.DeepEqual(sizes, tt.sizes) || p.bufSize != tt.bufSize {
				t.Errorf("size %d, sizes %v, buffer %d; want %d, %v, %d", p.size, sizes, p.bufSize, tt.size, tt.sizes, tt.bufSize)
			}
			if p.msgs[0] != tt.firstMsg {
				t.Errorf("first message plan\n got %+v\nwant %+v", p.msgs[0], tt.firstMsg)
			}
		})
	}
}

// The plan is a value of its own: computing it leaves the configuration
// as the user gave it.
func TestPlanLeavesConfig(t *testing.T) {
	cfg := planConfig(perftest.Bandwidth, perftest.Send, func(c *Config) { c.Connection = perftest.UD; c.MTU = 9000; c.OutReads = 99 })
	before := cfg
	attr := verbs.DeviceAttr{MaxInlineData: 64, MaxQPRdAtom: 1}
	port := verbs.PortAttr{ActiveMTU: verbs.MTU1024, LinkLayer: verbs.LinkEthernet}
	p, _ := planDevice(&cfg, &attr, &port, true)
	if _, err := p.planPeer(&cfg, 4096, 64, verbs.MTU256); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(cfg, before) {
		t.Errorf("configuration changed:\n got %+v\nwant %+v", cfg, before)
	}
	if p.size != 256 {
		t.Errorf("UD size %d, want the MTU, 256", p.size)
	}
}

// TestPlanKernelInline: on the kernel devices pvperf drives, which
// perftest does not recognize, inline data is off, and perftest's message
// says so when an inline size was set: -I, or the 0 that READ and atomic
// tests set.
func TestPlanKernelInline(t *testing.T) {
	attr := verbs.DeviceAttr{MaxInlineData: 512, MaxQPRdAtom: 16, MaxPKeys: 4}
	eth := verbs.PortAttr{ActiveMTU: verbs.MTU1024, LinkLayer: verbs.LinkEthernet}
	msg := reports.ResultLine + "|Device not recognized to implement inline feature. Disabling it\n"
	for _, c := range []struct {
		name  string
		cfg   Config
		notes string
	}{
		{"send_lat", planConfig(perftest.Latency, perftest.Send, nil), ""},
		{"write_bw -I 64", planConfig(perftest.Bandwidth, perftest.Write, func(c *Config) { c.Inline, c.InlineGiven = 64, true }), msg},
		{"send_bw -I 0", planConfig(perftest.Bandwidth, perftest.Send, func(c *Config) { c.Inline, c.InlineGiven = 0, true }), msg},
		{"read_bw", planConfig(perftest.Bandwidth, perftest.Read, func(c *Config) { c.Inline = 0 }), msg},
	} {
		p, notes := planDevice(&c.cfg, &attr, &eth, false)
		var b []string
		for _, n := range notes {
			b = append(b, n.stdout+"|"+n.stderr)
		}
		if s := strings.Join(b, ""); p.inline != 0 || s != c.notes {
			t.Errorf("%s: inline %d, notes %q; want 0, %q", c.name, p.inline, s, c.notes)
		}
	}
}
