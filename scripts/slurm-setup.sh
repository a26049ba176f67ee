#!/usr/bin/env bash
# A real single-node Slurm cluster on 127.0.0.1 for synergy's Slurm backend and its integration tests.
#
# Installs Debian's packages (munge, slurmctld, slurmd, slurm-client, slurmdbd, mariadb-server) when they are
# missing, writes slurm.conf, cgroup.conf, gres.conf and slurmdbd.conf for this host (its real cores, its memory
# less a reserve for the OS, N emulated GPUs as GRES backed by /dev/tty0..N-1), starts munged, MariaDB and
# slurmdbd on 127.0.0.1 (database slurm_acct_db, user slurm), registers the cluster, starts slurmctld and
# slurmd, and waits until the node accepts jobs. Jobs are confined by task/cgroup and proctrack/cgroup (cgroup
# v1: ConstrainCores, ConstrainRAMSpace), so `--cpus-per-task` and `--mem` are real limits; `--gres=gpu:N` sets
# CUDA_VISIBLE_DEVICES. Accounting is real: slurmctld sends every job to slurmdbd (AllocTRES with gres/gpu,
# jobacct_gather/cgroup), so `sacct` lists jobs and their steps. The job-submit plugin is on
# (JobSubmitPlugins=lua) with a pass-through job_submit.lua beside slurm.conf (installed when none is there,
# never replaced), so that synergy's submit-time advisor can be installed over it (docs/slurm.md).
#
# Idempotent: run it again and it only starts what is not running, restarts the daemons when the
# configuration it would write differs from the one in place, and resumes a node left DOWN or DRAINED.
#
# usage (as root):
#   scripts/slurm-setup.sh [start] [--gpus N]   install if needed, configure, start, wait for the node (default)
#   scripts/slurm-setup.sh --nodes N [--gpus G] the same, and beside it a cluster of N nodes on this host, each
#                                               in its own network namespace with its own block of cores and
#                                               G GPUs (scripts/slurm-nodes.sh; clients use
#                                               SLURM_CONF=/etc/slurm-nodes/slurm.conf)
#   scripts/slurm-setup.sh stop                 stop slurmd, slurmctld, slurmdbd, MariaDB and munged (pid files),
#                                               and the multi-node cluster with its namespaces and cgroups
#   scripts/slurm-setup.sh status               the daemons, the node's state, the registered cluster and the
#                                               multi-node cluster
# environment:
#   SLURM_GPUS=N            emulated GPUs (default 2; same as --gpus)
#   SLURM_MEM_RESERVE_MB=M  memory kept for the OS (default: 10% of the host, at least 1024)
#   SLURM_WAIT_S=S          how long to wait for the node to become idle (default 120)
set -euo pipefail

cmd=start
gpus="${SLURM_GPUS:-2}"
nodes=1
while [ $# -gt 0 ]; do
  case "$1" in
    start | stop | status) cmd="$1" ;;
    --gpus) gpus="${2:?--gpus needs a number}"; shift ;;
    --gpus=*) gpus="${1#--gpus=}" ;;
    --nodes) nodes="${2:?--nodes needs a number}"; shift ;;
    --nodes=*) nodes="${1#--nodes=}" ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "slurm-setup: unknown argument '$1' (try --help)" >&2; exit 2 ;;
  esac
  shift
done
case "$gpus" in '' | *[!0-9]*) echo "slurm-setup: --gpus must be a whole number, got '$gpus'" >&2; exit 2 ;; esac
case "$nodes" in '' | *[!0-9]* | 0) echo "slurm-setup: --nodes must be a whole number of at least 1, got '$nodes'" >&2; exit 2 ;; esac
nodes_script="$(dirname "$0")/slurm-nodes.sh"
passthrough="$(dirname "$0")/job_submit-passthrough.lua"

conf_dir=/etc/slurm
state_dir=/var/lib/slurm
log_dir=/var/log/slurm
ctld_pid=/run/slurmctld.pid
slurmd_pid=/run/slurmd.pid
munge_pid=/run/munge/munged.pid
dbd_pid=/run/slurmdbd.pid
db_pid=/run/mysqld/mysqld.pid
db_sock=/run/mysqld/mysqld.sock
db_log=/var/log/mysql/error.log
db_name=slurm_acct_db
cluster=synergy
t_start=$(date +%s.%N)

