//! The v1 hierarchies: finding our cgroup in each mounted controller's hierarchy, and checking that the
//! controllers a domain needs are mounted and that we may create cgroups in every hierarchy.

use super::backend::{CgroupBackend, Parent};
use super::{unavailable, writable};
use crate::isolate::{IsolateError, IsolationKind};
use cgroups_rs::fs::cgroup::get_cgroups_relative_paths;
use cgroups_rs::fs::hierarchies::{self, V1};
use cgroups_rs::fs::{Controller, Controllers, Hierarchy};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Mutex;

/// Our v1 cgroup per mounted controller, relative to the hierarchy's mount (a container may mount a
/// hierarchy from a sub-directory, which `/proc/self/cgroup` includes and the mount point does not).
pub(super) fn v1_relative_paths(v1: &V1) -> Result<HashMap<String, String>, String> {
    let own =
        get_cgroups_relative_paths().map_err(|e| format!("reading /proc/self/cgroup: {e}"))?;
    let mut out = HashMap::new();
    for sub in v1.subsystems() {
        let name = sub.controller_name();
        let Some(path) = own.get(&name) else { continue };
        let root = sub.to_controller().base().to_string_lossy().into_owned();
        let rel = if root == "/" {
            path.clone()
        } else {
            path.strip_prefix(&root).unwrap_or(path).to_string()
        };
        out.insert(name, rel);
    }
    Ok(out)
}

/// The directory of a v1 controller's parent cgroup (ours) in its hierarchy.
pub(super) fn v1_parent_dir(
    ctl: &dyn Controller,
    relative: &HashMap<String, String>,
    name: &str,
) -> PathBuf {
    let rel = relative.get(name).map(String::as_str).unwrap_or("");
    ctl.path().join(rel.trim_start_matches('/'))
}

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
