package launch

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

func TestExpandHostlist(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []string
	}{
		{"node1", []string{"node1"}},
		{"node[01-04,07]", []string{"node01", "node02", "node03", "node04", "node07"}},
		{"gnode[10,20]", []string{"gnode10", "gnode20"}},
		{"a[1-2],b,c[08-10]", []string{"a1", "a2", "b", "c08", "c09", "c10"}},
		{"rack[1-2]-n[1-3]", []string{"rack1-n1", "rack1-n2", "rack1-n3", "rack2-n1", "rack2-n2", "rack2-n3"}},
		{"n[9-11]x", []string{"n9x", "n10x", "n11x"}},
		{"[1-2]", []string{"1", "2"}},
		{"n[007]", []string{"n007"}},
	} {
		got, err := ExpandHostlist(c.in)
		if err != nil || !slices.Equal(got, c.want) {
			t.Errorf("ExpandHostlist(%q) = %q, %v; want %q", c.in, got, err, c.want)
		}
	}
}

func TestExpandHostlistErrors(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"", "empty name"},
		{"a,,b", "empty name"},
		{"node[1-4", "'[' without ']'"},
		{"node1-4]", "']' without '['"},
		{"n[[1]]", "inside brackets"},
		{"n[]", "empty brackets"},
		{"n[4-1]", "backwards"},
		{"n[a-b]", "not a number"},
		{"n[1-]", "not a number"},
		{"n[1,,2]", "not a number"},
		{"n[0-99999999]", "more than"},
		{"a[0-999]-b[0-999]-c[0-9]", "more than"},
	} {
		got, err := ExpandHostlist(c.in)
		if !errors.Is(err, ErrHostlist) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("ExpandHostlist(%q) = %q, %v; want an error with %q", c.in, got, err, c.want)
		}
	}
}

func FuzzExpandHostlist(f *testing.F) {
	for _, s := range []string{"node[01-04,07]", "a[1-2],b", "rack[1-2]-n[1-3]", "n[", "n[4-1]"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		hosts, err := ExpandHostlist(s)
		if err != nil {
			if !errors.Is(err, ErrHostlist) {
				t.Fatalf("%q: error %v does not wrap ErrHostlist", s, err)
			}
			return
		}
		if len(hosts) == 0 || len(hosts) > MaxHosts {
			t.Fatalf("%q: %d hosts", s, len(hosts))
		}
		for _, h := range hosts {
			if h == "" || strings.ContainsAny(h, "[],") {
				t.Fatalf("%q expands to host %q", s, h)
			}
		}
	})
}
