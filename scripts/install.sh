#!/usr/bin/env bash
# install.sh [PREFIX]: builds the pvperf binary into PREFIX/bin (default
# /usr/local) and links perftest's names (ib_write_bw ... ib_atomic_lat),
# pvperf's (write_bw ...), devinfo, report and cm_setup to it there.
# The links name pvperf relatively, so PREFIX/bin may be moved whole.
set -euo pipefail
usage() { sed -n '2,5p' "$0" | sed 's/^# \{0,1\}//'; }
case $# in
0) prefix=/usr/local ;;
1) prefix=$1 ;;
*) echo "install.sh: one PREFIX at most, got $#: $*" >&2; usage >&2; exit 1 ;;
esac
case $prefix in
-h | --help) usage; exit 0 ;;
'') echo "install.sh: the PREFIX given is empty (an unset variable?); give a directory, or nothing for /usr/local" >&2; exit 1 ;;
-*) echo "install.sh: unknown option $prefix" >&2; usage >&2; exit 1 ;;
esac
if ! command -v go >/dev/null; then
	echo "install.sh: go is not on PATH (under sudo, secure_path may leave out /usr/local/go/bin: run sudo env PATH=\"\$PATH\" $0 ...)" >&2
	exit 1
fi
mkdir -p -- "$prefix/bin"
prefix=$(cd -- "$prefix" && pwd) # a relative PREFIX is the caller's
cd "$(dirname "$0")/.."
CGO_ENABLED=0 go build -trimpath -o "$prefix/bin/pvperf" ./cmd/pvperf
"$prefix/bin/pvperf" links "$prefix/bin"
