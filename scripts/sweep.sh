#!/usr/bin/env bash
# sweep.sh runs a matrix of pvperf tests on one device (tests x message
# sizes x QP counts x connection types), both sides in one process
# (--loopback), shows each run as it goes, and ends with one HTML report
# (and a CSV of every row) made by the report command.
#
#   scripts/sweep.sh                              # write_bw and send_lat, -a, on the default device
#   scripts/sweep.sh -d rxe0 -t "write_bw read_bw send_bw" -q "1 4" -c "RC UC"
#   scripts/sweep.sh -t send_lat -s "2 64 4096" -n 2000 -o /tmp/lat
#
# Options (lists are space or comma separated):
#   -d DEVICE   device (-d of the tests; default: the tests' default device)
#   -t TESTS    tests (default: "write_bw send_lat")
#   -s SIZES    message sizes in bytes, one run each, or "all" for -a (default: all)
#   -q QPS      QP counts (default: 1)
#   -c CONNS    connection types: RC UC UD (default: RC)
#   -n ITERS    iterations per run (default: the tests' own)
#   -x ARGS     more options for every run, e.g. -x "--report_gbits -x 1"
#   -o DIR      output directory (default: sweep-<date>-<time>)
#   -b DIR      directory of the pvperf commands (default: built into DIR/bin)
#
# Combinations the tests do not support (UD outside send, UC for read and
# atomic, -q for latency tests) are skipped and listed. The exit status is
# non-zero when a run failed; the report holds the runs that succeeded.
set -euo pipefail

usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; }

device="" tests="write_bw send_lat" sizes="all" qps="1" conns="RC" iters="" extra="" out="" bin=""
while getopts "d:t:s:q:c:n:x:o:b:h" opt; do
	case $opt in
	d) device=$OPTARG ;;
	t) tests=$OPTARG ;;
	s) sizes=$OPTARG ;;
	q) qps=$OPTARG ;;
	c) conns=$OPTARG ;;
	n) iters=$OPTARG ;;
	x) extra=$OPTARG ;;
	o) out=$OPTARG ;;
	b) bin=$OPTARG ;;
	h) usage; exit 0 ;;
	*) usage >&2; exit 2 ;;
	esac
done
shift $((OPTIND - 1))
if [ $# -gt 0 ]; then
	echo "sweep: unexpected argument: $1" >&2
	exit 2
fi
list() { echo "${1//,/ }"; }
tests=$(list "$tests") sizes=$(list "$sizes") qps=$(list "$qps") conns=$(list "$conns")

known="write_bw read_bw send_bw atomic_bw write_lat read_lat send_lat atomic_lat"
for t in $tests; do
	case " $known " in *" $t "*) ;; *) echo "sweep: unknown test $t (one of: $known)" >&2; exit 2 ;; esac
done
for c in $conns; do
	case $c in RC | UC | UD) ;; *) echo "sweep: unknown connection type $c (RC, UC or UD)" >&2; exit 2 ;; esac
done
for v in $qps ${iters:+$iters}; do
	case $v in '' | *[!0-9]* | 0) echo "sweep: not a positive number: $v" >&2; exit 2 ;; esac
done
for s in $sizes; do
	case $s in all) ;; '' | *[!0-9]* | 0) echo "sweep: not a size in bytes: $s" >&2; exit 2 ;; esac
done

