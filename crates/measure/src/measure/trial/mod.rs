//! One trial: prepare the dataset and its page cache, create the isolation domain, launch the workload,
//! read its progress until the throughput is known, then stop everything and report.
//!
//! This module holds the request, the error and the top-level [`run_trial`]; checking the request and
//! finding the dataset are in `prepare`, one launch in its domain, measured at one budget or several in
//! turn, in `live`, watching the running workload in `watch`, and turning the domain's readings into
//! telemetry in `summary`. Where a trial sits in a profile: docs/architecture.md §2 (the profile flow).

mod live;
mod prepare;
mod summary;
mod watch;

use crate::error::Setting;
use crate::format::trial::{CacheState, EpochStats, TrialResult};
pub use live::LiveTrial;
pub use prepare::prepare_dataset;

use super::estimate::EstimatorConfig;
use crate::cancel::Cancel;
use crate::error::InputError;
use crate::format::trial::IsolationKind;
use crate::isolate::IsolateError;
use crate::units::{Bytes, BytesPerSec, Cores};
use crate::workload::{WorkloadError, WorkloadSpec};
use indicatif::ProgressBar;
use prepare::validate;
use std::time::Duration;

/// One trial to run.
#[derive(Debug, Clone)]
pub struct TrialRequest {
    /// The workload.
    pub spec: WorkloadSpec,
    /// Cores granted (fractional with a quota).
    pub cpus: Cores,
    /// Specific cores, else the lowest-numbered.
    pub cpu_list: Option<Vec<usize>>,
    /// Memory limit for the domain (bounds the page cache).
    pub mem_limit: Option<Bytes>,
    /// Application cache budget (`SYNERGY_CACHE_BYTES`).
    pub cache_bytes: Option<Bytes>,
    /// Page-cache state of the dataset at launch.
    pub cache_state: CacheState,
    /// Storage read-bandwidth limit on the dataset's device.
    pub storage_limit: Option<BytesPerSec>,
    /// Feed synthetic batches (measures the accelerator's ingestion rate).
    pub synthetic: bool,
    /// Isolation backend to use; `None` detects.
    pub isolation: Option<IsolationKind>,
    /// Warm-up, stopping rule and limits.
    pub estimator: EstimatorConfig,
    /// Stop with an error when no progress arrives for this long.
    pub no_progress_timeout: Duration,
}

impl TrialRequest {
    /// A request with defaults for everything but the workload and its cores.
    pub fn new(spec: WorkloadSpec, cpus: Cores) -> Self {
        TrialRequest {
            spec,
            cpus,
            cpu_list: None,
            mem_limit: None,
            cache_bytes: None,
            cache_state: CacheState::AsIs,
            storage_limit: None,
            synthetic: false,
            isolation: None,
            estimator: EstimatorConfig::default(),
            no_progress_timeout: Duration::from_secs(30),
        }
    }
}

/// Why a trial could not give a result.
#[derive(Debug, thiserror::Error)]
pub enum TrialError {
    /// Bad input (names the file or setting).
    #[error(transparent)]
    Input(#[from] InputError),
    /// Setting up or launching the workload failed.
    #[error(transparent)]
    Workload(#[from] WorkloadError),
    /// The isolation backend failed.
    #[error(transparent)]
    Isolate(#[from] IsolateError),
    /// The kernel killed the workload for lack of memory under its limit.
    #[error("the workload was killed by the kernel's OOM killer ({kills} kill(s)) under a memory limit of {limit}: it needs more memory than that at {cpus} cores; raise {}", Setting::MemLimit)]
    OutOfMemory {
        /// The memory limit.
        limit: Bytes,
        /// Cores it ran on.
        cpus: Cores,
        /// OOM kills counted in its domain.
        kills: u64,
    },
    /// The workload exited before a throughput could be estimated.
    #[error("the workload exited ({status}) after {steps} steps, before its throughput could be estimated{tail}")]
    WorkloadExited {
        /// Exit status.
        status: String,
        /// Steps it reported.
        steps: u64,
        /// The end of its stderr, formatted for the message.
        tail: String,
    },
    /// Not enough progress arrived in the allowed time.
    #[error("{0}")]
    NoEstimate(String),
    /// A launcher started no rank of the job: its rendezvous waited for nodes that never came (a
    /// command for several nodes run on one).
    #[error("{0}")]
    NoRanks(String),
    /// The longest allowed time passed with too few steps to estimate from (a slow workload).
    #[error(
        "only {steps} steps in {duration_s:.1} s, too few to estimate throughput; raise {}",
        Setting::MaxTotalS
    )]
    TooFewSteps {
        /// Steps the workload reported.
        steps: u64,
        /// How long the trial ran, seconds.
        duration_s: f64,
    },
    /// SIGINT or SIGTERM arrived; everything was cleaned up.
    #[error("interrupted by signal {0}; the workload was stopped and its cgroup removed")]
    Interrupted(i32),
}

impl TrialError {
    /// Whether the user fixes this by changing their input (a spec, a flag, a budget).
    pub fn is_input(&self) -> bool {
        matches!(
            self,
            TrialError::Input(_)
                | TrialError::OutOfMemory { .. }
                | TrialError::NoRanks(_)
                | TrialError::Workload(WorkloadError::Input(_))
        ) || matches!(self, TrialError::Isolate(e) if e.is_input())
    }
}

/// Cores this process may run on (its affinity mask), which bounds any budget.
pub fn host_cores() -> Vec<usize> {
    crate::isolate::cpus::own_affinity().unwrap_or_else(|_| {
        (0..std::thread::available_parallelism().map_or(1, |n| n.get())).collect()
    })
}

fn unique_name() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    format!(
        "synergy-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}

/// Runs one trial. `bar` shows progress on a terminal (pass `ProgressBar::hidden()` for none); `cancel`
/// stops it early, cleaning up, with [`TrialError::Interrupted`].
pub fn run_trial(
    req: &TrialRequest,
    bar: &ProgressBar,
    cancel: &Cancel,
) -> Result<TrialResult, TrialError> {
    let mut live = LiveTrial::start(req, bar, cancel)?;
    let mut result = live.measure(req.cpus, &req.estimator, bar, cancel)?;
    result.isolation.teardown_ms = live.finish()?;
    Ok(result)
}
