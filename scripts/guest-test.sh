#!/usr/bin/env bash
# guest-test.sh: runs pvperf against a real kernel RDMA device, Soft-RoCE
# (rdma_rxe), on a machine that has neither RDMA nor KVM. It boots Debian's
# kernel under QEMU's TCG emulation from an initramfs holding busybox, the
# rdma_rxe modules, iproute2, Debian's perftest (6.06), cmtime and the pvperf
# commands. In the guest, scripts/guest/init creates rxe0 on a veth
# (10.77.0.1) and runs the checks: the Go test binary built from e2e/guest
# (go test -c), which prints the kernel, both versions, the GID table and
# devinfo, then runs these groups of checks (one test each):
#
#   sanity       write_bw -d emu0 --loopback (the emulated device)
#   conformance  TestConformance and TestKernelGIDTable of verbs/uverbs on
#                rxe0
#   rdmacm       the kernel tests of verbs/rdmacm: connections through the
#                kernel's connection manager (rdma_ucm) to 10.77.0.1; then
#                -R between pvperf and perftest both ways and pvperf
#                against itself (write_bw, send_bw, read_bw, send_lat,
#                write_lat, send_bw -c UD, write_bw -q 4; and -z with
#                write_bw and read_lat), and no cm_id
#                left in the kernel after them; the connection manager's
#                failures (no listener, no RDMA device, no answer, a peer
#                that hangs or dies, too many QPs); cm_setup beside
#                librdmacm's cmtime (rdmacm-utils), and -R against the
#                same tests without it, pvperf's and perftest's (figures
#                reported)
#   pvperf       the eight pvperf tests, pvperf client against pvperf server;
#                write_bw and read_bw with --data_validation (and against
#                PVPERF_GUEST_PERFTEST_NEW's perftest both ways, when given)
#   ref          perftest against perftest, every interop configuration
#   interop      pvperf against perftest both ways: the eight RC tests,
#                send_bw -c UD, write_bw -q 2
#   reports      write_bw -a between two pvperf processes with --out_json,
#                --out_csv and --out_html on both sides; the host then
#                overlays the client's results with the emulator's in
#                .cache/guest/emu-vs-rxe.html (the report command)
#   side         perftest/perftest and pvperf/pvperf alternately (bandwidth,
#                message rate, latency): medians and ratios, reported only
#   wire         native endpoints: the emulator's wire transport (real RoCE
#                v2 packets) against rxe. init adds a network namespace
#                emuns and a veth pair: w0 10.79.0.1 with rxe1 in the
#                initial namespace, w1 10.79.0.2 in emuns, where pvperf runs
#                on emu0 with PVPERF_EMU=addr=10.79.0.2; and a second
#                emulator's namespace emuns2 (w3 10.81.0.2, w2 10.81.0.1),
#                routed to emuns through the initial namespace. Checks the
#                network (ping, TCP, GIDs), emu0's GID table, rxe1 against
#                itself, then pvperf against perftest both ways (the eight
#                RC tests, send_bw -c UD), 64 KiB write_bw figures beside
#                rxe1's own (reported only), and under netem on w1 (loss,
#                delay with reordering, duplication) write_bw and send_bw
#                of pvperf against perftest, and write_bw, send_bw and
#                read_bw between the two emulators with --check_data, and
#                write_bw with --data_validation (durations and packet
#                counters reported); and an emulator beside rxe1 in the
#                initial namespace (addr=10.79.0.1: rxe holds UDP 4791, so
#                it falls back to TCP) against emu0 of emuns, which must
#                follow it onto TCP (write_bw, send_bw -c UD, both roles,
#                --check_data). With this group
#                the default time limit is 1200 s; PVPERF_GUEST_WIRE_EMU
#                replaces the emulator's PVPERF_EMU (e.g.
#                addr=10.79.0.2,transport=tcp)
#
# The console streams to stdout and to .cache/guest/console.log (overwritten
# by each run); the summary is the test binary's "--- PASS/FAIL/SKIP" lines.
# The script exits 0 only when the test binary exited 0 in the guest; a
# failed check, a guest that never ran the checks or one that outlived the
# time limit make it exit 1 (2 for a usage error).
#
# Debian 12 on amd64 with Go (PATH or /usr/local/go/bin); root only to
# install what is missing (qemu-system-x86, cpio, iproute2, kmod) with
# apt-get. The kernel that linux-image-amd64 depends on, busybox-static,
# perftest and perftest's libraries are downloaded once into .cache/guest/
# (ignored by git); later runs download nothing. A run takes about 10 to 12
# minutes (3 to 4 of them the wire group), nearly all of it in the guest
# (everything there is emulated); the first run adds under a minute for
# downloads and the Go build.
#
# Usage: scripts/guest-test.sh [-c GROUPS] [-r ROUNDS] [-t SECONDS] [-l FILE] [-k]
#   -c GROUPS   comma-separated groups to run (default: all of the above)
#   -r ROUNDS   rounds of the side-by-side comparison (default 7)
#   -t SECONDS  time limit of the guest (default 720, 1200 with the wire
#               group); its checks stop a minute before it, so the summary
#               is printed even after a hang
#   -l FILE     keep a copy of the console log in FILE
#   -k          keep the work directory (initramfs tree, binaries)
# PVPERF_GUEST_CACHE overrides the cache directory; PVPERF_GUEST_APPEND adds
# to the guest kernel's command line; PVPERF_GUEST_WIRE_EMU is the PVPERF_EMU
# of the wire group's emulator (default addr=10.79.0.2; the one in emuns2
# gets the same with addr=10.81.0.2); PVPERF_GUEST_RUN replaces the
# -test.run pattern that -c makes (anchored; e.g. TestWireFaults with -c wire);
# PVPERF_GUEST_PERFTEST_NEW is the build directory of a perftest 6.29 or
# later (with --data_validation and the parameter negotiation), which the
# pvperf, interop and rdmacm groups then run against pvperf both ways too.
set -euo pipefail

