//! The unified (v2) hierarchy: finding our cgroup, checking the controllers delegated to it, and enabling
//! them for the domains below, which may first move this process into a leaf of its own. Both changes
//! are undone when the last backend of this process goes, so the cgroup is left as synergy found it
//! (docs/architecture.md §7).

use super::backend::{CgroupBackend, Parent};
use super::paths::{own_v2_path, subtree_controllers, ROOT_HOME};
use super::{io_err, unavailable, writable, V2_ROOT};
use crate::format::trial::IsolationKind;
use crate::isolate::IsolateError;
use cgroups_rs::fs::hierarchies;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// The name of this process's supervisor leaf.
fn own_leaf_name() -> String {
    format!("synergy-supervisor-{}", std::process::id())
}

/// The controllers a domain may use, in the order they are enabled.
const WANTED: [&str; 4] = ["cpu", "memory", "cpuset", "io"];

/// The controllers of `dir` (its `cgroup.controllers`), or why they cannot be read.
fn offered_controllers(dir: &Path) -> Result<Vec<String>, String> {
    Ok(fs::read_to_string(dir.join("cgroup.controllers"))
        .map_err(|e| format!("reading {}/cgroup.controllers: {e}", dir.display()))?
        .split_whitespace()
        .map(str::to_string)
        .collect())
}

/// Whether domains can be made under cgroup `relative`: it offers the cpu and memory controllers, this
/// process may write there, and no other process shares it (unless the controllers are enabled for its
/// children already, which the kernel allows only where no process sits, or it is the root, which is
/// exempt). Its controllers, or why not.
fn usable(relative: &str) -> Result<Vec<String>, String> {
    let dir = Path::new(V2_ROOT).join(relative);
    let controllers = offered_controllers(&dir)?;
    for needed in ["cpu", "memory"] {
        if !controllers.iter().any(|c| c == needed) {
            return Err(format!(
                "the `{needed}` controller is not delegated to {} (it offers: {})",
                dir.display(),
                if controllers.is_empty() {
                    "none".to_string()
                } else {
                    controllers.join(" ")
                }
            ));
        }
    }
    if !writable(&dir) || !writable(&dir.join("cgroup.subtree_control")) {
        return Err(format!(
            "no permission to create cgroups in {}",
            dir.display()
        ));
    }
    let enabled = subtree_controllers(&dir);
    let ready = ["cpu", "memory"]
        .iter()
        .all(|c| enabled.iter().any(|e| e == c));
    if !relative.is_empty() && !ready {
        let me = std::process::id().to_string();
        let others: Vec<String> = fs::read_to_string(dir.join("cgroup.procs"))
            .unwrap_or_default()
            .split_whitespace()
            .filter(|p| *p != me)
            .map(str::to_string)
            .collect();
        if !others.is_empty() {
            return Err(format!(
                "{} other process(es) share {} (pids {}), and cgroup v2 enables controllers only \
                 below a cgroup that holds no process",
                others.len(),
                dir.display(),
                others.iter().take(5).cloned().collect::<Vec<_>>().join(" ")
            ));
        }
    }
    Ok(controllers)
}

/// Whether this process runs as root.
fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// Stops the delegated scopes of dead synergy processes (see `delegate::stop_dead_scopes`), on a v2
/// host under systemd: for root the system manager's, for a user their own manager's. Each with its
/// pid and, where it could not be stopped, why.
pub fn stop_dead_scopes(dead: &dyn Fn(i32) -> bool) -> Vec<(String, i32, Option<String>)> {
    if !(hierarchies::is_cgroup2_unified_mode() && under_systemd()) {
        return Vec::new();
    }
    super::delegate::stop_dead_scopes(!is_root(), dead)
}

/// Whether systemd manages this host's cgroups (its documented test: `/run/systemd/system` exists).
fn under_systemd() -> bool {
    Path::new("/run/systemd/system").is_dir()
}

/// The one command that gives synergy a cgroup of its own on this host, for messages.
pub fn way_to_delegate() -> String {
    if under_systemd() && !is_root() {
        "start synergy in a delegated scope: `systemd-run --user --scope -p Delegate=yes synergy ...` \
         (or run it as root)"
            .to_string()
    } else if under_systemd() {
        "start synergy in a delegated scope: `systemd-run --scope -p Delegate=yes synergy ...`"
            .to_string()
    } else if !is_root() {
        "run synergy as root (it then makes a cgroup of its own under /sys/fs/cgroup)".to_string()
    } else if !hierarchies::is_cgroup2_unified_mode() && !Path::new("/sys/fs/cgroup/cpu").exists() {
        "mount the cgroup v2 hierarchy: `mount -t cgroup2 none /sys/fs/cgroup`".to_string()
    } else {
        "give synergy the cpu and memory controllers (in /sys/fs/cgroup/cgroup.subtree_control on v2)"
            .to_string()
    }
}

