//! What a trial records, as profiles store it (docs/architecture.md §3.4) and `measure --json` prints it:
//! the allocation, how it was isolated, the dataset, throughput, telemetry and the per-epoch figures.

use super::CacheState;
use crate::isolate::IsolationKind;
use crate::measure::contention::Disturbance;
use crate::measure::estimate::{Estimate, StopReason};
use crate::measure::telemetry::Telemetry;
use crate::units::Cores;
use crate::workload::probe::ProbeReport;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// The schema name of a trial result in JSON.
pub const TRIAL_SCHEMA: &str = "synergy-trial/1";

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
