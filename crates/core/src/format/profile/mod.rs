//! The profile file, schema `synergy-profile/1.12` (docs/architecture.md §3.4, docs/profile-format.md):
//! types, a reader (that still reads `synergy-profile/1`), an atomic writer, and the long-format CSV
//! export. What the reader checks is in `profile::validate`; predictions from a profile are in
//! `predict`. The data-stall model's fitted parameters are here as they are stored; what they
//! predict is the stall model's.

mod check;

use super::trial::{CpuCalibration, Limits, ProbeReport, TrialResult};
use crate::fsutil::write_atomic;
use serde::{Deserialize, Serialize};
use std::path::Path;

/// The schema name and version this build writes.
pub const SCHEMA: &str = "synergy-profile/1.12";
/// Every schema this build reads: each minor version only adds fields (1.1: the miss cost, the calibrated
/// hit curve, disturbed trials; 1.2: what a probe saw, how G was separated, a memory axis that does not
/// apply; 1.3: trials observed in real runs, where each matrix cell comes from, the refinement; 1.4:
/// each validation point's core speed and the prediction at it; 1.5: the two-list page-cache curve and
/// the memory each core count keeps resident; 1.6: each trial's peak besides its page cache; 1.7: the
/// core speed the CPU stage is at; 1.8: the seconds a trial's discarded runs took; 1.9: the page cache's
/// hits by part of the epoch and the loaders' queue; 1.10: the speed probe's band for a trial's shape;
/// 1.11: a distributed job's ranks, world size and launcher, a loader's sampler and threads, and trials
/// observed on Slurm; 1.12: the limits the isolation backend enforced), so an older file reads as one
/// without them.
pub const READABLE_SCHEMAS: [&str; 13] = [
    "synergy-profile/1",
    "synergy-profile/1.1",
    "synergy-profile/1.2",
    "synergy-profile/1.3",
    "synergy-profile/1.4",
    "synergy-profile/1.5",
    "synergy-profile/1.6",
    "synergy-profile/1.7",
    "synergy-profile/1.8",
    "synergy-profile/1.9",
    "synergy-profile/1.10",
    "synergy-profile/1.11",
    SCHEMA,
];

/// A workload's profile.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Profile {
    /// Always [`SCHEMA`].
    pub schema: String,
    /// Where the numbers come from: `measured by synergy VERSION`, or the publication for published ones.
    pub source: String,
    /// What was profiled.
    pub workload: WorkloadInfo,
    /// The host the trials ran on (absent for published profiles).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<HostInfo>,
    /// When the profile was made (RFC 3339, UTC).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created: Option<String>,
    /// Every trial, in the order run.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub trials: Vec<ProfileTrial>,
    /// The fitted data-stall model (absent for published profiles).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<FittedModel>,
    /// The reference server shape the matrix is normalized to.
    pub server: ServerShape,
    /// The sensitivity matrix.
    pub matrix: Matrix,
    /// The same matrix per GPU (axes divided by the GPU count), as the scheduler consumes it.
    pub per_gpu: PerGpuMatrix,
    /// The best-case demand.
    pub demand: Demand,
    /// Held-out points: predicted against measured.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub validation: Vec<ValidationPoint>,
    /// Error summaries of the validation points, per hit-ratio model.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub validation_summary: Vec<ErrorSummary>,
    /// What the reader should know about how far to trust this profile: trials that stayed disturbed,
    /// the host's speed drifting during the profile.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
    /// How observations of real runs moved the model (absent unless `synergy profile refine` or
    /// `synergy run --refine` made this file; 1.3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refinement: Option<Refinement>,
}

/// Identity of the profiled workload.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkloadInfo {
    /// Name (a model name for published profiles).
    pub name: String,
    /// The spec it came from, when measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spec: Option<String>,
    /// One line for people.
    #[serde(default)]
    pub description: String,
    /// Samples per step.
    pub batch_size: u32,
    /// GPUs it trains on.
    pub gpus: u32,
    /// Which hit-ratio model its cache follows.
    pub hit_model: HitModel,
    /// Time per iteration at GPU-proportional share, seconds (published profiles; derived otherwise).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iter_time_s: Option<f64>,
    /// Model class (image, language, speech), for the scheduler's workload mix.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub class: Option<String>,
    /// Dataset size and shape, when measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dataset: Option<DatasetInfo>,
    /// Why the memory axis does not apply, when it does not (a workload whose data are not files on
    /// disk): the matrix then has one memory column, the footprint.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub no_memory_axis: Option<String>,
    /// What the zero-change probe saw of the script (batch size, workers, dataset, device, parameters).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probe: Option<ProbeReport>,
}

/// The dataset a profile was measured on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DatasetInfo {
    /// Directory.
    pub path: String,
    /// Data files (samples, for file-per-sample datasets).
    pub items: u64,
    /// Total bytes.
    pub bytes: u64,
    /// Mean bytes per item.
    pub mean_item_bytes: f64,
}

