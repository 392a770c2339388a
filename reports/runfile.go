package reports

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
)

// Errors of ParseRun, testable with errors.Is.
var (
	// ErrEmpty: the input holds nothing but white space.
	ErrEmpty = errors.New("empty input")
	// ErrMalformed: the input is not JSON, or its "pvperf" object does not
	// have the schema's types.
	ErrMalformed = errors.New("malformed JSON")
	// ErrNoRun: valid JSON without a "pvperf" object (perftest's own
	// --out_json, for example).
	ErrNoRun = errors.New("no pvperf results")
	// ErrSchema: a "pvperf" object of another schema version, or one that
	// breaks the schema's rules.
	ErrSchema = errors.New("unsupported schema")
)

// runEnvelope is the "pvperf" object.
type runEnvelope struct {
	SchemaVersion int      `json:"schema_version"`
	Info          RunInfo  `json:"info"`
	Results       []Result `json:"results"`
	Fit           *Fit     `json:"hockney_fit,omitempty"`
	Repeats       *Repeats `json:"repeats,omitempty"`
	Incomplete    string   `json:"incomplete,omitempty"`
}

// runJSON returns the "pvperf" object, indented by one level.
func runJSON(run *Run) (string, error) {
	env := runEnvelope{SchemaVersion: SchemaVersion, Info: run.Info, Results: run.Results, Fit: run.Fit, Repeats: run.Repeats, Incomplete: run.Incomplete}
	if env.Results == nil {
		env.Results = []Result{}
	}
	b, err := json.MarshalIndent(env, "", "  ")
	if err != nil {
		return "", fmt.Errorf("reports: json: %w", err)
	}
	return string(b), nil
}

// MarshalRun returns a standalone JSON document holding only run's
// "pvperf" object: {"pvperf": {...}}. ParseRun reads it back.
func MarshalRun(run *Run) ([]byte, error) {
	s, err := runJSON(run)
	if err != nil {
		return nil, err
	}
	return []byte("{\n\"pvperf\": " + s + "\n}\n"), nil
}

// ParseRun reads a run from a JSON document with a "pvperf" object: a
// file written by --out_json or by MarshalRun. source names the input in
// errors and becomes Run.Source. Errors match ErrEmpty, ErrMalformed,
// ErrNoRun or ErrSchema.
func ParseRun(data []byte, source string) (Run, error) {
	fail := func(kind error, format string, args ...any) (Run, error) {
		return Run{}, fmt.Errorf("%s: %w: "+format, append([]any{source, kind}, args...)...)
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return Run{}, fmt.Errorf("%s: %w", source, ErrEmpty)
	}
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(data, &doc); err != nil {
		return fail(ErrMalformed, "%v", jsonErr(err, data))
	}
	raw, ok := doc["pvperf"]
	if !ok {
		if _, perftest := doc["test_info"]; perftest {
			return fail(ErrNoRun, "perftest's JSON without a \"pvperf\" object (written by perftest, or by a pvperf older than schema 1)")
		}
		var schema string
		if s, ok := doc["schema"]; ok && json.Unmarshal(s, &schema) == nil && strings.HasPrefix(schema, "pvperf-cluster/") {
			return fail(ErrNoRun, "a cluster report (%s): report reads the results of tests (--out_json); pvperf cluster writes its own HTML and CSV (--out_html, --out_csv)", schema)
		}
		return fail(ErrNoRun, "no \"pvperf\" object")
	}
	var version struct {
		SchemaVersion *int `json:"schema_version"`
	}
	if err := json.Unmarshal(raw, &version); err != nil {
		return fail(ErrMalformed, "\"pvperf\": %v", fieldErr(err))
	}
	if version.SchemaVersion == nil {
		return fail(ErrSchema, "\"pvperf\" has no schema_version")
	}
	if v := *version.SchemaVersion; v < MinSchemaVersion || v > SchemaVersion {
		return fail(ErrSchema, "schema_version %d, this pvperf reads %d to %d", v, MinSchemaVersion, SchemaVersion)
	}
	var env runEnvelope
	dec := json.NewDecoder(bytes.NewReader(raw))
	if err := dec.Decode(&env); err != nil {
		return fail(ErrMalformed, "\"pvperf\": %v", fieldErr(err))
	}
	run := Run{Info: env.Info, Results: env.Results, Fit: env.Fit, Repeats: env.Repeats, Incomplete: env.Incomplete, Source: source}
	if err := run.check(); err != nil {
		return fail(ErrSchema, "%v", err)
	}
	return run, nil
}

// check applies the schema's rules that types alone do not.
func (r *Run) check() error {
	kinds := []string{KindBW, KindLatency, KindLatencyDuration}
	if !slices.Contains(kinds, r.Info.Kind) {
		return fmt.Errorf("info.kind %q is not one of %q", r.Info.Kind, kinds)
	}
	if r.Info.Test == "" {
		return errors.New("info.test is empty")
	}
	for i, res := range r.Results {
		switch res.Side {
		case SideLocal, SideRemote, SideSum:
		default:
			return fmt.Errorf("results[%d].side %q is not local, remote or sum", i, res.Side)
		}
		bw := r.Info.Kind == KindBW
		if bw && (res.BW == nil || res.Latency != nil) {
			return fmt.Errorf("results[%d] of a %s run must have \"bw\" and no \"latency\"", i, r.Info.Kind)
		}
		if !bw && (res.Latency == nil || res.BW != nil) {
			return fmt.Errorf("results[%d] of a %s run must have \"latency\" and no \"bw\"", i, r.Info.Kind)
		}
		if d := res.Distribution; d != nil {
			for j, b := range d.Buckets {
				lo, hi := float64(b.LowUs), float64(b.HighUs)
				if b.Count == 0 || !(lo >= 0 && hi >= lo) || math.IsInf(hi, 0) ||
					(j > 0 && lo < float64(d.Buckets[j-1].HighUs)) {
					return fmt.Errorf("results[%d].latency_distribution.buckets[%d] is not a non-empty bucket {low_us, high_us, count} after the one before: %+v", i, j, b)
				}
			}
		}
	}
	return nil
}

// fieldErr names the key of a type error in the "pvperf" object.
func fieldErr(err error) error {
	var typ *json.UnmarshalTypeError
	if errors.As(err, &typ) && typ.Field != "" {
		return fmt.Errorf("%s: JSON %s where %s is expected", typ.Field, typ.Value, typ.Type)
	}
	return err
}

// jsonErr adds the line and column to a syntax or type error.
func jsonErr(err error, data []byte) error {
	var off int64
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		off = syn.Offset
	case errors.As(err, &typ):
		off = typ.Offset
	default:
		return err
	}
	// The error is at the byte before Offset.
	off = min(max(off-1, 0), int64(len(data)))
	line := 1 + bytes.Count(data[:off], []byte("\n"))
	col := off - int64(bytes.LastIndexByte(data[:off], '\n'))
	return fmt.Errorf("line %d, column %d: %w", line, col, err)
}
