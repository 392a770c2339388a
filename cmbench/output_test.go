package cmbench

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite the testdata/*.golden files")

// fixed is a result with known figures.
func fixed() *Result {
	r := &Result{Role: Client, Device: "rxe0", Server: "10.77.0.1:18515", Conns: 100,
		Elapsed: 81250 * time.Microsecond, ConnsPerSec: 100 / 0.08125}
	for i, s := range roleSteps[Client] {
		d := time.Duration(i+1) * 10 * time.Microsecond
		st := StepStat{Step: s, Min: d, P50: 2 * d, P90: 3 * d, P99: 4 * d, Max: 5 * d, Mean: 2*d + 500*time.Nanosecond}
		switch s {
		case RTRQP, RTSQP, Establish:
		case FullConnect:
			st.Wall = r.Elapsed
		default:
			st.Wall = 100 * d
		}
		r.Steps = append(r.Steps, st)
	}
	return r
}

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs (go test -update rewrites it):\n%s", path, got)
	}
}

func TestText(t *testing.T) {
	var b bytes.Buffer
	if err := fixed().WriteText(&b, "RDMA_CM connection setup (RC)"); err != nil {
		t.Fatal(err)
	}
	golden(t, "client.txt.golden", b.Bytes())
}

func TestJSON(t *testing.T) {
	var b bytes.Buffer
	if err := WriteJSON(&b, "cm_setup", "1.0", []*Result{fixed()}); err != nil {
		t.Fatal(err)
	}
	golden(t, "client.json.golden", b.Bytes())
	var v struct {
		Results []struct {
			Role        string  `json:"role"`
			Conns       int     `json:"connections"`
			ConnsPerSec float64 `json:"connections_per_sec"`
			Steps       []struct {
				Step  string  `json:"step"`
				P99US float64 `json:"p99_us"`
			} `json:"steps"`
		} `json:"results"`
	}
	if err := json.Unmarshal(b.Bytes(), &v); err != nil {
		t.Fatal(err)
	}
	if r := v.Results[0]; r.Role != "client" || r.Conns != 100 || r.ConnsPerSec != 1230.7692307692307 ||
		len(r.Steps) != len(roleSteps[Client]) || r.Steps[1].Step != "resolve addr" || r.Steps[1].P99US != 80 {
		t.Errorf("decoded %+v", r)
	}
}

func TestCSV(t *testing.T) {
	var b bytes.Buffer
	r := fixed()
	if err := r.WriteCSV(&b, true); err != nil {
		t.Fatal(err)
	}
	golden(t, "client.csv.golden", b.Bytes())
	rows, err := csv.NewReader(bytes.NewReader(b.Bytes())).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1+len(r.Steps) || len(rows[0]) != len(csvHeader) {
		t.Errorf("%d rows of %d fields", len(rows), len(rows[0]))
	}
}
