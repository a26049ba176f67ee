#!/usr/bin/env bash
# Issue 19's fidelity check on three queues of different mixes (image-heavy, text-heavy, mixed), on the
# local backend. For each mix two real runs, one after the other:
#   learn     the queue with the shipped profiles and `--refine`: real mean JCT against the prediction
#             from the profiles as given, and from the profiles as the run refined them (fitted to the
#             same run);
#   held-out  the same queue again, planned and predicted from the first run's refined profiles
#             (STATE.refined/), without refining: a prediction that did not see this run.
# The host's load is printed around each run: a gap between real and predicted is mostly the host.
# Usage: scripts/refine-mixes.sh [SCALE] [ROUND_S] [MIX...]   (as root; MIX: image-heavy text-heavy mixed)
#   SCALE multiplies every job's work (1 = about a minute of work per job on this kind of host; 0.05 checks
#   that the script works). SYNERGY_RUN_FLAGS adds flags to every run (e.g. --include-disturbed).
set -euo pipefail
cd "$(dirname "$0")/.."
scale="${1:-1}"
round="${2:-10}"
shift $(( $# < 2 ? $# : 2 ))
mixes=("$@")
[ ${#mixes[@]} -gt 0 ] || mixes=(image-heavy text-heavy mixed)
bin="${SYNERGY:-${CARGO_TARGET_DIR:-target}/release/synergy}"
[ -x "$bin" ] || cargo build --release
out="$(mktemp -d)"
trap '[ -n "${SYNERGY_KEEP:-}" ] || rm -rf "$out"' EXIT
root="$(pwd)"
read -r -a run_flags <<< "${SYNERGY_RUN_FLAGS:-}"

# A mix's jobs, one per line: NAME WORKLOAD SAMPLES ARRIVAL_S (the profile is the workload's own).
jobs_of() {
  case "$1" in
    image-heavy) printf '%s\n' "image-1 image 30000 0" "image-2 image 30000 5" "text-1 text 30000 10" \
                                "image-3 image 30000 15" ;;
    text-heavy)  printf '%s\n' "text-1 text 30000 0" "image-1 image 30000 5" "text-2 text 30000 10" \
                                "text-3 text 30000 15" ;;
    mixed)       printf '%s\n' "image-1 image 30000 0" "audio-1 audio 20000 5" "text-1 text 30000 10" \
                                "audio-2 audio 20000 15" ;;
    *) echo "unknown mix '$1' (image-heavy, text-heavy, mixed)" >&2; exit 2 ;;
  esac
}

# Writes a job list for a mix; profiles come from DIR (NAME.json), or are the shipped ones where the learn
# run refined none (a workload it never observed undisturbed).
write_jobs() {
  local mix="$1" dir="$2" file="$3" profile
  : > "$file"
  while read -r name kind samples arrival; do
    profile="$dir/$kind.json"
    if [ ! -f "$profile" ]; then
      echo "   ($name: no refined profile '$kind', the shipped one is used)" >&2
      profile="$root/profiles/$kind.json"
    fi
    cat >> "$file" <<TOML
[[job]]
name = "$name"
workload = "$root/workloads/$kind.toml"
profile = "$profile"
samples = $(python3 -c "print(max(320, int($samples * $scale)))")
arrival_s = $arrival

TOML
  done < <(jobs_of "$mix")
}

run() {
  local label="$1" jobs="$2" state="$3"
  shift 3
  local flags=(${run_flags[@]+"${run_flags[@]}"})
  # The held-out run does not refine, and `--include-disturbed` is refused without `--refine`.
  if [[ " $* " != *" --refine "* ]]; then
    local kept=()
    for f in ${flags[@]+"${flags[@]}"}; do [ "$f" = --include-disturbed ] || kept+=("$f"); done
    flags=(${kept[@]+"${kept[@]}"})
  fi
  echo "== $label == (load before: $(cut -d' ' -f1-3 /proc/loadavg))" >&2
  "$bin" run "$jobs" --gpus 2 --round "$round" --mechanism tune --state "$state" --json "$@" \
    ${flags[@]+"${flags[@]}"} > "$state.report.json" 2> "$state.log"
  echo "== $label done == (load after: $(cut -d' ' -f1-3 /proc/loadavg))" >&2
}

for mix in "${mixes[@]}"; do
  write_jobs "$mix" "$root/profiles" "$out/$mix.learn.toml"
  run "$mix, learn (--refine)" "$out/$mix.learn.toml" "$out/$mix.learn.state.json" --refine
  refined="$out/$mix.learn.state.json.refined"
  ls "$refined"/*.json > /dev/null
  write_jobs "$mix" "$refined" "$out/$mix.heldout.toml"
  run "$mix, held-out" "$out/$mix.heldout.toml" "$out/$mix.heldout.state.json"
done

python3 - "$out" "${mixes[@]}" <<'PY'
import json, sys
out, mixes = sys.argv[1], sys.argv[2:]
f = lambda v: "-" if v is None else f"{v:.1f}"
d = lambda v: "-" if v is None else f"{v * 100:+.1f}%"
print(f"{'mix':<12} {'run':<9} {'real':>7} {'predicted':>10} {'diff':>7} {'refined':>8} {'diff':>7}"
      f" {'obs':>4} {'dist':>4}")
for mix in mixes:
    for run in ("learn", "heldout"):
        r = json.load(open(f"{out}/{mix}.{run}.state.json.report.json"))
        print(f"{mix:<12} {run:<9} {f(r['mean_real_jct_s']):>7} {f(r['mean_predicted_jct_s']):>10}"
              f" {d(r['mean_difference']):>7} {f(r.get('mean_predicted_refined_jct_s')):>8}"
              f" {d(r.get('mean_difference_refined')):>7} {r['observations']:>4}"
              f" {r['disturbed_observations']:>4}")
print("\npredicted: from the profiles the run was given (learn: shipped; held-out: the learn run's refined)")
print("refined:   from the profiles as this run refined them (learn only: fitted to the same run)")
PY
