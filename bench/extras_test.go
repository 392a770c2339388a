package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pvperf/pvperf/emu"
	"github.com/pvperf/pvperf/perftest"
)

// TestLatencyHistogram: each latency test records every sample of its
// loop (iterations - 1 of them, as perftest's) in a histogram whose
// extremes are the samples' (t_min is the smallest; the histogram's max
// is at least perftest's t_max, which drops the 2 largest), and prints
// the percentile table after perftest's; without the histogram neither.
func TestLatencyHistogram(t *testing.T) {
	dev := device(t, emu.ProfileUnrestricted, 2)
	for _, verb := range []perftest.Verb{perftest.Send, perftest.Write, perftest.WriteImm, perftest.Read, perftest.Atomic} {
		t.Run(verb.String(), func(t *testing.T) {
			c := testConfig(perftest.Latency, verb)
			c.Iters, c.Extras = 300, true
			var out strings.Builder
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			run, err := Run(ctx, normalize(c), dev, &out, &out)
			if err != nil {
				t.Fatalf("%v\n%s", err, out.String())
			}
			r := run.Primary()[0]
			d := r.Distribution
			if d == nil || d.Samples != 299 {
				t.Fatalf("distribution %+v", d)
			}
			if d.MinUs != r.Latency.MinUs || d.MaxUs < r.Latency.MaxUs {
				t.Errorf("histogram min %v max %v, samples' %v and %v", d.MinUs, d.MaxUs, r.Latency.MinUs, r.Latency.MaxUs)
			}
			if !regexp.MustCompile(`p99\.999 +max\n [28] +299 +[0-9.]+ `).MatchString(out.String()) {
				t.Errorf("no percentile table:\n%s", out.String())
			}
			c.NoLatencyHistogram = true
			out.Reset()
			run, err = Run(ctx, normalize(c), dev, &out, &out)
			if err != nil {
				t.Fatal(err)
			}
			if run.Primary()[0].Distribution != nil || strings.Contains(out.String(), "percentiles[usec]") {
				t.Errorf("without the histogram:\n%s", out.String())
			}
		})
	}
}

// TestIntervals: -D prints a line per second of the loop, the margins
// marked, and --interval_json writes the same seconds as JSON lines; the
// sampled ones end at the sample window's bounds, so their messages add
// up to the result row's (within the loop's lag in seeing a switch).
func TestIntervals(t *testing.T) {
	if testing.Short() {
		t.Skip("duration runs take seconds")
	}
	dev := device(t, emu.ProfileUnrestricted, 2)
	for _, tc := range []struct {
		name string
		test perftest.TestKind
		verb perftest.Verb
		bi   bool
	}{
		{"write_bw", perftest.Bandwidth, perftest.Write, false},
		{"write_lat", perftest.Latency, perftest.Write, false},
		// Both directions: the row counts messages received and
		// cq_mod per send completion, and so must the seconds.
		{"send_bw_b", perftest.Bandwidth, perftest.Send, true},
	} {
		test := tc.test
		t.Run(tc.name, func(t *testing.T) {
			c := testConfig(test, tc.verb)
			c.Bidirectional = tc.bi
			c.Duration, c.Margin, c.Extras = 3, 1, true
			c.IntervalJSON = filepath.Join(t.TempDir(), "iv.json")
			out := runLoop(t, dev, c)
			lines := regexp.MustCompile(`(?m)^ +[0-9]+\.[0-9]{2}- +[0-9]+\.[0-9]{2} sec .*$`).FindAllString(out, -1)
			if len(lines) < 3 || len(lines) > 4 {
				t.Fatalf("%d interval lines in:\n%s", len(lines), out)
			}
			if !strings.HasSuffix(lines[0], "(margin, not measured)") || strings.HasSuffix(lines[1], "(margin, not measured)") {
				t.Errorf("margins not marked:\n%s", strings.Join(lines, "\n"))
			}
			f, err := os.Open(c.IntervalJSON)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			sc := bufio.NewScanner(f)
			var n int
			var last float64
			var sampled uint64
			for sc.Scan() {
				var iv struct {
					From       float64 `json:"from_s"`
					To         float64 `json:"to_s"`
					Messages   *uint64 `json:"messages"`
					Iterations *uint64 `json:"iterations"`
					Sampled    bool    `json:"sampled"`
				}
				if err := json.Unmarshal(sc.Bytes(), &iv); err != nil {
					t.Fatalf("line %q: %v", sc.Text(), err)
				}
				n++
				if (test == perftest.Bandwidth) != (iv.Messages != nil) || (test == perftest.Latency) != (iv.Iterations != nil) {
					t.Errorf("line %q", sc.Text())
				}
				last = iv.To
				if iv.Sampled && iv.Messages != nil {
					sampled += *iv.Messages
				}
				if iv.Sampled && iv.Iterations != nil {
					sampled += *iv.Iterations
				}
			}
			row := regexp.MustCompile(`(?m)^ +[0-9]+ +([0-9]+) +[0-9.]+`).FindStringSubmatch(out)
			if row == nil {
				t.Fatalf("no result row in:\n%s", out)
			}
			total, _ := strconv.ParseUint(row[1], 10, 64)
			// The loop stores its count once per poll of its CQ: a
			// switch within a poll's batch is off by up to a batch
			// of completions, at each end of the window.
			slack := int64(2 * (c.pollBatch()*c.CQMod + 1))
			if d := int64(sampled) - int64(total); d < -slack || d > slack {
				t.Errorf("the sampled seconds count %d, the result row %d", sampled, total)
			}
			if n != len(lines) || last < 2.9 || last > 5 { // the clock's goroutine may be late
				t.Errorf("%d JSON lines ending at %v s, %d text lines", n, last, len(lines))
			}
		})
	}
}

