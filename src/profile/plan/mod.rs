//! Optimistic profiling (DS-Analyzer's differential measurement, improved). The plan runs in stages, each
//! its own function below, in the order a profile tells its story:
//!
//! 0. [`discover`]: for a probed script whose dataset is not named, one run as it is, for the dataset's
//!    directory the probe sees (without one, the memory axis does not apply);
//! 1. [`cpu_sweep`]: the CPU axis with the dataset cached, bisecting towards where throughput changes
//!    and skipping every point its measured neighbours already bound;
//! 2. [`accelerator`]: one synthetic trial for the accelerator's rate G, told apart from the CPU curve
//!    or said not to be (G is never below a measured point);
//! 3. [`cold_fetch`]: one cold trial for the storage rate and the CPU a miss costs, and a timed read of
//!    evicted files for how long a miss blocks a loader;
//! 4. [`calibrate`]: for page-cache workloads, memory-limited trials that place the kernel's hit curve
//!    between LRU and a fixed subset;
//! 5. [`fit`]: the model, its hit-ratio tables, then the matrix;
//! 6. [`validate`]: held-out (and, with `--exhaustive`, all) grid points under their real constraint.
//!
//! Trials that other work on the host disturbed are run again after the host quietens (bounded), and any
//! that stay disturbed are listed in the profile's warnings. Every finished trial is journaled at once,
//! so `--resume` continues an interrupted profile without measuring anything twice.

use super::file::{
    AcceleratorFit, CalibrationPoint, DatasetInfo, ErrorSummary, FittedModel, HitCurveFit,
    HitRatioRow, HostInfo, Profile, ProfileError, ProfileTrial, ServerShape, SpeedCheck, TrialRole,
    ValidationPoint, WorkloadInfo, SCHEMA,
};
use super::matrix;
use crate::cancel::Cancel;
use crate::error::InputError;
use crate::isolate::{pagecache, IsolationKind};
use crate::measure::contention::{HostReading, SLOW_CORE};
use crate::measure::hostspeed::{cpu_calibration, CpuCalibration};
use crate::measure::{
    self, CacheState, Estimate, EstimatorConfig, TrialError, TrialRequest, TrialResult,
};
use crate::stall::{
    between_lru_and_fixed_subset, fit_fixed_subset_share, minio_hit_ratio, CostPoint, CpuCurve,
    CpuPoint, FetchModel, FootprintPoint, HitModel, LruSim, MissCost, StallModel,
};
use crate::units::{Bytes, BytesPerSec, Cores, GIB};
use crate::workload::dataset::{self, DatasetFiles};
use crate::workload::probe::ProbeReport;
use crate::workload::spec::CacheKind;
use crate::workload::WorkloadSpec;
use indicatif::ProgressBar;
use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Confidence half-width, relative, at which a memory-limited trial stops.
const CONSTRAINED_PRECISION: f64 = 0.04;
/// Longest a trial of the plan may run when its usual duration gave too few steps, seconds.
const SLOW_TRIAL_MAX_S: f64 = 120.0;
/// The family of page-cache hit curves the calibration fits (docs/profile-format.md).
const HIT_CURVE_FAMILY: &str = "lru-to-fixed-subset";
/// Added to a measured peak to make the footprint, bytes, or [`FOOTPRINT_SLACK_SHARE`] of the peak when
/// that is more. A peak is one run's: another run at other cores can need a little more (a few more
/// loader threads' stacks and buffers), and a limit at the bare peak then gets the workload OOM-killed
/// (seen: `text` needs 5.5 MiB at 1.25 cores, whose interpolated peak was 5.3 MB); a few MiB against
/// datasets of hundreds keeps the axis honest.
const FOOTPRINT_SLACK_BYTES: u64 = 8 << 20;
/// The slack of a large process, as a share of its peak: a Python training process of a gigabyte
/// varies by tens of MiB from run to run (its allocator, its loader workers' start-up).
const FOOTPRINT_SLACK_SHARE: f64 = 0.05;

/// A footprint from a measured peak, bytes (see [`FOOTPRINT_SLACK_BYTES`]).
fn footprint_of_peak(peak: u64) -> u64 {
    peak + FOOTPRINT_SLACK_BYTES.max((peak as f64 * FOOTPRINT_SLACK_SHARE) as u64)
}
/// Longest warm-up a memory-limited trial waits out before measuring, seconds.
const MAX_WARMUP_EPOCH_S: f64 = 60.0;
/// Epochs a page cache needs before its hit ratio is steady: the first fills it, the second promotes
/// what it kept to the active list, from the third on it repeats.
const PAGE_CACHE_WARMUP_EPOCHS: u64 = 2;
/// An application cache keeps what the first epoch put in it.
const APP_CACHE_WARMUP_EPOCHS: u64 = 1;
/// Where the calibration trial puts the cache, as a fraction of the dataset: where LRU and a fixed subset
/// differ most (their gap peaks near 60% under per-epoch shuffling). One trial fits the curve's one
/// parameter; more would cost a second steady-state trial for little (docs/profile-format.md).
const CALIBRATION_FRACTIONS: [f64; 1] = [0.6];
/// A cached trial below this fraction of G is CPU-bound: the cold and calibration trials run at the
/// most whole cores that are, so the CPU they see a miss cost is what slows a CPU-bound job.
const CPU_BOUND: f64 = 0.95;
/// Runs of a trial that keeps being disturbed before the profile gives up and says so.
const MAX_ATTEMPTS: u32 = 3;
/// Longest wait for the host to quieten before a disturbed trial runs again.
const QUIET_WAIT: Duration = Duration::from_secs(30);
/// Files read to time a miss's wait.
const PROBE_FILES: usize = 64;
/// A cold trial this far below the cached pipeline's rate (misses' CPU included) was held up by storage.
const FETCH_BOUND: f64 = 0.95;

/// What to profile and how.
#[derive(Debug, Clone)]
pub struct ProfileRequest {
    /// The workload.
    pub spec: WorkloadSpec,
    /// Where the profile goes (the CSV and the trial journal sit beside it).
    pub out: PathBuf,
    /// CPU axis; `None`: [`matrix::auto_cpu_axis`] of this host.
    pub cpus: Option<Vec<f64>>,
    /// Memory axis in GiB; `None`: footprint plus 0-100% of the dataset.
    pub memory_gib: Option<Vec<f64>>,
    /// GPUs; `None`: the spec's.
    pub gpus: Option<u32>,
    /// Reference server shape; `None`: this host divided by the workload's GPUs.
    pub server: Option<ServerShape>,
    /// Held-out grid points to measure.
    pub validate: usize,
    /// Measure the whole grid as well.
    pub exhaustive: bool,
    /// Reuse trials journaled by an interrupted run.
    pub resume: bool,
    /// Storage read limit for every trial that reads the dataset.
    pub storage_limit: Option<BytesPerSec>,
    /// Isolation backend.
    pub isolation: Option<IsolationKind>,
    /// Fraction of the best throughput the demand vector may give up.
    pub tolerance: f64,
    /// The CPU sweep stops refining an interval whose ends differ by at most this fraction.
    pub refine_tolerance: f64,
}

