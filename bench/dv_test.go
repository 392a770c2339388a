package bench

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/pvperf/pvperf/bench/oob"
	"github.com/pvperf/pvperf/emu"
	"github.com/pvperf/pvperf/perftest"
	"github.com/pvperf/pvperf/reports"
)

// TestDataValidationChunks pins the chunk sizes and ring depths to
// perftest's derive_validation_chunk_size and
// derive_validation_chunks_per_qp, worked by hand for each branch.
func TestDataValidationChunks(t *testing.T) {
	cases := []struct {
		size    uint64
		tx, qps int
		read    bool
		ops     uint32
		perQP   int
	}{
		{65536, 128, 1, false, 128, 8},   // 8 MiB chunks: base 4, doubled for one QP
		{65536, 128, 1, true, 128, 12},   // READ: half as deep again
		{4096, 128, 1, true, 128, 24},    // 512 KiB: base 8, doubled, READ 1.5x
		{8, 128, 1, false, 8192, 24},     // small messages: 64 KiB chunks, capped at 24
		{1000, 100, 3, false, 100, 18},   // 100000 B: base 12, 1.5x for 3 QPs (the 64 KiB minimum is met)
		{100, 32, 8, false, 672, 12},     // 3200 B < 64 KiB: 656 messages, rounded up to 32s
		{1 << 20, 128, 1, false, 8, 8},   // 128 MiB > 8 MiB: 8 messages (under tx_depth)
		{16 << 20, 128, 1, false, 1, 8},  // a message over 8 MiB: one per chunk
		{1 << 16, 256, 5, false, 128, 4}, // 16 MiB: 8 MiB / 64 KiB = 128 < 256 messages, base 4 for 5 QPs
	}
	for _, c := range cases {
		ops, perQP := DataValidationChunks(c.size, c.tx, c.qps, c.read)
		if ops != c.ops || perQP != c.perQP {
			t.Errorf("size %d tx %d qps %d read %v: %d messages, %d chunks per QP; want %d, %d", c.size, c.tx, c.qps, c.read, ops, perQP, c.ops, c.perQP)
		}
	}
	cfg := Config{Verb: perftest.Read, TxDepth: 128, NumQPs: 1}
	l, err := newDVLayout(&cfg, 65536)
	if err != nil {
		t.Fatal(err)
	}
	// perftest 6.29 --data_validation_debug prints these for read_bw -s 65536.
	if l.markers != 196608 || l.slots != 196736 || l.returns != 196736+12*128*65536 || l.total != l.returns+12*8 {
		t.Errorf("layout %+v", *l)
	}
}

// TestValidatorCheck: the validator's verdicts on chunks laid out by
// hand: the right pattern, the next cycle's pattern over part of it (a
// race, not an error), a foreign byte (an error, with its place), and a
// marker that moved by more than one.
func TestValidatorCheck(t *testing.T) {
	l := &dvLayout{payload: 64, chunkOps: 4, chunksPerQP: 2, numQPs: 1}
	l.markers = align64(3 * 64)
	l.slots = align64(l.markers + 2*8)
	l.returns = l.slots + 2*4*64
	l.total = l.returns + 8
	buf := make([]byte, l.total)
	chunk := func(c int) []byte { return buf[l.slots+uint64(c)*256 : l.slots+uint64(c+1)*256] }
	mark := func(c int, v uint64) { binary.LittleEndian.PutUint64(buf[l.markers+uint64(c)*8:], v) }

	v := newValidator(l, buf)
	copy(chunk(0), bytes.Repeat([]byte{1}, 256))
	mark(0, 1)
	v.scan()
	if v.res.errors != 0 || v.res.messages != 4 || v.res.bytes != 256 {
		t.Fatalf("good chunk: %+v", v.res)
	}
	// Cycle 1 of chunk 1, half overwritten by cycle 2's pattern.
	copy(chunk(1), bytes.Repeat([]byte{2}, 128))
	copy(chunk(1)[128:], bytes.Repeat([]byte{3}, 128))
	mark(1, 2)
	v.scan()
	if v.res.errors != 0 || v.res.races != 1 || v.res.skipped != 1 {
		t.Fatalf("race: %+v", v.res)
	}
	// Cycle 1 of chunk 0 with a foreign byte in its second message.
	copy(chunk(0), bytes.Repeat([]byte{2}, 256))
	chunk(0)[70] = 0xee
	mark(0, 2)
	v.scan()
	r := v.res
	if r.errors != 1 || r.errQP != 0 || r.errChunk != 0 || r.errOffset != 6 || r.errExpected != 2 || r.errActual != 0xee {
		t.Fatalf("error: %+v", r)
	}
	var out bytes.Buffer
	err := writeDVReport(&out, r, "", false, 2)
	if !errors.Is(err, ErrDataValidation) || PerftestMessage(err) != "VALIDATION: FAILED - 1 error(s), first at QP 0, Chunk 0, Offset 6 (expected 0x02, got 0xee)\n" {
		t.Errorf("report: %v %q", err, PerftestMessage(err))
	}
	// Unmoved markers are not checked again.
	before := v.res.hit
	if v.scan() || v.res.hit != before {
		t.Errorf("a scan without moves found work")
	}
}

