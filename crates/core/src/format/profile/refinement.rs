//! What a refinement did, as the refined profile records it (`refinement`, 1.3): the observations it
//! read, each pooled allocation's error before and after, and what moved.

use serde::{Deserialize, Serialize};

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
