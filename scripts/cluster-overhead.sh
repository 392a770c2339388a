#!/usr/bin/env bash
# cluster-overhead.sh: what the cluster runs' scheduling costs, on the
# emulated device under srun (scripts/slurm-setup.sh first). It times, in
# one run of the script, the wall time of:
#
#   pair     one write_bw -D D pair: a server and a client process
#   n ranks  "srun -n N pvperf cluster write_bw -D D" (all pairs: N-1
#            rounds), for each N of -n
#
# and prints each all-pairs time against (N-1) x the pair's, the ratio the
# scheduling overhead makes (1.0: none). Figures are printed, not judged.
#
# Usage: scripts/cluster-overhead.sh [-n "4 8"] [-D SECONDS] [-r ROUNDS]
#   -n LIST     rank counts (default "4 8")
#   -D SECONDS  each test's duration (default 2)
#   -r ROUNDS   repetitions of each measurement; medians are printed (default 3)
set -euo pipefail
cd "$(dirname "$0")/.."

ranks="4 8"
dur=2
reps=3
usage() { sed -n '2,/^set -euo/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//' >&2; exit "${1:-2}"; }
while getopts "n:D:r:h" opt; do
	case $opt in
	n) ranks=$OPTARG ;;
	D) dur=$OPTARG ;;
	r) reps=$OPTARG ;;
	h) usage 0 ;;
	*) usage ;;
	esac
done
command -v srun >/dev/null || { echo "cluster-overhead: no srun: run scripts/slurm-setup.sh first" >&2; exit 1; }

bin=$(mktemp -d)
trap 'rm -rf "$bin"' EXIT
CGO_ENABLED=0 go build -o "$bin/" ./cmd/pvperf
pv=$bin/pvperf

now() { date +%s.%N; }
calc() { awk "BEGIN { print $1 }"; }
median() { sort -g | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

pair_times=()
for _ in $(seq "$reps"); do
	port=$((20000 + RANDOM % 20000))
	t0=$(now)
	"$pv" write_bw -d emu0 -D "$dur" -p "$port" >/dev/null &
	srv=$!
	for _ in $(seq 100); do
		grep -q ":$(printf '%04X' "$port") 00000000:0000 0A" /proc/net/tcp && break
		sleep 0.02
	done
	"$pv" write_bw -d emu0 -D "$dur" -p "$port" 127.0.0.1 >/dev/null
	wait "$srv"
	pair_times+=("$(calc "$(now) - $t0")")
done
pair=$(printf '%s\n' "${pair_times[@]}" | median)
printf 'one write_bw -D %s pair: %.2f s (median of %d: %s)\n' "$dur" "$pair" "$reps" "${pair_times[*]}"

for n in $ranks; do
	times=()
	for _ in $(seq "$reps"); do
		t0=$(now)
		srun -n "$n" "$pv" cluster --rendezvous "127.0.0.1:$((20000 + RANDOM % 20000))" write_bw -d emu0 -D "$dur" >/dev/null
		times+=("$(calc "$(now) - $t0")")
	done
	all=$(printf '%s\n' "${times[@]}" | median)
	printf '%d ranks, all pairs (%d rounds) under srun: %.2f s (median of %d: %s); (n-1) x pair = %.2f s; ratio %.3f (target <= 1.2)\n' \
		"$n" "$((n - 1))" "$all" "$reps" "${times[*]}" "$(calc "($n - 1) * $pair")" "$(calc "$all / (($n - 1) * $pair)")"
done
