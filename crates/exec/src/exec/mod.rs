//! The executor: runs a job list for real with the same [`Policy`](crate::sched::Policy) and
//! [`Mechanism`](crate::sched::Mechanism) the simulator uses. Each round it plans allocations from the
//! jobs' real progress ([`plan`]), turns them into specific cores and GPUs, and has a [`Backend`] apply
//! them: start, resize live, pause, resume or stop jobs. [`jobs`] is the job-list format, [`local`] the
//! one-server backend (cgroups and the freezer), [`state`] the file that lets a killed executor resume,
//! [`executor`] the round loop and its report (real against predicted JCT), [`slurm`] a client of a
//! Slurm cluster, and [`slurm_backend`] the backend that runs each allocation as a Slurm job. What the
//! backends derive alike from a job (names, caches, loader cores) is in [`launch_env`]; the executor
//! reaches a backend only through [`Backend`] (`docs/architecture.md` §2).

pub mod executor;
#[cfg(test)]
mod fake;
pub mod jobs;
pub mod launch_env;
pub mod local;
pub mod observe;
pub mod planner;
pub mod slurm;
pub mod slurm_backend;

use crate::error::InputError;
use crate::format::run_state::{AllocPart, Allocation, JobHandle};
use crate::isolate::IsolateError;
use crate::units::{Bytes, Cores};
use crate::workload::{WorkloadError, WorkloadSpec};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// Errors of the executor and its backends.
#[derive(Debug, thiserror::Error)]
pub enum ExecError {
    /// Bad input (job list, flag, state file); names the file or flag and the field.
    #[error(transparent)]
    Input(#[from] InputError),
    /// Creating, resizing, pausing or removing an isolation domain failed.
    #[error(transparent)]
    Isolate(#[from] IsolateError),
    /// Launching a workload failed.
    #[error(transparent)]
    Workload(#[from] WorkloadError),
    /// The simulator (for predictions) refused the job list.
    #[error(transparent)]
    Sim(#[from] crate::sim::SimError),
    /// A file could not be read or written.
    #[error("{context}: {source}")]
    Io {
        /// What, naming the path.
        context: String,
        /// The failure.
        #[source]
        source: std::io::Error,
    },
    /// The Slurm cluster refused or failed a request.
    #[error(transparent)]
    Slurm(#[from] slurm::SlurmError),
    /// Anything else, described.
    #[error("{0}")]
    Other(String),
}

impl From<crate::format::observation::LogError> for ExecError {
    fn from(e: crate::format::observation::LogError) -> Self {
        ExecError::Io {
            context: e.context,
            source: e.source,
        }
    }
}

impl ExecError {
    /// A backend was asked to start a job it already runs (an executor bug, not the user's).
    pub fn already_started(job: &str) -> ExecError {
        ExecError::Other(format!("job `{job}` is already started"))
    }

    /// Whether the user fixes this by changing their input (exit code 2).
    pub fn is_input(&self) -> bool {
        match self {
            ExecError::Input(_) => true,
            ExecError::Isolate(e) => e.is_input(),
            ExecError::Workload(WorkloadError::Input(_)) => true,
            ExecError::Sim(s) => s.is_input(),
            _ => false,
        }
    }
}

/// One server a backend can place jobs on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ServerInfo {
    /// Host or node name.
    pub name: String,
    /// GPU ids (indices for `CUDA_VISIBLE_DEVICES`, or emulated slots).
    pub gpus: Vec<u32>,
    /// Core ids jobs may use.
    pub cores: Vec<usize>,
    /// Memory jobs may use.
    pub memory: Bytes,
    /// Jobs get whole cores and whole MiB only (a Slurm node): the planner rounds the mechanism's shares.
    #[serde(default)]
    pub whole_cores: bool,
}

/// The one part of `alloc`, for a backend that runs every job on one server; an error names `backend` when
/// the job was spread (a planner over that backend's one server never spreads a job).
pub fn one_server<'a>(alloc: &'a Allocation, backend: &str) -> Result<&'a AllocPart, ExecError> {
    match alloc.parts.as_slice() {
        [one] => Ok(one),
        parts => Err(ExecError::Other(format!(
            "the {backend} backend runs a job on one server, but this allocation has {} parts",
            parts.len()
        ))),
    }
}

/// How much work a job does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Work {
    /// Samples in all.
    Samples(u64),
    /// Steps (batches) in all.
    Steps(u64),
}

impl Work {
    /// The flag that tells a built-in workload where to stop (the resume contract).
    pub fn stop_args(&self) -> Vec<String> {
        match self {
            Work::Samples(n) => vec!["--max-samples".into(), n.to_string()],
            Work::Steps(n) => vec!["--max-steps".into(), n.to_string()],
        }
    }
}

/// Everything a backend needs to (re)start one job.
#[derive(Debug, Clone)]
pub struct JobLaunch<'a> {
    /// The job's name in the job list (unique).
    pub name: &'a str,
    /// Its workload.
    pub spec: &'a WorkloadSpec,
    /// Its model's name in the catalog (its profile's), which the Slurm backend records in the job's
    /// comment for accounting (docs/traces.md, sacct).
    pub model: &'a str,
    /// Its dataset directory, prepared.
    pub dataset: Option<&'a Path>,
    /// Memory it needs besides an application cache, bytes ([`jobs::Job::footprint_bytes`]).
    pub footprint_bytes: u64,
    /// Its work.
    pub work: Work,
    /// Its `SYNERGY_STATE_FILE`: where it keeps its totals across restarts.
    pub state_file: &'a Path,
    /// Cores its data loaders are sized for (`SYNERGY_CPUS`): the most it can be given during the run,
    /// so a job that grows live can use what it gets; the cgroup enforces the current allocation.
    pub loader_cpus: Cores,
}