/// Where the root's controllers are recorded as they were before synergy first enabled one there, so
/// that the last run out (or the next start, after a kill -9) can put them back.
fn root_record() -> PathBuf {
    let run = Path::new("/run");
    if run.is_dir() {
        run.join("synergy-cgroup2-root")
    } else {
        std::env::temp_dir().join("synergy-cgroup2-root")
    }
}

/// Enables the `wanted` controllers for the root's children, recording what was on before (once, for
/// the first run under the root: cgroups-rs may enable more on the way down when it makes a domain).
fn enable_at_root(wanted: &[&str]) -> Result<(), IsolateError> {
    let root = Path::new(V2_ROOT);
    let before = subtree_controllers(root);
    let record = root_record();
    if !record.exists() {
        fs::write(&record, before.join(" "))
            .map_err(|e| io_err(format!("writing {}", record.display()), e))?;
    }
    let todo: Vec<String> = wanted
        .iter()
        .filter(|c| !before.iter().any(|b| b == *c))
        .map(|c| format!("+{c}"))
        .collect();
    if todo.is_empty() {
        return Ok(());
    }
    let file = root.join("cgroup.subtree_control");
    fs::write(&file, todo.join(" "))
        .map_err(|e| io_err(format!("enabling {todo:?} in {}", file.display()), e))
}

/// Removes synergy's own cgroup under the root when no run uses it any more (no child cgroup, no
/// process), and switches off at the root what synergy switched on there. Best effort: this runs as a
/// process ends, or while reaping, where nobody could act on a failure.
pub fn release_root_home() {
    let home = Path::new(V2_ROOT).join(ROOT_HOME);
    if home.exists() {
        let busy = fs::read_dir(&home)
            .map(|entries| {
                entries
                    .flatten()
                    .any(|e| e.file_type().is_ok_and(|t| t.is_dir()))
            })
            .unwrap_or(true)
            || fs::read_to_string(home.join("cgroup.procs"))
                .map(|t| !t.trim().is_empty())
                .unwrap_or(true);
        if busy || fs::remove_dir(&home).is_err() {
            return;
        }
    }
    let record = root_record();
    let Ok(before) = fs::read_to_string(&record) else {
        return;
    };
    let before: Vec<&str> = before.split_whitespace().collect();
    // Every controller on now that was off before: synergy's own, and those cgroups-rs enabled on the
    // way down when it made a domain. One at a time, so one the kernel keeps (a child of the root
    // enables it for its own children) does not keep the others.
    let mut all_off = true;
    for c in subtree_controllers(Path::new(V2_ROOT)) {
        if !before.contains(&c.as_str()) {
            all_off &= fs::write(
                Path::new(V2_ROOT).join("cgroup.subtree_control"),
                format!("-{c}"),
            )
            .is_ok();
        }
    }
    if all_off {
        let _ = fs::remove_file(&record);
    }
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
    /// Where this process sat before: the parent itself, or (for [`ROOT_HOME`]) the shared cgroup it
    /// was started in, where it goes back.
    origin: PathBuf,
    /// Whether the parent is [`ROOT_HOME`], removed when no run uses it.
    root_home: bool,
}

/// The preparation shared by every backend of this process: one parent, prepared once and undone once.
static PREPARED: Mutex<Option<Prepared>> = Mutex::new(None);

