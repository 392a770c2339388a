//go:build !linux

package unix

// CPUNode reports false: the NUMA node of the CPU is not known here.
func CPUNode() (int, bool) { return 0, false }
