#!/usr/bin/env bash
# pvrdma-lab.sh: runs pvperf on the kernel's vmw_pvrdma driver, the
# paravirtual RDMA NIC of VMware VMs, on a machine without RDMA or KVM.
#
# QEMU 7.2 (Debian 12's qemu-system-x86) still has the pvrdma device model:
# it runs the guest's unmodified vmw_pvrdma driver and hands the guest's work
# to an RDMA device of its own host through libibverbs. So the lab nests two
# guests, both under TCG:
#
#   L0 (this machine)  qemu-system-x86_64 boots L1
#   L1                 Soft-RoCE rxe0 on a veth (10.77.0.1); madmux (pvperf's
#                      answer to QEMU's rdmacm-mux) on the pvrdma MAD socket;
#                      qemu-system-x86_64 boots L2
#   L2                 vmxnet3 eth0 (PCI function 0) and pvrdma (function 1,
#                      backed by L1's rxe0): vmw_pvrdma0; the checks run here
#
# Debian does not ship vmw_pvrdma.ko: the lab builds it out of tree from
# linux-source-6.1 against linux-headers of the guests' kernel. The checks
# in L2 are the Go test binary of e2e/guest (go test -c; its TestLab checks
# and the shared ones), started by scripts/pvrdma/init, by group:
#
#   conformance  the verbs conformance suite (verbs/uverbs) on vmw_pvrdma0;
#                what the device model lacks is an explicit skip
#   devinfo      pvperf devinfo -v next to ibv_devinfo -v: every attribute
#   pvperf       the eight pvperf tests, pvperf server and client; the ones
#                the device model cannot run must fail cleanly (no hang)
#   ref          perftest 6.06 against itself, the same tests
#   interop      pvperf against perftest both ways, for the tests perftest
#                passes on this device
#   native       pvperf in L2 on vmw_pvrdma0 against perftest in L1 on rxe0
#   side         pvperf/perftest side by side, interleaved (-r rounds)
#   smoke        conformance, send_bw, send_lat, send_bw -c UD and one
#                interop pair: what CI runs (-c smoke)
#
# Downloads and builds are cached in .cache/pvrdma (ignored by git); a second
# run downloads and builds nothing but pvperf. The console of both guests
# streams to stdout and to .cache/pvrdma/console.log. The script prints a
# summary of its steps and of the checks, and exits 0 only when every check
# passed; a step that fails says which and why, exits 1 and leaves no QEMU
# process behind (2 for a usage error).
#
# Debian 12 on amd64, root (apt-get installs qemu-system-x86, cpio, kmod,
# xz-utils, make, gcc and the kernel headers when missing), Go on PATH or in
# /usr/local/go/bin.
#
# Usage: scripts/pvrdma-lab.sh [-c GROUPS] [-r ROUNDS] [-t SECONDS] [-l FILE] [-k] [-s]
#   -c GROUPS   comma-separated groups (default:
#               conformance,devinfo,pvperf,ref,interop,native,side)
#   -r ROUNDS   rounds of the side-by-side comparison (default 5)
#   -t SECONDS  time limit of the whole boot (default 5400: a full run takes 60 to 80 minutes); the checks in L2
#               stop two minutes before it, so the summary is printed even
#               after a hang
#   -l FILE     keep a copy of the console log in FILE
#   -k          keep the work directory (both initramfs trees)
#   -s          serve: run no checks, keep both guests up with a shell on
#               127.0.0.1:15556 (L1; from there, nc 127.0.0.1 5555 is L2's)
# PVPERF_LAB_QEMU runs another qemu-system-x86_64 in L1; PVPERF_LAB_MODULE
# loads another vmw_pvrdma.ko in L2 (both to check the lab's own errors).
set -euo pipefail