checks=sanity,conformance,rdmacm,pvperf,ref,interop,reports,side,wire
rounds=7
limit=
logcopy=
keep=0
usage() { sed -n '2,/^set -euo/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//' >&2; exit "${1:-2}"; }
while getopts "c:r:t:l:kh" opt; do
	case $opt in
	c) checks=$OPTARG ;;
	r) rounds=$OPTARG ;;
	t) limit=$OPTARG ;;
	l) logcopy=$OPTARG ;;
	k) keep=1 ;;
	h) usage 0 ;;
	*) usage ;;
	esac
done
shift $((OPTIND - 1))
[ $# -eq 0 ] || usage
wire_emu=${PVPERF_GUEST_WIRE_EMU:-}
case $wire_emu in *[!A-Za-z0-9=,.:_/-]*) echo "guest-test: PVPERF_GUEST_WIRE_EMU has a character other than letters, digits and =,.:_/-" >&2; exit 2 ;; esac
run_override=${PVPERF_GUEST_RUN:-}
case $run_override in *[!A-Za-z0-9_/^\$\|\(\).*%-]*) echo "guest-test: PVPERF_GUEST_RUN has a character other than letters, digits and _/^\$|().*%-" >&2; exit 2 ;; esac
case $rounds in '' | *[!0-9]* | 0) echo "guest-test: -r needs a positive number" >&2; exit 2 ;; esac
if [ -z "$limit" ]; then
	# The wire group's fault checks alone take about 8 minutes.
	case ,$checks, in *,wire,*) limit=1200 ;; *) limit=720 ;; esac
fi
case $limit in '' | *[!0-9]* | 0) echo "guest-test: -t needs a positive number of seconds" >&2; exit 2 ;; esac
for c in ${checks//,/ }; do
	case $c in
	sanity | conformance | rdmacm | pvperf | ref | interop | reports | side | wire) ;;
	*) echo "guest-test: unknown check group in -c: $c" >&2; exit 2 ;;
	esac
done

repo=$(cd "$(dirname "$0")/.." && pwd)
cache=${PVPERF_GUEST_CACHE:-$repo/.cache/guest}
export DEBIAN_FRONTEND=noninteractive
export PATH="$PATH:/usr/local/go/bin:/usr/sbin:/sbin"
start=$(date +%s)

