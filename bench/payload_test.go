package bench

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pvperf/pvperf/emu"
	"github.com/pvperf/pvperf/perftest"
)

// TestPayloadFile: the buffers hold the file's words, little-endian,
// repeated; write_lat keeps its zeroed buffer; a missing file fails.
func TestPayloadFile(t *testing.T) {
	dir := t.TempDir()
	name := filepath.Join(dir, "payload.txt")
	if err := os.WriteFile(name, []byte("0x11223344,0xaabbccdd\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	want := []byte{0x44, 0x33, 0x22, 0x11, 0xdd, 0xcc, 0xbb, 0xaa}

	cfg := testConfig(perftest.Bandwidth, perftest.Send)
	cfg.PayloadFile = name
	r, _ := runRecorded(t, cfg)
	if len(r.bufs) == 0 {
		t.Fatal("no memory registered")
	}
	for _, b := range r.bufs {
		if len(b) < len(want) || !bytes.Equal(b[:len(want)], want) {
			t.Fatalf("buffer starts % x, want % x", b[:min(len(b), 8)], want)
		}
		for i := range b {
			if b[i] != want[i%len(want)] {
				t.Fatalf("byte %d is %#x, want %#x", i, b[i], want[i%len(want)])
			}
		}
	}

	cfg = testConfig(perftest.Latency, perftest.Write)
	cfg.PayloadFile = name
	r, _ = runRecorded(t, cfg)
	for _, b := range r.bufs {
		if !bytes.Equal(b, make([]byte, len(b))) {
			t.Fatal("write_lat buffer is not zeroed")
		}
	}

	cfg = testConfig(perftest.Bandwidth, perftest.Send)
	cfg.PayloadFile = filepath.Join(dir, "missing.txt")
	var out, errOut bytes.Buffer
	_, err := Run(context.Background(), normalize(cfg), device(t, emu.ProfileUnrestricted, 2), &out, &errOut)
	if err == nil {
		t.Fatal("a missing payload file was accepted")
	}
	if msg := PerftestMessage(err); !strings.Contains(msg, "Failed to open '"+cfg.PayloadFile+"'") {
		t.Errorf("message %q", msg)
	}
}

func TestParsePayload(t *testing.T) {
	for _, c := range []struct {
		in   string
		size int
		want []byte
		err  string
	}{
		{"0x01020304", 8, []byte{4, 3, 2, 1}, ""},
		{"0x01020304,0x0a0b0c0d", 6, []byte{4, 3, 2, 1, 0xd, 0xc}, ""},
		{",,0x01020304,\n0x05060708\n", 64, []byte{4, 3, 2, 1, 8, 7, 6, 5}, ""},
		{"0x01020304\n", 8, nil, "Failed to parse DWORD number: 0"},
		{"0x01020304,0x123", 8, nil, "Failed to parse DWORD number: 1"},
		{"0x0102030g", 8, nil, "Invalid hex char in DWORD number: 0"},
		{"", 8, nil, "Payload size should be greater than 0"},
		{",,,", 8, nil, "Failed to parse DWORD number: 0"},
	} {
		got, err := parsePayload([]byte(c.in), c.size)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) || !errors.Is(err, ErrPayload) {
				t.Errorf("%q: err %v, want %q", c.in, err, c.err)
			}
			continue
		}
		if err != nil || !bytes.Equal(got, c.want) {
			t.Errorf("%q: % x, %v; want % x", c.in, got, err, c.want)
		}
	}
}

func FuzzParsePayload(f *testing.F) {
	f.Add([]byte("0x11223344,0xaabbccdd\n"), 16)
	f.Add([]byte(",0x1,"), 3)
	f.Fuzz(func(t *testing.T, b []byte, size int) {
		size = size%4096 + 1
		if size < 1 {
			size = -size + 1
		}
		p, err := parsePayload(b, size)
		if err == nil && (len(p) == 0 || len(p) > size) {
			t.Fatalf("payload of %d bytes for size %d", len(p), size)
		}
	})
}
