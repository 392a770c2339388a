package reports

import (
	"math"
	"strconv"
	"strings"
)

// This file is a small implementation of C's printf conversions, so that
// perftest's format strings can be used verbatim (see format.go) and produce
// the bytes glibc produces. Go's fmt differs from C in the cases that matter
// here: "%#x" of 0 is "0" in C and "0x0" in Go, "%#06x" of 0 is "000000" in
// C, "%g" uses precision 6 in C and the shortest representation in Go, and
// C prints infinities and NaNs as "inf", "-inf", "nan" and "-nan".
//
// Supported: flags "-+ #0", a decimal width and precision, the length
// modifiers hh h l ll L j z t q (they select the C integer width that
// arguments are converted to), and the conversions d i u o x X c s f F e E
// g G and %%. A missing argument or an unsupported verb prints a marker
// ("%!v(MISSING)"-like) instead of panicking; the package's own format
// strings never do that (tests check every one of them).

// cSprintf formats like C's sprintf(format, args...).
//
// Integer arguments may be any Go integer type; they are converted to the C
// type the conversion's length modifier names (int, short, char, long, ...),
// with C's wrap-around, so "%hu" of 65537 is "1" and "%u" of -1 is
// "4294967295". Float arguments are float32 or float64 (float32 is promoted
// to double, as C's varargs do). Strings go with %s; %c takes an integer.
func cSprintf(format string, args ...any) string {
	var b strings.Builder
	b.Grow(len(format) + 16*len(args))
	argi := 0
	for i := 0; i < len(format); i++ {
		c := format[i]
		if c != '%' {
			b.WriteByte(c)
			continue
		}
		start := i
		i++
		if i >= len(format) {
			b.WriteByte('%')
			break
		}
		var s spec
		// Flags.
	flags:
		for ; i < len(format); i++ {
			switch format[i] {
			case '-':
				s.minus = true
			case '+':
				s.plus = true
			case ' ':
				s.space = true
			case '#':
				s.sharp = true
			case '0':
				s.zero = true
			default:
				break flags
			}
		}
		// Width.
		for ; i < len(format) && format[i] >= '0' && format[i] <= '9'; i++ {
			s.width = s.width*10 + int(format[i]-'0')
		}
		// Precision.
		s.prec = -1
		if i < len(format) && format[i] == '.' {
			i++
			s.prec = 0
			for ; i < len(format) && format[i] >= '0' && format[i] <= '9'; i++ {
				s.prec = s.prec*10 + int(format[i]-'0')
			}
		}
		// Length modifier: only the integer width matters.
		s.bits = 32
	length:
		for ; i < len(format); i++ {
			switch format[i] {
			case 'h':
				if s.bits == 16 {
					s.bits = 8
				} else {
					s.bits = 16
				}
			case 'l', 'L', 'j', 'z', 't', 'q':
				s.bits = 64
			default:
				break length
			}
		}
		if i >= len(format) {
			b.WriteString(format[start:])
			break
		}
		verb := format[i]
		if verb == '%' {
			b.WriteByte('%')
			continue
		}
		if argi >= len(args) {
			b.WriteString("%!" + string(verb) + "(MISSING)")
			continue
		}
		arg := args[argi]
		argi++
		switch verb {
		case 'd', 'i':
			v, ok := toInt64(arg)
			if !ok {
				b.WriteString(badArg(verb))
				continue
			}
			s.formatSigned(&b, signExtend(v, s.bits))
		case 'u', 'o', 'x', 'X':
			v, ok := toInt64(arg)
			if !ok {
				b.WriteString(badArg(verb))
				continue
			}
			s.formatUnsigned(&b, zeroExtend(v, s.bits), verb)
		case 'c':
			v, ok := toInt64(arg)
			if !ok {
				b.WriteString(badArg(verb))
				continue
			}
			s.prec = -1
			s.pad(&b, string([]byte{byte(v)}))
		case 's':
			str, ok := arg.(string)
			if !ok {
				b.WriteString(badArg(verb))
				continue
			}
			if s.prec >= 0 && s.prec < len(str) {
				str = str[:s.prec]
			}
			s.pad(&b, str)
		case 'f', 'F', 'e', 'E', 'g', 'G':
			f, ok := toFloat64(arg)
			if !ok {
				b.WriteString(badArg(verb))
				continue
			}
			s.formatFloat(&b, f, verb)
		default:
			b.WriteString("%!" + string(verb) + "(BADVERB)")
		}
	}
	return b.String()
}

