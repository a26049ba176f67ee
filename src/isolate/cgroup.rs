//! cgroup v1 and v2 domains through cgroups-rs: cpuset and CFS quota, memory limit, blkio/io.max read limit.
//!
//! Every domain is created *under* the cgroups this process already sits in (one per v1 hierarchy, or one
//! v2 directory), so a supervisor started inside a limited or delegated cgroup never escapes it and the
//! domain's usage is charged to the supervisor's own budget too.
//!
//! Lifecycle: [`CgroupBackend::create_domain`] makes the directories, writes the limits and pre-opens every
//! `cgroup.procs`; the launcher's `pre_exec` writes `0` into those descriptors so the workload is inside
//! before its first instruction. [`CgroupDomain::destroy`] (also run on drop) freezes, kills, waits for the
//! tasks to go and removes the directories. [`cleanup_stale`] removes what a crashed run left behind.

use super::cpus::{self, CFS_PERIOD_US};
use super::*;
use cgroups_rs::fs::cgroup::get_cgroups_relative_paths;
use cgroups_rs::fs::cpu::CpuController;
use cgroups_rs::fs::cpuset::CpuSetController;
use cgroups_rs::fs::freezer::FreezerController;
use cgroups_rs::fs::hierarchies::{self, V1, V2};
use cgroups_rs::fs::memory::MemController;
use cgroups_rs::fs::{blkio::BlkIoController, Cgroup, Controller, Controllers, Hierarchy};
use cgroups_rs::FreezerState;
use std::collections::{BTreeSet, HashMap};
use std::fs::{self, File, OpenOptions};
use std::io::ErrorKind;
use std::os::fd::AsRawFd;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How long `destroy` waits for killed tasks to leave the cgroup.
/// The read "limit" that only makes cgroup v1 count a domain's reads: 1 PB/s, far above any device.
const COUNTING_ONLY_BYTES_PER_S: f64 = 1e15;
const KILL_TIMEOUT: Duration = Duration::from_secs(3);
/// How long `destroy` retries `rmdir` while the kernel still reports the cgroup busy.
const RMDIR_TIMEOUT: Duration = Duration::from_secs(1);
/// How long to wait for a v1 freezer to reach FROZEN before killing anyway.
const FREEZE_TIMEOUT: Duration = Duration::from_millis(200);
/// How long pausing a workload waits for its freezer to report FROZEN.
const PAUSE_TIMEOUT: Duration = Duration::from_secs(5);
/// The fixed cgroup2 mount point cgroups-rs works with.
const V2_ROOT: &str = "/sys/fs/cgroup";

/// Where domains are created: the cgroups this process was in when the backend was made.
#[derive(Debug, Clone)]
enum Parent {
    /// Per v1 controller name, the path of our cgroup relative to that hierarchy's mount.
    V1 { relative: HashMap<String, String> },
    /// Our cgroup relative to [`V2_ROOT`] (no leading `/`), and the controllers it may hand down.
    V2 {
        relative: String,
        controllers: Vec<String>,
    },
}

/// Makes cgroup domains nested under the cgroups this process is in.
pub struct CgroupBackend {
    kind: IsolationKind,
    parent: Parent,
    /// v2 only: whether the parent's `cgroup.subtree_control` has been prepared (done once, lazily, because
    /// it may move this process into a leaf cgroup).
    v2_ready: Mutex<bool>,
}

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

