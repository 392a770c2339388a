# shellcheck shell=sh disable=SC2034 # the settings are used by checks.sh
# lib.sh: helpers for the checks of the test guest (busybox sh), sourced by
# checks.sh. A check reports through record; a client/server test runs
# through run_pair (or check_pair, which also records).

PV=/pvperf              # pvperf's commands (and uverbs.test when built)
PT=/usr/bin             # perftest's commands (ib_*)
DEV=rxe0                # the Soft-RoCE device set up by checks.sh
ADDR=10.77.0.1          # its address (v0)
ADDR6=fd77::1           # and a global IPv6 address
PORT=18515              # perftest's default port
RESULTS=/tmp/results    # one line per check: STATUS <tab> NAME <tab> NOTE
RUN_TIMEOUT=60          # seconds one server or client may run
LISTEN_TIMEOUT=30       # seconds a server may take to listen
BUDGET=${BUDGET:-660}   # seconds after boot by which the checks must be done

: >"$RESULTS"

section() { printf '\n==================== %s [%ss after boot] ====================\n' "$*" "$(cut -d. -f1 /proc/uptime)"; }

# record STATUS NAME [NOTE]: STATUS is PASS, FAIL or SKIP.
record() {
	printf '%s\t%s\t%s\n' "$1" "$2" "${3:-}" >>"$RESULTS"
	printf '[%s] %s%s\n' "$1" "$2" "${3:+: $3}"
}

# want GROUP: whether the group is among those asked for ($CHECKS).
want() {
	case ",$CHECKS," in *",$1,"*) return 0 ;; esac
	return 1
}

# limit SECONDS: SECONDS, or the seconds left before $BUDGET when fewer; 0
# when less than 5 s are left (a run gets a timeout of at most this much).
limit() {
	left=$((BUDGET - $(cut -d. -f1 /proc/uptime)))
	if [ "$left" -lt 5 ]; then
		echo 0
	elif [ "$left" -lt "$1" ]; then
		echo "$left"
	else
		echo "$1"
	fi
}

# timed_out STATUS: whether STATUS is that of a command stopped by timeout
# (busybox's timeout: killed by SIGTERM or SIGKILL; coreutils': 124).
timed_out() {
	case $1 in
	124 | 137 | 143) return 0 ;;
	esac
	return 1
}

# alive PID: whether the process runs (a zombie does not count).
alive() {
	st=$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f1)
	[ -n "$st" ] && [ "$st" != Z ]
}

# listening: whether a TCP socket listens on $PORT.
listening() {
	awk -v p="$(printf ':%04X$' "$PORT")" '$2 ~ p && $4 == "0A" { f = 1 } END { exit !f }' \
		/proc/net/tcp /proc/net/tcp6 2>/dev/null
}

# lastline FILE: the last non-empty line of FILE, trimmed (a failure's reason).
lastline() { awk 'NF { l = $0 } END { gsub(/^[ \t]+|[ \t]+$/, "", l); print l }' "$1"; }

# has_row FILE: whether FILE holds a result row (numbers under a "#bytes" header).
has_row() { awk '/#bytes/ { h = 1; next } h && $1 ~ /^[0-9]+$/ && NF >= 4 { f = 1 } END { exit !f }' "$1"; }

# field FILE N: field N of the first result row in FILE.
field() { awk -v n="$2" '/#bytes/ { h = 1; next } h && $1 ~ /^[0-9]+$/ && NF >= n { print $n; exit }' "$1"; }

# rows FILE: the headers and result rows of FILE.
rows() { awk '/#bytes/ { h = 1; print; next } h && $1 ~ /^[0-9]+$/ { print }' "$1"; }

