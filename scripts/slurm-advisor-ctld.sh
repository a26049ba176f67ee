#!/usr/bin/env bash
# A Slurm controller with the submit-time advisor's plugin on (JobSubmitPlugins=lua), for the advisor's tests
# and benchmark (docs/slurm.md, "The submit-time advisor"). Its nodes never start a slurmd: it accepts
# submissions, runs job_submit.lua on each and shows in `scontrol show job` what the script made of them,
# and runs nothing. It lives apart from the local clusters of scripts/slurm-setup.sh (its own port,
# configuration directory, state and logs under DIR), so changing its script or table disturbs no other test.
#
# Its partitions: `gpu` (default), two nodes of 8 GPUs, 24 cores and 500000 MB (the Synergy paper's server),
# and `small`, one node of 2 GPUs, 2 cores and 21695 MB (this project's single-node test cluster).
#
# slurmctld refuses to start without DIR/job_submit.lua: start installs a pass-through one when DIR has none.
#
# usage (as root; munged must run: scripts/slurm-setup.sh starts it):
#   scripts/slurm-advisor-ctld.sh start DIR [PORT] [--no-plugin]   write DIR/slurm.conf, start, wait for it
#                                                                   (PORT default 6837; --no-plugin: without
#                                                                   JobSubmitPlugins, for comparison)
#   scripts/slurm-advisor-ctld.sh stop DIR                          stop it (DIR is left for its logs)
# clients: SLURM_CONF=DIR/slurm.conf
set -euo pipefail

cmd="${1:-}"
dir="${2:-}"
[ -n "$cmd" ] && [ -n "$dir" ] || { sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//' >&2; exit 2; }
port=6837
plugin=yes
shift 2
while [ $# -gt 0 ]; do
  case "$1" in
    --no-plugin) plugin=no ;;
    '' | *[!0-9]*) echo "slurm-advisor-ctld: unknown argument '$1'" >&2; exit 2 ;;
    *) port="$1" ;;
  esac
  shift
done
say() { echo "slurm-advisor-ctld: $*"; }
die() { echo "slurm-advisor-ctld: $*" >&2; exit 1; }
[ "$(id -u)" -eq 0 ] || die "must run as root (slurmctld runs as SlurmUser=root)"
dir="$(realpath -m "$dir")"
pidfile="$dir/slurmctld.pid"
. "$(dirname "$0")/lib/daemons.sh"

case "$cmd" in
  stop)
    stop_daemon slurmctld "$pidfile" slurmctld
    exit 0
    ;;
  start) ;;
  *) die "unknown command '$cmd' (start, stop)" ;;
esac

command -v slurmctld >/dev/null || die "Slurm is not installed: run scripts/slurm-setup.sh first"
munge -n 2>/dev/null | unmunge >/dev/null 2>&1 || die "munged is not running: run scripts/slurm-setup.sh first"
alive "$pidfile" slurmctld && die "a slurmctld already runs for $dir (pid $(cat "$pidfile")); stop it first"
# Another controller on the port would answer in this one's place.
if ss -Hltn "sport = :$port" 2>/dev/null | grep -q .; then die "port $port is taken (pass another PORT)"; fi
install -d -m 0755 "$dir" "$dir/state"
submit_line="JobSubmitPlugins=lua"
[ "$plugin" = yes ] || submit_line="# JobSubmitPlugins: none (--no-plugin)"
cat >"$dir/slurm.conf" <<EOF
# Written by synergy's scripts/slurm-advisor-ctld.sh: a controller whose nodes never start, for the advisor.
ClusterName=synergy-advisor
SlurmctldHost=$(hostname -s)(127.0.0.1)
SlurmctldPort=$port
SlurmdPort=$((port + 1))
SlurmUser=root
AuthType=auth/munge
CredType=cred/munge
MpiDefault=none
MailProg=/bin/true
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
GresTypes=gpu
$submit_line
StateSaveLocation=$dir/state
SlurmctldPidFile=$pidfile
SlurmctldLogFile=$dir/slurmctld.log
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MinJobAge=300
NodeName=adv-gpu[1-2] NodeAddr=127.0.0.1 CPUs=24 RealMemory=500000 Gres=gpu:8 State=UNKNOWN
NodeName=adv-small1 NodeAddr=127.0.0.1 CPUs=2 RealMemory=21695 Gres=gpu:2 State=UNKNOWN
PartitionName=gpu Nodes=adv-gpu[1-2] Default=YES MaxTime=INFINITE State=UP
PartitionName=small Nodes=adv-small1 MaxTime=INFINITE State=UP
EOF
cat >"$dir/gres.conf" <<EOF
NodeName=adv-gpu[1-2] Name=gpu Count=8
NodeName=adv-small1 Name=gpu Count=2
EOF
if [ "$plugin" = yes ] && [ ! -e "$dir/job_submit.lua" ]; then
  install -m 0644 "$(dirname "$0")/job_submit-passthrough.lua" "$dir/job_submit.lua"
fi
# A fresh state each start: jobs of an earlier run would only slow the controller down.
rm -rf "${dir:?}/state/"*
slurmctld -f "$dir/slurm.conf" || die "slurmctld did not start: see $dir/slurmctld.log"
export SLURM_CONF="$dir/slurm.conf"
for _ in $(seq 100); do scontrol ping 2>/dev/null | grep -q UP && break; sleep 0.1; done
alive "$pidfile" slurmctld || die "slurmctld exited: see $dir/slurmctld.log"
scontrol ping 2>/dev/null | grep -q UP || die "slurmctld does not answer 'scontrol ping': see $dir/slurmctld.log"
say "slurmctld up on port $port (pid $(cat "$pidfile")); clients: SLURM_CONF=$dir/slurm.conf"