checks=conformance,devinfo,pvperf,ref,interop,native,side
rounds=5
limit=5400
logcopy=
keep=0
serve=0
usage() { sed -n '2,/^set -euo/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//' >&2; exit "${1:-2}"; }
while getopts "c:r:t:l:ksh" opt; do
	case $opt in
	c) checks=$OPTARG ;;
	r) rounds=$OPTARG ;;
	t) limit=$OPTARG ;;
	l) logcopy=$OPTARG ;;
	k) keep=1 ;;
	s) serve=1 ;;
	h) usage 0 ;;
	*) usage ;;
	esac
done
shift $((OPTIND - 1))
[ $# -eq 0 ] || usage
case $rounds in '' | *[!0-9]* | 0) echo "pvrdma-lab: -r needs a positive number" >&2; exit 2 ;; esac
case $limit in '' | *[!0-9]* | 0) echo "pvrdma-lab: -t needs a positive number of seconds" >&2; exit 2 ;; esac
for c in ${checks//,/ }; do
	case $c in
	conformance | devinfo | pvperf | ref | interop | native | side | smoke) ;;
	*) echo "pvrdma-lab: unknown check group in -c: $c" >&2; exit 2 ;;
	esac
done

repo=$(cd "$(dirname "$0")/.." && pwd)
cache=${PVPERF_LAB_CACHE:-$repo/.cache/pvrdma}
export DEBIAN_FRONTEND=noninteractive
export PATH="$PATH:/usr/local/go/bin:/usr/sbin:/sbin"
start=$(date +%s)
steps=() # "name<TAB>seconds<TAB>status"
step_name=
step_t0=$start

now() { echo $(($(date +%s) - start)); }
step() {
	end_step ok
	step_name=$1
	step_t0=$(date +%s)
	printf '\n=== pvrdma-lab: %s (%ds)\n' "$*" "$(now)"
}
end_step() {
	if [ -n "$step_name" ]; then
		steps+=("$step_name	$(($(date +%s) - step_t0))	$1")
		step_name=
	fi
}
print_steps() {
	echo
	echo "pvrdma-lab: steps (seconds)"
	local s
	for s in "${steps[@]}"; do
		IFS='	' read -r n d st <<<"$s"
		printf '  %-44s %6s  %s\n' "$n" "$d" "$st"
	done
}
die() {
	local name=${step_name:-setup}
	end_step failed
	echo "pvrdma-lab: step \"$name\" failed: $*" >&2
	print_steps >&2
	exit 1
}

command -v go >/dev/null || die "go not found (looked in PATH and /usr/local/go/bin)"
[ "$(dpkg --print-architecture 2>/dev/null)" = amd64 ] || die "needs an amd64 Debian host"