step() { printf '\n=== guest-test: %s (%ds)\n' "$*" "$(($(date +%s) - start))"; }
die() { echo "guest-test: $*" >&2; exit 1; }

command -v go >/dev/null || die "go not found (looked in PATH and /usr/local/go/bin)"
[ "$(dpkg --print-architecture)" = amd64 ] || die "needs an amd64 Debian host"

work=$(mktemp -d /tmp/pvperf-guest.XXXXXX)
# shellcheck disable=SC2317 # called by the trap
cleanup() {
	if [ "$keep" = 1 ]; then echo "guest-test: work directory kept: $work" >&2; else rm -rf "$work"; fi
}
trap cleanup EXIT

# --- 1. host tools -----------------------------------------------------------
apt_updated=0
apt_update() {
	if [ "$apt_updated" = 0 ]; then
		[ "$(id -u)" -eq 0 ] || die "apt-get update needs root"
		apt-get update -qq
		apt_updated=1
	fi
}
installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q 'install ok installed'; }

step "host tools"
missing=()
for p in qemu-system-x86 cpio iproute2 kmod gzip; do
	installed "$p" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
	echo "installing: ${missing[*]}"
	[ "$(id -u)" -eq 0 ] || die "installing ${missing[*]} needs root"
	apt_update
	apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
else
	echo "all installed: qemu-system-x86 cpio iproute2 kmod gzip"
fi

# --- 2. Debian packages for the guest, cached --------------------------------
debs=$cache/debs
root=$cache/root
mkdir -p "$debs"

# versions NAME...: "NAME VERSION" for each package apt knows, the version apt would install.
versions() {
	apt-cache show --no-all-versions "$@" 2>/dev/null | awk '/^Package:/ { p = $2 } /^Version:/ { print p, $2 }'
}

step "Debian packages for the guest ($debs)"
kpkg=$(apt-cache depends linux-image-amd64 2>/dev/null | awk '$1 == "Depends:" && $2 ~ /^linux-image-/ { print $2; exit }')
if [ -z "$kpkg" ]; then
	apt_update
	kpkg=$(apt-cache depends linux-image-amd64 2>/dev/null | awk '$1 == "Depends:" && $2 ~ /^linux-image-/ { print $2; exit }')
	[ -n "$kpkg" ] || die "cannot tell which kernel linux-image-amd64 depends on"
fi
# The kernel, busybox, perftest and what its binaries and the rxe provider
# load (put_with_libs below stops when one is missing).
pkgs=("$kpkg" busybox-static perftest rdmacm-utils libibverbs1 ibverbs-providers librdmacm1 libibumad3
	libnl-3-200 libnl-route-3-200 libpci3)
declare -A version=()
while read -r p v; do version[$p]=$v; done < <(versions "${pkgs[@]}")
for p in "${pkgs[@]}"; do
	if [ -z "${version[$p]:-}" ]; then
		apt_update
		while read -r p2 v; do version[$p2]=$v; done < <(versions "${pkgs[@]}")
		break
	fi
done
files=()
fetch=()
for p in "${pkgs[@]}"; do
	[ -n "${version[$p]:-}" ] || die "package $p not found in the apt sources"
	f="${p}_${version[$p]//:/%3a}_amd64.deb"
	files+=("$f")
	if [ ! -f "$debs/$f" ]; then
		rm -f "$debs/$p"_*.deb
		fetch+=("$p")
	fi
