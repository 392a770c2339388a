// Command devinfo lists the RDMA devices pvperf can use, kernel and
// emulated, with their attributes, ports and GID tables, in the manner of
// ibv_devinfo -v and show_gids. -d selects a device, -v prints every
// attribute.
package main