say() { echo "slurm-setup: $*"; }
die() { echo "slurm-setup: $*" >&2; exit 1; }
elapsed() { awk -v a="$t_start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }'; }

. "$(dirname "$0")/lib/daemons.sh"

[ "$(id -u)" -eq 0 ] || die "must run as root (it installs packages and starts the Slurm daemons)"

if [ "$cmd" = stop ]; then
  "$nodes_script" stop
  stop_daemon slurmd "$slurmd_pid" slurmd
  stop_daemon slurmctld "$ctld_pid" slurmctld
  stop_daemon slurmdbd "$dbd_pid" slurmdbd
  stop_daemon mariadbd "$db_pid" mariadbd mysqld
  stop_daemon munged "$munge_pid" munged
  exit 0
fi

if [ "$cmd" = status ]; then
  for d in "munged $munge_pid" "mariadbd $db_pid mysqld" "slurmdbd $dbd_pid" "slurmctld $ctld_pid" "slurmd $slurmd_pid"; do
    set -- $d
    if alive "$2" "$1" "${@:3}"; then say "$1 running (pid $(cat "$2"))"; else say "$1 not running"; fi
  done
  if [ ! -e "$conf_dir/job_submit.lua" ]; then say "job_submit.lua missing (slurmctld will not start)"
  elif cmp -s "$passthrough" "$conf_dir/job_submit.lua"; then say "job_submit.lua: the pass-through"
  else say "job_submit.lua: not the pass-through (the advisor's or an administrator's)"; fi
  command -v sinfo >/dev/null && sinfo -N -o '%N %T %c %m %G' 2>&1 || true
  command -v sacctmgr >/dev/null && alive "$dbd_pid" slurmdbd && sacctmgr -n -P list cluster format=Cluster,ControlHost,ControlPort 2>&1 |
    sed 's/^/slurm-setup: accounting cluster /' || true
  [ -e /etc/slurm-nodes/slurm.conf ] && "$nodes_script" status
  exit 0
fi

# 1. Packages.
missing=()
for c in munged slurmctld slurmd sinfo slurmdbd mariadbd; do command -v "$c" >/dev/null || [ -x "/usr/sbin/$c" ] || missing+=("$c"); done
if [ ${#missing[@]} -gt 0 ]; then
  say "installing munge slurmctld slurmd slurm-client slurmdbd mariadb-server (missing: ${missing[*]})"
  export DEBIAN_FRONTEND=noninteractive
  # Package scripts must not start daemons themselves (MariaDB's would, through its init script): this script
  # starts each one, with its own pid file. policy-rc.d answering 101 is Debian's way to say so.
  policy=/usr/sbin/policy-rc.d
  own_policy=no
  if [ ! -e "$policy" ]; then printf '#!/bin/sh\nexit 101\n' >"$policy" && chmod 0755 "$policy" && own_policy=yes; fi
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends munge slurmctld slurmd slurm-client slurmdbd mariadb-server >/dev/null ||
    { [ "$own_policy" = no ] || rm -f "$policy"; die "apt-get install failed"; }
  [ "$own_policy" = no ] || rm -f "$policy"
  say "installed $(dpkg-query -W -f='${Version}' slurmctld) after $(elapsed) s"
fi

# 2. Munge: one key shared by the daemons and the clients.
if [ ! -s /etc/munge/munge.key ]; then
  say "creating /etc/munge/munge.key"
  if command -v mungekey >/dev/null; then mungekey --create --keyfile=/etc/munge/munge.key; else
    dd if=/dev/urandom of=/etc/munge/munge.key bs=1024 count=1 status=none
  fi
fi
chown munge:munge /etc/munge/munge.key
chmod 0400 /etc/munge/munge.key
install -d -o munge -g munge -m 0755 /run/munge
install -d -o munge -g munge -m 0700 /var/lib/munge /var/log/munge

# 3. Configuration for this host.
host="$(hostname -s)"
[ -n "$host" ] || die "this host has no name (hostname -s is empty); slurmd needs one"
[ "$gpus" -ge 1 ] || die "--gpus must be at least 1"
for i in $(seq 0 $((gpus - 1))); do
  [ -c "/dev/tty$i" ] || die "/dev/tty$i does not exist: it backs emulated GPU $i; ask for fewer with --gpus"
done
# slurmd -C prints this host's real topology (CPUs, sockets, cores, threads) and memory.
topology="$(slurmd -C | head -1)"
cpus="$(sed -n 's/.*CPUs=\([0-9]*\).*/\1/p' <<<"$topology")"
mem_mb="$(sed -n 's/.*RealMemory=\([0-9]*\).*/\1/p' <<<"$topology")"
[ -n "$cpus" ] && [ -n "$mem_mb" ] || die "could not read cores and memory from 'slurmd -C': $topology"
reserve_mb="${SLURM_MEM_RESERVE_MB:-$((mem_mb / 10 > 1024 ? mem_mb / 10 : 1024))}"
node_mem_mb=$((mem_mb - reserve_mb))
[ "$node_mem_mb" -gt 256 ] || die "only ${mem_mb} MB of memory, ${reserve_mb} MB kept for the OS: too little for jobs"
# The topology fields of `slurmd -C` without its NodeName and RealMemory; ours replace them.
shape="$(sed -e 's/^NodeName=[^ ]* //' -e 's/ *RealMemory=[0-9]*//' -e 's/ *UpTime=.*//' <<<"$topology")"
last_tty=$((gpus - 1))

new_conf="$(mktemp -d)"
trap 'rm -rf "$new_conf"' EXIT
cat >"$new_conf/slurm.conf" <<EOF
# Written by synergy's scripts/slurm-setup.sh: one node on 127.0.0.1 with $gpus emulated GPUs.
ClusterName=$cluster
SlurmctldHost=$host(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
MpiDefault=none
MailProg=/bin/true
ProctrackType=proctrack/cgroup
TaskPlugin=task/cgroup
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
SchedulerType=sched/backfill
GresTypes=gpu
ReturnToService=2
StateSaveLocation=$state_dir/slurmctld
SlurmdSpoolDir=$state_dir/slurmd
SlurmctldPidFile=$ctld_pid
SlurmdPidFile=$slurmd_pid
SlurmctldLogFile=$log_dir/slurmctld.log
SlurmdLogFile=$log_dir/slurmd.log
# Accounting through slurmdbd (below); gres/gpu in the tracked TRES so AllocTRES says how many GPUs a job had.
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=127.0.0.1
AccountingStorageTRES=gres/gpu
# The comment (synergy:MODEL, set by synergy run) is only stored when asked for.
AccountingStoreFlags=job_comment
JobAcctGatherType=jobacct_gather/cgroup
JobCompType=jobcomp/none
# Small cluster, fast tests: short scheduler and health intervals, quick kill of cancelled jobs.
SchedulerParameters=sched_interval=2
SlurmctldTimeout=30
SlurmdTimeout=60
KillWait=10
MinJobAge=300
DefMemPerCPU=512
# The submit-time advisor's plugin (docs/slurm.md, "The submit-time advisor"): job_submit.lua beside this file,
# a pass-through until synergy slurm advisor --out $conf_dir replaces it.
JobSubmitPlugins=lua
NodeName=$host NodeAddr=127.0.0.1 $shape RealMemory=$node_mem_mb Gres=gpu:$gpus State=UNKNOWN
PartitionName=main Nodes=$host Default=YES MaxTime=INFINITE State=UP
EOF
cat >"$new_conf/cgroup.conf" <<EOF
# Written by synergy's scripts/slurm-setup.sh: jobs get exactly the cores and memory they asked for.
CgroupPlugin=cgroup/v1
CgroupAutomount=yes
ConstrainCores=yes
ConstrainRAMSpace=yes
AllowedRAMSpace=100
ConstrainSwapSpace=no
ConstrainDevices=no
EOF
cat >"$new_conf/gres.conf" <<EOF
# Written by synergy's scripts/slurm-setup.sh: emulated GPUs (character devices stand in for /dev/nvidia*).
NodeName=$host Name=gpu File=/dev/tty[0-$last_tty]
EOF
[ "$gpus" -eq 1 ] && echo "NodeName=$host Name=gpu File=/dev/tty0" >"$new_conf/gres.conf"

# slurmdbd.conf holds the database password: mode 0600, owned by SlurmUser (root). A password made once is
# kept across runs (MariaDB has it); a new one is made only with a new file.
db_pass="$(sed -n 's/^StoragePass=//p' "$conf_dir/slurmdbd.conf" 2>/dev/null || true)"
[ -n "$db_pass" ] || db_pass="$(head -c 18 /dev/urandom | base64 | tr -d '/+=')"
cat >"$new_conf/slurmdbd.conf" <<EOF
# Written by synergy's scripts/slurm-setup.sh: accounting for cluster $cluster in MariaDB on this host.
AuthType=auth/munge
DbdHost=localhost
DbdAddr=127.0.0.1
SlurmUser=root
PidFile=$dbd_pid
LogFile=$log_dir/slurmdbd.log
StorageType=accounting_storage/mysql
StorageHost=localhost
StoragePort=3306
StorageLoc=$db_name
StorageUser=slurm
StoragePass=$db_pass
EOF

changed=no
install -d "$conf_dir"
dbd_changed=no
if ! cmp -s "$new_conf/slurmdbd.conf" "$conf_dir/slurmdbd.conf"; then
  install -m 0600 -o root -g root "$new_conf/slurmdbd.conf" "$conf_dir/slurmdbd.conf"
  dbd_changed=yes
fi
chmod 0600 "$conf_dir/slurmdbd.conf"
for f in slurm.conf cgroup.conf gres.conf; do
  if ! cmp -s "$new_conf/$f" "$conf_dir/$f"; then
    install -m 0644 "$new_conf/$f" "$conf_dir/$f"
    changed=yes
  fi
done
# slurmctld 22.05 exits at start when JobSubmitPlugins=lua has no script: a pass-through one goes in first.
# A script already there is kept, whatever it is (the advisor's, or an administrator's own).
if [ ! -e "$conf_dir/job_submit.lua" ]; then
  install -m 0644 "$passthrough" "$conf_dir/job_submit.lua"
  say "installed the pass-through $conf_dir/job_submit.lua (JobSubmitPlugins=lua)"
elif ! cmp -s "$passthrough" "$conf_dir/job_submit.lua"; then
  say "keeping $conf_dir/job_submit.lua as it is (not the pass-through: the advisor's or an administrator's)"
fi
install -d -m 0755 "$state_dir/slurmctld" "$state_dir/slurmd" "$log_dir"
if [ "$changed" = yes ]; then
  say "wrote $conf_dir/{slurm,cgroup,gres}.conf: node $host, $shape, ${node_mem_mb} MB (${reserve_mb} MB kept for the OS), $gpus emulated GPUs"
  # Daemons started with an older configuration would keep it: restart them.
  stop_daemon slurmd "$slurmd_pid" slurmd
  stop_daemon slurmctld "$ctld_pid" slurmctld
else
  say "configuration unchanged: node $host, $shape, ${node_mem_mb} MB, $gpus emulated GPUs"
fi

if [ "$dbd_changed" = yes ]; then
  say "wrote $conf_dir/slurmdbd.conf (mode 0600): database $db_name on 127.0.0.1"
  stop_daemon slurmdbd "$dbd_pid" slurmdbd
fi

# 4. Daemons (the packages do not start them here: no systemd).
if ! alive "$munge_pid" munged; then
  runuser -u munge -- /usr/sbin/munged --pid-file="$munge_pid" || die "munged did not start (see /var/log/munge/munged.log)"
  say "started munged (pid $(cat "$munge_pid"))"
fi
munge -n | unmunge >/dev/null || die "munge does not round-trip a credential (see /var/log/munge/munged.log)"

# MariaDB, on 127.0.0.1 and its socket only. mariadbd stays in the foreground: it runs in its own session,
# detached, and writes its own pid file.
if ! alive "$db_pid" mariadbd mysqld; then
  install -d -o mysql -g mysql -m 0755 /run/mysqld /var/log/mysql
  if [ ! -d /var/lib/mysql/mysql ]; then
    say "creating the MariaDB data directory"
    mariadb-install-db --user=mysql --datadir=/var/lib/mysql --auth-root-authentication-method=socket \
      --skip-test-db >/dev/null || die "mariadb-install-db failed"
  fi
  # Slurm's recommended InnoDB settings (slurmdbd warns below them): a buffer pool that holds the job
  # table, and lock waits long enough for its table upgrades and rollups.
  setsid /usr/sbin/mariadbd --user=mysql --bind-address=127.0.0.1 --port=3306 --socket="$db_sock" \
    --pid-file="$db_pid" --log-error="$db_log" --innodb-buffer-pool-size=256M \
    --innodb-log-file-size=64M --innodb-lock-wait-timeout=900 </dev/null >/dev/null 2>&1 &
  for _ in $(seq 300); do mariadb-admin --socket="$db_sock" ping >/dev/null 2>&1 && break; sleep 0.1; done
  mariadb-admin --socket="$db_sock" ping >/dev/null 2>&1 || die "MariaDB does not answer: see $db_log"
  for _ in $(seq 50); do [ -s "$db_pid" ] && break; sleep 0.1; done
  say "started mariadbd (pid $(cat "$db_pid" 2>/dev/null || echo '?'))"
fi
if ! alive "$dbd_pid" slurmdbd; then
  # The database and its user, with the password slurmdbd.conf holds (root logs in by the socket).
  mariadb --socket="$db_sock" -u root <<EOF || die "could not create database $db_name and user slurm: see $db_log"
CREATE DATABASE IF NOT EXISTS $db_name;
CREATE USER IF NOT EXISTS 'slurm'@'localhost' IDENTIFIED BY '$db_pass';
ALTER USER 'slurm'@'localhost' IDENTIFIED BY '$db_pass';
GRANT ALL ON $db_name.* TO 'slurm'@'localhost';
EOF
  slurmdbd || die "slurmdbd did not start: see $log_dir/slurmdbd.log"
  for _ in $(seq 50); do [ -s "$dbd_pid" ] && break; sleep 0.1; done
  # It answers once it has created or upgraded its tables (seconds on a new database).
  for _ in $(seq 300); do sacctmgr -n -P list cluster >/dev/null 2>&1 && break; sleep 0.1; done
  sacctmgr -n -P list cluster >/dev/null 2>&1 || die "slurmdbd does not answer sacctmgr: see $log_dir/slurmdbd.log"
  say "started slurmdbd (pid $(cat "$dbd_pid" 2>/dev/null || echo '?'))"
fi
# The cluster must be known to slurmdbd before slurmctld sends it jobs. Asked of the database itself:
# sacctmgr takes 0.2 s to answer, ten times the query.
registered() {
  mariadb --socket="$db_sock" -u root -N -B \
    -e "SELECT name FROM $db_name.cluster_table WHERE name = '$cluster' AND deleted = 0" 2>/dev/null | grep -qx "$cluster"
}
if ! registered; then
  sacctmgr -i add cluster "$cluster" >/dev/null || die "sacctmgr could not add cluster $cluster"
  say "registered cluster $cluster with slurmdbd"
  # A slurmctld already running registers at start: restart it so it reports to the new cluster.
  stop_daemon slurmctld "$ctld_pid" slurmctld
fi
if ! alive "$ctld_pid" slurmctld; then
  slurmctld || die "slurmctld did not start: see $log_dir/slurmctld.log"
  for _ in $(seq 50); do [ -s "$ctld_pid" ] && break; sleep 0.1; done
  say "started slurmctld (pid $(cat "$ctld_pid" 2>/dev/null || echo '?'))"
fi
for _ in $(seq 100); do scontrol ping >/dev/null 2>&1 && break; sleep 0.2; done
scontrol ping | grep -q UP || die "slurmctld does not answer 'scontrol ping': see $log_dir/slurmctld.log"
if ! alive "$slurmd_pid" slurmd; then
  slurmd || die "slurmd did not start: see $log_dir/slurmd.log"
  for _ in $(seq 50); do [ -s "$slurmd_pid" ] && break; sleep 0.1; done
  say "started slurmd (pid $(cat "$slurmd_pid" 2>/dev/null || echo '?'))"
fi

# 5. Wait for the node. A node DOWN or DRAINED by an earlier run (a crash, a config change) is resumed.
deadline=$(($(date +%s) + ${SLURM_WAIT_S:-120}))
resumed=no
while :; do
  state="$(sinfo -h -N -n "$host" -o '%T' 2>/dev/null | head -1)"
  case "$state" in
    idle | mixed | allocated | completing) break ;;
    down* | drain* | drained* | fail*)
      if [ "$resumed" = no ]; then
        say "node $host is $state: resuming it"
        scontrol update nodename="$host" state=resume || true
        resumed=yes
      fi
      ;;
  esac
  if [ "$(date +%s)" -ge "$deadline" ]; then
    sinfo -N -l >&2 || true
    die "node $host is still '${state:-unknown}' after ${SLURM_WAIT_S:-120} s: see $log_dir/slurmd.log and $log_dir/slurmctld.log"
  fi
  sleep 0.5
done
say "node $host is $state after $(elapsed) s"
sinfo -N -o '%N %T %c %m %G'
if [ "$nodes" -gt 1 ]; then
  rm -rf "$new_conf" # exec skips the EXIT trap
  exec "$nodes_script" start "$nodes" --gpus "$gpus"
fi