done
if [ ${#fetch[@]} -gt 0 ]; then
	echo "downloading: ${fetch[*]}"
	(cd "$debs" && apt-get download -qq -o APT::Sandbox::User=root "${fetch[@]}")
fi
for f in "${files[@]}"; do
	[ -f "$debs/$f" ] || die "apt-get download did not produce $f"
done
printf '%s\n' "${files[@]}"

stamp=$(printf '%s\n' "${files[@]}" | sort)
if [ ! -f "$root/.stamp" ] || [ "$(cat "$root/.stamp")" != "$stamp" ]; then
	step "unpacking the packages"
	rm -rf "$root"
	mkdir -p "$root"
	for f in "${files[@]}"; do dpkg -x "$debs/$f" "$root"; done
	kver=$(ls "$root/lib/modules")
	depmod -b "$root" "$kver"
	printf '%s\n' "$stamp" >"$root/.stamp"
fi
kver=$(ls "$root/lib/modules")
[ "$(echo "$kver" | wc -l)" -eq 1 ] || die "expected one kernel in $root/lib/modules, found: $kver"
vmlinuz=$root/boot/vmlinuz-$kver
[ -f "$vmlinuz" ] || die "no $vmlinuz"
echo "kernel $kver"

# --- 3. pvperf for the guest -------------------------------------------------
step "building pvperf"
bin=$work/pvperf
mkdir -p "$bin"
(cd "$repo" && CGO_ENABLED=0 go build -o "$bin/" ./cmd/...)
if (cd "$repo" && go list ./verbs/uverbs >/dev/null 2>&1); then
	if ! (cd "$repo" && CGO_ENABLED=0 go test -c -o "$bin/uverbs.test" ./verbs/uverbs); then
		echo "not built: go test -c ./verbs/uverbs failed on the host (see its output above)" >"$bin/uverbs.test.missing"
	fi
else
	echo "not built: there is no package verbs/uverbs yet" >"$bin/uverbs.test.missing"
fi
(cd "$repo" && CGO_ENABLED=0 go test -c -o "$bin/rdmacm.test" ./verbs/rdmacm)
# The clock test reports which clock the benchmark loops use in the guest.
(cd "$repo" && CGO_ENABLED=0 go test -c -o "$bin/clock.test" ./internal/clock)
# The checks themselves.
(cd "$repo" && CGO_ENABLED=0 go test -c -o "$bin/guest.test" ./e2e/guest)
ls "$bin"

# --- 4. the initramfs --------------------------------------------------------
step "building the initramfs"
tree=$work/initramfs
mkdir -p "$tree"/{bin,sbin,usr/bin,usr/sbin,proc,sys,dev,tmp,etc/libibverbs.d,guest}

# put SRC DEST: copy a file into the tree at DEST (an absolute guest path).
put() {
	mkdir -p "$tree$(dirname "$2")"
	cp -L "$1" "$tree$2"
}

# put_with_libs SRC DEST: copy an ELF file and every shared library it needs
# (as ldd resolves them, the unpacked packages first, then the host's).
libpath=$root/usr/lib/x86_64-linux-gnu:$root/lib/x86_64-linux-gnu
put_with_libs() {
	local out lib
	put "$1" "$2"
	out=$(LD_LIBRARY_PATH=$libpath ldd "$1") || die "ldd $1 failed"
	if grep -q 'not found' <<<"$out"; then
		die "$1 needs libraries no package here provides:$(grep 'not found' <<<"$out")"
	fi
	while read -r lib; do
		[ -e "$tree${lib#"$root"}" ] || put "$lib" "${lib#"$root"}"
	done < <(awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\// { print $1 }' <<<"$out")
}

put "$root/bin/busybox" /bin/busybox
ln -s busybox "$tree/bin/sh"
if ldd "$tree/bin/busybox" >/dev/null 2>&1; then die "busybox-static's busybox is not static"; fi
put_with_libs "$(command -v ip)" /bin/iproute2-ip
# tc for netem (the wire group's faults); busybox has a tc applet too.
put_with_libs "$(command -v tc)" /bin/iproute2-tc
put_with_libs "$(command -v rdma)" /bin/rdma
for t in write_bw read_bw send_bw atomic_bw write_lat read_lat send_lat atomic_lat; do
	put_with_libs "$root/usr/bin/ib_$t" "/usr/bin/ib_$t"
done
put_with_libs "$root/usr/bin/cmtime" /usr/bin/cmtime
put_with_libs "$root/usr/lib/x86_64-linux-gnu/libibverbs/librxe-rdmav34.so" \
	/usr/lib/x86_64-linux-gnu/libibverbs/librxe-rdmav34.so
put "$root/etc/libibverbs.d/rxe.driver" /etc/libibverbs.d/rxe.driver
# A newer perftest (6.29 or later, built from source: no Debian package
# has it yet), which the pvperf, interop and rdmacm groups also run against.
if [ -n "${PVPERF_GUEST_PERFTEST_NEW:-}" ]; then
	for t in write_bw read_bw send_bw atomic_bw write_lat read_lat send_lat atomic_lat; do
		put_with_libs "$PVPERF_GUEST_PERFTEST_NEW/ib_$t" "/opt/perftest-new/ib_$t"
	done
fi
cp -a "$bin" "$tree/pvperf"

# Modules: the ones asked for and their dependencies from modules.dep, in
# load order (a module's dependencies, last listed first, then the module).
moddir=lib/modules/$kver
: >"$tree/guest/modules"
for m in crc32_generic rdma_rxe rdma_ucm veth sch_netem; do
	line=$(awk -v m="$m" '{ p = $1; sub(/:$/, "", p); n = p; sub(/.*\//, "", n); sub(/\.ko.*/, "", n); if (n == m) { print; exit } }' "$root/$moddir/modules.dep")
	[ -n "$line" ] || die "module $m not in $moddir/modules.dep"
	read -r -a order < <(awk '{ sub(/:$/, "", $1); for (i = NF; i >= 2; i--) printf "%s ", $i; print $1 }' <<<"$line")
	for p in "${order[@]}"; do
		dest=/$moddir/${p%.ko*}.ko
		grep -qxF "$dest" "$tree/guest/modules" && continue
		mkdir -p "$tree$(dirname "$dest")"
		case $p in
		*.ko) cp "$root/$moddir/$p" "$tree$dest" ;;
		*.ko.xz) xz -dc "$root/$moddir/$p" >"$tree$dest" ;;
		*.ko.zst) zstd -qdc "$root/$moddir/$p" >"$tree$dest" ;;
		*.ko.gz) gzip -dc "$root/$moddir/$p" >"$tree$dest" ;;
		*) die "unknown module file $p" ;;
		esac
		echo "$dest" >>"$tree/guest/modules"
	done
