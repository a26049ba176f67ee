//! Where synergy's cgroups live: our own cgroup in each v1 controller's hierarchy and in the v2
//! hierarchy, and what a v2 cgroup enables for its children. The backends, the delegation and the
//! clean-up of stale cgroups all start from here.

use cgroups_rs::fs::cgroup::get_cgroups_relative_paths;
use cgroups_rs::fs::hierarchies::V1;
use cgroups_rs::fs::{Controller, Hierarchy};
use std::collections::HashMap;
use std::fs;
use std::path::{Path, PathBuf};

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

/// Our cgroup2 path from the `0::` line of `/proc/self/cgroup`.
pub(super) fn own_v2_path() -> Result<String, String> {
    let text = fs::read_to_string("/proc/self/cgroup")
        .map_err(|e| format!("reading /proc/self/cgroup: {e}"))?;
    text.lines()
        .find_map(|l| l.strip_prefix("0::"))
        .map(|p| p.trim().trim_start_matches('/').to_string())
        .ok_or_else(|| "/proc/self/cgroup has no cgroup2 (0::) entry".to_string())
}

/// The controllers cgroup `dir` enables for its children (its `cgroup.subtree_control`); none when it
/// cannot be read.
pub(super) fn subtree_controllers(dir: &Path) -> Vec<String> {
    fs::read_to_string(dir.join("cgroup.subtree_control"))
        .unwrap_or_default()
        .split_whitespace()
        .map(str::to_string)
        .collect()
}

/// Synergy's own cgroup directly under the hierarchy's root, taken (as root) when the cgroup synergy
/// was started in is shared with other processes: cgroup v2 lets controllers be enabled only below a
/// cgroup that holds no process, so domains cannot go under a shared one. Container runtimes without
/// systemd do the same. Removed again when the last run using it ends.
pub(super) const ROOT_HOME: &str = "synergy";
