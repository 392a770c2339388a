package cluster

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// The rendezvous protocol: newline-terminated JSON messages over one TCP
// connection from each rank to rank 0. A rank says hello (who it is);
// rank 0 answers every rank "members" once all have arrived (or "abort"),
// then, each round, sends the servers their tasks (with the peer's
// member), each client its task once its server says it is "ready"
// (listening), and reads the outcomes; when a client fails, its server is
// told to "cancel" its test. "done" ends the run.
const (
	msgHello   = "hello"
	msgMembers = "members"
	msgTask    = "task"
	msgReady   = "ready"
	msgCancel  = "cancel"
	msgOutcome = "outcome"
	msgDone    = "done"
	msgAbort   = "abort"
)

// ProtocolVersion is the version of the rendezvous protocol; ranks of
// another version are refused.
const ProtocolVersion = 1

// maxMessage bounds a message (a members list of 100,000 ranks fits).
const maxMessage = 64 << 20

// Member is what a rank tells rank 0 about itself.
type Member struct {
	Rank int    `json:"rank"`
	Host string `json:"host"`
	// Addr is the address its peers connect to when it serves a test.
	Addr   string `json:"addr"`
	Device string `json:"device,omitempty"`
}

// Task is one pair test for one rank.
type Task struct {
	Round  int  `json:"round"`
	Server bool `json:"server"`
	// Peer is the other rank of the pair, Port the server's port.
	Peer Member `json:"peer"`
	Port int    `json:"port"`
}

// Outcome is what a rank reports of its task: the test's value (its
// metric's unit), or why it failed.
type Outcome struct {
	Round int     `json:"round"`
	Value float64 `json:"value"`
	Err   string  `json:"error,omitempty"`
	// Path is how the client's device reached the server, when it says
	// (an emulated device's data path).
	Path string `json:"data_path,omitempty"`
}

// message is one message of the protocol; Type says which fields count.
type message struct {
	Type    string   `json:"type"`
	Version int      `json:"version,omitempty"`
	Size    int      `json:"size,omitempty"`
	Member  *Member  `json:"member,omitempty"`
	Round   int      `json:"round,omitempty"`
	Task    *Task    `json:"task,omitempty"`
	Outcome *Outcome `json:"outcome,omitempty"`
	Reason  string   `json:"reason,omitempty"`
	// Job is the hello's job name (Config.Job).
	Job string `json:"job,omitempty"`
}

var errMessage = errors.New("cluster: malformed message")

// reader reads messages.
type reader struct{ r *bufio.Reader }

func newReader(r io.Reader) *reader { return &reader{bufio.NewReaderSize(r, 64<<10)} }

func (r *reader) read() (message, error) {
	var line []byte
	for {
		chunk, err := r.r.ReadSlice('\n')
		line = append(line, chunk...)
		if len(line) > maxMessage {
			return message{}, fmt.Errorf("%w: longer than %d bytes", errMessage, maxMessage)
		}
		if err == nil {
			break
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if errors.Is(err, io.EOF) && len(line) > 0 {
			return message{}, fmt.Errorf("%w: cut short", errMessage)
		}
		return message{}, err
	}
	return decode(line)
}

// decode parses one message and checks that it has the fields its type
// needs.
func decode(line []byte) (message, error) {
	var m message
	if err := json.Unmarshal(line, &m); err != nil {
		return message{}, fmt.Errorf("%w: %v", errMessage, err)
	}
	switch {
	case m.Type == msgHello && (m.Member == nil || m.Size < 1 || m.Member.Rank < 0 || m.Member.Rank >= m.Size):
		return message{}, fmt.Errorf("%w: hello without a member of a valid rank and size", errMessage)
	case m.Type == msgTask && (m.Task == nil || m.Task.Port < 1 || m.Task.Port > 65535 || m.Task.Peer.Rank < 0):
		return message{}, fmt.Errorf("%w: task without a peer and a port", errMessage)
	case m.Type == msgOutcome && m.Outcome == nil:
		return message{}, fmt.Errorf("%w: outcome without a result", errMessage)
	case (m.Type == msgReady || m.Type == msgCancel) && m.Round < 1:
		return message{}, fmt.Errorf("%w: %s without a round", errMessage, m.Type)
	case m.Type == msgHello, m.Type == msgMembers, m.Type == msgTask, m.Type == msgReady, m.Type == msgCancel,
		m.Type == msgOutcome, m.Type == msgDone, m.Type == msgAbort:
		return m, nil
	}
	return message{}, fmt.Errorf("%w: unknown type %q", errMessage, m.Type)
}

// write sends one message.
func write(w io.Writer, m message) error {
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}
