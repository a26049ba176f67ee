//! The backend: where this process sits in the cgroup hierarchies, and the domains made (or reopened) under
//! it. What only one hierarchy needs, detecting it and preparing the parent, is in `v1` and `v2`.

use super::domain::CgroupDomain;
use super::paths::{subtree_controllers, v1_parent_dir, ROOT_HOME};
use super::stale::cleanup_stale;
use super::{cg_err, unavailable, V2_ROOT};
use crate::format::trial::{IsolationKind, Limits};
use crate::isolate::cpus;
use crate::isolate::{Budget, Domain, IsolateError, Isolation};
use cgroups_rs::fs::blkio::BlkIoController;
use cgroups_rs::fs::cpuset::CpuSetController;
use cgroups_rs::fs::hierarchies::{V1, V2};
use cgroups_rs::fs::{Cgroup, Controller, Hierarchy};
use std::collections::HashMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// Where domains are created: the cgroups this process was in when the backend was made.
#[derive(Debug, Clone)]
pub(super) enum Parent {
    /// Per v1 controller name, the path of our cgroup relative to that hierarchy's mount.
    V1 { relative: HashMap<String, String> },
    /// The cgroup domains go under, relative to [`V2_ROOT`] (no leading `/`), the controllers it may
    /// hand down, and where this process sat when that is another cgroup (synergy's own cgroup under the
    /// hierarchy's root, taken when ours is shared).
    V2 {
        relative: String,
        controllers: Vec<String>,
        origin: Option<String>,
    },
}

/// Makes cgroup domains nested under the cgroups this process is in.
pub struct CgroupBackend {
    pub(super) kind: IsolationKind,
    pub(super) parent: Parent,
    /// v2 only: whether the parent's `cgroup.subtree_control` has been prepared (done once, lazily, because
    /// it may move this process into a leaf cgroup).
    pub(super) v2_ready: Mutex<bool>,
}

impl CgroupBackend {
    /// The backend of the given version, or why it cannot be used here (not mounted, the cpu/cpuset/memory
    /// controllers missing, or no permission to create cgroups under ours).
    pub fn new(kind: IsolationKind) -> Result<Self, IsolateError> {
        match kind {
            IsolationKind::CgroupV1 => Self::new_v1(),
            IsolationKind::CgroupV2 => Self::new_v2(),
            IsolationKind::Affinity | IsolationKind::Slurm => Err(IsolateError::Budget(format!(
                "the {kind} backend is not a cgroup backend synergy makes"
            ))),
        }
    }

    /// The best cgroup backend on this host: v2 on a pure cgroup2 host with the controllers delegated to
    /// us, else v1 where its controllers are mounted and writable.
    pub fn detect() -> Result<Self, IsolateError> {
        let reason = |e: IsolateError| match e {
            IsolateError::Unavailable { reason, .. } => reason,
            other => other.to_string(),
        };
        match Self::new_v2() {
            Ok(b) => Ok(b),
            Err(e2) => Self::new_v1().map_err(|e1| {
                unavailable(
                    IsolationKind::CgroupV1,
                    format!("v1: {}; v2: {}", reason(e1), reason(e2)),
                )
            }),
        }
    }

    /// The cores and memory nodes domains may use: the parent cpuset's effective sets.
    pub(super) fn parent_cpuset(&self) -> (Vec<usize>, Option<String>) {
        let (dir, cpus_file, mems_file) = match &self.parent {
            Parent::V1 { relative } => {
                let v1 = V1::new();
                let dir = v1
                    .subsystems()
                    .into_iter()
                    .find(|s| s.controller_name() == "cpuset")
                    .map(|s| v1_parent_dir(s.to_controller(), relative, "cpuset"));
                (dir, "cpuset.effective_cpus", "cpuset.effective_mems")
            }
            Parent::V2 { relative, .. } => (
                Some(Path::new(V2_ROOT).join(relative)),
                "cpuset.cpus.effective",
                "cpuset.mems.effective",
            ),
        };
        let read = |f: &str| {
            dir.as_ref()
                .and_then(|d| fs::read_to_string(d.join(f)).ok())
        };
        let cores = read(cpus_file)
            .and_then(|t| cpus::parse_list(&t))
            .filter(|l| !l.is_empty())
            .or_else(|| cpus::own_affinity().ok())
            .unwrap_or_default();
        let mems = read(mems_file)
            .map(|t| t.trim().to_string())
            .filter(|m| !m.is_empty());
        (cores, mems)
    }

    /// A handle on the domain `name` (not yet created on disk).
    pub(super) fn handle(&self, name: &str) -> Cgroup {
        match &self.parent {
            Parent::V1 { relative } => {
                Cgroup::load_with_relative_paths(Box::new(V1::new()), name, relative.clone())
            }
            Parent::V2 { relative, .. } => {
                let path = if relative.is_empty() {
                    name.to_string()
                } else {
                    format!("{relative}/{name}")
                };
                Cgroup::load(Box::new(V2::new()), path)
            }
        }
    }

    /// Controllers enabled for our children on v2 (what the domain may configure).
    fn v2_enabled(&self) -> Vec<String> {
        match &self.parent {
            Parent::V2 { relative, .. } => subtree_controllers(&Path::new(V2_ROOT).join(relative)),
            Parent::V1 { .. } => Vec::new(),
        }
    }

