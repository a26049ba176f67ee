#!/usr/bin/env bash
# A multi-node Slurm cluster on one host, for tests of placement across nodes (docs/slurm.md, "Several nodes on
# one host"). Normally started through `scripts/slurm-setup.sh --nodes N`.
#
# Debian's Slurm 22.05 is built without --enable-multiple-slurmd, so one host cannot run two slurmd as
# themselves. Each node is therefore its own little machine: a network namespace with its own address
# (a veth pair into a bridge on the host; the namespaces' loopbacks are their own, so the addresses are a
# private /24, 10.203.0.0/24 unless SLURM_NODES_NET says otherwise) and a UTS namespace with its own host
# name, which is how slurmd knows which node it is. The controller stays on the host, at the bridge's address.
# Each node owns a disjoint block of this host's cores: slurm.conf describes every node with the host's
# real topology and reserves the other nodes' cores with CpuSpecList, so task/cgroup confines every job of
# node k to node k's cores (Slurm names its cgroups slurm_<node>, so the nodes' trees do not collide).
# Memory is shared out the same way (RealMemory, ConstrainRAMSpace); emulated GPUs are GRES per node.
#
# This cluster lives beside the single-node one: its own configuration directory (/etc/slurm-nodes), ports
# (6827 for slurmctld, 6828 for each slurmd), state, logs and pid files. Clients reach it with
# SLURM_CONF=/etc/slurm-nodes/slurm.conf. munged is shared with the single-node cluster.
#
# usage (as root):
#   scripts/slurm-nodes.sh start N [--gpus G]   configure, start, wait for N idle nodes (idempotent)
#   scripts/slurm-nodes.sh stop                 stop the daemons, remove namespaces, links and cgroups
#   scripts/slurm-nodes.sh status               the daemons and the nodes
# environment: SLURM_MEM_RESERVE_MB (memory kept for the OS), SLURM_WAIT_S (default 120),
#   SLURM_NODES_NET (first three octets of the nodes' /24, default 10.203.0)
set -euo pipefail

cmd="${1:-start}"
nodes="${2:-2}"
gpus=1
shift $(($# >= 2 ? 2 : $#))
while [ $# -gt 0 ]; do
  case "$1" in
    --gpus) gpus="${2:?--gpus needs a number}"; shift ;;
    --gpus=*) gpus="${1#--gpus=}" ;;
    *) echo "slurm-nodes: unknown argument '$1'" >&2; exit 2 ;;
  esac
  shift
done

conf_dir=/etc/slurm-nodes
state_dir=/var/lib/slurm-nodes
log_dir=/var/log/slurm-nodes
run_dir=/run/slurm-nodes
munge_pid=/run/munge/munged.pid
net="${SLURM_NODES_NET:-10.203.0}"
bridge=synergy-br0
t_start=$(date +%s.%N)
export SLURM_CONF="$conf_dir/slurm.conf"

