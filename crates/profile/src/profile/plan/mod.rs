//! Optimistic profiling (DS-Analyzer's differential measurement, improved; docs/architecture.md §4). The
//! plan runs in stages, each its own module, in the order a profile tells its story:
//!
//! 0. [`discover`]: for a probed script whose dataset is not named, one run as it is, for the dataset's
//!    directory the probe sees (without one, the memory axis does not apply);
//! 1. [`cpu`]: the CPU axis with the dataset cached, bisecting towards where throughput changes
//!    and skipping every point its measured neighbours already bound;
//! 2. [`accelerator`]: one synthetic trial for the accelerator's rate G, told apart from the CPU curve
//!    or said not to be (G is never below a measured point);
//! 3. [`fetch`]: one cold epoch for the storage rate and the CPU a miss costs (an application cache's
//!    own cold trial; for a page cache the calibration trial's first epoch), and a timed read of
//!    evicted files for how long a miss blocks a loader;
//! 4. [`calibrate`]: for page-cache workloads, memory-limited trials, started cold, that place the
//!    kernel's hit curve between LRU and a fixed subset;
//! 5. [`fit`]: the model, its hit-ratio tables, then the matrix;
//! 6. [`validate`]: held-out (and, with `--exhaustive`, all) grid points under their real constraint.
//!
//! Trials that other work on the host disturbed are run again after the host quietens (bounded), and any
//! that stay disturbed are listed in the profile's warnings ([`runner`]). Every finished trial is
//! journaled at once, so `--resume` continues an interrupted profile without measuring anything twice
//! ([`journal`]; docs/architecture.md §7). A replay runs the same stages over a profile's own trials with
//! nothing measured ([`replay`]). [`assemble`] gathers what the profile says of the host and the run beside
//! the model. This module holds the request, the axes every stage works on, and
//! [`run_profile`], which runs the stages in order.

mod accelerator;
mod assemble;
mod calibrate;
mod cpu;
mod discover;
mod fetch;
mod fit;
mod holdout;
mod journal;
mod replay;
mod runner;

use crate::error::Setting;
pub(crate) use crate::isolate::host_memory_bytes;
pub use holdout::held_out;
pub use replay::{replay_request, spec_of, Recorded};

use accelerator::accelerator;
use assemble::{host_info, now_rfc3339, speed_check, workload_info};
use calibrate::{calibrate, calibration_cores, Calibration, CALIBRATION_FRACTIONS};
use cpu::{cpu_sweep, remeasure, Sweep};
use discover::discover;
use fetch::{cold_fetch, Data, Fetch};
use fit::fit;
use holdout::{summaries, validate};
use runner::Runner;

use super::matrix;
use crate::cancel::Cancel;
use crate::error::InputError;
use crate::format::profile::HitModel;
use crate::format::profile::{FittedModel, Profile, ProfileError, ServerShape, SCHEMA};
use crate::format::trial::{CacheState, TrialResult};
use crate::format::trial::{IsolationKind, Limits};
use crate::isolate::{self};
use crate::measure::{self, EstimatorConfig, TrialError, TrialRequest};
use crate::units::{BytesPerSec, Cores, GIB};
use crate::workload::spec::CacheKind;
use crate::workload::WorkloadSpec;
use indicatif::ProgressBar;
use std::path::{Path, PathBuf};

/// Confidence half-width, relative, at which a memory-limited trial, a cached trial of the CPU sweep
/// and an application cache's cold trial stop.
const CONSTRAINED_PRECISION: f64 = 0.04;

/// Fewest steps a cached trial of the CPU sweep and an application cache's cold trial measure. Their
/// one trial stands for a whole column of the grid, and a window of 10-16 steps (pytorch-resnet18-small,
/// 2 s) spread 9% over four repeats at one core where 30 steps spread 5% and 60 steps 2.5%; 40 keeps a
/// fast workload's two-second trials about as short (docs/profile-format.md, "How the trials run").
const PLAN_MIN_STEPS: u64 = 40;
/// A cached trial's window this long needs only [`PLAN_MIN_STEPS_LONG`] steps: a real script's step at
/// half a core takes two seconds, and [`PLAN_MIN_STEPS`] of them alone took 80 s of a 381 s profile.
const PLAN_LONG_WINDOW_S: f64 = 20.0;
/// Fewest steps in a window [`PLAN_LONG_WINDOW_S`] long: ten bursts of a two-worker loader.
const PLAN_MIN_STEPS_LONG: u64 = 20;

