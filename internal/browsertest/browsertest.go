// Package browsertest loads HTML pages in a real browser for tests:
// headless Chromium renders a page from a file, without network, and
// takes a screenshot; the console's messages come back with it. It is
// imported by tests only.
//
// PVPERF_CHROMIUM names the browser; otherwise /usr/bin/chromium,
// chromium, chromium-browser or google-chrome from PATH. Without one,
// Require skips the test, unless PVPERF_REQUIRE_BROWSER=1 (as in CI).
package browsertest

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

// Find returns the browser's path, or "".
func Find() string {
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

// Require returns the browser's path, or skips t (fails it with
// PVPERF_REQUIRE_BROWSER=1) when there is none.
func Require(t *testing.T) string {
	t.Helper()
	p := Find()
	if p == "" {
		if os.Getenv("PVPERF_REQUIRE_BROWSER") == "1" {
			t.Fatal("no Chromium found (set PVPERF_CHROMIUM) and PVPERF_REQUIRE_BROWSER=1")
		}
		t.Skip("no Chromium found: set PVPERF_CHROMIUM to test the HTML report in a browser")
	}
	return p
}

// Screenshot loads page in headless Chromium at 1280×height pixels and
// returns the screenshot and the console problems found in the browser's
// log.
func Screenshot(t *testing.T, chromium, page string, height int) (image.Image, []byte, []string) {
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
	return img, b, ConsoleProblems(stderr.String())
}

// ConsoleProblems are the lines of Chromium's log that report a console
// message or an uncaught exception. Chromium logs console messages as
// "INFO:CONSOLE" whatever their level, so every one counts: the report
// has no script, and what the browser itself puts on the console (a
// resource it could not load, a blocked request) is an error.
func ConsoleProblems(log string) []string {
	var p []string
	for line := range strings.Lines(log) {
		if strings.Contains(line, "CONSOLE") || strings.Contains(line, "Uncaught") {
			p = append(p, strings.TrimSpace(line))
		}
	}
	return p
}

// ColorPixels counts the pixels of img within tol of c in every channel.
func ColorPixels(img image.Image, c color.RGBA, tol int) int {
	n := 0
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			r, g, bl, _ := img.At(x, y).RGBA()
			if Near(int(r>>8), int(c.R), tol) && Near(int(g>>8), int(c.G), tol) && Near(int(bl>>8), int(c.B), tol) {
				n++
			}
		}
	}
	return n
}

// Near tells whether a and b differ by at most tol.
func Near(a, b, tol int) bool { return a-b <= tol && b-a <= tol }

// NonWhite is the fraction of the pixels of img that are not (nearly)
// white.
func NonWhite(img image.Image) float64 {
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

// SaveArtifact writes the screenshot where a developer can look at it.
func SaveArtifact(t *testing.T, name string, png []byte) {
	t.Helper()
	path := filepath.Join(t.ArtifactDir(), name)
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s (kept with go test -artifacts)", path)
}
