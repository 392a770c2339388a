package oob

import (
	"fmt"

	"github.com/pvperf/pvperf/perftest"
)

// KeyFormat is one of the four text forms of a key message. perftest picks
// it from the local GID index (-1: no GID) and --data_validation, and
// assumes the peer uses the same form.
type KeyFormat uint8

// Key formats.
const (
	// KeyPlain: "%04x:%04x:%06x:%06x:%08x:%016llx:%08x" (lid, out_reads,
	// qpn, psn, rkey, vaddr, srqn) + NUL, 59 bytes.
	KeyPlain KeyFormat = iota
	// KeyGID: as KeyPlain up to vaddr, then 16 × "%02x:" (the GID) and
	// "%08x:" (srqn, with a trailing colon) + NUL, 108 bytes.
	KeyGID
	// KeyPlainDV: KeyPlain with "%016llx:" tail_markers_vaddr after vaddr,
	// 76 bytes.
	KeyPlainDV
	// KeyGIDDV: KeyGID with "%016llx:" tail_markers_vaddr after vaddr,
	// 125 bytes.
	KeyGIDDV
)

// KeyFormatFor returns the key format of a side that uses a GID (RoCE, or
// -x) or not, with or without --data_validation.
func KeyFormatFor(gid, dataValidation bool) KeyFormat {
	f := KeyPlain
	if gid {
		f = KeyGID
	}
	if dataValidation {
		f += KeyPlainDV
	}
	return f
}

// HasGID reports whether the format carries the GID.
func (f KeyFormat) HasGID() bool { return f == KeyGID || f == KeyGIDDV }

// DataValidation reports whether the format carries tail_markers_vaddr.
func (f KeyFormat) DataValidation() bool { return f == KeyPlainDV || f == KeyGIDDV }

// Size returns the size of a key message in this format (KEY_MSG_SIZE*),
// or 0 for an unknown format.
func (f KeyFormat) Size() int {
	switch f {
	case KeyPlain:
		return 59
	case KeyGID:
		return 108
	case KeyPlainDV:
		return 76
	case KeyGIDDV:
		return 125
	case KeyRaw:
		return RawKeySize
	}
	return 0
}

func (f KeyFormat) String() string {
	switch f {
	case KeyPlain:
		return "plain"
	case KeyGID:
		return "gid"
	case KeyPlainDV:
		return "plain+dv"
	case KeyGIDDV:
		return "gid+dv"
	case KeyRaw:
		return "raw"
	}
	return fmt.Sprintf("KeyFormat(%d)", uint8(f))
}

// MarshalKey returns the key message of k in format f, exactly as perftest's
// ethernet_write_keys sprintf()s it, NUL included. It fails if QPN or PSN
// do not fit in 24 bits (perftest would then overflow its buffer).
func MarshalKey(k *perftest.Dest, f KeyFormat) ([]byte, error) {
	if f.Size() == 0 || f == KeyRaw {
		return nil, fmt.Errorf("oob: encode key: unknown format %d: %w", uint8(f), ErrMalformed)
	}
	if k.QPN > 0xffffff || k.PSN > 0xffffff {
		return nil, fmt.Errorf("oob: encode key: qpn %#x or psn %#x exceeds 24 bits: %w", k.QPN, k.PSN, ErrMalformed)
	}
	b := make([]byte, 0, f.Size())
	b = fmt.Appendf(b, "%04x:%04x:%06x:%06x:%08x:%016x:", k.LID, k.OutReads, k.QPN, k.PSN, k.RKey, k.VAddr)
	if f.DataValidation() {
		b = fmt.Appendf(b, "%016x:", k.TailMarkersVAddr)
	}
	if f.HasGID() {
		for _, g := range k.GID {
			b = fmt.Appendf(b, "%02x:", g)
		}
		b = fmt.Appendf(b, "%08x:", k.SRQN)
	} else {
		b = fmt.Appendf(b, "%08x", k.SRQN)
	}
	b = append(b, 0)
	if len(b) != f.Size() { // cannot happen: every field has its exact width
		return nil, fmt.Errorf("oob: encode key: %d bytes, want %d: %w", len(b), f.Size(), ErrMalformed)
	}
	return b, nil
}

// parseKey decodes a key message in format f. A message perftest writes
// has every field at exactly its printf width (the widths add up to the
// fixed size), so parseKey requires that layout: hex digits (either case)
// at the field positions and colons between them (and after srqn in the GID
// forms). The last byte, perftest's NUL terminator, is not checked. Any
// other input is an error wrapping ErrMalformed.
func parseKey(b []byte, f KeyFormat) (perftest.Dest, error) {
	var k perftest.Dest
	if f.Size() == 0 {
		return k, fmt.Errorf("unknown format %d: %w", uint8(f), ErrMalformed)
	}
	if len(b) != f.Size() {
		return k, fmt.Errorf("%d bytes, want %d: %w", len(b), f.Size(), ErrMalformed)
	}
	p := keyParser{b: b[:len(b)-1]}
	k.LID = uint16(p.field(4, true))
	k.OutReads = uint16(p.field(4, true))
	k.QPN = uint32(p.field(6, true))
	k.PSN = uint32(p.field(6, true))
	k.RKey = uint32(p.field(8, true))
	k.VAddr = p.field(16, true)
	if f.DataValidation() {
		k.TailMarkersVAddr = p.field(16, true)
	}
	if f.HasGID() {
		for i := range k.GID {
			k.GID[i] = uint8(p.field(2, true))
		}
		k.SRQN = uint32(p.field(8, true))
	} else {
		k.SRQN = uint32(p.field(8, false))
	}
	if p.err == nil && p.off != len(p.b) {
		p.fail("trailing bytes")
	}
	if p.err != nil {
		return perftest.Dest{}, fmt.Errorf("%q: %w", b, p.err)
	}
	return k, nil
}

type keyParser struct {
	b   []byte
	off int
	err error
}

func (p *keyParser) fail(what string) {
	if p.err == nil {
		p.err = fmt.Errorf("%s at offset %d: %w", what, p.off, ErrMalformed)
	}
}

// field reads width hex digits and, if colon, the ':' after them.
func (p *keyParser) field(width int, colon bool) uint64 {
	if p.err != nil {
		return 0
	}
	if p.off+width > len(p.b) {
		p.fail("short field")
		return 0
	}
	var v uint64
	for _, c := range p.b[p.off : p.off+width] {
		var d byte
		switch {
		case '0' <= c && c <= '9':
			d = c - '0'
		case 'a' <= c && c <= 'f':
			d = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			d = c - 'A' + 10
		default:
			p.fail("not a hex digit")
			return 0
		}
		v = v<<4 | uint64(d)
		p.off++
	}
	if colon {
		if p.off >= len(p.b) || p.b[p.off] != ':' {
			p.fail("missing ':'")
			return 0
		}
		p.off++
	}
	return v
}
