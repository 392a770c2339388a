#!/usr/bin/env bash
# wire-netns.sh: two hosts on one machine, over the emulator's network
# transports. It makes two network namespaces joined by a veth pair
# (10.80.0.1/24 and 10.80.0.2/24), runs a write_bw server in one and the
# client in the other, each on an emulated device with its namespace's
# address (PVPERF_EMU=addr=...), over RoCE v2 (UDP 4791), over TCP and over
# RoCE v1 (raw Ethernet frames), and with transport=auto (RoCE v2; then TCP,
# UDP port 4791 of one end taken by another process), and prints both sides'
# results. With -d it adds --check_data, and read_bw, send_bw (RC and UD),
# rdma_cm (-R), both roles of the TCP fallback, and runs through a shallow
# queue that drops (tbf).
#
# Needs root (ip netns, veth, tc); Debian's iproute2. Exits non-zero if any run
# fails. The namespaces are removed on exit.
#
# Usage: scripts/wire-netns.sh [-b DIR] [-d] [-n ITERS]
#   -b DIR    directory holding the pvperf binary (default: build it)
#   -d        also check the received data, and run read_bw and send_bw
#   -n ITERS  iterations of each test (default 2000)
set -euo pipefail

bin= check= iters=2000
while getopts "b:dn:h" o; do
	case $o in
	b) bin=$OPTARG ;;
	d) check=1 ;;
	n) iters=$OPTARG ;;
	h) sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
	esac
