// Package launch finds out where a process stands in a parallel job that a
// launcher started: its rank, the job's size, its rank on its node and the
// job's nodes, from the environment each launcher sets (PMI-1, Slurm, Open
// MPI and PMIx, MPICH's Hydra, Kubernetes Indexed Jobs), with explicit
// values overriding them all. It links no MPI library and starts nothing:
// the cluster runs of pvperf use what it finds to meet at rank 0.
//
// Detect reads the environment through the function it is given, and
// ExpandHostlist is a pure function: both are safe for concurrent use.
// A PMIClient (OpenPMI, NewPMI) owns the descriptor the launcher passed; its
// caller closes it when the job's exchanges are done, and its methods are
// not safe for concurrent use.
package launch
