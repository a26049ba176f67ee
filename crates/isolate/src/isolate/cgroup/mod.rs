//! cgroup v1 and v2 domains through cgroups-rs: cpuset and CFS quota, memory limit, blkio/io.max read limit.
//!
//! Every domain is created *under* the cgroups this process already sits in (one per v1 hierarchy, or one
//! v2 directory), so a supervisor started inside a limited or delegated cgroup never escapes it and the
//! domain's usage is charged to the supervisor's own budget too.
//!
//! Lifecycle: [`CgroupBackend::create_domain`] makes the directories, writes the limits and pre-opens every
//! `cgroup.procs`; the launcher's `pre_exec` writes `0` into those descriptors so the workload is inside
//! before its first instruction. [`CgroupDomain::destroy`](super::Domain::destroy) (also run on drop)
//! freezes, kills, waits for the tasks to go and removes the directories. [`cleanup_stale`] removes what a
//! crashed run left behind.
//!
//! Where each part lives: `backend` finds the cgroups this process sits in and creates or reopens domains
//! under them, with the checks and set-up particular to one hierarchy in `v1` and `v2` (and, on v2, a
//! cgroup of synergy's own where the one it started in is shared: `delegate` asks systemd for one); `domain` is one
//! workload's cgroup (limits, resize, freeze, kill, remove), `stats` reads its counters, `stale` holds
//! [`cleanup_stale`], and `device` names the disk a read limit applies to. Every cgroup goes on
//! success, error and interruption (docs/architecture.md §7).

pub mod backend;
mod delegate;
mod device;
mod domain;
mod paths;
mod stale;
mod stats;
// Compiled always, not behind a feature: a feature only the tests turn on would give the test build
// and the installed binary different builds of every crate above (README, "Development").
#[doc(hidden)]
pub mod testing;
#[cfg(test)]
mod tests;
mod v1;
mod v2;

pub use backend::CgroupBackend;
pub use device::block_device_of;
pub use domain::CgroupDomain;
pub use stale::{child_cgroup_names, cleanup_stale};
pub use v2::{release_root_home, stop_dead_scopes, way_to_delegate};

use super::{IsolateError, IsolationKind};
use std::fs;
use std::path::Path;

/// The fixed cgroup2 mount point cgroups-rs works with.
const V2_ROOT: &str = "/sys/fs/cgroup";

fn unavailable(kind: IsolationKind, reason: impl Into<String>) -> IsolateError {
    IsolateError::Unavailable {
        backend: kind,
        reason: reason.into(),
    }
}

fn io_err(context: impl Into<String>, source: std::io::Error) -> IsolateError {
    IsolateError::Io {
        context: context.into(),
        source,
    }
}

fn cg_err(context: impl Into<String>, e: cgroups_rs::fs::error::Error) -> IsolateError {
    IsolateError::Cgroup {
        context: context.into(),
        message: e.to_string(),
    }
}

fn writable(dir: &Path) -> bool {
    nix::unistd::access(dir, nix::unistd::AccessFlags::W_OK).is_ok()
}

fn read_trim(path: &Path) -> Option<String> {
    fs::read_to_string(path).ok().map(|s| s.trim().to_string())
}
