package clustercli

import (
	"bytes"
	"strings"
	"testing"

	"github.com/pvperf/pvperf/cluster"
	"github.com/pvperf/pvperf/launch"
	"github.com/pvperf/pvperf/reports"
)

func call(env map[string]string, args ...string) (int, string, string) {
	var o, e bytes.Buffer
	getenv := func(k string) (string, bool) {
		v, ok := env[k]
		return v, ok
	}
	rc := MainEnv(args, getenv, &o, &e)
	return rc, o.String(), e.String()
}

func TestUsageErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{nil, "no test"},
		{[]string{"--pattern", "star", "write_bw"}, "unknown pattern"},
		{[]string{"write_bandwidth"}, `pvperf cluster: write_bandwidth: unknown test "write_bandwidth"`},
		{[]string{"write_bw", "-a"}, "-a (one size per run)"},
		{[]string{"write_bw", "--run_infinitely"}, "--run_infinitely (a pair's test must end)"},
		{[]string{"write_bw", "--loopback"}, "--loopback"},
		{[]string{"write_bw", "-p", "7000"}, "-p (the cluster chooses the ports)"},
		{[]string{"write_bw", "--out_json"}, "output files"},
		{[]string{"--max_lat", "5", "write_bw"}, "--max_lat with a bandwidth test"},
		{[]string{"--min_bw", "5", "send_lat"}, "--min_bw with a latency test"},
		{[]string{"--below_median", "150", "send_lat"}, "a percentage at most 100"},
		{[]string{"--min_bw", "-1", "write_bw"}, "not negative"},
		{[]string{"--min_bw", "inf", "write_bw"}, "thresholds: --min_bw +Inf"},
		{[]string{"--max_lat", "nan", "send_lat"}, "thresholds: --min_bw 0, --max_lat NaN"},
		{[]string{"--below_median", "NaN", "send_lat"}, "--below_median NaN"},
		{[]string{"--pair-timeout", "0s", "write_bw"}, "timeouts must be positive"},
		{[]string{"write_bw", "-s", "notasize"}, "write_bw -s notasize"},
		{[]string{"send_lat", "localhost"}, "the cluster chooses each pair's peer: give no host (localhost)"},
		{[]string{"--size", "1", "--rank", "0", "send_lat"}, "--size 1: a pair needs 2 ranks"},
		{[]string{"--size", "0", "--rank", "0", "send_lat"}, "--size 0: a pair needs 2 ranks"},
		{[]string{"--size", "2", "--rank", "-2", "send_lat"}, "--rank -2: ranks count from 0"},
		{[]string{"--size", "2", "--rank", "2", "send_lat"}, "--rank 2: ranks count from 0"},
	} {
		rc, out, errOut := call(nil, c.args...)
		if rc != ExitUsage || !strings.Contains(errOut, c.want) || out != "" {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want exit %d and %q", c.args, rc, out, errOut, ExitUsage, c.want)
		}
	}
	// A report file that cannot be written is refused before the run,
	// and an error's package prefix is not said twice.
	dir := t.TempDir()
	for _, flag := range []string{"--out_json", "--out_csv", "--out_html"} {
		rc, _, errOut := call(nil, "--size", "2", "--rank", "0", "--rendezvous", "127.0.0.1:1", flag, dir+"/none/r", "write_bw")
		if rc != ExitUsage || !strings.Contains(errOut, "pvperf cluster: report file: open "+dir+"/none/r: no such file or directory") {
			t.Errorf("%s into a missing directory: exit %d, stderr %q", flag, rc, errOut)
		}
	}
	if rc, out, _ := call(nil, "--help"); rc != ExitOK || !strings.Contains(out, "Usage: pvperf cluster") {
		t.Errorf("--help: exit %d, %q", rc, out)
	}
}

