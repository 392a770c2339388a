package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"sync/atomic"
	"time"

	"github.com/pvperf/pvperf/internal/mmio"
	"github.com/pvperf/pvperf/perftest"
	"github.com/pvperf/pvperf/verbs"
)

// Data validation (--data_validation), as perftest 6.29 does it for
// write_bw and read_bw over RC.
//
// The buffer is laid out as three pattern buffers of one message each
// (filled with 0x01, 0x02 and 0x03), then the tail markers (one 64-bit
// counter per chunk of each QP), then the receive slots (a ring of
// chunksPerQP chunks of chunkOps messages per QP), then the atomic
// returns. The sender moves the pattern of cycle c (c%3) through the
// ring's slots, one message per slot; after the last message of a chunk
// it posts, chained to it, a fetch-and-add of 1 on the chunk's marker.
// RC executes the two in order, so a marker's move means its chunk's data
// is in place.
//
// WRITE: the client writes into the server's receive slots and adds to
// the server's markers; the server's validator watches its markers. A
// marker of value v says cycle v-1 finished: every byte of the chunk must
// be pattern (v-1)%3.
//
// READ: the client reads the server's pattern buffers into its own
// receive slots and adds to the server's markers (seeded with 1), the old
// value coming back into the client's atomic returns: the client's
// validator watches those, with the same meaning of a value.
//
// The validator runs beside the test, so the sender may start the next
// cycle over a chunk being checked: perftest's two allowances are kept. A
// difference in the chunk's tail that is gone on a second look is a late
// write (a retry), and one where the first differing byte and the four
// after it are another of the patterns is the next cycle's data (a race);
// neither counts as an error.

// ErrDataValidation is the error of a --data_validation run whose
// validator found wrong data, or checked none.
var ErrDataValidation = errors.New("data validation failed")

// Limits of the validation's chunks (perftest's validation_common.h).
const (
	dvMinChunkBytes   = 64 << 10
	dvMaxChunkBytes   = 8 << 20
	dvMaxChunksPerQP  = 24
	dvPatterns        = 3
	dvAtomicIDOffset  = 1000 // the atomic's wr_id: build_wr_id(i+1000, i)
	dvValidatorIdle   = 50 * time.Microsecond
	dvCompareBlockMax = 64 << 10
)

// DataValidationChunks returns perftest's validation_chunk_size (messages
// per chunk) and chunks_per_qp (chunks in each QP's ring) for messages of
// size bytes, a send queue of txDepth, numQPs QPs and the READ test or not.
func DataValidationChunks(size uint64, txDepth, numQPs int, read bool) (chunkOps uint32, chunksPerQP int) {
	td := uint32(txDepth)
	chunkOps = td
	raw := size * uint64(td)
	switch {
	case size == 0:
	case raw < dvMinChunkBytes:
		needed := uint32((dvMinChunkBytes + size - 1) / size)
		chunkOps = (needed + td - 1) / td * td
	case raw > dvMaxChunkBytes:
		target := uint32(dvMaxChunkBytes / size)
		switch {
		case target >= td:
			chunkOps = target / td * td
		case target > 0:
			chunkOps = target
		default:
			chunkOps = 1
		}
	}
	chunkBytes := size * uint64(chunkOps)
	base := 4
	switch {
	case chunkBytes < 128<<10:
		base = 12
	case chunkBytes < 512<<10:
		base = 10
	case chunkBytes < 2<<20:
		base = 8
	case chunkBytes < 8<<20:
		base = 6
	}
	switch {
	case numQPs <= 2:
		base *= 2
	case numQPs <= 4:
		base = base * 3 / 2
	}
	if read {
		base = base * 3 / 2
	}
	return chunkOps, min(base, dvMaxChunksPerQP)
}

// dvLayout is the buffer of a --data_validation run (perftest's
// compute_validation_layout): offsets from the start of the buffer.
type dvLayout struct {
	payload     uint64 // message size
	chunkOps    uint32 // messages per chunk
	chunksPerQP int
	numQPs      int
	read        bool
	markers     uint64 // numQPs*chunksPerQP counters
	slots       uint64 // numQPs rings of chunksPerQP*chunkOps messages
	returns     uint64 // atomic returns: one per chunk (READ) or per QP (WRITE)
	total       uint64
}

func align64(x uint64) uint64 { return (x + 63) &^ 63 }

