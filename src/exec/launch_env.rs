//! What every backend derives the same way from a job and its allocation (the launch contract,
//! `docs/architecture.md` §3.1): the names of what a run makes, the application cache a job gets, the
//! cores its loaders are sized for, and how much of a failed job's stderr is reported. Backends share
//! these so that a job behaves the same wherever it runs; none of them depends on how a backend isolates.

use super::{Allocation, JobLaunch, ServerInfo};
use crate::units::{Bytes, Cores};
use crate::workload::spec::CacheKind;

/// Bytes of a crashed workload's stderr that are reported.
pub(crate) const STDERR_TAIL: u64 = 2000;

/// What the names of everything an executor makes start with (cgroups, Slurm jobs), whatever its pid.
pub(crate) const RUN_PREFIX: &str = "synergy-run-";

/// The name prefix of what the executor with process id `pid` makes (a cgroup or Slurm job per job):
/// unique to that executor, so a later one can find what a dead one left.
pub fn domain_prefix(pid: u32) -> String {
    format!("{RUN_PREFIX}{pid}-")
}

/// The application cache a workload with one gets under `alloc`: its memory less its footprint.
pub(crate) fn app_cache_bytes(job: &JobLaunch, alloc: &Allocation) -> Option<Bytes> {
    match job.spec.cache {
        CacheKind::App => Some(Bytes(alloc.memory.0.saturating_sub(job.footprint_bytes))),
        CacheKind::PageCache => None,
    }
}

/// Cores a job's loaders are sized for: the most the mechanism could give it on `server`.
pub fn loader_cores(best_cpus_per_gpu: f64, gpus: u32, server: &ServerInfo) -> Cores {
    let proportional = server.cores.len() as f64 * gpus as f64 / server.gpus.len().max(1) as f64;
    Cores(
        (best_cpus_per_gpu * gpus as f64)
            .max(proportional)
            .min(server.cores.len() as f64),
    )
}
