//! One trial: prepare the dataset and its page cache, create the isolation domain, launch the workload,
//! read its progress until the throughput is known, then stop everything and report.
//!
//! This module holds the request, the error and the top-level [`run_trial`]; checking the request and
//! finding the dataset are in `prepare`, watching the running workload in `watch`, turning the domain's
//! readings into telemetry in `summary`, and the recorded result in `result`. Where a trial sits in a
//! profile: docs/architecture.md §2 (the profile flow).

mod prepare;
mod summary;
mod watch;

use crate::error::Setting;
use crate::format::trial::{
    CacheState, DatasetReport, EpochStats, IsolationReport, TrialAllocation, TrialResult,
    TRIAL_SCHEMA,
};
pub use prepare::prepare_dataset;

use super::estimate::EstimatorConfig;
use crate::cancel::Cancel;
use crate::error::InputError;
use crate::format::trial::IsolationKind;
use crate::isolate::{self, pagecache, Budget, IsolateError};
use crate::units::{Bytes, BytesPerSec, Cores};
use crate::workload::launch::{self, LaunchConfig};
use crate::workload::{WorkloadError, WorkloadSpec};
use indicatif::ProgressBar;
use prepare::validate;
use std::time::{Duration, Instant};
use watch::watch;

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
    validate(req)?;
    let spec = &req.spec;
    // A synthetic trial reads no data, but the dataset is still made when absent: a built-in workload's
    // ingestion rate may be relative to this host's one-core rate on it.
    let prepared = prepare_dataset(spec, bar, cancel)?;
    let data = if req.synthetic { None } else { prepared };
    if let Some(sig) = cancel.signal() {
        return Err(TrialError::Interrupted(sig));
    }

    let read_limit = match (req.storage_limit, &data) {
        (Some(bps), Some((dir, _, _))) => Some((isolate::block_device_of(dir)?, bps)),
        _ => None,
    };
    if let Some((_, files, _)) = &data {
        let paths: Vec<_> = files.paths().map(|p| p.to_path_buf()).collect();
        let ctx = |what: &str| format!("{what} the dataset's page cache");
        match req.cache_state {
            CacheState::AsIs => {}
            CacheState::Cold => {
                bar.set_message("evicting the dataset from the page cache");
                pagecache::evict(&paths).map_err(|e| WorkloadError::io(ctx("evicting"), e))?;
            }
            CacheState::Warm => {
                bar.set_message("reading the dataset into the page cache");
                pagecache::prewarm(&paths).map_err(|e| WorkloadError::io(ctx("prewarming"), e))?;
            }
        }
    }
    let dataset_report = match &data {
        Some((dir, files, generated)) => {
            let paths: Vec<_> = files.paths().map(|p| p.to_path_buf()).collect();
            let resident = pagecache::residency(&paths)
                .map_err(|e| WorkloadError::io("reading the dataset's page-cache residency", e))?;
            let bytes = files.total_bytes();
            Some(DatasetReport {
                path: dir.clone(),
                files: files.files.len() as u64,
                bytes,
                mean_file_bytes: bytes as f64 / files.files.len() as f64,
                resident_fraction_at_start: resident.fraction(),
                generated: *generated,
            })
        }
        None => None,
    };

    let (backend, why) = isolate::detect(req.isolation)?;
    // Reads are counted even without a limit: a memory-limited trial's hit ratio comes from them.
    let count_reads_on = match (&read_limit, &data) {
        (None, Some((dir, _, _))) => isolate::block_device_of(dir).ok(),
        _ => None,
    };
    let budget = Budget {
        cpus: req.cpus,
        cpu_list: req.cpu_list.clone(),
        mem_limit: req.mem_limit,
        read_limit,
        count_reads_on,
    };
    isolate::require(
        &*backend,
        &why,
        req.isolation,
        &budget.limits(),
        "this trial",
    )?;
    // Cores come from the host-wide ledger, so two synergy processes never pin the same ones. The lease is
    // declared before the domain, so it is released after the domain is destroyed.
    let lease = match &budget.cpu_list {
        Some(list) => isolate::ledger::claim_exact(list),
        None => isolate::ledger::claim(req.cpus.threads(), &host_cores()),
    }
    .map_err(IsolateError::from)?;
    let budget = Budget {
        cpu_list: Some(lease.cores().to_vec()),
        ..budget
    };
    let why = match lease.unledgered() {
        Some(reason) => format!("{why}; {reason}"),
        None => why,
    };
    let t0 = Instant::now();
    let mut domain = backend.create(&unique_name(), &budget)?;
    let setup_ms = t0.elapsed().as_secs_f64() * 1e3;
    let cpu_list = domain.cpu_list().to_vec();
    let allocation = TrialAllocation {
        cpus: req.cpus,
        cpu_list: cpu_list.clone(),
        mem_limit_bytes: req.mem_limit.map(|b| b.0),
        cache_bytes: req.cache_bytes.map(|b| b.0),
        storage_limit_bytes_per_s: req.storage_limit.map(|b| b.0),
        cache_state: req.cache_state,
        synthetic: req.synthetic,
    };

    // Synthetic runs do not read the dataset, but the command line still names it.
    let dataset_dir = match &data {
        Some((d, _, _)) => Some(d.clone()),
        None => spec.dataset_dir()?,
    };
    let launch_cfg = LaunchConfig {
        spec,
        dataset: dataset_dir.as_deref(),
        cpus: req.cpus,
        cpu_list: &cpu_list,
        cache_bytes: req.cache_bytes,
        synthetic: req.synthetic,
        setup: domain.child_setup(),
        extra_args: &[],
        extra_env: &[],
        ranks: None,
    };
    let mut teardown_ms = 0.0;
    let mut destroyed = Ok(());
    let outcome = launch::launch(&launch_cfg)
        .map_err(TrialError::from)
        .and_then(|mut running| {
            domain.adopt(running.child.id() as i32);
            let out = watch(req, &mut running, domain.as_mut(), bar, cancel);
            // The domain kills what it holds before the workload is reaped, so no process id it
            // signals can have been reused.
            let oom = domain.stats().oom_kills.unwrap_or(0);
            let t1 = Instant::now();
            destroyed = domain.destroy();
            teardown_ms = t1.elapsed().as_secs_f64() * 1e3;
            running.stop(Duration::from_millis(500));
            out.map_err(|e| match e {
                TrialError::WorkloadExited { .. } if oom > 0 => TrialError::OutOfMemory {
                    limit: req.mem_limit.unwrap_or(Bytes(0)),
                    cpus: req.cpus,
                    kills: oom,
                },
                TrialError::WorkloadExited {
                    status,
                    steps,
                    tail: hint,
                } => {
                    let tail = running.stderr_tail(2000);
                    let tail = if tail.is_empty() {
                        hint
                    } else {
                        format!("{hint}; its stderr ends with:\n{tail}")
                    };
                    TrialError::WorkloadExited {
                        status,
                        steps,
                        tail,
                    }
                }
                e => e,
            })
        });
    if outcome.is_err() {
        // Launch failed: nothing ran in the domain, but it must still go.
        destroyed = destroyed.and(domain.destroy());
    }
    let obs = outcome?;
    destroyed?;

    Ok(TrialResult {
        schema: TRIAL_SCHEMA.into(),
        workload: spec.name.clone(),
        spec: spec.origin.clone(),
        allocation,
        throughput: obs.estimate,
        stop_reason: obs.stop_reason,
        steps: obs.steps,
        samples: obs.samples,
        duration_s: obs.duration_s,
        isolation: IsolationReport {
            backend: backend.kind(),
            chosen_because: why,
            setup_ms,
            teardown_ms,
        },
        dataset: dataset_report,
        telemetry: obs.telemetry,
        disturbance: obs.disturbance,
        epochs: obs.epochs,
        malformed_lines: obs.malformed,
        probe: obs.probe,
    })
}
