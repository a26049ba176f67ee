//! Isolation domains: run a workload under a CPU, memory (page cache) and storage-bandwidth budget.
//!
//! Backends: cgroup v1 and cgroup v2 (through cgroups-rs), and a CPU-affinity fallback for hosts where
//! cgroups cannot be used. [`detect`] picks the best one available. Page-cache control for a dataset
//! (evict, prewarm, residency) lives in [`pagecache`]; which cores a process may take, host-wide, in
//! [`ledger`].

pub mod affinity;
pub mod cgroup;
pub mod cpus;
pub mod ledger;
pub mod pagecache;

use crate::format::trial::{IsolationKind, Limits};
use crate::units::{Bytes, BytesPerSec, Cores};
use serde::{Deserialize, Serialize};
use std::os::fd::RawFd;

/// A block device, as `major:minor`, that a storage limit applies to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct BlockDevice {
    /// Major device number.
    pub major: u64,
    /// Minor device number.
    pub minor: u64,
}

/// What a workload may use.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Budget {
    /// CPU cores; fractional values are enforced with a CFS quota where the backend can.
    pub cpus: Cores,
    /// Specific core ids for the cpuset; `None` lets the backend choose the lowest-numbered ones.
    pub cpu_list: Option<Vec<usize>>,
    /// Memory limit (resident memory plus page cache); `None` leaves memory unbounded.
    pub mem_limit: Option<Bytes>,
    /// Storage read-bandwidth limit on one device; `None` leaves storage unthrottled.
    pub read_limit: Option<(BlockDevice, BytesPerSec)>,
    /// A device whose reads should be counted even without a limit (a trial's dataset disk). cgroup v1
    /// counts reads only in groups with a throttle rule, so there this installs one far above any
    /// device's speed; other backends count reads anyway.
    pub count_reads_on: Option<BlockDevice>,
}

impl Budget {
    /// The kinds of limit it needs enforced.
    pub fn limits(&self) -> Limits {
        Limits {
            fractional_cores: self.cpus.0.fract() != 0.0,
            memory: self.mem_limit.is_some(),
            storage: self.read_limit.is_some(),
        }
    }
}

/// Resource use of a domain since it was created.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct DomainStats {
    /// CPU time used by every task in the domain, in seconds.
    pub cpu_seconds: f64,
    /// Bytes read from storage by the domain (block layer), when the backend can tell.
    pub storage_read_bytes: Option<u64>,
    /// Page cache charged to the domain now, when the backend can tell.
    pub page_cache_bytes: Option<u64>,
    /// Memory charged to the domain now (resident plus cache), when the backend can tell.
    pub memory_bytes: Option<u64>,
    /// Tasks the kernel's OOM killer killed in the domain, when the backend can tell.
    pub oom_kills: Option<u64>,
    /// CFS periods in which the domain's own quota throttled it.
    pub throttled_periods: Option<u64>,
    /// Time its own quota held it throttled, seconds.
    pub throttled_s: Option<f64>,
    /// CFS periods in which a cgroup above the domain was throttled (a CPU quota on synergy itself or on
    /// whatever runs it): the domain then gets less than its grant whatever its own quota says.
    pub enclosing_throttled_periods: Option<u64>,
    /// The domain's own pressure stall totals (`some`), microseconds: CPU, I/O and memory, where the
    /// backend keeps them per domain (cgroup v2's `*.pressure` files).
    pub pressure_us: Option<[u64; 3]>,
}

/// What the launcher does in a forked child before `exec`, so that no instruction of the workload runs
/// outside its domain. Holds raw descriptors only: it is applied between fork and exec, where only
/// async-signal-safe calls are allowed.
#[derive(Debug, Clone, Default)]
pub struct ChildSetup {
    /// Open, writable `cgroup.procs` files: writing `0` moves the calling process in.
    pub procs_fds: Vec<RawFd>,
    /// Cores to pin the child to with `sched_setaffinity`.
    pub affinity: Option<Vec<usize>>,
}

impl ChildSetup {
    /// Applies the setup to the calling process. Async-signal-safe: call it from `pre_exec`.
    pub fn apply_in_child(&self) -> std::io::Result<()> {
        for &fd in &self.procs_fds {
            // SAFETY: `write` on a descriptor the parent keeps open until the child has exec'd.
            let n = unsafe { libc::write(fd, b"0".as_ptr().cast(), 1) };
            if n != 1 {
                return Err(std::io::Error::last_os_error());
            }
        }
        if let Some(cores) = &self.affinity {
            // SAFETY: a zeroed cpu_set_t is a valid empty set; CPU_SET and sched_setaffinity are syscalls
            // or plain bit operations, safe between fork and exec.
            unsafe {
                let mut set: libc::cpu_set_t = std::mem::zeroed();
                for &c in cores {
                    libc::CPU_SET(c, &mut set);
                }
                if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
            }
        }
        Ok(())
    }
}