// A launcher environment that is incomplete or contradicts itself is
// refused, naming the variable; so is one that does not say where rank 0
// is.
func TestLauncherErrors(t *testing.T) {
	for _, c := range []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{}, "no launcher found"},
		{map[string]string{"SLURM_PROCID": "1"}, "SLURM_NTASKS is not set"},
		{map[string]string{"SLURM_PROCID": "0", "SLURM_NTASKS": "2", "SLURM_STEP_NODELIST": "n[1-"}, "SLURM_STEP_NODELIST"},
		{map[string]string{"OMPI_COMM_WORLD_RANK": "0", "OMPI_COMM_WORLD_SIZE": "4", "OMPI_COMM_WORLD_LOCAL_SIZE": "2"}, "give --rendezvous"},
		{map[string]string{"JOB_COMPLETION_INDEX": "0"}, "PVPERF_SIZE"},
		{map[string]string{"JOB_COMPLETION_INDEX": "2", "PVPERF_SIZE": "4", "HOSTNAME": "pvperf-2"}, "set PVPERF_SERVICE"},
		{map[string]string{"JOB_COMPLETION_INDEX": "2", "PVPERF_SIZE": "4", "HOSTNAME": "other", "PVPERF_SERVICE": "s"}, `HOSTNAME="other" is not the pod's name <job>-<index> for index 2`},
		{map[string]string{"OMPI_COMM_WORLD_RANK": "0", "OMPI_COMM_WORLD_SIZE": "1"}, "1 rank(s): a pair needs 2"},
		{map[string]string{"PMI_RANK": "1", "PMI_SIZE": "2", "PVPERF_RENDEZVOUS": "head:notaport"}, `rendezvous "head:notaport": not HOST:PORT`},
		{map[string]string{"PMI_RANK": "1", "PMI_SIZE": "2", "PVPERF_RENDEZVOUS": "127.0.0.1:99999"}, "a port from 1 to 65535"},
		{map[string]string{"PMI_FD": "99", "PMI_RANK": "1", "PMI_SIZE": "2"}, "PMI_FD=99 is not a usable socket: bad file descriptor"},
	} {
		rc, _, errOut := call(c.env, "write_bw", "-d", "emu0")
		if rc != ExitUsage || !strings.Contains(errOut, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want %q", c.env, rc, errOut, c.want)
		}
	}
}

// The rendezvous address each launcher leads to.
func TestRendezvousAddr(t *testing.T) {
	for _, c := range []struct {
		env  map[string]string
		flag string
		want string
	}{
		{map[string]string{"SLURM_PROCID": "1", "SLURM_NTASKS": "4", "SLURM_STEP_NODELIST": "gpu[07-08]"}, "", "gpu07:18600"},
		{map[string]string{"JOB_COMPLETION_INDEX": "3", "PVPERF_SIZE": "4", "HOSTNAME": "pvperf-mesh-3", "PVPERF_SERVICE": "pvperf"}, "", "pvperf-mesh-0.pvperf:18600"},
		{map[string]string{"OMPI_COMM_WORLD_RANK": "1", "OMPI_COMM_WORLD_SIZE": "4", "OMPI_COMM_WORLD_LOCAL_SIZE": "4"}, "", "127.0.0.1:18600"},
		{map[string]string{"PMI_RANK": "1", "PMI_SIZE": "2", "PVPERF_RENDEZVOUS": "head:7000"}, "", "head:7000"},
		{map[string]string{"SLURM_PROCID": "1", "SLURM_NTASKS": "4", "SLURM_STEP_NODELIST": "gpu[07-08]"}, "10.1.2.3", "10.1.2.3:18600"},
	} {
		o, _, ok := parse([]string{"--rendezvous=" + c.flag, "write_bw"}, &bytes.Buffer{}, &bytes.Buffer{})
		if !ok {
			t.Fatal("parse failed")
		}
		getenv := func(k string) (string, bool) { v, ok := c.env[k]; return v, ok }
		info, err := launch.Detect(getenv, launch.Overrides{Rank: -1, Size: -1})
		if err != nil {
			t.Fatal(err)
		}
		got, err := rendezvousAddr(o, info, getenv)
		if err != nil || got != c.want {
			t.Errorf("%v %q: %q, %v; want %q", c.env, c.flag, got, err, c.want)
		}
	}
}

func TestLoopbackOnly(t *testing.T) {
	for host, want := range map[string]bool{"127.0.0.1": true, "::1": true, "localhost": true, "10.0.0.1": false, "": false} {
		if got := loopbackOnly(host); got != want {
			t.Errorf("loopbackOnly(%q) = %v", host, got)
		}
	}
}

// TestValueOfRepeatedTest: a pair's figure is its row's, or, when the test
// was repeated (--repeat), the median of its runs rather than the last
// run's value.
func TestValueOfRepeatedTest(t *testing.T) {
	bw := cluster.Metric{Name: "bw_average", Unit: "MiB/s"}
	r := reports.Run{Results: []reports.Result{{Side: reports.SideLocal, Size: 65536,
		BW: &reports.BWStats{AverageMiBps: 21971.83, AverageGbps: 184.3}}}}
	if v := value(r, bw); v != 21971.83 {
		t.Errorf("one run: %v, want the row's 21971.83", v)
	}
	r.Repeats = &reports.Repeats{Runs: 3, Rows: []reports.RepeatRow{
		{Side: reports.SideLocal, Size: 65536, Metric: "average_MiB_per_s", Median: 31878.22},
		{Side: reports.SideLocal, Size: 65536, Metric: "average_Gb_per_s", Median: 267.4},
	}}
	if v := value(r, bw); v != 31878.22 {
		t.Errorf("three runs: %v, want their median 31878.22", v)
	}
	if v := value(r, cluster.Metric{Name: "bw_average", Unit: "Gb/s"}); v != 267.4 {
		t.Errorf("three runs in Gb/s: %v, want their median 267.4", v)
	}
}
