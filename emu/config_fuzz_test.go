//go:build linux

package emu

import (
	"strings"
	"testing"

	"github.com/pvperf/pvperf/verbs"
)

// FuzzParseConfig: any PVPERF_EMU value gives devices or an error, never
// a panic; the devices it gives are valid.
func FuzzParseConfig(f *testing.F) {
	for _, s := range []string{"", "profile=unrestricted", "profile=pvrdma-hw13;profile=pvrdma-hw14", "addr=10.0.0.1,transport=roce",
		"addr=::1,transport=tcp,roce=1", "mtu=4096", "addr=1.2.3.4,transport=auto;addr=fe80::1", "roce=3", ";;", "profile=",
		"addr=10.0.0.1,addr=10.0.0.2", "transport=memory", "numa=1", "gid=ffff"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		cfgs, err := ParseConfig(s)
		if err != nil {
			return
		}
		for i, c := range cfgs {
			if _, err := NewDevice("emu0", c); err != nil {
				t.Errorf("config %d of %q: parsed, but refused by NewDevice: %v", i, s, err)
			}
		}
	})
}

// TestParseConfigErrors: a setting given twice for one device is refused
// (the last one no longer wins silently), and spaces around keys and
// values are allowed, as around the settings.
func TestParseConfigErrors(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"mtu=1024,mtu=2048", "mtu given twice for one device"},
		{"profile=unrestricted, profile=pvrdma-hw13", "profile given twice"},
		{"addr=127.0.0.1,addr=127.0.0.2", "addr given twice"},
		{"profile=fast", `unknown profile "fast"`},
		{"speed=1", `unknown setting "speed"`},
	} {
		if _, err := ParseConfig(c.in); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want an error saying %q", c.in, err, c.want)
		}
	}
	cfgs, err := ParseConfig(" profile = pvrdma-hw13 , mtu = 512 ; mtu=2048")
	if err != nil || len(cfgs) != 2 || cfgs[0].Profile != ProfileHW13 || cfgs[0].MTU != verbs.MTU512 || cfgs[1].MTU != verbs.MTU2048 {
		t.Errorf("spaces around keys and values: %+v, %v", cfgs, err)
	}
}
