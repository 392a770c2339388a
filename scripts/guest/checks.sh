#!/bin/sh
# shellcheck source-path=SCRIPTDIR
# checks.sh: the checks run inside the test guest (busybox sh), started by
# /init. It sets up one Soft-RoCE device (rxe0 on veth v0, 10.77.0.1), prints
# what the guest runs, runs the groups named in $CHECKS (from
# /guest/config, written by scripts/guest-test.sh), prints a table of every
# check and ends with the marker line the host looks for:
#
#   PVPERF-GUEST-VERDICT: PASS|FAIL ...
#
# To add a check: write a function that calls record (or check_pair /
# check_cmd from lib.sh) once per result, and call it below under a group
# name (want NAME); scripts/guest-test.sh -c selects groups by that name.
# Everything a check prints goes to the console, the only log that outlives
# the guest.

CHECKS=sanity,conformance,pvperf,ref,interop,reports,side
ROUNDS=7
# shellcheck source=/dev/null
[ -r /guest/config ] && . /guest/config
# shellcheck source=lib.sh
. /guest/lib.sh

TESTS="write_bw read_bw send_bw atomic_bw write_lat read_lat send_lat atomic_lat"
COMMON="-d $DEV -x 1 -F"

# Test configurations that pvperf and perftest 6.06 run against each other
# (one a line: test, then options added to $COMMON -n 200).
INTEROP="write_bw
read_bw
send_bw
atomic_bw
write_lat
read_lat
send_lat
atomic_lat
send_bw -c UD
write_bw -q 2"

# Side-by-side comparisons (one a line): test and options | field of the
# client's result row | metric | target of the ratio pvperf/perftest.
# Under TCG one run differs from the next by 10 to 25 % whatever its length
# (measured with 2000 and 5000 writes of 64 KiB, 20000 and 100000 of 2 B,
# 5000 and 20000 round trips), so short runs (2 to 5 s) in ROUNDS alternating
# rounds, with medians, give steadier figures for the time than long runs.
SIDE="write_bw -s 65536 -n 1000|4|BW average [MiB/s]|>= 0.95
write_bw -s 2 -n 20000|5|MsgRate [Mpps]|>= 0.95
send_lat -s 2 -n 5000|5|t_typical [usec]|<= 1.05"

