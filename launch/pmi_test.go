package launch

import (
	"bufio"
	"errors"
	"net"
	"strings"
	"testing"
	"time"
)

// scripted answers each line the client sends with the next of replies
// and records what it was sent.
func scripted(t *testing.T, replies ...string) (net.Conn, *[]string) {
	t.Helper()
	c, s := net.Pipe()
	var got []string
	go func() {
		defer s.Close()
		r := bufio.NewReader(s)
		for _, reply := range replies {
			line, err := r.ReadString('\n')
			if err != nil {
				return
			}
			got = append(got, strings.TrimSpace(line))
			if _, err := s.Write([]byte(reply + "\n")); err != nil {
				return
			}
		}
	}()
	t.Cleanup(func() { c.Close() })
	return c, &got
}

var handshake = []string{
	"cmd=response_to_init pmi_version=1 pmi_subversion=1 rc=0",
	"cmd=maxes kvsname_max=256 keylen_max=64 vallen_max=1024",
	"cmd=my_kvsname kvsname=kvs_42_0",
}

func TestPMIClient(t *testing.T) {
	conn, got := scripted(t, append(handshake,
		"cmd=put_result rc=0",
		"cmd=barrier_out",
		"cmd=get_result rc=0 value=10.0.0.1:4000",
		"cmd=finalize_ack")...)
	p, err := NewPMI(conn, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if p.KeyMax != 64 || p.ValueMax != 1024 {
		t.Errorf("maxes %d %d", p.KeyMax, p.ValueMax)
	}
	if err := p.Put("pvperf-rendezvous", "10.0.0.1:4000"); err != nil {
		t.Fatal(err)
	}
	if err := p.Barrier(5 * time.Second); err != nil {
		t.Fatal(err)
	}
	if v, err := p.Get("pvperf-rendezvous"); err != nil || v != "10.0.0.1:4000" {
		t.Fatalf("get: %q, %v", v, err)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	want := []string{"cmd=init pmi_version=1 pmi_subversion=1", "cmd=get_maxes", "cmd=get_my_kvsname",
		"cmd=put kvsname=kvs_42_0 key=pvperf-rendezvous value=10.0.0.1:4000", "cmd=barrier_in",
		"cmd=get kvsname=kvs_42_0 key=pvperf-rendezvous", "cmd=finalize"}
	if strings.Join(*got, "\n") != strings.Join(want, "\n") {
		t.Errorf("sent:\n%s\nwant:\n%s", strings.Join(*got, "\n"), strings.Join(want, "\n"))
	}
}

func TestPMIErrors(t *testing.T) {
	conn, _ := scripted(t, "cmd=response_to_init rc=-1 msg=version_mismatch")
	if _, err := NewPMI(conn, time.Second); !errors.Is(err, ErrPMI) || !strings.Contains(err.Error(), "init refused: rc=-1 version_mismatch") {
		t.Errorf("refused init: %v", err)
	}
	conn, _ = scripted(t, append(handshake, "cmd=get_result rc=1 msg=key_not_found")...)
	p, err := NewPMI(conn, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Get("nope"); !errors.Is(err, ErrPMI) || !strings.Contains(err.Error(), "key_not_found") {
		t.Errorf("get: %v", err)
	}
	if err := p.Put("a b", "c"); !errors.Is(err, ErrPMI) {
		t.Errorf("put of a key with a space: %v", err)
	}
	// A server that answers without end: refused once past the bound,
	// not read to the end.
	c3, s3 := net.Pipe()
	defer s3.Close()
	go func() {
		_, _ = bufio.NewReader(s3).ReadString('\n')
		chunk := []byte(strings.Repeat("x", 4096))
		for {
			if _, err := s3.Write(chunk); err != nil {
				return
			}
		}
	}()
	if _, err := NewPMI(c3, 10*time.Second); !errors.Is(err, ErrPMI) || !strings.Contains(err.Error(), "longer than") {
		t.Errorf("endless answer: %v", err)
	}
	c3.Close()
	// A server that does not answer: the bounded wait ends.
	c2, s2 := net.Pipe()
	defer s2.Close()
	go func() { _, _ = bufio.NewReader(s2).ReadString('\n') }()
	start := time.Now()
	if _, err := NewPMI(c2, 200*time.Millisecond); !errors.Is(err, ErrPMI) || time.Since(start) > 10*time.Second {
		t.Errorf("silent server: %v after %v", err, time.Since(start))
	}
}

func TestParsePMI(t *testing.T) {
	m, err := ParsePMI("cmd=get_result rc=0 value=\n")
	if err != nil || m["cmd"] != "get_result" || m["rc"] != "0" || m["value"] != "" {
		t.Errorf("%v, %v", m, err)
	}
	for _, bad := range []string{"", "rc=0", "cmd=x junk", "cmd= rc=0", "=1 cmd=x"} {
		if _, err := ParsePMI(bad); !errors.Is(err, ErrPMI) {
			t.Errorf("%q: %v", bad, err)
		}
	}
}

func FuzzParsePMI(f *testing.F) {
	for _, s := range []string{"cmd=maxes kvsname_max=256 keylen_max=64 vallen_max=1024", "cmd=barrier_out", "cmd=get_result rc=0 value=x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		m, err := ParsePMI(s)
		if err != nil {
			if !errors.Is(err, ErrPMI) {
				t.Fatalf("%q: %v", s, err)
			}
			return
		}
		if m["cmd"] == "" {
			t.Fatalf("%q: accepted without cmd", s)
		}
	})
}
