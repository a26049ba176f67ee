#!/usr/bin/env bash
# Optimistic profiling against the exhaustive grid, in one run per workload: profile with --exhaustive
# and print, side by side, the trials and trial-seconds of the optimistic plan (CPU sweep, synthetic,
# fetch and calibration trials) against those of the whole grid (each trial's discarded runs counted),
# and the prediction error on the grid points the optimistic plan did not measure, for the published
# DS-Analyzer model (LRU page cache, misses cost storage bandwidth only) and for this project's (misses
# cost CPU too, calibrated page cache).
# A `repeats` line gives, per core count, the spread of the grid points this project's model predicts
# within 1% of each other: how well this host repeats one measurement, which bounds any model's error.
# Needs root and cgroups; measure on a quiet host (the script prints the load average before and after).
#
# usage: scripts/bench-profiler.sh [STORAGE_LIMIT|none (default 40MB/s)] [CPU_AXIS (default 0.5,1,1.5,2)]
#                                  [WORKLOAD... (default image audio image-app pytorch-resnet18-small)]
# The PyTorch workload needs SYNERGY_PYTHON with torch (scripts/install-pytorch.sh prints one).
# SYNERGY_BENCH_KEEP=DIR keeps the profiles there instead of a temporary directory.
set -euo pipefail
cd "$(dirname "$0")/.."
limit="${1:-40MB/s}"
cpus="${2:-0.5,1,1.5,2}"
shift $(( $# < 2 ? $# : 2 ))
workloads=("$@")
[ ${#workloads[@]} -gt 0 ] || workloads=(image audio image-app pytorch-resnet18-small)
cargo build --release --quiet
bin="${CARGO_TARGET_DIR:-target}/release/synergy"
if [ -n "${SYNERGY_BENCH_KEEP:-}" ]; then
  out="$SYNERGY_BENCH_KEEP"; mkdir -p "$out"
else
  out="$(mktemp -d)"; trap 'rm -rf "$out"' EXIT
fi
storage=()
[ "$limit" = none ] || storage=(--storage-bps "$limit")

echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
for name in "${workloads[@]}"; do
  spec="workloads/$name.toml"
  [ -f "$spec" ] || spec="$name"
  start=$(date +%s)
  "$bin" profile "$spec" "${storage[@]}" --cpus "$cpus" --validate 0 --exhaustive \
    --out "$out/$name.json" >/dev/null
  echo "$name: profiled in $(( $(date +%s) - start )) s, load $(cut -d' ' -f1-3 /proc/loadavg)"
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"

python3 - "$out" "$limit" "${workloads[@]}" <<'PY'
import json, statistics, sys, pathlib
out, limit, names = pathlib.Path(sys.argv[1]), sys.argv[2], sys.argv[3:]
print(f"\nstorage limit {limit}; errors are |predicted - measured| / measured over the exhaustive grid points")
print("the optimistic plan did not measure (the sweep's cached trials stand for the last memory column)")
head = (f"{'workload':<24} {'model':<12} {'opt trials':>10} {'opt s':>6} {'grid trials':>11} {'grid s':>6} "
        f"{'ratio':>6} {'points':>6} {'median':>7} {'mean':>6} {'max':>6} {'disturbed':>9}")
print(head)
for name in names:
    p = json.loads((out / f"{name}.json").read_text())
    opt = [t for t in p["trials"] if t["role"] in ("synthetic", "cpu", "fetch", "calibration")]
    grid = [t for t in p["trials"] if t["role"] == "exhaustive"]
    # A trial's seconds include its discarded runs (re-run after a disturbance), on both sides.
    cost = lambda ts: sum(t["result"]["duration_s"] + t.get("earlier_runs_s", 0.0) for t in ts)
    opt_s, grid_s = cost(opt), cost(grid)
    swept = {t["result"]["allocation"]["cpus"] for t in p["trials"] if t["role"] == "cpu"}
    last = max(p["matrix"]["memory_gib"])
    held = [v for v in p["validation"] if v["role"] == "exhaustive"
            and not (v["cpus"] in swept and v["memory_gib"] == last)]
    own = "predicted_page_cache" if p["workload"]["hit_model"] == "page-cache" else "predicted_minio"
    disturbed = sum(1 for t in p["trials"] if (t["result"].get("disturbance") or {}).get("disturbed"))
    # "@ core speed": our model with each grid point's CPU stage at the speed its trial's core ran
    # (docs/profile-format.md, "Host speed in validation"): the host's drift taken out.
    for label, key in (("DS-Analyzer", "predicted_ds_analyzer"), ("synergy", own),
                       ("@ core speed", "predicted_at_core_speed")):
        errs = [abs(v[key] - v["measured"]) / v["measured"] for v in held if v.get(key) is not None]
        if not errs:
            continue
        print(f"{name:<24} {label:<12} {len(opt):>10} {opt_s:>6.0f} {len(grid):>11} {grid_s:>6.0f} "
              f"{grid_s / opt_s:>5.1f}x {len(errs):>6} {100 * statistics.median(errs):>6.1f}% "
              f"{100 * statistics.mean(errs):>5.1f}% {100 * max(errs):>5.1f}% {disturbed:>9}")
    fit = (p.get("model") or {}).get("hit_curve")
    if fit:
        print(f"{'':<24} page cache: {fit['chosen_because']}")
    # How far the grid repeats itself: at one core count, budgets our model predicts within 1% of each
    # other are, to the model, one point measured several times, and their spread bounds any model's
    # error on this host.
    alike = []
    points = [v for v in p["validation"] if v["role"] == "exhaustive" and v.get(own) is not None]
    for c in sorted({v["cpus"] for v in points}):
        row = [v for v in points if v["cpus"] == c]
        top = max(row, key=lambda v: v["memory_gib"])[own]
        same = [v["measured"] for v in row if abs(v[own] - top) <= 0.01 * top]
        if len(same) >= 2:
            alike.append(f"{c:g} cores, {len(same)} budgets: {min(same):.1f}-{max(same):.1f} "
                         f"({100 * (max(same) / min(same) - 1):.0f}%)")
    if alike:
        print(f"{'':<24} repeats (budgets our model predicts within 1%): {'; '.join(alike)}")
    for w in p.get("warnings", []):
        print(f"{'':<24} warning: {w}")
PY