/// Longest warm-up a memory-limited trial waits out before measuring, seconds.
const MAX_WARMUP_EPOCH_S: f64 = 60.0;
/// Epochs a page cache needs before its hit ratio is steady: the first fills it, the second promotes
/// what it kept to the active list, and the third still hits more than the ones after it wherever the
/// cache holds most of the dataset (measured: 0.69 against a steady 0.63, 705 against 646 samples/s;
/// docs/profile-format.md, "How the trials run"); from the fourth on it repeats.
const PAGE_CACHE_WARMUP_EPOCHS: u64 = 3;
/// An application cache keeps what the first epoch put in it.
const APP_CACHE_WARMUP_EPOCHS: u64 = 1;
/// A page cache with room for the whole dataset and this share of it more is steady from its second
/// epoch: the first reads every file in, and nothing presses it out again.
const WHOLE_DATASET_MARGIN: f64 = 0.25;
/// ... or this share of what the job keeps resident more, where that is larger: a Python job's resident
/// memory varies by tens of MiB from run to run (see `cpu::FOOTPRINT_SLACK_SHARE`).
const WHOLE_DATASET_RESIDENT_MARGIN: f64 = 0.05;

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
    /// The held-out points, in order, where they are known beforehand (a replay: those its profile
    /// holds); `None`: [`held_out`] picks [`ProfileRequest::validate`] of them.
    pub held_out: Option<Vec<(f64, f64)>>,
    /// Wall time this run may take, seconds; `None`: no limit. A held-out point that would not fit in
    /// what is left is not measured, and the profile says so; the measuring stages and an
    /// `--exhaustive` grid always run (docs/profile-format.md, "How the trials run").
    pub budget_s: Option<f64>,
    /// Measure the whole grid as well.
    pub exhaustive: bool,
    /// Reuse trials journaled by an interrupted run.
    pub resume: bool,
    /// Launch the workload afresh for every cached trial of the CPU sweep, even where its loader's pool
    /// does not follow its cores ([`WorkloadSpec::pool_is_fixed`]) and one launch re-budgeted in place
    /// would do.
    pub fresh_trials: bool,
    /// Storage read limit for every trial that reads the dataset.
    pub storage_limit: Option<BytesPerSec>,
    /// Isolation backend.
    pub isolation: Option<IsolationKind>,
    /// Fraction of the best throughput the demand vector may give up.
    pub tolerance: f64,
    /// The CPU sweep stops refining an interval whose ends differ by at most this fraction.
    pub refine_tolerance: f64,
    /// A replay: the trials and measurements the plan takes from a profile instead of measuring
    /// ([`replay_request`]); `None` measures.
    pub recorded: Option<Recorded>,
}