/// Facts about the host that measured the profile.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HostInfo {
    /// Host name.
    pub hostname: String,
    /// CPU cores available to synergy.
    pub cores: usize,
    /// Memory, bytes.
    pub memory_bytes: u64,
    /// GPU model from NVML, when present.
    #[serde(default)]
    pub gpu: Option<String>,
    /// Kernel release.
    pub kernel: String,
    /// Isolation backend the trials used.
    pub isolation: String,
    /// The limits that backend enforced (absent before 1.12): where it could not enforce part of a
    /// core, a fractional allocation ran on whole cores.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limits_enforced: Option<Limits>,
    /// Storage read limit imposed during the profile, bytes per second.
    #[serde(default)]
    pub storage_limit_bytes_per_s: Option<f64>,
    /// Storage read bandwidth seen by the cold trial, bytes per second.
    #[serde(default)]
    pub storage_read_bytes_per_s: Option<f64>,
    /// A fixed CPU calibration timed before and after the trials: a profile measured while the host's
    /// speed drifted mixes two machines (absent before 1.1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_speed: Option<SpeedCheck>,
}

/// The backend a profile's trials ran under and the limits it enforced, in words (for `predict` and the
/// charts): `cgroup-v1 (enforced: whole cores, fractional cores, memory, storage)`.
pub fn isolation_said(h: &HostInfo) -> String {
    match &h.limits_enforced {
        Some(l) => format!("{} (enforced: {l})", h.isolation),
        None => format!("{} (limits enforced not recorded)", h.isolation),
    }
}

/// The host's CPU speed before and after a profile.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SpeedCheck {
    /// Before the first trial.
    pub before: CpuCalibration,
    /// After the last.
    pub after: CpuCalibration,
    /// `after / before - 1` of the best wall-clock rates.
    pub drift: f64,
    /// The drift is larger than [`SpeedCheck::DRIFT_LIMIT`].
    pub drifted: bool,
}

impl SpeedCheck {
    /// Relative change beyond which the host counts as having changed speed during a profile (a best of
    /// seven repeats varies by a few percent on a quiet host).
    pub const DRIFT_LIMIT: f64 = 0.10;

    /// Compares two calibrations.
    pub fn new(before: CpuCalibration, after: CpuCalibration) -> Self {
        let drift = if before.ops_per_s > 0.0 {
            after.ops_per_s / before.ops_per_s - 1.0
        } else {
            0.0
        };
        SpeedCheck {
            before,
            after,
            drift,
            drifted: drift.abs() > Self::DRIFT_LIMIT,
        }
    }
}

/// What a trial was for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TrialRole {
    /// A probed script's first run, as it is, to find its dataset and batch size.
    Discovery,
    /// Synthetic input: the accelerator's rate G.
    Synthetic,
    /// Dataset cached, one CPU count: min(G, P(c)).
    Cpu,
    /// Cold cache at the most cores: the storage fetch rate.
    Fetch,
    /// A memory-limited trial that calibrates the page-cache hit curve (not counted as validation).
    Calibration,
    /// A held-out grid point under its real memory constraint.
    Validation,
    /// A grid point measured by `--exhaustive`.
    Exhaustive,
    /// Throughput a real run observed at an allocation the scheduler gave it (`synergy profile refine`,
    /// `synergy run --refine`; 1.3).
    Observed,
}

/// One trial of a profile.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProfileTrial {
    /// What it was for.
    pub role: TrialRole,
    /// Memory of the grid point it stands for, GiB (validation and exhaustive trials).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_gib: Option<f64>,
    /// Times it was run: more than 1 when earlier runs were disturbed by other work on the host.
    #[serde(default = "one", skip_serializing_if = "is_one")]
    pub attempts: u32,
    /// Seconds the runs before the kept one took (1.8; 0 when it ran once): what re-running disturbed
    /// trials cost the profile, which its own `duration_s` does not show.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub earlier_runs_s: f64,
    /// The full trial result.
    pub result: TrialResult,
}

fn one() -> u32 {
    1
}

fn is_one(n: &u32) -> bool {
    *n == 1
}

fn is_zero(s: &f64) -> bool {
    *s == 0.0
}

/// The fitted model and the hit-ratio tables needed to evaluate it anywhere.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FittedModel {
    /// G, P(c), F(h), footprint, dataset size and hit model.
    #[serde(flatten)]
    pub stall: StallModel,
    /// Hit ratio against cache bytes for both models, at fine steps (linear in between).
    pub hit_ratios: Vec<HitRatioRow>,
    /// How the page-cache column was calibrated (absent for application caches and before 1.1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hit_curve: Option<HitCurveFit>,
    /// How G was told apart from the CPU curve (absent before 1.2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accelerator: Option<AcceleratorFit>,
    /// The core speed the CPU stage is at (1.7; absent before, and where no trial read the speed probe:
    /// the CPU stage is then as each trial measured it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub core_speed: Option<CoreSpeedReference>,
}

