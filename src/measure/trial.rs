//! One trial: prepare the dataset and its page cache, create the isolation domain, launch the workload,
//! read its progress until the throughput is known, then stop everything and report.

use super::contention::{self, Disturbance, HostReading, Reading};
use super::estimate::{Estimate, Estimator, EstimatorConfig, StopReason};
use super::progress::{
    self, PipeProgress, ProgressEvent, ProgressSource, RegexMatcher, RegexProgress,
};
use super::telemetry::{AppCacheCounts, GpuSampler, Peaks, Telemetry};
use crate::cancel::Cancel;
use crate::error::InputError;
use crate::isolate::{self, pagecache, Budget, IsolateError, IsolationKind};
use crate::units::{Bytes, BytesPerSec, Cores};
use crate::workload::dataset::{self, DatasetFiles};
use crate::workload::launch::{self, LaunchConfig, ProgressStream};
use crate::workload::probe::ProbeReport;
use crate::workload::spec::ProgressSpec;
use crate::workload::{WorkloadError, WorkloadSpec};
use indicatif::ProgressBar;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::time::{Duration, Instant};

/// The schema name of a trial result in JSON.
pub const TRIAL_SCHEMA: &str = "synergy-trial/1";

/// What the dataset's pages look like when the workload starts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CacheState {
    /// Left as it is.
    #[default]
    AsIs,
    /// Evicted from the page cache (per file), so every first read goes to storage.
    Cold,
    /// Read into the page cache first, so no read goes to storage.
    Warm,
}

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

/// The allocation a trial ran under, as recorded in results.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TrialAllocation {
    /// Cores granted.
    pub cpus: Cores,
    /// Core ids the workload could run on.
    pub cpu_list: Vec<usize>,
    /// Memory limit, bytes.
    pub mem_limit_bytes: Option<u64>,
    /// Application cache budget, bytes.
    pub cache_bytes: Option<u64>,
    /// Storage read limit, bytes per second.
    pub storage_limit_bytes_per_s: Option<f64>,
    /// Page-cache state at launch.
    pub cache_state: CacheState,
    /// Synthetic input.
    pub synthetic: bool,
}

/// How the budget was enforced, and what it cost.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IsolationReport {
    /// Backend used.
    pub backend: IsolationKind,
    /// Why that backend (requested, detected, fallback and its reason).
    pub chosen_because: String,
    /// Time to create the domain, milliseconds.
    pub setup_ms: f64,
    /// Time to remove it (killing what was left), milliseconds.
    pub teardown_ms: f64,
}

/// The dataset as the trial found it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DatasetReport {
    /// Directory.
    pub path: PathBuf,
    /// Data files.
    pub files: u64,
    /// Bytes in data files.
    pub bytes: u64,
    /// Mean bytes per file.
    pub mean_file_bytes: f64,
    /// Fraction of its bytes in the page cache at launch.
    pub resident_fraction_at_start: f64,
    /// Whether this trial generated it.
    pub generated: bool,
}

/// The result of a trial.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TrialResult {
    /// `synergy-trial/1`.
    pub schema: String,
    /// Workload name.
    pub workload: String,
    /// Where its spec came from.
    pub spec: String,
    /// The allocation.
    pub allocation: TrialAllocation,
    /// Throughput over the measured window.
    pub throughput: Estimate,
    /// Why the trial stopped.
    pub stop_reason: StopReason,
    /// Steps reported, warm-up included.
    pub steps: u64,
    /// Samples reported, warm-up included.
    pub samples: f64,
    /// Wall time from launch to stop, seconds.
    pub duration_s: f64,
    /// Isolation backend and its overhead.
    pub isolation: IsolationReport,
    /// The dataset, when the workload has one.
    pub dataset: Option<DatasetReport>,
    /// Resource use.
    pub telemetry: Telemetry,
    /// What the trial got against what it was granted over its measured window, and whether other work
    /// took enough of its cores that the result is not this allocation's (absent in results made before
    /// synergy checked, or when the window was too short to judge).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disturbance: Option<Disturbance>,
    /// Every epoch that completed during the trial, for workloads that say which epoch a step is in.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub epochs: Vec<EpochStats>,
    /// Progress lines that did not follow the protocol.
    pub malformed_lines: u64,
    /// What a zero-change probe saw of the script (batch size, dataset, device, a synthetic replay).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probe: Option<ProbeReport>,
}