type spec struct {
	minus, plus, space, sharp, zero bool
	width, prec                     int
	bits                            int // C integer width of the argument: 8, 16, 32 or 64
}

func badArg(verb byte) string {
	return "%!" + string(verb) + "(BADTYPE)"
}

func toInt64(a any) (int64, bool) {
	switch v := a.(type) {
	case int:
		return int64(v), true
	case int8:
		return int64(v), true
	case int16:
		return int64(v), true
	case int32:
		return int64(v), true
	case int64:
		return v, true
	case uint:
		return int64(v), true
	case uint8:
		return int64(v), true
	case uint16:
		return int64(v), true
	case uint32:
		return int64(v), true
	case uint64:
		return int64(v), true
	case uintptr:
		return int64(v), true
	case bool:
		if v {
			return 1, true
		}
		return 0, true
	}
	return 0, false
}

func toFloat64(a any) (float64, bool) {
	switch v := a.(type) {
	case float64:
		return v, true
	case float32:
		return float64(v), true
	}
	return 0, false
}

// signExtend converts v to the signed C integer type of the given width.
func signExtend(v int64, bits int) int64 {
	switch bits {
	case 8:
		return int64(int8(v))
	case 16:
		return int64(int16(v))
	case 32:
		return int64(int32(v))
	}
	return v
}

// zeroExtend converts v to the unsigned C integer type of the given width.
func zeroExtend(v int64, bits int) uint64 {
	switch bits {
	case 8:
		return uint64(uint8(v))
	case 16:
		return uint64(uint16(v))
	case 32:
		return uint64(uint32(v))
	}
	return uint64(v)
}

// pad writes body padded with spaces to the field width (left-justified
// with '-').
func (s *spec) pad(b *strings.Builder, body string) {
	n := s.width - len(body)
	if n <= 0 {
		b.WriteString(body)
		return
	}
	if s.minus {
		b.WriteString(body)
		b.WriteString(strings.Repeat(" ", n))
		return
	}
	b.WriteString(strings.Repeat(" ", n))
	b.WriteString(body)
}

// padNumber writes prefix (sign, "0x") and digits, padded to the width:
// with '-' spaces go right; with '0' (and zeroOK) zeros go between the
// prefix and the digits; otherwise spaces go left.
func (s *spec) padNumber(b *strings.Builder, prefix, digits string, zeroOK bool) {
	n := s.width - len(prefix) - len(digits)
	switch {
	case n <= 0:
		b.WriteString(prefix)
		b.WriteString(digits)
	case s.minus:
		b.WriteString(prefix)
		b.WriteString(digits)
		b.WriteString(strings.Repeat(" ", n))
	case s.zero && zeroOK:
		b.WriteString(prefix)
		b.WriteString(strings.Repeat("0", n))
		b.WriteString(digits)
	default:
		b.WriteString(strings.Repeat(" ", n))
		b.WriteString(prefix)
		b.WriteString(digits)
	}
}

func (s *spec) signPrefix(neg bool) string {
	switch {
	case neg:
		return "-"
	case s.plus:
		return "+"
	case s.space:
		return " "
	}
	return ""
}

// intDigits applies an integer precision: at least prec digits, and no
// digits at all for a zero value with precision 0.
func (s *spec) intDigits(digits string) string {
	if s.prec == 0 && digits == "0" {
		return ""
	}
	if s.prec > len(digits) {
		return strings.Repeat("0", s.prec-len(digits)) + digits
	}
	return digits
}

