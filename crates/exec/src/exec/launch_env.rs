//! What every backend derives the same way from a job and its allocation (the launch contract,
//! `docs/architecture.md` §3.1): the names of what a run makes, the application cache a job gets, the
//! cores its loaders are sized for, and how much of a failed job's stderr is reported. Backends share
//! these so that a job behaves the same wherever it runs; none of them depends on how a backend isolates.

use super::{AllocPart, JobLaunch, ServerInfo};
use crate::format::resume::ResumeState;
use crate::units::{Bytes, Cores};
use crate::workload::spec::CacheKind;
use crate::workload::WorkloadError;
use std::path::{Path, PathBuf};

/// Bytes of a crashed workload's stderr that are reported.
pub(crate) const STDERR_TAIL: u64 = 2000;

/// What the names of everything an executor makes start with (cgroups, Slurm jobs), whatever its pid.
pub(crate) const RUN_PREFIX: &str = "synergy-run-";

/// The name prefix of what the executor with process id `pid` makes (a cgroup or Slurm job per job):
/// unique to that executor, so a later one can find what a dead one left.
pub fn domain_prefix(pid: u32) -> String {
    format!("{RUN_PREFIX}{pid}-")
}

/// The application cache a workload with one gets under `alloc` (its part on one server: every task of
/// a spread job holds its own cache): its memory less its footprint.
pub(crate) fn app_cache_bytes(job: &JobLaunch, alloc: &AllocPart) -> Option<Bytes> {
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

/// The state file of task `task` of a job spread over several servers (`STATE.taskK`): every task keeps
/// its own totals, and the job's progress is their sum with the job's own file (docs/run.md, "Jobs over
/// several servers").
pub fn task_state_file(state_file: &Path, task: usize) -> PathBuf {
    let mut name = state_file.as_os_str().to_owned();
    name.push(format!(".task{task}"));
    PathBuf::from(name)
}

/// Every task state file of the job whose state file is `state_file` that exists now, of any layout it
/// ran in.
pub fn task_state_files(state_file: &Path) -> Vec<PathBuf> {
    let (Some(dir), Some(name)) = (state_file.parent(), state_file.file_name()) else {
        return Vec::new();
    };
    let prefix = format!("{}.task", name.to_string_lossy());
    let dir = if dir.as_os_str().is_empty() {
        Path::new(".")
    } else {
        dir
    };
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut files: Vec<PathBuf> = entries
        .filter_map(|e| e.ok())
        .filter(|e| {
            e.file_name().to_str().is_some_and(|n| {
                n.strip_prefix(&prefix)
                    .is_some_and(|k| !k.is_empty() && k.bytes().all(|b| b.is_ascii_digit()))
            })
        })
        .map(|e| dir.join(e.file_name()))
        .collect();
    files.sort();
    files
}

/// A job's saved progress: its own state file's totals plus those of every task file it has.
pub fn saved_progress(state_file: &Path) -> Result<ResumeState, WorkloadError> {
    let mut total = ResumeState::read(state_file)?;
    for f in task_state_files(state_file) {
        let t = ResumeState::read(&f)?;
        total.samples_done += t.samples_done;
        total.steps_done += t.steps_done;
    }
    Ok(total)
}
