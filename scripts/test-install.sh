#!/usr/bin/env bash
# Each way to install synergy (README, "Install"), from the release build already in CARGO_TARGET_DIR, so
# cargo only links: `cargo install --path .`; the Python wheel, built by maturin in binary mode, installed by
# pip into a fresh virtual environment and run from there (--version, recommend, and measure with the
# PyTorch probe on a generated dataset); the shell completions and the man page. Prints the wheel's size
# and each step's seconds.
#
# maturin is pinned and kept in a virtual environment outside the clone, reused when present.
#
# usage: SYNERGY_PYTHON=PYTHON_WITH_TORCH scripts/test-install.sh   (scripts/install-pytorch.sh prints one)
set -euo pipefail
cd "$(dirname "$0")/.."

MATURIN_VERSION=1.16.0
tools="${SYNERGY_MATURIN_VENV:-${HOME:-/root}/.cache/synergy/maturin-venv}"
python="${SYNERGY_PYTHON:?set SYNERGY_PYTHON to a python with torch (scripts/install-pytorch.sh prints one)}"

step_start=$(date +%s%N)
step() {
  local now
  now=$(date +%s%N)
  local ds=$(((now - step_start) / 100000000))
  echo "test-install: $1 in $((ds / 10)).$((ds % 10)) s"
  step_start=$now
}

if ! "$tools/bin/maturin" --version 2>/dev/null | grep -qx "maturin $MATURIN_VERSION"; then
  python3 -m venv "$tools"
  "$tools/bin/pip" install --quiet --disable-pip-version-check "maturin==$MATURIN_VERSION"
  step "installed maturin $MATURIN_VERSION"
fi

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

cargo install --quiet --path . --locked --root "$work/cargo"
"$work/cargo/bin/synergy" --version | grep -q '(commit '
step "cargo install --path ."

# Completions load into bash; the man page is roff with the subcommands in it.
bash -c "source <(\"$work/cargo/bin/synergy\" completions bash) && complete -p synergy" | grep -q _synergy
"$work/cargo/bin/synergy" man | grep -q '^\.TH synergy 1'
"$work/cargo/bin/synergy" man | grep -q 'recommend'
step "completions and man page"

"$tools/bin/maturin" build --release --out "$work/dist" >"$work/build.log" 2>&1 || {
  cat "$work/build.log" >&2
  exit 1
}
wheel="$(ls "$work"/dist/*.whl)"
step "built $(basename "$wheel"), $(stat -c %s "$wheel") bytes"

python3 -m venv "$work/venv"
"$work/venv/bin/pip" install --quiet --disable-pip-version-check "$wheel"
step "pip install into a fresh virtual environment"

# From the environment, as a user runs it: its bin on PATH.
export PATH="$work/venv/bin:$PATH"
[ "$(command -v synergy)" = "$work/venv/bin/synergy" ]
synergy --version | grep -q '(commit '
synergy recommend profiles/zoo/res18.json --server 8gpu,96cpu,1tb --format sbatch | grep -qx '#SBATCH --cpus-per-gpu=9'
synergy dataset gen --kind image --size 8MiB "$work/data/class0" >/dev/null
synergy measure --cpus 1 --warmup-seconds 0 --warmup-steps 1 --min-seconds 0 --max-seconds 120 --json \
  --probe pytorch -- "$python" workloads/pytorch/examples/plain_train.py --data "$work/data" \
  --batch-size 5 --steps 12 --workers 1 >"$work/measure.json"
python3 - "$work/measure.json" <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))
rate = m["throughput"]["samples_per_s"]
assert rate > 0, m
print(f"test-install: the probed script measured {rate:.1f} samples/s from the wheel's synergy")
PY
step "ran synergy from the environment (version, recommend, dataset gen, measure --probe pytorch)"
