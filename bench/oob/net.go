package oob

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"sync"
)

// DefaultPort is perftest's default TCP port (-p).
const DefaultPort = 18515

// Addr says where the out-of-band connection goes.
type Addr struct {
	// Port is the TCP port (-p); 0 means DefaultPort. Listen accepts
	// AnyPort to let the system choose (tests).
	Port int
	// BindSourceIP is --bind_source_ip: the server listens on it, the
	// client binds its socket to it. Empty: any address.
	BindSourceIP string
	// IPv6 selects AF_INET6 (--ipv6-addr) instead of AF_INET.
	IPv6 bool
}

// AnyPort as Addr.Port makes Listen pick a free port.
const AnyPort = -1

func (a Addr) port() int {
	switch a.Port {
	case 0:
		return DefaultPort
	case AnyPort:
		return 0
	}
	return a.Port
}

func (a Addr) network() string {
	if a.IPv6 {
		return "tcp6"
	}
	return "tcp4"
}

func joinHostPort(host string, port int) string {
	return net.JoinHostPort(host, strconv.Itoa(port))
}

// resolveIP resolves host (an IP literal or a name) to one address of the
// family of a, as getaddrinfo with the family hint would.
func resolveIP(ctx context.Context, a Addr, host string) (net.IP, error) {
	network := "ip4"
	if a.IPv6 {
		network = "ip6"
	}
	ips, err := net.DefaultResolver.LookupIP(ctx, network, host)
	if err != nil {
		return nil, err
	}
	if len(ips) == 0 {
		return nil, &net.AddrError{Err: "no suitable address", Addr: host}
	}
	return ips[0], nil
}

// Listener is a server's listening socket, which accepts exactly one
// client (perftest's ethernet_server_connect).
type Listener struct {
	ln   *net.TCPListener
	addr Addr
	once sync.Once
	err  error
	keep bool // Accept leaves it open (Keep)
}

// Keep makes Accept leave the listener open, for the next client of a
// series of runs: a client that comes while the previous run ends waits
// in the backlog instead of being refused. The caller closes it.
func (l *Listener) Keep() { l.keep = true }

// Listen listens on a's port (and BindSourceIP, if set) with SO_REUSEADDR,
// AF_INET or AF_INET6. Without BindSourceIP an IPv6 listener is
// dual-stack, as perftest's AF_INET6 socket is. Failures are *NetError
// values wrapping ErrResolve or ErrListen.
//
// perftest calls listen(fd, 1); Go's listeners use the system's backlog.
// Since Accept takes one client and closes the listener, the difference is
// only visible to extra clients racing to connect (they are refused either
// way), but for a listener kept for a series of runs (Keep), where a
// client that comes early waits in the backlog for the next run.
func Listen(ctx context.Context, a Addr) (*Listener, error) {
	port := a.port()
	network, host := a.network(), ""
	switch {
	case a.BindSourceIP != "":
		ip, err := resolveIP(ctx, a, a.BindSourceIP)
		if err != nil {
			return nil, &NetError{Op: "listen", Kind: ErrResolve, Host: a.BindSourceIP, Port: port, IPv6: a.IPv6, Err: err}
		}
		host = ip.String()
	case a.IPv6:
		network, host = "tcp", "::" // dual-stack wildcard
	default:
		host = "0.0.0.0"
	}
	// Go sets SO_REUSEADDR on listening sockets.
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, network, joinHostPort(host, port))
	if err != nil {
		return nil, &NetError{Op: "listen", Kind: ErrListen, Host: host, Port: port, IPv6: a.IPv6, Err: err}
	}
	return &Listener{ln: ln.(*net.TCPListener), addr: a}, nil
}

// Addr returns the listening address (its port is the chosen one with
// AnyPort).
func (l *Listener) Addr() *net.TCPAddr { return l.ln.Addr().(*net.TCPAddr) }

// Close closes the listener; it is safe to call more than once.
func (l *Listener) Close() error {
	l.once.Do(func() {
		if err := l.ln.Close(); err != nil {
			l.err = fmt.Errorf("oob: close listener: %w", err)
		}
	})
	return l.err
}

// Accept waits for one client, closes the listener (whether or not a
// client came; not after Keep) and returns a server Conn configured by
// cfg. Only ctx limits the wait. Failures are *NetError values wrapping ErrAccept (and ctx's cause
// when ctx ended the wait).
func (l *Listener) Accept(ctx context.Context, cfg Config) (*Conn, error) {
	if !l.keep {
		defer l.Close()
	}
	stop := context.AfterFunc(ctx, func() { l.Close() })
	defer stop()
	nc, err := l.ln.Accept()
	if err != nil {
		if ctx.Err() != nil {
			// The listener closed because ctx ended: that is the reason.
			err = context.Cause(ctx)
		}
		return nil, &NetError{Op: "accept", Kind: ErrAccept, Port: l.Addr().Port, IPv6: l.addr.IPv6, Err: err}
	}
	c, err := NewConn(nc, Server, cfg)
	if err != nil {
		nc.Close()
		return nil, err
	}
	return c, nil
}

// Dial connects to host (a name or an IP address) on a's port, trying each
// of its addresses of a's family in turn, after binding to
// a.BindSourceIP if set (perftest's ethernet_client_connect), and returns a
// client Conn configured by cfg. A connection attempt that gets no answer
// gives up after cfg's timeout or MinConnectTimeout, whichever is longer
// (perftest waits for the kernel's SYN retries, about two minutes; with
// NoTimeout, so does Dial), or when ctx ends; there is no retry
// (perftest does not retry: a server that is not listening yet is an
// error). Failures are
// *NetError values wrapping ErrResolve, ErrBind or ErrConnect; their
// PerftestMessage is perftest's ("Couldn't connect to host:port\n", ...).
func Dial(ctx context.Context, host string, a Addr, cfg Config) (*Conn, error) {
	ncfg, err := cfg.normalize()
	if err != nil {
		return nil, err
	}
	port := a.port()
	ne := func(kind, err error) error {
		return &NetError{Op: "dial", Kind: kind, Host: host, Port: port, IPv6: a.IPv6, Err: err}
	}
	// A server that does not answer (an address nothing replies from)
	// is given the exchange timeout (at least MinConnectTimeout), not the
	// kernel's two minutes of SYN retries.
	var d net.Dialer
	if ncfg.Timeout > 0 {
		d.Timeout = max(ncfg.Timeout, MinConnectTimeout)
	}
	if a.BindSourceIP != "" {
		ip := net.ParseIP(a.BindSourceIP)
		if ip == nil || (ip.To4() == nil) != a.IPv6 {
			// perftest: inet_pton fails (IPv6) or inet_addr gives
			// INADDR_NONE, which bind() then refuses (IPv4).
			return nil, ne(ErrBind, fmt.Errorf("%w %q", errInvalidSource, a.BindSourceIP))
		}
		d.LocalAddr = &net.TCPAddr{IP: ip}
	}
	nc, err := d.DialContext(ctx, a.network(), joinHostPort(host, port))
	if err != nil {
		var dnsErr *net.DNSError
		var addrErr *net.AddrError
		var sysErr *os.SyscallError
		switch {
		case errors.As(err, &dnsErr), errors.As(err, &addrErr):
			return nil, ne(ErrResolve, err)
		case errors.As(err, &sysErr) && sysErr.Syscall == "bind":
			return nil, ne(ErrBind, err)
		}
		return nil, ne(ErrConnect, err)
	}
	c, err := NewConn(nc, Client, cfg)
	if err != nil {
		nc.Close()
		return nil, err
	}
	return c, nil
}
