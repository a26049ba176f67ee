#!/usr/bin/env bash
# Installs the pinned PyTorch the training scripts in workloads/pytorch/ need, into a virtual environment
# outside the repository, and prints that environment's python (use it as SYNERGY_PYTHON).
#
# Idempotent: when the environment already imports the pinned versions it does nothing. PyPI's Linux torch
# wheel is a CUDA build: it cannot even be imported without the CUDA runtime wheels it depends on (checked:
# `--no-deps` fails at `import torch` with "libcublasLt.so not found"), so the full dependency set is
# installed. It runs on CPU when no GPU is present.
#
# usage: scripts/install-pytorch.sh            (venv at $SYNERGY_TORCH_VENV, default ~/.cache/synergy/torch-venv)
set -euo pipefail

TORCH_VERSION=2.15.0
TORCHVISION_VERSION=0.29.2
NUMPY_VERSION=2.4.6
PILLOW_VERSION=13.0.0

venv="${SYNERGY_TORCH_VENV:-${HOME:-/root}/.cache/synergy/torch-venv}"
py="$venv/bin/python"

installed() {
  [ -x "$py" ] && "$py" - "$TORCH_VERSION" "$TORCHVISION_VERSION" <<'EOF' 2>/dev/null
import sys
import torch, torchvision
ok = torch.__version__.split("+")[0] == sys.argv[1] and torchvision.__version__.split("+")[0] == sys.argv[2]
sys.exit(0 if ok else 1)
EOF
}

if installed; then
  echo "$py"
  exit 0
fi

start=$(date +%s)
echo "installing torch $TORCH_VERSION and torchvision $TORCHVISION_VERSION into $venv (several GB; a few minutes)" >&2
mkdir -p "$(dirname "$venv")"
[ -x "$py" ] || python3 -m venv "$venv"
"$py" -m pip install --quiet --disable-pip-version-check \
  "torch==$TORCH_VERSION" "torchvision==$TORCHVISION_VERSION" \
  "numpy==$NUMPY_VERSION" "pillow==$PILLOW_VERSION" >&2
installed || { echo "torch was installed into $venv but does not import" >&2; exit 1; }
echo "installed in $(( $(date +%s) - start )) s" >&2
echo "$py"