/// Why profiling stopped early.
#[derive(Debug, thiserror::Error)]
pub enum ProfileRunError {
    /// A trial failed (or was interrupted).
    #[error(transparent)]
    Trial(#[from] TrialError),
    /// Bad input.
    #[error(transparent)]
    Input(#[from] InputError),
    /// The profile or its journal could not be written.
    #[error(transparent)]
    File(#[from] ProfileError),
}

/// Finished trials, saved one JSON line each so an interrupted profile can resume.
struct Journal {
    path: PathBuf,
    done: HashMap<String, ProfileTrial>,
    order: Vec<ProfileTrial>,
}

impl Journal {
    fn open(path: PathBuf, resume: bool) -> Result<Self, ProfileRunError> {
        let mut done = HashMap::new();
        if resume {
            if let Ok(text) = std::fs::read_to_string(&path) {
                for (i, line) in text
                    .lines()
                    .enumerate()
                    .filter(|(_, l)| !l.trim().is_empty())
                {
                    // A line cut short by a kill is the last one; anything else is corruption.
                    let Ok(t) = serde_json::from_str::<ProfileTrial>(line) else {
                        if i + 1 == text.lines().count() {
                            break;
                        }
                        return Err(InputError::new(
                            path.display().to_string(),
                            format!(
                                "line {} is not a trial; remove the file to start over",
                                i + 1
                            ),
                        )
                        .into());
                    };
                    done.insert(key(t.role, t.memory_gib, &t.result), t);
                }
            }
        } else {
            let _ = std::fs::remove_file(&path);
        }
        Ok(Journal {
            path,
            done,
            order: Vec::new(),
        })
    }

    fn append(&mut self, t: &ProfileTrial) -> Result<(), ProfileRunError> {
        let io = |e| ProfileError::Io {
            context: format!("writing the trial journal {}", self.path.display()),
            source: e,
        };
        if let Some(dir) = self.path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(io)?;
        }
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.path)
            .map_err(io)?;
        let line = serde_json::to_string(t).expect("trials serialize") + "\n";
        f.write_all(line.as_bytes()).map_err(io)?;
        f.sync_data().map_err(io)?;
        Ok(())
    }
}

/// Identifies a trial by what it measured, so a resumed plan finds it again.
fn key(role: TrialRole, memory_gib: Option<f64>, r: &TrialResult) -> String {
    let a = &r.allocation;
    format!(
        "{role:?}|{}|{:?}|{:?}|{:?}|{:?}|{:?}|{}",
        a.cpus,
        memory_gib,
        a.mem_limit_bytes,
        a.cache_bytes,
        a.cache_state,
        a.storage_limit_bytes_per_s,
        a.synthetic
    )
}

fn key_of(role: TrialRole, memory_gib: Option<f64>, req: &TrialRequest) -> String {
    format!(
        "{role:?}|{}|{:?}|{:?}|{:?}|{:?}|{:?}|{}",
        req.cpus,
        memory_gib,
        req.mem_limit.map(|b| b.0),
        req.cache_bytes.map(|b| b.0),
        req.cache_state,
        req.storage_limit.map(|b| b.0),
        req.synthetic
    )
}

/// Runs trials through the journal, runs disturbed ones again, and keeps the progress bar moving.
struct Runner<'a> {
    journal: Journal,
    bar: &'a ProgressBar,
    cancel: &'a Cancel,
    isolation: Option<IsolationKind>,
    warnings: Vec<String>,
    speed: Speed,
}

/// The host's CPU speed over the profile: the calibration kernel before the first trial, and the
/// fastest reading of any trial's speed probe since.
struct Speed {
    core: Option<usize>,
    first: CpuCalibration,
    best_probe: f64,
}

impl Speed {
    fn new(core: Option<usize>) -> Self {
        Speed {
            core,
            first: cpu_calibration(core),
            best_probe: 0.0,
        }
    }

    /// Marks `r` disturbed when its core ran slow against the fastest this profile has seen (a trial
    /// that ran slow throughout has no fast reading of its own to compare with).
    fn judge(&mut self, r: &mut TrialResult) {
        let Some(d) = r.disturbance.as_mut() else {
            return;
        };
        self.best_probe = self
            .best_probe
            .max(d.core_best_ops_per_cpu_s.unwrap_or(0.0));
        match d.core_ops_per_cpu_s {
            Some(s) if !d.disturbed && s < SLOW_CORE * self.best_probe => {
                d.disturbed = true;
                d.reason = Some(format!(
                    "its core ran {:.0}% below the fastest this profile has seen, by the speed probe, though no other work showed on it (the machine under this one is busy)",
                    100.0 * (1.0 - s / self.best_probe)
                ));
            }
            _ => {}
        }
    }
}

impl Runner<'_> {
    fn trial(
        &mut self,
        role: TrialRole,
        memory_gib: Option<f64>,
        mut req: TrialRequest,
    ) -> Result<TrialResult, ProfileRunError> {
        req.isolation = self.isolation;
        let k = key_of(role, memory_gib, &req);
        if let Some(t) = self.journal.done.get(&k) {
            self.journal.order.push(t.clone());
            self.bar.inc(1);
            return Ok(t.result.clone());
        }
        let what = format!(
            "{} trial at {} cores{}",
            role_name(role),
            req.cpus,
            memory_gib.map_or(String::new(), |m| format!(", {m} GiB"))
        );
        let mut attempts = 0;
        let result = loop {
            attempts += 1;
            self.bar.set_message(what.clone());
            let mut r = match measure::run_trial(&req, self.bar, self.cancel) {
                // A slow workload at few cores (a real model on a quarter core) needs longer than
                // the plan's usual trial for enough steps: once, give it several times as long.
                Err(TrialError::TooFewSteps { .. })
                    if req.estimator.max_total_s < SLOW_TRIAL_MAX_S =>
                {
                    req.estimator.max_total_s =
                        (req.estimator.max_total_s * 4.0).min(SLOW_TRIAL_MAX_S);
                    attempts -= 1;
                    continue;
                }
                r => r?,
            };
            self.speed.judge(&mut r);
            let Some(reason) = r.disturbance.as_ref().and_then(|d| d.reason.clone()) else {
                break r;
            };
            if attempts >= MAX_ATTEMPTS {
                self.warnings.push(format!(
                    "the {what} stayed disturbed after {attempts} runs: {reason}"
                ));
                break r;
            }
            self.bar.set_message(format!(
                "{what} was disturbed ({reason}); waiting for a quiet host"
            ));
            // A slow spell of the host's CPU passes in seconds more often than not.
            std::thread::sleep(Duration::from_secs(3));
            wait_for_quiet(&r.allocation.cpu_list, self.cancel);
        };
        let t = ProfileTrial {
            role,
            memory_gib,
            attempts,
            result: result.clone(),
        };
        self.journal.append(&t)?;
        self.journal.order.push(t);
        self.bar.inc(1);
        Ok(result)
    }

    fn trials(&self, role: TrialRole) -> impl Iterator<Item = &ProfileTrial> {
        self.journal.order.iter().filter(move |t| t.role == role)
    }
}

fn role_name(role: TrialRole) -> &'static str {
    match role {
        TrialRole::Discovery => "discovery",
        TrialRole::Synthetic => "synthetic",
        TrialRole::Cpu => "cpu",
        TrialRole::Fetch => "fetch",
        TrialRole::Calibration => "calibration",
        TrialRole::Validation => "validation",
        TrialRole::Exhaustive => "exhaustive",
    }
}