/// Progress of one job, as the backend last saw it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct JobPoll {
    /// Samples done in all, earlier launches included.
    pub samples_done: u64,
    /// Steps done in all, earlier launches included.
    pub steps_done: u64,
    /// Set once the current launch has exited.
    pub exit: Option<JobExit>,
}

/// How a launch ended.
#[derive(Debug, Clone, PartialEq)]
pub struct JobExit {
    /// Exit status 0.
    pub success: bool,
    /// The status, for people (`exit status: 3`, `signal: 9`).
    pub status: String,
    /// The end of its stderr.
    pub stderr_tail: String,
    /// The kernel's OOM killer ended it (its cgroup's `oom_kill` count rose while it ran, or Slurm
    /// says `OUT_OF_MEMORY`): it had less memory than it runs in.
    pub oom_killed: bool,
}

/// How a new allocation was applied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    /// In place, the job kept running.
    Live,
    /// The job was stopped and started again with the new allocation, from its saved progress.
    Restarted,
    /// Nothing the backend controls changed (Slurm picks core and GPU ids itself), or the job is paused
    /// and takes the allocation when it resumes.
    Same,
}

/// Where jobs run: one shared server with cgroups ([`local::LocalBackend`]), or a Slurm cluster. The
/// executor decides; the backend only applies. Job names are the job list's, unique in a run.
pub trait Backend {
    /// Its name on the command line.
    fn name(&self) -> &'static str;
    /// The servers jobs can be placed on (discovered when the backend was made).
    fn servers(&self) -> &[ServerInfo];
    /// Starts `job` with `alloc` (from its saved progress, if any).
    fn start(&mut self, job: &JobLaunch, alloc: &Allocation) -> Result<(), ExecError>;
    /// Gives a running or paused `job` a new allocation: live where the backend can, else by stopping
    /// and starting it again from its saved progress. A paused job stays paused.
    fn reallocate(&mut self, job: &JobLaunch, alloc: &Allocation) -> Result<Change, ExecError>;
    /// Pauses a running job; it keeps its memory and makes no progress.
    fn pause(&mut self, job: &str) -> Result<(), ExecError>;
    /// Resumes a paused job.
    fn resume(&mut self, job: &str) -> Result<(), ExecError>;
    /// Progress and exit of a job.
    fn poll(&mut self, job: &str) -> Result<JobPoll, ExecError>;
    /// Starts the job's current launch again after it crashed, with the same allocation.
    fn restart(&mut self, job: &JobLaunch) -> Result<(), ExecError>;
    /// Stops a job and removes everything the backend made for it. Idempotent.
    fn stop(&mut self, job: &str) -> Result<(), ExecError>;
    /// What a later executor needs to clean up this job.
    fn handle(&self, job: &str) -> Option<JobHandle>;
    /// The job's throughput since the last call (or since it was started, resized or resumed), and
    /// whether other work disturbed it; then starts a new window. `None` when too few steps arrived for
    /// an estimate, or when the backend cannot observe (the default).
    fn observe(&mut self, job: &str) -> Option<observe::Window> {
        let _ = job;
        None
    }
    /// Kills and removes what the dead executor with process id `executor_pid` left behind: the jobs of
    /// the `handles` its state file saved, and whatever else of its run the backend can find by name
    /// ([`launch_env::domain_prefix`]). Returns how many jobs were removed.
    fn clean_orphans(
        &mut self,
        executor_pid: u32,
        handles: &[JobHandle],
    ) -> Result<usize, ExecError>;
    /// Cores the loaders of a job of `gpus` GPUs are sized for (its `SYNERGY_CPUS`,
    /// [`JobLaunch::loader_cpus`]), given its per-GPU best case: by default the most the mechanism could
    /// give it on the widest server, so a job that grows live can use what it gets.
    fn loader_cpus(&self, best_cpus_per_gpu: f64, gpus: u32) -> Cores {
        let widest = self
            .servers()
            .iter()
            .max_by_key(|s| s.gpus.len())
            .expect("a backend has a server");
        launch_env::loader_cores(best_cpus_per_gpu, gpus, widest)
    }
}

/// The directory of per-job workload state files beside the executor's state file.
pub fn job_state_dir(state_file: &Path) -> PathBuf {
    let mut name = state_file
        .file_name()
        .map(|n| n.to_os_string())
        .unwrap_or_default();
    name.push(".jobs");
    state_file.with_file_name(name)
}
