package guest

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// sides are the side-by-side comparisons: a test and its options, the
// field of the client's result row, what it measures and the target of the
// ratio pvperf/perftest (reported, not judged). Under TCG one run differs
// from the next by 10 to 25 % whatever its length, so short runs in
// alternating rounds, with medians, give steadier figures for the time than
// long runs.
type sideSpec struct {
	spec   string
	field  int
	metric string
	target string
}

var sides = []sideSpec{
	{"write_bw -s 65536 -n 1000", 4, "BW average [MiB/s]", ">= 0.95"},
	{"write_bw -s 2 -n 20000", 5, "MsgRate [Mpps]", ">= 0.95"},
	{"send_lat -s 2 -n 5000", 5, "t_typical [usec]", "<= 1.05"},
}

// labSides are the comparisons of the pvrdma lab, where RDMA WRITE does
// not run and every work request must be signalled (-Q 1). (perftest 6.06
// labels its bandwidth MB/sec, but its unit is already 2^20 bytes: no
// conversion.)
var labSides = []sideSpec{
	{"send_bw -s 65536 -n 200 -Q 1", 4, "BW average [MiB/s]", ">= 0.95"},
	{"send_bw -s 2 -n 2000 -Q 1", 5, "MsgRate [Mpps]", ">= 0.95"},
	{"send_lat -s 2 -n 1000", 5, "t_typical [usec]", "<= 1.05"},
}

// TestSideBySide runs perftest against perftest and pvperf against pvperf
// alternately, -guest.rounds times per comparison, and logs every round's
// values, their medians and the ratios. A round where perftest prints no
// usable value (under TCG it may fail to measure the CPU clock and print 0
// or inf) is left out; a comparison fails when a run fails or pvperf gives
// no value, and skips, saying so, when perftest gives none in any round.
func TestSideBySide(t *testing.T) {
	needDevice(t)
	var table strings.Builder
	fmt.Fprintf(&table, "%-28s %-20s %12s %12s %10s   %-8s %s\n", "test", "metric", "perftest", "pvperf", "pvperf/pt", "target", "wall pvperf/pt")
	specs := sides
	if *lab == "qemu-pvrdma" {
		specs = labSides
	}
	for _, c := range specs {
		t.Run(strings.ReplaceAll(c.spec, " ", "_"), func(t *testing.T) {
			test, opts, _ := strings.Cut(c.spec, " ")
			a := append(common(), strings.Fields(opts)...)
			var ptv, pvv, ratios []float64
			// The wall time of each pair, start to end: a figure no clock
			// calibration of either tool can distort.
			var walls [2][]float64
			var notes []string
			for r := 1; r <= *rounds; r++ {
				var round [2]float64
				for i, cmd := range []string{pt(test), pv(test)} {
					p := pair{server: cmd, client: cmd, args: a, timeout: max(*runTimeout, 2*time.Minute)}
					res := p.run()
					t.Logf("round %d, %s:", r, cmd)
					res.log(t, p, true)
					if res.err != nil {
						t.Errorf("round %d, %s: %v", r, cmd, res.err)
						continue
					}
					walls[i] = append(walls[i], res.took.Seconds())
					s := field(res.client, c.field)
					v, err := strconv.ParseFloat(s, 64)
					if err != nil || !(v > 0) || v > 1e300 {
						notes = append(notes, fmt.Sprintf("round %d %s left out: %q", r, cmd, s))
						continue
					}
					round[i] = v
				}
				if round[0] > 0 {
					ptv = append(ptv, round[0])
				}
				if round[1] > 0 {
					pvv = append(pvv, round[1])
				}
				if round[0] > 0 && round[1] > 0 {
					ratios = append(ratios, round[1]/round[0])
				}
			}
			mpt, mpv := median(ptv), median(pvv)
			ratio := "n/a"
			if mpt > 0 && mpv > 0 {
				ratio = fmt.Sprintf("%.3f", mpv/mpt)
			}
			wall := "n/a"
			if w0, w1 := median(walls[0]), median(walls[1]); w0 > 0 && w1 > 0 {
				wall = fmt.Sprintf("%.0fs/%.0fs = %.2f", w1, w0, w1/w0)
			}
			fmt.Fprintf(&table, "%-28s %-20s %12s %12s %10s   %-8s %s\n", c.spec, c.metric, num(mpt), num(mpv), ratio, c.target, wall)
			t.Logf("%s, every round:\n    perftest  %v\n    pvperf    %v\n    ratio     %v (median %s)\n%s",
				c.spec, ptv, pvv, rounded(ratios), num(median(ratios)), strings.Join(notes, "\n"))
			switch {
			case t.Failed():
			case len(pvv) == 0:
				t.Errorf("pvperf gave no usable value: %s", strings.Join(notes, "; "))
			case len(ptv) == 0:
				t.Skipf("perftest gave no usable value in %d rounds (%s): no ratio", *rounds, strings.Join(notes, "; "))
			default:
				t.Logf("ratio %s (target %s)", ratio, c.target)
			}
		})
	}
	// The table also goes to stdout as it is, between markers, for the
	// scripts' summaries.
	fmt.Printf("PVPERF-SIDE-BEGIN\nside by side on %s (medians of %d rounds; ratios are reported, not judged):\n%sPVPERF-SIDE-END\n",
		*device, *rounds, table.String())
}

// median is the median of v, or 0 when v is empty.
func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

func num(v float64) string {
	if v == 0 {
		return "n/a"
	}
	return strconv.FormatFloat(v, 'g', 6, 64)
}

func rounded(v []float64) []string {
	out := make([]string, len(v))
	for i, x := range v {
		out[i] = fmt.Sprintf("%.3f", x)
	}
	return out
}