/// Waits until other work leaves `cores` nearly idle for a second (no trial runs meanwhile, so anything
/// busy there is someone else's), or [`QUIET_WAIT`] has passed.
fn wait_for_quiet(cores: &[usize], cancel: &Cancel) {
    let deadline = Instant::now() + QUIET_WAIT;
    let mut before = HostReading::read(cores, &[]);
    while Instant::now() < deadline && cancel.signal().is_none() {
        std::thread::sleep(Duration::from_secs(1));
        let now = HostReading::read(cores, &[]);
        let busy = now.busy_s + now.steal_s - before.busy_s - before.steal_s;
        if busy < 0.1 * cores.len().max(1) as f64 {
            return;
        }
        before = now;
    }
}

/// A trial of the plan: a second of warm-up (the estimator's truncation removes a slower start) and two
/// of measurement at least, then until ±2% or 30 s.
fn base_request(spec: &WorkloadSpec, cpus: f64) -> TrialRequest {
    let mut r = TrialRequest::new(spec.clone(), Cores(cpus));
    r.estimator = EstimatorConfig {
        warmup_s: 1.0,
        min_measure_s: 2.0,
        max_total_s: 30.0,
        ..EstimatorConfig::default()
    };
    r
}

/// The axes and the reference the plan works on.
struct Plan<'a> {
    req: &'a ProfileRequest,
    spec: &'a WorkloadSpec,
    cpu_axis: Vec<f64>,
    host_cores: f64,
    hit_model: HitModel,
}

impl Plan<'_> {
    fn c_max(&self) -> f64 {
        *self.cpu_axis.last().expect("checked non-empty")
    }

    /// Epochs a memory-limited trial waits out before its cache is steady.
    fn warmup_epochs(&self) -> u64 {
        match self.hit_model {
            HitModel::PageCache => PAGE_CACHE_WARMUP_EPOCHS,
            HitModel::Minio => APP_CACHE_WARMUP_EPOCHS,
        }
    }

    /// A trial that starts cold under a real cache constraint and measures whole epochs once the cache
    /// is steady (validation, exhaustive and calibration trials).
    fn constrained(&self, cpus: f64) -> TrialRequest {
        let mut r = base_request(self.spec, cpus);
        r.cache_state = CacheState::Cold;
        r.storage_limit = self.req.storage_limit;
        r.estimator.warmup_epochs = self.warmup_epochs();
        r.estimator.warmup_epochs_max_s = MAX_WARMUP_EPOCH_S;
        r.estimator.max_total_s = MAX_WARMUP_EPOCH_S + 60.0;
        r.estimator.whole_epochs = true;
        // These points check the model and hits make step times noisier, so ±4% is precise enough.
        r.estimator.rel_precision = CONSTRAINED_PRECISION;
        r
    }
}

/// What the CPU sweep found.
struct Sweep {
    curve: CpuCurve,
    /// CPU-seconds per sample at each measured core count.
    cost: Vec<CostPoint>,
    footprint_points: Vec<FootprintPoint>,
    /// The most memory any CPU trial used besides its cache, bytes.
    footprint: Option<u64>,
    /// The first CPU trial, for the dataset it found.
    first: TrialResult,
}

impl Sweep {
    fn footprint_at(&self, cpus: f64, floor: u64) -> u64 {
        let fallback = self.footprint.unwrap_or(floor);
        (crate::stall::footprint_at(&self.footprint_points, fallback, cpus) as u64).max(floor)
    }
}

/// CPU-seconds per sample of a trial, from its domain's CPU time over the measured window.
fn cpu_s_per_sample(r: &TrialResult) -> Option<f64> {
    let used = r.telemetry.cpu_cores_used?;
    (r.throughput.samples_per_s > 0.0).then(|| used / r.throughput.samples_per_s)
}

/// Stage 0: a probed script whose dataset the spec does not name runs once as it is, at the most cores,
/// and what the probe sees of it (the directory its dataset's files are in) becomes its dataset. Returns
/// the spec the rest of the plan runs, and why the memory axis does not apply when no dataset is known.
fn discover(
    run: &mut Runner,
    spec: &WorkloadSpec,
    c_max: f64,
) -> Result<(WorkloadSpec, Option<String>), ProfileRunError> {
    let mut spec = spec.clone();
    if spec.dataset.is_some() {
        return Ok((spec, None));
    }
    if spec.probe.is_none() {
        return Ok((
            spec,
            Some("the workload names no dataset, so memory only has to hold its footprint".into()),
        ));
    }
    let first = run.trial(TrialRole::Discovery, None, base_request(&spec, c_max))?;
    let seen = first.probe.unwrap_or_default();
    match &seen.dataset_root {
        Some(root) => {
            spec.set_dataset_dir(root).map_err(|why| {
                InputError::new(
                    &spec.origin,
                    format!("the probe saw the dataset in {}, but {why}", root.display()),
                )
            })?;
            Ok((spec, None))
        }
        None => Ok((
            spec,
            Some(format!(
                "the probe saw {} but no directory of files on disk, so memory only has to hold the footprint; if the script reads files, name their directory (--dataset)",
                seen.dataset_class
                    .as_deref()
                    .map_or("no dataset".to_string(), |c| format!("a {c} dataset"))
            )),
        )),
    }
}

/// Stage 1: min(G, P(c)) with the dataset cached. It starts at the most cores and the fewest, then
/// bisects every interval whose ends differ by more than the tolerance: where the curve is flat (past
/// the knee, or between equal points) monotonicity bounds every point in between.
fn cpu_sweep(run: &mut Runner, plan: &Plan) -> Result<Sweep, ProfileRunError> {
    let axis = &plan.cpu_axis;
    let measure = |run: &mut Runner, i: usize| -> Result<f64, ProfileRunError> {
        let mut r = base_request(plan.spec, axis[i]);
        r.cache_state = CacheState::Warm;
        Ok(run.trial(TrialRole::Cpu, None, r)?.throughput.samples_per_s)
    };
    let last = axis.len() - 1;
    let t_hi = measure(run, last)?;
    if last > 0 {
        let t_lo = measure(run, 0)?;
        let mut stack = vec![(0usize, t_lo, last, t_hi)];
        while let Some((a, ta, b, tb)) = stack.pop() {
            if b - a < 2 || (tb - ta).abs() <= plan.req.refine_tolerance * tb.max(ta) {
                continue;
            }
            let target = (axis[a] + axis[b]) / 2.0;
            let mid = (a + 1..b)
                .min_by(|&x, &y| {
                    (axis[x] - target)
                        .abs()
                        .total_cmp(&(axis[y] - target).abs())
                })
                .expect("an index lies between");
            let tm = measure(run, mid)?;
            stack.push((a, ta, mid, tm));
            stack.push((mid, tm, b, tb));
        }
    }
    let trials: Vec<&TrialResult> = run.trials(TrialRole::Cpu).map(|t| &t.result).collect();
    let by_cores = |f: &dyn Fn(&TrialResult) -> Option<f64>| {
        let mut v: Vec<(f64, f64)> = trials
            .iter()
            .filter_map(|t| Some((t.allocation.cpus.0, f(t)?)))
            .collect();
        v.sort_by(|a, b| a.0.total_cmp(&b.0));
        v.dedup_by(|a, b| a.0 == b.0);
        v
    };
    Ok(Sweep {
        curve: CpuCurve::new(
            by_cores(&|t| Some(t.throughput.samples_per_s))
                .into_iter()
                .map(|(cpus, samples_per_s)| CpuPoint {
                    cpus,
                    samples_per_s,
                })
                .collect(),
        ),
        cost: by_cores(&cpu_s_per_sample)
            .into_iter()
            .map(|(cpus, cpu_s_per_sample)| CostPoint {
                cpus,
                cpu_s_per_sample,
            })
            .collect(),
        footprint_points: by_cores(&|t| t.telemetry.memory_peak_bytes.map(|b| b as f64))
            .into_iter()
            .map(|(cpus, b)| FootprintPoint {
                cpus,
                bytes: footprint_of_peak(b as u64),
            })
            .collect(),
        footprint: trials
            .iter()
            .filter_map(|t| t.telemetry.memory_peak_bytes)
            .max()
            .map(footprint_of_peak),
        first: trials
            .first()
            .map(|t| (*t).clone())
            .expect("at least one CPU trial"),
    })
}