setup() {
	section "setup: $DEV on veth v0 ($ADDR/24)"
	while read -r m; do
		echo "+ insmod $m"
		insmod "$m" || { record FAIL setup "insmod $m failed"; return 1; }
	done </guest/modules
	for cmd in "link set lo up" "link add v0 type veth peer name v1" "addr add $ADDR/24 dev v0" \
		"link set v0 up" "link set v1 up"; do
		echo "+ ip $cmd"
		# shellcheck disable=SC2086 # the command is split into words on purpose
		iproute2-ip $cmd || { record FAIL setup "ip $cmd failed"; return 1; }
	done
	echo "+ rdma link add $DEV type rxe netdev v0"
	rdma link add "$DEV" type rxe netdev v0 || { record FAIL setup "rdma link add failed"; return 1; }
	i=0
	while [ ! -c /dev/infiniband/uverbs0 ] && [ "$i" -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
	[ -c /dev/infiniband/uverbs0 ] || { record FAIL setup "no /dev/infiniband/uverbs0"; return 1; }
	port=/sys/class/infiniband/$DEV/ports/1
	i=0
	while [ "$i" -lt 200 ]; do
		case $(cat "$port/state" 2>/dev/null) in *ACTIVE*)
			case $(cat "$port/gids/1" 2>/dev/null) in ''|0000:0000:0000:0000:0000:0000:0000:0000) ;; *) break ;; esac
		esac
		sleep 0.1
		i=$((i + 1))
	done
	[ "$i" -lt 200 ] || { record FAIL setup "port 1 of $DEV not active with an IPv4 GID at index 1 after 20s"; return 1; }
	# A global IPv6 address as well (GID index 2), for the tests of IPv6 GIDs.
	echo "+ ip -6 addr add $ADDR6/64 dev v0 nodad"
	iproute2-ip -6 addr add "$ADDR6/64" dev v0 nodad || { record FAIL setup "ip -6 addr add failed"; return 1; }
	i=0
	while ! grep -q "^${ADDR6%%:*}:" "$port"/gids/* 2>/dev/null && [ "$i" -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
	ls -l /dev/infiniband
	record PASS setup "$DEV on v0, /dev/infiniband/uverbs0"
}

info() {
	section "guest"
	echo "kernel: $(uname -r) ($(cat /proc/cmdline))"
	cs=/sys/devices/system/clocksource/clocksource0
	echo "clocksource: $(cat "$cs/current_clocksource" 2>/dev/null) (available: $(cat "$cs/available_clocksource" 2>/dev/null))"
	echo "cpus: $(nproc), memory: $(awk '/^MemTotal/ { print $2 / 1024 " MiB" }' /proc/meminfo)"
	echo "time-stamp counter flags: $(grep -m 1 '^flags' /proc/cpuinfo | tr ' ' '\n' | grep -E '^(tsc|constant_tsc|nonstop_tsc|tsc_known_freq|tsc_reliable|rdtscp)$' | tr '\n' ' ')"
	dmesg | grep -i -E 'tsc|clocksource' | sed 's/^/  | /'
	if [ -x "$PV/clock.test" ]; then
		echo "pvperf's clock: $("$PV/clock.test" -test.run 'TestNowIsMonotonicNanoseconds$' -test.v 2>&1 | sed -n 's/.*time-stamp counter used: /time-stamp counter used: /p')"
		"$PV/clock.test" -test.run '^$' -test.bench 'Now' -test.benchtime 20000x 2>&1 | grep '^BenchmarkNow' | sed 's/^/  /'
		for c in 0 1 0 1; do
			echo "  on cpu $c: $(taskset -c $c "$PV/clock.test" -test.run 'TestMeasure$' -test.v 2>&1 | sed -n 's/.*counter rate/counter rate/p') (the kernel: $(sed -n 's/^cpu MHz[^:]*: */cpu MHz /p' /proc/cpuinfo | head -n 1))"
		done
	fi
	echo "perftest: $("$PT/ib_write_bw" -V 2>&1 | tr '\n' ' ')"
	echo "pvperf: $("$PV/write_bw" -V 2>&1 | tr '\n' ' ')"
	echo "+ rdma link show"
	rdma link show
	echo "+ ip addr show v0"
	iproute2-ip addr show v0
	echo "GID table (non-zero entries): device port index gid type netdev"
	# One grep for the whole table (rxe has 1024 entries; a process per entry
	# takes seconds under TCG).
	grep -H -v '^0000:0000:0000:0000:0000:0000:0000:0000$' /sys/class/infiniband/*/ports/*/gids/* 2>/dev/null |
		while IFS= read -r line; do
			g=${line%%:*}
			gid=${line#*:}
			idx=${g##*/}
			p=${g%/gids/*}
			d=${p%/ports/*}
			printf '  %s %s %s %s %s %s\n' "${d##*/}" "${p##*/}" "$idx" "$gid" \
				"$(cat "$p/gid_attrs/types/$idx" 2>/dev/null)" "$(cat "$p/gid_attrs/ndevs/$idx" 2>/dev/null)"
		done
	echo "+ devinfo"
	timeout 60 "$PV/devinfo" 2>&1
	echo "(devinfo exit $?)"
}

check_sanity() {
	section "sanity: pvperf on the emulated device emu0"
	check_cmd "sanity write_bw -d emu0 --loopback" "$PV/write_bw" -d emu0 --loopback -F -n 200
}

check_conformance() {
	section "conformance: verbs/uverbs TestConformance on the kernel devices"
	if [ ! -x "$PV/uverbs.test" ]; then
		why=$(cat "$PV/uverbs.test.missing" 2>/dev/null)
		case $why in
		*"no package"*) record SKIP conformance "$why" ;;
		*) record FAIL conformance "${why:-not built}" ;;
		esac
		return
	fi
	tmo=$(limit 360)
	if [ "$tmo" -lt 30 ]; then
		record FAIL conformance "not run: the time budget (${BUDGET}s after boot) is spent"
		return
	fi
	echo "# uverbs.test -test.run 'TestConformance|TestKernel' -test.v -test.timeout $((tmo - 20))s"
	RDMA_TEST_DEVICE=$DEV timeout "$tmo" "$PV/uverbs.test" -test.run 'TestConformance|TestKernel' -test.v \
		-test.timeout "$((tmo - 20))s" >/tmp/conf.out 2>&1
	rc=$?
	cat /tmp/conf.out
	echo
	awk -f /guest/conformance-summary.awk /tmp/conf.out >/tmp/conf.sum
	sum=$?
	cat /tmp/conf.sum
	counts=$(head -n 1 /tmp/conf.sum | sed 's/^conformance summary: //; s/ (.*//')
	if grep -q '^--- SKIP: TestConformance ' /tmp/conf.out; then
		record FAIL conformance "TestConformance skipped although $DEV exists: $(grep -m 1 'SKIP TestConformance:' /tmp/conf.sum | sed 's/^ *SKIP TestConformance: //')"
	elif timed_out "$rc"; then
		record FAIL conformance "timed out after ${tmo}s; $counts"
	elif [ "$rc" != 0 ] || [ "$sum" != 0 ]; then
		first=$(sed -n 's/^  FAIL \([^:]*\):.*/\1/p' /tmp/conf.sum | head -n 1)
		record FAIL conformance "exit $rc; $counts${first:+; first failure: $first}"
	else
		record PASS conformance "$counts"
	fi
}

