package reports

import (
	"bytes"
	"context"
	"image"
	"image/color"
	"image/png"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The HTML report in a real browser: headless Chromium loads the page from
// a file, without network, and takes a screenshot. The test fails on any
// console message (the page has no script, so any message is an error
// such as a resource that failed to load or a script error) and when the
// charts' series colors are missing from the screenshot.
//
// PVPERF_CHROMIUM names the browser; otherwise /usr/bin/chromium,
// chromium, chromium-browser or google-chrome from PATH. Without one the
// test is skipped, unless PVPERF_REQUIRE_BROWSER=1 (as in CI). Run with
// -artifacts to keep the screenshot.

// findChromium returns the browser's path, or "".
func findChromium() string {
	if p := os.Getenv("PVPERF_CHROMIUM"); p != "" {
		return p
	}
	if _, err := os.Stat("/usr/bin/chromium"); err == nil {
		return "/usr/bin/chromium"
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

func requireChromium(t *testing.T) string {
	t.Helper()
	p := findChromium()
	if p == "" {
		if os.Getenv("PVPERF_REQUIRE_BROWSER") == "1" {
			t.Fatal("no Chromium found (set PVPERF_CHROMIUM) and PVPERF_REQUIRE_BROWSER=1")
		}
		t.Skip("no Chromium found: set PVPERF_CHROMIUM to test the HTML report in a browser")
	}
	return p
}

// screenshot loads page in headless Chromium at 1280×height pixels and
// returns the screenshot and the console problems found in the browser's
// log.
func screenshot(t *testing.T, chromium, page string, height int) (image.Image, []byte, []string) {
	t.Helper()
	dir := t.TempDir()
	file := filepath.Join(dir, "report.html")
	if err := os.WriteFile(file, []byte(page), 0o644); err != nil {
		t.Fatal(err)
	}
	shot := filepath.Join(dir, "screenshot.png")
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, chromium,
		"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--disable-extensions", "--hide-scrollbars",
		"--user-data-dir="+filepath.Join(dir, "profile"),
		"--enable-logging=stderr", "--v=0",
		"--screenshot="+shot, "--window-size=1280,"+strconv.Itoa(height),
		(&url.URL{Scheme: "file", Path: file}).String())
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	cmd.WaitDelay = 5 * time.Second
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("%s did not finish in time:\n%s", chromium, stderr.Bytes())
	}
	if err != nil {
		t.Fatalf("%s: %v\n%s", chromium, err, stderr.Bytes())
	}
	b, err := os.ReadFile(shot)
	if err != nil {
		t.Fatalf("no screenshot: %v\n%s", err, stderr.Bytes())
	}
	img, err := png.Decode(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	return img, b, consoleProblems(stderr.String())
}

// consoleProblems are the lines of Chromium's log that report a console
// message or an uncaught exception. Chromium logs console messages as
// "INFO:CONSOLE" whatever their level, so every one counts: the report
// has no script, and what the browser itself puts on the console (a
// resource it could not load, a blocked request) is an error.
func consoleProblems(log string) []string {
	var p []string
	for line := range strings.Lines(log) {
		if strings.Contains(line, "CONSOLE") || strings.Contains(line, "Uncaught") {
			p = append(p, strings.TrimSpace(line))
		}
	}
	return p
}

// colorPixels counts the pixels of img within tol of c in every channel.
func colorPixels(img image.Image, c color.RGBA, tol int) int {
	n := 0
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			r, g, bl, _ := img.At(x, y).RGBA()
			if near(int(r>>8), int(c.R), tol) && near(int(g>>8), int(c.G), tol) && near(int(bl>>8), int(c.B), tol) {
				n++
			}
		}
	}
	return n
}

func near(a, b, tol int) bool { return a-b <= tol && b-a <= tol }

// nonWhite is the fraction of the pixels of img that are not (nearly)
// white.
func nonWhite(img image.Image) float64 {
	n := 0
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			r, g, bl, _ := img.At(x, y).RGBA()
			if r>>8 < 240 || g>>8 < 240 || bl>>8 < 240 {
				n++
			}
		}
	}
	return float64(n) / float64(b.Dx()*b.Dy())
}

// saveArtifact writes the screenshot where a developer can look at it.
func saveArtifact(t *testing.T, name string, png []byte) {
	t.Helper()
	path := filepath.Join(t.ArtifactDir(), name)
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s (kept with go test -artifacts)", path)
}

func TestHTMLBrowser(t *testing.T) {
	chromium := requireChromium(t)

	// The console check sees a script error: without this, a browser that
	// logs nothing would let the check pass whatever the page does.
	t.Run("detects console errors", func(t *testing.T) {
		page := "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"/><title>x</title></head>" +
			"<body><p>x</p><script>throw new Error(\"injected failure\")</script></body></html>\n"
		_, _, problems := screenshot(t, chromium, page, 200)
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
		img, _, problems := screenshot(t, chromium, page, 1400)
		if len(problems) != 0 {
			t.Errorf("console: %q", problems)
		}
		for _, col := range chartPalette[:2] {
			if n := colorPixels(img, col, 10); n >= 300 {
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
			img, shot, problems := screenshot(t, chromium, page, 1400)
			saveArtifact(t, "html_"+c.name+".png", shot)
			for _, p := range problems {
				t.Errorf("console: %s", p)
			}
			if f := nonWhite(img); f < 0.03 {
				t.Errorf("screenshot is %.1f%% non-white: blank page?", 100*f)
			}
			// A line across a chart is hundreds of pixels of its color;
			// a legend sample alone is a few dozen.
			want := chartPalette[:c.lines]
			if c.lines < c.series {
				want = append(want[:c.lines:c.lines], chartPalette[c.series-1])
			}
			for _, col := range want {
				if n := colorPixels(img, col, 10); n < 300 {
					t.Errorf("#%02x%02x%02x: %d pixels, want at least 300", col.R, col.G, col.B, n)
				} else {
					t.Logf("#%02x%02x%02x: %d pixels", col.R, col.G, col.B, n)
				}
			}
			for _, col := range chartPalette[c.series:] {
				if n := colorPixels(img, col, 10); n > 20 {
					t.Errorf("#%02x%02x%02x: %d pixels of a series that does not exist", col.R, col.G, col.B, n)
				}
			}
		})
	}
}