// TestDataValidation runs write_bw and read_bw with --data_validation in
// loopback, one way and both ways (-b): untouched they pass; with a byte
// of the client's (WRITE) or server's (READ) three pattern buffers
// changed, the side that validates what it sent reports the byte and the
// run fails with ErrDataValidation.
func TestDataValidation(t *testing.T) {
	dev := device(t, emu.ProfileUnrestricted, 2)
	for _, c := range []struct {
		verb perftest.Verb
		bi   bool
	}{{perftest.Write, false}, {perftest.Read, false}, {perftest.Write, true}, {perftest.Read, true}} {
		verb := c.verb
		name := verb.String()
		if c.bi {
			name += "/bidirectional"
		}
		t.Run(name, func(t *testing.T) {
			cfg := testConfig(perftest.Bandwidth, verb)
			cfg.DataValidation = true
			cfg.Bidirectional = c.bi
			cfg.Size, cfg.Iters = 4096, 5000
			run := func(spoil bool) (string, error) {
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				var out bytes.Buffer
				_, err := runOnce(ctx, normalize(cfg), dev, &out, io.Discard, func(s *session) {
					// WRITE's data leaves the client, READ's the server.
					if spoil && s.server == (verb == perftest.Read) {
						s.afterSetup = func() {
							for i := range dvPatterns {
								s.ep.buf[uint64(i)*cfg.Size+500] = 0xee
							}
						}
					}
				})
				return out.String(), err
			}
			out, err := run(false)
			want := reports.ResultLine + "VALIDATION: PASSED - "
			if c.bi {
				want = reports.ResultLine + "VALIDATION: PASSED (CLIENT) - "
			}
			if err != nil || !strings.Contains(out, want) {
				t.Fatalf("untouched: %v\n%s", err, out)
			}
			out, err = run(true)
			msg := PerftestMessage(err)
			if !errors.Is(err, ErrDataValidation) || !strings.Contains(msg, "VALIDATION: FAILED") || !strings.Contains(msg, ", Offset 500 (expected 0x0") || !strings.Contains(msg, "got 0xee)") {
				t.Errorf("spoilt: %v (%q)\n%s", err, msg, out)
			}
		})
	}
}

// TestParamsRDMACM: over rdma_cm (-R, or -z for the exchange alone) the
// parameter negotiation says use_rdma_cm ON, as perftest 6.28 and later
// send it: a peer refuses a mismatch ("use_rdma_cm mismatch"), which ended
// every -R run against perftest 6.29 before.
func TestParamsRDMACM(t *testing.T) {
	for _, c := range []struct {
		rdmaCM, cmExchange bool
		want               oob.OnOff
	}{{false, false, oob.Off}, {true, true, oob.On}, {false, true, oob.On}} {
		s := &session{cfg: Config{RdmaCM: c.rdmaCM, CMExchange: c.cmExchange, NumQPs: 1}, ep: &endpoint{}}
		p := s.params()
		b, err := p.Marshal(oob.ParamsSize)
		if err != nil {
			t.Fatal(err)
		}
		if got := oob.OnOff(binary.BigEndian.Uint32(b[60:])); got != c.want {
			t.Errorf("-R %v -z %v: use_rdma_cm %v, want %v", c.rdmaCM, c.cmExchange, got, c.want)
		}
	}
}

// TestDataValidationInterrupted: a validated run stopped in the middle
// (here while the WRITE client sends, the server's validator running)
// ends with the interruption on both sides, its validators stopped before
// the buffers go.
func TestDataValidationInterrupted(t *testing.T) {
	dev := device(t, emu.ProfileUnrestricted, 2)
	for _, verb := range []perftest.Verb{perftest.Write, perftest.Read} {
		t.Run(verb.String(), func(t *testing.T) {
			cfg := testConfig(perftest.Bandwidth, verb)
			cfg.DataValidation = true
			cfg.Size, cfg.Iters = 4096, 1<<40
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			defer cancel()
			start := time.Now()
			_, err := runOnce(ctx, normalize(cfg), dev, io.Discard, io.Discard, nil)
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("%v, want the deadline", err)
			}
			if d := time.Since(start); d > 30*time.Second {
				t.Errorf("took %s to end", d)
			}
		})
	}
}
