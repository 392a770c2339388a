package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// optionsDoc renders docs/options.md: every option perftest accepts (and
// pvperf's own), the tests it belongs to, what pvperf does with it, and the
// test that shows it.
func optionsDoc() string {
	rows := map[string]behaviour{}
	for _, b := range behaviours {
		rows[b.opt] = b
	}
	var b strings.Builder
	b.WriteString(`# Command-line options

Generated from the option table of ` + "`internal/cli`" + ` by
` + "`go test ./internal/cli -run TestOptionsDoc -update`" + `; the test fails when this
file and the table disagree.

Every option perftest 6.29 accepts is in one of three states:

- **implemented**: it does what perftest's does. The last column names the
  test that shows the effect: ` + "`TestOptionBehaviour/<option>`" + ` runs the same
  command line through the command with and without the option on the
  emulator and checks what changes in the output, the exit status or the files
  written; other names are tests of the engine that record what the option
  changes in the calls to the device (QP attributes, work requests, polls).
- **refused**: pvperf exits with status 1 and says why, in perftest's style
  (` + "`--<option> is not supported by pvperf (<reason>)`" + `, or
  ` + "`-<x>/--<option> ...`" + ` for an option with a short form). The usage text (` + "`-h`" + `)
  marks these options too.
- **no effect**: accepted and ignored, only where perftest itself does nothing
  on the devices pvperf drives; the reason says why.

"Tests" says which tests list the option in their usage text (` + "`all`" + `: every
test; options of raw Ethernet, accelerators and vendor features belong to
none of pvperf's tests).

Spelling: pvperf takes ` + "`_`" + ` and ` + "`-`" + ` alike in long option names
(` + "`--use_srq`" + ` is ` + "`--use-srq`" + `, ` + "`--tx_depth`" + ` is ` + "`--tx-depth`" + `), and
` + "`--report-histogram`" + ` for perftest's ` + "`--report-histogrm`" + `; perftest takes only
the spelling below, so a script meant for both should use it.

| Option | Tests | Status | Shown by / reason |
|---|---|---|---|
`)
	for _, o := range options().opts {
		name := "`--" + o.long + "`"
		if o.short != 0 {
			name = fmt.Sprintf("`-%c`, %s", o.short, name)
		}
		if o.arg {
			name += " *arg*"
		}
		if o.pvperf {
			name += " (pvperf)"
		}
		var tests []string
		for _, s := range testSpecs {
			if !o.other && o.relevant(s) {
				tests = append(tests, s.name)
			}
		}
		scope := strings.Join(tests, " ")
		switch {
		case o.other:
			scope = "none"
		case len(tests) == len(testSpecs):
			scope = "all"
		}
		var status, why string
		switch {
		case o.unsupported != "":
			status, why = "refused", o.unsupported
		case o.noop != "":
			status, why = "no effect", o.noop
		default:
			status = "implemented"
			if _, ok := rows[o.long]; ok {
				why = "`TestOptionBehaviour/" + o.long + "`"
				if note := optionNotes[o.long]; note != "" {
					why += "; " + note
				}
			} else {
				// "Test; note": the test, then a note on its limits.
				test, note, _ := strings.Cut(optionEvidence[o.long], "; ")
				why = "`" + test + "`"
				if note != "" {
					why += "; " + note
				}
			}
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", name, scope, status, why)
	}
	return b.String()
}

// optionNotes are notes on the limits of options that TestOptionBehaviour
// shows.
var optionNotes = map[string]string{
	"data_validation":       "write_bw and read_bw only: send_bw and atomic_bw list it but refuse it, as perftest does (`--data_validation is only supported with WRITE or READ verb`)",
	"data_validation_debug": "with `--data_validation` (alone it changes nothing, as in perftest)",
}

// TestOptionsDoc keeps docs/options.md equal to the option table.
func TestOptionsDoc(t *testing.T) {
	name := filepath.Join("..", "..", "docs", "options.md")
	got := optionsDoc()
	if *update {
		if err := os.WriteFile(name, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(name)
	if err != nil {
		t.Fatalf("%v (go test ./internal/cli -run TestOptionsDoc -update writes it)", err)
	}
	if got != string(want) {
		t.Errorf("%s is out of date: go test ./internal/cli -run TestOptionsDoc -update", name)
	}
}