say() { echo "slurm-nodes: $*"; }
die() { echo "slurm-nodes: $*" >&2; exit 1; }
elapsed() { awk -v a="$t_start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }'; }
. "$(dirname "$0")/lib/daemons.sh"
# node_alive N: node N's slurmd runs, in N's network namespace.
node_alive() { alive "$run_dir/slurmd-$1.pid" slurmd && in_netns "$run_dir/slurmd-$1.pid" "$1"; }
node_name() { echo "synergy-n$1"; }
# The node names this cluster had, from its pid files and namespaces (what stop must remove).
known_nodes() {
  { ls "$run_dir" 2>/dev/null | sed -n 's/^slurmd-\(synergy-n[0-9]*\)\.pid$/\1/p'
    ip netns list 2>/dev/null | awk '{print $1}' | grep '^synergy-n[0-9]*$' || true; } | sort -u
}
# Writes /etc/hosts with every node K of the first N (N = $1) named at its address, and no other line of
# ours: the nodes share the host's /etc/hosts, so a program on a node that binds to the address of its own
# host name (gloo, the process group of a distributed PyTorch job) gets its address on the bridge, which the
# other nodes reach, rather than a loopback. Written in place: /etc/hosts may be a bind mount.
hosts_mark="# synergy-nodes"
set_hosts() {
  local kept
  kept="$(grep -v " $hosts_mark\$" /etc/hosts || true)"
  {
    [ -z "$kept" ] || printf '%s\n' "$kept"
    for k in $(seq 1 "$1"); do printf '%s %s %s\n' "$net.$((10 + k))" "$(node_name "$k")" "$hosts_mark"; done
  } >"$run_dir/hosts.new"
  cat "$run_dir/hosts.new" >/etc/hosts
  rm -f "$run_dir/hosts.new"
}
# Removes Slurm's cgroup tree of node NAME in every v1 hierarchy (deepest first), once its daemons are gone.
remove_cgroups() {
  local d
  for d in /sys/fs/cgroup/*/slurm_"$1"; do
    [ -d "$d" ] && find "$d" -depth -type d -exec rmdir {} + 2>/dev/null || true
  done
}

[ "$(id -u)" -eq 0 ] || die "must run as root (network namespaces, the Slurm daemons)"

case "$cmd" in
  stop)
    for n in $(known_nodes); do
      stop_daemon "slurmd of $n" "$run_dir/slurmd-$n.pid" slurmd
    done
    stop_daemon slurmctld "$run_dir/slurmctld.pid" slurmctld
    for n in $(known_nodes); do
      ip netns del "$n" 2>/dev/null && say "removed network namespace $n"
      ip link del "veth-${n#synergy-}" 2>/dev/null || true
      remove_cgroups "$n"
    done
    ip link del "$bridge" 2>/dev/null && say "removed bridge $bridge"
    [ -d "$run_dir" ] && set_hosts 0
    exit 0
    ;;
  status)
    alive "$run_dir/slurmctld.pid" slurmctld && say "slurmctld running (pid $(cat "$run_dir/slurmctld.pid"))" || say "slurmctld not running"
    for n in $(known_nodes); do
      node_alive "$n" && say "slurmd of $n running (pid $(cat "$run_dir/slurmd-$n.pid"))" || say "slurmd of $n not running"
    done
    alive "$run_dir/slurmctld.pid" slurmctld && sinfo -N -o '%N %T %C %m %G' 2>&1 || true
    exit 0
    ;;
  start) ;;
  *) die "unknown command '$cmd' (start, stop, status)" ;;
esac

case "$nodes" in '' | *[!0-9]*) echo "slurm-nodes: the node count must be a whole number, got '$nodes'" >&2; exit 2 ;; esac
case "$gpus" in '' | *[!0-9]*) echo "slurm-nodes: --gpus must be a whole number, got '$gpus'" >&2; exit 2 ;; esac
[ "$nodes" -ge 2 ] || die "a multi-node cluster needs at least 2 nodes (one node: scripts/slurm-setup.sh)"
[ "$gpus" -ge 1 ] || die "--gpus must be at least 1"
command -v slurmd >/dev/null || die "Slurm is not installed: run scripts/slurm-setup.sh first"
if ! command -v ip >/dev/null; then
  say "installing iproute2 (ip is missing)"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends iproute2 >/dev/null ||
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends iproute2 >/dev/null; }
fi
command -v nsenter >/dev/null && command -v unshare >/dev/null || die "needs nsenter and unshare (util-linux)"
alive "$munge_pid" munged || die "munged is not running: run scripts/slurm-setup.sh first (it starts munge)"
for i in $(seq 0 $((gpus - 1))); do [ -c "/dev/tty$i" ] || die "/dev/tty$i does not exist (backs emulated GPU $i)"; done

# Each node: a block of whole cores and a share of memory.
topology="$(slurmd -C | head -1)"
cpus="$(sed -n 's/.*CPUs=\([0-9]*\).*/\1/p' <<<"$topology")"
mem_mb="$(sed -n 's/.*RealMemory=\([0-9]*\).*/\1/p' <<<"$topology")"
[ -n "$cpus" ] && [ -n "$mem_mb" ] || die "could not read cores and memory from 'slurmd -C': $topology"
[ "$cpus" -ge "$nodes" ] || die "$nodes nodes need at least $nodes cores; this host has $cpus"
reserve_mb="${SLURM_MEM_RESERVE_MB:-$((mem_mb / 10 > 1024 ? mem_mb / 10 : 1024))}"
node_mem_mb=$(((mem_mb - reserve_mb) / nodes))
[ "$node_mem_mb" -gt 256 ] || die "only $node_mem_mb MB per node: too little for jobs"
per_node=$((cpus / nodes))
shape="$(sed -e 's/^NodeName=[^ ]* //' -e 's/ *RealMemory=[0-9]*//' -e 's/ *UpTime=.*//' <<<"$topology")"
host="$(hostname -s)"
last_tty=$((gpus - 1))
gres_file="/dev/tty[0-$last_tty]"
[ "$gpus" -eq 1 ] && gres_file=/dev/tty0

[ -s /etc/slurm/slurm.conf ] && [ -s /etc/slurm/cgroup.conf ] || die "no /etc/slurm/slurm.conf: run scripts/slurm-setup.sh first"
new_conf="$(mktemp -d)"
trap 'rm -rf "$new_conf"' EXIT
cp /etc/slurm/cgroup.conf "$new_conf/cgroup.conf"
# The single-node cluster's settings (plugins, confinement, timers), less what is its own: name, addresses,
# state, pid and log files, accounting, the job-submit plugin (its script lives beside the single-node
# cluster's slurm.conf), nodes and partition. Then this cluster's own.
{
  echo "# Written by synergy's scripts/slurm-nodes.sh: $nodes nodes on one host, each in its own network namespace."
  # Slurm starts a heterogeneous job (a job spread over nodes with unequal parts, docs/slurm.md) only from
  # its backfill scheduler, every bf_interval seconds (30 by default): every second here. The submit-time
  # advisor's plugin stays on the single-node cluster only.
  grep -Ev '^(#|ClusterName|SlurmctldHost|StateSaveLocation|SlurmdSpoolDir|Slurm(ctld|d)(PidFile|LogFile)|Accounting|JobAcctGather|JobComp|JobSubmitPlugins|NodeName|PartitionName)' /etc/slurm/slurm.conf |
    sed 's/^SchedulerParameters=.*/&,bf_interval=1/'
  cat <<EOF
ClusterName=synergy-nodes
SlurmctldHost=$host($net.1)
SlurmctldPort=6827
SlurmdPort=6828
StateSaveLocation=$state_dir/slurmctld
SlurmdSpoolDir=$state_dir/slurmd-%n
SlurmctldPidFile=$run_dir/slurmctld.pid
SlurmdPidFile=$run_dir/slurmd-%n.pid
SlurmctldLogFile=$log_dir/slurmctld.log
SlurmdLogFile=$log_dir/slurmd-%n.log
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
EOF
} >"$new_conf/slurm.conf"
: >"$new_conf/gres.conf"
for k in $(seq 1 "$nodes"); do
  n="$(node_name "$k")"
  first=$(((k - 1) * per_node))
  last=$((first + per_node - 1))
  # Every core outside [first, last] is reserved on this node: its jobs get only its own block.
  spec="$(seq 0 $((cpus - 1)) | awk -v a="$first" -v b="$last" '$1 < a || $1 > b' | paste -sd, -)"
  echo "NodeName=$n NodeAddr=$net.$((10 + k)) NodeHostname=$n $shape CpuSpecList=$spec RealMemory=$node_mem_mb Gres=gpu:$gpus State=UNKNOWN" >>"$new_conf/slurm.conf"
  echo "NodeName=$n Name=gpu File=$gres_file" >>"$new_conf/gres.conf"
done
echo "PartitionName=main Nodes=synergy-n[1-$nodes] Default=YES MaxTime=INFINITE State=UP" >>"$new_conf/slurm.conf"

install -d "$conf_dir" "$state_dir/slurmctld" "$log_dir" "$run_dir"
changed=no
for f in slurm.conf cgroup.conf gres.conf; do
  if ! cmp -s "$new_conf/$f" "$conf_dir/$f"; then install -m 0644 "$new_conf/$f" "$conf_dir/$f"; changed=yes; fi
done
if [ "$changed" = yes ]; then
  say "wrote $conf_dir: $nodes nodes of $per_node cores, $node_mem_mb MB, $gpus emulated GPUs each"
  # Daemons of another shape would keep theirs; nodes no longer configured must go.
  for n in $(known_nodes); do stop_daemon "slurmd of $n" "$run_dir/slurmd-$n.pid" slurmd; done
  stop_daemon slurmctld "$run_dir/slurmctld.pid" slurmctld
  for n in $(known_nodes); do
    k="${n#synergy-n}"
    if [ "$k" -gt "$nodes" ]; then ip netns del "$n" 2>/dev/null || true; ip link del "veth-${n#synergy-}" 2>/dev/null || true; remove_cgroups "$n"; fi
  done
else
  say "configuration unchanged: $nodes nodes of $per_node cores, $node_mem_mb MB, $gpus emulated GPUs each"
fi

# The network: a bridge on the host, one namespace per node joined to it by a veth pair.
if ! ip link show "$bridge" >/dev/null 2>&1; then
  ip link add "$bridge" type bridge
  ip addr add "$net.1/24" dev "$bridge"
  say "created bridge $bridge ($net.1/24)"
fi
ip link set "$bridge" up
for k in $(seq 1 "$nodes"); do
  n="$(node_name "$k")"
  if ! ip netns list | awk '{print $1}' | grep -qx "$n"; then
    ip netns add "$n"
    ip link add "veth-${n#synergy-}" type veth peer name eth0 netns "$n"
    ip link set "veth-${n#synergy-}" master "$bridge" up
    ip -n "$n" addr add "$net.$((10 + k))/24" dev eth0
    ip -n "$n" link set eth0 up
    ip -n "$n" link set lo up
    say "created network namespace $n ($net.$((10 + k)))"
  fi
done

install -d "$run_dir"
set_hosts "$nodes"

if ! alive "$run_dir/slurmctld.pid" slurmctld; then
  slurmctld -f "$SLURM_CONF" || die "slurmctld did not start: see $log_dir/slurmctld.log"
  for _ in $(seq 50); do [ -s "$run_dir/slurmctld.pid" ] && break; sleep 0.1; done
  say "started slurmctld (pid $(cat "$run_dir/slurmctld.pid" 2>/dev/null || echo '?'))"
fi
for _ in $(seq 100); do scontrol ping >/dev/null 2>&1 && break; sleep 0.2; done
scontrol ping | grep -q UP || die "slurmctld does not answer 'scontrol ping': see $log_dir/slurmctld.log"
for k in $(seq 1 "$nodes"); do
  n="$(node_name "$k")"
  node_alive "$n" && continue
  install -d "$state_dir/slurmd-$n"
  # nsenter joins only the network namespace (`ip netns exec` would remount /sys); unshare gives the node
  # its own host name, which is how slurmd finds its NodeName.
  nsenter --net="/run/netns/$n" unshare --uts sh -c "hostname $n && exec slurmd -f $SLURM_CONF" ||
    die "slurmd of $n did not start: see $log_dir/slurmd-$n.log"
  for _ in $(seq 50); do [ -s "$run_dir/slurmd-$n.pid" ] && break; sleep 0.1; done
  say "started slurmd of $n (pid $(cat "$run_dir/slurmd-$n.pid" 2>/dev/null || echo '?'))"
done

deadline=$(($(date +%s) + ${SLURM_WAIT_S:-120}))
while :; do
  ready=0
  for k in $(seq 1 "$nodes"); do
    n="$(node_name "$k")"
    case "$(sinfo -h -N -n "$n" -o '%T' 2>/dev/null | head -1)" in
      idle | mixed | allocated | completing) ready=$((ready + 1)) ;;
      down* | drain* | fail*) scontrol update nodename="$n" state=resume 2>/dev/null || true ;;
    esac
  done
  [ "$ready" -eq "$nodes" ] && break
  if [ "$(date +%s)" -ge "$deadline" ]; then
    sinfo -N -l >&2 || true
    die "$ready of $nodes nodes ready after ${SLURM_WAIT_S:-120} s: see $log_dir"
  fi
  sleep 0.5
done
say "$nodes nodes ready after $(elapsed) s (clients: SLURM_CONF=$SLURM_CONF)"
sinfo -N -o '%N %T %C %m %G'