out=${out:-sweep-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$out/json" "$out/log"
if [ -z "$bin" ]; then
	root=$(cd "$(dirname "$0")/.." && pwd)
	bin=$out/bin
	echo "building the commands into $bin"
	(cd "$root" && go build -o "$(cd "$OLDPWD" && cd "$out" && pwd)/bin/" ./cmd/...)
fi
for t in $tests report; do
	if [ ! -x "$bin/$t" ]; then
		echo "sweep: $bin/$t not found" >&2
		exit 2
	fi
done

# The matrix, without the combinations perftest rejects.
runs=() skipped=() files=()
for t in $tests; do
	for c in $conns; do
		for q in $qps; do
			for s in $sizes; do
				why=""
				case $t:$c in
				send_*:UD | *:RC | write_*:UC | send_*:UC) ;;
				*:UD) why="UD is for send tests only" ;;
				*) why="UC has no RDMA read or atomics" ;;
				esac
				if [ -z "$why" ] && [ "$q" != 1 ] && [[ $t == *_lat ]]; then
					why="latency tests run one QP"
				fi
				if [ -z "$why" ] && [ "$c" = UD ] && [ "$s" = all ]; then
					why="UD sweeps stop at the MTU: give sizes with -s"
				elif [ -z "$why" ] && [ "$c" = UD ] && [ "$s" -gt 4096 ]; then
					why="a UD message must fit the MTU (4096 B at most)"
				fi
				if [ -n "$why" ]; then
					skipped+=("$t -c $c -q $q -s $s: $why")
				else
					runs+=("$t $c $q $s")
				fi
			done
		done
	done
done
if [ ${#runs[@]} -eq 0 ]; then
	echo "sweep: no valid combination" >&2
	printf '  skipped %s\n' "${skipped[@]}" >&2
	exit 2
fi

echo "${#runs[@]} runs${device:+ on $device}, results in $out"
i=0 failed=0 start=$SECONDS
for r in "${runs[@]}"; do
	read -r t c q s <<<"$r"
	i=$((i + 1))
	name="$t-$c-q$q-s$s"
	args=(--loopback -c "$c" --out_json --out_json_file "$out/json/$name.json")
	[ -n "$device" ] && args+=(-d "$device")
	[ "$q" != 1 ] && args+=(-q "$q")
	if [ "$s" = all ]; then args+=(-a); else args+=(-s "$s"); fi
	[ -n "$iters" ] && args+=(-n "$iters")
	# shellcheck disable=SC2206 # -x is a list of options on purpose
	[ -n "$extra" ] && args+=($extra)
	n=${#runs[@]}
	printf '[%*d/%d] %-36s ' ${#n} "$i" "$n" "$t -c $c -q $q -s $s"
	t0=$SECONDS
	if "$bin/$t" "${args[@]}" >"$out/log/$name.txt" 2>&1; then
		# The last row of perftest's table (bytes, iterations, then the
		# numbers), before pvperf's own tables (percentiles, CPU,
		# repeats), whose rows look alike.
		row=$(awk '/percentiles|CPU use|runs: median/ { exit } /^ +[0-9]+ +[0-9]+ / { r = $0 } END { print r }' "$out/log/$name.txt")
		[ -f "$out/json/$name.json" ] && files+=("$out/json/$name.json")
		if [[ $t == *_bw ]]; then
			unit="MiB/s"
			grep -q 'Gb/sec' "$out/log/$name.txt" && unit="Gb/s"
			summary=$(awk -v u="$unit" '{ printf "BW average %s %s, %s Mpps", $4, u, $5 }' <<<"$row")
		elif grep -q 't_typical' "$out/log/$name.txt"; then
			summary=$(awk '{ printf "t_typical %s us", $5 }' <<<"$row")
		else
			summary=$(awk '{ printf "t_avg %s us", $3 }' <<<"$row")
		fi
		[ -n "$row" ] || summary="no result row"
		echo "ok    ${summary} ($((SECONDS - t0)) s)"
	else
		failed=$((failed + 1))
		rm -f "$out/json/$name.json"
		echo "FAIL  see $out/log/$name.txt"
		sed 's/^/        /' "$out/log/$name.txt" | tail -3
	fi
done
for s in "${skipped[@]}"; do
	echo "skipped $s"
done

# This sweep's files only: an earlier sweep into the same directory may
# have left others.
if [ ${#files[@]} -eq 0 ]; then
	echo "sweep: every run failed" >&2
	exit 1
fi
"$bin/report" --html "$out/report.html" "${files[@]}"
"$bin/report" --csv "$out/results.csv" "${files[@]}"
echo "done in $((SECONDS - start)) s: $((i - failed)) of $i runs passed"
echo "report: $out/report.html"
echo "csv:    $out/results.csv"
[ "$failed" -eq 0 ]
