#!/usr/bin/env bash
# The demonstration of refinement: a queue where one image job is given the text profile (a deliberately
# wrong one: text is at its accelerator's rate from a quarter of a core, so the planner gives the job a
# quarter of a core) beside image and audio jobs with their own, run for real without and with `--refine`,
# side by side: real against predicted mean JCT, and the mis-profiled job's throughput error at each
# allocation before and after refinement. The host's load is printed around each run. No other job uses
# the text profile: jobs that share a profile share its refinement.
# Usage: scripts/refine-fidelity.sh [SCALE] [ROUND_S] [MECHANISM] [EXTRA RUN FLAGS...]   (as root)
#   SCALE multiplies every job's work (1 = about 2 minutes of work per job on the shipped profiles'
#   host; 0.1 checks that the script works). Pass --include-disturbed on a host that stays busy.
set -euo pipefail
cd "$(dirname "$0")/.."
scale="${1:-1}"
round="${2:-10}"
mech="${3:-tune}"
shift $(( $# < 3 ? $# : 3 ))
extra=("$@")
bin="${SYNERGY:-${CARGO_TARGET_DIR:-target}/release/synergy}"
[ -x "$bin" ] || cargo build --release
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
root="$(pwd)"
n() { python3 -c "print(max(320, int($1 * $scale)))"; }
# The text profile asks 13.5 MiB, less than the image pipeline runs in with one loader thread (about
# 40 MB): the job's spec declares the floor, which the planner then never goes below (docs/run.md).
sed 's/^gpus = 1$/gpus = 1\nfootprint = "160MiB"/' workloads/image.toml > "$out/image-floor.toml"
cat > "$out/jobs.toml" <<TOML
# One image job mis-profiled as text; everything else with its own profile.
[[job]]
name = "image-as-text"
workload = "$out/image-floor.toml"
profile = "$root/profiles/text.json"
samples = $(n 48000)

[[job]]
name = "image-1"
workload = "$root/workloads/image.toml"
profile = "$root/profiles/image.json"
samples = $(n 48000)
arrival_s = 5

[[job]]
name = "audio-1"
workload = "$root/workloads/audio.toml"
profile = "$root/profiles/audio.json"
samples = $(n 60000)
arrival_s = 10
TOML
for mode in plain refine; do
  flags=()
  [ "$mode" = refine ] && flags=(--refine "${extra[@]}")
  # The host is shared: its load during a run explains most of a gap between real and predicted.
  echo "== $mode == (load before: $(cut -d' ' -f1-3 /proc/loadavg))" >&2
  "$bin" run "$out/jobs.toml" --gpus 2 --round "$round" --mechanism "$mech" \
    --state "$out/$mode.state.json" --json "${flags[@]}" > "$out/$mode.json" 2> "$out/$mode.log"
  echo "== $mode done == (load after: $(cut -d' ' -f1-3 /proc/loadavg))" >&2
  grep 'refine:' "$out/$mode.log" | tail -n 6 >&2 || true
done
python3 - "$out/plain.json" "$out/refine.json" <<'PY'
import json, sys
p, r = (json.load(open(f)) for f in sys.argv[1:3])
f = lambda v: "-" if v is None else f"{v:.1f}"
d = lambda v: "-" if v is None else f"{v*100:+.1f}%"
print(f"{p['mechanism']}, rounds of {p['round_s']} s, {len(p['jobs'])} jobs")
print(f"{'job':<16} {'plain real':>10} {'pred':>8} {'diff':>7}   {'refine real':>11} {'pred':>8} {'diff':>7}")
for a, b in zip(p["jobs"], r["jobs"]):
    print(f"{a['name']:<16} {f(a['real_jct_s']):>10} {f(a['predicted_jct_s']):>8} {d(a['difference']):>7}"
          f"   {f(b['real_jct_s']):>11} {f(b['predicted_jct_s']):>8} {d(b['difference']):>7}")
print(f"{'mean':<16} {f(p['mean_real_jct_s']):>10} {f(p['mean_predicted_jct_s']):>8} {d(p['mean_difference']):>7}"
      f"   {f(r['mean_real_jct_s']):>11} {f(r['mean_predicted_jct_s']):>8} {d(r['mean_difference']):>7}")
# The same queue predicted again from the profiles as each run refined them: how far the prediction converged.
print(f"{'mean, refined':<16} {f(p['mean_real_jct_s']):>10} {f(p.get('mean_predicted_refined_jct_s')):>8} "
      f"{d(p.get('mean_difference_refined')):>7}   {f(r['mean_real_jct_s']):>11} "
      f"{f(r.get('mean_predicted_refined_jct_s')):>8} {d(r.get('mean_difference_refined')):>7}")
for name, rep in (("plain", p), ("refine", r)):
    print(f"\n{name}: throughput at each allocation ({rep['observations']} observations, "
          f"{rep['disturbed_observations']} disturbed)")
    for j in rep["jobs"]:
        for x in j["fidelity"]:
            print(f"  {j['name']:<16} {x['cpus']:.2f} cores {x['memory_gib']:.2f} GiB: observed "
                  f"{x['observed_samples_per_s']:.1f}/s over {x['rounds']} rounds; profile "
                  f"{x['predicted_before']:.1f} ({d(x['error_before'])}), refined "
                  f"{f(x['predicted_after'])} ({d(x['error_after'])})")
if p["mean_real_jct_s"] and r["mean_real_jct_s"]:
    print(f"\nreal mean JCT, plain / refine: {p['mean_real_jct_s'] / r['mean_real_jct_s']:.3f}x")
PY
