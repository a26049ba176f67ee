#!/usr/bin/env bash
# The cgroup v2 suite: the tests of real isolation run again on a cgroup-v2-only kernel, in the VM of
# scripts/cgroup2-vm.sh (this host's hierarchy is v1, and no process can remount it). They are the cgroup
# backend's own tests (CPU quota, cpuset, memory limit with page cache, storage limit, freezer, live resize,
# reopen and reaping), the reaping of what a killed process left (`leftovers`), and tests/it/cgroup_v2.rs
# (synergy started from a shared cgroup takes one of its own, every limit read back from the cgroup's files,
# the host's cgroups left as found, also after kill -9), which are `#[ignore]`d on other hosts. Each checks
# the cgroup's files and the trials' telemetry, not throughput: the VM emulates its CPU, so its speed says
# nothing. Under CI=true a test that cannot run its real check fails rather than skips.
#
# usage: scripts/test-cgroup2.sh   (as root; scripts/test.sh runs it after cargo test)
set -euo pipefail
cd "$(dirname "$0")/.."

# The same test binaries `cargo test --release --workspace` built (no rebuild when it just ran).
bins="$(cargo test --release --workspace --no-run --message-format=json 2>/dev/null | python3 -c '
import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["profile"]["test"]:
        print(m["target"]["kind"][0], m["target"]["name"], m["executable"])
')"
# The cgroup backend's tests are the isolate crate's, the reaping's the measure crate's.
isolate="$(awk '$1 == "lib" && $2 == "synergy_isolate" { print $3 }' <<<"$bins")"
measure="$(awk '$1 == "lib" && $2 == "synergy_measure" { print $3 }' <<<"$bins")"
it="$(awk '$1 == "test" && $2 == "it" { print $3 }' <<<"$bins")"
[[ -x $isolate && -x $measure && -x $it ]] || { echo "test-cgroup2: test binaries not found in: $bins" >&2; exit 1; }

start=$SECONDS
scripts/cgroup2-vm.sh run --timeout 900 -- sh -c "
  set -e
  echo \"kernel \$(uname -r); cgroup2 controllers: \$(cat /sys/fs/cgroup/cgroup.controllers)\"
  '$isolate' --test-threads=1 --nocapture isolate::
  '$measure' --test-threads=1 --nocapture leftovers::
  '$it' --include-ignored --test-threads=1 --nocapture cgroup_v2:: --skip cgroup_v2::systemd::
"
# Again with systemd as PID 1, as servers run: synergy's delegated scope from the system manager.
scripts/cgroup2-vm.sh run --systemd --timeout 600 -- sh -c "
  set -e
  echo \"systemd \$(systemctl --version | head -n 1)\"
  '$it' --include-ignored --test-threads=1 --nocapture cgroup_v2::systemd::
"
echo "test-cgroup2: the cgroup v2 suite passed in $((SECONDS - start)) s (VM boot included)"
