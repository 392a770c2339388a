package oob

import (
	"bytes"
	"errors"
	"net"
	"testing"
	"time"
)

func TestExtraRoundTrip(t *testing.T) {
	b, err := EncodeExtra([]byte(`{"a":1}`))
	if err != nil {
		t.Fatal(err)
	}
	p, err := ReadExtra(bytes.NewReader(b))
	if err != nil || string(p) != `{"a":1}` {
		t.Fatalf("%q %v", p, err)
	}
	for _, c := range []struct {
		in   string
		want error
	}{
		{"", ErrNoExtra},
		{"done\x00", ErrNoExtra},
		{"pvperf-y\x00\x00\x00\x00", ErrNoExtra},
		{"pvperf-x\x00\x10\x00\x01", ErrMalformed},
		{"pvperf-x\x00\x00\x00\x05abc", ErrMalformed},
	} {
		if _, err := ReadExtra(bytes.NewReader([]byte(c.in))); !errors.Is(err, c.want) {
			t.Errorf("%q: %v, want %v", c.in, err, c.want)
		}
	}
	if _, err := EncodeExtra(make([]byte, MaxExtra+1)); !errors.Is(err, ErrMalformed) {
		t.Errorf("oversized: %v", err)
	}
}

// TestExchangeExtra: two sides trade their messages; a side facing a peer
// that closes (perftest) gets ErrNoExtra at once; one facing a silent peer
// gets it after the wait.
func TestExchangeExtra(t *testing.T) {
	a, b := tcpPair(t)
	ca, _ := NewConn(a, Client, Config{})
	cb, _ := NewConn(b, Server, Config{})
	got := make(chan []byte, 1)
	go func() {
		p, err := cb.ExchangeExtra([]byte("server"), true, 2*time.Second)
		if err != nil {
			t.Error(err)
		}
		got <- p
	}()
	p, err := ca.ExchangeExtra([]byte("client"), true, 2*time.Second)
	if err != nil || string(p) != "server" || string(<-got) != "client" {
		t.Fatalf("%q %v", p, err)
	}
	ca.Close()
	cb.Close()

	a2, b2 := tcpPair(t)
	ca, _ = NewConn(a2, Client, Config{})
	go func() {
		var buf [64]byte
		_, _ = b2.Read(buf[:])
		b2.Close()
	}()
	if _, err := ca.ExchangeExtra([]byte("x"), true, 5*time.Second); !errors.Is(err, ErrNoExtra) {
		t.Errorf("closing peer: %v", err)
	}
	ca.Close()

	a3, b3 := tcpPair(t)
	ca, _ = NewConn(a3, Client, Config{})
	go func() {
		var buf [64]byte
		_, _ = b3.Read(buf[:])
	}()
	start := time.Now()
	if _, err := ca.ExchangeExtra([]byte("x"), true, 200*time.Millisecond); !errors.Is(err, ErrNoExtra) || time.Since(start) > 5*time.Second {
		t.Errorf("silent peer: %v after %v", err, time.Since(start))
	}
	ca.Close()
	b3.Close()
}

// tcpPair is both ends of a TCP connection on the loopback interface.
func tcpPair(t *testing.T) (net.Conn, net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	acc := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		acc <- c
	}()
	a, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	b := <-acc
	if b == nil {
		t.Fatal("accept failed")
	}
	return a, b
}

func FuzzReadExtra(f *testing.F) {
	good, _ := EncodeExtra([]byte(`[{"msg_size_bytes":2}]`))
	f.Add(good)
	f.Add([]byte("done\x00"))
	f.Add([]byte("pvperf-x\xff\xff\xff\xff"))
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := ReadExtra(bytes.NewReader(b))
		if err == nil {
			if len(p) > MaxExtra || !bytes.Equal(b[12:12+len(p)], p) {
				t.Fatalf("payload %q from %q", p, b)
			}
			if !errors.Is(err, nil) {
				t.Fatal(err)
			}
		}
	})
}