func newDVLayout(cfg *Config, size int) (*dvLayout, error) {
	read := cfg.Verb == perftest.Read
	ops, cpq := DataValidationChunks(uint64(size), cfg.TxDepth, cfg.NumQPs, read)
	l := &dvLayout{payload: uint64(size), chunkOps: ops, chunksPerQP: cpq, numQPs: cfg.NumQPs, read: read}
	if size <= 0 || ops == 0 {
		return nil, errors.New("Data validation: buffer layout computation failed (overflow?)")
	}
	n := uint64(cfg.NumQPs) * uint64(cpq)
	ringBytes := l.payload * uint64(ops) * uint64(cpq)
	if ringBytes/uint64(cpq)/uint64(ops) != l.payload || ringBytes*uint64(cfg.NumQPs) > 1<<40 {
		return nil, errors.New("Data validation: buffer layout computation failed (overflow?)")
	}
	retN := uint64(cfg.NumQPs)
	if read {
		retN = n
	}
	l.markers = align64(l.payload * dvPatterns)
	l.slots = align64(l.markers + n*8)
	l.returns = align64(l.slots + ringBytes*uint64(cfg.NumQPs))
	l.total = l.returns + retN*8
	return l, nil
}

func (l *dvLayout) slotsPerQP() uint64 { return uint64(l.chunkOps) * uint64(l.chunksPerQP) }
func (l *dvLayout) chunkBytes() uint64 { return uint64(l.chunkOps) * l.payload }

// ring is the offset of QP i's receive slots.
func (l *dvLayout) ring(i int) uint64 { return l.slots + uint64(i)*l.slotsPerQP()*l.payload }

// fill writes the pattern buffers and, for READ, seeds the markers with 1
// (the first fetch-and-add then returns cycle 0's value); the rest stays
// zeroed.
func (l *dvLayout) fill(buf []byte) {
	clear(buf)
	for i := range dvPatterns {
		b := buf[uint64(i)*l.payload : uint64(i+1)*l.payload]
		for x := range b {
			b[x] = dvPattern(uint64(i))
		}
	}
	if l.read {
		for k := range uint64(l.numQPs * l.chunksPerQP) {
			o := l.markers + 8*k
			buf[o] = 1
		}
	}
}

// dvPattern is the fill byte of cycle c.
func dvPattern(c uint64) byte { return byte(1 + c%dvPatterns) }

func isDVPattern(b byte) bool { return b >= 1 && b <= dvPatterns }

// dvVAddr is what QP i's key tells the peer: READ, the pattern buffers
// (the peer reads them); WRITE, QP i's receive slots (the peer writes
// them).
func (e *endpoint) dvVAddr(i int) uint64 {
	l := e.plan.dv
	if l.read {
		return e.mr.Addr()
	}
	return e.mr.Addr() + l.ring(i)
}

// dvSender is the posting state of a validated run: on each QP the data
// work request and, after it, the fetch-and-add that ends a chunk.
type dvSender struct {
	l        *dvLayout
	base     uint64 // the buffer's address
	pair     [][2]verbs.SendWR
	dataSGE  []verbs.SGE
	atomSGE  []verbs.SGE
	remAddr  []uint64 // the peer's vaddr of each QP
	markers  uint64   // the peer's tail markers
	slot     []uint64 // the next slot of each QP's ring
	cycle    []uint64 // the ring's cycle (its pattern buffer is cycle%3)
	slotsQP  uint64
	chunkOps uint64
}

// newDVSender prepares s's work requests for a validated run: one data
// work request per QP (post lists are refused), not inline, as perftest's
// ctx_set_send_wqes_data_val_write/read prepare them.
func (e *endpoint) newDVSender(s *sender) {
	l, n := e.plan.dv, e.cfg.NumQPs
	d := &dvSender{l: l, base: e.mr.Addr(), pair: make([][2]verbs.SendWR, n),
		dataSGE: make([]verbs.SGE, n), atomSGE: make([]verbs.SGE, n),
		remAddr: make([]uint64, n), slot: make([]uint64, n), cycle: make([]uint64, n),
		markers: e.rem[0].TailMarkersVAddr, slotsQP: l.slotsPerQP(), chunkOps: uint64(l.chunkOps)}
	for i := range n {
		d.remAddr[i] = e.rem[i].VAddr
		d.dataSGE[i] = verbs.SGE{Length: uint32(l.payload), LKey: e.mr.LKey()}
		d.atomSGE[i] = verbs.SGE{Addr: d.base + l.returns + uint64(i)*8, Length: 8, LKey: e.mr.LKey()}
		w := &d.pair[i][0]
		*w = s.wrs[i][0]
		w.SGL = d.dataSGE[i : i+1 : i+1]
		w.Flags = verbs.SendSignaled
		a := &d.pair[i][1]
		*a = verbs.SendWR{ID: wrID(i+dvAtomicIDOffset, i), Opcode: verbs.OpAtomicFetchAdd, CompareAdd: 1,
			RKey: e.rem[i].RKey, SGL: d.atomSGE[i : i+1 : i+1]}
		s.wrs[i] = d.pair[i][:1:1]
		d.set(i)
	}
	s.dv = d
}

