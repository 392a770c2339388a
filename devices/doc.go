// Package devices lists the RDMA devices of the machine, real and emulated,
// and opens them by name. It is the one place that knows every backend:
// programs and the benchmark engine see only package verbs.
//
// Kernel devices come first, in the order the kernel lists them under
// /sys/class/infiniband; emulated devices (package emu, configured by
// PVPERF_EMU) follow. So with no kernel RDMA device the first device is emu0,
// and every tool works on any Linux machine without root.
//
// The functions are safe for concurrent use; opened contexts belong to the
// caller, who closes them.
package devices
