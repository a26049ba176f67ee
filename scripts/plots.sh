#!/usr/bin/env bash
# The README's pictures (docs/img/), drawn by `synergy plot` from files in this repository: one chart of each
# profile kind from the shipped profiles, and scheduling charts from a simulation this script runs itself
# (paper-default cluster and workload, FIFO, three mechanisms, four loads, seed 42, the published run; a few seconds).
# The same inputs give byte-identical files, so a rerun changes nothing unless the profiles or the simulator did.
#
# usage: scripts/plots.sh [OUT_DIR (default docs/img)]
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-docs/img}"
mkdir -p "$out"
cargo build --release --quiet
synergy=target/release/synergy
[ -n "${CARGO_TARGET_DIR:-}" ] && synergy="$CARGO_TARGET_DIR/release/synergy"

"$synergy" plot profiles/image.json --kind cpu -o "$out/image-cpu.png"
"$synergy" plot profiles/audio.json --kind mem -o "$out/audio-mem.png"
"$synergy" plot profiles/zoo/res18.json profiles/zoo/transformer.json --kind heatmap -o "$out/zoo-heatmap.png"
"$synergy" plot profiles/*.json --kind fit -o "$out/fit.png"
"$synergy" plot profiles/zoo/*.json --kind cpu -o "$out/zoo-cpu.png"
"$synergy" plot profiles/h200/pytorch-resnet18.json --kind cpu -o "$out/pytorch-resnet18-h200-cpu.png"

sim=$(mktemp -d)
trap 'rm -rf "$sim"' EXIT
"$synergy" simulate --profiles profiles/zoo --policy fifo --mechanism proportional,greedy,tune \
    --load 3,5,7,9 --seed 42 --out "$sim/sweep" >/dev/null
"$synergy" plot "$sim/sweep" --kind jct-vs-load -o "$out/jct-vs-load.png"
"$synergy" plot "$sim/sweep/fifo-proportional-load9-seed42" "$sim/sweep/fifo-greedy-load9-seed42" \
    "$sim/sweep/fifo-tune-load9-seed42" --kind jct-cdf -o "$out/jct-cdf.png"
"$synergy" plot "$sim/sweep/fifo-proportional-load9-seed42" "$sim/sweep/fifo-tune-load9-seed42" \
    --kind utilization -o "$out/utilization.png"
ls -l "$out"