// TestOutputOneNumber: --output prints one number, without pvperf's
// additions, for the scripts that read it.
func TestOutputOneNumber(t *testing.T) {
	dev := device(t, emu.ProfileUnrestricted, 2)
	c := testConfig(perftest.Latency, perftest.Send)
	c.Extras, c.Output = true, perftest.OutputLatency
	out := runLoop(t, dev, c)
	if strings.Contains(out, "percentiles") || !regexp.MustCompile(`(?m)^[0-9]+\.[0-9]+$`).MatchString(out) {
		t.Errorf("--output=latency printed:\n%s", out)
	}
	c.Output = perftest.OutputFull
	if out := runLoop(t, dev, c); !strings.Contains(out, "percentiles") {
		t.Errorf("without --output no percentiles:\n%s", out)
	}
}

// TestRepeatedLoopback: --repeat runs the test that many times and prints
// the summary; --repeat_ci stops at MinRepeats once the interval is
// narrow enough.
func TestRepeatedLoopback(t *testing.T) {
	dev := device(t, emu.ProfileUnrestricted, 2)
	c := testConfig(perftest.Bandwidth, perftest.Write)
	c.Repeat, c.Extras = 3, true
	c.JSON, c.JSONFile = true, filepath.Join(t.TempDir(), "r.json")
	out := runLoop(t, dev, c)
	if strings.Count(out, "RDMA_Write BW Test") != 1 || !strings.Contains(out, " 3 runs: median, range and 95% confidence interval of the median") {
		t.Errorf("output:\n%s", out)
	}
	b, err := os.ReadFile(c.JSONFile)
	if err != nil || !strings.Contains(string(b), `"repeats": {`) || !strings.Contains(string(b), `"runs": 3`) {
		t.Errorf("JSON file (%v):\n%s", err, b)
	}
	// The file's perftest results are those of the run printed, the
	// first.
	row := regexp.MustCompile(`(?m)^ 65536 +[0-9]+ +[0-9.]+ +([0-9.]+)`).FindStringSubmatch(out)
	if row == nil || !strings.Contains(string(b), `"BW_average": `+row[1]+`,`) {
		t.Errorf("the printed row %q is not the JSON file's:\n%s", row, b)
	}
	c.Repeat, c.RepeatCI = 8, 99
	out = runLoop(t, dev, c)
	// A loaded machine may need more runs than MinRepeats.
	if !regexp.MustCompile(`\n [5-8] runs: `).MatchString(out) || !strings.Contains(out, "target: interval within ±99% of the median, ") {
		t.Errorf("output:\n%s", out)
	}
	// --interval_json to the standard output has every run's seconds,
	// although only the first run's text is printed.
	c = testConfig(perftest.Bandwidth, perftest.Write)
	c.Repeat, c.Duration, c.Margin, c.IntervalJSON = 3, 1, 0, "-"
	out = runLoop(t, dev, c)
	for run := 1; run <= 3; run++ {
		if !strings.Contains(out, fmt.Sprintf(`"sampled":true,"run":%d,`, run)) {
			t.Errorf("no interval of run %d on the standard output:\n%s", run, out)
		}
	}
}
