#!/usr/bin/env bash
# Measures what the profiler foundation must show on this host and prints it as one table:
# throughput of the built-in workloads against cores, a fetch-bound cold run under a storage limit and its
# prewarmed recovery, the page cache under a memory limit, the application cache's hit ratio, and the
# isolation overhead. Needs root and cgroup v1; takes a few minutes (datasets are generated once).
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --quiet
bin="${CARGO_TARGET_DIR:-target}/release/synergy"
j() { "$bin" measure "$@" --json; }
field() { python3 -c "import json,sys; v=json.load(sys.stdin); print(eval(sys.argv[1], {}, {'v': v}))" "$1"; }
rate() { field "'%.1f ± %.1f' % (v['throughput']['samples_per_s'], v['throughput']['ci95_half_width'])"; }

printf '%-10s %-34s %s\n' workload allocation "samples/s (95% CI)"
for w in image audio text; do
  printf '%-10s %-34s %s\n' "$w" "synthetic (accelerator rate G)" "$(j "$w" --synthetic --cpus 1 | rate)"
  for c in 0.25 0.5 1 1.5 2; do
    printf '%-10s %-34s %s\n' "$w" "$c cores, warm" "$(j "$w" --cpus "$c" --warm | rate)"
  done
done

cold=$(j image --cpus 2 --cold --storage-bps 20MB/s --max-seconds 12)
mean=$(echo "$cold" | field "v['dataset']['mean_file_bytes']")
printf '%-10s %-34s %s (fetch rate 20 MB/s / %.0f B = %.1f)\n' image "2 cores, cold, 20 MB/s" "$(echo "$cold" | rate)" \
  "$mean" "$(python3 -c "print(20e6/$mean)")"
printf '%-10s %-34s %s\n' image "2 cores, prewarmed, 20 MB/s" "$(j image --cpus 2 --warm --storage-bps 20MB/s | rate)"

mem=$(j image --cpus 2 --cold --mem 192MiB --min-seconds 8)
printf '%-10s %-34s %s; page cache peak %s MiB under 192 MiB\n' image "2 cores, cold, memory 192 MiB" "$(echo "$mem" | rate)" \
  "$(echo "$mem" | field "round(v['telemetry']['page_cache_peak_bytes']/2**20, 1)")"

half=$(( $(echo "$mem" | field "v['dataset']['bytes']") / 2 ))
app=$(j image --cpus 2 --cold --cache-bytes "$half" --warmup-epochs 1 --max-seconds 40)
printf '%-10s %-34s %s; hit ratio after epoch 1: %s\n' image "2 cores, app cache = dataset/2" "$(echo "$app" | rate)" \
  "$(echo "$app" | field "round(v['telemetry']['app_cache']['hits']/(v['telemetry']['app_cache']['hits']+v['telemetry']['app_cache']['misses']), 3)")"

aff=$(j image --cpus 1 --warm --isolation affinity)
printf '%-10s %-34s %s\n' image "1 core, affinity fallback" "$(echo "$aff" | rate)"
printf 'isolation setup + teardown (cgroup-v1, last memory-limited trial): %s ms\n' \
  "$(echo "$mem" | field "round(v['isolation']['setup_ms'] + v['isolation']['teardown_ms'], 1)")"
