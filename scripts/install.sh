#!/usr/bin/env bash
# install.sh [PREFIX]: builds the pvperf binary into PREFIX/bin (default
# /usr/local) and links perftest's names (ib_write_bw ... ib_atomic_lat),
# pvperf's (write_bw ...), devinfo, report and cm_setup to it there.
set -euo pipefail
prefix=${1:-/usr/local}
case "$prefix" in -h|--help) sed -n '2,4p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;; esac
mkdir -p "$prefix/bin"
prefix=$(cd "$prefix" && pwd) # a relative PREFIX is the caller's
cd "$(dirname "$0")/.."
CGO_ENABLED=0 go build -trimpath -o "$prefix/bin/pvperf" ./cmd/pvperf
"$prefix/bin/pvperf" links "$prefix/bin"