/// Stage 2: the accelerator alone, fed synthetic batches (a probed script's first batches replayed),
/// against the cached CPU sweep: the G the model uses, and whether the trial told it apart.
fn accelerator(
    run: &mut Runner,
    plan: &Plan,
    sweep: &Sweep,
) -> Result<AcceleratorFit, ProfileRunError> {
    let mut synth = base_request(plan.spec, plan.c_max());
    synth.synthetic = true;
    let t = run.trial(TrialRole::Synthetic, None, synth)?;
    let replayed = t.probe.as_ref().is_some_and(|p| p.replay.is_some());
    let cached: Vec<&Estimate> = run
        .trials(TrialRole::Cpu)
        .map(|t| &t.result.throughput)
        .collect();
    let at_max = run
        .trials(TrialRole::Cpu)
        .filter(|t| t.result.allocation.cpus.0 == plan.c_max())
        .map(|t| t.result.throughput)
        .last()
        .expect("the sweep measures the most cores");
    let best = cached.iter().map(|e| e.samples_per_s).fold(0.0, f64::max);
    Ok(separate_accelerator(
        &t.throughput,
        &at_max,
        plan.c_max(),
        sweep.curve.points(),
        best,
        plan.req.refine_tolerance,
        replayed,
    ))
}

/// Whether a synthetic trial's rate is G: clearly above the cached rate at the most cores (their 95%
/// intervals apart), or level with it where the cached curve has already flattened (its point below the
/// most cores within `flat` of it). Otherwise the synthetic input may not have replaced loading, and G
/// is only known to be at least the best cached rate: the model then uses that, so the matrix is never
/// capped below a measured point.
fn separate_accelerator(
    synth: &Estimate,
    at_max: &Estimate,
    c_max: f64,
    curve: &[CpuPoint],
    best_cached: f64,
    flat: f64,
    replayed: bool,
) -> AcceleratorFit {
    let g = synth.samples_per_s;
    let t = at_max.samples_per_s;
    let apart = g - synth.ci95_half_width > t + at_max.ci95_half_width;
    let below = curve.iter().rev().find(|p| p.cpus < c_max);
    let level = (g - t).abs() <= synth.ci95_half_width + at_max.ci95_half_width + flat * t;
    let flattened = below.filter(|p| (t - p.samples_per_s).abs() <= flat * t);
    let how = if replayed {
        " (the probe replayed the script's first batches)"
    } else {
        ""
    };
    let (separated, because) = if apart {
        (
            true,
            format!(
                "the synthetic trial{how}, {g:.1} ± {:.1} samples/s, is clearly above the cached {t:.1} ± {:.1} at {c_max} cores",
                synth.ci95_half_width, at_max.ci95_half_width
            ),
        )
    } else if let (true, Some(p)) = (level, flattened) {
        (
            true,
            format!(
                "the synthetic trial{how}, {g:.1} samples/s, is level with the cached {t:.1} at {c_max} cores, where the CPU curve has flattened ({:.1} at {} cores): the pipeline already waits on the accelerator there",
                p.samples_per_s, p.cpus
            ),
        )
    } else {
        (
            false,
            format!(
                "G could not be separated: the synthetic trial{how}, {g:.1} ± {:.1} samples/s, is not clearly above the cached {t:.1} ± {:.1} at {c_max} cores while the CPU curve has not flattened there, so its input may not have replaced loading (a script that ignores SYNERGY_SYNTHETIC, run without the probe); G is taken as at least the best cached rate, {best_cached:.1}",
                synth.ci95_half_width, at_max.ci95_half_width
            ),
        )
    };
    AcceleratorFit {
        synthetic_samples_per_s: g,
        cached_best_samples_per_s: best_cached,
        separated,
        because,
    }
}

/// The dataset's files and what the cache models need of them.
struct Data {
    files: DatasetFiles,
    bytes: u64,
    lru: LruSim,
}

impl Data {
    fn of(first: &TrialResult) -> Result<Option<Data>, ProfileRunError> {
        let Some(d) = &first.dataset else {
            return Ok(None);
        };
        let files = dataset::scan(&d.path)
            .map_err(|e| InputError::new(d.path.display().to_string(), e.to_string()))?;
        let bytes = files.total_bytes();
        let sizes = files.files.iter().map(|(_, b)| *b).collect();
        Ok(Some(Data {
            files,
            bytes,
            lru: LruSim::new(sizes, 1),
        }))
    }

    fn paths(&self) -> Vec<PathBuf> {
        self.files.paths().map(Path::to_path_buf).collect()
    }
}

/// What the cold trial and the read probe found.
struct Fetch {
    model: FetchModel,
    /// The cores the cold trial ran at (the calibration's).
    cores: f64,
    /// CPU-seconds per sample over the cold trial's first epoch (every sample a miss).
    cold_cpu: Option<f64>,
    /// CPU-seconds per sample once the whole dataset was cached under a memory limit (page caches).
    full_cpu: Option<f64>,
    /// Seconds a loader waits per miss.
    wait_s_per_miss: f64,
    /// The storage rate the cold epoch read at, bytes per second.
    storage_seen: Option<f64>,
}

impl Fetch {
    /// Nothing measured yet (or nothing to measure: a workload without a dataset).
    fn unmeasured(cores: f64, mean_sample_bytes: f64) -> Fetch {
        Fetch {
            model: FetchModel {
                mean_sample_bytes,
                storage_bytes_per_s: None,
                storage_lower_bound: false,
                memory_bytes_per_s: f64::INFINITY,
            },
            cores,
            cold_cpu: None,
            full_cpu: None,
            wait_s_per_miss: 0.0,
            storage_seen: None,
        }
    }
}

