package oob

import (
	"bytes"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Version exchange.
const (
	// DefaultVersion is the perftest version pvperf advertises.
	DefaultVersion = "6.29"
	// VersionSize is the size of the version message: a NUL-padded string
	// (perftest's char version[MAX_VERSION]).
	VersionSize = 16
	// MinPeerVersion is the oldest peer perftest accepts
	// (check_version_compatibility).
	MinPeerVersion = 5.70
)

// Features lists the optional steps of a connection. Each happens only if
// both versions are new enough: a real perftest decides from its peer's
// version string, so the peer decides from the version this side
// advertises, and this side from the peer's.
type Features struct {
	// SysData: page size and cache line size are exchanged (>= 5.32).
	SysData bool
	// MTU: the MTU is exchanged (>= 5.1).
	MTU bool
	// MTUSize is the size of the MTU message: 2 (>= 5.31) or 4.
	MTUSize int
	// ReportItersSize is the size of the iterations field of the BW
	// report: 8 (>= 5.33) or 4.
	ReportItersSize int
	// Negotiate: the parameter-negotiation struct is exchanged (>= 6.28).
	Negotiate bool
	// SendDone: this side writes "done\0" after the close handshake, as
	// perftest did before 6.17 (local version only: the peer never reads it).
	SendDone bool
}

// FeaturesFor returns the features of a connection between a side
// advertising version local and a peer advertising remote, both as
// [ParseVersion] returns them.
//
// perftest compares some versions as C doubles and some after a conversion
// to float (check_mtu, xchg_bw_reports); the float comparisons make "5.1",
// "5.31" and "5.33" count as older than themselves. FeaturesFor does the
// same. Versions that matter in practice (>= 5.70) are unaffected, and NaN
// (atof("nan")) passes perftest's compatibility check but enables nothing.
func FeaturesFor(local, remote float64) Features {
	l, r := gatesOf(local), gatesOf(remote)
	f := Features{
		SysData:         l.sysData && r.sysData,
		MTU:             l.mtu && r.mtu,
		MTUSize:         4,
		ReportItersSize: 4,
		Negotiate:       l.negotiate && r.negotiate,
		SendDone:        local < 6.17,
	}
	if l.mtu2 && r.mtu2 {
		f.MTUSize = 2
	}
	if l.iters8 && r.iters8 {
		f.ReportItersSize = 8
	}
	return f
}

type gates struct{ sysData, mtu, mtu2, iters8, negotiate bool }

func gatesOf(v float64) gates {
	f := float64(float32(v)) // check_mtu's "float rem_vers", xchg_bw_reports' "float remote_version"
	return gates{
		sysData:   v >= 5.32,
		mtu:       f >= 5.1,
		mtu2:      f >= 5.31,
		iters8:    f >= 5.33,
		negotiate: v >= 6.28,
	}
}

// encodeVersion returns the 16-byte version message for v.
func encodeVersion(v string) ([VersionSize]byte, error) {
	var b [VersionSize]byte
	if v == "" || len(v) >= VersionSize || strings.IndexByte(v, 0) >= 0 {
		return b, fmt.Errorf("version %q: must be 1 to %d bytes without NUL: %w", v, VersionSize-1, ErrMalformed)
	}
	copy(b[:], v)
	return b, nil
}

// versionString returns the string in a version message: the bytes up to
// the first NUL (all of them if there is none).
func versionString(b []byte) string {
	if i := bytes.IndexByte(b, 0); i >= 0 {
		b = b[:i]
	}
	return string(b)
}

// ParseVersion returns the value of a version string as perftest computes
// it: C's atof. Leading white space is skipped and the longest prefix that
// is a floating-point number is converted (decimal, hexadecimal, "inf",
// "infinity", "nan"); a string with no such prefix is 0. The string ends at
// its first NUL, if any.
func ParseVersion(s string) float64 {
	if i := strings.IndexByte(s, 0); i >= 0 {
		s = s[:i]
	}
	i := 0
	for i < len(s) && isCSpace(s[i]) {
		i++
	}
	s = s[i:]
	neg := false
	i = 0
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		neg = s[i] == '-'
		i++
	}
	rest := s[i:]
	sign := 1.0
	if neg {
		sign = -1
	}
	switch {
	case hasPrefixFold(rest, "infinity"), hasPrefixFold(rest, "inf"):
		return math.Inf(int(sign))
	case hasPrefixFold(rest, "nan"):
		return math.NaN()
	case len(rest) >= 2 && rest[0] == '0' && (rest[1]|0x20) == 'x':
		if v, ok := parseHexFloat(rest[2:]); ok {
			return sign * v
		}
		return sign * 0 // "0x" without digits: strtod takes the "0"
	}
	n := scanDecimal(rest)
	if n == 0 {
		return 0
	}
	v, err := strconv.ParseFloat(rest[:n], 64)
	if err != nil && !isRangeErr(err) {
		return 0 // cannot happen: scanDecimal accepts only valid syntax
	}
	return sign * v // ±Inf or 0 on overflow/underflow, as strtod
}

func isRangeErr(err error) bool {
	ne, ok := err.(*strconv.NumError)
	return ok && ne.Err == strconv.ErrRange
}

func isCSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r'
}

func hasPrefixFold(s, prefix string) bool {
	return len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix)
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

func isHexDigit(c byte) bool {
	return isDigit(c) || ('a' <= c|0x20 && c|0x20 <= 'f')
}

// scanDecimal returns the length of the longest prefix of s that strtod
// reads as an unsigned decimal number (0 if none).
func scanDecimal(s string) int {
	i, digits := 0, 0
	for i < len(s) && isDigit(s[i]) {
		i++
		digits++
	}
	if i < len(s) && s[i] == '.' {
		i++
		for i < len(s) && isDigit(s[i]) {
			i++
			digits++
		}
	}
	if digits == 0 {
		return 0
	}
	if i < len(s) && (s[i]|0x20) == 'e' {
		j := i + 1
		if j < len(s) && (s[j] == '+' || s[j] == '-') {
			j++
		}
		if j < len(s) && isDigit(s[j]) {
			for j < len(s) && isDigit(s[j]) {
				j++
			}
			i = j
		}
	}
	return i
}

// parseHexFloat parses the part of a C hexadecimal float after "0x".
func parseHexFloat(s string) (float64, bool) {
	i, digits := 0, 0
	for i < len(s) && isHexDigit(s[i]) {
		i++
		digits++
	}
	if i < len(s) && s[i] == '.' {
		i++
		for i < len(s) && isHexDigit(s[i]) {
			i++
			digits++
		}
	}
	if digits == 0 {
		return 0, false
	}
	mant := s[:i]
	exp := "p0"
	if i < len(s) && (s[i]|0x20) == 'p' {
		j := i + 1
		if j < len(s) && (s[j] == '+' || s[j] == '-') {
			j++
		}
		if j < len(s) && isDigit(s[j]) {
			for j < len(s) && isDigit(s[j]) {
				j++
			}
			exp = s[i:j]
		}
	}
	if strings.HasPrefix(mant, ".") {
		mant = "0" + mant
	}
	v, err := strconv.ParseFloat("0x"+mant+exp, 64)
	if err != nil && !isRangeErr(err) {
		return 0, false
	}
	return v, true
}