// set points QP i's data work request at its next slot.
func (d *dvSender) set(i int) {
	l, slot := d.l, d.slot[i]
	w := &d.pair[i][0]
	pat := d.cycle[i] % dvPatterns * l.payload
	if l.read {
		d.dataSGE[i].Addr = d.base + l.ring(i) + slot*l.payload
		w.RemoteAddr = d.remAddr[i] + pat
	} else {
		d.dataSGE[i].Addr = d.base + pat
		w.RemoteAddr = d.remAddr[i] + slot*l.payload
	}
}

// post posts QP i's next message, with the marker's fetch-and-add after
// it when the message ends a chunk, and moves to the next slot.
func (d *dvSender) post(qp verbs.QP, i int) error {
	slot := d.slot[i]
	wrs := d.pair[i][:1]
	if (slot+1)%d.chunkOps == 0 {
		marker := uint64(i*d.l.chunksPerQP) + slot/d.chunkOps
		a := &d.pair[i][1]
		a.RemoteAddr = d.markers + marker*8
		if d.l.read {
			d.atomSGE[i].Addr = d.base + d.l.returns + marker*8
		}
		wrs = d.pair[i][:2]
	}
	if _, err := qp.PostSend(wrs); err != nil {
		return err
	}
	if slot++; slot == d.slotsQP {
		slot = 0
		d.cycle[i]++
	}
	d.slot[i] = slot
	d.set(i)
	return nil
}

// dvResult is what a validator found (perftest's data_validation_result).
type dvResult struct {
	messages, bytes         uint64 // perftest's "chunks" are messages
	scanned, hit            uint64
	skipped, races, retries uint64
	errors                  uint64
	errQP, errChunk         int
	errOffset               uint64
	errExpected, errActual  byte
}

// dvValidator checks the chunks whose markers move, on a goroutine of its
// own, until stop.
type dvValidator struct {
	l       *dvLayout
	markers []byte // the counters it watches: tail markers or atomic returns
	slots   []byte
	last    []uint64
	pat     [dvPatterns][]byte
	quit    atomic.Bool
	done    chan struct{}
	res     dvResult
}

// startValidator starts the validator of this side's markers (WRITE's
// server, READ's client).
func (e *endpoint) startValidator() *dvValidator {
	v := newValidator(e.plan.dv, e.buf)
	go v.run()
	return v
}

// newValidator is the validator of buffer buf laid out as l.
func newValidator(l *dvLayout, buf []byte) *dvValidator {
	n := l.numQPs * l.chunksPerQP
	off := l.markers
	if l.read {
		off = l.returns
	}
	v := &dvValidator{l: l, markers: buf[off : off+uint64(n)*8], slots: buf[l.slots:l.returns],
		last: make([]uint64, n), done: make(chan struct{})}
	blk := min(l.chunkBytes(), dvCompareBlockMax)
	for i := range v.pat {
		v.pat[i] = bytes.Repeat([]byte{dvPattern(uint64(i))}, int(blk))
	}
	return v
}

func (v *dvValidator) run() {
	defer close(v.done)
	for {
		stopping := v.quit.Load()
		if !v.scan() {
			if stopping {
				return
			}
			time.Sleep(dvValidatorIdle)
		}
	}
}

// scan looks at every marker once, checks the chunks whose marker moved,
// and tells whether there were any.
func (v *dvValidator) scan() bool {
	found := false
	for m := range v.last {
		v.res.scanned++
		val := mmio.LoadUint64(v.markers[m*8:])
		if val == v.last[m] || val == 0 {
			continue
		}
		found = true
		v.res.hit++
		v.check(m, val)
	}
	return found
}

