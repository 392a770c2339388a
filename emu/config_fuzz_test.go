//go:build linux

package emu

import "testing"

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
