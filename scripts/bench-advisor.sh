#!/usr/bin/env bash
# What the submit-time advisor costs a submission (docs/slurm.md, "The submit-time advisor"): three
# controllers of scripts/slurm-advisor-ctld.sh side by side (no JobSubmitPlugins; lua with a pass-through
# script; lua with the advisor's script and a table of the zoo), the same sbatch sent to each in turn, N
# rounds. Prints, per controller, the median and the 10th and 90th percentiles of sbatch's wall time.
# (slurmctld's own `usec=` for the submission RPC leaves the job_submit plugin out: a script busy for 5 ms
# did not change it, so it cannot measure the advisor.)
#
# usage (as root, munged running): scripts/bench-advisor.sh [N]   (default 200 rounds)
# environment: SYNERGY=path of the synergy binary (default: $CARGO_TARGET_DIR or target, release)
set -euo pipefail
rounds="${1:-200}"
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(dirname "$here")"
synergy="${SYNERGY:-${CARGO_TARGET_DIR:-$repo/target}/release/synergy}"
[ -x "$synergy" ] || { echo "bench-advisor: no synergy binary at $synergy (cargo build --release)" >&2; exit 1; }
work="$(mktemp -d)"
names=(none passthrough advisor)
ports=(6837 6839 6841)
cleanup() {
  for n in "${names[@]}"; do "$here/slurm-advisor-ctld.sh" stop "$work/$n" >/dev/null 2>&1 || true; done
  rm -rf "$work"
}
trap cleanup EXIT INT TERM

"$here/slurm-advisor-ctld.sh" start "$work/none" "${ports[0]}" --no-plugin >/dev/null
"$here/slurm-advisor-ctld.sh" start "$work/passthrough" "${ports[1]}" >/dev/null
"$here/slurm-advisor-ctld.sh" start "$work/advisor" "${ports[2]}" >/dev/null
SLURM_CONF="$work/advisor/slurm.conf" "$synergy" slurm advisor "$repo/profiles/zoo" "$repo/profiles/image.json" \
  --out "$work/advisor" >/dev/null
# Dated a second ahead, so the plugin reloads it (it compares whole seconds), then once more a second later
# so that the rounds below time a loaded script, not reloads.
touch -d "@$(($(date +%s) + 1))" "$work/advisor/job_submit.lua"
sleep 2.1
for n in "${names[@]}"; do
  SLURM_CONF="$work/$n/slurm.conf" sbatch --parsable --output=/dev/null --chdir=/ --gres=gpu:1 \
    --comment=synergy:res18 --wrap true >/dev/null 2>&1
done
check="$(SLURM_CONF="$work/advisor/slurm.conf" scontrol show job -o 1 | grep -o 'NumCPUs=[0-9]*')"
[ "$check" = NumCPUs=9 ] || { echo "bench-advisor: the advisor did not size the job ($check)" >&2; exit 1; }

for _ in $(seq "$rounds"); do
  for n in "${names[@]}"; do
    a=$(date +%s%N)
    SLURM_CONF="$work/$n/slurm.conf" sbatch --parsable --output=/dev/null --chdir=/ --gres=gpu:1 \
      --comment=synergy:res18 --wrap true >/dev/null 2>&1
    b=$(date +%s%N)
    echo "$(((b - a) / 1000))" >>"$work/$n.wall"
  done
done

stats() { # stats FILE: median p10 p90 (values in microseconds, printed in ms)
  sort -n "$1" | awk '{ v[NR] = $1 } END {
    printf "%7.2f %7.2f %7.2f", v[int((NR + 1) / 2)] / 1000, v[int(NR * 0.1) + 1] / 1000, v[int(NR * 0.9)] / 1000 }'
}
echo "bench-advisor: $rounds submissions to each controller, interleaved; load: $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-12s %9s %9s %9s   (sbatch wall time, ms)\n' controller median p10 p90
for n in "${names[@]}"; do
  printf '%-12s %s\n' "$n" "$(stats "$work/$n.wall" | awk '{printf "%9s %9s %9s", $1, $2, $3}')"
done