/// Stage 3: one cold trial at the calibration's cores (a CPU-bound count, so what a miss costs shows),
/// under the storage limit if any. Its first epoch is all misses: the storage rate, the bytes a miss
/// reads and the CPU it costs. A page-cache workload runs it under a memory limit that just holds the
/// dataset, and its second epoch, every read a hit, shows what a binding limit costs by itself; an
/// application cache gets no room and stops after the first epoch. Beside it, a timed read of evicted
/// files says how long a miss blocks a loader (and how fast one stream reads the device), and a read of
/// the cached dataset gives the memory bandwidth of hits.
fn cold_fetch(
    run: &mut Runner,
    plan: &Plan,
    sweep: &Sweep,
    cores: f64,
    data: &Data,
) -> Result<Fetch, ProfileRunError> {
    let mut f = Fetch::unmeasured(
        cores,
        data.bytes as f64 / data.files.files.len().max(1) as f64,
    );
    let paths = data.paths();
    // Spread over the dataset, so one directory's layout on disk does not decide it.
    let step = (paths.len() / PROBE_FILES).max(1);
    let probe: Vec<&PathBuf> = paths.iter().step_by(step).take(PROBE_FILES).collect();
    let one_stream = pagecache::time_cold_reads(&probe).ok();
    // A miss waits for the bytes it reads (set from the trial below): one file when a sample is a
    // file, a fraction of one when samples are cut from shards.
    let wait_for = |f: &mut Fetch| {
        if let Some(reads) = one_stream {
            f.wait_s_per_miss = reads.wait_s_per_byte() * f.model.mean_sample_bytes;
        }
    };
    let stream_bytes_per_s = one_stream.map(|c| c.bytes_per_s());
    wait_for(&mut f);

    let r = match plan.hit_model {
        HitModel::PageCache => {
            let mut r = plan.constrained(cores);
            r.estimator.warmup_epochs = 1;
            r.estimator.rel_precision = CONSTRAINED_PRECISION;
            r.mem_limit = Some(Bytes(
                sweep.footprint_at(cores, spec_floor(plan.spec)) + data.bytes,
            ));
            r
        }
        HitModel::Minio => {
            let mut r = base_request(plan.spec, cores);
            r.cache_state = CacheState::Cold;
            r.storage_limit = plan.req.storage_limit;
            r.cache_bytes = Some(Bytes(0));
            r.estimator.first_epoch_only = true;
            r
        }
    };
    let result = match run.trial(TrialRole::Fetch, None, r) {
        Ok(r) => r,
        // A whole epoch went by before a rate could be estimated: storage is far faster than the
        // pipeline, and the read probe's bound is all that is known.
        Err(ProfileRunError::Trial(TrialError::NoEstimate(_))) => {
            f.model.storage_bytes_per_s = stream_bytes_per_s;
            f.model.storage_lower_bound = true;
            return Ok(f);
        }
        Err(e) => return Err(e),
    };
    // The first epoch: every sample a miss.
    let (t_cold, cold_bytes) = match (plan.hit_model, result.epochs.first()) {
        (HitModel::PageCache, Some(e)) => {
            f.cold_cpu = e.cpu_s_per_sample;
            (e.samples_per_s, e.storage_read_bytes_per_sample)
        }
        _ => {
            f.cold_cpu = cpu_s_per_sample(&result);
            (
                result.throughput.samples_per_s,
                result.telemetry.storage_read_bytes_per_sample,
            )
        }
    };
    if plan.hit_model == HitModel::PageCache {
        f.full_cpu = cpu_s_per_sample(&result);
    }
    // Bytes per sample as the workload really reads them (readahead and all).
    if let Some(b) = cold_bytes.filter(|b| *b > 0.0) {
        f.model.mean_sample_bytes = b;
        wait_for(&mut f);
    }
    let seen = t_cold * f.model.mean_sample_bytes;
    f.storage_seen = Some(seen);
    // What the pipeline could do with every sample a miss, were storage infinitely fast.
    let cpu_bound = match (f.cold_cpu, cost_at(sweep, cores)) {
        (Some(cold), Some(warm)) => MissCost {
            cpu_s_per_sample: vec![CostPoint {
                cpus: cores,
                cpu_s_per_sample: warm,
            }],
            cpu_s_per_miss: (cold - warm).max(0.0),
            wait_s_per_miss: f.wait_s_per_miss,
            limited_overhead: 0.0,
        }
        .preprocess_rate(cores, 0.0, sweep.curve.at(cores), false),
        _ => sweep.curve.at(cores),
    };
    if t_cold < FETCH_BOUND * cpu_bound {
        // Held up by storage: that is its rate.
        f.model.storage_bytes_per_s = Some(seen);
    } else if let Some(limit) = plan.req.storage_limit {
        // Not held up at these cores, and the device is no faster than the limit imposed on it.
        f.model.storage_bytes_per_s = Some(limit.0);
    } else {
        // The device is at least as fast as the cold epoch read, and as one stream of reads.
        let stream = stream_bytes_per_s.unwrap_or(0.0);
        f.model.storage_bytes_per_s = Some(seen.max(stream));
        f.model.storage_lower_bound = true;
    }
    // Memory bandwidth for hits: read the cached dataset once more.
    let _ = pagecache::prewarm(&paths);
    let t0 = Instant::now();
    if let Ok(bytes) = pagecache::prewarm(&paths) {
        let secs = t0.elapsed().as_secs_f64();
        if secs > 0.0 && bytes > 0 {
            f.model.memory_bytes_per_s = bytes as f64 / secs;
        }
    }
    Ok(f)
}

/// CPU-seconds per sample the sweep measured at exactly `cpus`.
fn cost_at(sweep: &Sweep, cpus: f64) -> Option<f64> {
    sweep
        .cost
        .iter()
        .find(|p| p.cpus == cpus)
        .map(|p| p.cpu_s_per_sample)
}

/// What the calibration trials found: the fitted curve and, per trial, (hit ratio, CPU per sample).
struct Calibration {
    fit: Option<HitCurveFit>,
    cpu: Vec<(f64, f64)>,
}

/// Where the cold and calibration trials run, so the CPU they see a miss cost is what slows a
/// CPU-bound job: the most swept whole cores at which the cached pipeline is CPU-bound (whole, so a
/// loader blocked on a miss idles its core and the wait shows, and no quota makes the epochs noisy),
/// else the most swept cores that are, else the most cores.
fn calibration_cores(plan: &Plan, sweep: &Sweep, g: f64) -> f64 {
    let bound: Vec<f64> = sweep
        .curve
        .points()
        .iter()
        .filter(|p| p.samples_per_s < CPU_BOUND * g)
        .map(|p| p.cpus)
        .collect();
    bound
        .iter()
        .rev()
        .find(|c| c.fract() == 0.0)
        .or(bound.last())
        .copied()
        .unwrap_or(plan.c_max())
}

