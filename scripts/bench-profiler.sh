#!/usr/bin/env bash
# Optimistic profiling against the exhaustive grid, in one run: for the image workload with an application
# cache, the image workload with the page cache, and the audio workload, all under a storage limit that makes
# fetch matter, profile with --exhaustive and print the trials and trial-seconds of the optimistic plan
# (synthetic, CPU sweep, fetch) against those of the whole grid, and the prediction error over the grid's
# points for both hit-ratio models. Needs root and cgroup v1; takes about 25 minutes on 2 cores.
#
# usage: scripts/bench-profiler.sh [STORAGE_LIMIT (default 40MB/s)] [CPU_AXIS (default 0.5,1,1.5,2)]
set -euo pipefail
cd "$(dirname "$0")/.."
limit="${1:-40MB/s}"
cpus="${2:-0.5,1,1.5,2}"
cargo build --release --quiet
bin="${CARGO_TARGET_DIR:-target}/release/synergy"
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT

for spec in workloads/image-app.toml workloads/image.toml workloads/audio.toml; do
  name=$(basename "$spec" .toml)
  "$bin" profile "$spec" --storage-bps "$limit" --cpus "$cpus" --validate 0 --exhaustive \
    --out "$out/$name.json" >/dev/null
done

python3 - "$out" "$limit" <<'PY'
import json, statistics, sys, pathlib
out, limit = pathlib.Path(sys.argv[1]), sys.argv[2]
print(f"storage limit {limit}; errors are |predicted - measured| / measured over the exhaustive grid")
head = f"{'workload':<10} {'model':<11} {'opt trials':>10} {'opt s':>7} {'grid trials':>11} {'grid s':>7} {'ratio':>6} {'median err':>10} {'mean err':>8} {'max err':>8}"
print(head)
for name in ["image-app", "image", "audio"]:
    p = json.loads((out / f"{name}.json").read_text())
    opt = [t for t in p["trials"] if t["role"] in ("synthetic", "cpu", "fetch")]
    grid = [t for t in p["trials"] if t["role"] == "exhaustive"]
    opt_s = sum(t["result"]["duration_s"] for t in opt)
    grid_s = sum(t["result"]["duration_s"] for t in grid)
    own = p["workload"]["hit_model"]
    for model in ("minio", "page-cache"):
        key = "predicted_minio" if model == "minio" else "predicted_page_cache"
        errs = [abs(v[key] - v["measured"]) / v["measured"] for v in p["validation"] if v["role"] == "exhaustive"]
        tag = model + ("*" if model == own else "")
        print(f"{name:<10} {tag:<11} {len(opt):>10} {opt_s:>7.0f} {len(grid):>11} {grid_s:>7.0f} {grid_s/opt_s:>5.1f}x "
              f"{100*statistics.median(errs):>9.1f}% {100*statistics.mean(errs):>7.1f}% {100*max(errs):>7.1f}%")
print("* the workload's own hit-ratio model (from its spec)")
PY