/// Errors from setting up, reading or tearing down an isolation domain.
#[derive(Debug, thiserror::Error)]
pub enum IsolateError {
    /// The backend cannot run on this host (no cgroup mount, no permission).
    #[error("{backend} isolation is not available: {reason}")]
    Unavailable {
        /// The backend asked for.
        backend: IsolationKind,
        /// Why not.
        reason: String,
    },
    /// The backend the user asked for cannot run on this host: their choice to change, so bad input
    /// (docs/architecture.md §7), unlike [`IsolateError::Unavailable`], which detection falls back from.
    #[error(
        "{} {backend} is not available here: {reason}; {instead}",
        crate::error::Setting::Isolation
    )]
    NotHere {
        /// The backend asked for.
        backend: IsolationKind,
        /// Why not.
        reason: String,
        /// What to use instead.
        instead: String,
    },
    /// The budget asks for something the backend or host cannot give.
    #[error("{0}")]
    Budget(String),
    /// The backend detection found cannot enforce what the trial or plan needs: refused before it
    /// starts rather than measured under a weaker limit (or stopped at its first limited trial).
    #[error("{0}")]
    Downgrade(Box<Downgrade>),
    /// A cgroup or system call failed.
    #[error("{context}: {source}")]
    Io {
        /// What was being done.
        context: String,
        /// The underlying failure.
        #[source]
        source: std::io::Error,
    },
    /// An error reported by cgroups-rs.
    #[error("{context}: {message}")]
    Cgroup {
        /// What was being done.
        context: String,
        /// cgroups-rs's description.
        message: String,
    },
}

/// Limits a request needs that the detected backend cannot enforce ([`IsolateError::Downgrade`]).
#[derive(Debug, thiserror::Error)]
#[error(
    "{needs} needs {}, which {backend} isolation cannot enforce here ({why}); {way}, or {accept}",
    missing.join(" and ")
)]
pub struct Downgrade {
    /// What needs it ("this trial", "this profile's plan").
    pub needs: String,
    /// The backend detected.
    pub backend: IsolationKind,
    /// Why detection chose it.
    pub why: String,
    /// The limits it lacks.
    pub missing: Vec<&'static str>,
    /// The command that would give synergy a backend that can.
    pub way: String,
    /// The other way out: ask for the weaker backend by name, or drop the limits.
    pub accept: String,
}

