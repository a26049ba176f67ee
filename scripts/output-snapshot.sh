#!/usr/bin/env bash
# Writes what every deterministic command prints (stdout, stderr and exit status, timing fields masked)
# and the files it writes, into one directory, so that two builds can be compared byte for byte with
# `diff -r`: a restructuring must not change what users see.
#   scripts/output-snapshot.sh OUT_DIR [SYNERGY_BINARY]
set -euo pipefail
out=$(realpath -m "$1"); bin=$(realpath "${2:-target/release/synergy}")
cd "$(dirname "$0")/.."
rm -rf "$out"; mkdir -p "$out"
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
n=0
# Elapsed times, dates and the binary's own path differ between runs and builds; nothing else may.
mask() { sed -E -e 's/[0-9]+(\.[0-9]+)? ?(ms|s)\b/<T>/g' -e "s#$work#<W>#g" -e "s/[0-9]+ job-rounds\/s/<R> job-rounds\/s/g" -e "s/\b1[78][0-9]{8}\b/<UNIX>/g" -e "s#$bin#<BIN>#g" \
  -e 's/"(elapsed|wall|seconds|took|generated_at|created|written_at|job_rounds_per_s)[a-z_]*": ?[0-9.e+-]+/"\1": <T>/g'; }
snap() {
  n=$((n + 1)); local name; name=$(printf '%02d' $n)-$(echo "$*" | tr -c 'a-zA-Z0-9._-' '_' | cut -c1-80)
  set +e; (cd "$work" && "$bin" "$@") >"$out/$name.out" 2>"$out/$name.err"; echo $? >"$out/$name.rc"; set -e
  for f in out err; do mask <"$out/$name.$f" >"$out/$name.$f.m" && mv "$out/$name.$f.m" "$out/$name.$f"; done
}
root=$PWD
cp -r profiles examples workloads tests/data "$work/"
cp tests/data/synergy-model-zoo.json "$work/zoo.json"
for c in "" measure profile predict simulate plot run import-zoo dataset workload trace slurm \
  "profile refine" "profile replay" "dataset gen" "dataset rate" "trace import" "trace cluster" "slurm advisor"; do
  # shellcheck disable=SC2086
  snap $c --help
done
snap predict profiles/image.json --cpus 1 --mem 0.3
snap predict profiles/image.json --cpus 1 --mem 0.3 --json
snap predict profiles/audio.json --cpus 3 --mem 2
snap predict profiles/nope.json --cpus 1 --mem 1
snap simulate
snap simulate --json
snap simulate --load 6 --seed 2 --policy fifo,srtf,las,ftf --mechanism proportional,greedy,tune --json
snap simulate --policy las --mechanism opt --load 3
snap simulate --out simout --load 4
snap plot simout --kind jct-cdf -o cdf.svg --json
snap plot profiles/image.json --kind heatmap -o heat.svg
snap plot profiles/image.json --kind cpu -o cpu.svg --json
snap run examples/jobs-mixed.toml --dry-run --gpus 2
snap run examples/jobs-mixed.toml --dry-run --gpus 2 --json
snap run examples/jobs-ddp.toml --dry-run --gpus 8
snap profile refine profiles/image.json --from data/formats/observation --out refined.json --json
snap profile refine profiles/audio.json --from data/formats/observation --include-disturbed --out refined-audio.json --json
snap import-zoo zoo.json --out-dir zoo-out
for f in philly:data/traces/philly.json helios:data/traces/helios.csv acme:data/traces/acme.csv \
  sacct:data/traces/jobs.sacct gavel:data/traces/gavel.trace tiresias:data/traces/tiresias.csv; do
  snap trace import --format "${f%%:*}" "${f#*:}"
done
snap trace import --format pai data/traces/pai_job_table.csv data/traces/pai_task_table.csv
snap trace cluster --format philly data/traces/cluster_machine_list
snap trace cluster --format pai data/traces/pai_machine_spec.csv
snap trace cluster --format sinfo data/traces/nodes.sinfo
snap slurm advisor profiles/zoo profiles/image.json --sinfo data/traces/partitions.sinfo --out advisor-out
snap slurm advisor profiles/zoo --sinfo data/traces/partitions.sinfo --out advisor-json --json
snap slurm advisor --check advisor-out/synergy-advisor.tsv --sinfo data/traces/partitions.sinfo
snap measure nope --cpus 1
snap profile nope
# Every file the commands wrote, masked the same way (PNG bytes aside).
(cd "$work" && find simout zoo-out advisor-out refined.json refined-audio.json cdf.svg heat.svg cpu.svg -type f 2>/dev/null | sort || true) |
  while read -r f; do mkdir -p "$out/files/$(dirname "$f")"; mask <"$work/$f" >"$out/files/$f"; done
echo "$n commands, $(find "$out/files" -type f | wc -l) files in $out"
