//! One workload's cgroup: the limits of its budget written and rewritten (a job is resized live), its
//! tasks frozen and thawed (paused, docs/architecture.md §2 `run`), and on destroy every task killed and
//! every directory removed. Its counters are read in `stats`.

use super::{cg_err, io_err};
use crate::format::trial::IsolationKind;
use crate::isolate::cpus::{self, CFS_PERIOD_US};
use crate::isolate::{BlockDevice, Budget, ChildSetup, Domain, DomainStats, IsolateError};
use crate::units::BytesPerSec;
use cgroups_rs::fs::blkio::BlkIoController;
use cgroups_rs::fs::cpu::CpuController;
use cgroups_rs::fs::cpuset::CpuSetController;
use cgroups_rs::fs::freezer::FreezerController;
use cgroups_rs::fs::memory::MemController;
use cgroups_rs::fs::{Cgroup, Controller};
use cgroups_rs::FreezerState;
use std::collections::BTreeSet;
use std::fs::{self, File, OpenOptions};
use std::io::ErrorKind;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The read "limit" that only makes cgroup v1 count a domain's reads: 1 PB/s, far above any device.
const COUNTING_ONLY_BYTES_PER_S: f64 = 1e15;
/// How long `destroy` waits for killed tasks to leave the cgroup.
const KILL_TIMEOUT: Duration = Duration::from_secs(3);
/// How long `destroy` retries `rmdir` while the kernel still reports the cgroup busy.
const RMDIR_TIMEOUT: Duration = Duration::from_secs(1);
/// How long to wait for a v1 freezer to reach FROZEN before killing anyway.
const FREEZE_TIMEOUT: Duration = Duration::from_millis(200);
/// How long pausing a workload waits for its freezer to report FROZEN.
const PAUSE_TIMEOUT: Duration = Duration::from_secs(5);

/// One cgroup (a directory per v1 hierarchy, or one v2 directory) holding one workload.
///
/// The descriptors in [`Domain::child_setup`] belong to this value: keep it alive until the child has
/// been spawned. Dropping it destroys the cgroup and kills what is left inside.
pub struct CgroupDomain {
    pub(super) kind: IsolationKind,
    pub(super) cg: Cgroup,
    /// Every directory of this cgroup, one per hierarchy (v1) or the single v2 one.
    pub(super) dirs: Vec<PathBuf>,
    pub(super) cores: Vec<usize>,
    /// v2 without the cpuset controller: pin with `sched_setaffinity` instead.
    pub(super) pin_with_affinity: bool,
    /// Open `cgroup.procs` of every hierarchy, written to by the child before exec.
    pub(super) procs: Vec<File>,
    pub(super) read_dev: Option<BlockDevice>,
    pub(super) mem_limited: bool,
    pub(super) destroyed: bool,
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

/// The fewest cores the CFS quotas of the cgroups above `dir` allow (quota over period); `None` when
/// none of them has a quota.
fn enclosing_cores(dir: &Path) -> Option<f64> {
    let mut least: Option<f64> = None;
    for d in dir.ancestors().skip(1) {
        let read =
            |f: &str| -> Option<f64> { fs::read_to_string(d.join(f)).ok()?.trim().parse().ok() };
        let (Some(quota), Some(period)) = (read("cpu.cfs_quota_us"), read("cpu.cfs_period_us"))
        else {
            break;
        };
        if quota > 0.0 && period > 0.0 {
            least = Some(least.map_or(quota / period, |l: f64| l.min(quota / period)));
        }
    }
    least
}

impl CgroupDomain {
    /// Every directory of this cgroup (one per v1 hierarchy, one on v2); empty ones after `destroy`
    /// are gone from the filesystem.
    pub fn paths(&self) -> &[PathBuf] {
        &self.dirs
    }

    pub(super) fn dir_of<'a, T>(&'a self) -> Option<&'a Path>
    where
        &'a T: From<&'a cgroups_rs::fs::Subsystem>,
        T: Controller + cgroups_rs::fs::ControllIdentifier + 'a,
    {
        if self.kind == IsolationKind::CgroupV2 {
            return self.dirs.first().map(PathBuf::as_path);
        }
        self.cg.controller_of::<T>().map(|c| c.path())
    }

    pub(super) fn open_procs(&self) -> Result<Vec<File>, IsolateError> {
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
    pub(super) fn apply(
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
            let q = match (
                quota,
                self.dir_of::<CpuController>().and_then(enclosing_cores),
            ) {
                // v1 refuses a quota above an enclosing cgroup's (EINVAL); the domain could not get
                // more than that anyway, and a trial that wanted more is marked disturbed by the
                // enclosing cgroup's throttling (docs/profile-format.md, "Disturbed trials").
                (Some(q), Some(cores)) => {
                    q.min((cores * CFS_PERIOD_US as f64).floor() as u64) as i64
                }
                (Some(q), None) => q as i64,
                (None, _) => -1,
            };
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

    pub(super) fn freezer(&self) -> Option<&FreezerController> {
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
pub(super) fn remove_cgroup_dir(dir: &Path) -> Result<(), IsolateError> {
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
        self.read_stats()
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
        // v1's freezer.state says FREEZING until every task is stopped; v2's cgroup.freeze holds only
        // what was asked, and cgroup.events' `frozen` says when the kernel has done it.
        let events = self.dirs.first().map(|d| d.join("cgroup.events"));
        let state = || match (&events, self.kind) {
            (Some(ev), IsolationKind::CgroupV2) => fs::read_to_string(ev)
                .map_err(|e| e.to_string())
                .and_then(
                    |t| match t.lines().find_map(|l| l.strip_prefix("frozen ")) {
                        Some("1") => Ok(FreezerState::Frozen),
                        Some("0") => Ok(FreezerState::Thawed),
                        _ => Err(format!("no `frozen` line in {}", ev.display())),
                    },
                ),
            _ => f.state().map_err(|e| e.to_string()),
        };
        let start = Instant::now();
        loop {
            match state() {
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

#[cfg(test)]
mod tests {
    use super::enclosing_cores;
    use std::fs;

    #[test]
    fn the_tightest_quota_above_a_domain_bounds_it() {
        let root = tempfile::tempdir().unwrap();
        let set = |dir: &std::path::Path, quota: i64, period: u64| {
            fs::create_dir_all(dir).unwrap();
            fs::write(dir.join("cpu.cfs_quota_us"), format!("{quota}\n")).unwrap();
            fs::write(dir.join("cpu.cfs_period_us"), format!("{period}\n")).unwrap();
        };
        // hierarchy root (no quota) / half-speed (1 core) / synergy (1.5 cores, 50 ms) / domain
        let top = root.path().join("cpu");
        let half = top.join("half-speed");
        let ours = half.join("synergy");
        let domain = ours.join("trial");
        set(&top, -1, 100_000);
        set(&half, 100_000, 100_000);
        set(&ours, 75_000, 50_000);
        set(&domain, -1, 100_000);
        assert_eq!(enclosing_cores(&domain), Some(1.0));
        set(&half, 50_000, 100_000);
        assert_eq!(enclosing_cores(&domain), Some(0.5));
        // Nothing above has a quota: the domain's own is free.
        set(&half, -1, 100_000);
        set(&ours, -1, 50_000);
        assert_eq!(enclosing_cores(&domain), None);
    }
}
