package launch

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

func envOf(kv ...string) func(string) (string, bool) {
	m := map[string]string{}
	for _, s := range kv {
		k, v, _ := strings.Cut(s, "=")
		m[k] = v
	}
	return func(k string) (string, bool) {
		v, ok := m[k]
		return v, ok
	}
}

func TestDetect(t *testing.T) {
	for _, c := range []struct {
		name string
		env  []string
		o    Overrides
		want Info
	}{
		{"slurm", []string{"SLURM_PROCID=5", "SLURM_NTASKS=8", "SLURM_LOCALID=1", "SLURM_NODEID=2", "SLURM_NNODES=4",
			"SLURM_STEP_NODELIST=node[01-03,07]", "SLURM_JOB_ID=42", "SLURM_STEP_ID=0"}, NoOverrides,
			Info{Launcher: Slurm, Rank: 5, Size: 8, LocalRank: 1, Node: 2, Nodes: []string{"node01", "node02", "node03", "node07"}, PMIFD: -1, JobID: "42.0"}},
		{"slurm, SLURM_NPROCS only", []string{"SLURM_PROCID=0", "SLURM_NPROCS=2"}, NoOverrides,
			Info{Launcher: Slurm, Rank: 0, Size: 2, LocalRank: -1, Node: -1, PMIFD: -1}},
		{"pmi first", []string{"PMI_FD=5", "PMI_RANK=1", "PMI_SIZE=4", "SLURM_PROCID=3", "SLURM_NTASKS=4"}, NoOverrides,
			Info{Launcher: PMI, Rank: 1, Size: 4, LocalRank: -1, Node: -1, PMIFD: 5}},
		{"open mpi", []string{"OMPI_COMM_WORLD_RANK=2", "OMPI_COMM_WORLD_SIZE=4", "OMPI_COMM_WORLD_LOCAL_RANK=0", "PMIX_RANK=2", "PMIX_NAMESPACE=prterun-x-1@1"}, NoOverrides,
			Info{Launcher: OpenMPI, Rank: 2, Size: 4, LocalRank: 0, Node: -1, PMIFD: -1, JobID: "prterun-x-1@1"}},
		// mpirun in an sbatch script: its processes inherit the batch
		// step's (or its daemons') SLURM_PROCID.
		{"open mpi in a slurm allocation", []string{"SLURM_PROCID=0", "SLURM_NTASKS=8", "SLURM_JOB_ID=42", "OMPI_COMM_WORLD_RANK=3", "OMPI_COMM_WORLD_SIZE=8"}, NoOverrides,
			Info{Launcher: OpenMPI, Rank: 3, Size: 8, LocalRank: -1, Node: -1, PMIFD: -1}},
		{"pmix", []string{"PMIX_RANK=1", "PMIX_SIZE=3"}, NoOverrides, Info{Launcher: PMIx, Rank: 1, Size: 3, LocalRank: -1, Node: -1, PMIFD: -1}},
		{"hydra", []string{"PMI_RANK=3", "PMI_SIZE=4", "MPI_LOCALRANKID=1"}, NoOverrides, Info{Launcher: MPICH, Rank: 3, Size: 4, LocalRank: 1, Node: -1, PMIFD: -1}},
		{"kubernetes", []string{"JOB_COMPLETION_INDEX=6", "PVPERF_SIZE=8"}, NoOverrides, Info{Launcher: Kubernetes, Rank: 6, Size: 8, LocalRank: -1, Node: -1, PMIFD: -1}},
		{"kubernetes, --size", []string{"JOB_COMPLETION_INDEX=6"}, Overrides{Rank: -1, Size: 7}, Info{Launcher: Kubernetes, Rank: 6, Size: 7, LocalRank: -1, Node: -1, PMIFD: -1}},
		{"flags", nil, Overrides{Rank: 1, Size: 2}, Info{Launcher: Flags, Rank: 1, Size: 2, LocalRank: -1, Node: -1, PMIFD: -1}},
		{"flags override slurm", []string{"SLURM_PROCID=5", "SLURM_NTASKS=8"}, Overrides{Rank: 0, Size: 2},
			Info{Launcher: Slurm, Rank: 0, Size: 2, LocalRank: -1, Node: -1, PMIFD: -1}},
	} {
		got, err := Detect(envOf(c.env...), c.o)
		got.Vars = nil
		if err != nil || !equalInfo(got, c.want) {
			t.Errorf("%s: Detect = %+v, %v; want %+v", c.name, got, err, c.want)
		}
	}
}

