#!/usr/bin/env bash
# Runs CI (.ci/run) on a fresh clone of HEAD under a stress that the throughput tests must survive:
#   --hog         another CPU-heavy process runs on the host the whole time (a busy loop, not pinned);
#   --half-speed  the whole run is held to half of this host's CPU by a CFS quota on its cgroup (cores
#                 half as fast, as on a slower machine of the same kind or a host shared with others).
# Trials that lose CPU to either are marked disturbed; the throughput tests retry them and then skip with
# a message instead of failing. Needs root and cgroup v1 (the cpu controller). Prints the elapsed time.
#
# usage: scripts/ci-stress.sh --hog|--half-speed
set -euo pipefail
cd "$(dirname "$0")/.."
mode="${1:-}"
clone="$(mktemp -d)"
git clone -q . "$clone"
cleanup() {
  [ -n "${hog:-}" ] && kill "$hog" 2>/dev/null || true
  if [ -n "${cg:-}" ] && [ -d "$cg" ]; then
    while read -r p; do echo "$p" > "$(dirname "$cg")/cgroup.procs" 2>/dev/null || true; done < "$cg/cgroup.procs"
    rmdir "$cg" 2>/dev/null || true
  fi
  rm -rf "$clone"
}
trap cleanup EXIT
start=$(date +%s)
case "$mode" in
  --hog)
    sh -c 'while :; do :; done' &
    hog=$!
    (cd "$clone" && bash .ci/run)
    ;;
  --half-speed)
    cg=/sys/fs/cgroup/cpu/synergy-ci-half-speed
    mkdir -p "$cg"
    echo 100000 > "$cg/cpu.cfs_period_us"
    echo $(( $(nproc) * 100000 / 2 )) > "$cg/cpu.cfs_quota_us"
    (cd "$clone" && sh -c "echo \$\$ > $cg/cgroup.procs && exec bash .ci/run")
    ;;
  *)
    echo "usage: scripts/ci-stress.sh --hog|--half-speed" >&2
    exit 2
    ;;
esac
echo "ci-stress $mode: .ci/run passed in $(( $(date +%s) - start )) s"
