//! The fitted model as a profile stores it: the data-stall model's parameters (the CPU curve, the fetch
//! stage, the miss cost, the footprint, the loaders' queue), the calibrated hit curve and the tables the
//! reader predicts from. What the parameters compute is `stall`'s and `predict`'s.

use serde::{Deserialize, Serialize};

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