impl Prepared {
    /// Puts the parent back as it was before: disables the controllers enabled since, moves
    /// process `pid` back from its leaf and removes the leaf (and synergy's own cgroup under the root,
    /// when that was the parent and no other run uses it). Left alone when controllers were enabled
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
            if fs::write(self.origin.join("cgroup.procs"), pid.to_string()).is_ok() {
                let _ = fs::remove_dir(leaf);
            }
        }
        if self.root_home {
            release_root_home();
        }
    }

    /// Moves this process into a leaf of its own under the parent.
    fn move_into_leaf(&mut self) -> Result<(), IsolateError> {
        let leaf = self.parent.join(own_leaf_name());
        fs::create_dir_all(&leaf).map_err(|e| io_err(format!("creating {}", leaf.display()), e))?;
        self.leaf = Some(leaf.clone());
        fs::write(leaf.join("cgroup.procs"), std::process::id().to_string()).map_err(|e| {
            let _ = fs::remove_dir(&leaf);
            self.leaf = None;
            io_err(format!("moving this process into {}", leaf.display()), e)
        })
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
    /// The v2 backend, or why this host cannot give one. Domains go under the cgroup this process was
    /// started in where it may; otherwise it gets a cgroup of its own: a transient systemd scope with
    /// delegation where systemd runs, else (as root) [`ROOT_HOME`] under the hierarchy's root.
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
        let backend =
            |relative: String, controllers: Vec<String>, origin: Option<String>| CgroupBackend {
                kind,
                parent: Parent::V2 {
                    relative,
                    controllers,
                    origin,
                },
                v2_ready: Mutex::new(false),
            };
        // Another backend of this process has prepared a parent already: domains go there too.
        if let Some(p) = PREPARED.lock().unwrap_or_else(|p| p.into_inner()).as_ref() {
            let rel = |d: &Path| {
                d.strip_prefix(V2_ROOT)
                    .map(|r| r.to_string_lossy().into_owned())
                    .unwrap_or_default()
            };
            let controllers = offered_controllers(&p.parent).unwrap_or_default();
            let origin = p.root_home.then(|| rel(&p.origin));
            return Ok(backend(rel(&p.parent), controllers, origin));
        }
        let mut relative = own_v2_path().map_err(|r| unavailable(kind, r))?;
        if let Some(parent) = relative.strip_suffix(&format!("/{}", own_leaf_name())) {
            relative = parent.to_string();
        }
        let own_reason = match usable(&relative) {
            Ok(controllers) => return Ok(backend(relative, controllers, None)),
            Err(reason) => reason,
        };
        let mut reasons = vec![own_reason];
        if under_systemd() {
            match super::delegate::start_scope(!is_root()) {
                Ok(()) => {
                    let scope = own_v2_path().map_err(|r| unavailable(kind, r))?;
                    match usable(&scope) {
                        Ok(controllers) => return Ok(backend(scope, controllers, None)),
                        Err(r) => reasons.push(format!("its delegated scope: {r}")),
                    }
                }
                Err(r) => reasons.push(r),
            }
        }
        if is_root() {
            let root = Path::new(V2_ROOT);
            match offered_controllers(root) {
                Ok(controllers)
                    if ["cpu", "memory"]
                        .iter()
                        .all(|c| controllers.iter().any(|x| x == c)) =>
                {
                    return Ok(backend(ROOT_HOME.to_string(), controllers, Some(relative)));
                }
                Ok(controllers) => reasons.push(format!(
                    "the hierarchy's root offers only: {}",
                    controllers.join(" ")
                )),
                Err(r) => reasons.push(r),
            }
        }
        Err(unavailable(
            kind,
            format!("{}; {}", reasons.join("; "), way_to_delegate()),
        ))
    }

    /// v2: enables the controllers we need in the parent's `cgroup.subtree_control`. The kernel refuses
    /// that while the parent itself holds processes ("no internal processes"), so this process first moves
    /// into a leaf of its own (`synergy-supervisor-<pid>`) when it is the reason, or always when the
    /// parent is [`ROOT_HOME`] (after enabling the controllers at the root).
    pub(super) fn prepare_v2(&self) -> Result<(), IsolateError> {
        let Parent::V2 {
            relative,
            controllers,
            origin,
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
        let wanted: Vec<&str> = WANTED
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
        let mut done = Prepared {
            users: 1,
            parent: dir.clone(),
            before: Vec::new(),
            leaf: None,
            origin: Path::new(V2_ROOT).join(origin.as_deref().unwrap_or(relative)),
            root_home: origin.is_some(),
        };
        if done.root_home {
            enable_at_root(&wanted)?;
            if let Err(e) = done.move_into_leaf() {
                release_root_home();
                return Err(e);
            }
        }
        done.before = subtree_controllers(&dir);
        let todo = missing(&done.before);
        if !todo.is_empty() {
            if let Err(e) = enable(&todo) {
                if e.raw_os_error() != Some(libc::EBUSY) || relative.is_empty() || done.root_home {
                    done.undo(std::process::id());
                    return Err(io_err(
                        format!("enabling {todo:?} in {}", subtree.display()),
                        e,
                    ));
                }
                done.move_into_leaf()?;
                if let Err(e) = enable(&todo) {
                    done.undo(std::process::id());
                    return Err(unavailable(
                        IsolationKind::CgroupV2,
                        format!(
                            "cannot enable {todo:?} under {}: other processes share that cgroup \
                             (cgroup v2 allows no processes in a cgroup with controlled children); \
                             {} ({e})",
                            dir.display(),
                            way_to_delegate()
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
    /// cgroup v2 machine, docs/measurement-history.md), with our leaf and the controllers we enabled.
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
            origin: dir.path().to_path_buf(),
            root_home: false,
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
