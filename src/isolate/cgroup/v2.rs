//! The unified (v2) hierarchy: finding our cgroup, checking the controllers delegated to it, and enabling
//! them for the domains below, which may first move this process into a leaf of its own.

use super::backend::{CgroupBackend, Parent};
use super::{io_err, unavailable, writable, V2_ROOT};
use crate::isolate::{IsolateError, IsolationKind};
use cgroups_rs::fs::hierarchies;
use std::fs;
use std::path::Path;
use std::sync::Mutex;

/// Our cgroup2 path from the `0::` line of `/proc/self/cgroup`.
pub(super) fn own_v2_path() -> Result<String, String> {
    let text = fs::read_to_string("/proc/self/cgroup")
        .map_err(|e| format!("reading /proc/self/cgroup: {e}"))?;
    text.lines()
        .find_map(|l| l.strip_prefix("0::"))
        .map(|p| p.trim().trim_start_matches('/').to_string())
        .ok_or_else(|| "/proc/self/cgroup has no cgroup2 (0::) entry".to_string())
}

impl CgroupBackend {
    /// The v2 backend, or why this host cannot give one.
    pub(super) fn new_v2() -> Result<Self, IsolateError> {
        let kind = IsolationKind::CgroupV2;
        if !hierarchies::is_cgroup2_unified_mode() {
            let why = if Path::new("/sys/fs/cgroup/unified/cgroup.controllers").exists() {
                "/sys/fs/cgroup is a v1/hybrid layout; its cgroup2 mount (/sys/fs/cgroup/unified) \
                 carries no controllers"
            } else {
                "/sys/fs/cgroup is not a cgroup2 mount"
            };
            return Err(unavailable(kind, why));
        }
        let relative = own_v2_path().map_err(|r| unavailable(kind, r))?;
        let dir = Path::new(V2_ROOT).join(&relative);
        let controllers: Vec<String> = fs::read_to_string(dir.join("cgroup.controllers"))
            .map_err(|e| {
                unavailable(
                    kind,
                    format!("reading {}/cgroup.controllers: {e}", dir.display()),
                )
            })?
            .split_whitespace()
            .map(str::to_string)
            .collect();
        for needed in ["cpu", "memory"] {
            if !controllers.iter().any(|c| c == needed) {
                return Err(unavailable(
                    kind,
                    format!(
                        "the `{needed}` controller is not delegated to {} (it offers: {})",
                        dir.display(),
                        if controllers.is_empty() {
                            "none".to_string()
                        } else {
                            controllers.join(" ")
                        }
                    ),
                ));
            }
        }
        if !writable(&dir) || !writable(&dir.join("cgroup.subtree_control")) {
            return Err(unavailable(
                kind,
                format!("no permission to create cgroups in {}", dir.display()),
            ));
        }
        Ok(CgroupBackend {
            kind,
            parent: Parent::V2 {
                relative,
                controllers,
            },
            v2_ready: Mutex::new(false),
        })
    }

    /// v2: enables the controllers we need in the parent's `cgroup.subtree_control`. The kernel refuses
    /// that while the parent itself holds processes ("no internal processes"), so this process first moves
    /// into a leaf of its own (`synergy-supervisor-<pid>`) when it is the reason.
    pub(super) fn prepare_v2(&self) -> Result<(), IsolateError> {
        let Parent::V2 {
            relative,
            controllers,
        } = &self.parent
        else {
            return Ok(());
        };
        let mut ready = self.v2_ready.lock().unwrap_or_else(|p| p.into_inner());
        if *ready {
            return Ok(());
        }
        let dir = Path::new(V2_ROOT).join(relative);
        let subtree = dir.join("cgroup.subtree_control");
        let wanted: Vec<&str> = ["cpu", "memory", "cpuset", "io"]
            .into_iter()
            .filter(|c| controllers.iter().any(|have| have == c))
            .collect();
        let missing = || -> Vec<&str> {
            let on = fs::read_to_string(&subtree).unwrap_or_default();
            wanted
                .iter()
                .copied()
                .filter(|c| !on.split_whitespace().any(|x| x == *c))
                .collect()
        };
        let enable = |m: &[&str]| {
            let line: Vec<String> = m.iter().map(|c| format!("+{c}")).collect();
            fs::write(&subtree, line.join(" "))
        };
        let todo = missing();
        if !todo.is_empty() {
            if let Err(e) = enable(&todo) {
                if e.raw_os_error() != Some(libc::EBUSY) || relative.is_empty() {
                    return Err(io_err(
                        format!("enabling {todo:?} in {}", subtree.display()),
                        e,
                    ));
                }
                let leaf = dir.join(format!("synergy-supervisor-{}", std::process::id()));
                fs::create_dir_all(&leaf)
                    .map_err(|e| io_err(format!("creating {}", leaf.display()), e))?;
                fs::write(leaf.join("cgroup.procs"), std::process::id().to_string()).map_err(
                    |e| io_err(format!("moving this process into {}", leaf.display()), e),
                )?;
                enable(&todo).map_err(|e| {
                    unavailable(
                        IsolationKind::CgroupV2,
                        format!(
                            "cannot enable {todo:?} under {}: other processes share that cgroup \
                             (cgroup v2 allows no processes in a cgroup with controlled children); \
                             start synergy in a cgroup of its own, e.g. with \
                             `systemd-run --scope -p Delegate=yes` ({e})",
                            dir.display()
                        ),
                    )
                })?;
            }
            let still = missing();
            if still.iter().any(|c| *c == "cpu" || *c == "memory") {
                return Err(unavailable(
                    IsolationKind::CgroupV2,
                    format!("{} did not accept {still:?}", subtree.display()),
                ));
            }
        }
        *ready = true;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn v2_is_refused_with_a_reason_on_a_v1_host() {
        if hierarchies::is_cgroup2_unified_mode() {
            return;
        }
        let err = CgroupBackend::new(IsolationKind::CgroupV2)
            .err()
            .expect("no v2 on a hybrid host");
        assert!(err.to_string().contains("/sys/fs/cgroup"), "{err}");
    }
}