/// The one core speed a profile's CPU stage is brought to: each CPU-bound cached rate and each CPU cost
/// was measured at whatever speed the host had during its trial (docs/profile-format.md, "The host's
/// speed").
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CoreSpeedReference {
    /// The median of the CPU sweep's trials' speed probe readings, operations per CPU-second.
    pub reference_ops_per_cpu_s: f64,
    /// A CPU-bound pipeline's rate goes as the probe's reading to this power.
    pub pipeline_exponent: f64,
    /// How far a reading may sit from the reference, either way, as the trial's shape rather than the
    /// host's drift: only the part of the ratio beyond it is scaled (1.10; absent before, when every
    /// reading was scaled whole).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shape_band: Option<f64>,
}

/// The accelerator's rate G against what the cached CPU sweep measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AcceleratorFit {
    /// What the synthetic trial measured, samples per second.
    pub synthetic_samples_per_s: f64,
    /// The most any cached CPU trial measured, samples per second; G is never below it.
    pub cached_best_samples_per_s: f64,
    /// Whether the synthetic trial told G apart: clearly faster than the cached trial at the most cores,
    /// or level with a cached curve that had flattened there (the pipeline was already waiting on the
    /// accelerator). Otherwise G is only known to be at least what was measured.
    pub separated: bool,
    /// Why, in words.
    pub because: String,
}

/// The page-cache hit curve fitted to calibration trials.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HitCurveFit {
    /// `two-list` (1.5): the kernel's active and inactive lists simulated, the active list's share
    /// scaled by `active_list_scale`; `lru-to-fixed-subset` (1.1-1.4): h = LRU + share x (fixed subset
    /// - LRU).
    pub family: String,
    /// `two-list`: the fitted multiple of the kernel's active:inactive ratio (1 is the kernel's own).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub active_list_scale: Option<f64>,
    /// `lru-to-fixed-subset`: the fitted share, 0 is LRU, 1 a fixed subset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fixed_subset_share: Option<f64>,
    /// The calibration trials it was fitted to.
    pub points: Vec<CalibrationPoint>,
    /// Why this curve, in words.
    pub chosen_because: String,
}

/// A memory-limited trial's hit ratio against the candidate curves.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CalibrationPoint {
    /// Cores it ran on.
    pub cpus: f64,
    /// Its memory limit, GiB.
    pub memory_gib: f64,
    /// Cache bytes that left besides what the workload keeps resident (1.5; the footprint before).
    pub cache_bytes: u64,
    /// Hit ratio measured from its storage reads over whole epochs.
    pub measured: f64,
    /// LRU's hit ratio at that cache.
    pub lru: f64,
    /// A fixed subset's.
    pub fixed_subset: f64,
    /// The fitted curve's.
    pub fitted: f64,
}

/// Hit ratios of both cache models at one cache size.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HitRatioRow {
    /// Cache bytes.
    pub cache_bytes: u64,
    /// Fixed-subset cache.
    pub minio: f64,
    /// The OS page cache: LRU under per-epoch shuffling, calibrated towards a fixed subset by
    /// [`FittedModel::hit_curve`] where there is one.
    pub page_cache: f64,
    /// Uncalibrated LRU (1.1; before, `page_cache` is LRU).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lru: Option<f64>,
    /// `page_cache` by part of the epoch, first to last ([`EPOCH_PARTS`] of them; 1.9,
    /// empty before and for an application cache: the epoch's hits taken at their mean).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub page_cache_by_part: Vec<f64>,
}

/// A server shape: the GPU-proportional share is its cores and memory divided by its GPUs.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServerShape {
    /// GPUs.
    pub gpus: u32,
    /// CPU cores.
    pub cpus: f64,
    /// Memory, GiB.
    pub memory_gib: f64,
}

impl ServerShape {
    /// Cores per GPU at GPU-proportional share.
    pub fn cpus_per_gpu(&self) -> f64 {
        self.cpus / self.gpus.max(1) as f64
    }
    /// Memory per GPU at GPU-proportional share, GiB.
    pub fn memory_gib_per_gpu(&self) -> f64 {
        self.memory_gib / self.gpus.max(1) as f64
    }
}

