package launch

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Launchers, as Info.Launcher names them.
const (
	Flags      = "flags"      // the command line
	PMI        = "pmi"        // a PMI-1 server (PMI_FD): MPICH's Hydra, Slurm's pmi2 plugin, Flux
	Slurm      = "slurm"      // srun
	OpenMPI    = "openmpi"    // mpirun / prterun
	PMIx       = "pmix"       // a PMIx launcher without Open MPI's variables
	MPICH      = "mpich"      // Hydra without a PMI descriptor (PMI_RANK, PMI_SIZE)
	Kubernetes = "kubernetes" // an Indexed Job (JOB_COMPLETION_INDEX)
)

// ErrEnv is the error of a launcher environment that is incomplete or
// contradicts itself.
var ErrEnv = errors.New("bad launcher environment")

// ErrNoLauncher means that no launcher set the environment and no flag says where
// the process stands.
var ErrNoLauncher = errors.New("no launcher found")

// Info is where a process stands in its job.
type Info struct {
	Launcher  string // one of the launcher names above
	Rank      int    // 0 to Size-1
	Size      int    // the number of processes
	LocalRank int    // the rank among the processes of this node; -1 when unknown
	Node      int    // the index of this node among the job's; -1 when unknown
	// Nodes are the job's nodes, in order, when the launcher says (Slurm's
	// step node list).
	Nodes []string
	// PMIFD is the descriptor of the PMI-1 server (launcher PMI); -1
	// otherwise.
	PMIFD int
	// JobID names the job (Slurm's job and step, Open MPI's or PMIx's
	// namespace), "" when unknown.
	JobID string
	// Vars are the variables the values came from, for messages.
	Vars []string
}

// Overrides are explicit values (from the command line): a field set
// (Rank or Size at least 0) overrides the launcher's.
type Overrides struct {
	Rank, Size int // -1: not set
}

// NoOverrides sets nothing.
var NoOverrides = Overrides{Rank: -1, Size: -1}

// Detect finds the launcher from the environment, read through getenv
// (os.LookupEnv), in this order: PMI_FD, OMPI_COMM_WORLD_RANK,
// SLURM_PROCID, PMIX_RANK, PMI_RANK, JOB_COMPLETION_INDEX (Open MPI's
// before Slurm's: mpirun inside a Slurm allocation leaves Slurm's
// variables set). The first one present decides; its companion variables
// must then be present and agree. Rank and size
// in o override what the launcher says; with both set and no launcher,
// the launcher is Flags. A Kubernetes Indexed Job gives no size: o.Size
// (or the variable PVPERF_SIZE) must.
func Detect(getenv func(string) (string, bool), o Overrides) (Info, error) {
	e := env{get: getenv}
	info, err := e.detect()
	switch {
	case errors.Is(err, ErrNoLauncher) && o.Rank >= 0 && o.Size > 0:
		info = Info{Launcher: Flags, LocalRank: -1, Node: -1, PMIFD: -1}
	case err != nil && !(errors.Is(err, errKubernetesSize) && o.Size > 0):
		return Info{}, err
	}
	if o.Rank >= 0 {
		info.Rank = o.Rank
		info.Vars = append(info.Vars, "--rank")
	}
	if o.Size >= 0 {
		info.Size = o.Size
		info.Vars = append(info.Vars, "--size")
	}
	if info.Size < 1 {
		return Info{}, fmt.Errorf("launch: %w: size %d (%s): at least 1", ErrEnv, info.Size, strings.Join(info.Vars, ", "))
	}
	if info.Rank < 0 || info.Rank >= info.Size {
		return Info{}, fmt.Errorf("launch: %w: rank %d is not below the size %d (%s)", ErrEnv, info.Rank, info.Size, strings.Join(info.Vars, ", "))
	}
	return info, nil
}

var errKubernetesSize = fmt.Errorf("%w: JOB_COMPLETION_INDEX is set but no size: set PVPERF_SIZE (or --size) to the Job's completions", ErrEnv)

// env reads variables and remembers which it read.
type env struct {
	get  func(string) (string, bool)
	vars []string
}

func (e *env) has(name string) bool {
	_, ok := e.get(name)
	return ok
}

// int reads a required non-negative integer.
func (e *env) int(name string) (int, error) {
	v, ok := e.get(name)
	if !ok {
		return 0, fmt.Errorf("launch: %w: %s is not set (%s)", ErrEnv, name, strings.Join(e.vars, ", "))
	}
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil || n < 0 {
		return 0, fmt.Errorf("launch: %w: %s=%q is not a number", ErrEnv, name, v)
	}
	e.vars = append(e.vars, name)
	return n, nil
}

// optInt reads an optional non-negative integer (-1 when unset).
func (e *env) optInt(name string) (int, error) {
	if !e.has(name) {
		return -1, nil
	}
	return e.int(name)
}