    /// Creates the domain `name` enforcing `budget`; see [`Isolation::create`]. Returned as the concrete
    /// type for callers (and tests) that want [`CgroupDomain::paths`].
    pub fn create_domain(&self, name: &str, budget: &Budget) -> Result<CgroupDomain, IsolateError> {
        if name.is_empty() || name.contains('/') || name == "." || name == ".." {
            return Err(IsolateError::Budget(format!(
                "`{name}` is not a valid cgroup name (one path component, e.g. synergy-<pid>-<n>)"
            )));
        }
        let (available, mems) = self.parent_cpuset();
        let cores = cpus::choose(budget, &available)?;
        self.prepare_v2()?;
        let v2 = self.kind == IsolationKind::CgroupV2;
        let enabled = self.v2_enabled();
        let cg = self.handle(name);
        if budget.read_limit.is_some() {
            let has_io = if v2 {
                enabled.iter().any(|c| c == "io")
            } else {
                cg.controller_of::<BlkIoController>().is_some()
            };
            if !has_io {
                return Err(IsolateError::Budget(format!(
                    "a storage read limit needs the {} controller, which is not available here",
                    if v2 { "io" } else { "blkio" }
                )));
            }
        }
        if cg.exists() {
            return Err(IsolateError::Budget(format!(
                "a cgroup named `{name}` already exists; pick a unique name (or run cleanup_stale)"
            )));
        }
        // From here on, dropping the domain removes whatever was created, whatever fails next.
        let mut domain = self.domain_of(cg, &enabled);
        domain
            .cg
            .create()
            .map_err(|e| cg_err(format!("creating cgroup `{name}`"), e))?;
        if !v2 {
            // A v1 cpuset admits no task until both cpus and mems are set; cgroups-rs copies them from the
            // parent on creation, but only when the parent's are non-empty.
            if let (Some(cs), Some(m)) = (domain.cg.controller_of::<CpuSetController>(), &mems) {
                let cur = fs::read_to_string(cs.path().join("cpuset.mems")).unwrap_or_default();
                if cur.trim().is_empty() {
                    cs.set_mems(m)
                        .map_err(|e| cg_err(format!("setting cpuset.mems of `{name}`"), e))?;
                }
            }
        }
        domain.apply(budget, cores, true)?;
        domain.procs = domain.open_procs()?;
        Ok(domain)
    }
}

impl CgroupBackend {
    /// The domain value for `cg`, with the directories it has (or will have) in each hierarchy.
    fn domain_of(&self, cg: Cgroup, v2_enabled: &[String]) -> CgroupDomain {
        let v2 = self.kind == IsolationKind::CgroupV2;
        let mut dirs: Vec<PathBuf> = Vec::new();
        if v2 {
            dirs.push(Path::new(V2_ROOT).join(cg.path()));
        } else {
            for s in cg.subsystems() {
                let p = s.to_controller().path().to_path_buf();
                if !dirs.contains(&p) {
                    dirs.push(p);
                }
            }
        }
        CgroupDomain {
            kind: self.kind,
            cg,
            dirs,
            cores: Vec::new(),
            pin_with_affinity: v2 && !v2_enabled.iter().any(|c| c == "cpuset"),
            procs: Vec::new(),
            read_dev: None,
            mem_limited: false,
            destroyed: false,
        }
    }

    /// Opens a domain this backend made earlier, possibly by another process (a supervisor that was
    /// killed), so it can be paused, resized or destroyed; `None` when no cgroup has that name.
    pub fn open_domain(&self, name: &str) -> Result<Option<CgroupDomain>, IsolateError> {
        if name.is_empty() || name.contains('/') || name == "." || name == ".." {
            return Err(IsolateError::Budget(format!(
                "`{name}` is not a valid cgroup name"
            )));
        }
        let mut cg = self.handle(name);
        if !cg.exists() && self.kind == IsolationKind::CgroupV2 {
            // A run started in a shared cgroup made it under synergy's own cgroup at the root.
            cg = Cgroup::load(Box::new(V2::new()), format!("{ROOT_HOME}/{name}"));
        }
        if !cg.exists() {
            return Ok(None);
        }
        let mut domain = self.domain_of(cg, &self.v2_enabled());
        // A hierarchy the other process never populated has nothing to remove.
        domain.dirs.retain(|d| d.exists());
        domain.cores = domain
            .dir_of::<CpuSetController>()
            .and_then(|d| fs::read_to_string(d.join("cpuset.cpus")).ok())
            .and_then(|t| cpus::parse_list(&t))
            .unwrap_or_default();
        domain.procs = domain.open_procs()?;
        Ok(Some(domain))
    }
}

impl Isolation for CgroupBackend {
    fn kind(&self) -> IsolationKind {
        self.kind
    }
    fn enforces(&self) -> Limits {
        let storage = match &self.parent {
            Parent::V2 { controllers, .. } => controllers.iter().any(|c| c == "io"),
            Parent::V1 { .. } => self
                .handle("probe")
                .controller_of::<BlkIoController>()
                .is_some(),
        };
        Limits {
            fractional_cores: true,
            memory: true,
            storage,
        }
    }
    fn create(&self, name: &str, budget: &Budget) -> Result<Box<dyn Domain>, IsolateError> {
        Ok(Box::new(self.create_domain(name, budget)?))
    }
    fn reopen(&self, name: &str) -> Result<Option<Box<dyn Domain>>, IsolateError> {
        Ok(self
            .open_domain(name)?
            .map(|d| Box::new(d) as Box<dyn Domain>))
    }
    fn remove_stale(&self, prefix: &str) -> usize {
        cleanup_stale(prefix)
    }
}
