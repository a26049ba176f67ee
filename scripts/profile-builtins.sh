#!/usr/bin/env bash
# Regenerates the shipped profiles (profiles/*.json and .csv) on this host: optimistic profiles with 4
# held-out validation points each, under a storage limit that makes the memory axis matter (default
# 40 MB/s). The host's facts (cores, memory, kernel, isolation, GPU, CPU calibration) are recorded in every
# file. Needs root and cgroups, and SYNERGY_PYTHON with torch for the PyTorch profile
# (scripts/install-pytorch.sh prints one); measure on a quiet host. About 30 minutes on 2 cores.
#
# usage: scripts/profile-builtins.sh [STORAGE_LIMIT|none] [WORKLOAD...]
#        (default: 40MB/s; image image-app audio text pytorch-resnet18-small pytorch-ddp-resnet18-small)
set -euo pipefail
cd "$(dirname "$0")/.."
limit="${1:-40MB/s}"
shift $(( $# < 1 ? $# : 1 ))
cargo build --release --quiet
bin="${CARGO_TARGET_DIR:-target}/release/synergy"
workloads=("$@")
[ ${#workloads[@]} -gt 0 ] || workloads=(image image-app audio text pytorch-resnet18-small pytorch-ddp-resnet18-small)
storage=()
[ "$limit" = none ] || storage=(--storage-bps "$limit")
for w in "${workloads[@]}"; do
  echo "$w: load $(cut -d' ' -f1-3 /proc/loadavg)"
  cpus=()
  # Two ranks of CPU PyTorch take 20-25 s to reach their first step at half a core on a 2-core host, most
  # of a plan trial's 30 s: the axis starts at one core.
  [ "$w" = pytorch-ddp-resnet18-small ] && cpus=(--cpus 1,1.5,2)
  "$bin" profile "workloads/$w.toml" "${storage[@]}" "${cpus[@]}" --validate 4 --out "profiles/$w.json"
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
