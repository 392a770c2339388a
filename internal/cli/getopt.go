package cli

import (
	"fmt"
	"strings"
)

// This file reproduces how glibc's getopt_long splits perftest's command
// line, before pflag sees it: options and operands may be mixed (operands
// are collected, "--" ends the options), short options bundle ("-aF",
// "-s4096"), an option's argument is the rest of the word or the next word
// even if it starts with '-', and a long option may be abbreviated to any
// prefix that names one option. Errors carry glibc's messages. The result
// is a list of canonical "--name[=value]" words that pflag parses without
// surprises.

// shortOpts is perftest's getopt string: the letters that exist as short
// options and whether they take an argument. -Y and -G have long forms only.
const shortOpts = "w:y:p:d:i:m:s:n:t:u:S:x:c:q:I:o:M:r:Q:A:l:D:f:B:T:L:E:J:j:K:k:X:W:aFegzRvhbNVCHUOZP"

// token is one option found on the command line, in order.
type token struct {
	o   *opt
	val string // the argument, for options that take one
}

// scanned is the command line split by scanArgs.
type scanned struct {
	tokens   []token
	operands []string
	// errMsg, when not empty, is getopt's complaint about the word after
	// the last token; perftest then reports an invalid flag.
	errMsg string
}

// scanArgs splits args as getopt_long would for perftest, stopping at the
// first word getopt rejects.
func scanArgs(prog string, args []string, tbl *optTable) scanned {
	var s scanned
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			s.operands = append(s.operands, args[i+1:]...)
			return s
		case len(a) < 2 || a[0] != '-':
			s.operands = append(s.operands, a)
		case strings.HasPrefix(a, "--"):
			body := a[2:]
			name, val, hasVal := strings.Cut(body, "=")
			o, err := tbl.lookupLong(name)
			if err != nil {
				s.errMsg = err.message(prog, body)
				return s
			}
			switch {
			case !o.arg && hasVal:
				s.errMsg = fmt.Sprintf("%s: option '--%s' doesn't allow an argument\n", prog, o.long)
				return s
			case o.arg && !hasVal:
				if i+1 >= len(args) {
					s.errMsg = fmt.Sprintf("%s: option '--%s' requires an argument\n", prog, o.long)
					return s
				}
				i++
				val = args[i]
			}
			s.tokens = append(s.tokens, token{o: o, val: val})
		default:
			letters := a[1:]
			for j := 0; j < len(letters); j++ {
				c := letters[j]
				k := strings.IndexByte(shortOpts, c)
				if c == ':' || k < 0 {
					s.errMsg = fmt.Sprintf("%s: invalid option -- '%c'\n", prog, c)
					return s
				}
				o := tbl.short[c]
				if k+1 < len(shortOpts) && shortOpts[k+1] == ':' {
					val := letters[j+1:]
					if val == "" {
						if i+1 >= len(args) {
							s.errMsg = fmt.Sprintf("%s: option requires an argument -- '%c'\n", prog, c)
							return s
						}
						i++
						val = args[i]
					}
					s.tokens = append(s.tokens, token{o: o, val: val})
					break
				}
				s.tokens = append(s.tokens, token{o: o})
			}
		}
	}
	return s
}

// lookupError is why a long option name matched no single option.
type lookupError struct {
	ambiguous []*opt // the candidates, in perftest's table order
}

func (e *lookupError) message(prog, body string) string {
	if len(e.ambiguous) == 0 {
		return fmt.Sprintf("%s: unrecognized option '--%s'\n", prog, body)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s: option '--%s' is ambiguous; possibilities:", prog, body)
	for _, o := range e.ambiguous {
		fmt.Fprintf(&b, " '--%s'", o.long)
	}
	b.WriteString("\n")
	return b.String()
}

// lookupLong finds the option a long name (without "--" and "=value")
// means. getopt's rules come first, on perftest's own spellings, so every
// command line perftest accepts means the same here; then, only for names
// perftest would reject, '_' and '-' are interchangeable, and the names
// pvperf adds are considered last:
//
//  1. an exact name;
//  2. an exact name after normalisation;
//  3. a prefix of perftest names, ambiguous unless all the names it
//     matches are one option;
//  4. the same after normalisation;
//  5. a prefix of pvperf's names (raw, then normalised).
func (t *optTable) lookupLong(name string) (*opt, *lookupError) {
	for _, n := range t.names {
		if n.name == name {
			return n.o, nil
		}
	}
	norm := normalizeName(name)
	for _, n := range t.names {
		if normalizeName(n.name) == norm {
			return n.o, nil
		}
	}
	type matcher func(string) bool
	raw := func(n string) bool { return strings.HasPrefix(n, name) }
	normalized := func(n string) bool { return strings.HasPrefix(normalizeName(n), norm) }
	for _, tier := range []struct {
		pvperf bool
		match  matcher
	}{{false, raw}, {false, normalized}, {true, raw}, {true, normalized}} {
		var found []*opt
		for _, n := range t.names {
			if n.pvperf != tier.pvperf || !tier.match(n.name) {
				continue
			}
			if len(found) == 0 || found[0] != n.o {
				if !containsOpt(found, n.o) {
					found = append(found, n.o)
				}
			}
		}
		switch {
		case len(found) == 1:
			return found[0], nil
		case len(found) > 1:
			return nil, &lookupError{ambiguous: found}
		}
	}
	return nil, &lookupError{}
}

func containsOpt(list []*opt, o *opt) bool {
	for _, x := range list {
		if x == o {
			return true
		}
	}
	return false
}

// normalizeName makes '_' and '-' interchangeable in long option names
// (perftest mixes them: --report_gbits, --report-both) and maps pvperf's
// correctly spelt --report-histogram onto perftest's --report-histogrm. It
// is also the flag set's pflag normalisation function.
func normalizeName(name string) string {
	n := strings.ReplaceAll(name, "_", "-")
	if n == "report-histogram" {
		return "report-histogrm"
	}
	return n
}
