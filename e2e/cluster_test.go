package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// clusterRun starts n ranks of "pvperf cluster" on the emulated device,
// ranks given with --rank and --size, and returns them (rank 0 first).
// skip lists ranks not started.
func clusterRun(t *testing.T, ctx context.Context, n int, opts []string, test []string, skip ...int) []*proc {
	ps, _ := clusterRunPort(t, ctx, n, opts, test, skip...)
	return ps
}

// clusterRunPort is clusterRun, with the base port of the tests' servers.
func clusterRunPort(t *testing.T, ctx context.Context, n int, opts []string, test []string, skip ...int) ([]*proc, string) {
	t.Helper()
	b := freePort(t)
	base := strconv.Itoa(b)
	// The rendezvous must not be one of the servers' ports, base to
	// base + n/2.
	rdv := freePort(t)
	for rdv >= b && rdv <= b+n/2 {
		rdv = freePort(t)
	}
	var ps []*proc
	for r := range n {
		if contains(skip, r) {
			continue
		}
		args := append([]string{"cluster", "--rank", strconv.Itoa(r), "--size", strconv.Itoa(n),
			"--rendezvous", fmt.Sprintf("127.0.0.1:%d", rdv), "--base-port", base}, opts...)
		ps = append(ps, start(t, ctx, "pvperf", append(args, test...)...))
	}
	return ps, base
}

func contains(s []int, v int) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// TestClusterAllPairs: four processes test every pair of ranks with
// write_bw on the emulated device; rank 0 prints the rounds and the
// matrix and writes the JSON, CSV and HTML reports; every rank exits 0.
func TestClusterAllPairs(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir := t.TempDir()
	js, csvFile, html := filepath.Join(dir, "m.json"), filepath.Join(dir, "m.csv"), filepath.Join(dir, "m.html")
	ps := clusterRun(t, ctx, 4, []string{"--out_json", js, "--out_csv", csvFile, "--out_html", html}, []string{"write_bw", "-d", "emu0", "-n", "500"})
	for i, p := range ps {
		if code, err := p.wait(); code != 0 || err != nil {
			t.Errorf("rank %d: exit %d (%v)\n%s%s", i, code, err, p.stdout.String(), p.stderr.String())
		}
	}
	out := ps[0].stdout.String()
	for _, want := range []string{"round 1/3", "round 3/3", "server\\client", "data path: memory copy (6 links)", "0 of 6 links failing"} {
		if !strings.Contains(out, want) {
			t.Errorf("rank 0's output lacks %q:\n%s", want, out)
		}
	}
	var rep struct {
		Schema string
		Size   int
		Rounds int
		Links  []struct {
			Server, Client int
			Value          float64
			Status         string
			DataPath       string `json:"data_path"`
		}
		Matrix  [][]*float64
		Failing []any
	}
	b, err := os.ReadFile(js)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatalf("JSON report: %v", err)
	}
	if rep.Schema != "pvperf-cluster/1" || rep.Size != 4 || rep.Rounds != 3 || len(rep.Links) != 6 || len(rep.Failing) != 0 {
		t.Fatalf("report: %+v", rep)
	}
	pairs := map[[2]int]bool{}
	for _, l := range rep.Links {
		if l.Status != "ok" || !(l.Value > 0) || rep.Matrix[l.Server][l.Client] == nil || *rep.Matrix[l.Server][l.Client] != l.Value {
			t.Errorf("link %+v", l)
		}
		if l.DataPath != "memory copy (emulated device)" { // the ranks share this host
			t.Errorf("link %d->%d: data path %q", l.Server, l.Client, l.DataPath)
		}
		pairs[[2]int{min(l.Server, l.Client), max(l.Server, l.Client)}] = true
	}
	if len(pairs) != 6 {
		t.Errorf("%d distinct pairs", len(pairs))
	}
	if c, _ := os.ReadFile(csvFile); strings.Count(string(c), "\n") != 7 || strings.Count(string(c), ",memory copy (emulated device)\n") != 6 {
		t.Errorf("CSV:\n%s", c)
	}
	if h, _ := os.ReadFile(html); !strings.Contains(string(h), `id="matrix"`) || !strings.Contains(string(h), "Data path: memory copy (6 links).") {
		t.Errorf("HTML has no matrix or no data path:\n%s", h)
	}
}

// TestClusterThreshold: a bandwidth no link reaches makes rank 0 exit 1
// and name every link.
func TestClusterThreshold(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ps := clusterRun(t, ctx, 3, []string{"--pattern", "ring", "--min_bw", "1e12"}, []string{"write_bw", "-d", "emu0", "-n", "200"})
	code, _ := ps[0].wait()
	for _, p := range ps[1:] {
		if c, _ := p.wait(); c != 0 {
			t.Errorf("rank exit %d: %s", c, p.stderr.String())
		}
	}
	out := ps[0].stdout.String() + ps[0].stderr.String()
	if code != 1 || strings.Count(out, "FAILING link") != 3 || !strings.Contains(out, "below --min_bw") || !strings.Contains(out, "3 of 3 links failing") {
		t.Errorf("exit %d:\n%s", code, out)
	}
}

// TestClusterMissingRank: a rank that never arrives fails the rendezvous
// in its bounded time, naming the rank, and the others exit non-zero.
func TestClusterMissingRank(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ps := clusterRun(t, ctx, 3, []string{"--rendezvous-timeout", "2s"}, []string{"send_lat", "-d", "emu0", "-n", "100"}, 2)
	code, _ := ps[0].wait()
	out := ps[0].stderr.String()
	if code != 1 || !strings.Contains(out, "2 of 3 ranks arrived") || !strings.Contains(out, "missing: 2") {
		t.Errorf("rank 0: exit %d: %s", code, out)
	}
	if c, _ := ps[1].wait(); c == 0 || !strings.Contains(ps[1].stderr.String(), "aborted") {
		t.Errorf("rank 1: exit %d: %s", c, ps[1].stderr.String())
	}
}

// TestClusterRankDies: a rank killed during the run fails its own pairs,
// named, and not the others'; rank 0 exits 1, the surviving ranks 0.
func TestClusterRankDies(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// A ring of 3: 0->1, then 1->2, then 2->0.
	ps, base := clusterRunPort(t, ctx, 3, []string{"--pattern", "ring", "--pair-timeout", "30s"}, []string{"write_bw", "-d", "emu0", "-D", "2"})
	// Round 1's server (rank 0) uses the base port (it listens, then
	// keeps its client's connection): the run is past the rendezvous.
	for deadline := time.Now().Add(30 * time.Second); !tcpPort(base, false); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("round 1 does not start")
		}
	}
	if err := ps[2].cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	code, _ := ps[0].wait()
	out := ps[0].stdout.String()
	if code != 1 {
		t.Errorf("rank 0: exit %d:\n%s%s", code, out, ps[0].stderr.String())
	}
	for _, want := range []string{"FAILING link 1", "FAILING link 2", "rank 2 left", "2 of 3 links failing"} {
		if !strings.Contains(out, want) {
			t.Errorf("rank 0's output lacks %q:\n%s", want, out)
		}
	}
	if c, _ := ps[1].wait(); c != 0 {
		t.Errorf("rank 1: exit %d: %s", c, ps[1].stderr.String())
	}
	_, _ = ps[2].wait()
}
