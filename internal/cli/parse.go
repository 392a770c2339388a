package cli

import (
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/pvperf/pvperf/bench"
	"github.com/pvperf/pvperf/perftest"
)

// defaultRepeatMax is the most runs --repeat_ci makes without --repeat.
const defaultRepeatMax = 30

// defaultJSONFile is perftest's --out_json_file default.
const defaultJSONFile = "perftest_out.json"

// Parse parses a perftest command line for test ("write_bw", ...), applies
// perftest's defaults and derived adjustments, and returns the engine's
// configuration. It writes what perftest's parser writes (warnings, usage,
// version, error messages) to stdout and stderr, and returns an error for
// every outcome after which perftest exits: ErrHelp, ErrVersion, or a
// *Failure (which wraps ErrUsage). It does not touch any device.
func Parse(test string, args []string, stdout, stderr io.Writer) (bench.Config, error) {
	return ParseAs(test, test, args, stdout, stderr)
}

// ParseAs is Parse for a program invoked as prog (its argv[0], which
// perftest's usage text and getopt's messages name).
func ParseAs(test, prog string, args []string, stdout, stderr io.Writer) (bench.Config, error) {
	spec, ok := lookupTest(test)
	if !ok {
		return bench.Config{}, fmt.Errorf("cli: unknown test %q (want one of %s)", test, strings.Join(Tests(), ", "))
	}
	if prog == "" {
		prog = test
	}
	p := newParser(spec, prog, stdout, stderr)
	err := p.parse(args)
	var f *Failure
	if errors.As(err, &f) && f.Parser {
		fmt.Fprint(p.stderr, parserExitLine)
	}
	if err != nil {
		return bench.Config{}, err
	}
	return p.cfg, nil
}

// testMethod is perftest's test_method.
type testMethod uint8

const (
	runRegular testMethod = iota
	runAll
	runInfinitely
)

// parser holds perftest's parameters while the command line is read: the
// configuration being built and the internal values perftest keeps beside
// it.
type parser struct {
	test           testSpec
	prog           string
	stdout, stderr io.Writer
	tbl            *optTable

	cfg bench.Config

	seen map[string]bool // perftest's duplicate checker

	verb         perftest.Verb
	rawEth       bool // -c RawEth
	method       testMethod
	durationMode bool // perftest's test_type == DURATION
	runInf       bool // --run_infinitely was given (it outranks -a)
	duration     int  // perftest keeps 5 even in iteration mode
	margin       int  // -1 until -f or the duration/4 default
	reqCQMod     bool
	reqSize      bool
	tos          int
	hopLimit     int
	useEqNum     bool
	useCQEPoll   bool
	client       bool // perftest's machine == CLIENT (after --reversed)
}

func newParser(spec testSpec, prog string, stdout, stderr io.Writer) *parser {
	p := &parser{
		test:     spec,
		prog:     prog,
		stdout:   stdout,
		stderr:   stderr,
		tbl:      options(),
		seen:     map[string]bool{},
		verb:     spec.verb,
		duration: bench.DefaultDuration,
		margin:   -1,
		tos:      -1,
		hopLimit: 64,
	}
	// init_perftest_params.
	c := &p.cfg
	c.Test = spec.tst
	c.Verb = spec.verb
	c.Connection = perftest.RC
	c.Port = bench.DefaultPort
	c.Version = bench.ProtocolVersion
	c.PeerTimeout = bench.DefaultPeerTimeout
	c.IBPort = 1
	c.GIDIndex = -1
	c.QPTimeout = bench.DefaultQPTimeout
	c.Size = bench.DefaultLatSize
	c.TxDepth = bench.DefaultLatTxDepth
	if spec.bw() {
		c.Size = bench.DefaultBWSize
		c.TxDepth = bench.DefaultBWTxDepth
	}
	c.Iters = bench.DefaultIters
	c.Extras = true
	if spec.bw() && spec.write() {
		c.Iters = bench.DefaultWriteBWIters
	}
	c.RxDepth = 1
	if spec.send() || spec.write() {
		c.RxDepth = bench.DefaultRecvRxDepth
	}
	c.CQMod = bench.DefaultCQMod
	c.PostList = 1
	c.RecvPostList = 1
	c.NumQPs = 1
	c.Inline = -1
	c.JSONFile = defaultJSONFile
	if spec.atomic() {
		c.AtomicType = perftest.FetchAndAdd
		c.Size = bench.DefaultAtomicSize
	}
	c.DynamicPolling = true
	c.PollBatch = 16
	c.TOS = -1
	c.RetryCount = bench.DefaultRetryCount
	return p
}

// optValue feeds pflag's calls back into the parser: pflag calls Set in
// command line order, and Set runs perftest's duplicate check and the
// option's body.
type optValue struct {
	p *parser
	o *opt
}

