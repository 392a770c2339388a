package launch

import (
	"strings"
	"testing"
)

// FuzzDetect: any environment (lines of NAME=value) gives a rank and size
// that make sense, or an error, never a panic.
func FuzzDetect(f *testing.F) {
	for _, s := range []string{
		"SLURM_PROCID=1\nSLURM_NTASKS=4\nSLURM_LOCALID=1\nSLURM_NODEID=0\nSLURM_JOB_NODELIST=n[1-2]",
		"OMPI_COMM_WORLD_RANK=0\nOMPI_COMM_WORLD_SIZE=2\nOMPI_COMM_WORLD_LOCAL_RANK=0",
		"PMI_RANK=3\nPMI_SIZE=2", "JOB_COMPLETION_INDEX=5\nPVPERF_SIZE=8", "PMIX_RANK=-1\nPMIX_SIZE=0",
		"SLURM_PROCID=99999999999999999999\nSLURM_NTASKS=1", "PMI_FD=x", "",
	} {
		f.Add(s, int16(-1), int16(-1))
		f.Add(s, int16(1), int16(2))
	}
	f.Fuzz(func(t *testing.T, envText string, rank, size int16) {
		env := map[string]string{}
		for l := range strings.SplitSeq(envText, "\n") {
			if k, v, ok := strings.Cut(l, "="); ok {
				env[k] = v
			}
		}
		if _, ok := env["PMI_FD"]; ok {
			return // would dial a descriptor
		}
		get := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
		info, err := Detect(get, Overrides{Rank: int(rank), Size: int(size)})
		if err != nil {
			return
		}
		if info.Rank < 0 || info.Size < 1 || info.Rank >= info.Size {
			t.Errorf("rank %d of %d from %q (overrides %d, %d)", info.Rank, info.Size, envText, rank, size)
		}
	})
}