check_pvperf() {
	section "pvperf on $DEV: pvperf client against pvperf server"
	for t in $TESTS; do
		# shellcheck disable=SC2086
		check_pair "pvperf $t" "$PV/$t" "$PV/$t" $COMMON -n 200
	done
}

check_ref() {
	section "reference: perftest client against perftest server on $DEV"
	while read -r t opts; do
		# shellcheck disable=SC2086
		check_pair "ref $t${opts:+ $opts}: perftest/perftest" "$PT/ib_$t" "$PT/ib_$t" $COMMON -n 200 $opts
	done <<EOF
$INTEROP
EOF
}

check_interop() {
	section "interop: pvperf against perftest $("$PT/ib_write_bw" -V 2>&1 | sed -n 's/.*Version: *//p')"
	while read -r t opts; do
		# shellcheck disable=SC2086
		check_pair "interop $t${opts:+ $opts}: pvperf server, perftest client" \
			"$PV/$t" "$PT/ib_$t" $COMMON -n 200 $opts
		# shellcheck disable=SC2086
		check_pair "interop $t${opts:+ $opts}: perftest server, pvperf client" \
			"$PT/ib_$t" "$PV/$t" $COMMON -n 200 $opts
	done <<EOF
$INTEROP
EOF
}

# check_reports: a write_bw -a sweep between two pvperf processes on $DEV,
# each writing --out_json, --out_csv and --out_html into its own directory.
# The client's CSV must have a row per size (23), the server's the client's
# last row; both pages must hold charts. The client's JSON is printed
# between PVPERF-GUEST-FILE markers, for the host to overlay with the
# emulator's (scripts/guest-test.sh).
check_reports() {
	section "reports on $DEV: result files of a write_bw -a sweep, client and server"
	for side in srv cli; do
		rm -rf "/tmp/$side"
		mkdir -p "/tmp/$side"
		printf '#!/bin/sh\ncd /tmp/%s && exec %s/write_bw "$@"\n' "$side" "$PV" >"/tmp/$side.write_bw"
		chmod 755 "/tmp/$side.write_bw"
	done
	name="reports write_bw -a --out_json --out_csv --out_html"
	# shellcheck disable=SC2086
	if ! PAIR_QUIET=1 run_pair /tmp/srv.write_bw /tmp/cli.write_bw $COMMON -a -n 20 \
		--out_json --out_json_file w.json --out_csv w.csv --out_html w.html; then
		record FAIL "$name" "$PAIR_NOTE"
		return
	fi
	note=
	for f in cli/w.json cli/w.csv cli/w.html srv/w.json srv/w.csv srv/w.html; do
		[ -s "/tmp/$f" ] || note="${note:+$note; }/tmp/$f missing or empty"
	done
	[ -z "$note" ] || { record FAIL "$name" "$note"; return; }
	crows=$(($(wc -l </tmp/cli/w.csv) - 1))
	srows=$(($(wc -l </tmp/srv/w.csv) - 1))
	csvg=$(grep -c '<svg' /tmp/cli/w.html)
	ssvg=$(grep -c '<svg' /tmp/srv/w.html)
	echo "client: $crows CSV rows, $csvg charts; server: $srows CSV rows, $ssvg charts"
	head -n 2 /tmp/cli/w.csv | sed 's/^/  client csv| /'
	if [ "$crows" != 23 ] || [ "$srows" != 1 ] || [ "$csvg" -lt 2 ] || [ "$ssvg" -lt 2 ]; then
		record FAIL "$name" "client $crows rows and $csvg charts, server $srows rows and $ssvg charts (want 23, 1, 2+, 2+)"
		return
	fi
	echo "PVPERF-GUEST-FILE-BEGIN rxe-write_bw.json"
	cat /tmp/cli/w.json
	echo "PVPERF-GUEST-FILE-END"
	record PASS "$name" "client 23 rows, server 1 (the client's last), charts on both; $PAIR_NOTE"
}

