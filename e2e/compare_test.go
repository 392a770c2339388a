package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestCompare runs pvperf compare with write_bw under its two names (the
// perftest name prints perftest's text alone): both give values, the
// ratio comes with an interval that contains it, and the JSON file holds
// every round.
func TestCompare(t *testing.T) {
	dir := t.TempDir()
	if err := os.Symlink(filepath.Join(binDir, "pvperf"), filepath.Join(dir, "ib_write_bw")); err != nil {
		t.Fatal(err)
	}
	port := strconv.Itoa(freePort(t))
	js := filepath.Join(dir, "cmp.json")
	cmd := exec.Command(filepath.Join(binDir, "pvperf"), "compare", "--rounds", "3", "--json", js,
		filepath.Join(dir, "ib_write_bw"), filepath.Join(binDir, "write_bw"), "--", "-d", "emu0", "-n", "500", "-p", port)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if !strings.Contains(string(out), "BW average[MiB/sec], 3 rounds") || !strings.Contains(string(out), " ratio ") {
		t.Errorf("no summary in:\n%s", out)
	}
	var r struct {
		Rounds           int       `json:"rounds"`
		Base             []float64 `json:"base_values"`
		Cand             []float64 `json:"candidate_values"`
		Ratio, Low, High float64
	}
	b, err := os.ReadFile(js)
	if err != nil {
		t.Fatal(err)
	}
	var raw map[string]any
	if err := json.Unmarshal(b, &raw); err != nil {
		t.Fatal(err)
	}
	_ = json.Unmarshal(b, &r)
	r.Ratio, _ = raw["ratio"].(float64)
	r.Low, _ = raw["ratio_ci_low"].(float64)
	r.High, _ = raw["ratio_ci_high"].(float64)
	if r.Rounds != 3 || len(r.Base) != 3 || len(r.Cand) != 3 || !(r.Low <= r.Ratio && r.Ratio <= r.High) || !(r.Ratio > 0) {
		t.Errorf("JSON %s", b)
	}
}

// TestCompareDuration: with -D the values are the result row's, not the
// seconds pvperf prints before it (a BW average, not the message size),
// and two commands that run different tests are refused.
func TestCompareDuration(t *testing.T) {
	pv := filepath.Join(binDir, "pvperf")
	port := strconv.Itoa(freePort(t))
	js := filepath.Join(t.TempDir(), "cmp.json")
	out, err := exec.Command(pv, "compare", "--rounds", "2", "--json", js, pv+" write_bw", filepath.Join(binDir, "write_bw"),
		"--", "-d", "emu0", "-D", "1", "-s", "4096", "-p", port).CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	var r struct {
		Base []float64 `json:"base_values"`
	}
	if b, err := os.ReadFile(js); err != nil || json.Unmarshal(b, &r) != nil || len(r.Base) != 2 {
		t.Fatalf("JSON (%v): %+v", err, r)
	}
	for _, v := range r.Base {
		if v == 4096 {
			t.Errorf("a value is the message size: %v\n%s", r.Base, out)
		}
	}
	out, err = exec.Command(pv, "compare", "--rounds", "2", filepath.Join(binDir, "write_bw"), filepath.Join(binDir, "send_lat"),
		"--", "-d", "emu0", "-n", "100", "-p", port).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "the two commands print different results") {
		t.Errorf("different tests: %v\n%s", err, out)
	}
}
