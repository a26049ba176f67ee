//! The unified (v2) hierarchy: finding our cgroup, checking the controllers delegated to it, and enabling
//! them for the domains below, which may first move this process into a leaf of its own. Both changes
//! are undone when the last backend of this process goes, so the cgroup is left as synergy found it
//! (docs/architecture.md §7).

use super::backend::{CgroupBackend, Parent};
use super::{io_err, unavailable, writable, V2_ROOT};
use crate::isolate::{IsolateError, IsolationKind};
use cgroups_rs::fs::hierarchies;
use std::fs;
use std::path::{Path, PathBuf};
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

/// The controllers cgroup `dir` enables for its children (its `cgroup.subtree_control`); none when it
/// cannot be read.
pub(super) fn subtree_controllers(dir: &Path) -> Vec<String> {
    fs::read_to_string(dir.join("cgroup.subtree_control"))
        .unwrap_or_default()
        .split_whitespace()
        .map(str::to_string)
        .collect()
}

/// The name of this process's supervisor leaf.
fn own_leaf_name() -> String {
    format!("synergy-supervisor-{}", std::process::id())
}

/// What this process changed in the cgroup its domains are made under, so that it can be undone: the
/// kernel refuses new processes in a cgroup with controllers enabled for its children, so a cgroup left
/// prepared could not be used again (seen on a cgroup v2 GPU machine: the next `echo $$ >
/// cgroup.procs` there failed).
#[derive(Debug)]
struct Prepared {
    /// Live backends of this process that rely on the preparation.
    users: usize,
    /// The cgroup domains are made under.
    parent: PathBuf,
    /// The controllers of its `cgroup.subtree_control` before this process enabled any: those on at
    /// the end that are not among them were enabled by this process (by its own preparation, or by
    /// cgroups-rs, which enables every controller the parent offers when it makes a domain).
    before: Vec<String>,
    /// The leaf this process moved into, when it had to.
    leaf: Option<PathBuf>,
}

/// The preparation shared by every backend of this process: one parent, prepared once and undone once.
static PREPARED: Mutex<Option<Prepared>> = Mutex::new(None);

impl Prepared {
    /// Puts the parent back as it was before: disables the controllers enabled since, moves
    /// process `pid` back from its leaf and removes the leaf. Left alone when controllers were enabled
    /// and any other cgroup is below the parent (another run's domain or leaf still needs them). Best
    /// effort: this runs while the process ends, where a failure has no one to be reported to.
    fn undo(&self, pid: u32) {
        let ours: Vec<String> = subtree_controllers(&self.parent)
            .into_iter()
            .filter(|c| !self.before.contains(c))
            .map(|c| format!("-{c}"))
            .collect();
        if !ours.is_empty() {
            let others = fs::read_dir(&self.parent)
                .map(|entries| {
                    entries.flatten().any(|e| {
                        e.file_type().is_ok_and(|t| t.is_dir())
                            && self.leaf.as_deref() != Some(e.path().as_path())
                    })
                })
                .unwrap_or(true);
            if others {
                return;
            }
            if fs::write(self.parent.join("cgroup.subtree_control"), ours.join(" ")).is_err() {
                return;
            }
        }
        if let Some(leaf) = &self.leaf {
            if fs::write(self.parent.join("cgroup.procs"), pid.to_string()).is_ok() {
                let _ = fs::remove_dir(leaf);
            }
        }
    }
}