impl std::str::FromStr for ServerShape {
    type Err = String;
    /// Parses `8gpu,24cpu,500gb` (any order; memory in gb/gib as GiB, or tb).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let (mut gpus, mut cpus, mut mem) = (None, None, None);
        for part in s.split(',').map(str::trim) {
            let split = part
                .find(|c: char| !(c.is_ascii_digit() || c == '.'))
                .unwrap_or(part.len());
            let (num, unit) = part.split_at(split);
            let v: f64 = num.parse().map_err(|_| {
                format!("`{part}`: expected a number with a unit, like 8gpu, 24cpu or 500gb")
            })?;
            if !(v.is_finite() && v > 0.0) {
                return Err(format!("`{part}` must be positive"));
            }
            // Messages quote the part as typed; the unit is matched in any case.
            match unit.to_ascii_lowercase().as_str() {
                "gpu" | "gpus" => {
                    // A whole number that fits: `0.5gpu` is no server, `1.5gpu` not one GPU.
                    let whole = num.parse::<u32>().ok().filter(|&g| g > 0);
                    gpus = Some(whole.ok_or_else(|| {
                        format!(
                            "`{part}`: GPUs must be a whole number from 1 to {}",
                            u32::MAX
                        )
                    })?)
                }
                "cpu" | "cpus" | "cores" => cpus = Some(v),
                "gb" | "gib" | "g" => mem = Some(v),
                "tb" | "tib" => mem = Some(v * 1024.0),
                _ => {
                    return Err(format!(
                        "`{part}`: unknown unit `{unit}` (use gpu, cpu, gb)"
                    ))
                }
            }
        }
        match (gpus, cpus, mem) {
            (Some(_), Some(_), Some(m)) if !m.is_finite() => {
                Err(format!("`{s}`: the memory is out of range"))
            }
            (Some(g), Some(c), Some(m)) => Ok(ServerShape {
                gpus: g,
                cpus: c,
                memory_gib: m,
            }),
            _ => Err(format!(
                "`{s}` needs all of GPUs, cores and memory, like 8gpu,24cpu,500gb"
            )),
        }
    }
}

/// The sensitivity matrix: throughput for every (cores, memory) allocation of the whole job.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Matrix {
    /// Row axis: CPU cores.
    pub cpus: Vec<f64>,
    /// Column axis: memory, GiB (footprint plus cache).
    pub memory_gib: Vec<f64>,
    /// Absolute throughput, samples per second, `[row][column]` (absent for published profiles).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub samples_per_s: Option<Vec<Vec<f64>>>,
    /// Throughput relative to the GPU-proportional allocation of the server shape, `[row][column]`.
    pub normalized: Vec<Vec<f64>>,
    /// The limiting stage per cell (absent for published profiles).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limited_by: Option<Vec<Vec<Stage>>>,
    /// The GPU-proportional allocation and its throughput, the normalization's 1.0.
    pub proportional: RatedAllocation,
    /// Where each cell's number comes from, `[row][column]` (absent before 1.3 and in profiles no
    /// refinement made: their cells are modelled except where a trial measured them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<Vec<Vec<CellSource>>>,
}

/// Where a matrix cell's number comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CellSource {
    /// A profiling trial ran at this allocation (a cached CPU trial stands for every column where memory
    /// does not bind).
    Measured,
    /// A real run observed this allocation (same cores; memory in the same cache regime).
    Observed,
    /// The fitted model's prediction, measured nowhere.
    Modelled,
}

/// The matrix per GPU.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PerGpuMatrix {
    /// Cores per GPU.
    pub cpus: Vec<f64>,
    /// Memory per GPU, GiB.
    pub memory_gib: Vec<f64>,
    /// Normalized throughput, `[row][column]`.
    pub normalized: Vec<Vec<f64>>,
}

/// An allocation and its throughput.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RatedAllocation {
    /// Cores.
    pub cpus: f64,
    /// Memory, GiB.
    pub memory_gib: f64,
    /// Samples per second, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub samples_per_s: Option<f64>,
    /// Relative to GPU-proportional.
    pub normalized: f64,
}

/// The best-case demand: the smallest allocation within `tolerance` of the best throughput.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Demand {
    /// For the whole job.
    pub job: RatedAllocation,
    /// Per GPU.
    pub per_gpu: RatedAllocation,
    /// Fraction of the best throughput that still counts as best.
    pub tolerance: f64,
}

/// A held-out point: the model's predictions against a measurement under the real constraint.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ValidationPoint {
    /// Cores.
    pub cpus: f64,
    /// Memory, GiB.
    pub memory_gib: f64,
    /// Measured samples per second.
    pub measured: f64,
    /// Its 95% half-width.
    pub measured_ci95: f64,
    /// Predicted with the minio hit model.
    pub predicted_minio: f64,
    /// Predicted with the page-cache hit model.
    pub predicted_page_cache: f64,
    /// Predicted by the published DS-Analyzer model ([`FittedModel::predict_ds_analyzer`]); absent
    /// before 1.1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub predicted_ds_analyzer: Option<f64>,
    /// The speed probe's reading on the trial's core over the profile's reference (the median of the
    /// CPU sweep's trials): how much faster the host ran while this point was measured than while the
    /// model's CPU stage was (1.4; absent where a speed was not read).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub core_speed: Option<f64>,
    /// The workload's own hit model's prediction with its CPU stage at `core_speed`
    /// ([`FittedModel::at_core_speed`] of `measure::hostspeed::pipeline_speedup` of `core_speed`
    /// since 1.10, of `core_speed` raised to `measure::hostspeed::PIPELINE_SPEED_EXPONENT` since
    /// 1.7, of `core_speed` before): the model's error with the host's drift taken out (1.4).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub predicted_at_core_speed: Option<f64>,
    /// `validation` or `exhaustive`.
    pub role: TrialRole,
}

