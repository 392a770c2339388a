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
# The raw and the engine runs of a round follow each other, so both see the
# same machine; the ratio is computed per round, and the script prints the
# median over ROUNDS rounds (default 7) of each figure and of the ratio,
# with the ratio's range.
#
# Usage: scripts/engine-vs-emu.sh [-r ROUNDS]
set -euo pipefail

rounds=${ROUNDS:-7}
while getopts "r:h" opt; do
	case $opt in
	r) rounds=$OPTARG ;;
	h) sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) echo "usage: $0 [-r ROUNDS]" >&2; exit 2 ;;
	esac
done
shift $((OPTIND - 1))
[ $# -eq 0 ] || { echo "engine-vs-emu: unexpected argument: $1" >&2; exit 2; }

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

for f in raw_bw eng_bw raw_rate eng_rate raw_lat eng_lat; do : >"$out/$f"; done
for r in $(seq "$rounds"); do
	printf 'round %d/%d\n' "$r" "$rounds" >&2
	# MB/s (10^6 bytes) from the benchmark, MiB/s from write_bw.
	bench 'BenchmarkWriteBW/emu' 'MB/s' | awk '{ print $1 * 1e6 / 1048576 }' >>"$out/raw_bw"
	row "$out/write_bw" --loopback -s 65536 | awk '{ print $4 }' >>"$out/eng_bw"
	bench 'BenchmarkWriteRate' 'Mmsg/s' >>"$out/raw_rate"
	row "$out/write_bw" --loopback -s 2 -n 1000000 -N | awk '{ print $5 }' >>"$out/eng_rate"
	bench '^BenchmarkPingPong$/^emu$' 'ns/halfrtt' | awk '{ print $1 / 1000 }' >>"$out/raw_lat"
	row "$out/send_lat" --loopback | awk '{ print $5 }' >>"$out/eng_lat"
done

# ratios FILE_ENGINE FILE_RAW: the per-round ratios.
ratios() { paste "$1" "$2" | awk '{ print $1 / $2 }'; }

ratios "$out/eng_bw" "$out/raw_bw" >"$out/r_bw"
ratios "$out/eng_rate" "$out/raw_rate" >"$out/r_rate"
ratios "$out/eng_lat" "$out/raw_lat" >"$out/r_lat"

# line LABEL UNIT ENGINE RAW RATIOS TARGET
line() {
	local e r m lo hi
	e=$(median <"$3") r=$(median <"$4") m=$(median <"$5")
	lo=$(sort -g "$5" | head -1) hi=$(sort -g "$5" | tail -1)
	awk -v l="$1" -v u="$2" -v e="$e" -v r="$r" -v m="$m" -v lo="$lo" -v hi="$hi" -v t="$6" \
		'BEGIN { printf "%-40s %10.3f %-5s %10.3f %-5s %6.3f  %5.3f-%5.3f  %s\n", l, e, u, r, u, m, lo, hi, t }'
}

printf '\nmedians of %d rounds on %s (%s CPUs)\n\n' "$rounds" "$(uname -n)" "$(nproc)"
printf '%-40s %16s %16s %6s  %11s  %s\n' "measurement" "engine" "raw emulator" "ratio" "range" "target"
line "write_bw --loopback -s 65536 (BW avg)" "MiB/s" "$out/eng_bw" "$out/raw_bw" "$out/r_bw" ">=0.90"
line "write_bw --loopback -s 2 -n 1000000 -N" "Mpps" "$out/eng_rate" "$out/raw_rate" "$out/r_rate" ">=0.90"
line "send_lat --loopback (t_typical)" "usec" "$out/eng_lat" "$out/raw_lat" "$out/r_lat" "<=1.10"