impl Drop for CgroupBackend {
    fn drop(&mut self) {
        if !matches!(self.parent, Parent::V2 { .. }) {
            return;
        }
        let ready = self.v2_ready.get_mut().unwrap_or_else(|p| p.into_inner());
        if !*ready {
            return;
        }
        let mut prepared = PREPARED.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(p) = prepared.as_mut() {
            p.users -= 1;
            if p.users == 0 {
                if let Some(p) = prepared.take() {
                    p.undo(std::process::id());
                }
            }
        }
    }
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
        let mut relative = own_v2_path().map_err(|r| unavailable(kind, r))?;
        // Another backend of this process may have moved it into its leaf: domains go beside it.
        if let Some(parent) = relative.strip_suffix(&format!("/{}", own_leaf_name())) {
            relative = parent.to_string();
        }
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
        let mut prepared = PREPARED.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(p) = prepared.as_mut() {
            p.users += 1;
            *ready = true;
            return Ok(());
        }
        let dir = Path::new(V2_ROOT).join(relative);
        let subtree = dir.join("cgroup.subtree_control");
        let wanted: Vec<&str> = ["cpu", "memory", "cpuset", "io"]
            .into_iter()
            .filter(|c| controllers.iter().any(|have| have == c))
            .collect();
        let missing = |on: &[String]| -> Vec<&str> {
            wanted
                .iter()
                .copied()
                .filter(|c| !on.iter().any(|x| x == c))
                .collect()
        };
        let enable = |m: &[&str]| {
            let line: Vec<String> = m.iter().map(|c| format!("+{c}")).collect();
            fs::write(&subtree, line.join(" "))
        };
        let before = subtree_controllers(&dir);
        let todo = missing(&before);
        let mut done = Prepared {
            users: 1,
            parent: dir.clone(),
            before,
            leaf: None,
        };
        if !todo.is_empty() {
            if let Err(e) = enable(&todo) {
                if e.raw_os_error() != Some(libc::EBUSY) || relative.is_empty() {
                    return Err(io_err(
                        format!("enabling {todo:?} in {}", subtree.display()),
                        e,
                    ));
                }
                let leaf = dir.join(own_leaf_name());
                fs::create_dir_all(&leaf)
                    .map_err(|e| io_err(format!("creating {}", leaf.display()), e))?;
                done.leaf = Some(leaf.clone());
                fs::write(leaf.join("cgroup.procs"), std::process::id().to_string()).map_err(
                    |e| {
                        let _ = fs::remove_dir(&leaf);
                        io_err(format!("moving this process into {}", leaf.display()), e)
                    },
                )?;
                if let Err(e) = enable(&todo) {
                    done.undo(std::process::id());
                    return Err(unavailable(
                        IsolationKind::CgroupV2,
                        format!(
                            "cannot enable {todo:?} under {}: other processes share that cgroup \
                             (cgroup v2 allows no processes in a cgroup with controlled children); \
                             start synergy in a cgroup of its own, e.g. with \
                             `systemd-run --scope -p Delegate=yes` ({e})",
                            dir.display()
                        ),
                    ));
                }
            }
            let still = missing(&subtree_controllers(&dir));
            if still.iter().any(|c| *c == "cpu" || *c == "memory") {
                done.undo(std::process::id());
                return Err(unavailable(
                    IsolationKind::CgroupV2,
                    format!("{} did not accept {still:?}", subtree.display()),
                ));
            }
        }
        *prepared = Some(done);
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

    /// A parent as the kernel shows it (plain files here: the kernel's own behaviour is checked on a
    /// cgroup v2 machine, profiles/README.md), with our leaf and the controllers we enabled.
    fn prepared_parent(others: &[&str]) -> (tempfile::TempDir, Prepared) {
        let dir = tempfile::tempdir().unwrap();
        fs::write(
            dir.path().join("cgroup.subtree_control"),
            "cpu memory pids\n",
        )
        .unwrap();
        fs::write(dir.path().join("cgroup.procs"), "").unwrap();
        let leaf = dir.path().join("synergy-supervisor-42");
        fs::create_dir(&leaf).unwrap();
        for o in others {
            fs::create_dir(dir.path().join(o)).unwrap();
        }
        let p = Prepared {
            users: 0,
            parent: dir.path().to_path_buf(),
            before: vec!["memory".into()],
            leaf: Some(leaf),
        };
        (dir, p)
    }

    #[test]
    fn undo_disables_what_we_enabled_and_moves_back_out_of_the_leaf() {
        let (dir, p) = prepared_parent(&[]);
        p.undo(42);
        let read = |f: &str| fs::read_to_string(dir.path().join(f)).unwrap();
        assert_eq!(read("cgroup.subtree_control"), "-cpu -pids");
        assert_eq!(read("cgroup.procs"), "42");
        assert!(!dir.path().join("synergy-supervisor-42").exists());
    }

    #[test]
    fn undo_leaves_a_parent_another_run_still_uses() {
        let (dir, p) = prepared_parent(&["synergy-7-1"]);
        p.undo(42);
        let read = |f: &str| fs::read_to_string(dir.path().join(f)).unwrap();
        assert_eq!(read("cgroup.subtree_control"), "cpu memory pids\n");
        assert_eq!(read("cgroup.procs"), "");
        assert!(dir.path().join("synergy-supervisor-42").exists());
    }
}