/// Stage 4: for a page-cache workload, memory-limited trials at the calibration's cores with the cache
/// at [`CALIBRATION_FRACTIONS`] of the dataset, measured over whole epochs once the cache is steady.
/// Their hit ratios (from the storage they read) place the kernel's curve between LRU and a fixed
/// subset, and their CPU per sample shows what a miss costs under the limit (reclaim included).
fn calibrate(
    run: &mut Runner,
    plan: &Plan,
    sweep: &Sweep,
    fetch: &Fetch,
    data: &mut Data,
) -> Result<Calibration, ProfileRunError> {
    let mut out = Calibration {
        fit: None,
        cpu: Vec::new(),
    };
    if plan.hit_model != HitModel::PageCache || data.bytes == 0 {
        return Ok(out);
    }
    let c = fetch.cores;
    let footprint = sweep.footprint_at(c, spec_floor(plan.spec));
    let per_miss = fetch.model.mean_sample_bytes;
    let mut points = Vec::new();
    for x in CALIBRATION_FRACTIONS {
        let cache = (x * data.bytes as f64) as u64;
        let mem = footprint + cache;
        let mem_gib = (mem as f64 / GIB * 1e4).round() / 1e4;
        let mut r = plan.constrained(c);
        r.mem_limit = Some(Bytes(mem));
        let t = run.trial(TrialRole::Calibration, Some(mem_gib), r)?;
        // Only whole epochs with the cache steady say what the cache keeps; a trial cut off by its
        // longest duration first (an epoch longer than that) measured the cold fill.
        if t.throughput.whole_epochs == 0 {
            continue;
        }
        let Some(read) = t.telemetry.storage_read_bytes_per_sample else {
            continue;
        };
        let h = (1.0 - read / per_miss).clamp(0.0, 1.0);
        if let Some(cpu) = cpu_s_per_sample(&t) {
            out.cpu.push((h, cpu));
        }
        points.push(CalibrationPoint {
            cpus: c,
            memory_gib: mem_gib,
            cache_bytes: cache,
            measured: h,
            lru: data.lru.hit_ratio(cache),
            fixed_subset: minio_hit_ratio(cache as f64, data.bytes as f64),
            fitted: 0.0,
        });
    }
    if points.is_empty() {
        out.fit = Some(HitCurveFit {
            family: HIT_CURVE_FAMILY.into(),
            fixed_subset_share: 0.0,
            chosen_because:
                "LRU: no calibration trial completed a whole epoch with the cache steady \
                             within its longest duration, so none measured what the cache keeps"
                    .into(),
            points,
        });
        return Ok(out);
    }
    let share = fit_fixed_subset_share(
        &points
            .iter()
            .map(|p| (p.lru, p.fixed_subset, p.measured))
            .collect::<Vec<_>>(),
    );
    for p in &mut points {
        p.fitted = between_lru_and_fixed_subset(p.lru, p.fixed_subset, share);
    }
    let rms = |f: &dyn Fn(&CalibrationPoint) -> f64| {
        (points
            .iter()
            .map(|p| (f(p) - p.measured).powi(2))
            .sum::<f64>()
            / points.len() as f64)
            .sqrt()
    };
    let measured: Vec<String> = points
        .iter()
        .map(|p| {
            format!(
                "{:.3} at {:.0}% of the dataset (LRU {:.3}, fixed subset {:.3})",
                p.measured,
                100.0 * p.cache_bytes as f64 / data.bytes as f64,
                p.lru,
                p.fixed_subset
            )
        })
        .collect();
    out.fit = Some(HitCurveFit {
        family: HIT_CURVE_FAMILY.into(),
        fixed_subset_share: share,
        chosen_because: format!(
            "hit ratio measured by {} calibration trial(s): {}; LRU plus {:.0}% of the gap to a fixed subset fits with rms error {:.3}, against {:.3} for LRU alone and {:.3} for a fixed subset",
            points.len(),
            measured.join("; "),
            100.0 * share,
            rms(&|p| p.fitted),
            rms(&|p| p.lru),
            rms(&|p| p.fixed_subset),
        ),
        points,
    });
    Ok(out)
}

/// The spec's declared footprint floor, bytes (0 when it declares none: the footprint is measured).
fn spec_floor(spec: &WorkloadSpec) -> u64 {
    spec.footprint.map_or(0, |b| b.0)
}

/// CPU-seconds per sample as the miss model charges them. Where the cached pipeline already waits on
/// the accelerator (at least [`CPU_BOUND`] of G) its loaders idle between batches, and the CPU time per
/// sample counts their wake-ups as well as work: there a sample costs what it cost at the most cores
/// that were still CPU-bound, or less if measured so (docs/profile-format.md). Seen: image at 1.5 cores
/// measured 2.84 ms against 2.38 at 1 core, which made a memory limit look binding at 1.5 cores where
/// the grid measured the accelerator's rate.
fn work_cost(sweep: &Sweep, g: f64) -> Vec<CostPoint> {
    let cpu_bound = |cpus: f64| sweep.curve.at(cpus) < CPU_BOUND * g;
    let busiest = sweep.cost.iter().rev().find(|p| cpu_bound(p.cpus)).copied();
    sweep
        .cost
        .iter()
        .map(|p| match busiest {
            Some(b) if !cpu_bound(p.cpus) => CostPoint {
                cpus: p.cpus,
                cpu_s_per_sample: p.cpu_s_per_sample.min(b.cpu_s_per_sample),
            },
            _ => *p,
        })
        .collect()
}

/// Stage 5: the model. At the calibration's cores: what a binding memory limit costs every sample is the
/// cold trial's fully cached epoch against the sweep's cached (unlimited) trial; what a miss costs is the
/// least-squares slope of CPU-seconds per sample against the miss ratio over the cold epoch and the
/// calibration trials, from that intercept.
fn fit(
    plan: &Plan,
    sweep: &Sweep,
    g: f64,
    fetch: &Fetch,
    calibration: &Calibration,
    data: Option<&mut Data>,
) -> FittedModel {
    let floor = spec_floor(plan.spec);
    let warm = cost_at(sweep, fetch.cores);
    let miss_cost = warm.filter(|_| data.is_some()).map(|warm| {
        let limited = fetch.full_cpu.map_or(warm, |full| full.max(warm));
        let points: Vec<(f64, f64)> = fetch
            .cold_cpu
            .map(|cpu| (0.0, cpu))
            .into_iter()
            .chain(calibration.cpu.iter().copied())
            .map(|(h, cpu)| (1.0 - h, cpu - limited))
            .collect();
        let (num, den) = points
            .iter()
            .fold((0.0, 0.0), |(n, d), (m, y)| (n + m * y, d + m * m));
        MissCost {
            cpu_s_per_sample: work_cost(sweep, g),
            cpu_s_per_miss: if den > 1e-9 {
                (num / den).max(0.0)
            } else {
                0.0
            },
            wait_s_per_miss: fetch.wait_s_per_miss,
            limited_overhead: limited / warm - 1.0,
        }
    });
    let (dataset_bytes, hit_ratios) = match data {
        Some(d) => {
            let share = calibration
                .fit
                .as_ref()
                .map_or(0.0, |f| f.fixed_subset_share);
            let rows = (0..=40)
                .map(|k| {
                    let c = d.bytes * k / 40;
                    let minio = minio_hit_ratio(c as f64, d.bytes as f64);
                    let lru = d.lru.hit_ratio(c);
                    HitRatioRow {
                        cache_bytes: c,
                        minio,
                        page_cache: between_lru_and_fixed_subset(lru, minio, share),
                        lru: Some(lru),
                    }
                })
                .collect();
            (d.bytes, rows)
        }
        None => (0, Vec::new()),
    };
    FittedModel {
        stall: StallModel {
            accelerator_samples_per_s: g,
            cpu: sweep.curve.clone(),
            fetch: fetch.model,
            footprint_bytes: sweep.footprint.unwrap_or(floor).max(floor),
            footprint_points: sweep.footprint_points.clone(),
            dataset_bytes,
            hit_model: plan.hit_model,
            miss_cost,
        },
        hit_ratios,
        hit_curve: calibration.fit.clone(),
        accelerator: None,
    }
}