impl ValidationPoint {
    /// Relative error of a hit model's prediction.
    pub fn error(&self, model: HitModel) -> f64 {
        let p = match model {
            HitModel::Minio => self.predicted_minio,
            HitModel::PageCache => self.predicted_page_cache,
        };
        self.error_of(p)
    }

    /// Relative error of a prediction `p` of this point.
    pub fn error_of(&self, p: f64) -> f64 {
        (p - self.measured).abs() / self.measured.max(1e-9)
    }
}

/// Prediction errors of one hit model over validation points.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ErrorSummary {
    /// The model.
    pub hit_model: HitModel,
    /// The published DS-Analyzer model (LRU page cache, misses cost bandwidth only) rather than this
    /// project's, for comparison.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub ds_analyzer: bool,
    /// This project's model with each point's CPU stage at the core speed it was measured at
    /// (`predicted_at_core_speed`; 1.4).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub at_core_speed: bool,
    /// Points.
    pub points: usize,
    /// Median relative error.
    pub median_error: f64,
    /// Mean relative error.
    pub mean_error: f64,
    /// Largest relative error.
    pub max_error: f64,
}

/// Errors reading or writing profile files.
#[derive(Debug, thiserror::Error)]
pub enum ProfileError {
    /// The file is not a valid profile; names the file and field.
    #[error(transparent)]
    Invalid(#[from] crate::error::InputError),
    /// Reading or writing failed.
    #[error("{context}: {source}")]
    Io {
        /// What, naming the path.
        context: String,
        /// The failure.
        #[source]
        source: std::io::Error,
    },
}

impl Profile {
    /// Reads and validates a profile file.
    pub fn read(path: &Path) -> Result<Profile, ProfileError> {
        let origin = path.display().to_string();
        let text = crate::fsutil::read_user_text(path, "a profile file").map_err(|e| match e {
            crate::fsutil::ReadError::Input(i) => ProfileError::Invalid(i),
            crate::fsutil::ReadError::Io(source) => ProfileError::Io {
                context: "reading a profile".to_string(),
                source,
            },
        })?;
        Self::parse(&text, &origin)
    }

    /// Parses and validates profile JSON; `origin` names it in errors.
    pub fn parse(text: &str, origin: &str) -> Result<Profile, ProfileError> {
        use crate::error::InputError;
        let value: serde_json::Value = serde_json::from_str(text).map_err(|e| {
            InputError::new(
                origin,
                format!("not JSON (line {}, column {}): {e}", e.line(), e.column()),
            )
        })?;
        match value.get("schema").and_then(|s| s.as_str()) {
            Some(s) if READABLE_SCHEMAS.contains(&s) => {}
            Some(other) => {
                return Err(InputError::field(
                    origin,
                    "schema",
                    format!(
                        "`{other}` is not supported; this synergy reads {}",
                        READABLE_SCHEMAS.map(|s| format!("`{s}`")).join(" and ")
                    ),
                )
                .into())
            }
            None => {
                return Err(InputError::field(
                    origin,
                    "schema",
                    format!("missing; expected `{SCHEMA}`"),
                )
                .into())
            }
        }
        let profile: Profile = serde_path_to_error::deserialize(value).map_err(|e| {
            let path = e.path().to_string();
            let message = e.into_inner().to_string();
            // At the top level the path is `.` (or, for an unknown key that is empty, nothing): serde's
            // message names the field itself (``missing field `server` ``), so the error names no field
            // of its own.
            if path == "." || path.is_empty() {
                InputError::new(origin, message)
            } else {
                InputError::field(origin, path, message)
            }
        })?;
        profile.validate(origin)?;
        Ok(profile)
    }

    /// Writes the profile as pretty JSON, atomically (temporary file and rename), and its CSV beside it.
    pub fn write(&self, path: &Path) -> Result<(), ProfileError> {
        let json = serde_json::to_string_pretty(self).expect("profiles serialize") + "\n";
        let save = |p: &Path, bytes: &[u8]| {
            write_atomic(p, bytes).map_err(|source| ProfileError::Io {
                context: "saving the profile".to_string(),
                source,
            })
        };
        save(path, json.as_bytes())?;
        save(&path.with_extension("csv"), self.to_csv().as_bytes())
    }