func (s *spec) formatSigned(b *strings.Builder, v int64) {
	neg := v < 0
	var mag uint64
	if neg {
		mag = uint64(-(v + 1)) + 1 // works for math.MinInt64 too
	} else {
		mag = uint64(v)
	}
	digits := s.intDigits(strconv.FormatUint(mag, 10))
	// The '0' flag is ignored when a precision is given.
	s.padNumber(b, s.signPrefix(neg), digits, s.prec < 0)
}

func (s *spec) formatUnsigned(b *strings.Builder, v uint64, verb byte) {
	var digits, prefix string
	switch verb {
	case 'u':
		digits = s.intDigits(strconv.FormatUint(v, 10))
	case 'o':
		digits = s.intDigits(strconv.FormatUint(v, 8))
		// '#' makes the first digit a zero.
		if s.sharp && (digits == "" || digits[0] != '0') {
			digits = "0" + digits
		}
	case 'x', 'X':
		digits = s.intDigits(strconv.FormatUint(v, 16))
		// '#' adds 0x only to a non-zero value: printf("%#x", 0) is "0".
		if s.sharp && v != 0 {
			prefix = "0x"
		}
		if verb == 'X' {
			digits = strings.ToUpper(digits)
			prefix = strings.ToUpper(prefix)
		}
	}
	s.padNumber(b, prefix, digits, s.prec < 0)
}

func (s *spec) formatFloat(b *strings.Builder, f float64, verb byte) {
	upper := verb == 'F' || verb == 'E' || verb == 'G'
	neg := math.Signbit(f)
	if math.IsInf(f, 0) || math.IsNaN(f) {
		// glibc prints the sign of a NaN too ("-nan"), and never pads
		// infinities or NaNs with zeros.
		body := "inf"
		if math.IsNaN(f) {
			body = "nan"
		}
		if upper {
			body = strings.ToUpper(body)
		}
		s.padNumber(b, s.signPrefix(neg), body, false)
		return
	}
	a := math.Abs(f)
	prec := s.prec
	if prec < 0 {
		prec = 6
	}
	var digits string
	switch verb {
	case 'f', 'F':
		digits = strconv.FormatFloat(a, 'f', prec, 64)
		if s.sharp && prec == 0 {
			digits += "."
		}
	case 'e', 'E':
		digits = strconv.FormatFloat(a, 'e', prec, 64)
		if s.sharp && prec == 0 {
			digits = strings.Replace(digits, "e", ".e", 1)
		}
	case 'g', 'G':
		digits = cFormatG(a, prec, s.sharp)
	}
	if upper {
		digits = strings.ToUpper(digits)
	}
	s.padNumber(b, s.signPrefix(neg), digits, true)
}

// cFormatG implements C's %g for a non-negative finite value: with P the
// precision (0 means 1) and X the exponent %e would print with precision
// P-1, it is %f with precision P-1-X when P > X >= -4, %e with precision
// P-1 otherwise; then, without '#', trailing zeros and a trailing decimal
// point are removed.
func cFormatG(a float64, prec int, sharp bool) string {
	p := prec
	if p == 0 {
		p = 1
	}
	e := strconv.FormatFloat(a, 'e', p-1, 64)
	epos := strings.IndexByte(e, 'e')
	x, _ := strconv.Atoi(e[epos+1:])
	var out string
	if p > x && x >= -4 {
		out = strconv.FormatFloat(a, 'f', p-1-x, 64)
		if !sharp {
			out = trimFraction(out)
		} else if !strings.Contains(out, ".") {
			out += "."
		}
		return out
	}
	mant, exp := e[:epos], e[epos:]
	if !sharp {
		mant = trimFraction(mant)
	} else if !strings.Contains(mant, ".") {
		mant += "."
	}
	return mant + exp
}

// trimFraction removes trailing zeros after a decimal point, and the point
// itself if nothing follows it.
func trimFraction(s string) string {
	if !strings.Contains(s, ".") {
		return s
	}
	s = strings.TrimRight(s, "0")
	return strings.TrimSuffix(s, ".")
}
