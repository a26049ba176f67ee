#!/usr/bin/env bash
# Optimistic profiling against the exhaustive grid, in one run per workload: profile with --exhaustive
# and print, side by side, the trials and trial-seconds of the optimistic plan (CPU sweep, synthetic,
# fetch and calibration trials) against those of the whole grid (each trial's discarded runs counted),
# and the prediction error on the grid points the optimistic plan did not measure, for the published
# DS-Analyzer model (LRU page cache, misses cost storage bandwidth only) and for this project's (misses
# cost CPU too, calibrated page cache).
# A `repeats` line gives, per core count, the spread of the grid points this project's model predicts
# within 1% of each other: how well this host repeats one measurement, which bounds any model's error.
# An `undisturbed` line, where any trial stayed disturbed, gives the errors over the grid points whose
# trials ran undisturbed: a disturbed trial measured the host, not its allocation.
# A `speed probe` line gives, per core count, the probe's mean reading over the model's reference speed in
# the sweep's and the grid's trials: a core count off 1 in both is that allocation's own reading.
# SYNERGY_BENCH_REPEAT=1 profiles each workload a second time right after the first: the table then has
# both runs, the grid against itself (the two measurements of each point), and each run's model against
# the mean of the two grids. The grid against itself is this host's noise floor: no model can be scored
# more closely than the yardstick repeats.
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
case "${SYNERGY_BENCH_REPEAT:-0}" in
  0|"") runs=1 ;;
  1) runs=2 ;;
  *) echo "bench-profiler: SYNERGY_BENCH_REPEAT must be 0 or 1, not '${SYNERGY_BENCH_REPEAT}'" >&2; exit 2 ;;
esac
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
  for run in $(seq 1 "$runs"); do
    file="$out/$name.json"
    [ "$run" = 1 ] || file="$out/$name.$run.json"
    start=$(date +%s)
    "$bin" profile "$spec" "${storage[@]}" --cpus "$cpus" --validate 0 --exhaustive \
      --out "$file" >/dev/null
    echo "$name (run $run): profiled in $(( $(date +%s) - start )) s, load $(cut -d' ' -f1-3 /proc/loadavg)"
  done
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
# "@ core speed": our model with each grid point's CPU stage at the speed its trial's core ran
# (docs/profile-format.md, "Host speed in validation"): the host's drift taken out.
MODELS = (("DS-Analyzer", "predicted_ds_analyzer"), ("synergy", None), ("@ core speed", "predicted_at_core_speed"))

def own(p):
    return "predicted_page_cache" if p["workload"]["hit_model"] == "page-cache" else "predicted_minio"

def held(p):
    """The grid points the optimistic plan did not measure, by (cores, memory column): a column's budget
    moves by a few hundred kilobytes between runs with the footprint each measured."""
    swept = {t["result"]["allocation"]["cpus"] for t in p["trials"] if t["role"] == "cpu"}
    columns = sorted(p["matrix"]["memory_gib"])
    return {(v["cpus"], columns.index(v["memory_gib"])): v for v in p["validation"]
            if v["role"] == "exhaustive"
            and not (v["cpus"] in swept and v["memory_gib"] == columns[-1])}

def errors(points, key):
    """|predicted - measured| / measured of the points that have prediction `key`."""
    return [abs(v[key] - v["measured"]) / v["measured"] for v in points if v.get(key) is not None]

def spread(errs):
    return (f"{len(errs):>6} {100 * statistics.median(errs):>6.1f}% {100 * statistics.mean(errs):>5.1f}% "
            f"{100 * max(errs):>5.1f}%")