/// The host's memory, bytes, from `/proc/meminfo` (0 when it cannot be read).
pub fn host_memory_bytes() -> u64 {
    std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|t| {
            t.lines()
                .find(|l| l.starts_with("MemTotal:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|kb| kb.parse::<u64>().ok())
        })
        .map_or(0, |kb| kb * 1024)
}

/// An isolation backend: makes domains that enforce a [`Budget`].
pub trait Isolation: Send + Sync {
    /// Which backend this is.
    fn kind(&self) -> IsolationKind;
    /// The limits its domains enforce on this host.
    fn enforces(&self) -> Limits;
    /// Creates a domain named `name` (unique per process) enforcing `budget`.
    fn create(&self, name: &str, budget: &Budget) -> Result<Box<dyn Domain>, IsolateError>;
    /// Opens the domain `name` that this kind of backend made earlier, possibly in another process (a
    /// supervisor that was killed), so that it can be paused, resized or destroyed; `None` when there is
    /// no domain of that name. Backends whose domains hold no kernel object (affinity) refuse.
    fn reopen(&self, name: &str) -> Result<Option<Box<dyn Domain>>, IsolateError>;
    /// Removes leftover domains named `<prefix>*` that hold no task any more (those of a crashed run);
    /// returns how many were removed. Backends whose domains outlive nothing (affinity) have none.
    fn remove_stale(&self, prefix: &str) -> usize {
        let _ = prefix;
        0
    }
}

/// One isolation domain holding one workload (and its children).
pub trait Domain: Send {
    /// The backend that made it.
    fn kind(&self) -> IsolationKind;
    /// The core ids the workload may run on.
    fn cpu_list(&self) -> &[usize];
    /// What a forked child must do before exec to enter the domain.
    fn child_setup(&self) -> ChildSetup;
    /// Tells the domain the pid of the workload it holds (a process-group leader), once spawned.
    /// Backends that cannot list their tasks (affinity) track the workload's process tree from it;
    /// cgroup backends find their tasks themselves and ignore it.
    fn adopt(&mut self, pid: i32) {
        let _ = pid;
    }
    /// Resource use so far.
    fn stats(&self) -> DomainStats;
    /// Process ids currently inside the domain (empty for backends that cannot enumerate them).
    fn pids(&self) -> Vec<i32>;
    /// Changes the budget in place, for tasks already running.
    fn update(&mut self, budget: &Budget) -> Result<(), IsolateError>;
    /// Freezes every task in the domain (`true`: no task runs, memory is kept) or thaws them (`false`).
    /// Returns once the kernel reports the new state. Backends without a freezer refuse.
    fn set_frozen(&mut self, frozen: bool) -> Result<(), IsolateError> {
        let _ = frozen;
        Err(IsolateError::Budget(format!(
            "the {} backend cannot pause a workload (it needs the cgroup freezer)",
            self.kind()
        )))
    }
    /// Kills every task left in the domain and removes it. Idempotent; also run on drop.
    fn destroy(&mut self) -> Result<(), IsolateError>;
}

/// Picks the backend: the one asked for, or the best available (cgroup v2 on a unified host, v1 where its
/// controllers are mounted, else affinity). The returned string says why, for the report.
pub fn detect(
    requested: Option<IsolationKind>,
) -> Result<(Box<dyn Isolation>, String), IsolateError> {
    match requested {
        Some(IsolationKind::Affinity) => Ok((
            Box::new(affinity::AffinityBackend::new()),
            "affinity (requested)".to_string(),
        )),
        Some(kind) => match cgroup::CgroupBackend::new(kind) {
            Ok(backend) => Ok((Box::new(backend), format!("{kind} (requested)"))),
            Err(IsolateError::Unavailable { reason, .. }) => Err(IsolateError::NotHere {
                backend: kind,
                reason,
                instead: instead_of(kind),
            }),
            Err(e) => Err(e),
        },
        None => match cgroup::CgroupBackend::detect() {
            Ok(backend) => {
                let why = format!("{} (detected)", backend.kind());
                Ok((Box::new(backend), why))
            }
            Err(e) => Ok((
                Box::new(affinity::AffinityBackend::new()),
                format!("affinity (fallback: {e})"),
            )),
        },
    }
}

/// Refuses `needed` where the backend cannot enforce it (docs/architecture.md §7: a downgrade is said
/// before the first trial, not found at a limited trial). Asked for by name, a backend that rounds a
/// fractional budget up to whole cores is taken at its word; limits it cannot enforce at all stay
/// refused.
pub fn require(
    backend: &dyn Isolation,
    why: &str,
    requested: Option<IsolationKind>,
    needed: &Limits,
    needs: &str,
) -> Result<(), IsolateError> {
    let by_name = requested == Some(backend.kind());
    let without_fractions = Limits {
        fractional_cores: false,
        ..*needed
    };
    let missing = backend
        .enforces()
        .missing(if by_name { &without_fractions } else { needed });
    if missing.is_empty() {
        return Ok(());
    }
    let accept = if backend.enforces().missing(&without_fractions).is_empty() {
        format!(
            "pass {} {} to take whole cores for it",
            crate::error::Setting::Isolation,
            backend.kind()
        )
    } else {
        "drop those limits from the request".to_string()
    };
    Err(IsolateError::Downgrade(Box::new(Downgrade {
        needs: needs.to_string(),
        backend: backend.kind(),
        why: why.to_string(),
        missing,
        way: cgroup::way_to_delegate(),
        accept,
    })))
}

/// What to use on this host in place of the unavailable backend `kind`: the other cgroup version where it
/// works, and detection, which falls back to affinity.
fn instead_of(kind: IsolationKind) -> String {
    let other = match kind {
        IsolationKind::CgroupV1 => IsolationKind::CgroupV2,
        _ => IsolationKind::CgroupV1,
    };
    let detect = format!("leave {} out to detect", crate::error::Setting::Isolation);
    if cgroup::CgroupBackend::new(other).is_ok() {
        format!(
            "use {} {other} (available here), or {detect}",
            crate::error::Setting::Isolation
        )
    } else {
        format!(
            "use {} affinity, or {detect}",
            crate::error::Setting::Isolation
        )
    }
}

impl IsolateError {
    /// Whether the user fixes this by changing their input (a budget, the backend they asked for).
    pub fn is_input(&self) -> bool {
        matches!(
            self,
            IsolateError::Budget(_) | IsolateError::NotHere { .. } | IsolateError::Downgrade(_)
        )
    }
}

/// The block device holding `path`, as the storage limit needs it: the whole disk, not a partition.
pub fn block_device_of(path: &std::path::Path) -> Result<BlockDevice, IsolateError> {
    cgroup::block_device_of(path)
}