func equalInfo(a, b Info) bool {
	return a.Launcher == b.Launcher && a.Rank == b.Rank && a.Size == b.Size && a.LocalRank == b.LocalRank &&
		a.Node == b.Node && slices.Equal(a.Nodes, b.Nodes) && a.PMIFD == b.PMIFD && a.JobID == b.JobID
}

// A bad environment is refused with a message that names the variable.
func TestDetectErrors(t *testing.T) {
	for _, c := range []struct {
		env  []string
		o    Overrides
		want string
	}{
		{nil, NoOverrides, "none of PMI_FD"},
		{nil, Overrides{Rank: 0, Size: -1}, "none of PMI_FD"},
		{[]string{"SLURM_PROCID=1"}, NoOverrides, "SLURM_NTASKS is not set"},
		{[]string{"SLURM_PROCID=x", "SLURM_NTASKS=2"}, NoOverrides, `SLURM_PROCID="x" is not a number`},
		{[]string{"SLURM_PROCID=2", "SLURM_NTASKS=2"}, NoOverrides, "rank 2 is not below the size 2 (SLURM_PROCID, SLURM_NTASKS)"},
		{[]string{"SLURM_PROCID=0", "SLURM_NTASKS=0"}, NoOverrides, "size 0"},
		{[]string{"SLURM_PROCID=0", "SLURM_NTASKS=4", "SLURM_NPROCS=3"}, NoOverrides, "SLURM_NPROCS=3 contradicts SLURM_NTASKS=4"},
		{[]string{"SLURM_PROCID=0", "SLURM_NTASKS=4", "SLURM_STEP_NODELIST=n[1-"}, NoOverrides, "SLURM_STEP_NODELIST"},
		{[]string{"SLURM_PROCID=0", "SLURM_NTASKS=4", "SLURM_NODEID=2", "SLURM_STEP_NODELIST=n[1-2]"}, NoOverrides, "SLURM_NODEID=2, but SLURM_STEP_NODELIST names 2 nodes"},
		{[]string{"SLURM_PROCID=0", "SLURM_NTASKS=4", "SLURM_NNODES=3", "SLURM_STEP_NODELIST=n[1-2]"}, NoOverrides, "SLURM_NNODES=3"},
		{[]string{"SLURM_PROCID=0", "SLURM_NTASKS=1", "SLURM_STEP_NODELIST=n[1-2]"}, NoOverrides, "1 tasks on the 2 nodes"},
		{[]string{"OMPI_COMM_WORLD_RANK=1", "OMPI_COMM_WORLD_SIZE=4", "PMIX_RANK=2"}, NoOverrides, "PMIX_RANK=2 contradicts OMPI_COMM_WORLD_RANK=1"},
		{[]string{"PMI_FD=3", "PMI_SIZE=2"}, NoOverrides, "PMI_RANK is not set"},
		{[]string{"PMI_FD=x", "PMI_RANK=0", "PMI_SIZE=2"}, NoOverrides, `PMI_FD="x"`},
		{[]string{"JOB_COMPLETION_INDEX=1"}, NoOverrides, "PVPERF_SIZE"},
		{[]string{"PMI_RANK=-1", "PMI_SIZE=2"}, NoOverrides, `PMI_RANK="-1"`},
		{nil, Overrides{Rank: 3, Size: 2}, "rank 3 is not below the size 2 (--rank, --size)"},
	} {
		_, err := Detect(envOf(c.env...), c.o)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q %+v: %v; want an error with %q", c.env, c.o, err, c.want)
		}
		if err != nil && !errors.Is(err, ErrEnv) && !errors.Is(err, ErrNoLauncher) {
			t.Errorf("%q: %v wraps neither ErrEnv nor ErrNoLauncher", c.env, err)
		}
	}
}
