#!/usr/bin/env bash
# Profiles PyTorch resnet18 on a GPU machine: takes the release binary, generates the image dataset,
# profiles workloads/pytorch-resnet18.toml (CUDA, mixed precision) at several core counts with NVML
# telemetry in every trial, checks that telemetry is there, and writes the profile, its CSV and its plot
# (`synergy plot PROFILE --kind cpu`).
#
# usage: scripts/profile-gpu.sh [--bin PATH] [--cpus LIST] [--validate N] [--out FILE] [--allow-cpu]
#   --bin PATH     the synergy release binary (default: $CARGO_TARGET_DIR/release/synergy, built if absent)
#   --cpus LIST    CPU axis (default: 1,2,4,... up to this host's cores, and the host's cores)
#   --validate N   held-out validation points (default 3)
#   --out FILE     the profile (default: profiles/pytorch-resnet18-gpu.json)
#   --allow-cpu    a dry run without a GPU: the same steps on CPU with the 64 px spec
#                  (workloads/pytorch-resnet18-small.toml), output under a temporary directory unless --out
#                  is given, and GPU telemetry checked to be absent instead of present
#
# Needs root and cgroups (as every profile), and torch: $SYNERGY_PYTHON, else scripts/install-pytorch.sh
# (which needs PyPI; on a machine without network, point SYNERGY_PYTHON at an interpreter with torch).
set -euo pipefail
cd "$(dirname "$0")/.."

bin="" cpus="" validate=3 out="" allow_cpu=0
while [ $# -gt 0 ]; do
  case "$1" in
    --bin) bin="$2"; shift 2 ;;
    --cpus) cpus="$2"; shift 2 ;;
    --validate) validate="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    --allow-cpu) allow_cpu=1; shift ;;
    -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
    *) echo "profile-gpu.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done

gpus=0
if command -v nvidia-smi >/dev/null 2>&1; then
  gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ' || true)
fi
if [ "$gpus" -eq 0 ] && [ "$allow_cpu" -eq 0 ]; then
  echo "profile-gpu.sh: no GPU found (nvidia-smi lists none); this script profiles on a GPU." >&2
  echo "  For a dry run of the same steps on CPU, pass --allow-cpu." >&2
  exit 1
fi

if [ -z "$bin" ]; then
  bin="${CARGO_TARGET_DIR:-target}/release/synergy"
  [ -x "$bin" ] || cargo build --release --quiet
fi
[ -x "$bin" ] || { echo "profile-gpu.sh: $bin is not an executable" >&2; exit 1; }

if [ -z "${SYNERGY_PYTHON:-}" ]; then
  SYNERGY_PYTHON="$(scripts/install-pytorch.sh)"
fi
export SYNERGY_PYTHON
"$SYNERGY_PYTHON" -c 'import torch, torchvision' || {
  echo "profile-gpu.sh: $SYNERGY_PYTHON cannot import torch; run scripts/install-pytorch.sh" >&2; exit 1; }

if [ "$gpus" -gt 0 ]; then
  spec=workloads/pytorch-resnet18.toml
  "$SYNERGY_PYTHON" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' || {
    echo "profile-gpu.sh: nvidia-smi sees $gpus GPU(s) but torch.cuda.is_available() is false" >&2; exit 1; }
  export CUDA_VISIBLE_DEVICES="${CUDA_VISIBLE_DEVICES:-0}"
  out="${out:-profiles/pytorch-resnet18-gpu.json}"
else
  spec=workloads/pytorch-resnet18-small.toml
  echo "profile-gpu.sh: no GPU; dry run on CPU with $spec" >&2
  [ -n "$out" ] || { tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT; out="$tmp/pytorch-resnet18-cpu-dry.json"; }
fi

cores=$(nproc)
if [ -z "$cpus" ]; then
  cpus="" c=1
  while [ "$c" -lt "$cores" ]; do cpus="$cpus$c,"; c=$((c * 2)); done
  cpus="$cpus$cores"
fi

# The dataset, where the spec looks for it ({data_dir}/image-256m).
export SYNERGY_DATA_DIR="${SYNERGY_DATA_DIR:-$HOME/.cache/synergy/datasets}"
if [ ! -d "$SYNERGY_DATA_DIR/image-256m" ]; then
  "$bin" dataset gen --kind image --size 256MiB --seed 1 "$SYNERGY_DATA_DIR/image-256m"
fi

echo "profile-gpu.sh: profiling $spec at cores $cpus into $out" >&2
"$bin" profile "$spec" --cpus "$cpus" --validate "$validate" --out "$out"

# Every trial carries NVML telemetry on a GPU, and none without one.
"$SYNERGY_PYTHON" - "$out" "$gpus" <<'EOF'
import json, sys
p = json.load(open(sys.argv[1]))
gpu_host = int(sys.argv[2]) > 0
trials = [t["result"] for t in p["trials"]]
with_gpu = [t for t in trials if t["telemetry"].get("gpu")]
if gpu_host and len(with_gpu) != len(trials):
    sys.exit(f"{len(trials) - len(with_gpu)} of {len(trials)} trials lack GPU telemetry")
if not gpu_host and with_gpu:
    sys.exit("GPU telemetry on a host without a GPU")
for t in trials:
    g = t["telemetry"].get("gpu")
    a = t["allocation"]
    line = f"  {a['cpus']:>5} cores{' synthetic' if a['synthetic'] else ''}: {t['throughput']['samples_per_s']:8.1f} samples/s"
    if g:
        line += f", GPU {g['utilization_pct']:.0f}% busy, {g['memory_used_peak_bytes'] / 2**30:.1f} GiB, {g['sm_clock_mhz']:.0f} MHz SM"
    print(line)
print(f"host GPU: {p['host'].get('gpu')}")
EOF

plot="${out%.json}-cpu.png"
"$bin" plot "$out" --kind cpu -o "$plot"
echo "profile-gpu.sh: wrote $out, ${out%.json}.csv and $plot" >&2