// same checks that the optional variable name, when set, equals v, the
// value of variable of.
func (e *env) same(name, of string, v int) error {
	n, err := e.optInt(name)
	if err != nil || n < 0 || n == v {
		return err
	}
	return fmt.Errorf("launch: %w: %s=%d contradicts %s=%d", ErrEnv, name, n, of, v)
}

func (e *env) detect() (Info, error) {
	info := Info{LocalRank: -1, Node: -1, PMIFD: -1}
	var err error
	rank := func(name string) {
		if err == nil {
			info.Rank, err = e.int(name)
		}
	}
	size := func(name string) {
		if err == nil {
			info.Size, err = e.int(name)
		}
	}
	opt := func(p *int, name string) {
		if err == nil {
			*p, err = e.optInt(name)
		}
	}
	switch {
	case e.has("PMI_FD"):
		info.Launcher = PMI
		opt(&info.PMIFD, "PMI_FD")
		rank("PMI_RANK")
		size("PMI_SIZE")
		opt(&info.LocalRank, "MPI_LOCALRANKID")
	case e.has("OMPI_COMM_WORLD_RANK"):
		// Before Slurm: mpirun inside an allocation passes its
		// processes the batch step's SLURM_PROCID (0 for all).
		info.Launcher = OpenMPI
		rank("OMPI_COMM_WORLD_RANK")
		size("OMPI_COMM_WORLD_SIZE")
		opt(&info.LocalRank, "OMPI_COMM_WORLD_LOCAL_RANK")
		if err == nil {
			err = e.same("PMIX_RANK", "OMPI_COMM_WORLD_RANK", info.Rank)
		}
		info.JobID, _ = e.get("PMIX_NAMESPACE")
	case e.has("SLURM_PROCID"):
		info.Launcher = Slurm
		rank("SLURM_PROCID")
		if err == nil && !e.has("SLURM_NTASKS") && e.has("SLURM_NPROCS") {
			size("SLURM_NPROCS")
		} else {
			size("SLURM_NTASKS")
		}
		opt(&info.LocalRank, "SLURM_LOCALID")
		opt(&info.Node, "SLURM_NODEID")
		if err == nil {
			err = e.same("SLURM_NPROCS", "SLURM_NTASKS", info.Size)
		}
		if err == nil {
			err = e.slurmNodes(&info)
		}
		if job, ok := e.get("SLURM_JOB_ID"); ok {
			info.JobID = job
			if step, ok := e.get("SLURM_STEP_ID"); ok {
				info.JobID += "." + step
			}
		}
	case e.has("PMIX_RANK"):
		info.Launcher = PMIx
		rank("PMIX_RANK")
		size("PMIX_SIZE")
		info.JobID, _ = e.get("PMIX_NAMESPACE")
	case e.has("PMI_RANK"):
		info.Launcher = MPICH
		rank("PMI_RANK")
		size("PMI_SIZE")
		opt(&info.LocalRank, "MPI_LOCALRANKID")
	case e.has("JOB_COMPLETION_INDEX"):
		info.Launcher = Kubernetes
		rank("JOB_COMPLETION_INDEX")
		if err == nil {
			if e.has("PVPERF_SIZE") {
				size("PVPERF_SIZE")
			} else {
				err = errKubernetesSize
			}
		}
	default:
		return info, fmt.Errorf("launch: %w: none of PMI_FD, OMPI_COMM_WORLD_RANK, SLURM_PROCID, PMIX_RANK, PMI_RANK, JOB_COMPLETION_INDEX is set, and no --rank and --size", ErrNoLauncher)
	}
	info.Vars = e.vars
	return info, err
}

// slurmNodes reads the step's node list and checks this node's index
// against it.
func (e *env) slurmNodes(info *Info) error {
	name := "SLURM_STEP_NODELIST"
	list, ok := e.get(name)
	if !ok {
		name = "SLURM_JOB_NODELIST"
		if list, ok = e.get(name); !ok {
			return nil
		}
	}
	nodes, err := ExpandHostlist(list)
	if err != nil {
		return fmt.Errorf("launch: %w: %s: %w", ErrEnv, name, err)
	}
	e.vars = append(e.vars, name)
	info.Nodes = nodes
	if info.Node >= len(nodes) {
		return fmt.Errorf("launch: %w: SLURM_NODEID=%d, but %s names %d nodes", ErrEnv, info.Node, name, len(nodes))
	}
	if n, err := e.optInt("SLURM_NNODES"); err != nil {
		return err
	} else if n >= 0 && n != len(nodes) {
		return fmt.Errorf("launch: %w: SLURM_NNODES=%d, but %s names %d nodes", ErrEnv, n, name, len(nodes))
	}
	if info.Size < len(nodes) {
		return fmt.Errorf("launch: %w: %d tasks on the %d nodes of %s", ErrEnv, info.Size, len(nodes), name)
	}
	return nil
}