done
echo "modules: $(sed 's|.*/||; s|\.ko$||' "$tree/guest/modules" | tr '\n' ' ')"

cp "$repo/scripts/guest/init" "$tree/init"
chmod 755 "$tree/init"
# The guest's checks end a minute before the time limit, so that their
# summary is printed even when some of them hang. -c selects the tests.
budget=$((limit > 90 ? limit - 60 : 30))
run=
for c in ${checks//,/ }; do
	case $c in
	sanity) t=TestSanity ;; conformance) t=TestConformance ;; rdmacm) t='TestRDMACM|TestRDMACMInterop|TestCMFailures|TestCMSetup|TestCMDataPath' ;; pvperf) t='TestPvperf|TestDataValidation' ;;
	ref) t=TestReference ;; interop) t='TestInterop|TestRunInfinitely' ;; reports) t=TestReports ;; side) t=TestSideBySide ;;
	wire) t='TestWire|TestWireFallback|TestWireFaults' ;;
	esac
	run=${run:+$run|}$t
done
[ -z "$run_override" ] || run=$run_override
printf "RUN='^(%s)$'\nROUNDS=%s\nBUDGET=%s\n" "$run" "$rounds" "$budget" >"$tree/guest/config"
[ -z "${PVPERF_GUEST_PERFTEST_NEW:-}" ] || echo "PERFTEST_NEW=/opt/perftest-new" >>"$tree/guest/config"
# The wire group's namespace, veth pair and rxe1 exist only when it runs.
case ,$checks, in
*,wire,*) printf "WIRE=1\nWIRE_EMU='%s'\n" "$wire_emu" >>"$tree/guest/config" ;;
esac

initrd=$work/initrd.gz
(cd "$tree" && find . | cpio -o -H newc -R 0:0 --quiet | gzip -1 >"$initrd")
echo "initramfs: $(du -h "$initrd" | cut -f1)"

