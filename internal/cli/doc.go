// Package cli is pvperf's command line: what a perftest user types to
// ib_write_bw and friends, accepted unchanged by write_bw, read_bw,
// send_bw, atomic_bw, write_lat, read_lat, send_lat and atomic_lat.
//
// It owns:
//   - parsing, with getopt_long's rules (options and the host in any order,
//     bundled short options, unique abbreviations of long options) and
//     perftest's value syntax (strtol numbers in decimal, 0x hex or 0 octal;
//     K and M suffixes for -s); '_' and '-' are interchangeable in long
//     names, and --report-histogram is accepted beside perftest's
//     --report-histogrm;
//   - perftest's per-test defaults and the adjustments of its
//     force_dependecies (depths capped by the iterations, CQ moderation,
//     post lists, peak disabling, duration margins, dynamic polling), with
//     perftest's warnings and error messages on perftest's streams and
//     perftest's exit statuses (1 for every error, and for -h and -V; 17
//     for a failed measurement loop of send_bw, send_lat, read_lat,
//     atomic_lat and read_bw -a);
//   - the usage text (-h) and the version (-V);
//   - choosing the device (package devices) and calling bench.Run;
//   - the devinfo command's listing of devices.
//
// Options pvperf recognises but does not implement (multicast, dual port,
// raw Ethernet, accelerator memory, XRC/DC/SRD, the rate limiter, vendor
// features, ...) stop the run with " <flag> is not supported by pvperf
// (<reason>)"; docs/options.md lists every option's state. What needs the
// device or the peer (MTU,
// inline size, outstanding reads, UD sizes, GIDs) is left to the engine;
// forceDependencies lists it.
//
// It does not run benchmarks (package bench does) nor print results.
package cli
