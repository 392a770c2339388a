package verbs

import "testing"

// FuzzParseGID: any text gives a GID or an error, never a panic, and a
// GID parsed is printed back to itself.
func FuzzParseGID(f *testing.F) {
	for _, s := range []string{"fe80:0000:0000:0000:0202:c9ff:fe00:0001", "::ffff:10.0.0.1", "10.0.0.1", "::", "", "zz", "fe80::1%eth0",
		"0000:0000:0000:0000:0000:ffff:0a4f:0001:"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		g, err := ParseGID(s)
		if err != nil {
			return
		}
		h, err := ParseGID(g.String())
		if err != nil || h != g {
			t.Errorf("%q: parsed %v, printed %q, parsed back %v, %v", s, g, g.String(), h, err)
		}
	})
}
