package oob

import (
	"context"
	"errors"
	"fmt"
	"net"
	"testing"
	"time"
)

func TestListenDial(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ln, err := Listen(ctx, Addr{Port: AnyPort, BindSourceIP: "127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().Port
	type res struct {
		c   *Conn
		err error
	}
	accepted := make(chan res, 1)
	go func() {
		c, err := ln.Accept(ctx, Config{})
		accepted <- res{c, err}
	}()
	cli, err := Dial(ctx, "localhost", Addr{Port: port, BindSourceIP: "127.0.0.1"}, Config{Version: "6.27"})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	a := <-accepted
	if a.err != nil {
		t.Fatal(a.err)
	}
	srv := a.c
	defer srv.Close()
	if cli.role != Client || srv.role != Server || cli.local != "6.27" || srv.local != DefaultVersion {
		t.Errorf("roles %v %v, versions %q %q", cli.role, srv.role, cli.local, srv.local)
	}
	errc := make(chan error, 1)
	go func() {
		_, err := srv.ExchangeVersion()
		errc <- err
	}()
	if v, err := cli.ExchangeVersion(); err != nil || v != "6.29" {
		t.Fatalf("client: %q, %v", v, err)
	}
	if err := <-errc; err != nil {
		t.Fatalf("server: %v", err)
	}
	if v, ok := srv.remote, srv.haveVer; !ok || v != "6.27" {
		t.Errorf("server sees %q", v)
	}
	// The listener accepted one client and is closed.
	if c, err := net.DialTimeout("tcp4", fmt.Sprintf("127.0.0.1:%d", port), time.Second); err == nil {
		c.Close()
		t.Error("second client connected")
	}
}

func TestListenIPv6(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ln, err := Listen(ctx, Addr{Port: AnyPort, IPv6: true})
	if err != nil {
		t.Skipf("no IPv6: %v", err)
	}
	go func(port int) {
		// The IPv6 wildcard listener is dual-stack, as perftest's AF_INET6 socket.
		c, err := Dial(ctx, "127.0.0.1", Addr{Port: port}, Config{})
		if err == nil {
			c.Close()
		}
	}(ln.Addr().Port)
	c, err := ln.Accept(ctx, Config{})
	if err != nil {
		t.Fatal(err)
	}
	c.Close()

	ln, err = Listen(ctx, Addr{Port: AnyPort, IPv6: true, BindSourceIP: "::1"})
	if err != nil {
		t.Skipf("no ::1: %v", err)
	}
	go func(port int) {
		c, err := Dial(ctx, "::1", Addr{Port: port, IPv6: true, BindSourceIP: "::1"}, Config{})
		if err == nil {
			c.Close()
		}
	}(ln.Addr().Port)
	c, err = ln.Accept(ctx, Config{})
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
}

func TestDialErrors(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	// A port nobody listens on.
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()

	tests := []struct {
		name string
		host string
		addr Addr
		kind error
		msg  string
	}{
		{"refused", "127.0.0.1", Addr{Port: port}, ErrConnect,
			fmt.Sprintf("Couldn't connect to 127.0.0.1:%d\n", port)},
		{"wrong family", "::1", Addr{Port: port}, ErrResolve,
			"Problem in resolving basic address and port\n"},
		{"bind", "127.0.0.1", Addr{Port: port, BindSourceIP: "192.0.2.1"}, ErrBind,
			fmt.Sprintf("Failed to bind socket\nCouldn't connect to 127.0.0.1:%d\n", port)},
		{"bad v4 source", "127.0.0.1", Addr{Port: port, BindSourceIP: "nonsense"}, ErrBind,
			fmt.Sprintf("Failed to bind socket\nCouldn't connect to 127.0.0.1:%d\n", port)},
		{"bad v6 source", "::1", Addr{Port: port, IPv6: true, BindSourceIP: "127.0.0.1"}, ErrBind,
			"Invalid IPv6 source address.\nFailed to set source address.\n"},
	}
	for _, tt := range tests {
		_, err := Dial(ctx, tt.host, tt.addr, Config{})
		var ne *NetError
		if !errors.Is(err, tt.kind) || !errors.As(err, &ne) || ne.Op != "dial" {
			t.Errorf("%s: got %v, want %v", tt.name, err, tt.kind)
			continue
		}
		if got := PerftestMessage(err); got != tt.msg {
			t.Errorf("%s: message %q, want %q", tt.name, got, tt.msg)
		}
		if tt.name == "refused" && ne.Reason() != "connection refused" {
			t.Errorf("%s: reason %q, want \"connection refused\"", tt.name, ne.Reason())
		}
	}
	if _, err := Dial(ctx, "127.0.0.1", Addr{}, Config{ParamsSize: 1}); err == nil {
		t.Error("bad config: no error")
	}
}

func TestListenErrors(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ln, err := Listen(ctx, Addr{Port: AnyPort, BindSourceIP: "127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	port := ln.Addr().Port
	_, err = Listen(ctx, Addr{Port: port, BindSourceIP: "127.0.0.1"})
	if !errors.Is(err, ErrListen) {
		t.Fatalf("port in use: %v", err)
	}
	if got, want := PerftestMessage(err), fmt.Sprintf("Couldn't listen to port %d\n", port); got != want {
		t.Errorf("message %q, want %q", got, want)
	}
	if _, err := Listen(ctx, Addr{Port: AnyPort, BindSourceIP: "::1"}); !errors.Is(err, ErrResolve) {
		t.Errorf("v6 address for a v4 listener: %v", err)
	}
}

func TestAcceptCanceled(t *testing.T) {
	ln, err := Listen(context.Background(), Addr{Port: AnyPort, BindSourceIP: "127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(50*time.Millisecond, cancel)
	_, err = ln.Accept(ctx, Config{})
	if !errors.Is(err, ErrAccept) || !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v", err)
	}
	if PerftestMessage(err) != "accept() failed\n" {
		t.Errorf("message %q", PerftestMessage(err))
	}
	if err := ln.Close(); err != nil {
		t.Errorf("Close after Accept: %v", err)
	}
}

func TestAddrDefaults(t *testing.T) {
	if (Addr{}).port() != DefaultPort || (Addr{Port: AnyPort}).port() != 0 || (Addr{Port: 7}).port() != 7 {
		t.Error("port")
	}
}
