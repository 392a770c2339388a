package launch

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"time"
)

// ErrPMI is the error of a PMI-1 server's refusal or of a reply that does
// not parse.
var ErrPMI = errors.New("pmi")

// PMIClient is a client of a PMI-1 server over the descriptor a launcher passes
// in PMI_FD (MPICH's Hydra, Slurm's pmi2 plugin, Flux): the text protocol
// of "cmd=... key=value" lines, to share values between the ranks of a
// job through its key-value space. Its methods are not safe for
// concurrent use.
type PMIClient struct {
	conn    net.Conn
	r       *bufio.Reader
	kvs     string
	timeout time.Duration
	// ValueMax and KeyMax are the server's limits (get_maxes).
	KeyMax, ValueMax int
}

// OpenPMI speaks PMI-1 on descriptor fd: init, get_maxes and
// get_my_kvsname. Every exchange but a barrier waits at most timeout for
// the server; a barrier, as long as the slowest rank takes, at most
// barrierTimeout (Barrier's argument).
func OpenPMI(fd int, timeout time.Duration) (*PMIClient, error) {
	f := os.NewFile(uintptr(fd), "PMI_FD")
	if f == nil {
		return nil, fmt.Errorf("launch: %w: PMI_FD=%d is not a descriptor", ErrPMI, fd)
	}
	conn, err := net.FileConn(f)
	f.Close()
	if err != nil {
		root := err
		for u := errors.Unwrap(root); u != nil; u = errors.Unwrap(root) {
			root = u
		}
		return nil, fmt.Errorf("launch: %w: PMI_FD=%d is not a usable socket: %w", ErrPMI, fd, root)
	}
	return NewPMI(conn, timeout)
}

// NewPMI speaks PMI-1 on conn (see OpenPMI).
func NewPMI(conn net.Conn, timeout time.Duration) (*PMIClient, error) {
	p := &PMIClient{conn: conn, r: bufio.NewReaderSize(conn, 4096), timeout: timeout}
	if _, err := p.call("init", "response_to_init", timeout, "pmi_version", "1", "pmi_subversion", "1"); err != nil {
		conn.Close()
		return nil, err
	}
	m, err := p.call("get_maxes", "maxes", timeout)
	if err != nil {
		conn.Close()
		return nil, err
	}
	// Limits that do not parse are no limits (0).
	p.KeyMax, _ = strconv.Atoi(m["keylen_max"])
	p.ValueMax, _ = strconv.Atoi(m["vallen_max"])
	m, err = p.call("get_my_kvsname", "my_kvsname", timeout)
	if err != nil {
		conn.Close()
		return nil, err
	}
	if p.kvs = m["kvsname"]; p.kvs == "" {
		conn.Close()
		return nil, fmt.Errorf("launch: %w: get_my_kvsname: no kvsname", ErrPMI)
	}
	return p, nil
}

// Put stores value under key in the job's key-value space; the other
// ranks see it after a Barrier. Both must be printable ASCII without
// spaces or '='.
func (p *PMIClient) Put(key, value string) error {
	for _, s := range []string{key, value} {
		if !printable(s) {
			return fmt.Errorf("launch: %w: put %q=%q: not printable ASCII without spaces or '='", ErrPMI, key, value)
		}
	}
	if p.ValueMax > 0 && len(value) > p.ValueMax {
		return fmt.Errorf("launch: %w: put %s: %d bytes, the server takes at most %d", ErrPMI, key, len(value), p.ValueMax)
	}
	_, err := p.call("put", "put_result", p.timeout, "kvsname", p.kvs, "key", key, "value", value)
	return err
}

// Barrier waits until every rank has entered it, at most timeout.
func (p *PMIClient) Barrier(timeout time.Duration) error {
	_, err := p.call("barrier_in", "barrier_out", timeout)
	return err
}

// Get returns the value stored under key.
func (p *PMIClient) Get(key string) (string, error) {
	m, err := p.call("get", "get_result", p.timeout, "kvsname", p.kvs, "key", key)
	if err != nil {
		return "", err
	}
	return m["value"], nil
}

// Close says finalize and closes the descriptor.
func (p *PMIClient) Close() error {
	_, err := p.call("finalize", "finalize_ack", p.timeout)
	if cerr := p.conn.Close(); err == nil {
		err = cerr
	}
	return err
}

// call sends "cmd=cmd k=v ..." and reads the answer "cmd=want ...", whose
// rc, when present, must be 0.
func (p *PMIClient) call(cmd, want string, timeout time.Duration, kv ...string) (map[string]string, error) {
	var b strings.Builder
	b.WriteString("cmd=" + cmd)
	for i := 0; i+1 < len(kv); i += 2 {
		b.WriteString(" " + kv[i] + "=" + kv[i+1])
	}
	b.WriteByte('\n')
	_ = p.conn.SetDeadline(time.Now().Add(timeout))
	if _, err := p.conn.Write([]byte(b.String())); err != nil {
		return nil, fmt.Errorf("launch: %w: %s: %w", ErrPMI, cmd, err)
	}
	line, err := p.readLine()
	if err != nil {
		return nil, fmt.Errorf("launch: %w: %s: no answer: %w", ErrPMI, cmd, err)
	}
	m, err := ParsePMI(line)
	if err != nil {
		return nil, fmt.Errorf("launch: %s: %w", cmd, err)
	}
	if m["cmd"] != want {
		return nil, fmt.Errorf("launch: %w: %s: answered cmd=%s, want %s", ErrPMI, cmd, m["cmd"], want)
	}
	if rc, ok := m["rc"]; ok && rc != "0" {
		msg := m["msg"]
		if msg == "" {
			msg = m["errmsg"]
		}
		return nil, fmt.Errorf("launch: %w: %s refused: rc=%s %s", ErrPMI, cmd, rc, msg)
	}
	return m, nil
}

// maxPMILine bounds a PMI-1 answer: the longest a server may send
// (PMI_MAX_VALLEN 1024 and its key) is far below it.
const maxPMILine = 64 << 10

// readLine reads one answer, refusing one longer than maxPMILine without
// reading it all.
func (p *PMIClient) readLine() (string, error) {
	var line []byte
	for {
		chunk, err := p.r.ReadSlice('\n')
		line = append(line, chunk...)
		if len(line) > maxPMILine+1 {
			return "", fmt.Errorf("%w: an answer longer than %d bytes", ErrPMI, maxPMILine)
		}
		switch {
		case err == nil:
			return string(line), nil
		case !errors.Is(err, bufio.ErrBufferFull):
			return "", err
		}
	}
}

// ParsePMI parses one PMI-1 line, "cmd=name key=value ...": its fields
// (cmd included). A value may be empty; a field without '=' or a line
// without cmd is an error.
func ParsePMI(line string) (map[string]string, error) {
	line = strings.TrimRight(line, "\r\n")
	if len(line) > maxPMILine {
		return nil, fmt.Errorf("%w: a line of %d bytes", ErrPMI, len(line))
	}
	m := map[string]string{}
	for _, f := range strings.Fields(line) {
		k, v, ok := strings.Cut(f, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("%w: field %q of %q is not key=value", ErrPMI, f, line)
		}
		m[k] = v
	}
	if m["cmd"] == "" {
		return nil, fmt.Errorf("%w: no cmd in %q", ErrPMI, line)
	}
	return m, nil
}

// printable: ASCII 33 to 126 but '=' (PMI-1's values).
func printable(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < 33 || s[i] > 126 || s[i] == '=' {
			return false
		}
	}
	return true
}
