package cmbench

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
)

const rule = "---------------------------------------------------------------------------------------\n"

// usec is d in microseconds.
func usec(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

// WriteText writes r as a table: per step, the phase's wall time in
// milliseconds and the distribution over connections in microseconds.
func (r *Result) WriteText(w io.Writer, title string) error {
	var b strings.Builder
	b.WriteString(rule)
	fmt.Fprintf(&b, "%*s\n", 44+len(title)/2, title)
	fmt.Fprintf(&b, " Device         : %s\n", r.Device)
	fmt.Fprintf(&b, " Role           : %s\n", r.Role)
	fmt.Fprintf(&b, " Server         : %s\n", r.Server)
	fmt.Fprintf(&b, " Connections    : %d\n", r.Conns)
	b.WriteString(rule)
	fmt.Fprintf(&b, " %-14s %10s %10s %10s %10s %10s %10s %10s\n", "step", "total[ms]", "mean[us]", "min[us]", "p50[us]", "p90[us]", "p99[us]", "max[us]")
	for _, s := range r.Steps {
		total := "-"
		if s.Wall > 0 {
			total = fmt.Sprintf("%.2f", float64(s.Wall)/float64(time.Millisecond))
		}
		fmt.Fprintf(&b, " %-14s %10s %10.2f %10.2f %10.2f %10.2f %10.2f %10.2f\n", s.Step, total,
			usec(s.Mean), usec(s.Min), usec(s.P50), usec(s.P90), usec(s.P99), usec(s.Max))
	}
	b.WriteString(rule)
	fmt.Fprintf(&b, " %d connections set up in %.2f ms: %.1f connections/s\n", r.Conns,
		float64(r.Elapsed)/float64(time.Millisecond), r.ConnsPerSec)
	b.WriteString(rule)
	_, err := io.WriteString(w, b.String())
	return err
}

// jsonStep is a StepStat as JSON: times in microseconds.
type jsonStep struct {
	Step    string  `json:"step"`
	TotalMS float64 `json:"total_ms"`
	MeanUS  float64 `json:"mean_us"`
	MinUS   float64 `json:"min_us"`
	P50US   float64 `json:"p50_us"`
	P90US   float64 `json:"p90_us"`
	P99US   float64 `json:"p99_us"`
	MaxUS   float64 `json:"max_us"`
}

type jsonResult struct {
	*Result
	ElapsedMS float64    `json:"elapsed_ms"`
	Steps     []jsonStep `json:"steps"`
}

type jsonFile struct {
	Test    string       `json:"test"`
	Version string       `json:"version"`
	Results []jsonResult `json:"results"`
}

// WriteJSON writes results as one JSON object: test names the benchmark,
// version the program's version.
func WriteJSON(w io.Writer, test, version string, results []*Result) error {
	f := jsonFile{Test: test, Version: version, Results: []jsonResult{}}
	for _, r := range results {
		j := jsonResult{Result: r, ElapsedMS: float64(r.Elapsed) / float64(time.Millisecond), Steps: []jsonStep{}}
		for _, s := range r.Steps {
			j.Steps = append(j.Steps, jsonStep{Step: s.Step.String(), TotalMS: float64(s.Wall) / float64(time.Millisecond),
				MeanUS: usec(s.Mean), MinUS: usec(s.Min), P50US: usec(s.P50), P90US: usec(s.P90), P99US: usec(s.P99), MaxUS: usec(s.Max)})
		}
		f.Results = append(f.Results, j)
	}
	e := json.NewEncoder(w)
	e.SetIndent("", "  ")
	return e.Encode(f)
}

// csvHeader is the first row of WriteCSV's output.
var csvHeader = []string{"role", "device", "connections", "step", "total_ms", "mean_us", "min_us", "p50_us", "p90_us", "p99_us", "max_us"}

// WriteCSV writes r as CSV, one row per step, after a header row when
// header is set.
func (r *Result) WriteCSV(w io.Writer, header bool) error {
	cw := csv.NewWriter(w)
	if header {
		_ = cw.Write(csvHeader)
	}
	f := func(v float64) string { return strconv.FormatFloat(v, 'f', 3, 64) }
	for _, s := range r.Steps {
		_ = cw.Write([]string{string(r.Role), r.Device, strconv.Itoa(r.Conns), s.Step.String(),
			f(float64(s.Wall) / float64(time.Millisecond)), f(usec(s.Mean)), f(usec(s.Min)), f(usec(s.P50)),
			f(usec(s.P90)), f(usec(s.P99)), f(usec(s.Max))})
	}
	cw.Flush()
	return cw.Error()
}