    /// The long-format CSV: one row per matrix cell, then one per validation point. The workload's name
    /// is any text a spec gave, so it goes through the csv crate's writer, which quotes it when it holds a
    /// comma or a quote (and leaves every other cell as it is).
    pub fn to_csv(&self) -> String {
        let mut w = csv::Writer::from_writer(Vec::new());
        let mut row =
            |cells: [String; 7]| w.write_record(&cells).expect("CSV into memory cannot fail");
        row([
            "workload",
            "kind",
            "cpus",
            "memory_gib",
            "samples_per_s",
            "normalized",
            "limited_by",
        ]
        .map(String::from));
        let name = &self.workload.name;
        let m = &self.matrix;
        for (i, c) in m.cpus.iter().enumerate() {
            for (j, g) in m.memory_gib.iter().enumerate() {
                let abs = m
                    .samples_per_s
                    .as_ref()
                    .map(|s| format!("{:.3}", s[i][j]))
                    .unwrap_or_default();
                let lim = m
                    .limited_by
                    .as_ref()
                    .map(|s| s[i][j].to_string())
                    .unwrap_or_default();
                row([
                    name.clone(),
                    "predicted".into(),
                    c.to_string(),
                    format!("{g:.4}"),
                    abs,
                    format!("{:.5}", m.normalized[i][j]),
                    lim,
                ]);
            }
        }
        let t_prop = m.proportional.samples_per_s.unwrap_or(0.0);
        for v in &self.validation {
            let norm = if t_prop > 0.0 {
                v.measured / t_prop
            } else {
                0.0
            };
            row([
                name.clone(),
                "measured".into(),
                v.cpus.to_string(),
                format!("{:.4}", v.memory_gib),
                format!("{:.3}", v.measured),
                format!("{norm:.5}"),
                String::new(),
            ]);
        }
        let bytes = w.into_inner().expect("CSV into memory cannot fail");
        String::from_utf8(bytes).expect("CSV of strings is UTF-8")
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    #[test]
    fn server_shapes_parse() {
        let s: ServerShape = "8gpu,24cpu,500gb".parse().unwrap();
        assert_eq!((s.gpus, s.cpus, s.memory_gib), (8, 24.0, 500.0));
        assert_eq!(s.cpus_per_gpu(), 3.0);
        assert_eq!(s.memory_gib_per_gpu(), 62.5);
        assert!("8gpu,24cpu".parse::<ServerShape>().is_err());
        assert!("8gpu,24cpu,500parsecs".parse::<ServerShape>().is_err());
    }

    /// A small valid profile, without a model, for tests that corrupt or round-trip it.
    pub(crate) fn tiny() -> Profile {
        let a = RatedAllocation {
            cpus: 1.0,
            memory_gib: 1.0,
            samples_per_s: None,
            normalized: 1.0,
        };
        Profile {
            schema: SCHEMA.into(),
            source: "test".into(),
            workload: WorkloadInfo {
                name: "m".into(),
                spec: None,
                description: String::new(),
                batch_size: 1,
                gpus: 1,
                hit_model: HitModel::Minio,
                iter_time_s: Some(0.5),
                class: Some("image".into()),
                dataset: None,
                no_memory_axis: None,
                probe: None,
            },
            host: None,
            created: None,
            trials: Vec::new(),
            model: None,
            server: ServerShape {
                gpus: 8,
                cpus: 24.0,
                memory_gib: 500.0,
            },
            matrix: Matrix {
                cpus: vec![1.0, 2.0],
                memory_gib: vec![1.0, 2.0],
                samples_per_s: None,
                normalized: vec![vec![0.5, 0.6], vec![0.9, 1.0]],
                limited_by: None,
                proportional: a,
                source: None,
            },
            per_gpu: PerGpuMatrix {
                cpus: vec![1.0, 2.0],
                memory_gib: vec![1.0, 2.0],
                normalized: vec![vec![0.5, 0.6], vec![0.9, 1.0]],
            },
            demand: Demand {
                job: a,
                per_gpu: a,
                tolerance: 0.05,
            },
            validation: Vec::new(),
            validation_summary: Vec::new(),
            warnings: Vec::new(),
            refinement: None,
        }
    }

    #[test]
    fn profiles_round_trip_through_the_file() {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("m.json");
        let p = tiny();
        p.write(&path).unwrap();
        assert_eq!(Profile::read(&path).unwrap(), p);
        let csv = std::fs::read_to_string(path.with_extension("csv")).unwrap();
        assert_eq!(csv.lines().count(), 1 + 4);
    }

    #[test]
    fn the_csv_is_what_the_shipped_profiles_carry_and_quotes_a_comma() {
        // The shipped profiles' CSVs were written before the csv crate's writer: the same bytes.
        let mut n = 0;
        let shipped = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../../profiles"));
        for dir in [
            shipped.to_path_buf(),
            shipped.join("h200"),
            shipped.join("zoo"),
        ] {
            for e in std::fs::read_dir(dir).unwrap() {
                let path = e.unwrap().path();
                if path.extension().is_some_and(|x| x == "json") {
                    let shipped = std::fs::read_to_string(path.with_extension("csv")).unwrap();
                    assert_eq!(
                        Profile::read(&path).unwrap().to_csv(),
                        shipped,
                        "{}",
                        path.display()
                    );
                    n += 1;
                }
            }
        }
        assert!(n > 5, "{n} profiles");
        let mut p = tiny();
        p.workload.name = "resnet,18".into();
        assert!(p
            .to_csv()
            .lines()
            .nth(1)
            .unwrap()
            .starts_with("\"resnet,18\",predicted,1,"));
    }

    #[test]
    fn an_unknown_field_is_named_with_its_path() {
        let mut v = serde_json::to_value(tiny()).unwrap();
        v["matrix"]["colour"] = serde_json::json!("blue");
        let err = Profile::parse(&v.to_string(), "p.json")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("p.json") && err.contains("matrix") && err.contains("colour"),
            "{err}"
        );
    }
}

/// What a refinement did, recorded in the profile (`refinement`) and printed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Refinement {
    /// The observation logs it read.
    pub from: Vec<String>,
    /// Observations of this profile's workload in them.
    pub observations: usize,
    /// Of those, disturbed by other work (left out unless `included_disturbed`).
    pub disturbed: usize,
    /// Whether disturbed observations were folded in too.
    #[serde(default)]
    pub included_disturbed: bool,
    /// Of those, left out because the job ran on another GPU count than the profile's.
    pub other_gpus: usize,
    /// Per allocation: observed against predicted before and after.
    pub points: Vec<RefinedPoint>,
    /// Per observed core count: observed over the profile's curve, the host's speed against the profile's.
    pub cpu_speed: Vec<SpeedRatio>,
    /// The miss cost's search, where memory-limited and unlimited allocations were both observed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub miss_cost: Option<MissCostRefit>,
    /// Cells raised so that no column falls with more cores.
    pub raised_cells: usize,
    /// What moved and why, in words.
    pub because: Vec<String>,
}