// check validates chunk m against marker value val (perftest's
// validate_one_marker).
func (v *dvValidator) check(m int, val uint64) {
	l := v.l
	if d := val - v.last[m]; d > 1 {
		v.res.skipped += d - 1
	}
	v.last[m] = val
	qp, chunk := m/l.chunksPerQP, m%l.chunksPerQP
	cb := l.chunkBytes()
	off := uint64(qp)*l.slotsPerQP()*l.payload + uint64(chunk)*cb
	data := v.slots[off : off+cb]
	want := dvPattern(val - 1)
	bad, actual := v.differs(data, want)
	v.res.messages += uint64(l.chunkOps)
	v.res.bytes += cb
	if bad < 0 {
		return
	}
	tail := max(l.payload*2, 256)
	if uint64(bad) >= cb-min(tail, cb) {
		// A late write at the chunk's end: look again once.
		again, act := v.differs(data[bad:], want)
		if again < 0 {
			v.res.retries++
			return
		}
		bad, actual = bad+again, act
	}
	if uint64(bad)+4 < cb {
		f := data[bad : bad+5]
		if a := f[0]; a != want && isDVPattern(a) && f[1] == a && f[2] == a && f[3] == a && f[4] == a {
			v.res.races++
			return
		}
		actual = f[0]
	}
	if v.res.errors == 0 {
		v.res.errQP, v.res.errChunk = qp, chunk
		v.res.errOffset = uint64(bad) % l.payload
		v.res.errExpected, v.res.errActual = want, actual
	}
	v.res.errors++
}

// differs returns the offset of the first byte of data that is not want
// (-1: none) and that byte.
func (v *dvValidator) differs(data []byte, want byte) (int, byte) {
	pat := v.pat[want-1]
	for o := 0; o < len(data); o += len(pat) {
		blk := data[o:min(o+len(pat), len(data))]
		if bytes.Equal(blk, pat[:len(blk)]) {
			continue
		}
		for x, b := range blk {
			if b != want {
				return o + x, b
			}
		}
	}
	return -1, 0
}

// stop ends the validator after a last look at every marker and returns
// what it found; it may be called again.
func (v *dvValidator) stop() dvResult {
	v.quit.Store(true)
	<-v.done
	return v.res
}

// writeDVReport prints perftest's verdict of a validation: PASSED on out,
// FAILED or the warning that nothing was validated on the error returned.
// role, when set, names the side (bidirectional runs validate on both).
func writeDVReport(out io.Writer, r dvResult, role string, debug bool, markers int) error {
	if role != "" {
		role = " (" + role + ")"
	}
	if debug {
		fmt.Fprintf(out, "\n--- Per-Validator Breakdown ---\n")
		share := 0.0
		if r.messages > 0 {
			share = 100
		}
		fmt.Fprintf(out, "  Validator[0]: %d slots (%.1f%%), %d markers owned, %d hits / %d scans", r.messages, share, markers, r.hit, r.scanned)
		if r.races > 0 || r.retries > 0 {
			fmt.Fprintf(out, ", races=%d, retries=%d", r.races, r.retries)
		}
		fmt.Fprintf(out, "\n---\n")
	}
	if r.errors > 0 {
		return fail(ErrDataValidation, fmt.Sprintf("VALIDATION: FAILED%s - %d error(s), first at QP %d, Chunk %d, Offset %d (expected 0x%02x, got 0x%02x)\n",
			role, r.errors, r.errQP, r.errChunk, r.errOffset, r.errExpected, r.errActual))
	}
	if r.messages == 0 {
		return fail(fmt.Errorf("%w: no chunk completed", ErrDataValidation), "VALIDATION: WARNING"+role+" - no data validated\n")
	}
	fmt.Fprintf(out, "VALIDATION: PASSED%s - %d chunks, %d bytes", role, r.messages, r.bytes)
	if r.races > 0 || r.retries > 0 || r.skipped > 0 {
		fmt.Fprintf(out, " [races=%d, retries=%d, skips=%d, queue_full=0, stale_work=0]", r.races, r.retries, r.skipped)
	}
	fmt.Fprintf(out, "\n")
	if debug {
		fmt.Fprintf(out, "  Markers: %d scanned, %d hit", r.scanned, r.hit)
		if r.scanned > 0 {
			fmt.Fprintf(out, " (%.4f%% hit rate)", 100*float64(r.hit)/float64(r.scanned))
		}
		fmt.Fprintf(out, "\n")
		if r.skipped > 0 {
			fmt.Fprintf(out, "  Skipped steps: %d (marker jumps > 1)\n", r.skipped)
		}
		if r.races > 0 {
			fmt.Fprintf(out, "  Race overwrites: %d (epoch guard suppressions)\n", r.races)
		}
		if r.retries > 0 {
			fmt.Fprintf(out, "  DMA stale retries: %d (tail flush resolved)\n", r.retries)
		}
	}
	return nil
}

// dvStartDelay is how long a WRITE client waits before it starts, for the
// server's validator (perftest sleeps 2 s).
const dvStartDelay = 2 * time.Second

// dvDrain is how long both sides of a bidirectional validated run wait,
// once both are done, before they stop their validators.
const dvDrain = 100 * time.Millisecond

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}