/// One complete epoch of a trial (warm-up included): a cold trial's first epoch is all misses, a
/// memory-limited one's later epochs show its cache settling.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EpochStats {
    /// The epoch, as the workload numbers it.
    pub epoch: u64,
    /// Samples in it.
    pub samples: f64,
    /// Its length, seconds.
    pub seconds: f64,
    /// Samples per second over it.
    pub samples_per_s: f64,
    /// The domain's CPU-seconds per sample over it.
    pub cpu_s_per_sample: Option<f64>,
    /// Bytes read from storage per sample over it.
    pub storage_read_bytes_per_sample: Option<f64>,
}

impl TrialResult {
    /// Whether other work on the host took CPU this trial wanted (see [`Disturbance`]).
    pub fn disturbed(&self) -> bool {
        self.disturbance.as_ref().is_some_and(|d| d.disturbed)
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
    #[error("the workload was killed by the kernel's OOM killer ({kills} kill(s)) under a memory limit of {limit}: it needs more memory than that at {cpus} cores; raise setting `mem_limit`")]
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
    /// The longest allowed time passed with too few steps to estimate from (a slow workload).
    #[error("only {steps} steps in {duration_s:.1} s, too few to estimate throughput; raise setting `estimator.max_total_s`")]
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
                | TrialError::Workload(WorkloadError::Input(_))
                | TrialError::Isolate(IsolateError::Budget(_))
        )
    }
}

/// Cores this process may run on (its affinity mask), which bounds any budget.
pub fn host_cores() -> Vec<usize> {
    match nix::sched::sched_getaffinity(nix::unistd::Pid::from_raw(0)) {
        Ok(set) => (0..nix::sched::CpuSet::count())
            .filter(|&i| set.is_set(i).unwrap_or(false))
            .collect(),
        Err(_) => (0..std::thread::available_parallelism().map_or(1, |n| n.get())).collect(),
    }
}

fn validate(req: &TrialRequest) -> Result<(), InputError> {
    let cores = host_cores().len();
    if !(req.cpus.0.is_finite() && req.cpus.0 > 0.0) {
        return Err(InputError::setting(
            "cpus",
            "must be a positive number of cores",
        ));
    }
    if req.cpus.0 > cores as f64 {
        return Err(InputError::setting(
            "cpus",
            format!("{} cores asked for, but this host has {cores}", req.cpus),
        ));
    }
    if let Some(list) = &req.cpu_list {
        if list.len() < req.cpus.threads() {
            return Err(InputError::setting(
                "cpu_list",
                format!(
                    "{} cores listed, but setting `cpus` {} needs {}",
                    list.len(),
                    req.cpus,
                    req.cpus.threads()
                ),
            ));
        }
    }
    // The spec's footprint is a floor the workload cannot run below; without one, any budget is tried.
    let footprint = req.spec.footprint.unwrap_or(Bytes(0));
    if let Some(mem) = req.mem_limit {
        if mem < footprint {
            return Err(InputError::setting(
                "mem_limit",
                format!(
                    "{mem} is below the least memory the workload runs in, {footprint} (field `footprint` in {})",
                    req.spec.origin
                ),
            ));
        }
        if let Some(cache) = req.cache_bytes {
            if Bytes(footprint.0 + cache.0) > mem {
                return Err(InputError::setting(
                    "mem_limit",
                    format!("{mem} cannot hold the footprint ({footprint}) plus setting `cache_bytes` ({cache})"),
                ));
            }
        }
        if req.cache_state == CacheState::Warm {
            return Err(InputError::setting(
                "cache_state=warm",
                "with setting `mem_limit`, pages prewarmed by synergy would be charged outside the workload's cgroup; \
                 use setting `cache_state=cold` with setting `estimator.warmup_epochs` 1 instead",
            ));
        }
    }
    if req.storage_limit.is_some() && req.spec.dataset.is_none() {
        return Err(InputError::setting(
            "storage_limit",
            format!(
                "the workload in {} has no dataset to throttle",
                req.spec.origin
            ),
        ));
    }
    if let Some(BytesPerSec(b)) = req.storage_limit {
        if !(b.is_finite() && b >= 1.0) {
            return Err(InputError::setting(
                "storage_limit",
                "must be a positive rate",
            ));
        }
    }
    Ok(())
}