/// Stage 6: held-out grid points and, on request, the whole grid, under their real constraint (a memory
/// limit for the page cache, `SYNERGY_CACHE_BYTES` for an application cache), each after the cache is
/// steady, with every model's prediction beside the measurement.
fn validate(
    run: &mut Runner,
    plan: &Plan,
    model: &FittedModel,
    memory_axis: &[f64],
) -> Result<Vec<ValidationPoint>, ProfileRunError> {
    let mut points: Vec<(TrialRole, f64, f64)> =
        held_out(&plan.cpu_axis, memory_axis, plan.req.validate)
            .into_iter()
            .map(|(c, mg)| (TrialRole::Validation, c, mg))
            .collect();
    if plan.req.exhaustive {
        for &c in &plan.cpu_axis {
            for &mg in memory_axis {
                points.push((TrialRole::Exhaustive, c, mg));
            }
        }
    }
    let mut validation = Vec::new();
    for (role, c, mg) in points {
        let mut r = plan.constrained(c);
        let mem = mg * GIB;
        match plan.hit_model {
            HitModel::Minio => r.cache_bytes = Some(Bytes(model.stall.cache_bytes(c, mem) as u64)),
            HitModel::PageCache => r.mem_limit = Some(Bytes(mem as u64)),
        }
        let t = run.trial(role, Some(mg), r)?;
        let predicted = |hm| model.predict(c, mem, Some(hm)).samples_per_s;
        validation.push(ValidationPoint {
            cpus: c,
            memory_gib: mg,
            measured: t.throughput.samples_per_s,
            measured_ci95: t.throughput.ci95_half_width,
            predicted_minio: predicted(HitModel::Minio),
            predicted_page_cache: predicted(HitModel::PageCache),
            predicted_ds_analyzer: Some(model.predict_ds_analyzer(c, mem).samples_per_s),
            role,
        });
    }
    Ok(validation)
}

/// Profiles a workload: runs the plan, fits the model, builds the matrix, validates, and writes the file.
pub fn run_profile(
    req: &ProfileRequest,
    bar: &ProgressBar,
    cancel: &Cancel,
) -> Result<Profile, ProfileRunError> {
    let host_cores = measure::trial::host_cores().len() as f64;
    let cpu_axis = match &req.cpus {
        Some(v) => v.clone(),
        None => matrix::auto_cpu_axis(host_cores),
    };
    check_axis("cpus", &cpu_axis)?;
    if let Some(c) = cpu_axis.iter().find(|c| **c > host_cores) {
        return Err(InputError::setting(
            "cpus",
            format!("{c} cores asked for, but this host has {host_cores}"),
        )
        .into());
    }
    if let Some(m) = &req.memory_gib {
        check_axis("memory_gib", m)?;
    }
    let c_max = *cpu_axis.last().expect("checked non-empty");
    // The profile's cores are held for the whole run, so no other synergy process takes them between
    // trials; each trial's own claim lands on them (the ledger prefers cores this process holds).
    let lease =
        crate::isolate::ledger::claim(Cores(c_max).threads(), &measure::trial::host_cores())
            .map_err(|e| TrialError::Isolate(e.into()))?;
    let journal_path = req.out.with_extension("trials.jsonl");
    let mut run = Runner {
        journal: Journal::open(journal_path.clone(), req.resume)?,
        bar,
        cancel,
        isolation: req.isolation,
        warnings: Vec::new(),
        speed: Speed::new(lease.cores().first().copied()),
    };
    let n_grid = cpu_axis.len() * req.memory_gib.as_ref().map_or(5, Vec::len);
    bar.set_length(
        (3 + cpu_axis.len() / 2
            + CALIBRATION_FRACTIONS.len()
            + req.validate
            + if req.exhaustive { n_grid } else { 0 }) as u64,
    );

    let (spec, no_memory_axis) = discover(&mut run, &req.spec, c_max)?;
    let plan = Plan {
        req,
        spec: &spec,
        cpu_axis,
        host_cores,
        hit_model: match spec.cache {
            CacheKind::App => HitModel::Minio,
            CacheKind::PageCache => HitModel::PageCache,
        },
    };

    let sweep = cpu_sweep(&mut run, &plan)?;
    let accel = accelerator(&mut run, &plan, &sweep)?;
    if !accel.separated {
        run.warnings.push(accel.because.clone());
    }
    let g = accel
        .synthetic_samples_per_s
        .max(accel.cached_best_samples_per_s);
    let mut data = Data::of(&sweep.first)?;
    let cores = calibration_cores(&plan, &sweep, g);
    let (fetch, calibration) = match data.as_mut() {
        Some(d) => {
            let fetch = cold_fetch(&mut run, &plan, &sweep, cores, d)?;
            let calibration = calibrate(&mut run, &plan, &sweep, &fetch, d)?;
            (Some(fetch), calibration)
        }
        None => (
            None,
            Calibration {
                fit: None,
                cpu: Vec::new(),
            },
        ),
    };
    let fetch = fetch.unwrap_or_else(|| Fetch::unmeasured(cores, 0.0));
    let has_data = data.is_some();
    let mut model = fit(&plan, &sweep, g, &fetch, &calibration, data.as_mut());
    model.accelerator = Some(accel);

    let memory_axis = req.memory_gib.clone().unwrap_or_else(|| {
        matrix::auto_memory_axis(model.stall.footprint_bytes, model.stall.dataset_bytes)
    });
    let gpus = req.gpus.unwrap_or(spec.gpus).max(1);
    let host_mem = host_memory_bytes();
    let server = req.server.unwrap_or(ServerShape {
        gpus,
        cpus: plan.host_cores,
        memory_gib: host_mem as f64 / GIB,
    });
    let (m, per_gpu, demand) = matrix::build(
        &model,
        &plan.cpu_axis,
        &memory_axis,
        gpus,
        &server,
        req.tolerance,
    );

    let validation = if has_data {
        validate(&mut run, &plan, &model, &memory_axis)?
    } else {
        Vec::new()
    };
    let validation_summary = [HitModel::Minio, HitModel::PageCache]
        .into_iter()
        .filter_map(|hm| summarize(&validation, hm, false))
        .chain(summarize(&validation, plan.hit_model, true))
        .collect();

    let speed = SpeedCheck::new(run.speed.first, cpu_calibration(run.speed.core));
    if speed.drifted {
        run.warnings.push(format!(
            "the host's CPU speed changed by {:+.0}% during the profile (a fixed calibration ran at {:.3e} ops/s before and {:.3e} after): its trials may describe two machines",
            100.0 * speed.drift,
            speed.before.ops_per_s,
            speed.after.ops_per_s
        ));
    }
    let first = &sweep.first;
    let ds = &first.dataset;
    // What the probe saw of the script as it runs (synthetic trials replay, so they are left out).
    let probe = run
        .journal
        .order
        .iter()
        .filter(|t| matches!(t.role, TrialRole::Discovery | TrialRole::Cpu))
        .filter_map(|t| t.result.probe.clone())
        .reduce(|mut a: ProbeReport, b| {
            a.merge(b);
            a
        });
    let batch_size = probe
        .as_ref()
        .and_then(|p| p.batch_size)
        .unwrap_or(spec.batch_size);
    let profile = Profile {
        schema: SCHEMA.into(),
        source: format!("measured by synergy {}", env!("CARGO_PKG_VERSION")),
        workload: WorkloadInfo {
            name: spec.name.clone(),
            spec: Some(spec.origin.clone()),
            description: spec.description.clone(),
            batch_size,
            gpus,
            hit_model: plan.hit_model,
            iter_time_s: m
                .proportional
                .samples_per_s
                .filter(|t| *t > 0.0)
                .map(|t| batch_size as f64 / t),
            class: None,
            dataset: ds.as_ref().map(|d| DatasetInfo {
                path: d.path.display().to_string(),
                items: d.files,
                bytes: d.bytes,
                mean_item_bytes: d.mean_file_bytes,
            }),
            no_memory_axis: if has_data { None } else { no_memory_axis },
            probe,
        },
        host: Some(HostInfo {
            hostname: nix::unistd::gethostname()
                .map(|h| h.to_string_lossy().into_owned())
                .unwrap_or_default(),
            cores: plan.host_cores as usize,
            memory_bytes: host_mem,
            gpu: crate::measure::telemetry::GpuSampler::new(None)
                .and_then(|g| g.summary().devices.first().cloned()),
            kernel: nix::sys::utsname::uname()
                .map(|u| u.release().to_string_lossy().into_owned())
                .unwrap_or_default(),
            isolation: first.isolation.backend.to_string(),
            storage_limit_bytes_per_s: req.storage_limit.map(|b| b.0),
            storage_read_bytes_per_s: fetch.storage_seen,
            cpu_speed: Some(speed),
        }),
        created: Some(now_rfc3339()),
        trials: run.journal.order.clone(),
        model: Some(model),
        server,
        matrix: m,
        per_gpu,
        demand,
        validation,
        validation_summary,
        warnings: run.warnings,
    };
    profile.write(&req.out)?;
    let _ = std::fs::remove_file(&journal_path);
    Ok(profile)
}

