//! The v1 hierarchies: finding our cgroup in each mounted controller's hierarchy, and checking that the
//! controllers a domain needs are mounted and that we may create cgroups in every hierarchy.

use super::backend::{CgroupBackend, Parent};
use super::paths::{v1_parent_dir, v1_relative_paths};
use super::{unavailable, writable};
use crate::format::trial::IsolationKind;
use crate::isolate::IsolateError;
use cgroups_rs::fs::hierarchies::{self, V1};
use cgroups_rs::fs::{Controllers, Hierarchy};
use std::sync::Mutex;

impl CgroupBackend {
    /// The v1 backend, or why this host cannot give one.
    pub(super) fn new_v1() -> Result<Self, IsolateError> {
        let kind = IsolationKind::CgroupV1;
        if hierarchies::is_cgroup2_unified_mode() {
            return Err(unavailable(
                kind,
                "this host mounts only the unified cgroup2 hierarchy at /sys/fs/cgroup",
            ));
        }
        let v1 = V1::new();
        for c in [
            Controllers::Cpu,
            Controllers::CpuAcct,
            Controllers::CpuSet,
            Controllers::Mem,
        ] {
            if v1.get_mount_point(c.clone()).is_none() {
                return Err(unavailable(
                    kind,
                    format!("the `{c}` controller is not mounted (no cgroup v1 mount lists it)"),
                ));
            }
        }
        let relative = v1_relative_paths(&v1).map_err(|r| unavailable(kind, r))?;
        // cgroups-rs creates the cgroup in every mounted hierarchy, so every one must be writable.
        for sub in v1.subsystems() {
            let dir = v1_parent_dir(sub.to_controller(), &relative, &sub.controller_name());
            if !writable(&dir) {
                return Err(unavailable(
                    kind,
                    format!(
                        "no permission to create cgroups in {} (run as root or delegate it)",
                        dir.display()
                    ),
                ));
            }
        }
        Ok(CgroupBackend {
            kind,
            parent: Parent::V1 { relative },
            v2_ready: Mutex::new(true),
        })
    }
}