/// Finds the dataset, generating it when absent and the spec says how.
pub(crate) fn prepare_dataset(
    spec: &WorkloadSpec,
    bar: &ProgressBar,
    cancel: &Cancel,
) -> Result<Option<(PathBuf, DatasetFiles, bool)>, TrialError> {
    let Some(dir) = spec.dataset_dir()? else {
        return Ok(None);
    };
    let mut generated = false;
    if !dir.exists() {
        let gen = spec.dataset.as_ref().and_then(|d| d.generate.clone()).ok_or_else(|| {
            InputError::field(
                &spec.origin,
                "dataset.path",
                format!(
                    "`{}` does not exist and the spec has no `dataset.generate`; create the dataset or add a generator",
                    dir.display()
                ),
            )
        })?;
        bar.set_message(format!(
            "generating {} dataset ({}) in {}",
            gen.kind,
            gen.size,
            dir.display()
        ));
        if let Some(parent) = dir.parent() {
            std::fs::create_dir_all(parent)
                .map_err(|e| WorkloadError::io(format!("creating {}", parent.display()), e))?;
        }
        dataset::generate(gen.kind, &dir, gen.size, gen.seed, cancel).map_err(|e| match e {
            WorkloadError::Interrupted(sig) => TrialError::Interrupted(sig),
            e => e.into(),
        })?;
        generated = true;
    }
    let files = dataset::scan(&dir)
        .map_err(|e| WorkloadError::io(format!("listing dataset {}", dir.display()), e))?;
    if files.files.is_empty() {
        return Err(InputError::field(
            &spec.origin,
            "dataset.path",
            format!("`{}` holds no data files", dir.display()),
        )
        .into());
    }
    Ok(Some((dir, files, generated)))
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
    };
    let mut teardown_ms = 0.0;
    let mut destroyed = Ok(());
    let outcome = launch::launch(&launch_cfg)
        .map_err(TrialError::from)
        .and_then(|mut running| {
            domain.adopt(running.child.id() as i32);
            let out = observe(req, &mut running, domain.as_mut(), bar, cancel);
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

/// What watching a running workload produced.
struct Observation {
    estimate: Estimate,
    stop_reason: StopReason,
    steps: u64,
    samples: f64,
    duration_s: f64,
    telemetry: Telemetry,
    disturbance: Option<Disturbance>,
    epochs: Vec<EpochStats>,
    malformed: u64,
    probe: Option<ProbeReport>,
}

/// Progress received so far.
struct Tally {
    start: Instant,
    est: Estimator,
    steps: u64,
    malformed: u64,
    /// `(t, hits, misses)` per step that reported application-cache counts.
    cache_steps: Vec<(f64, u64, u64)>,
    /// The epoch of the latest step, and whether a new one began since the last reading: windows of
    /// whole epochs start and end there, so the domain is read right then.
    epoch: Option<u64>,
    epoch_turned: bool,
    /// Per epoch: (epoch, time of its first and last step, its samples, its first step's samples).
    epochs: Vec<(u64, f64, f64, f64, f64)>,
    probe: Option<ProbeReport>,
}

impl Tally {
    fn add(&mut self, ev: ProgressEvent) {
        match ev {
            ProgressEvent::Step {
                at,
                samples,
                epoch,
                cache_hits,
                cache_misses,
            } => {
                let t = at.duration_since(self.start).as_secs_f64();
                self.steps += 1;
                if epoch.is_some() && self.epoch.is_some() && epoch != self.epoch {
                    self.epoch_turned = true;
                }
                self.epoch = epoch.or(self.epoch);
                if let Some(e) = epoch {
                    match self.epochs.last_mut() {
                        Some(last) if last.0 == e => {
                            last.2 = t;
                            last.3 += samples;
                        }
                        _ => self.epochs.push((e, t, t, samples, samples)),
                    }
                }
                self.est.push_step(t, samples, epoch);
                if cache_hits.is_some() || cache_misses.is_some() {
                    self.cache_steps
                        .push((t, cache_hits.unwrap_or(0), cache_misses.unwrap_or(0)));
                }
            }
            ProgressEvent::Rate { at, samples_per_s } => {
                self.steps += 1;
                self.est
                    .push_rate(at.duration_since(self.start).as_secs_f64(), samples_per_s);
            }
            ProgressEvent::Probe(r) => self.probe.get_or_insert_with(Default::default).merge(r),
            ProgressEvent::Malformed { .. } => self.malformed += 1,
        }
    }
}

fn status_line(req: &TrialRequest, tally: &Tally, elapsed: f64) -> String {
    match tally.est.estimate() {
        Some(e) => format!(
            "{} @ {} cores: {:.1} ± {:.1} samples/s (±{:.1}%), {elapsed:.1} s",
            req.spec.name,
            req.cpus,
            e.samples_per_s,
            e.ci95_half_width,
            100.0 * e.rel_half_width()
        ),
        None => format!(
            "{} @ {} cores: warming up, {} steps, {elapsed:.1} s",
            req.spec.name, req.cpus, tally.steps
        ),
    }
}

/// How often domain statistics and NVML are read.
const SAMPLE_EVERY: Duration = Duration::from_millis(250);

fn observe(
    req: &TrialRequest,
    running: &mut launch::Running,
    domain: &mut dyn isolate::Domain,
    bar: &ProgressBar,
    cancel: &Cancel,
) -> Result<Observation, TrialError> {
    let (tx, rx) = mpsc::channel();
    let source: Option<Box<dyn ProgressSource>> =
        match (running.progress.take(), &req.spec.progress) {
            (Some(ProgressStream::Pipe(f)), _) => Some(Box::new(PipeProgress::new(f))),
            (Some(ProgressStream::Output(r)), ProgressSpec::Regex { pattern, scale, .. }) => {
                let m = RegexMatcher::new(pattern, *scale).map_err(|e| {
                    InputError::field(&req.spec.origin, "progress.pattern", e.to_string())
                })?;
                Some(Box::new(RegexProgress::new(r, m)))
            }
            _ => None,
        };
    let reader = source.map(|s| progress::spawn(s, tx));

    let start = running.started();
    let mut tally = Tally {
        start,
        est: Estimator::new(req.estimator.clone()),
        steps: 0,
        malformed: 0,
        cache_steps: Vec::new(),
        epoch: None,
        epoch_turned: false,
        epochs: Vec::new(),
        probe: None,
    };
    let cores = domain.cpu_list().to_vec();
    let read = |domain: &dyn isolate::Domain, t_s: f64| Reading {
        t_s,
        domain: domain.stats(),
        host: HostReading::read(&cores, &domain.pids()),
    };
    let mut readings: Vec<Reading> = Vec::new();
    let probe = cores
        .first()
        .and_then(|&c| super::hostspeed::SpeedProbe::start(c, SAMPLE_EVERY));
    let mut peaks = Peaks::default();
    let visible: Option<Vec<u32>> = std::env::var("CUDA_VISIBLE_DEVICES")
        .ok()
        .map(|v| v.split(',').filter_map(|x| x.trim().parse().ok()).collect());
    let mut gpu = GpuSampler::new(visible.as_deref());
    let mut last_sample = Instant::now() - SAMPLE_EVERY;
    let mut last_event = Instant::now();
    let mut stream_open = reader.is_some();

    let stop_reason = loop {
        if stream_open {
            match rx.recv_timeout(Duration::from_millis(50)) {
                Ok(ev) => {
                    last_event = Instant::now();
                    tally.add(ev);
                    // Take the whole burst before deciding anything.
                    while let Ok(ev) = rx.try_recv() {
                        tally.add(ev);
                    }
                }
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => stream_open = false,
            }
        } else {
            std::thread::sleep(Duration::from_millis(50));
        }
        let now = Instant::now();
        let elapsed = now.duration_since(start).as_secs_f64();
        if now.duration_since(last_sample) >= SAMPLE_EVERY || tally.epoch_turned {
            last_sample = now;
            tally.epoch_turned = false;
            let r = read(&*domain, elapsed);
            peaks.observe(&r.domain);
            readings.push(r);
            if let Some(g) = gpu.as_mut() {
                g.sample();
            }
            bar.set_message(status_line(req, &tally, elapsed));
            bar.tick();
        }
        if let Some(sig) = cancel.signal() {
            return Err(TrialError::Interrupted(sig));
        }
        if tally.est.converged().is_some() {
            break StopReason::Converged;
        }
        if tally.est.epoch_ended() {
            break StopReason::EpochEnded;
        }
        if let Some(status) = running.poll_exit() {
            // The reader finishes once the pipe's last writer is gone; take everything it read.
            if let Some(handle) = reader.as_ref() {
                let deadline = Instant::now() + Duration::from_millis(500);
                while !handle.is_finished() && Instant::now() < deadline {
                    std::thread::sleep(Duration::from_millis(5));
                }
            }
            while let Ok(ev) = rx.try_recv() {
                tally.add(ev);
            }
            if !status.success() || tally.est.estimate().is_none() {
                return Err(TrialError::WorkloadExited {
                    status: status.to_string(),
                    steps: tally.steps,
                    // A script that failed says why on its stderr; one that finished without a
                    // step is what the probe can explain.
                    tail: probe_hint(req, &tally)
                        .filter(|_| status.success())
                        .unwrap_or_default(),
                });
            }
            break StopReason::WorkloadExited;
        }
        if elapsed >= req.estimator.max_total_s {
            break StopReason::MaxDuration;
        }
        if now.duration_since(last_event) >= req.no_progress_timeout {
            break StopReason::NoProgress;
        }
    };
    let hint = probe_hint(req, &tally);
    let Tally {
        est,
        steps,
        malformed,
        cache_steps,
        epochs,
        probe: probe_report,
        ..
    } = tally;
    let duration_s = start.elapsed().as_secs_f64();
    let last = read(&*domain, duration_s);
    peaks.observe(&last.domain);
    readings.push(last);

    let estimate = est.estimate().ok_or_else(|| match (stop_reason, hint) {
        // No step at all: what the probe saw, or the lines that did not follow the protocol, say why
        // better than the time it waited.
        (StopReason::NoProgress | StopReason::MaxDuration, Some(hint)) => {
            TrialError::NoEstimate(format!(
                "no progress from the workload in {duration_s:.0} s{hint}"
            ))
        }
        (StopReason::NoProgress | StopReason::MaxDuration, None) if steps == 0 && malformed > 0 => {
            TrialError::NoEstimate(format!(
                "none of the workload's {malformed} progress lines followed the protocol (one JSON object per line with `samples`, or the spec's `progress` pattern); check its `progress` settings in {}",
                req.spec.origin
            ))
        }
        (StopReason::NoProgress, None) => TrialError::NoEstimate(format!(
            "no progress from the workload for {:.0} s after {steps} steps; check its `progress` settings in {}",
            req.no_progress_timeout.as_secs_f64(),
            req.spec.origin
        )),
        (StopReason::MaxDuration, None) => TrialError::TooFewSteps { steps, duration_s },
        (stop_reason, _) => TrialError::NoEstimate(format!(
            "only {steps} steps in {duration_s:.1} s ({stop_reason}), too few to estimate throughput"
        )),
    })?;
    let speed: Vec<(f64, f64)> = probe
        .map(|p| p.finish())
        .unwrap_or_default()
        .into_iter()
        .map(|(at, v)| (at.saturating_duration_since(start).as_secs_f64(), v))
        .collect();
    let window = closest(&readings, estimate.window_start_s)
        .zip(closest(
            &readings,
            estimate.window_start_s + estimate.measured_s,
        ))
        .filter(|(a, b)| b.t_s - a.t_s > 0.5);
    let telemetry = summarize(
        window,
        &estimate,
        &readings,
        &peaks,
        &cache_steps,
        gpu.as_ref(),
    );
    let disturbance =
        window.map(|(a, b)| contention::assess(req.cpus.0, cores.len().max(1), a, b, &speed));
    let epochs = epoch_stats(&epochs, &readings);
    Ok(Observation {
        estimate,
        stop_reason,
        steps,
        samples: est.total_samples(),
        duration_s,
        telemetry,
        disturbance,
        epochs,
        malformed,
        probe: probe_report,
    })
}

/// Why a probed script gave no steps, when the probe can tell: it never saw PyTorch, or it saw PyTorch
/// but no DataLoader batch (the probe counts only those).
fn probe_hint(req: &TrialRequest, tally: &Tally) -> Option<String> {
    req.spec.probe?;
    if tally.steps > 0 {
        return None;
    }
    Some(match &tally.probe {
        Some(p) if p.torch == Some(true) => "; the PyTorch probe saw the script load torch's data loading but iterate no `torch.utils.data.DataLoader`, and it counts only DataLoader batches: measure such a script through a spec whose `progress` pattern reads its own log (docs/workload-spec.md)".to_string(),
        _ => "; the PyTorch probe saw no import of `torch.utils.data`: either the script uses no PyTorch DataLoader (the probe counts only DataLoader batches: measure it through a spec whose `progress` pattern reads its own log, docs/workload-spec.md), or its Python does not read a `sitecustomize` from PYTHONPATH (`python -S` and `-I` do not)".to_string(),
    })
}

/// Each complete epoch's throughput, CPU and storage reads: from the last step of the epoch before (the
/// first step, for the first epoch) to its own last step, with the domain's readings closest to those
/// moments (a reading is taken as each epoch begins).
fn epoch_stats(epochs: &[(u64, f64, f64, f64, f64)], readings: &[Reading]) -> Vec<EpochStats> {
    let complete = epochs.len().saturating_sub(1);
    (0..complete)
        .filter_map(|i| {
            let (epoch, first, last, all, first_step) = epochs[i];
            // From the epoch before's last step the whole epoch counts; from its own first step, all
            // but that step.
            let (start, samples) = if i == 0 {
                (first, all - first_step)
            } else {
                (epochs[i - 1].2, all)
            };
            let seconds = last - start;
            let (a, b) = (closest(readings, start)?, closest(readings, last)?);
            (seconds > 0.0 && samples > 0.0).then(|| EpochStats {
                epoch,
                samples,
                seconds,
                samples_per_s: samples / seconds,
                cpu_s_per_sample: (b.t_s > a.t_s)
                    .then(|| (b.domain.cpu_seconds - a.domain.cpu_seconds) / samples),
                storage_read_bytes_per_sample: match (
                    a.domain.storage_read_bytes,
                    b.domain.storage_read_bytes,
                ) {
                    (Some(x), Some(y)) if b.t_s > a.t_s => {
                        Some(y.saturating_sub(x) as f64 / samples)
                    }
                    _ => None,
                },
            })
        })
        .collect()
}

/// The reading taken closest to `t_s`.
fn closest(readings: &[Reading], t_s: f64) -> Option<&Reading> {
    readings
        .iter()
        .min_by(|a, b| (a.t_s - t_s).abs().total_cmp(&(b.t_s - t_s).abs()))
}

/// Telemetry over the measured window, between the readings closest to its ends.
fn summarize(
    window: Option<(&Reading, &Reading)>,
    estimate: &Estimate,
    readings: &[Reading],
    peaks: &Peaks,
    cache_steps: &[(f64, u64, u64)],
    gpu: Option<&GpuSampler>,
) -> Telemetry {
    let last = readings.last().map(|r| r.domain).unwrap_or_default();
    let (cpu_cores_used, storage_rate) = match window {
        Some((a, b)) => {
            let dt = b.t_s - a.t_s;
            let cores = (b.domain.cpu_seconds - a.domain.cpu_seconds) / dt;
            let rate = match (b.domain.storage_read_bytes, a.domain.storage_read_bytes) {
                (Some(b1), Some(b0)) => Some(b1.saturating_sub(b0) as f64 / dt),
                _ => None,
            };
            (Some(cores), rate)
        }
        None => (None, None),
    };
    let window_start = estimate.window_start_s;
    let app_cache = cache_steps.iter().any(|(_, h, m)| h + m > 0).then(|| {
        cache_steps
            .iter()
            .filter(|(t, _, _)| *t > window_start)
            .fold(AppCacheCounts::default(), |acc, (_, h, m)| AppCacheCounts {
                hits: acc.hits + h,
                misses: acc.misses + m,
            })
    });
    Telemetry {
        cpu_seconds: last.cpu_seconds,
        cpu_cores_used,
        storage_read_bytes: last.storage_read_bytes,
        storage_read_bytes_per_s: storage_rate,
        storage_read_bytes_per_sample: storage_rate
            .filter(|_| estimate.samples_per_s > 0.0)
            .map(|r| r / estimate.samples_per_s),
        page_cache_peak_bytes: peaks.page_cache_bytes,
        memory_peak_bytes: peaks.memory_bytes,
        app_cache,
        gpu: gpu.map(|g| g.summary()),
    }
}