fn check_axis(setting: &'static str, v: &[f64]) -> Result<(), InputError> {
    if v.is_empty() || v.iter().any(|x| !(x.is_finite() && *x > 0.0)) {
        return Err(InputError::setting(
            setting,
            "values must be positive numbers",
        ));
    }
    if v.windows(2).any(|w| w[0] >= w[1]) {
        return Err(InputError::setting(
            setting,
            "values must be strictly increasing",
        ));
    }
    Ok(())
}

/// `n` grid points spread over the grid, leaving out the column the CPU sweep measured (the last,
/// where the whole dataset is cached), so they test what the model derived rather than what it saw.
pub fn held_out(cpus: &[f64], memory_gib: &[f64], n: usize) -> Vec<(f64, f64)> {
    let cols = if memory_gib.len() > 1 {
        &memory_gib[..memory_gib.len() - 1]
    } else {
        memory_gib
    };
    // Column-major order alternating rows, so consecutive picks differ in both axes.
    let mut cells = Vec::new();
    for (j, &m) in cols.iter().enumerate() {
        for k in 0..cpus.len() {
            let i = if j % 2 == 0 { k } else { cpus.len() - 1 - k };
            cells.push((cpus[i], m));
        }
    }
    if n == 0 || cells.is_empty() {
        return Vec::new();
    }
    if n >= cells.len() {
        return cells;
    }
    let mut picked: Vec<(f64, f64)> = (0..n)
        .map(|k| cells[((k as f64 + 0.5) * cells.len() as f64 / n as f64) as usize])
        .collect();
    picked.dedup();
    picked
}

/// Errors of one hit model's predictions (this project's model, or with `ds_analyzer` the published
/// one) over the validation points.
fn summarize(
    points: &[ValidationPoint],
    model: HitModel,
    ds_analyzer: bool,
) -> Option<ErrorSummary> {
    let mut errs: Vec<f64> = points
        .iter()
        .filter_map(|p| match ds_analyzer {
            true => p.predicted_ds_analyzer.map(|v| p.error_of(v)),
            false => Some(p.error(model)),
        })
        .collect();
    if errs.is_empty() {
        return None;
    }
    errs.sort_by(f64::total_cmp);
    let n = errs.len();
    let median = if n % 2 == 1 {
        errs[n / 2]
    } else {
        (errs[n / 2 - 1] + errs[n / 2]) / 2.0
    };
    Some(ErrorSummary {
        hit_model: model,
        ds_analyzer,
        points: n,
        median_error: median,
        mean_error: errs.iter().sum::<f64>() / n as f64,
        max_error: errs[n - 1],
    })
}

pub(crate) fn host_memory_bytes() -> u64 {
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

/// Now as RFC 3339 UTC, from the system clock (no time-zone database needed).
fn now_rfc3339() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64);
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Civil-from-days (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn held_out_points_avoid_the_swept_column_and_spread() {
        let cpus = [0.5, 1.0, 1.5, 2.0];
        let mem = [1.0, 2.0, 3.0];
        let pts = held_out(&cpus, &mem, 4);
        assert_eq!(pts.len(), 4);
        assert!(pts.iter().all(|(_, m)| *m < 3.0));
        let distinct_cpus: std::collections::BTreeSet<_> =
            pts.iter().map(|(c, _)| (c * 4.0) as i64).collect();
        assert!(distinct_cpus.len() >= 3, "{pts:?}");
        assert_eq!(held_out(&cpus, &mem, 100).len(), 8);
        assert!(held_out(&cpus, &mem, 0).is_empty());
    }

    fn est(samples_per_s: f64, ci95_half_width: f64) -> Estimate {
        Estimate {
            samples_per_s,
            ci95_half_width,
            measured_steps: 100,
            measured_s: 10.0,
            warmup_s: 1.0,
            window_start_s: 1.0,
            whole_epochs: 0,
        }
    }

    fn curve(points: &[(f64, f64)]) -> Vec<CpuPoint> {
        points
            .iter()
            .map(|&(cpus, samples_per_s)| CpuPoint {
                cpus,
                samples_per_s,
            })
            .collect()
    }

    #[test]
    fn g_is_told_apart_only_when_the_synthetic_trial_shows_it() {
        // Clearly faster than the cached trial at the most cores.
        let rising = curve(&[(1.0, 50.0), (2.0, 80.0)]);
        let a = separate_accelerator(
            &est(100.0, 2.0),
            &est(80.0, 2.0),
            2.0,
            &rising,
            80.0,
            0.04,
            true,
        );
        assert!(a.separated, "{}", a.because);
        assert!(a.because.contains("replayed"), "{}", a.because);
        // Level with it where the curve has flattened: the pipeline waits on the accelerator.
        let flat = curve(&[(1.0, 400.0), (1.5, 474.0), (2.0, 474.2)]);
        let a = separate_accelerator(
            &est(474.2, 3.0),
            &est(474.2, 3.0),
            2.0,
            &flat,
            474.8,
            0.04,
            false,
        );
        assert!(a.separated, "{}", a.because);
        assert!(a.because.contains("flattened"), "{}", a.because);
        // Below it while the curve still rises: a synthetic mode the script ignored.
        let a = separate_accelerator(
            &est(13.8, 0.3),
            &est(16.0, 0.3),
            2.0,
            &rising,
            16.0,
            0.04,
            false,
        );
        assert!(!a.separated);
        assert!(
            a.because.contains("could not be separated"),
            "{}",
            a.because
        );
        assert_eq!(a.cached_best_samples_per_s, 16.0);
        // One swept point says nothing about flattening.
        let one = curve(&[(2.0, 80.0)]);
        let a = separate_accelerator(
            &est(81.0, 2.0),
            &est(80.0, 2.0),
            2.0,
            &one,
            80.0,
            0.04,
            true,
        );
        assert!(!a.separated, "{}", a.because);
    }

    #[test]
    fn the_footprint_slack_grows_with_a_large_process() {
        assert_eq!(footprint_of_peak(40 << 20), 48 << 20);
        let gib = 1u64 << 30;
        assert_eq!(footprint_of_peak(gib), gib + gib / 20);
    }

    #[test]
    fn timestamps_are_rfc3339() {
        let t = now_rfc3339();
        assert_eq!(t.len(), 20);
        assert!(t.starts_with("20") && t.ends_with('Z'));
    }
}