/// Our v1 cgroup per mounted controller, relative to the hierarchy's mount (a container may mount a
/// hierarchy from a sub-directory, which `/proc/self/cgroup` includes and the mount point does not).
fn v1_relative_paths(v1: &V1) -> Result<HashMap<String, String>, String> {
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

/// Our cgroup2 path from the `0::` line of `/proc/self/cgroup`.
fn own_v2_path() -> Result<String, String> {
    let text = fs::read_to_string("/proc/self/cgroup")
        .map_err(|e| format!("reading /proc/self/cgroup: {e}"))?;
    text.lines()
        .find_map(|l| l.strip_prefix("0::"))
        .map(|p| p.trim().trim_start_matches('/').to_string())
        .ok_or_else(|| "/proc/self/cgroup has no cgroup2 (0::) entry".to_string())
}

/// The directory of a v1 controller's parent cgroup (ours) in its hierarchy.
fn v1_parent_dir(ctl: &dyn Controller, relative: &HashMap<String, String>, name: &str) -> PathBuf {
    let rel = relative.get(name).map(String::as_str).unwrap_or("");
    ctl.path().join(rel.trim_start_matches('/'))
}

impl CgroupBackend {
    /// The backend of the given version, or why it cannot be used here (not mounted, the cpu/cpuset/memory
    /// controllers missing, or no permission to create cgroups under ours).
    pub fn new(kind: IsolationKind) -> Result<Self, IsolateError> {
        match kind {
            IsolationKind::CgroupV1 => Self::new_v1(),
            IsolationKind::CgroupV2 => Self::new_v2(),
            IsolationKind::Affinity => Err(IsolateError::Budget(
                "the affinity backend is not a cgroup backend".into(),
            )),
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

    fn new_v1() -> Result<Self, IsolateError> {
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

    fn new_v2() -> Result<Self, IsolateError> {
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

    /// The cores and memory nodes domains may use: the parent cpuset's effective sets.
    fn parent_cpuset(&self) -> (Vec<usize>, Option<String>) {
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

    /// v2: enables the controllers we need in the parent's `cgroup.subtree_control`. The kernel refuses
    /// that while the parent itself holds processes ("no internal processes"), so this process first moves
    /// into a leaf of its own (`synergy-supervisor-<pid>`) when it is the reason.
    fn prepare_v2(&self) -> Result<(), IsolateError> {
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

    /// A handle on the domain `name` (not yet created on disk).
    fn handle(&self, name: &str) -> Cgroup {
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
            Parent::V2 { relative, .. } => fs::read_to_string(
                Path::new(V2_ROOT)
                    .join(relative)
                    .join("cgroup.subtree_control"),
            )
            .unwrap_or_default()
            .split_whitespace()
            .map(str::to_string)
            .collect(),
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
        let cg = self.handle(name);
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

/// One cgroup (a directory per v1 hierarchy, or one v2 directory) holding one workload.
///
/// The descriptors in [`Domain::child_setup`] belong to this value: keep it alive until the child has
/// been spawned. Dropping it destroys the cgroup and kills what is left inside.
pub struct CgroupDomain {
    kind: IsolationKind,
    cg: Cgroup,
    /// Every directory of this cgroup, one per hierarchy (v1) or the single v2 one.
    dirs: Vec<PathBuf>,
    cores: Vec<usize>,
    /// v2 without the cpuset controller: pin with `sched_setaffinity` instead.
    pin_with_affinity: bool,
    /// Open `cgroup.procs` of every hierarchy, written to by the child before exec.
    procs: Vec<File>,
    read_dev: Option<BlockDevice>,
    mem_limited: bool,
    destroyed: bool,
}

impl std::fmt::Debug for CgroupDomain {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CgroupDomain")
            .field("kind", &self.kind)
            .field("dirs", &self.dirs)
            .field("cores", &self.cores)
            .field("destroyed", &self.destroyed)
            .finish()
    }
}

fn read_trim(path: &Path) -> Option<String> {
    fs::read_to_string(path).ok().map(|s| s.trim().to_string())
}

/// The value of `key` in a flat-keyed file such as `memory.stat` or `cpu.stat`.
fn keyed(text: &str, key: &str) -> Option<u64> {
    text.lines().find_map(|l| {
        let mut it = l.split_whitespace();
        (it.next() == Some(key))
            .then(|| it.next().and_then(|v| v.parse().ok()))
            .flatten()
    })
}

/// CFS periods throttled, summed over every cgroup above `dir` in its hierarchy that has a `cpu.stat`.
fn enclosing_throttled(dir: &Path) -> Option<u64> {
    let mut sum = None;
    for d in dir.ancestors().skip(1) {
        let Ok(t) = fs::read_to_string(d.join("cpu.stat")) else {
            break;
        };
        *sum.get_or_insert(0) += keyed(&t, "nr_throttled").unwrap_or(0);
    }
    sum
}

/// Bytes read over every device in v1 `blkio.throttle.io_service_bytes`: lines are `MAJ:MIN Read N`,
/// `MAJ:MIN Write N`, ..., and a final `Total N` over every operation (which must not be counted).
fn v1_read_bytes(text: &str) -> u64 {
    text.lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.len() == 3 && f[1] == "Read").then(|| f[2].parse::<u64>().ok())?
        })
        .sum()
}

/// Bytes read over every device in v2 `io.stat`: lines are `MAJ:MIN rbytes=N wbytes=N rios=N ...`.
fn v2_read_bytes(text: &str) -> u64 {
    text.split_whitespace()
        .filter_map(|kv| kv.strip_prefix("rbytes="))
        .filter_map(|v| v.parse::<u64>().ok())
        .sum()
}

impl CgroupDomain {
    /// Every directory of this cgroup (one per v1 hierarchy, one on v2); empty ones after `destroy`
    /// are gone from the filesystem.
    pub fn paths(&self) -> &[PathBuf] {
        &self.dirs
    }

    fn dir_of<'a, T>(&'a self) -> Option<&'a Path>
    where
        &'a T: From<&'a cgroups_rs::fs::Subsystem>,
        T: Controller + cgroups_rs::fs::ControllIdentifier + 'a,
    {
        if self.kind == IsolationKind::CgroupV2 {
            return self.dirs.first().map(PathBuf::as_path);
        }
        self.cg.controller_of::<T>().map(|c| c.path())
    }

    fn open_procs(&self) -> Result<Vec<File>, IsolateError> {
        self.dirs
            .iter()
            .map(|d| {
                let p = d.join("cgroup.procs");
                // std opens with O_CLOEXEC: the descriptor lives through pre_exec and closes at exec.
                OpenOptions::new()
                    .write(true)
                    .open(&p)
                    .map_err(|e| io_err(format!("opening {}", p.display()), e))
            })
            .collect()
    }

    /// Writes the limits of `budget` on `cores`. `fresh`: the cgroup was just made, so limits the budget
    /// does not set are still at their defaults and need no write (keeps setup fast).
    fn apply(
        &mut self,
        budget: &Budget,
        cores: Vec<usize>,
        fresh: bool,
    ) -> Result<(), IsolateError> {
        let quota = cpus::quota_us(budget.cpus.0, cores.len());
        if !self.pin_with_affinity {
            if let Some(cs) = self.cg.controller_of::<CpuSetController>() {
                cs.set_cpus(&cpus::format_list(&cores))
                    .map_err(|e| cg_err(format!("setting cpuset.cpus to {cores:?}"), e))?;
            }
        } else if !fresh {
            for pid in self.pids() {
                cpus::set_affinity_of(pid, &cores)?;
            }
        }
        if quota.is_some() || !fresh {
            let cpu = self.cg.controller_of::<CpuController>().ok_or_else(|| {
                IsolateError::Budget("a fractional CPU budget needs the cpu controller".into())
            })?;
            let q = quota.map(|q| q as i64).unwrap_or(-1);
            cpu.set_cfs_quota_and_period(Some(q), Some(CFS_PERIOD_US))
                .map_err(|e| cg_err(format!("setting the CFS quota to {q} µs"), e))?;
        }
        if budget.mem_limit.is_some() || (self.mem_limited && !fresh) {
            let mem = self.cg.controller_of::<MemController>().ok_or_else(|| {
                IsolateError::Budget("a memory limit needs the memory controller".into())
            })?;
            let limit = budget
                .mem_limit
                .map(|b| b.0.min(i64::MAX as u64) as i64)
                .unwrap_or(-1);
            mem.set_limit(limit)
                .map_err(|e| cg_err(format!("setting the memory limit to {limit} bytes"), e))?;
            self.mem_limited = budget.mem_limit.is_some();
        }
        // v1 counts reads only where a throttle rule exists: a rule far above any device's speed makes
        // it count without limiting anything.
        let counting = budget
            .count_reads_on
            .filter(|_| self.kind == IsolationKind::CgroupV1 && budget.read_limit.is_none())
            .filter(|_| self.cg.controller_of::<BlkIoController>().is_some())
            .map(|d| (d, BytesPerSec(COUNTING_ONLY_BYTES_PER_S)));
        let read_rule = budget.read_limit.or(counting);
        let new_dev = read_rule.map(|(d, _)| d);
        if let Some(old) = self.read_dev.filter(|d| Some(*d) != new_dev) {
            self.clear_read_limit(old)?;
        }
        if let Some((dev, rate)) = read_rule {
            let blk = self.cg.controller_of::<BlkIoController>().ok_or_else(|| {
                IsolateError::Budget("a storage read limit needs the blkio/io controller".into())
            })?;
            let bps = (rate.0.max(1.0)).round() as u64;
            blk.throttle_read_bps_for_device(dev.major, dev.minor, bps)
                .map_err(|e| {
                    cg_err(
                        format!(
                            "throttling reads on {}:{} to {bps} B/s",
                            dev.major, dev.minor
                        ),
                        e,
                    )
                })?;
            self.read_dev = Some(dev);
        }
        self.cores = cores;
        Ok(())
    }

    fn clear_read_limit(&mut self, dev: BlockDevice) -> Result<(), IsolateError> {
        let Some(dir) = self.dir_of::<BlkIoController>().map(Path::to_path_buf) else {
            return Ok(());
        };
        let (file, line) = if self.kind == IsolationKind::CgroupV2 {
            ("io.max", format!("{}:{} rbps=max", dev.major, dev.minor))
        } else {
            // v1: a rate of 0 deletes the rule.
            (
                "blkio.throttle.read_bps_device",
                format!("{}:{} 0", dev.major, dev.minor),
            )
        };
        fs::write(dir.join(file), &line).map_err(|e| {
            io_err(
                format!("writing `{line}` to {}", dir.join(file).display()),
                e,
            )
        })?;
        self.read_dev = None;
        Ok(())
    }

    fn freezer(&self) -> Option<&FreezerController> {
        self.cg.controller_of::<FreezerController>()
    }

    /// Kills every task: v2's `cgroup.kill` where the kernel has it, else freeze (so nothing forks
    /// between listing and killing), SIGKILL every listed pid, thaw (frozen tasks die only once thawed).
    fn kill_all(&self) -> Result<(), IsolateError> {
        if self.pids().is_empty() {
            return Ok(());
        }
        if self.kind == IsolationKind::CgroupV2 && self.cg.kill().is_ok() {
            return self.wait_empty();
        }
        let frozen = self.freezer().is_some_and(|f| {
            if f.freeze().is_err() {
                return false;
            }
            let start = Instant::now();
            while start.elapsed() < FREEZE_TIMEOUT {
                if matches!(f.state(), Ok(FreezerState::Frozen)) {
                    break;
                }
                std::thread::sleep(Duration::from_micros(500));
            }
            true
        });
        for pid in self.pids() {
            // ESRCH (already gone) is the goal; anything else shows up as a task that never leaves.
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
        if frozen {
            if let Some(f) = self.freezer() {
                let _ = f.thaw();
            }
        }
        self.wait_empty()
    }

    /// Waits for the cgroup to empty, re-killing stragglers (a task forked while we listed).
    fn wait_empty(&self) -> Result<(), IsolateError> {
        let start = Instant::now();
        let mut pause = Duration::from_micros(200);
        loop {
            let left = self.pids();
            if left.is_empty() {
                return Ok(());
            }
            if start.elapsed() > KILL_TIMEOUT {
                return Err(io_err(
                    format!("killing the tasks of cgroup {}", self.cg.path()),
                    std::io::Error::new(
                        ErrorKind::TimedOut,
                        format!("tasks {left:?} still there {KILL_TIMEOUT:?} after SIGKILL"),
                    ),
                ));
            }
            for pid in left {
                let _ = nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(pid),
                    nix::sys::signal::Signal::SIGKILL,
                );
            }
            std::thread::sleep(pause);
            pause = (pause * 2).min(Duration::from_millis(10));
        }
    }
}

/// Removes a cgroup directory (sub-cgroups first), retrying while the kernel still calls it busy (tasks
/// that have been killed but not yet fully exited).
fn remove_cgroup_dir(dir: &Path) -> Result<(), IsolateError> {
    if let Ok(entries) = fs::read_dir(dir) {
        for e in entries.flatten() {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                remove_cgroup_dir(&e.path())?;
            }
        }
    }
    let start = Instant::now();
    loop {
        match fs::remove_dir(dir) {
            Ok(()) => return Ok(()),
            Err(e) if e.kind() == ErrorKind::NotFound => return Ok(()),
            Err(e) if e.raw_os_error() == Some(libc::EBUSY) && start.elapsed() < RMDIR_TIMEOUT => {
                std::thread::sleep(Duration::from_millis(2));
            }
            Err(e) => return Err(io_err(format!("removing cgroup {}", dir.display()), e)),
        }
    }
}

impl Domain for CgroupDomain {
    fn kind(&self) -> IsolationKind {
        self.kind
    }

    fn cpu_list(&self) -> &[usize] {
        &self.cores
    }

    fn child_setup(&self) -> ChildSetup {
        ChildSetup {
            // After destroy, an invalid descriptor makes the child's write (and so the spawn) fail
            // rather than let the workload run unconstrained.
            procs_fds: if self.destroyed || self.procs.is_empty() {
                vec![-1]
            } else {
                self.procs.iter().map(|f| f.as_raw_fd()).collect()
            },
            affinity: self.pin_with_affinity.then(|| self.cores.clone()),
        }
    }

    fn stats(&self) -> DomainStats {
        let v2 = self.kind == IsolationKind::CgroupV2;
        let mut s = DomainStats::default();
        if v2 {
            let Some(dir) = self.dirs.first() else {
                return s;
            };
            let cpu = fs::read_to_string(dir.join("cpu.stat")).ok();
            s.cpu_seconds = cpu
                .as_deref()
                .and_then(|t| keyed(t, "usage_usec"))
                .map_or(0.0, |us| us as f64 / 1e6);
            s.storage_read_bytes = fs::read_to_string(dir.join("io.stat"))
                .ok()
                .map(|t| v2_read_bytes(&t));
            let mem = fs::read_to_string(dir.join("memory.stat")).ok();
            s.page_cache_bytes = mem.as_deref().and_then(|t| keyed(t, "file"));
            s.memory_bytes = read_trim(&dir.join("memory.current")).and_then(|v| v.parse().ok());
            s.oom_kills = fs::read_to_string(dir.join("memory.events"))
                .ok()
                .and_then(|t| keyed(&t, "oom_kill"));
            if let Some(t) = cpu.as_deref() {
                s.throttled_periods = keyed(t, "nr_throttled");
                s.throttled_s = keyed(t, "throttled_usec").map(|us| us as f64 / 1e6);
            }
            s.enclosing_throttled_periods = enclosing_throttled(dir);
        } else {
            s.cpu_seconds = self
                .dir_of::<cgroups_rs::fs::cpuacct::CpuAcctController>()
                .and_then(|d| read_trim(&d.join("cpuacct.usage")))
                .and_then(|v| v.parse::<u64>().ok())
                .map_or(0.0, |ns| ns as f64 / 1e9);
            s.storage_read_bytes = self.dir_of::<BlkIoController>().and_then(|d| {
                fs::read_to_string(d.join("blkio.throttle.io_service_bytes_recursive"))
                    .or_else(|_| fs::read_to_string(d.join("blkio.throttle.io_service_bytes")))
                    .ok()
                    .map(|t| v1_read_bytes(&t))
            });
            if let Some(d) = self.dir_of::<MemController>() {
                let stat = fs::read_to_string(d.join("memory.stat")).ok();
                s.page_cache_bytes = stat
                    .as_deref()
                    .and_then(|t| keyed(t, "total_cache").or_else(|| keyed(t, "cache")));
                s.memory_bytes =
                    read_trim(&d.join("memory.usage_in_bytes")).and_then(|v| v.parse().ok());
                s.oom_kills = fs::read_to_string(d.join("memory.oom_control"))
                    .ok()
                    .and_then(|t| keyed(&t, "oom_kill"));
            }
            if let Some(d) = self.dir_of::<CpuController>() {
                if let Ok(t) = fs::read_to_string(d.join("cpu.stat")) {
                    s.throttled_periods = keyed(&t, "nr_throttled");
                    s.throttled_s = keyed(&t, "throttled_time").map(|ns| ns as f64 / 1e9);
                }
                s.enclosing_throttled_periods = enclosing_throttled(d);
            }
        }
        s
    }

    fn pids(&self) -> Vec<i32> {
        if self.destroyed {
            return Vec::new();
        }
        let mut out = BTreeSet::new();
        for d in &self.dirs {
            if let Ok(text) = fs::read_to_string(d.join("cgroup.procs")) {
                out.extend(text.lines().filter_map(|l| l.trim().parse::<i32>().ok()));
            }
        }
        out.into_iter().collect()
    }

    fn update(&mut self, budget: &Budget) -> Result<(), IsolateError> {
        if self.destroyed {
            return Err(IsolateError::Budget("the domain has been destroyed".into()));
        }
        // The parent's effective cpuset may have changed since create (hotplug, a resized allocation).
        let parent = self
            .dir_of::<CpuSetController>()
            .and_then(Path::parent)
            .map(Path::to_path_buf);
        let file = if self.kind == IsolationKind::CgroupV2 {
            "cpuset.cpus.effective"
        } else {
            "cpuset.effective_cpus"
        };
        let available = match parent
            .and_then(|p| fs::read_to_string(p.join(file)).ok())
            .and_then(|t| cpus::parse_list(&t))
            .filter(|l| !l.is_empty())
        {
            Some(l) => l,
            None => cpus::own_affinity()?,
        };
        let cores = cpus::choose(budget, &available)?;
        self.apply(budget, cores, false)
    }

    fn set_frozen(&mut self, frozen: bool) -> Result<(), IsolateError> {
        if self.destroyed {
            return Err(IsolateError::Budget("the domain has been destroyed".into()));
        }
        let what = if frozen { "freezing" } else { "thawing" };
        let f = self.freezer().ok_or_else(|| {
            IsolateError::Budget(format!(
                "{what} a workload needs the freezer controller, which is not available here"
            ))
        })?;
        let r = if frozen { f.freeze() } else { f.thaw() };
        r.map_err(|e| cg_err(format!("{what} cgroup {}", self.cg.path()), e))?;
        let settled = |s: &FreezerState| {
            if frozen {
                matches!(s, FreezerState::Frozen)
            } else {
                matches!(s, FreezerState::Thawed)
            }
        };
        let start = Instant::now();
        loop {
            match f.state() {
                Ok(s) if settled(&s) => return Ok(()),
                _ if start.elapsed() > PAUSE_TIMEOUT => {
                    return Err(io_err(
                        format!("{what} cgroup {}", self.cg.path()),
                        std::io::Error::new(
                            ErrorKind::TimedOut,
                            format!("the freezer did not settle within {PAUSE_TIMEOUT:?}"),
                        ),
                    ))
                }
                _ => std::thread::sleep(Duration::from_millis(1)),
            }
        }
    }

    fn destroy(&mut self) -> Result<(), IsolateError> {
        if self.destroyed {
            return Ok(());
        }
        // No child may enter after this point.
        self.procs.clear();
        let killed = self.kill_all();
        let mut first_err = killed.err();
        for d in self.dirs.iter().rev() {
            if let Err(e) = remove_cgroup_dir(d) {
                first_err.get_or_insert(e);
            }
        }
        match first_err {
            None => {
                self.destroyed = true;
                Ok(())
            }
            Some(e) => Err(e),
        }
    }
}

impl Drop for CgroupDomain {
    fn drop(&mut self) {
        // Nowhere to report from drop; an explicit destroy() reports the same failure.
        let _ = self.destroy();
    }
}

/// Removes leftover cgroups named `<prefix>*` directly under this process's cgroups (every v1 hierarchy,
/// or the v2 one) whose tasks are all gone, such as those of a crashed run. Cgroups that still hold tasks
/// are left alone: they may belong to a live run. Returns how many distinct cgroup names were removed
/// (in at least one hierarchy). An empty prefix removes nothing.
///
/// A live run's domain is also empty between its creation and its child's start, so pass a prefix that
/// only dead runs use: with names `synergy-<pid>-<n>`, `synergy-<pid>-` for a pid that no longer runs
/// (crash recovery), or this run's own `synergy-<pid>-` before it creates any domain. Typical use: at
/// start-up, for each `synergy-<pid>-*` cgroup whose pid is gone.
pub fn cleanup_stale(prefix: &str) -> usize {
    if prefix.is_empty() {
        return 0;
    }
    let mut parents: Vec<PathBuf> = Vec::new();
    if hierarchies::is_cgroup2_unified_mode() {
        if let Ok(rel) = own_v2_path() {
            let dir = Path::new(V2_ROOT).join(&rel);
            // After the v2 supervisor move, domains are siblings of our leaf.
            if dir
                .file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("synergy-supervisor-"))
            {
                if let Some(p) = dir.parent() {
                    parents.push(p.to_path_buf());
                }
            }
            parents.push(dir);
        }
    } else {
        let v1 = V1::new();
        if let Ok(relative) = v1_relative_paths(&v1) {
            for s in v1.subsystems() {
                let dir = v1_parent_dir(s.to_controller(), &relative, &s.controller_name());
                if !parents.contains(&dir) {
                    parents.push(dir);
                }
            }
        }
    }
    let own_leaf = format!("synergy-supervisor-{}", std::process::id());
    let mut removed = BTreeSet::new();
    for parent in parents {
        let Ok(entries) = fs::read_dir(&parent) else {
            continue;
        };
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if !name.starts_with(prefix)
                || name == own_leaf
                || !e.file_type().is_ok_and(|t| t.is_dir())
            {
                continue;
            }
            let path = e.path();
            let busy = fs::read_to_string(path.join("cgroup.procs"))
                .map(|t| !t.trim().is_empty())
                .unwrap_or(true);
            if busy {
                continue;
            }
            // An empty cgroup may also be a live run's domain whose child has not started yet; telling
            // the two apart is the caller's job (see the prefix advice in the doc comment).
            if remove_cgroup_dir(&path).is_ok() {
                removed.insert(name);
            }
        }
    }
    removed.len()
}

/// The whole-disk block device holding `path` (a partition maps to its disk, since throttling rules apply
/// to whole disks).
pub fn block_device_of(path: &Path) -> Result<BlockDevice, IsolateError> {
    let meta = fs::metadata(path).map_err(|e| io_err(format!("reading {}", path.display()), e))?;
    let dev = meta.dev();
    let (major, minor) = (libc::major(dev) as u64, libc::minor(dev) as u64);
    let sys = PathBuf::from(format!("/sys/dev/block/{major}:{minor}"));
    if !sys.exists() {
        return Err(IsolateError::Budget(format!(
            "a storage limit needs the dataset on a block device, but {} is on device {major}:{minor}, \
             which is not one (overlay, tmpfs, btrfs or network file system); move the dataset or drop \
             the storage limit",
            path.display()
        )));
    }
    if !sys.join("partition").exists() {
        return Ok(BlockDevice { major, minor });
    }
    // /sys/dev/block/M:m links to .../block/<disk>/<partition>; the disk's `dev` holds its numbers.
    let real =
        fs::canonicalize(&sys).map_err(|e| io_err(format!("resolving {}", sys.display()), e))?;
    let disk_dev = real
        .parent()
        .and_then(|d| read_trim(&d.join("dev")))
        .ok_or_else(|| {
            IsolateError::Budget(format!(
                "cannot find the disk holding partition {major}:{minor} (of {})",
                path.display()
            ))
        })?;
    let parsed = disk_dev
        .split_once(':')
        .and_then(|(a, b)| Some((a.parse().ok()?, b.parse().ok()?)));
    match parsed {
        Some((major, minor)) => Ok(BlockDevice { major, minor }),
        None => Err(IsolateError::Budget(format!(
            "unexpected device number `{disk_dev}` for the disk holding {}",
            path.display()
        ))),
    }
}

#[cfg(test)]
mod tests {
    //! These run against the real cgroup v1 hierarchies as root; elsewhere they print why and pass.

    use super::*;
    use crate::isolate::pagecache;
    use crate::units::{Bytes, BytesPerSec, Cores};
    use std::io::Write;
    use std::os::unix::process::{CommandExt, ExitStatusExt};
    use std::process::{Child, Command, Stdio};
    use std::sync::atomic::{AtomicUsize, Ordering};

    static SEQ: AtomicUsize = AtomicUsize::new(0);

    fn unique(tag: &str) -> String {
        format!(
            "synergy-test-{}-{tag}-{}",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::Relaxed)
        )
    }

    fn backend() -> Option<CgroupBackend> {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            eprintln!("note: skipping a cgroup test: not running as root");
            return None;
        }
        match CgroupBackend::new(IsolationKind::CgroupV1) {
            Ok(b) => Some(b),
            Err(e) => {
                eprintln!("note: skipping a cgroup test: {e}");
                None
            }
        }
    }

    fn budget(cpus: f64) -> Budget {
        Budget {
            cpus: Cores(cpus),
            cpu_list: None,
            mem_limit: None,
            read_limit: None,
            count_reads_on: None,
        }
    }

    fn spawn_in(domain: &dyn Domain, cmd: &mut Command) -> Child {
        let setup = domain.child_setup();
        // SAFETY: apply_in_child only makes async-signal-safe calls.
        unsafe {
            cmd.pre_exec(move || setup.apply_in_child());
        }
        cmd.stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn()
            .expect("spawn a test child")
    }

    /// A file of `size` bytes, written, synced and evicted so it starts cold.
    fn cold_file(dir: &Path, size: usize) -> PathBuf {
        let path = dir.join("data.bin");
        let mut f = File::create(&path).expect("create test file");
        let chunk: Vec<u8> = (0..1usize << 20).map(|i| (i * 31 % 251) as u8).collect();
        let mut left = size;
        while left > 0 {
            let n = left.min(chunk.len());
            f.write_all(&chunk[..n]).expect("write test file");
            left -= n;
        }
        drop(f);
        pagecache::evict([&path]).expect("evict test file");
        let r = pagecache::residency([&path]).expect("residency");
        eprintln!(
            "cold file: {} of {} bytes still cached after evict",
            r.resident_bytes, r.total_bytes
        );
        path
    }

    #[test]
    fn setup_and_teardown_are_fast_and_leave_nothing() {
        let Some(b) = backend() else { return };
        let mut setups = Vec::new();
        let mut teardowns = Vec::new();
        for _ in 0..5 {
            let mut bud = budget(0.5);
            bud.mem_limit = Some(Bytes(256 << 20));
            let t = Instant::now();
            let mut d = b.create_domain(&unique("fast"), &bud).expect("create");
            setups.push(t.elapsed());
            let paths = d.paths().to_vec();
            assert!(paths.len() >= 4, "one directory per hierarchy: {paths:?}");
            // A child that is not reaped before destroy: destroy must not wait on the zombie.
            let mut child = spawn_in(&d, Command::new("sleep").arg("30"));
            let pid = child.id() as i32;
            assert_eq!(d.pids(), vec![pid]);
            let t = Instant::now();
            d.destroy().expect("destroy");
            teardowns.push(t.elapsed());
            let status = child.wait().expect("wait");
            assert_eq!(status.signal(), Some(libc::SIGKILL));
            for p in &paths {
                assert!(!p.exists(), "{} left behind", p.display());
            }
            d.destroy().expect("destroy is idempotent");
        }
        setups.sort();
        teardowns.sort();
        eprintln!("cgroup v1 setup: {setups:?}; teardown (one live child): {teardowns:?}");
        assert!(setups[2] < Duration::from_millis(100), "{setups:?}");
        assert!(teardowns[2] < Duration::from_millis(100), "{teardowns:?}");
    }

    #[test]
    fn half_a_core_quota_gives_half_a_core() {
        let Some(b) = backend() else { return };
        let d = b
            .create_domain(&unique("quota"), &budget(0.5))
            .expect("create");
        assert_eq!(d.cpu_list().len(), 1);
        let mut child = spawn_in(&d, &mut Command::new("yes"));
        std::thread::sleep(Duration::from_millis(200));
        let (c0, t0) = (d.stats().cpu_seconds, Instant::now());
        std::thread::sleep(Duration::from_millis(1500));
        let (c1, t1) = (d.stats().cpu_seconds, t0.elapsed());
        let share = (c1 - c0) / t1.as_secs_f64();
        drop(d);
        let _ = child.wait();
        eprintln!("0.5-core quota: the child used {share:.3} cores");
        // Upper bound is the quota's job; the lower one is loose because the test host may be busy.
        assert!((0.3..=0.6).contains(&share), "share {share}");
    }

    #[test]
    fn memory_limit_bounds_page_cache() {
        let Some(b) = backend() else { return };
        let dir = tempfile::tempdir().expect("tempdir");
        let file = cold_file(dir.path(), 256 << 20);
        let limit = 64u64 << 20;
        let mut bud = budget(1.0);
        bud.mem_limit = Some(Bytes(limit));
        let d = b.create_domain(&unique("mem"), &bud).expect("create");
        let mut child = spawn_in(&d, Command::new("cat").arg(&file));
        let status = child.wait().expect("wait");
        assert!(status.success(), "cat under a 64 MiB limit: {status}");
        let s = d.stats();
        eprintln!(
            "64 MiB limit, 256 MiB read: page cache {:?} B, memory {:?} B, residency {:?}",
            s.page_cache_bytes,
            s.memory_bytes,
            pagecache::residency([&file]).map(|r| r.resident_bytes)
        );
        let cache = s.page_cache_bytes.expect("page cache is reported");
        assert!(cache <= limit, "page cache {cache} over the limit");
        assert!(
            cache > 8 << 20,
            "the read was charged to the domain: {cache}"
        );
        assert!(s.memory_bytes.expect("memory is reported") <= limit);
        let read = s.storage_read_bytes.expect("reads are reported");
        // Everything was read from storage, though the counters may trail the last bios a little.
        assert!(read > limit, "storage reads {read}");
    }

    #[test]
    fn read_throttle_limits_cold_reads() {
        let Some(b) = backend() else { return };
        let dir = tempfile::tempdir().expect("tempdir");
        let size = 40_000_000usize;
        let file = cold_file(dir.path(), size);
        let dev = match block_device_of(&file) {
            Ok(d) => d,
            Err(e) => {
                eprintln!("note: skipping the throttle test: {e}");
                return;
            }
        };
        let rate = 20e6;
        let mut bud = budget(1.0);
        bud.read_limit = Some((dev, BytesPerSec(rate)));
        let d = b.create_domain(&unique("io"), &bud).expect("create");
        let t = Instant::now();
        let status = spawn_in(&d, Command::new("cat").arg(&file))
            .wait()
            .expect("wait");
        let secs = t.elapsed().as_secs_f64();
        assert!(status.success());
        let got = size as f64 / secs;
        let read = d.stats().storage_read_bytes.unwrap_or(0);
        eprintln!(
            "20 MB/s throttle on {}:{}: {:.1} MB/s ({read} B read in {secs:.2} s)",
            dev.major,
            dev.minor,
            got / 1e6
        );
        assert!((0.8 * rate..=1.2 * rate).contains(&got), "rate {got}");
        assert!(read as f64 >= 0.9 * size as f64, "storage reads {read}");
    }

    #[test]
    fn update_changes_a_running_child() {
        let Some(b) = backend() else { return };
        let (available, _) = b.parent_cpuset();
        if available.len() < 2 {
            eprintln!("note: skipping the cpuset update test: only {available:?} available");
            return;
        }
        let (first, second) = (available[0], available[1]);
        let mut bud = budget(1.0);
        bud.cpu_list = Some(vec![first]);
        let mut d = b.create_domain(&unique("upd"), &bud).expect("create");
        let mut child = spawn_in(&d, Command::new("sleep").arg("30"));
        assert_eq!(super::cpus::cpus_allowed(child.id()), first.to_string());
        let mut bud2 = budget(0.5);
        bud2.cpu_list = Some(vec![second]);
        bud2.mem_limit = Some(Bytes(128 << 20));
        d.update(&bud2).expect("update");
        assert_eq!(super::cpus::cpus_allowed(child.id()), second.to_string());
        assert_eq!(d.cpu_list(), &[second]);
        let cpu_dir = d.dir_of::<CpuController>().expect("cpu dir").to_path_buf();
        assert_eq!(
            read_trim(&cpu_dir.join("cpu.cfs_quota_us")).as_deref(),
            Some("50000")
        );
        // Back to no quota and no memory limit.
        d.update(&budget(1.0)).expect("update back");
        assert_eq!(
            read_trim(&cpu_dir.join("cpu.cfs_quota_us")).as_deref(),
            Some("-1")
        );
        drop(d);
        assert_eq!(child.wait().expect("wait").signal(), Some(libc::SIGKILL));
    }

    #[test]
    fn a_frozen_domain_stops_its_tasks_and_a_reopened_one_can_be_destroyed() {
        let Some(b) = backend() else { return };
        let name = unique("frz");
        let mut d = b.create_domain(&name, &budget(1.0)).expect("create");
        let mut child = spawn_in(&d, Command::new("sleep").arg("30"));
        let stat_state = |pid: u32| {
            fs::read_to_string(format!("/proc/{pid}/stat"))
                .ok()
                .and_then(|t| t.rsplit(") ").next().map(|r| r.chars().next()))
                .flatten()
        };
        d.set_frozen(true).expect("freeze");
        let f = d.freezer().expect("freezer");
        assert!(matches!(f.state(), Ok(FreezerState::Frozen)));
        // A frozen task sleeps uninterruptibly in the freezer (D) until thawed.
        assert_eq!(stat_state(child.id()), Some('D'));
        d.set_frozen(false).expect("thaw");
        assert!(matches!(
            d.freezer().expect("freezer").state(),
            Ok(FreezerState::Thawed)
        ));
        d.set_frozen(true).expect("freeze again");
        // Another handle on the same cgroup (as a resumed executor opens what a dead one left) sees the
        // frozen task and removes everything, the frozen task included.
        let mut again = Isolation::reopen(&b, &name).expect("open").expect("exists");
        assert_eq!(again.pids(), vec![child.id() as i32]);
        again.destroy().expect("destroy");
        assert_eq!(child.wait().expect("wait").signal(), Some(libc::SIGKILL));
        assert!(d.paths().iter().all(|p| !p.exists()));
        assert!(b.open_domain(&name).expect("open").is_none());
    }

    #[test]
    fn more_cores_than_available_is_a_budget_error() {
        let Some(b) = backend() else { return };
        let (available, _) = b.parent_cpuset();
        let name = unique("big");
        let err = b
            .create_domain(&name, &budget(available.len() as f64 + 1.0))
            .expect_err("too many cores");
        assert!(matches!(err, IsolateError::Budget(_)), "{err}");
        assert!(
            err.to_string()
                .contains(&format!("only {} are available", available.len())),
            "{err}"
        );
        assert!(!b.handle(&name).exists());
    }

    #[test]
    fn failed_setup_leaves_nothing_and_destroyed_domains_admit_nobody() {
        let Some(b) = backend() else { return };
        let name = unique("bad");
        let mut bud = budget(1.0);
        // /dev/null's numbers: not a block device, so the throttle write fails half-way through setup.
        bud.read_limit = Some((BlockDevice { major: 1, minor: 3 }, BytesPerSec(1e6)));
        let err = b.create_domain(&name, &bud).expect_err("bad device");
        eprintln!("bad throttle device: {err}");
        assert!(!b.handle(&name).exists(), "half-made cgroup left behind");

        let mut d = b
            .create_domain(&unique("late"), &budget(1.0))
            .expect("create");
        d.destroy().expect("destroy");
        let setup = d.child_setup();
        let mut cmd = Command::new("true");
        // SAFETY: apply_in_child only makes async-signal-safe calls.
        unsafe {
            cmd.pre_exec(move || setup.apply_in_child());
        }
        assert!(
            cmd.spawn().is_err(),
            "a destroyed domain must not run a child"
        );
    }

    #[test]
    fn stale_cgroups_are_cleaned_up() {
        let Some(b) = backend() else { return };
        let name = unique("stale");
        let d = b.create_domain(&name, &budget(1.0)).expect("create");
        let paths = d.paths().to_vec();
        // Simulate a crash: the domain is never destroyed.
        std::mem::forget(d);
        assert_eq!(cleanup_stale(&name), 1);
        assert!(paths.iter().all(|p| !p.exists()));
        assert_eq!(cleanup_stale(""), 0);
    }

    #[test]
    fn block_devices_are_whole_disks_and_pseudo_filesystems_are_refused() {
        let err = block_device_of(Path::new("/proc/self/status")).expect_err("procfs");
        assert!(err.to_string().contains("block device"), "{err}");
        if let Ok(d) = block_device_of(Path::new("/")) {
            let sys = format!("/sys/dev/block/{}:{}", d.major, d.minor);
            assert!(Path::new(&sys).exists());
            assert!(!Path::new(&sys).join("partition").exists());
        }
    }

    #[test]
    fn stat_files_parse() {
        let v1 = "254:0 Read 4096\n254:0 Write 10\n254:0 Total 4106\n7:0 Read 6\nTotal 4112\n";
        assert_eq!(v1_read_bytes(v1), 4102);
        let v2 =
            "254:0 rbytes=4096 wbytes=0 rios=1 wios=0 dbytes=0 dios=0\n7:0 rbytes=4 wbytes=1\n";
        assert_eq!(v2_read_bytes(v2), 4100);
        let mem = "anon 10\nfile 300\nfile_mapped 7\n";
        assert_eq!(keyed(mem, "file"), Some(300));
        assert_eq!(keyed(mem, "total_cache"), None);
    }

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