func (v optValue) String() string { return "" }
func (v optValue) Type() string {
	if v.o.arg {
		return "string"
	}
	return "bool"
}

func (v optValue) Set(val string) error {
	p, o := v.p, v.o
	if p.seen[o.dupKey()] {
		if o.short != 0 {
			return p.parserFail(" Duplicated argument: -%c \n", o.short)
		}
		return p.parserFail(" Duplicated argument: %s \n", o.long)
	}
	p.seen[o.dupKey()] = true
	if o.unsupported != "" {
		return p.unsupported(o)
	}
	return o.set(p, val)
}

// flagSet returns a pflag set with every option, for one parse.
func (p *parser) flagSet() *pflag.FlagSet {
	fs := pflag.NewFlagSet(p.prog, pflag.ContinueOnError)
	fs.SetOutput(io.Discard) // every message is perftest's, printed by the parser
	fs.Usage = func() {}
	fs.SortFlags = false
	fs.SetInterspersed(true)
	fs.SetNormalizeFunc(func(_ *pflag.FlagSet, name string) pflag.NormalizedName {
		return pflag.NormalizedName(normalizeName(name))
	})
	for _, o := range p.tbl.opts {
		f := fs.VarPF(optValue{p, o}, o.long, "", o.long)
		if !o.arg {
			f.NoOptDefVal = "true"
		}
	}
	return fs
}

// parse is perftest's parser(): the options in order, the operands, then
// force_dependecies.
func (p *parser) parse(args []string) error {
	sc := scanArgs(p.prog, args, p.tbl)

	// Hand pflag the options getopt accepted, spelt canonically, and the
	// operands after "--".
	words := make([]string, 0, len(sc.tokens)+len(sc.operands)+1)
	for _, t := range sc.tokens {
		if t.o.arg {
			words = append(words, "--"+t.o.long+"="+t.val)
		} else {
			words = append(words, "--"+t.o.long)
		}
	}
	words = append(words, "--")
	words = append(words, sc.operands...)
	fs := p.flagSet()
	if err := fs.Parse(words); err != nil {
		var f *Failure
		if errors.As(err, &f) || errors.Is(err, ErrHelp) || errors.Is(err, ErrVersion) {
			return unwrapOurs(err)
		}
		return fmt.Errorf("cli: %w", err) // cannot happen: the words are canonical
	}
	if sc.errMsg != "" {
		fmt.Fprint(p.stderr, sc.errMsg)
		msg := " Invalid Command or flag.\n Please check command line and run again.\n\n"
		fmt.Fprint(p.stderr, msg)
		p.usage()
		return &Failure{Msg: sc.errMsg + msg, Parser: true}
	}

	// What perftest applies after its option loop.
	operands := fs.Args()
	switch {
	case len(operands) == 1:
		p.cfg.Server = operands[0]
	case len(operands) > 1:
		return p.parserFail(" Invalid Command line. Please check command rerun \n")
	}
	if p.cfg.Loopback && p.cfg.Server != "" {
		return p.parserFail(" --loopback runs the server and the client in this process: give no <host>\n")
	}
	if p.cfg.Loopback && (p.seen["p"] || p.seen["bind_source_ip"] || p.seen["ipv6-addr"]) {
		// The server listens on a free port of 127.0.0.1 and the
		// client connects to it: these would be silently ignored.
		return p.parserFail(" --loopback connects over a free port of 127.0.0.1: -p, --bind_source_ip and --ipv6-addr do not apply\n")
	}
	if p.cfg.PostList < 1 {
		return p.parserFail(" %s must be positive\n", "Send Post List size")
	}
	if p.cfg.RecvPostList < 1 {
		return p.parserFail(" %s must be positive\n", "Receive Post List size")
	}
	if p.cfg.RepeatCI > 0 && p.cfg.Repeat == 0 {
		p.cfg.Repeat = defaultRepeatMax
	}
	if p.cfg.RepeatCI > 0 && p.cfg.Repeat < bench.MinRepeats {
		return p.parserFail(" --repeat_ci needs at least %d runs: --repeat %d is too few\n", bench.MinRepeats, p.cfg.Repeat)
	}
	if p.cfg.RepeatCI > 0 && p.cfg.Server != "" && (p.cfg.RdmaCM || p.cfg.CMExchange) {
		// The client ends a server's series early with a TCP connection
		// that sends nothing; a server over rdma_cm waits for a
		// connection request instead, and would wait for ever.
		return p.parserFail(" --repeat_ci cannot end the server's series over rdma_cm (-z, -R): use --repeat alone\n")
	}
	if p.cfg.IntervalJSON != "" && !p.durationMode {
		// The intervals are the seconds of a duration run; an
		// iteration run has none, and the file would stay empty.
		return p.parserFail(" --interval_json writes the seconds of a duration run: give -D too\n")
	}
	p.client = p.cfg.Server != "" || p.cfg.Loopback
	if p.cfg.Reversed {
		p.client = !p.client
	}
	return p.forceDependencies()
}