def report(name, p):
    opt = [t for t in p["trials"] if t["role"] in ("synthetic", "cpu", "fetch", "calibration")]
    grid = [t for t in p["trials"] if t["role"] == "exhaustive"]
    # A trial's seconds include its discarded runs (re-run after a disturbance), on both sides.
    cost = lambda ts: sum(t["result"]["duration_s"] + t.get("earlier_runs_s", 0.0) for t in ts)
    opt_s, grid_s = cost(opt), cost(grid)
    points = list(held(p).values())
    disturbed = sum(1 for t in p["trials"] if (t["result"].get("disturbance") or {}).get("disturbed"))
    for label, key in MODELS:
        key = key or own(p)
        errs = errors(points, key)
        if not errs:
            continue
        print(f"{name:<24} {label:<12} {len(opt):>10} {opt_s:>6.0f} {len(grid):>11} {grid_s:>6.0f} "
              f"{grid_s / opt_s:>5.1f}x {spread(errs)} {disturbed:>9}")
    # A grid trial that stayed disturbed (other work on its cores, or its core slow by the speed probe,
    # through all its runs) did not measure its allocation: the same errors over the points whose trials
    # ran undisturbed tell the model's error from the yardstick's.
    calm = {(t["result"]["allocation"]["cpus"], t["memory_gib"]) for t in grid
            if not (t["result"].get("disturbance") or {}).get("disturbed")}
    kept = [v for v in points if (v["cpus"], v["memory_gib"]) in calm]
    if len(kept) < len(points) and kept:
        rows = []
        for label, key in MODELS[1:]:
            key = key or own(p)
            errs = errors(kept, key)
            if errs:
                rows.append(f"{label} {100 * statistics.median(errs):.1f}% / {100 * max(errs):.1f}%")
        print(f"{'':<24} on the {len(kept)} of {len(points)} points whose trials ran undisturbed, "
              f"median / max: {'; '.join(rows)}")
    fit = (p.get("model") or {}).get("hit_curve")
    if fit:
        print(f"{'':<24} page cache: {fit['chosen_because']}")
    # How far the grid repeats itself: at one core count, budgets our model predicts within 1% of each
    # other are, to the model, one point measured several times, and their spread bounds any model's
    # error on this host.
    alike = []
    points = [v for v in p["validation"] if v["role"] == "exhaustive" and v.get(own(p)) is not None]
    for c in sorted({v["cpus"] for v in points}):
        row = [v for v in points if v["cpus"] == c]
        top = max(row, key=lambda v: v["memory_gib"])[own(p)]
        same = [v["measured"] for v in row if abs(v[own(p)] - top) <= 0.01 * top]
        if len(same) >= 2:
            alike.append(f"{c:g} cores, {len(same)} budgets: {min(same):.1f}-{max(same):.1f} "
                         f"({100 * (max(same) / min(same) - 1):.0f}%)")
    if alike:
        print(f"{'':<24} repeats (budgets our model predicts within 1%): {'; '.join(alike)}")
    # The speed probe per core count, over the reference the model's CPU stage is taken to: a core count
    # whose sweep and grid trials both read off 1 is that shape's own reading, not the host's drift
    # (docs/measurement-history.md: half a core reads about 1% slow, and so does the pipeline there).
    ref = ((p.get("model") or {}).get("core_speed") or {}).get("reference_ops_per_cpu_s")
    def probe(role, c):
        r = [t["result"]["disturbance"]["core_ops_per_cpu_s"] / ref for t in p["trials"]
             if t["role"] == role and t["result"]["allocation"]["cpus"] == c
             and (t["result"].get("disturbance") or {}).get("core_ops_per_cpu_s")]
        return f"{statistics.mean(r):.3f}" if r else "-"
    if ref:
        cores = sorted({t["result"]["allocation"]["cpus"] for t in p["trials"] if t["role"] == "cpu"})
        print(f"{'':<24} speed probe over the reference, sweep / grid: "
              + "; ".join(f"{c:g} cores {probe('cpu', c)} / {probe('exhaustive', c)}" for c in cores))
    for w in p.get("warnings", []):
        print(f"{'':<24} warning: {w}")

def against_both(name, first, second):
    """The grid against itself, and each run's model against the mean of the two grids."""
    a, b = held(first), held(second)
    both = sorted(a.keys() & b.keys())
    if not both:
        return
    mean = {k: (a[k]["measured"] + b[k]["measured"]) / 2 for k in both}
    print(f"{name:<24} {'grid twice':<12} {'':>10} {'':>6} {'':>11} {'':>6} {'':>6} "
          + spread([abs(a[k]["measured"] - b[k]["measured"]) / mean[k] for k in both]))
    for run, p in (("1", a), ("2", b)):
        for label, key in MODELS:
            key = key or own(first)
            errs = [abs(p[k][key] - mean[k]) / mean[k] for k in both if p[k].get(key) is not None]
            if errs:
                print(f"{name + ' (run ' + run + ')':<24} {label:<12} {'vs the mean of both grids':>42} "
                      + spread(errs))

for name in names:
    first = json.loads((out / f"{name}.json").read_text())
    report(name, first)
    again = out / f"{name}.2.json"
    if again.exists():
        second = json.loads(again.read_text())
        report(f"{name} (run 2)", second)
        against_both(name, first, second)
PY