work=$(mktemp -d /tmp/pvperf-lab.XXXXXX)
qpid=
# shellcheck disable=SC2317 # called by the trap
cleanup() {
	# $qpid is timeout's: it passes TERM on to QEMU; KILL is not passed on.
	if [ -n "$qpid" ] && kill -0 "$qpid" 2>/dev/null; then
		kill -TERM "$qpid" 2>/dev/null || true
		local i=0
		while kill -0 "$qpid" 2>/dev/null && [ "$i" -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
		pkill -KILL -P "$qpid" 2>/dev/null || true
		kill -KILL "$qpid" 2>/dev/null || true
		echo "pvrdma-lab: stopped QEMU" >&2
	fi
	if [ "$keep" = 1 ]; then echo "pvrdma-lab: work directory kept: $work" >&2; else rm -rf "$work"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# --- 1. host tools -----------------------------------------------------------
apt_updated=0
apt_update() {
	if [ "$apt_updated" = 0 ]; then
		[ "$(id -u)" -eq 0 ] || die "apt-get update needs root"
		apt-get update -qq || die "apt-get update failed"
		apt_updated=1
	fi
}
installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q 'install ok installed'; }
kernel_pkg() { apt-cache depends linux-image-amd64 2>/dev/null | awk '$1 == "Depends:" && $2 ~ /^linux-image-/ { print $2; exit }'; }

# host_needs: the guests' kernel (kpkg, kver) and the host packages not
# installed yet (missing).
host_needs() {
	missing=()
	kpkg=$(kernel_pkg)
	[ -n "$kpkg" ] || return 1
	kver=${kpkg#linux-image-}
	for p in qemu-system-x86 cpio kmod gzip xz-utils make gcc iproute2 "linux-headers-$kver"; do
		installed "$p" || missing+=("$p")
	done
}

step "host tools"
host_needs || true
if [ -z "$kpkg" ] || [ ${#missing[@]} -gt 0 ]; then
	[ "$(id -u)" -eq 0 ] || die "installing ${missing[*]:-the kernel headers} needs root"
	# Fresh package lists first: stale ones may name a kernel whose
	# headers the archive no longer has.
	apt_update
	host_needs || die "cannot tell which kernel linux-image-amd64 depends on"
fi
if [ ${#missing[@]} -gt 0 ]; then
	echo "installing: ${missing[*]}"
	apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null ||
		die "apt-get install ${missing[*]} failed"
else
	echo "all installed: qemu-system-x86 cpio kmod gzip xz-utils make gcc iproute2 linux-headers-$kver"
fi
qemu=${PVPERF_LAB_QEMU:-$(command -v qemu-system-x86_64 || true)}
[ -x "$qemu" ] || die "no qemu-system-x86_64"
echo "QEMU for L1: $qemu ($("$qemu" --version | head -n 1))"
"$qemu" -device help 2>/dev/null | grep -q '"pvrdma"' ||
	die "$qemu has no pvrdma device (QEMU 7.2 has it; it was removed in 9.1)"
"$qemu" -device help 2>/dev/null | grep -q '"vmxnet3"' || die "$qemu has no vmxnet3 device"

# --- 2. Debian packages, cached ----------------------------------------------
debs=$cache/debs
root=$cache/root
mkdir -p "$debs"
versions() {
	apt-cache show --no-all-versions "$@" 2>/dev/null | awk '/^Package:/ { p = $2 } /^Version:/ { print p, $2 }'
}

step "Debian packages ($debs)"
kversion=$(versions "$kpkg" | awk '{ print $2 }')
[ -n "$kversion" ] || die "apt knows no version of $kpkg"
series=$(echo "$kver" | cut -d. -f1-2)
pkgs=("$kpkg" busybox-static perftest libibverbs1 ibverbs-providers ibverbs-utils librdmacm1
	libibumad3 libnl-3-200 libnl-route-3-200 libpci3)
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
	[ -f "$debs/$f" ] || fetch+=("$p=${version[$p]}")
done
# The kernel's source, of the kernel's version when apt has it.
srcpkg=linux-source-$series
srcver=$kversion
if ! apt-cache madison "$srcpkg" 2>/dev/null | awk '{ print $3 }' | grep -qxF "$kversion"; then
	srcver=$(versions "$srcpkg" | awk '{ print $2 }')
	[ -n "$srcver" ] || die "apt knows no $srcpkg"
	echo "warning: no $srcpkg $kversion; building vmw_pvrdma from $srcver against the headers of $kver"
fi
srcdeb="${srcpkg}_${srcver//:/%3a}_all.deb"
[ -f "$debs/$srcdeb" ] || fetch+=("$srcpkg=$srcver")
if [ ${#fetch[@]} -gt 0 ]; then
	echo "downloading: ${fetch[*]}"
	(cd "$debs" && apt-get download -qq -o APT::Sandbox::User=root "${fetch[@]}") ||
		die "apt-get download ${fetch[*]} failed"
fi
for f in "${files[@]}" "$srcdeb"; do
	[ -f "$debs/$f" ] || die "apt-get download did not produce $f"
done
printf '%s\n' "${files[@]}" "$srcdeb"

stamp=$(printf '%s\n' "${files[@]}" | sort)
if [ ! -f "$root/.stamp" ] || [ "$(cat "$root/.stamp")" != "$stamp" ]; then
	echo "unpacking into $root"
	rm -rf "$root"
	mkdir -p "$root"
	for f in "${files[@]}"; do dpkg -x "$debs/$f" "$root" || die "dpkg -x $f failed"; done
	depmod -b "$root" "$kver" || die "depmod failed"
	printf '%s\n' "$stamp" >"$root/.stamp"
fi
vmlinuz=$root/boot/vmlinuz-$kver
[ -f "$vmlinuz" ] || die "no $vmlinuz"
echo "kernel $kver ($kversion)"

# --- 3. vmw_pvrdma.ko, cached ------------------------------------------------
step "building vmw_pvrdma.ko"
mod=$cache/module/$kver-$srcver/vmw_pvrdma.ko
if [ ! -f "$mod" ]; then
	src=$work/src
	mkdir -p "$src"
	echo "extracting drivers/infiniband/hw/vmw_pvrdma from $srcdeb"
	dpkg-deb --fsys-tarfile "$debs/$srcdeb" | tar -xO "./usr/src/$srcpkg.tar.xz" |
		tar -xJ -C "$src" "$srcpkg/drivers/infiniband/hw/vmw_pvrdma" ||
		die "extracting the driver's source from $srcdeb failed"
	d=$src/$srcpkg/drivers/infiniband/hw/vmw_pvrdma
	make -s -C "/usr/src/linux-headers-$kver" M="$d" CONFIG_INFINIBAND_VMWARE_PVRDMA=m modules ||
		die "make of vmw_pvrdma.ko failed (against /usr/src/linux-headers-$kver)"
	mkdir -p "$(dirname "$mod")"
	cp "$d/vmw_pvrdma.ko" "$mod"
fi
if [ -n "${PVPERF_LAB_MODULE:-}" ]; then
	echo "PVPERF_LAB_MODULE: loading $PVPERF_LAB_MODULE in L2 instead of $mod"
	mod=$PVPERF_LAB_MODULE
	[ -f "$mod" ] || die "PVPERF_LAB_MODULE: no file $mod"
fi
vermagic=$(modinfo -F vermagic "$mod" 2>/dev/null || true)
echo "$mod: vermagic $vermagic"

# --- 4. pvperf -----------------------------------------------------------------
step "building pvperf"
bin=$work/bin
mkdir -p "$bin"
(cd "$repo" && CGO_ENABLED=0 go build -ldflags='-s -w' -o "$bin/pvperf" ./cmd/pvperf) || die "go build ./cmd/pvperf failed"
(cd "$repo" && CGO_ENABLED=0 go build -ldflags='-s -w' -o "$bin/madmux" ./internal/cmd/madmux) || die "go build madmux failed"
(cd "$repo" && CGO_ENABLED=0 go test -c -ldflags='-s -w' -o "$bin/uverbs.test" ./verbs/uverbs) || die "go test -c ./verbs/uverbs failed"
(cd "$repo" && CGO_ENABLED=0 go test -c -ldflags='-s -w' -o "$bin/guest.test" ./e2e/guest) || die "go test -c ./e2e/guest failed"
(cd "$repo" && CGO_ENABLED=0 go test -c -ldflags='-s -w' -o "$bin/clock.test" ./internal/clock) || die "go test -c ./internal/clock failed"
ls -l "$bin" | tail -n +2

# --- 5. root file systems ----------------------------------------------------
libpath=$root/usr/lib/x86_64-linux-gnu:$root/lib/x86_64-linux-gnu
# put TREE SRC DEST: copy a file into TREE at DEST (an absolute guest path).
put() {
	mkdir -p "$1$(dirname "$3")"
	cp -L "$2" "$1$3"
}
# put_with_libs TREE SRC DEST [LIBPATH]: an ELF file and every shared library
# it needs (as ldd resolves them, with LIBPATH first).
put_with_libs() {
	local out lib
	put "$1" "$2" "$3"
	out=$(LD_LIBRARY_PATH=${4:-} ldd "$2") || die "ldd $2 failed"
	if grep -q 'not found' <<<"$out"; then
		die "$2 needs libraries no package here provides:$(grep 'not found' <<<"$out")"
	fi
	while read -r lib; do
		local dest=${lib#"$root"}
		[ -e "$1$dest" ] || put "$1" "$lib" "$dest"
	done < <(awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\// { print $1 }' <<<"$out")
}
# put_modules TREE NAME...: kernel modules with their dependencies, in load
# order, listed in TREE/guest/modules; built-in ones are skipped.
put_modules() {
	local tree=$1 m line p dest
	shift
	local moddir=lib/modules/$kver
	touch "$tree/guest/modules"
	for m in "$@"; do
		if grep -qE "/$m\.ko$" "$root/$moddir/modules.builtin" 2>/dev/null; then continue; fi
		line=$(awk -v m="$m" '{ p = $1; sub(/:$/, "", p); n = p; sub(/.*\//, "", n); sub(/\.ko.*/, "", n); gsub(/-/, "_", n); if (n == m) { print; exit } }' "$root/$moddir/modules.dep")
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
			*) die "unknown module file $p" ;;
			esac
			echo "$dest" >>"$tree/guest/modules"
		done
	done
}
# base TREE: busybox, iproute2's ip and the directories every guest has.
base() {
	mkdir -p "$1"/{bin,sbin,usr/bin,usr/sbin,proc,sys,dev,tmp,etc/libibverbs.d,guest}
	put "$1" "$root/bin/busybox" /bin/busybox
	ln -sf busybox "$1/bin/sh"
	put_with_libs "$1" "$(command -v ip)" /bin/iproute2-ip
}
# cpio_of TREE: the tree as a newc archive on stdout.
cpio_of() { (cd "$1" && find . | cpio -o -H newc -R 0:0 --quiet); }

step "building the L2 root file system"
l2=$work/l2
base "$l2"
put_modules "$l2" ib_uverbs vmxnet3
put "$l2" "$mod" /lib/modules/vmw_pvrdma.ko
echo /lib/modules/vmw_pvrdma.ko >>"$l2/guest/modules"
echo "L2 modules: $(sed 's|.*/||; s|\.ko$||' "$l2/guest/modules" | tr '\n' ' ')"
for t in write_bw read_bw send_bw atomic_bw write_lat read_lat send_lat atomic_lat; do
	put_with_libs "$l2" "$root/usr/bin/ib_$t" "/usr/bin/ib_$t" "$libpath"
done
put_with_libs "$l2" "$root/usr/bin/ibv_devinfo" /usr/bin/ibv_devinfo "$libpath"
pv=$root/usr/lib/x86_64-linux-gnu/libibverbs/libvmw_pvrdma-rdmav34.so
[ -f "$pv" ] || die "ibverbs-providers has no $(basename "$pv")"
put_with_libs "$l2" "$pv" "${pv#"$root"}" "$libpath"
put "$l2" "$root/etc/libibverbs.d/vmw_pvrdma.driver" /etc/libibverbs.d/vmw_pvrdma.driver
mkdir -p "$l2/pvperf"
cp "$bin/pvperf" "$bin/uverbs.test" "$bin/guest.test" "$bin/clock.test" "$l2/pvperf/"
for t in write_bw read_bw send_bw atomic_bw write_lat read_lat send_lat atomic_lat devinfo; do
	ln -s pvperf "$l2/pvperf/$t"
done
cp "$repo/scripts/pvrdma/init" "$l2/init"
chmod 755 "$l2/init"
# The checks in L2 end two minutes before the time limit (L1's boot and
# L2's come first), so their summary is printed even when some hang.
budget=$((limit > 300 ? limit - 120 : 180))
if [ "$serve" = 1 ]; then checks=serve; fi
# The groups as tests of the test binary.
run=
for c in ${checks//,/ }; do
	case $c in
	conformance) t=TestConformance ;; devinfo) t=TestDevinfo ;; pvperf) t=TestLabPvperf ;;
	ref) t='TestLabReference|TestLabCQMod|TestLabStaleAH' ;; interop) t=TestLabInterop ;;
	native) t=TestLabNative ;; side) t=TestSideBySide ;; smoke) t='TestConformance|TestLabSmoke' ;;
	serve) t= ;;
	esac
	run=${run:+$run|}$t
done
run="^($run)\$"
[ "$serve" = 1 ] && run=serve
printf "RUN='%s'\nROUNDS=%s\nBUDGET=%s\n" "$run" "$rounds" "$budget" >"$l2/guest/config"
cpio_of "$l2" >"$work/l2.cpio"
echo "L2 initramfs: $(du -h "$work/l2.cpio" | cut -f1) (uncompressed: unpacking under nested TCG costs more than reading)"

step "building the L1 root file system"
l1=$work/l1
base "$l1"
put_modules "$l1" crc32_generic rdma_rxe veth virtio_pci virtio_net
echo "L1 modules: $(sed 's|.*/||; s|\.ko$||' "$l1/guest/modules" | tr '\n' ' ')"
put_with_libs "$l1" "$(command -v rdma)" /bin/rdma
put_with_libs "$l1" "$qemu" /usr/bin/qemu-system-x86_64
accel=/usr/lib/x86_64-linux-gnu/qemu/accel-tcg-x86_64.so
[ -f "$accel" ] && put_with_libs "$l1" "$accel" "$accel"
for fw in /usr/share/seabios/bios-256k.bin /usr/share/qemu/linuxboot_dma.bin /usr/share/qemu/kvmvapic.bin; do
	[ -e "$fw" ] || die "no QEMU firmware $fw"
	put "$l1" "$fw" "/usr/share/qemu/$(basename "$fw")"
done
rxe=$root/usr/lib/x86_64-linux-gnu/libibverbs/librxe-rdmav34.so
put_with_libs "$l1" "$rxe" "${rxe#"$root"}" "$libpath"
put "$l1" "$root/etc/libibverbs.d/rxe.driver" /etc/libibverbs.d/rxe.driver
for t in send_bw send_lat; do
	put_with_libs "$l1" "$root/usr/bin/ib_$t" "/usr/bin/ib_$t" "$libpath"
done
put "$l1" "$bin/madmux" /bin/madmux
put "$l1" "$vmlinuz" /l2/vmlinuz
cp "$work/l2.cpio" "$l1/l2/initrd"
cp "$repo/scripts/pvrdma/l1-init" "$l1/init"
chmod 755 "$l1/init"
printf 'CHECKS=%s\nL2_LIMIT=%s\n' "$checks" "$((limit > 60 ? limit - 30 : limit))" >"$l1/guest/config"
cpio_of "$l1" | gzip -1 >"$work/l1.gz"
echo "L1 initramfs: $(du -h "$work/l1.gz" | cut -f1)"

# --- 6. boot -----------------------------------------------------------------
step "booting L1, then L2 in L1 (time limit ${limit}s)"
log=$cache/console.log
net=(-net none)
if [ "$serve" = 1 ]; then
	net=(-netdev user,id=n,hostfwd=tcp:127.0.0.1:15556-:5556 -device virtio-net-pci,netdev=n,romfile=)
	echo "serving: nc 127.0.0.1 15556 is a shell in L1; in it, nc 127.0.0.1 5555 is one in L2"
fi
set +e
timeout -k 10 "$limit" qemu-system-x86_64 -accel tcg,thread=multi -cpu max -smp 2 -m 4096 \
	-kernel "$vmlinuz" -initrd "$work/l1.gz" -append "console=ttyS0 quiet panic=-1" \
	-nographic -no-reboot "${net[@]}" </dev/null > >(sed -u 's/\r//g; s/\x1b\[[0-9;?]*[A-Za-z]//g; s/\x1bc//g' | tee "$log") 2>&1 &
qpid=$!
wait "$qpid"
qemu_rc=$?
qpid=
set -e
sleep 1 # the console's last lines
[ -z "$logcopy" ] || cp "$log" "$logcopy"

# --- 7. verdict ----------------------------------------------------------------
mark() { sed -n "s/^PVPERF-LAB: $1 at \([0-9]*\)s.*/\1/p" "$log" | head -n 1; }
l1_up=$(mark "L1 up")
l2_start=$(mark "L2 started")
l2_end=$(mark "L2 ended")
l1_fail=$(sed -n 's/^PVPERF-LAB: L1 FAILED: //p' "$log" | head -n 1)
status=$(sed -n 's/^PVPERF-GUEST-EXIT: \([0-9]*\).*/\1/p' "$log" | tail -n 1)
reached=0
grep -q '^PVPERF-GUEST-CHECKS-BEGIN' "$log" && reached=1
l2_boot=$(sed -n 's/^PVPERF-GUEST-CHECKS-BEGIN .*uptime \([0-9]*\)s.*/\1/p' "$log" | head -n 1)
killed=0
case $qemu_rc in 124 | 137) killed=1 ;; esac

