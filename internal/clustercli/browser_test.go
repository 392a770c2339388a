package clustercli

import (
	"bytes"
	"image/color"
	"testing"

	"github.com/pvperf/pvperf/cluster"
	"github.com/pvperf/pvperf/internal/browsertest"
)

// The cluster's HTML report in a real browser: no console message, the
// heatmap's best (green) and worst (red) links drawn, the failing link
// outlined.
func TestHTMLBrowser(t *testing.T) {
	chromium := browsertest.Require(t)
	res := &cluster.Results{
		Members: []cluster.Member{{Rank: 0, Host: "a"}, {Rank: 1, Host: "b"}, {Rank: 2, Host: "c"}, {Rank: 3, Host: "d"}},
		Rounds:  3,
		Pairs: []cluster.PairResult{
			{Round: 1, Server: 0, Client: 1, Value: 100}, {Round: 1, Server: 2, Client: 3, Value: 20},
			{Round: 2, Server: 0, Client: 2, Value: 90}, {Round: 2, Server: 3, Client: 1, Value: 60},
			{Round: 3, Server: 0, Client: 3, Value: 95}, {Round: 3, Server: 1, Client: 2, Err: "gone"},
		},
	}
	rep := cluster.NewReport("write_bw", nil, "slurm", cluster.Metric{Name: "bw_average", Unit: "MiB/s", HigherIsBetter: true},
		cluster.Thresholds{MinBW: 50}, cluster.AllPairs, res)
	var b bytes.Buffer
	if err := rep.WriteHTML(&b); err != nil {
		t.Fatal(err)
	}
	img, shot, problems := browsertest.Screenshot(t, chromium, b.String(), 900)
	browsertest.SaveArtifact(t, "cluster.png", shot)
	if len(problems) != 0 {
		t.Errorf("console: %q", problems)
	}
	// hsl(120,70%,75%) is the best link, hsl(0,70%,75%) the worst, #b00
	// the failing links' outline.
	for _, c := range []struct {
		name string
		col  color.RGBA
		min  int
	}{
		{"best (green)", color.RGBA{146, 236, 146, 255}, 200},
		{"worst (red)", color.RGBA{236, 146, 146, 255}, 200},
		{"failing outline", color.RGBA{0xbb, 0, 0, 255}, 50},
	} {
		if n := browsertest.ColorPixels(img, c.col, 12); n < c.min {
			t.Errorf("%s: %d pixels of %v, want at least %d", c.name, n, c.col, c.min)
		}
	}
}
