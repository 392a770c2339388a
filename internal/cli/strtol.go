package cli

import (
	"math"
	"strconv"
	"strings"
)

// strtol parses s as C's strtol(s, &end, 0) does on LP64 Linux: leading
// white space, an optional sign, then "0x"/"0X" for hexadecimal, a leading
// "0" for octal, decimal otherwise; the value saturates at the int64 limits.
// rest is what strtol leaves in *end: all of s when no digit was read.
func strtol(s string) (v int64, rest string) {
	i := 0
	for i < len(s) && isCSpace(s[i]) {
		i++
	}
	neg := false
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		neg = s[i] == '-'
		i++
	}
	base := uint64(10)
	switch {
	case i+1 < len(s) && s[i] == '0' && (s[i+1] == 'x' || s[i+1] == 'X') &&
		i+2 < len(s) && digitVal(s[i+2]) < 16:
		base = 16
		i += 2
	case i < len(s) && s[i] == '0':
		base = 8
	}
	start := i
	var acc uint64
	overflow := false
	limit := uint64(math.MaxInt64)
	if neg {
		limit++ // -(MinInt64) as unsigned
	}
	for i < len(s) {
		d := uint64(digitVal(s[i]))
		if d >= base {
			break
		}
		if !overflow {
			if acc > (limit-d)/base {
				overflow = true
			} else {
				acc = acc*base + d
			}
		}
		i++
	}
	if i == start {
		return 0, s
	}
	switch {
	case overflow && neg:
		return math.MinInt64, s[i:]
	case overflow:
		return math.MaxInt64, s[i:]
	case neg:
		return int64(-acc), s[i:] // acc <= 1<<63: wraps to MinInt64 exactly
	}
	return int64(acc), s[i:]
}

func isCSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r'
}

func digitVal(c byte) int {
	switch {
	case c >= '0' && c <= '9':
		return int(c - '0')
	case c >= 'a' && c <= 'z':
		return int(c-'a') + 10
	case c >= 'A' && c <= 'Z':
		return int(c-'A') + 10
	}
	return 99
}

// strtof returns the value of the longest prefix of s that C's strtof
// accepts (after leading white space), rounded to float32 as perftest's
// (float) result is, or 0 when there is none.
func strtof(s string) float64 {
	s = strings.TrimLeft(s, " \t\n\v\f\r")
	for n := len(s); n > 0; n-- {
		p := s[:n]
		if strings.ContainsRune(p, '_') {
			continue // Go accepts digit separators, C does not
		}
		if v, err := strconv.ParseFloat(p, 32); err == nil || isRangeErr(err) {
			return float64(float32(v))
		}
	}
	return 0
}

func isRangeErr(err error) bool {
	ne, ok := err.(*strconv.NumError)
	return ok && ne.Err == strconv.ErrRange
}