# --- 5. boot -----------------------------------------------------------------
step "booting the guest (QEMU TCG, time limit ${limit}s)"
# TCG's speed is the host's: its load (other work on it) skews every figure.
echo "host: $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg)"
log=$cache/console.log
set +e
timeout -k 10 "$limit" qemu-system-x86_64 -accel tcg,thread=multi -cpu max -smp 2 -m 1024 \
	-kernel "$vmlinuz" -initrd "$initrd" -append "console=ttyS0 quiet panic=-1${PVPERF_GUEST_APPEND:+ $PVPERF_GUEST_APPEND}" \
	-nographic -no-reboot -net none </dev/null 2>&1 |
	sed -u 's/\r//g; s/\x1b\[[0-9;?]*[A-Za-z]//g; s/\x1bc//g' | tee "$log"
qemu_rc=${PIPESTATUS[0]}
set -e
[ -z "$logcopy" ] || cp "$log" "$logcopy"

elapsed=$(($(date +%s) - start))

# The rxe results the guest printed (check_reports), overlaid with the
# emulator's on this machine in one report.
overlay=ok
marker='PVPERF-GUEST-FILE-BEGIN rxe0-write_bw.json'
if grep -q "^$marker" "$log"; then
	step "report: write_bw -a on the emulator against rxe0 in the guest"
	rxe=$cache/rxe-write_bw.json emujson=$cache/emu-write_bw.json
	sed -n "/^$marker/,/^PVPERF-GUEST-FILE-END/p" "$log" | sed '1d;$d' >"$rxe"
	if "$bin/write_bw" -d emu0 --loopback -a -n 20 --out_json --out_json_file "$emujson" >/dev/null &&
		"$bin/report" --html "$cache/emu-vs-rxe.html" --csv "$cache/emu-vs-rxe.csv" "$emujson" "$rxe" &&
		"$bin/report" "$emujson" "$rxe"; then
		echo "report: $cache/emu-vs-rxe.html"
	else
		overlay=failed
	fi
fi
# The summary: every check's result line, as the test binary printed it.
step "summary"
echo "host load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
grep -E '^ *--- (PASS|FAIL|SKIP): ' "$log" || true
sed -n '/^PVPERF-SIDE-BEGIN/,/^PVPERF-SIDE-END/p' "$log" | sed '1d;$d'
# What each failed check logged last, so that a failure far from here (a CI
# log that keeps only its end) still says why.
for failed in $(tr -d '\r' <"$log" | sed -n 's/^--- FAIL: \([A-Za-z0-9_]*\) .*/\1/p'); do
	echo
	echo "--- the end of what $failed logged:"
	tr -d '\r' <"$log" | sed -n "/^=== RUN   $failed\$/,/^--- FAIL: $failed /p" | tail -n 40
done
status=$(sed -n 's/^PVPERF-GUEST-EXIT: \([0-9]*\).*/\1/p' "$log" | tail -n 1)
reached=0
if grep -q '^=== RUN' "$log"; then reached=1; fi
killed=0
case $qemu_rc in 124 | 137) killed=1 ;; esac # stopped by timeout
echo
case $status:$reached in
0:1)
	if [ "$killed" = 1 ]; then
		echo "guest-test: FAIL: the checks passed, but the guest did not power off; killed after ${limit}s (log: $log)"
		exit 1
	fi
	if [ "$overlay" != ok ]; then
		echo "guest-test: FAIL: the checks passed, but the report of the guest's results failed (see above)"
		exit 1
	fi
	echo "guest-test: PASS in ${elapsed}s (log: $log)"
	exit 0
	;;
[0-9]*:1)
	echo "guest-test: FAIL: checks failed in the guest (exit status $status), see the summary above (${elapsed}s, log: $log)"
	exit 1
	;;
esac
if [ "$killed" = 1 ]; then
	if [ "$reached" = 1 ]; then
		echo "guest-test: FAIL: the guest hung during the checks; killed after ${limit}s (log: $log)"
	else
		echo "guest-test: FAIL: the guest hung before the checks; killed after ${limit}s (log: $log)"
	fi
elif [ "$reached" = 1 ]; then
	echo "guest-test: FAIL: the guest stopped during the checks without an exit status (qemu exit $qemu_rc, log: $log)"
else
	echo "guest-test: FAIL: the guest never ran the checks (qemu exit $qemu_rc, log: $log)"
fi
exit 1
