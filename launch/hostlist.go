package launch

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// MaxHosts bounds the number of hosts a hostlist may expand to.
const MaxHosts = 1 << 20

// ErrHostlist is the error of a hostlist that does not parse.
var ErrHostlist = errors.New("bad hostlist")

// ExpandHostlist expands a Slurm hostlist ("node[01-04,07],login1",
// "rack[1-2]-n[1-3]") into host names, in order: each comma-separated
// entry outside brackets is a name with any number of bracketed sets of
// numbers and ranges, whose expansion is their product (the last set
// varying fastest). A range keeps the zero padding of its first number.
func ExpandHostlist(s string) ([]string, error) {
	var hosts []string
	entries, err := splitTop(s)
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		if e == "" {
			return nil, fmt.Errorf("launch: %w %q: an empty name", ErrHostlist, s)
		}
		names, err := expandEntry(e, MaxHosts-len(hosts))
		if err != nil {
			return nil, fmt.Errorf("launch: %w %q: %v", ErrHostlist, s, err)
		}
		hosts = append(hosts, names...)
	}
	return hosts, nil
}

// splitTop splits s at the commas outside brackets.
func splitTop(s string) ([]string, error) {
	var out []string
	depth, start := 0, 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '[':
			if depth > 0 {
				return nil, fmt.Errorf("launch: %w %q: a bracket inside brackets at %d", ErrHostlist, s, i)
			}
			depth++
		case ']':
			if depth == 0 {
				return nil, fmt.Errorf("launch: %w %q: ']' without '[' at %d", ErrHostlist, s, i)
			}
			depth--
		case ',':
			if depth == 0 {
				out = append(out, s[start:i])
				start = i + 1
			}
		}
	}
	if depth != 0 {
		return nil, fmt.Errorf("launch: %w %q: '[' without ']'", ErrHostlist, s)
	}
	return append(out, s[start:]), nil
}

// expandEntry expands one name with bracketed sets, at most limit names.
func expandEntry(e string, limit int) ([]string, error) {
	open := strings.IndexByte(e, '[')
	if open < 0 {
		if strings.IndexByte(e, ']') >= 0 {
			return nil, errors.New("']' without '['")
		}
		return []string{e}, nil
	}
	end := strings.IndexByte(e[open:], ']') + open
	set, err := expandSet(e[open+1:end], limit)
	if err != nil {
		return nil, err
	}
	rest, err := expandEntry(e[end+1:], limit)
	if err != nil {
		return nil, err
	}
	if len(set)*len(rest) > limit {
		return nil, fmt.Errorf("more than %d hosts", MaxHosts)
	}
	prefix := e[:open]
	out := make([]string, 0, len(set)*len(rest))
	for _, n := range set {
		for _, r := range rest {
			out = append(out, prefix+n+r)
		}
	}
	return out, nil
}

// expandSet expands "01-04,07" to "01" "02" "03" "04" "07".
func expandSet(set string, limit int) ([]string, error) {
	if set == "" {
		return nil, errors.New("empty brackets")
	}
	var out []string
	for _, part := range strings.Split(set, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := number(lo)
		if err != nil {
			return nil, err
		}
		b := a
		if isRange {
			if b, err = number(hi); err != nil {
				return nil, err
			}
			if b < a {
				return nil, fmt.Errorf("range %s runs backwards", part)
			}
		}
		if b-a >= uint64(limit-len(out)) {
			return nil, fmt.Errorf("more than %d hosts", MaxHosts)
		}
		width := len(lo)
		for n := a; n <= b; n++ {
			s := strconv.FormatUint(n, 10)
			if len(s) < width {
				s = strings.Repeat("0", width-len(s)) + s
			}
			out = append(out, s)
		}
	}
	return out, nil
}

// number parses a decimal number of at most 18 digits.
func number(s string) (uint64, error) {
	if s == "" || len(s) > 18 {
		return 0, fmt.Errorf("%q is not a number", s)
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, fmt.Errorf("%q is not a number", s)
		}
	}
	return strconv.ParseUint(s, 10, 64)
}