done
shift $((OPTIND - 1))
[ $# -eq 0 ] || { echo "wire-netns: unexpected argument: $1" >&2; exit 2; }
if ! command -v ip >/dev/null || ! command -v ss >/dev/null; then
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq iproute2 >/dev/null
fi
root=$(cd "$(dirname "$0")/.." && pwd)
built=
if [ -z "$bin" ]; then
	bin=$(mktemp -d)
	built=$bin
	(cd "$root" && go build -o "$bin/pvperf" ./cmd/pvperf)
fi
pv=$bin/pvperf

a=pvperf-wire-a b=pvperf-wire-b
cleanup() {
	ip netns del "$a" 2>/dev/null || true
	ip netns del "$b" 2>/dev/null || true
	rm -f /tmp/pvperf-wire-last.$$
}
trap 'cleanup; [ -z "$built" ] || rm -rf "$built"' EXIT
cleanup
ip netns add "$a"
ip netns add "$b"
ip link add pvw-a type veth peer name pvw-b
ip link set pvw-a netns "$a"
ip link set pvw-b netns "$b"
ip -n "$a" addr add 10.80.0.1/24 dev pvw-a
ip -n "$b" addr add 10.80.0.2/24 dev pvw-b
for ns in "$a" "$b"; do
	ip -n "$ns" link set lo up
done
ip -n "$a" link set pvw-a up
ip -n "$b" link set pvw-b up

fail=0
run() { # settings test args...
	local transport=$1 test=$2
	shift 2
	# The server is in namespace a, or with swap set in b.
	local sns=$a sip=10.80.0.1 cns=$b cip=10.80.0.2
	[ -n "${swap:-}" ] && { sns=$b sip=10.80.0.2 cns=$a cip=10.80.0.1; }
	echo "=== $test $* over $transport (server $sip)"
	ip netns exec "$sns" env PVPERF_EMU="addr=$sip,$transport" "$pv" "$test" -d emu0 "$@" >/tmp/pvperf-wire-server.$$ 2>&1 &
	local spid=$!
	local up=
	for _ in $(seq 100); do
		if ip netns exec "$sns" ss -ltn 2>/dev/null | grep -q ':18515 '; then up=1; break; fi
		sleep 0.1
	done
	[ -n "$up" ] || { echo "server did not listen"; cat /tmp/pvperf-wire-server.$$; kill $spid 2>/dev/null; fail=1; return; }
	local cs=0 ss=0
	ip netns exec "$cns" env PVPERF_EMU="addr=$cip,$transport" timeout 120 "$pv" "$test" -d emu0 "$@" "$sip" >/tmp/pvperf-wire-client.$$ 2>&1 || cs=$?
	wait $spid || ss=$?
	cp /tmp/pvperf-wire-client.$$ /tmp/pvperf-wire-last.$$
	echo "--- client (exit $cs)"
	grep -E "Data path|#bytes|^ [0-9]|Network port|rror|failed" /tmp/pvperf-wire-client.$$ || cat /tmp/pvperf-wire-client.$$
	echo "--- server (exit $ss)"
	grep -E "Data path|#bytes|^ [0-9]|Network port|rror|failed" /tmp/pvperf-wire-server.$$ || cat /tmp/pvperf-wire-server.$$
	rm -f /tmp/pvperf-wire-server.$$ /tmp/pvperf-wire-client.$$
	if [ $cs -ne 0 ] || [ $ss -ne 0 ]; then fail=1; fi
}

for transport in transport=roce transport=tcp transport=roce,roce=v1; do
	if [ -n "$check" ] && [ "$transport" = transport=roce,roce=v1 ]; then
		run $transport write_bw -s 65536 -n "$iters" --check_data
		run $transport send_bw -c UD -n "$iters" --check_data
	elif [ -n "$check" ]; then
		run $transport write_bw -s 65536 -n "$iters" --check_data
		run $transport read_bw -s 65536 -n "$iters" --check_data
		run $transport send_bw -s 65536 -n "$iters" --check_data
		run $transport send_bw -c UD -n "$iters" --check_data
		run $transport write_bw -s 65536 -n "$iters" -R
	else
		run $transport write_bw -s 65536 -n "$iters"
	fi
done
# transport=auto on both ends. First as two hosts with RoCE v2: the data
# path must say RoCE v2. Then with UDP port 4791 of 10.80.0.1 taken by
# another process (an emulated device forced to RoCE v2, waiting as a
# server on port 18600): the device of 10.80.0.1 falls back to TCP, and
# its peer in the other namespace must follow it, in both roles.
auto() { # want-path test args...
	local want=$1
	shift
	run transport=auto "$@"
	if ! grep "Data path" /tmp/pvperf-wire-last.$$ | grep -qF -- "$want (emulated device)"; then
		echo "the data path is not $want"; fail=1
	fi
}
auto "RoCE v2, 10.80.0.2 -> 10.80.0.1" write_bw -s 65536 -n "$iters"
ip netns exec "$a" env PVPERF_EMU=addr=10.80.0.1,transport=roce "$pv" write_bw -d emu0 -p 18600 >/dev/null 2>&1 &
holder=$!
for _ in $(seq 100); do
	ip netns exec "$a" ss -lun 2>/dev/null | grep -q '10.80.0.1:4791 ' && break
	sleep 0.1
done
auto "TCP, 10.80.0.2 -> 10.80.0.1" write_bw -s 65536 -n "$iters" ${check:+--check_data}
if [ -n "$check" ]; then
	auto "RoCE v2 from 10.80.0.2 (TCP to 10.80.0.1)" send_bw -c UD -n "$iters" --check_data
	swap=1
	auto "TCP, 10.80.0.1 -> 10.80.0.2" write_bw -s 65536 -n "$iters" --check_data
	auto "TCP from 10.80.0.1" send_bw -c UD -n "$iters" --check_data
	auto "TCP, 10.80.0.1 -> 10.80.0.2" write_bw -s 65536 -n "$iters" -R
	swap=
fi
kill $holder 2>/dev/null; wait $holder 2>/dev/null || true

# Congestion: a shallow queue on a's side (tbf, 200 Mbit/s, 40 KB), which
# drops what does not fit. RoCE v1's raw frames wait for room in it, and a
# bidirectional run's faster side waits for the slower direction.
if [ -n "$check" ]; then
	ip netns exec "$a" tc qdisc replace dev pvw-a root tbf rate 200mbit burst 20kb limit 40kb
	run transport=roce,roce=v1 read_bw -s 65536 -n 300 --check_data
	run transport=roce write_bw -b -s 65536 -n 300 --check_data
	ip netns exec "$a" tc qdisc del dev pvw-a root
fi

[ $fail -eq 0 ] && echo "wire-netns: all runs passed" || echo "wire-netns: FAILED"
exit $fail
