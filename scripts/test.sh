#!/usr/bin/env bash
# The test command (README): makes this machine able to run every test, then runs them all.
#   - a real single-node Slurm (munge, slurmctld, slurmd, slurmdbd with MariaDB on 127.0.0.1) for
#     tests/it/slurm_client.rs, the Slurm backend's tests and the sacct round trip, and beside it a 2-node
#     cluster on this host for tests/it/slurm_nodes.rs: scripts/slurm-setup.sh --nodes 2, idempotent (about
#     35 s from nothing, under a second when up); tests/it/slurm_advisor.rs starts its own controller with the
#     submit-time advisor (scripts/slurm-advisor-ctld.sh), and installs the advisor for one running job on the
#     single-node cluster, whose job-submit plugin runs a pass-through script otherwise;
#   - the pinned PyTorch for tests/it/pytorch.rs (CPU execution is enough): scripts/install-pytorch.sh, a virtual
#     environment outside the clone, reused when present; it prints its interpreter;
#   - after the suite (when it ran whole, with no arguments), each way to install synergy from the suite's
#     release build (scripts/test-install.sh: cargo install, the Python wheel in a fresh virtual environment
#     running the probe, completions, man page; about 15 s), and the tests of real isolation again on a
#     cgroup v2 kernel in a small VM (scripts/test-cgroup2.sh, with scripts/cgroup2-vm.sh): this host is v1.
# Needs root (cgroups, apt-get, the daemons), as every test of real isolation does.
#
# usage: scripts/test.sh [CARGO TEST ARGS...]
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/slurm-setup.sh --nodes 2
SYNERGY_PYTHON="$(scripts/install-pytorch.sh)"
export SYNERGY_PYTHON

cargo test --release --workspace "$@"
if [[ $# -eq 0 ]]; then
  scripts/test-install.sh
  scripts/test-cgroup2.sh
fi
