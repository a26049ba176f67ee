#!/usr/bin/env bash
# Regenerates the shipped profiles of the built-in workloads (profiles/*.json and .csv) on this host:
# optimistic profiles with 4 held-out validation points each. The host's facts (cores, memory, kernel,
# isolation, GPU) are recorded in every file. Needs root and cgroup v1; about 15 minutes on 2 cores.
#
# usage: scripts/profile-builtins.sh [WORKLOAD...]   (default: image image-app audio text)
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --quiet
bin="${CARGO_TARGET_DIR:-target}/release/synergy"
workloads=("$@")
[ ${#workloads[@]} -gt 0 ] || workloads=(image image-app audio text)
for w in "${workloads[@]}"; do
  "$bin" profile "workloads/$w.toml" --validate 4 --out "profiles/$w.json"
done