// unwrapOurs digs the parser's own error out of pflag's wrapping
// ("invalid argument ... for ... flag: <ours>").
func unwrapOurs(err error) error {
	var f *Failure
	switch {
	case errors.As(err, &f):
		return f
	case errors.Is(err, ErrHelp):
		return ErrHelp
	case errors.Is(err, ErrVersion):
		return ErrVersion
	}
	return err
}

// checkValue is perftest's CHECK_VALUE: strtol(val, &end, 0) must use the
// whole argument (an empty one reads as 0).
func (p *parser) checkValue(val, name, ctype string) (int64, error) {
	n, rest := strtol(val)
	if rest != "" {
		return 0, p.parserFail(" %s argument %s should be %s\n", name, val, ctype)
	}
	return n, nil
}

// intVal is CHECK_VALUE into a C int.
func (p *parser) intVal(val, name string, dst *int) error {
	n, err := p.checkValue(val, name, "int")
	if err != nil {
		return err
	}
	*dst = int(int32(n))
	return nil
}

// intRange is CHECK_VALUE_IN_RANGE into a C int.
func (p *parser) intRange(val, name string, lo, hi int, dst *int) error {
	if err := p.intVal(val, name, dst); err != nil {
		return err
	}
	if *dst < lo || *dst > hi {
		return p.parserFail(" %s should be between %d and %d\n", name, lo, hi)
	}
	return nil
}

// setSize is -s: a number with an optional K or M suffix (binary units),
// taken by strtol without checking what follows the digits.
func (p *parser) setSize(val string) error {
	factor := uint64(1)
	if k := len(val) - 1; k >= 0 {
		switch val[k] {
		case 'K':
			val, factor = val[:k], 1024
		case 'M':
			val, factor = val[:k], 1024*1024
		}
	}
	n, _ := strtol(val)
	p.cfg.Size = uint64(n) * factor
	p.reqSize = true
	if p.cfg.Size < 1 || p.cfg.Size > 2147483647 {
		return p.parserFail(" Message Size should be between %d and %d\n", 1, 2147483647)
	}
	return nil
}

// setConnection is -c (perftest's change_conn_type, which exits by itself
// on errors).
func (p *parser) setConnection(val string) error {
	if p.rawEth {
		return nil
	}
	rdmaVerb := p.verb == perftest.Read || p.verb == perftest.Atomic
	switch val {
	case "RC":
		p.cfg.Connection = perftest.RC
	case "UC":
		p.cfg.Connection = perftest.UC
		if rdmaVerb {
			return p.exitErr(" UC connection not possible in READ/ATOMIC verbs\n")
		}
	case "UD":
		p.cfg.Connection = perftest.UD
		if p.verb != perftest.Send && p.verb != perftest.SendImm {
			return p.exitErr(" UD connection only possible in SEND verb\n")
		}
	case "RawEth":
		p.rawEth = true
	case "XRC":
		return p.exitErr(" -c XRC is not supported by pvperf (pvperf's verbs API has RC, UC and UD queue pairs only)\n")
	case "DC":
		return p.exitErr(" -c DC is not supported by pvperf (DC is an mlx5 vendor transport)\n")
	case "SRD":
		if p.verb != perftest.Send && p.verb != perftest.Read && p.verb != perftest.Write && p.verb != perftest.WriteImm {
			return p.exitErr(" SRD connection only possible in SEND/READ/WRITE/WRITE_IMM verbs\n")
		}
		return p.exitErr(" -c SRD is not supported by pvperf (SRD is an EFA vendor transport)\n")
	default:
		return p.exitErr(" Invalid Connection type. Please choose from {RC,UC,UD,XRC,DC,SRD}\n")
	}
	return nil
}

// setPeerTimeout is pvperf's --peer-timeout: a Go duration ("500ms",
// "10s", "1m") or a whole number of seconds.
func (p *parser) setPeerTimeout(val string) error {
	d, err := time.ParseDuration(val)
	if err != nil {
		n, nerr := strconv.ParseUint(val, 10, 32)
		if nerr != nil {
			return p.parserFail(" Peer timeout argument %s should be a duration (such as 500ms, 10s or 2m) or seconds\n", val)
		}
		d = time.Duration(n) * time.Second
	}
	if d <= 0 {
		return p.parserFail(" Peer timeout must be positive\n")
	}
	p.cfg.PeerTimeout = d
	return nil
}