check_side() {
	section "side by side on $DEV: perftest/perftest and pvperf/pvperf, $ROUNDS rounds"
	: >/tmp/side.table
	: >/tmp/side.rounds
	k=0
	while IFS='|' read -r spec col metric target; do
		k=$((k + 1))
		: >"/tmp/side.$k.pt"
		: >"/tmp/side.$k.pv"
		: >"/tmp/side.$k.ratio"
		fails=
		notes=
		r=0
		while [ "$r" -lt "$ROUNDS" ]; do
			r=$((r + 1))
			for impl in pt pv; do
				t=${spec%% *}
				opts=${spec#"$t"}
				if [ "$impl" = pt ]; then b=$PT/ib_$t; else b=$PV/$t; fi
				echo
				echo "--- side $spec: $impl round $r"
				# shellcheck disable=SC2086
				if PAIR_QUIET=1 RUN_TIMEOUT=120 run_pair "$b" "$b" $COMMON $opts; then
					v=$(field /tmp/pair.client "$col")
					# perftest under TCG sometimes fails to measure the
					# CPU's clock and prints inf or 0: such a round is
					# left out.
					case $v in
					'' | *[!0-9.]* | *.*.* | .) v= ;;
					*) awk -v v="$v" 'BEGIN { exit !(v + 0 > 0) }' || v= ;;
					esac
					if [ -n "$v" ]; then
						echo "$v" >>"/tmp/side.$k.$impl"
					else
						notes="$notes; $impl round $r left out: $(field /tmp/pair.client "$col" | grep . || echo no value)"
					fi
				else
					v=
					fails="$fails; $impl round $r: $PAIR_NOTE"
				fi
				eval "v_$impl=\$v"
			done
			# The ratio of the round: both runs followed each other.
			# shellcheck disable=SC2154 # set by the eval above
			awk -v a="$v_pv" -v b="$v_pt" 'BEGIN { if (a != "" && b != "" && a !~ /[^0-9.]/ && b !~ /[^0-9.]/ && b + 0 > 0) printf "%.3f\n", a / b }' >>"/tmp/side.$k.ratio"
		done
		pt=$(median <"/tmp/side.$k.pt")
		pv=$(median <"/tmp/side.$k.pv")
		ratio=$(awk -v a="$pv" -v b="$pt" 'BEGIN { if (a == "" || b == "" || b + 0 == 0) print "n/a"; else printf "%.3f", a / b }')
		printf '%-28s %-20s %12s %12s %10s   %s\n' "$spec" "$metric" "${pt:-n/a}" "${pv:-n/a}" "$ratio" "$target" >>/tmp/side.table
		{
			printf '  %s, every round:\n' "$spec"
			printf '    perftest  %s\n' "$(tr '\n' ' ' <"/tmp/side.$k.pt")"
			printf '    pvperf    %s\n' "$(tr '\n' ' ' <"/tmp/side.$k.pv")"
			printf '    ratio     %s(median %s)\n' "$(tr '\n' ' ' <"/tmp/side.$k.ratio")" "$(median <"/tmp/side.$k.ratio" | grep . || echo n/a)"
		} >>/tmp/side.rounds
		if [ -n "$fails" ]; then
			record FAIL "side $spec" "${fails#; }$notes"
		elif [ -z "$pt" ] || [ -z "$pv" ]; then
			record FAIL "side $spec" "no usable value${notes}"
		else
			record PASS "side $spec" "ratio $ratio (target $target)$notes"
		fi
	done <<EOF
$SIDE
EOF
	side_table
}

side_table() {
	[ -s /tmp/side.table ] || return 0
	echo
	echo "Side by side on $DEV under QEMU TCG (medians of $ROUNDS rounds; ratios are reported, not judged):"
	printf '%-28s %-20s %12s %12s %10s   %s\n' test metric perftest pvperf pvperf/pt target
	cat /tmp/side.table
	cat /tmp/side.rounds
}

summary() {
	section summary
	awk -F '\t' '{ printf "%-4s  %-60s %s\n", $1, $2, $3 }' "$RESULTS"
	side_table
	pass=$(grep -c '^PASS' "$RESULTS")
	fail=$(grep -c '^FAIL' "$RESULTS")
	skip=$(grep -c '^SKIP' "$RESULTS")
	echo
	echo "checks: $pass passed, $fail failed, $skip skipped"
	echo "kernel messages since the setup (at most the last 30):"
	dmesg | awk -v t0="$T0" '{ t = $0; sub(/^\[ */, "", t); sub(/\].*/, "", t) } t + 0 >= t0 + 0' |
		tail -n 30 | sed 's/^/  | /'
	verdict=PASS
	[ "$fail" = 0 ] || verdict=FAIL
	echo "PVPERF-GUEST-VERDICT: $verdict ($pass passed, $fail failed, $skip skipped)"
}

T0=$(cut -d' ' -f1 /proc/uptime)
if setup; then
	info
	echo "PVPERF-GUEST-CHECKS-BEGIN ($CHECKS)"
	want sanity && check_sanity
	want conformance && check_conformance
	want pvperf && check_pvperf
	want ref && check_ref
	want interop && check_interop
	want reports && check_reports
	want side && check_side
fi
summary
