package reports

import (
	"strings"
	"testing"

	"github.com/pvperf/pvperf/internal/browsertest"
)

// The HTML report in a real browser (package browsertest): the test
// fails on any console message (the page has no script, so any message is
// an error such as a resource that failed to load or a script error) and
// when the charts' series colors are missing from the screenshot. Run
// with -artifacts to keep the screenshot.

func TestHTMLBrowser(t *testing.T) {
	chromium := browsertest.Require(t)

	// The console check sees a script error: without this, a browser that
	// logs nothing would let the check pass whatever the page does.
	t.Run("detects console errors", func(t *testing.T) {
		page := "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"/><title>x</title></head>" +
			"<body><p>x</p><script>throw new Error(\"injected failure\")</script></body></html>\n"
		_, _, problems := browsertest.Screenshot(t, chromium, page, 200)
		found := false
		for _, p := range problems {
			if strings.Contains(p, "Uncaught") && strings.Contains(p, "injected failure") {
				found = true
			}
		}
		if !found {
			t.Errorf("the thrown error was not detected; console problems: %q", problems)
		}
	})

	// The color check sees charts that did not draw: a page of the same
	// runs without its charts has none of their colors.
	t.Run("detects missing charts", func(t *testing.T) {
		page := writeHTML(t, htmlOverlayRuns())
		for {
			i := strings.Index(page, "<svg")
			if i < 0 {
				break
			}
			j := strings.Index(page[i:], "</svg>") + i + len("</svg>")
			page = page[:i] + page[j:]
		}
		img, _, problems := browsertest.Screenshot(t, chromium, page, 1400)
		if len(problems) != 0 {
			t.Errorf("console: %q", problems)
		}
		for _, col := range chartPalette[:2] {
			if n := browsertest.ColorPixels(img, col, 10); n >= 300 {
				t.Errorf("#%02x%02x%02x: %d pixels without charts", col.R, col.G, col.B, n)
			}
		}
	})

	for _, c := range []struct {
		name string
		runs []Run
		// lines are the series whose colors must show in quantity,
		// absent those of series that do not exist.
		lines, series int
	}{
		{"overlay", htmlOverlayRuns(), 2, 2},
		// The fixture's p90, p99 and p99.9 are within a few percent of
		// each other: their lines overlap, and only the lowest and the
		// highest are sure to show in full.
		{"send_lat", []Run{fixtureLat(3)}, 1, len(latPercentiles)},
	} {
		t.Run(c.name, func(t *testing.T) {
			page := writeHTML(t, c.runs)
			img, shot, problems := browsertest.Screenshot(t, chromium, page, 1400)
			browsertest.SaveArtifact(t, "html_"+c.name+".png", shot)
			for _, p := range problems {
				t.Errorf("console: %s", p)
			}
			if f := browsertest.NonWhite(img); f < 0.03 {
				t.Errorf("screenshot is %.1f%% non-white: blank page?", 100*f)
			}
			// A line across a chart is hundreds of pixels of its color;
			// a legend sample alone is a few dozen.
			want := chartPalette[:c.lines]
			if c.lines < c.series {
				want = append(want[:c.lines:c.lines], chartPalette[c.series-1])
			}
			for _, col := range want {
				if n := browsertest.ColorPixels(img, col, 10); n < 300 {
					t.Errorf("#%02x%02x%02x: %d pixels, want at least 300", col.R, col.G, col.B, n)
				} else {
					t.Logf("#%02x%02x%02x: %d pixels", col.R, col.G, col.B, n)
				}
			}
			for _, col := range chartPalette[c.series:] {
				if n := browsertest.ColorPixels(img, col, 10); n > 20 {
					t.Errorf("#%02x%02x%02x: %d pixels of a series that does not exist", col.R, col.G, col.B, n)
				}
			}
		})
	}
}