/// One pooled allocation.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RefinedPoint {
    /// Cores.
    pub cpus: f64,
    /// Memory, GiB.
    pub memory_gib: f64,
    /// Whether the memory limit binds the cache there (cache below 1.1x the dataset).
    pub memory_limited: bool,
    /// Observed samples per second, pooled (time-weighted).
    pub observed_samples_per_s: f64,
    /// Its 95% half-width.
    pub observed_ci95: f64,
    /// Observations pooled.
    pub observations: usize,
    /// The model's prediction before refinement, samples per second.
    pub predicted_before: f64,
    /// After.
    pub predicted_after: f64,
}

impl RefinedPoint {
    /// (predicted - observed) / observed, before refinement.
    pub fn error_before(&self) -> f64 {
        rel_error(self.predicted_before, self.observed_samples_per_s)
    }
    /// After.
    pub fn error_after(&self) -> f64 {
        rel_error(self.predicted_after, self.observed_samples_per_s)
    }
}

/// (predicted - observed) / observed.
pub fn rel_error(predicted: f64, observed: f64) -> f64 {
    (predicted - observed) / observed.max(1e-9)
}

/// Observed over profiled at one core count.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SpeedRatio {
    /// Cores.
    pub cpus: f64,
    /// Observed / profiled.
    pub ratio: f64,
}

/// The miss cost before and after its search.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MissCostRefit {
    /// CPU-seconds per miss, before.
    pub cpu_s_per_miss_before: f64,
    /// After.
    pub cpu_s_per_miss_after: f64,
    /// Memory-limited allocations it was fitted to.
    pub points: usize,
}

/// Which cache serves repeated reads of the dataset, and so how memory turns into a hit ratio.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum HitModel {
    /// A fixed subset that never evicts: h = min(1, cache / dataset).
    Minio,
    /// LRU under a fresh random permutation every epoch, simulated on the actual item sizes.
    PageCache,
}

impl std::fmt::Display for HitModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            HitModel::Minio => "minio",
            HitModel::PageCache => "page-cache",
        })
    }
}

/// The stage that limits throughput at an allocation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Stage {
    /// The GPU (or emulated accelerator) ingests no faster.
    Accelerator,
    /// Data loading and augmentation on the granted cores.
    Preprocess,
    /// Reading samples from storage (cache misses).
    Fetch,
}

impl std::fmt::Display for Stage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Stage::Accelerator => "accelerator",
            Stage::Preprocess => "preprocessing",
            Stage::Fetch => "fetch",
        })
    }
}

/// A measured point of the CPU axis: throughput with the dataset fully cached, i.e. min(G, P(c)).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct CpuPoint {
    /// Cores.
    pub cpus: f64,
    /// Samples per second.
    pub samples_per_s: f64,
}

/// Monotone piecewise-linear P(c) through measured points. Measurement noise can make a curve dip where
/// more cores cannot hurt; a running maximum restores monotonicity. Below the first point throughput
/// scales with cores (loader workers are data-parallel); above the last it stays flat.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CpuCurve {
    points: Vec<CpuPoint>,
}

