#!/usr/bin/env bash
# engine-vs-emu.sh: how much of the emulator's speed the benchmark engine
# keeps. It runs, side by side in rounds, the raw emulator benchmarks of
# emu/bench_test.go and the perftest-style commands over the same emulated
# device in one process (--loopback), and prints the ratios:
#
#   write_bw --loopback -s 65536              BW average   vs BenchmarkWriteBW/emu
#   write_bw --loopback -s 2 -n 1000000 -N    MsgRate      vs BenchmarkWriteRate
#   send_lat --loopback                       t_typical    vs BenchmarkPingPong/emu
#
# Each figure is the median of ROUNDS rounds (default 5); the raw and the
# engine runs of a round follow each other, so both see the same machine.
#
# Usage: scripts/engine-vs-emu.sh [-r ROUNDS]
set -euo pipefail

rounds=${ROUNDS:-5}
while getopts "r:" opt; do
	case $opt in
	r) rounds=$OPTARG ;;
	*) echo "usage: $0 [-r ROUNDS]" >&2; exit 2 ;;
	esac
done

cd "$(dirname "$0")/.."
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

go build -o "$out/" ./cmd/write_bw ./cmd/send_lat
go test -c -o "$out/emu.test" ./emu

# bench NAME METRIC: run one emulator benchmark, print the value of METRIC.
bench() {
	"$out/emu.test" -test.run '^$' -test.bench "$1" -test.benchtime 1s -test.count 1 |
		awk -v m="$2" '/^Benchmark/ { for (i = 3; i < NF; i++) if ($(i+1) == m) v = $i } END { if (v == "") exit 1; print v }'
}

# row COMMAND...: run a command, print its first result row.
row() {
	"$@" 2>/dev/null | awk '/#bytes/ { getline; print; exit }'
}

median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR+1)/2] : (v[NR/2] + v[NR/2+1]) / 2 }'; }

: >"$out/raw_bw" >"$out/eng_bw" >"$out/raw_rate" >"$out/eng_rate" >"$out/raw_lat" >"$out/eng_lat"
for r in $(seq "$rounds"); do
	printf 'round %d/%d\n' "$r" "$rounds" >&2
	# MB/s (10^6 bytes) from the benchmark, MiB/s from write_bw.
	bench 'BenchmarkWriteBW/emu' 'MB/s' | awk '{ print $1 * 1e6 / 1048576 }' >>"$out/raw_bw"
	row "$out/write_bw" --loopback -s 65536 | awk '{ print $4 }' >>"$out/eng_bw"
	bench 'BenchmarkWriteRate' 'Mmsg/s' >>"$out/raw_rate"
	row "$out/write_bw" --loopback -s 2 -n 1000000 -N | awk '{ print $5 }' >>"$out/eng_rate"
	bench 'BenchmarkPingPong/emu' 'ns/halfrtt' | awk '{ print $1 / 1000 }' >>"$out/raw_lat"
	row "$out/send_lat" --loopback | awk '{ print $5 }' >>"$out/eng_lat"
done

rb=$(median <"$out/raw_bw") eb=$(median <"$out/eng_bw")
rr=$(median <"$out/raw_rate") er=$(median <"$out/eng_rate")
rl=$(median <"$out/raw_lat") el=$(median <"$out/eng_lat")

printf '\nmedians of %d rounds on %s (%s CPUs)\n\n' "$rounds" "$(uname -n)" "$(nproc)"
printf '%-42s %14s %14s %8s %8s\n' "measurement" "engine" "raw emulator" "ratio" "target"
awk -v e="$eb" -v r="$rb" 'BEGIN { printf "%-42s %10.0f MiB/s %8.0f MiB/s %8.3f %8s\n", "write_bw --loopback -s 65536 (BW average)", e, r, e/r, ">=0.90" }'
awk -v e="$er" -v r="$rr" 'BEGIN { printf "%-42s %11.3f Mpps %9.3f Mpps %8.3f %8s\n", "write_bw --loopback -s 2 -n 1000000 -N", e, r, e/r, ">=0.90" }'
awk -v e="$el" -v r="$rl" 'BEGIN { printf "%-42s %12.3f usec %8.3f usec %8.3f %8s\n", "send_lat --loopback (t_typical)", e, r, e/r, "<=1.10" }'
