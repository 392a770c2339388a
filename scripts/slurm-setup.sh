#!/usr/bin/env bash
# slurm-setup.sh: makes this machine a one-node Slurm cluster, so that
# "srun -n 4 pvperf cluster write_bw ..." runs as it would on a real one.
#
# It installs Debian's slurm-wlm and munge when they are missing (root, or
# sudo), starts munged, writes /etc/slurm/slurm.conf for one node called
# "localhost" (address 127.0.0.1, so that every rank meets rank 0 on the
# loopback interface) with -c CPUS CPUs whatever the hardware has
# (SlurmdParameters=config_overrides: a two-core machine runs 8 tasks),
# starts slurmctld and slurmd as root, and waits until the node is idle.
# An existing slurm.conf is kept as slurm.conf.pvperf-saved.
#
# Usage: scripts/slurm-setup.sh [-c CPUS] [-s]
#   -c CPUS  CPUs the node offers (default 8)
#   -s       stop the daemons this script started, and exit
#
# Then, for example:
#   go build -o bin/ ./cmd/pvperf
#   srun -n 4 bin/pvperf cluster --out_json m.json --out_html m.html write_bw -d emu0 -D 2
#   sbatch -n 4 --wrap "bin/pvperf cluster write_bw -d emu0"
set -euo pipefail

cpus=8
stop=0
usage() { sed -n '2,/^set -euo/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//' >&2; exit "${1:-2}"; }
while getopts "c:sh" opt; do
	case $opt in
	c) cpus=$OPTARG ;;
	s) stop=1 ;;
	h) usage 0 ;;
	*) usage ;;
	esac
done
shift $((OPTIND - 1))
[ $# -eq 0 ] || usage
case $cpus in '' | *[!0-9]* | 0) echo "slurm-setup: -c needs a positive number" >&2; exit 2 ;; esac

sudo=""
[ "$(id -u)" -ne 0 ] && sudo=sudo
say() { printf 'slurm-setup: %s\n' "$*"; }
die() { printf 'slurm-setup: %s\n' "$*" >&2; exit 1; }

if [ "$stop" = 1 ]; then
	$sudo pkill -x slurmd || true
	$sudo pkill -x slurmctld || true
	say "stopped slurmd and slurmctld"
	exit 0
fi

if ! command -v slurmctld >/dev/null || ! command -v munged >/dev/null; then
	say "installing slurm-wlm and munge"
	export DEBIAN_FRONTEND=noninteractive
	$sudo apt-get update -qq
	$sudo apt-get install -y -qq --no-install-recommends slurm-wlm munge >/dev/null
fi

# munge: a key, then the daemon (as its own user).
if [ ! -s /etc/munge/munge.key ]; then
	$sudo /usr/sbin/mungekey --create --force
	$sudo chown munge:munge /etc/munge/munge.key
	$sudo chmod 400 /etc/munge/munge.key
fi
$sudo mkdir -p /run/munge /var/log/munge /var/lib/munge
$sudo chown munge:munge /run/munge /var/log/munge /var/lib/munge
if ! pgrep -x munged >/dev/null; then
	$sudo -u munge /usr/sbin/munged 2>/dev/null || $sudo runuser -u munge -- /usr/sbin/munged
fi
for _ in $(seq 50); do munge -n </dev/null | unmunge >/dev/null 2>&1 && break; sleep 0.1; done
munge -n </dev/null | unmunge >/dev/null || die "munge does not work (munged not running?)"

conf=/etc/slurm/slurm.conf
if [ -f "$conf" ] && ! grep -q '^# written by pvperf' "$conf"; then
	$sudo cp "$conf" "$conf.pvperf-saved"
fi
$sudo mkdir -p /etc/slurm /var/spool/slurmctld /var/spool/slurmd /var/log/slurm
$sudo tee "$conf" >/dev/null <<EOF
# written by pvperf's scripts/slurm-setup.sh: one node, this machine
ClusterName=pvperf
SlurmctldHost=localhost(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
StateSaveLocation=/var/spool/slurmctld
SlurmdSpoolDir=/var/spool/slurmd
SlurmctldPidFile=/run/slurmctld.pid
SlurmdPidFile=/run/slurmd.pid
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SlurmdParameters=config_overrides
ReturnToService=2
NodeName=localhost NodeAddr=127.0.0.1 CPUs=$cpus State=UNKNOWN
PartitionName=debug Nodes=localhost Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
EOF

$sudo pkill -x slurmd || true
$sudo pkill -x slurmctld || true
sleep 0.5
$sudo slurmctld -c || die "slurmctld did not start (see /var/log/slurm/slurmctld.log)"
$sudo slurmd -N localhost || die "slurmd did not start (see /var/log/slurm/slurmd.log)"

for _ in $(seq 100); do
	state=$(sinfo -h -n localhost -o %T 2>/dev/null || true)
	case $state in idle* | mixed* | allocated*) break ;; esac
	sleep 0.2
done
case $state in
idle* | mixed* | allocated*) ;;
*)
	$sudo scontrol update nodename=localhost state=resume 2>/dev/null || true
	sleep 1
	state=$(sinfo -h -n localhost -o %T 2>/dev/null || true)
	;;
esac
case $state in idle* | mixed* | allocated*) ;; *) die "node localhost is '$state', not idle (see /var/log/slurm/)" ;; esac
say "one-node cluster up: node localhost, $cpus CPUs, partition debug ($(sinfo -V))"