impl CpuCurve {
    /// A curve through `points` (any order; duplicates keep the later one).
    pub fn new(mut points: Vec<CpuPoint>) -> Self {
        points.retain(|p| p.cpus > 0.0 && p.samples_per_s.is_finite());
        points.sort_by(|a, b| a.cpus.total_cmp(&b.cpus));
        points.dedup_by(|later, earlier| {
            if later.cpus == earlier.cpus {
                earlier.samples_per_s = later.samples_per_s;
                true
            } else {
                false
            }
        });
        let mut best = 0.0f64;
        for p in &mut points {
            best = best.max(p.samples_per_s);
            p.samples_per_s = best;
        }
        CpuCurve { points }
    }

    /// The (monotone) points.
    pub fn points(&self) -> &[CpuPoint] {
        &self.points
    }
}

/// What fetching costs: mean sample size and the two bandwidths it is read at.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct FetchModel {
    /// Mean bytes per sample.
    pub mean_sample_bytes: f64,
    /// Storage read bandwidth (a cache miss), bytes per second. Profiles before schema 1.1 leave it
    /// `None` when storage never limited (then fetch is not a bottleneck at any hit ratio).
    pub storage_bytes_per_s: Option<f64>,
    /// `storage_bytes_per_s` is the rate a cold trial read at without being held up by storage: the
    /// device is at least that fast.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub storage_lower_bound: bool,
    /// Memory bandwidth (a cache hit), bytes per second.
    pub memory_bytes_per_s: f64,
}

/// The fitted model of one workload.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StallModel {
    /// G: the accelerator's ingestion rate, samples per second.
    pub accelerator_samples_per_s: f64,
    /// P(c) (as min(G, P(c)), measured with the dataset cached).
    pub cpu: CpuCurve,
    /// F(h).
    pub fetch: FetchModel,
    /// Memory the workload needs besides its cache, bytes: the most seen at any core count.
    pub footprint_bytes: u64,
    /// The footprint seen at each measured core count (more cores run more loader workers, each with
    /// buffers); interpolated between, and `footprint_bytes` where empty.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub footprint_points: Vec<FootprintPoint>,
    /// What the workload keeps resident besides its cache at each measured core count (1.5): the
    /// measured peak without the footprint's slack, and never more than at more cores. A memory limit
    /// squeezes the page cache to the limit less this, so this (not the footprint, a safe lower bound
    /// for the limit) sets the cache a limit leaves; the footprint where empty.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resident_points: Vec<FootprintPoint>,
    /// Bytes in the dataset.
    pub dataset_bytes: u64,
    /// Which cache model turns memory into a hit ratio.
    pub hit_model: HitModel,
    /// What a cache miss costs on the job's own cores (absent before schema 1.1: misses cost only
    /// storage bandwidth).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub miss_cost: Option<MissCost>,
    /// The batches the loaders keep ready ahead of the accelerator (absent before schema 1.9: an epoch's
    /// hits are taken at their mean).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loader_queue: Option<LoaderQueue>,
}

/// The batches a workload's loaders keep ready ahead of the accelerator: while hits last they run
/// ahead of it by that many, which carries it into the misses that follow.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LoaderQueue {
    /// Samples per batch.
    pub batch_samples: u32,
    /// Batches each loader keeps queued or in the making.
    pub batches_per_loader: u32,
}

/// What a cache miss costs besides storage bandwidth, on the job's own cores.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MissCost {
    /// CPU-seconds per sample with the dataset cached, at each core count the CPU sweep measured.
    pub cpu_s_per_sample: Vec<CostPoint>,
    /// Extra CPU-seconds per miss: the read path, page faults and reclaim, on the same cores as
    /// preprocessing.
    pub cpu_s_per_miss: f64,
    /// Seconds a loader is blocked per miss while the device reads (its core idles unless the grant has
    /// more loaders than cores).
    pub wait_s_per_miss: f64,
    /// How much more CPU every sample costs, relative, while a memory limit binds the page cache (the
    /// cache cannot hold the dataset with room to spare). Profiles before 1.4 measured it from the cold
    /// trial's all-hit second epoch, and it is charged as they wrote it; 1.4 writes 0: in steady state
    /// no grid point showed it once each trial's core speed was accounted for, while one profile's
    /// second epoch had read 15% (docs/profile-format.md, "The model behind the matrix").
    #[serde(default)]
    pub limited_overhead: f64,
}

/// CPU-seconds per sample at one core count.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct CostPoint {
    /// Cores.
    pub cpus: f64,
    /// CPU-seconds per sample.
    pub cpu_s_per_sample: f64,
}

/// Memory the workload used besides its cache at one core count.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct FootprintPoint {
    /// Cores.
    pub cpus: f64,
    /// Bytes.
    pub bytes: u64,
}

/// Parts of an epoch the simulations count hits in separately: twentieths, in the order samples are read.
pub const EPOCH_PARTS: usize = 20;
