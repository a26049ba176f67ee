#!/usr/bin/env bash
# The CPU sweep in one launch against fresh launches, on a probed script, in one run: profiles the script
# twice, one after the other (the sweep re-budgeted in place, then --fresh-trials), and prints side by side
# each profile's wall time and trial-seconds, its validation errors, and per swept core count the two cached
# rates with their 95% intervals and their difference (with the interval of the difference, the two
# half-widths combined in quadrature). SYNERGY_BENCH_ORDER=fresh-first runs the fresh profile first, so a
# drift of the host over the run shows as an order effect.
# Needs root, cgroups and a PyTorch; measure on a quiet host (the script prints the load average before
# and after each profile).
#
# usage: scripts/bench-in-place.sh [CPU_AXIS (default 0.5,1,1.5,2)] [VALIDATE (default 2)] -- COMMAND...
#   e.g. scripts/bench-in-place.sh -- "$(scripts/install-pytorch.sh)" \
#          workloads/pytorch/examples/imagefolder_train.py -j 2 -b 8 DATA
# SYNERGY_BENCH_KEEP=DIR keeps the profiles there instead of a temporary directory.
set -euo pipefail
cd "$(dirname "$0")/.."
cpus=0.5,1,1.5,2
validate=2
[ "${1:-}" = -- ] || { cpus="${1:-$cpus}"; shift || true; }
[ "${1:-}" = -- ] || { validate="${1:-$validate}"; shift || true; }
[ "${1:-}" = -- ] || { echo "usage: $0 [CPU_AXIS] [VALIDATE] -- COMMAND..." >&2; exit 2; }
shift
[ $# -gt 0 ] || { echo "bench-in-place: no command after --" >&2; exit 2; }
cargo build --release --quiet
bin="${CARGO_TARGET_DIR:-target}/release/synergy"
if [ -n "${SYNERGY_BENCH_KEEP:-}" ]; then
  out="$SYNERGY_BENCH_KEEP"; mkdir -p "$out"
else
  out="$(mktemp -d)"; trap 'rm -rf "$out"' EXIT
fi
order=(in-place fresh)
[ "${SYNERGY_BENCH_ORDER:-}" != fresh-first ] || order=(fresh in-place)
for how in "${order[@]}"; do
  flags=(--cpus "$cpus" --validate "$validate" --out "$out/$how.json")
  [ "$how" = in-place ] || flags+=(--fresh-trials)
  echo "$how: load before $(cut -d' ' -f1-3 /proc/loadavg)"
  start=$(date +%s.%N)
  "$bin" profile --probe pytorch "${flags[@]}" -- "$@" >/dev/null
  echo "$(python3 -c "print(f'{$(date +%s.%N) - $start:.1f}')")" > "$out/$how.wall"
  echo "$how: profiled in $(cat "$out/$how.wall") s, load after $(cut -d' ' -f1-3 /proc/loadavg)"
done

python3 - "$out" <<'PY'
import json, math, pathlib, sys
out = pathlib.Path(sys.argv[1])
profiles = {how: json.loads((out / f"{how}.json").read_text()) for how in ("in-place", "fresh")}

def trial_s(p):
    return sum(t["result"]["duration_s"] + t.get("earlier_runs_s", 0.0) for t in p["trials"])

print(f"\n{'':10} {'wall s':>7} {'trial-s':>8} {'trials':>6} {'median err':>10} {'max err':>8}")
for how, p in profiles.items():
    # The profile's own model, at the sweep's speed: the summary without the comparison models' flags.
    v = next((s for s in p.get("validation_summary", [])
              if s["hit_model"] == p["workload"]["hit_model"] and len(s) == 5), {})
    print(f"{how:10} {float((out / f'{how}.wall').read_text()):7.1f} {trial_s(p):8.1f} {len(p['trials']):6} "
          f"{100 * v.get('median_error', float('nan')):9.1f}% {100 * v.get('max_error', float('nan')):7.1f}%")

def cached(p):
    """The kept cached trial at each core count (the last, where one was measured again)."""
    kept = {}
    for t in p["trials"]:
        if t["role"] == "cpu":
            r = t["result"]
            kept[r["allocation"]["cpus"]] = (r["throughput"], r["allocation"].get("launched_at_cpus"), r["duration_s"])
    return kept

a, b = cached(profiles["in-place"]), cached(profiles["fresh"])
print(f"\n{'cores':>5} {'in place (samples/s)':>22} {'s':>5} {'fresh (samples/s)':>20} {'s':>5} {'in place - fresh':>22}")
for c in sorted(set(a) & set(b)):
    (ta, at, sa), (tb, _, sb) = a[c], b[c]
    d = ta["samples_per_s"] - tb["samples_per_s"]
    hw = math.hypot(ta["ci95_half_width"], tb["ci95_half_width"])
    how = "launch" if at is None else f"from {at:g}"
    print(f"{c:5g} {ta['samples_per_s']:9.2f} ± {ta['ci95_half_width']:5.2f} {how:>6} {sa:5.1f} "
          f"{tb['samples_per_s']:12.2f} ± {tb['ci95_half_width']:5.2f} {sb:5.1f} "
          f"{100 * d / tb['samples_per_s']:+8.1f}% ± {100 * hw / tb['samples_per_s']:4.1f}%")
PY
