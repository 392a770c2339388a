package cluster

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
)

func TestDecode(t *testing.T) {
	for _, c := range []struct {
		in   string
		want string // "" = valid
	}{
		{`{"type":"hello","version":1,"size":4,"member":{"rank":3,"host":"n1","addr":"10.0.0.1"}}`, ""},
		{`{"type":"hello","size":4,"member":{"rank":4}}`, "valid rank and size"},
		{`{"type":"hello","size":0,"member":{"rank":0}}`, "valid rank and size"},
		{`{"type":"hello","size":2}`, "valid rank and size"},
		{`{"type":"task","task":{"round":1,"server":true,"peer":{"rank":1},"port":18700}}`, ""},
		{`{"type":"task","task":{"round":1,"peer":{"rank":1},"port":0}}`, "a peer and a port"},
		{`{"type":"task"}`, "a peer and a port"},
		{`{"type":"ready","round":2}`, ""},
		{`{"type":"ready"}`, "ready without a round"},
		{`{"type":"outcome","outcome":{"round":1,"value":12.5}}`, ""},
		{`{"type":"outcome"}`, "outcome without a result"},
		{`{"type":"done"}`, ""},
		{`{"type":"shutdown"}`, "unknown type"},
		{`{"type":`, "malformed"},
		{`[]`, "malformed"},
	} {
		_, err := decode([]byte(c.in))
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v", c.in, err)
		case c.want != "" && (err == nil || !errors.Is(err, errMessage) || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: %v, want an error with %q", c.in, err, c.want)
		}
	}
}

func TestReader(t *testing.T) {
	var b bytes.Buffer
	for _, m := range []message{{Type: msgDone}, {Type: msgReady, Round: 3}} {
		if err := write(&b, m); err != nil {
			t.Fatal(err)
		}
	}
	b.WriteString(`{"type":"done"`) // cut short
	r := newReader(&b)
	if m, err := r.read(); err != nil || m.Type != msgDone {
		t.Errorf("first: %+v, %v", m, err)
	}
	if m, err := r.read(); err != nil || m.Type != msgReady || m.Round != 3 {
		t.Errorf("second: %+v, %v", m, err)
	}
	if _, err := r.read(); !errors.Is(err, errMessage) {
		t.Errorf("cut short: %v", err)
	}
	if _, err := newReader(strings.NewReader("")).read(); !errors.Is(err, io.EOF) {
		t.Errorf("empty: %v", err)
	}
}

func FuzzDecode(f *testing.F) {
	for _, s := range []string{`{"type":"hello","version":1,"size":4,"member":{"rank":3}}`,
		`{"type":"task","task":{"round":1,"peer":{"rank":1},"port":1}}`, `{"type":"outcome","outcome":{"round":1}}`, `{"type":"ready","round":1}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := decode(b)
		if err != nil {
			if !errors.Is(err, errMessage) {
				t.Fatalf("%q: %v does not wrap errMessage", b, err)
			}
			return
		}
		// What decode accepts, the coordinator and the ranks can use
		// without a nil dereference.
		switch m.Type {
		case msgHello:
			_ = m.Member.Rank
		case msgTask:
			_ = m.Task.Peer.Addr
		case msgOutcome:
			_ = m.Outcome.Value
		}
	})
}