/// The CPU sweep's [`ProfileRequest::refine_tolerance`] unless a caller needs another.
pub const DEFAULT_REFINE_TOLERANCE: f64 = 0.04;

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
    /// The CPU sweep's cached trials run in one launch, re-budgeted in place.
    in_place: bool,
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

    /// Epochs a memory-limited trial at `cpus` cores and `memory_bytes` waits out, by what `model` says
    /// of its cache there: a page cache that holds the whole dataset with room to spare
    /// ([`WHOLE_DATASET_MARGIN`], [`WHOLE_DATASET_RESIDENT_MARGIN`]) is steady after one epoch, any
    /// other after [`Plan::warmup_epochs`].
    fn warmup_epochs_at(&self, model: &FittedModel, cpus: f64, memory_bytes: f64) -> u64 {
        let stall = &model.stall;
        let dataset = stall.dataset_bytes as f64;
        let margin = (WHOLE_DATASET_MARGIN * dataset)
            .max(WHOLE_DATASET_RESIDENT_MARGIN * stall.resident_at(cpus));
        match self.hit_model {
            HitModel::PageCache
                if dataset > 0.0 && stall.cache_bytes(cpus, memory_bytes) >= dataset + margin =>
            {
                1
            }
            _ => self.warmup_epochs(),
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

/// Stops a trial that stands for a whole column of the grid (a cached trial of the CPU sweep, an
/// application cache's cold trial) at the grid's precision and after [`PLAN_MIN_STEPS`] steps at least
/// ([`PLAN_MIN_STEPS_LONG`] in a window [`PLAN_LONG_WINDOW_S`] long).
fn to_column_precision(r: &mut TrialRequest) {
    r.estimator.rel_precision = CONSTRAINED_PRECISION;
    r.estimator.min_measure_steps = PLAN_MIN_STEPS;
    r.estimator.long_window_s = PLAN_LONG_WINDOW_S;
    r.estimator.min_measure_steps_long = PLAN_MIN_STEPS_LONG;
}

/// CPU-seconds per sample of a trial, from its domain's CPU time over the measured window.
fn cpu_s_per_sample(r: &TrialResult) -> Option<f64> {
    let used = r.telemetry.cpu_cores_used?;
    (r.throughput.samples_per_s > 0.0).then(|| used / r.throughput.samples_per_s)
}

/// The spec's declared footprint floor, bytes (0 when it declares none: the footprint is measured).
fn spec_floor(spec: &WorkloadSpec) -> u64 {
    spec.footprint.map_or(0, |b| b.0)
}

/// Profiles a workload: runs the plan, fits the model, builds the matrix, validates, and writes the file.
pub fn run_profile(
    req: &ProfileRequest,
    bar: &ProgressBar,
    cancel: &Cancel,
) -> Result<Profile, ProfileRunError> {
    let recorded = req.recorded.as_ref();
    let host_cores = match recorded {
        Some(r) => r.host.cores as f64,
        None => measure::trial::host_cores().len() as f64,
    };
    let cpu_axis = check_request(req, host_cores)?;
    let c_max = *cpu_axis.last().expect("checked non-empty");
    let journal_path = crate::format::journal::journal_path(&req.out);
    // A replay needs the dataset's file sizes for the cache model: a generated one is made again as
    // it was, where the trials' is not here.
    let dataset_here = match recorded {
        Some(_) => measure::trial::prepare_dataset(&req.spec, bar, cancel)?.map(|(dir, ..)| dir),
        None => None,
    };
    let enforced = match recorded {
        Some(r) => r.host.limits_enforced,
        None => Some(check_isolation(req, &cpu_axis)?),
    };
    let mut run = Runner::open(req, journal_path.clone(), Cores(c_max), bar, cancel)?;
    bar.set_length(planned_trials(req, &cpu_axis));
    // How long the held-out trials take is known once the model gives their rates (stage 6).
    bar.set_prefix(match req.budget_s {
        Some(b) => format!(
            "(measuring the model; budget {})",
            humantime::format_duration(std::time::Duration::from_secs(b.round() as u64))
        ),
        None => "(measuring the model)".to_string(),
    });

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
        in_place: !req.fresh_trials && spec.pool_is_fixed(),
    };

    let Measured {
        model,
        sweep,
        storage_seen,
        has_data,
    } = measure_model(&mut run, &plan, dataset_here.as_deref())?;

    let memory_axis = req.memory_gib.clone().unwrap_or_else(|| {
        matrix::auto_memory_axis(model.stall.footprint_bytes, model.stall.dataset_bytes)
    });
    let gpus = job_gpus(req, &spec, &run.journal.order, &mut run.warnings);
    let host_mem = host_memory_bytes();
    let server = req.server.unwrap_or(ServerShape {
        gpus,
        cpus: plan.host_cores,
        memory_gib: host_mem as f64 / GIB,
    });
    let (mut m, mut per_gpu, mut demand) = matrix::build(
        &model,
        &plan.cpu_axis,
        &memory_axis,
        gpus,
        &server,
        req.tolerance,
    );
    run.warnings.extend(matrix::explain_or_repair(
        &model,
        &mut m,
        &mut per_gpu,
        &mut demand,
        gpus,
        &server,
    ));

    let validation = if has_data {
        validate(
            &mut run,
            &plan,
            &model,
            &memory_axis,
            sweep.reference_speed(),
        )?
    } else {
        Vec::new()
    };
    let validation_summary = summaries(&validation, plan.hit_model);

    let speed = match recorded {
        Some(r) => r.speed,
        None => speed_check(&mut run),
    };
    let (trials, warnings) = match recorded {
        Some(r) => r.trials_and_warnings(&run.journal.order, run.warnings),
        None => (run.journal.order.clone(), run.warnings),
    };
    let first = &sweep.first;
    let profile = Profile {
        schema: SCHEMA.into(),
        source: recorded.map_or_else(
            || format!("measured by synergy {}", env!("CARGO_PKG_VERSION")),
            |r| r.source.clone(),
        ),
        workload: workload_info(
            &spec,
            plan.hit_model,
            gpus,
            m.proportional.samples_per_s,
            first,
            &run.journal.order,
            no_memory_axis.filter(|_| !has_data),
        ),
        host: Some(match recorded {
            Some(r) => r.host.clone(),
            None => host_info(
                req,
                plan.host_cores,
                first,
                storage_seen,
                host_mem,
                speed,
                enforced,
            ),
        }),
        created: recorded.map_or_else(|| Some(now_rfc3339()), |r| r.created.clone()),
        trials,
        model: Some(model),
        server,
        matrix: m,
        per_gpu,
        demand,
        validation,
        validation_summary,
        warnings,
        refinement: None,
    };
    profile.write(&req.out)?;
    // A replay kept no journal (and leaves alone any an interrupted profile to `out` left).
    if recorded.is_none() {
        let _ = std::fs::remove_file(&journal_path);
    }
    Ok(profile)
}

/// The GPUs the matrix is per: `--gpus` when given, else the world size of the distributed job the
/// probe saw (its ranks, one per GPU), else the spec's. Warns where the probe saw another world size than
/// `--gpus` or the spec says.
fn job_gpus(
    req: &ProfileRequest,
    spec: &WorkloadSpec,
    trials: &[crate::format::profile::ProfileTrial],
    warnings: &mut Vec<String>,
) -> u32 {
    let world = assemble::probe_seen(trials).and_then(|p| p.world_size);
    let (gpus, whence) = match (req.gpus, world) {
        (Some(g), _) => (g, "--gpus".to_string()),
        (None, Some(w)) => (w, String::new()),
        (None, None) => (spec.gpus, String::new()),
    };
    // A spec that says nothing has one GPU; one that says more than the probe saw is told.
    let said = req.gpus.or((spec.gpus > 1).then_some(spec.gpus));
    if let (Some(w), Some(s)) = (world, said) {
        if w != s {
            let whence = if whence.is_empty() {
                format!("field `gpus` of {}", spec.origin)
            } else {
                whence
            };
            warnings.push(format!(
                "the probe saw a job of {w} ranks, but {whence} says {s} GPUs; the matrix is per {gpus} GPUs: check the command's launcher (torchrun --nproc_per_node)"
            ));
        }
    }
    gpus.max(1)
}

/// What the measuring stages leave for the matrix, the validation and the file.
struct Measured {
    model: FittedModel,
    /// The CPU sweep (its first trial describes the host and the dataset; its median probe reading is
    /// the reference speed validation is judged at).
    sweep: Sweep,
    /// The storage rate the cold epoch read, bytes per second.
    storage_seen: Option<f64>,
    /// Whether the workload has a dataset on disk (without one the memory axis does not apply).
    has_data: bool,
}

/// Stages 1-5 in order: the CPU sweep (its slow cores measured again), the accelerator's rate, the
/// cold epoch and the page cache's calibration, and the model fitted to them.
fn measure_model(
    run: &mut Runner,
    plan: &Plan,
    dataset_here: Option<&Path>,
) -> Result<Measured, ProfileRunError> {
    let mut sweep = cpu_sweep(run, plan)?;
    run.speed.sweep_median = sweep.reference_speed();
    // Judged against the sweep's median, as every later trial is, rather than scaled by a quarter.
    for cpus in sweep.slow_cores() {
        remeasure(run, plan, &mut sweep, cpus)?;
    }
    run.speed.sweep_median = sweep.reference_speed();
    // A footprint the spec does not declare is known only now: the rest of the plan is refused rather
    // than measured for memory sizes the workload cannot run in (the CPU trials stay journaled).
    let footprint = sweep.footprint_at(plan.cpu_axis[0], spec_floor(plan.spec));
    check_memory_axis(plan.req, footprint, "measured at the fewest cores")?;
    let accel = accelerator(run, plan, &sweep)?;
    if !accel.separated {
        run.warnings.push(accel.because.clone());
    }
    let g = accel
        .synthetic_samples_per_s
        .max(accel.cached_best_samples_per_s);
    run.accelerator_samples_per_s = Some(g);
    let mut data = Data::of(&sweep.first, dataset_here)?;
    let cores = calibration_cores(plan, &sweep, g);
    let (fetch, calibration) = match (data.as_mut(), plan.hit_model) {
        (Some(d), HitModel::PageCache) => calibrate(run, plan, &mut sweep, cores, g, d)?,
        (Some(d), HitModel::Minio) => (
            cold_fetch(run, plan, &sweep, cores, d)?,
            Calibration::none(),
        ),
        (None, _) => (Fetch::unmeasured(cores, 0.0), Calibration::none()),
    };
    let has_data = data.is_some();
    let mut model = fit(plan, &sweep, g, &fetch, &calibration, data.as_mut());
    model.accelerator = Some(accel);
    Ok(Measured {
        model,
        sweep,
        storage_seen: fetch.storage_seen,
        has_data,
    })
}

/// Trials the plan expects to run, for the progress bar: discovery and the synthetic trial, an
/// application cache's cold trial (a page cache's is the calibration's first epoch), about half the CPU
/// axis, the calibration, the validation points and, with `--exhaustive`, the grid.
fn planned_trials(req: &ProfileRequest, cpu_axis: &[f64]) -> u64 {
    let cold_trials = match req.spec.cache {
        CacheKind::PageCache => 0,
        CacheKind::App => 1,
    };
    let n_grid = cpu_axis.len() * req.memory_gib.as_ref().map_or(5, Vec::len);
    (2 + cold_trials
        + cpu_axis.len() / 2
        + CALIBRATION_FRACTIONS.len()
        + req.validate
        + if req.exhaustive { n_grid } else { 0 }) as u64
}

/// The limits the plan's trials need, refused before the first trial where the backend detection finds
/// cannot enforce them (docs/architecture.md §7); what the backend enforces, for the file.
fn check_isolation(req: &ProfileRequest, cpu_axis: &[f64]) -> Result<Limits, TrialError> {
    let (backend, why) = isolate::detect(req.isolation)?;
    let needed = Limits {
        fractional_cores: cpu_axis.iter().any(|c| c.fract() != 0.0),
        // A page-cache workload's memory axis comes from memory-limited trials (the calibration, the
        // held-out points); one with no dataset has no memory axis.
        memory: req.spec.cache == CacheKind::PageCache
            && (req.spec.dataset.is_some() || req.spec.probe.is_some()),
        storage: req.storage_limit.is_some(),
    };
    isolate::require(
        &*backend,
        &why,
        req.isolation,
        &needed,
        "this profile's plan",
    )?;
    Ok(backend.enforces())
}

/// Everything of the request that can be checked before a trial runs (docs/architecture.md §7): the axes,
/// the GPUs and the tolerance; returns the CPU axis. (More validation points than the grid holds are
/// all of it: `held_out`.)
fn check_request(req: &ProfileRequest, host_cores: f64) -> Result<Vec<f64>, InputError> {
    let cpu_axis = match &req.cpus {
        Some(v) => v.clone(),
        None => matrix::auto_cpu_axis(host_cores),
    };
    check_axis(Setting::Cpus, &cpu_axis)?;
    if let Some(c) = cpu_axis.iter().find(|c| **c > host_cores) {
        return Err(InputError::setting(
            Setting::Cpus,
            format!("{c} cores asked for, but this host has {host_cores}"),
        ));
    }
    if let Some(m) = &req.memory_gib {
        check_axis(Setting::MemoryGib, m)?;
        let host = host_memory_bytes();
        if let Some(big) = m.iter().find(|g| host > 0 && **g * GIB > host as f64) {
            return Err(InputError::setting(
                Setting::MemoryGib,
                format!(
                    "{big} GiB is more than this host has ({:.2} GiB)",
                    host as f64 / GIB
                ),
            ));
        }
    }
    let declared = format!("field `footprint` in {}", req.spec.origin);
    check_memory_axis(req, spec_floor(&req.spec), &declared)?;
    if req.gpus == Some(0) {
        return Err(InputError::setting(Setting::Gpus, "must be at least 1"));
    }
    if !(0.0..1.0).contains(&req.tolerance) {
        return Err(InputError::setting(Setting::Tolerance, "must be in [0, 1)"));
    }
    Ok(cpu_axis)
}

/// Refuses a memory axis with a value below the workload's footprint (`whence` says where that comes
/// from): no trial can run there.
fn check_memory_axis(req: &ProfileRequest, footprint: u64, whence: &str) -> Result<(), InputError> {
    match req
        .memory_gib
        .as_ref()
        .and_then(|m| m.iter().find(|g| **g * GIB < footprint as f64))
    {
        Some(low) => Err(InputError::setting(
            Setting::MemoryGib,
            format!(
                "{low} GiB is below the workload's footprint, {} ({whence}): it cannot run in that",
                crate::units::Bytes(footprint)
            ),
        )),
        None => Ok(()),
    }
}

fn check_axis(setting: Setting, v: &[f64]) -> Result<(), InputError> {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn request(spec: WorkloadSpec, memory_gib: Vec<f64>) -> ProfileRequest {
        ProfileRequest {
            spec,
            out: PathBuf::from("p.json"),
            cpus: Some(vec![1.0]),
            memory_gib: Some(memory_gib),
            gpus: None,
            server: None,
            validate: 2,
            held_out: None,
            budget_s: None,
            exhaustive: false,
            resume: false,
            fresh_trials: false,
            storage_limit: None,
            isolation: None,
            tolerance: 0.05,
            refine_tolerance: DEFAULT_REFINE_TOLERANCE,
            recorded: None,
        }
    }

    /// A held-out point whose cache holds the whole dataset with room to spare waits out one epoch;
    /// one whose cache holds less, the page cache's three.
    #[test]
    fn a_cache_that_holds_the_whole_dataset_waits_out_one_epoch() {
        let shipped: Profile =
            serde_json::from_str(include_str!("../../../../../profiles/image.json")).unwrap();
        let model = shipped.model.unwrap();
        let spec = WorkloadSpec::load("image").unwrap();
        let req = request(spec.clone(), vec![1.0]);
        let plan = Plan {
            req: &req,
            spec: &spec,
            cpu_axis: vec![1.0],
            host_cores: 2.0,
            hit_model: HitModel::PageCache,
            in_place: false,
        };
        let resident = model.stall.resident_at(1.0);
        let dataset = model.stall.dataset_bytes as f64;
        let room = resident + 1.3 * dataset + 0.05 * resident;
        assert_eq!(plan.warmup_epochs_at(&model, 1.0, room), 1);
        let half = resident + 0.5 * dataset;
        assert_eq!(
            plan.warmup_epochs_at(&model, 1.0, half),
            PAGE_CACHE_WARMUP_EPOCHS
        );
        let minio = Plan {
            hit_model: HitModel::Minio,
            ..plan
        };
        assert_eq!(
            minio.warmup_epochs_at(&model, 1.0, room),
            APP_CACHE_WARMUP_EPOCHS
        );
    }

    /// A memory axis below the footprint is refused: the declared one before any trial, the measured one
    /// once the CPU axis has measured it.
    #[test]
    fn a_memory_axis_below_the_footprint_is_refused() {
        let mut spec = WorkloadSpec::load("text").unwrap();
        spec.footprint = Some(crate::units::Bytes(64 << 20));
        let low = request(spec.clone(), vec![0.01, 1.0]);
        let e = check_request(&low, 1.0).unwrap_err();
        assert_eq!(
            e.origin,
            crate::error::Origin::Setting(crate::error::Setting::MemoryGib)
        );
        assert!(e.message.contains("0.01 GiB is below"), "{}", e.message);
        assert!(check_request(&request(spec.clone(), vec![0.5, 1.0]), 1.0).is_ok());
        let measured = check_memory_axis(&request(spec, vec![0.5, 1.0]), 600 << 20, "measured");
        assert!(measured.unwrap_err().message.contains("0.5 GiB is below"));
    }
}
