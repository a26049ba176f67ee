#!/usr/bin/env bash
# The trace importer's benchmark: a 1,000,000-row Helios-style cluster_log.csv and a
# 100,000-job Philly-style cluster_job_log, generated here in the publishers' layouts, each imported with
# `synergy trace import`; prints rows per second, wall time and peak memory (max RSS) beside the input's
# size and the output's. Memory should follow what is kept: the Helios run is repeated keeping a tenth
# of the jobs (--to) to show it.
#
# usage: scripts/bench-import.sh [HELIOS_ROWS (default 1000000)] [PHILLY_JOBS (default 100000)]
set -euo pipefail
cd "$(dirname "$0")/.."
rows="${1:-1000000}"
jobs="${2:-100000}"
cargo build --release --quiet
bin="${CARGO_TARGET_DIR:-target}/release/synergy"
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT

python3 - "$out" "$rows" "$jobs" <<'PY'
import json, random, sys, datetime as dt
out, rows, jobs = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rng = random.Random(17)
t0 = dt.datetime(2020, 4, 1)
fmt = "%Y-%m-%d %H:%M:%S"
states = ["COMPLETED"] * 6 + ["CANCELLED", "FAILED", "TIMEOUT", "NODE_FAIL"]
with open(f"{out}/cluster_log.csv", "w") as f:
    f.write("job_id,user,vc,gpu_num,cpu_num,node_num,state,submit_time,start_time,end_time,duration,queue\n")
    t = t0
    for i in range(rows):
        t += dt.timedelta(seconds=rng.expovariate(1 / 15))
        g = rng.choice([0, 0, 1, 1, 1, 1, 2, 4, 8, 16])
        q = int(rng.expovariate(1 / 60)); d = int(10 ** rng.uniform(1, 5))
        s = t + dt.timedelta(seconds=q); e = s + dt.timedelta(seconds=d)
        f.write(f"j{i:07x},u{i % 997},vc{i % 13},{g},{max(g, 1) * 6},{max(1, g // 8)},{rng.choice(states)},"
                f"{t.strftime(fmt)},{s.strftime(fmt)},{e.strftime(fmt)},{d},{q}\n")
log = []
t = t0
for i in range(jobs):
    t += dt.timedelta(seconds=rng.expovariate(1 / 60))
    attempts = []
    s = t
    for _ in range(rng.choice([1, 1, 1, 2])):
        s += dt.timedelta(seconds=rng.randint(1, 600)); e = s + dt.timedelta(seconds=int(10 ** rng.uniform(1, 5)))
        gpus = rng.choice([1, 1, 2, 4, 8])
        attempts.append({"start_time": s.strftime(fmt), "end_time": e.strftime(fmt),
                         "detail": [{"ip": f"m{rng.randint(1, 500)}", "gpus": [f"gpu{k}" for k in range(gpus)]}]})
        s = e
    log.append({"status": rng.choice(["Pass", "Pass", "Pass", "Killed", "Failed"]), "vc": f"vc{i % 14}",
                "jobid": f"application_1506638472019_{i}", "attempts": attempts,
                "submitted_time": t.strftime(fmt), "user": f"u{i % 319}"})
with open(f"{out}/cluster_job_log", "w") as f:
    json.dump(log, f)
PY

run() { # run NAME INPUT_ROWS FILE ARGS...
  local name="$1" n="$2" file="$3"; shift 3
  local t0 t1 rss
  t0=$(date +%s.%N)
  /usr/bin/time -f '%M' -o "$out/rss" "$bin" trace import "$file" --profiles profiles/zoo --out "$out/$name.csv" \
    --json "$@" > "$out/$name.json"
  t1=$(date +%s.%N)
  rss=$(cat "$out/rss")
  python3 - "$name" "$n" "$t0" "$t1" "$rss" "$file" "$out/$name.csv" "$out/$name.json" <<'PY'
import json, os, sys
name, n, t0, t1, rss, src, dst, js = sys.argv[1:]
s = json.load(open(js)); wall = float(t1) - float(t0)
print(f"{name:<22} {int(n):>9} rows  {wall:6.2f} s  {int(n) / wall:>10.0f} rows/s  kept {s['kept']:>8}  "
      f"max RSS {int(rss) / 1024:6.1f} MiB  in {os.path.getsize(src) / 2**20:6.1f} MiB  out {os.path.getsize(dst) / 2**20:5.1f} MiB")
PY
}

echo "load: $(cut -d' ' -f1-3 /proc/loadavg)"
run helios "$rows" "$out/cluster_log.csv" --format helios
run helios-tenth "$rows" "$out/cluster_log.csv" --format helios --to "$(sed -n "$((rows / 10 + 1))p" "$out/cluster_log.csv" | cut -d, -f8)"
run philly "$jobs" "$out/cluster_job_log" --format philly
echo "load: $(cut -d' ' -f1-3 /proc/loadavg)"