# run_pair SERVER CLIENT ARG...: runs SERVER ARG... in the background, waits
# until it listens on $PORT, then runs CLIENT ARG... $ADDR. Passes when both
# exit 0 and the client prints a result row; with SERVER_ROW=1 the server must
# print one as well. Returns 0 or 1 and sets PAIR_NOTE (the reason of a
# failure, or the duration); the outputs stay in /tmp/pair.server and
# /tmp/pair.client. Both outputs are printed; with PAIR_QUIET=1, only the
# result rows of a pair that passed. Fails without running anything when the
# time budget is spent.
run_pair() {
	srv=$1 cli=$2
	shift 2
	S=/tmp/pair.server C=/tmp/pair.client
	: >"$S"
	: >"$C"
	echo "# server: $srv $*"
	echo "# client: $cli $* $ADDR"
	tmo=$(limit "$RUN_TIMEOUT")
	if [ "$tmo" = 0 ]; then
		PAIR_NOTE="not run: the time budget (${BUDGET}s after boot) is spent"
		echo "  ($PAIR_NOTE)"
		return 1
	fi
	t0=$(date +%s)
	timeout "$tmo" "$srv" "$@" >"$S" 2>&1 &
	spid=$!
	i=0
	while ! listening && alive "$spid" && [ "$i" -lt $((LISTEN_TIMEOUT * 10)) ]; do
		sleep 0.1
		i=$((i + 1))
	done
	crc=none
	if listening && alive "$spid"; then
		timeout "$tmo" "$cli" "$@" "$ADDR" >"$C" 2>&1
		crc=$?
	fi
	# A server ends by itself soon after its client; after a failed client it
	# may wait for ever, so it gets less time.
	grace=100
	[ "$crc" = 0 ] || grace=20
	i=0
	while alive "$spid" && [ "$i" -lt "$grace" ]; do
		sleep 0.1
		i=$((i + 1))
	done
	killed=0
	if alive "$spid"; then
		kill -9 "$spid" 2>/dev/null
		killed=1
	fi
	wait "$spid" 2>/dev/null
	src=$?
	PAIR_NOTE=
	if [ "$crc" = none ]; then
		if [ "$killed" = 1 ]; then
			PAIR_NOTE="server not listening on port $PORT after ${LISTEN_TIMEOUT}s"
		else
			PAIR_NOTE="server exited (status $src) before listening: $(lastline "$S")"
		fi
	elif timed_out "$crc"; then
		PAIR_NOTE="client timed out after ${tmo}s"
	elif [ "$crc" != 0 ]; then
		PAIR_NOTE="client exit $crc: $(lastline "$C")"
	elif [ "$killed" = 1 ]; then
		PAIR_NOTE="server still running $((grace / 10))s after its client ended"
	elif timed_out "$src"; then
		PAIR_NOTE="server timed out after ${tmo}s"
	elif [ "$src" != 0 ]; then
		PAIR_NOTE="server exit $src: $(lastline "$S")"
	elif ! has_row "$C"; then
		PAIR_NOTE="client printed no result row"
	elif [ "${SERVER_ROW:-0}" = 1 ] && ! has_row "$S"; then
		PAIR_NOTE="server printed no result row"
	fi
	if [ -n "$PAIR_NOTE" ] || [ "${PAIR_QUIET:-0}" != 1 ]; then
		sed 's/^/  server| /' "$S"
		sed 's/^/  client| /' "$C"
	fi
	if [ -n "$PAIR_NOTE" ]; then
		return 1
	fi
	PAIR_NOTE="$(($(date +%s) - t0))s"
	if [ "${PAIR_QUIET:-0}" = 1 ]; then
		rows "$C" | sed 's/^/  client| /'
		echo "  ($PAIR_NOTE)"
	fi
	return 0
}

# server_reports TEST: whether perftest's server prints a result row in TEST
# (it does not in read_lat and atomic_lat, where it stays passive).
server_reports() {
	case $1 in
	*read_lat | *atomic_lat) return 1 ;;
	esac
	return 0
}

# check_pair NAME SERVER CLIENT ARG...: run_pair, recorded as check NAME; the
# server must print a result row where perftest's server does.
check_pair() {
	name=$1
	shift
	echo
	echo "--- $name"
	SERVER_ROW=0
	server_reports "$1" && SERVER_ROW=1
	run_pair "$@"
	case $? in
	0) record PASS "$name" "$PAIR_NOTE" ;;
	*) record FAIL "$name" "$PAIR_NOTE" ;;
	esac
}

# check_cmd NAME COMMAND...: runs one command (within $RUN_TIMEOUT); it must
# exit 0 and print a result row.
check_cmd() {
	name=$1
	shift
	echo
	echo "--- $name"
	echo "# $*"
	tmo=$(limit "$RUN_TIMEOUT")
	if [ "$tmo" = 0 ]; then
		record FAIL "$name" "not run: the time budget (${BUDGET}s after boot) is spent"
		return
	fi
	t0=$(date +%s)
	timeout "$tmo" "$@" >/tmp/cmd.out 2>&1
	rc=$?
	sed 's/^/  | /' /tmp/cmd.out
	if timed_out "$rc"; then
		record FAIL "$name" "timed out after ${tmo}s"
	elif [ "$rc" != 0 ]; then
		record FAIL "$name" "exit $rc: $(lastline /tmp/cmd.out)"
	elif ! has_row /tmp/cmd.out; then
		record FAIL "$name" "no result row"
	else
		record PASS "$name" "$(($(date +%s) - t0))s"
	fi
}

# median: the median of the numbers on stdin (one a line), or nothing.
median() {
	awk '{ v[++n] = $1 + 0 }
	END {
		if (n == 0) exit
		for (i = 2; i <= n; i++) for (j = i; j > 1 && v[j-1] > v[j]; j--) { t = v[j]; v[j] = v[j-1]; v[j-1] = t }
		print (n % 2) ? v[(n+1)/2] : (v[n/2] + v[n/2+1]) / 2
	}'
}