step_status=ok
fail=
if [ "$serve" = 1 ]; then
	:
elif [ -n "$l1_fail" ]; then
	fail="L1: $l1_fail"
elif [ -z "$l1_up" ]; then
	fail="L1 never came up (qemu exit $qemu_rc)"
elif [ -z "$l2_start" ]; then
	fail="L1 never started L2's QEMU"
elif [ "$reached" = 0 ]; then
	fail="L2 never reached its checks (its kernel or /init failed; see the console above)"
elif [ -z "$status" ]; then
	fail="L2 stopped during the checks without an exit status"
elif [ "$status" != 0 ]; then
	fail="checks failed in L2 (exit status $status; see the summary above)"
elif [ "$killed" = 1 ]; then
	fail="the checks passed, but the guests did not power off; killed after ${limit}s"
fi
if [ "$killed" = 1 ] && [ -z "$fail" ] && [ "$serve" = 0 ]; then fail="killed after ${limit}s"; fi
[ -z "$fail" ] || step_status=failed
end_step "$step_status"

print_steps
echo "  guest milestones (seconds after L0 started QEMU): L1 up ${l1_up:-?}, L2 QEMU started ${l2_start:-?}, L2 checks began ${l2_boot:+after }${l2_boot:-?}${l2_boot:+s of L2 uptime}, L2 ended ${l2_end:-?}"
if [ "$reached" = 1 ]; then
	echo
	echo "checks in L2 (the test binary's results; XFAIL: an expected failure of the device model, which passed as such):"
	grep -E '^ *--- (PASS|FAIL|SKIP): |XFAIL: ' "$log" || true
	sed -n '/^PVPERF-SIDE-BEGIN/,/^PVPERF-SIDE-END/p' "$log" | sed '1d;$d'
	# What each failed check logged last, so that a CI log that keeps
	# only its end still says why.
	for failed in $(tr -d '\r' <"$log" | sed -n 's/^ *--- FAIL: \([A-Za-z0-9_]*\) .*/\1/p'); do
		echo
		echo "--- the end of what $failed logged:"
		tr -d '\r' <"$log" | sed -n "/=== RUN   $failed\$/,/--- FAIL: $failed /p" | tail -n 40
	done
fi
echo
if [ "$serve" = 1 ]; then
	echo "pvrdma-lab: served for $(now)s (log: $log)"
	exit 0
fi
if [ -n "$fail" ]; then
	echo "pvrdma-lab: FAIL: $fail ($(now)s, log: $log)"
	exit 1
fi
echo "pvrdma-lab: PASS in $(now)s (log: $log)"
