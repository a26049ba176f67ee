//! What a trial records, as profiles store it (docs/architecture.md §3.4) and `measure --json` prints it:
//! the allocation, how it was isolated, the dataset, throughput, telemetry and the per-epoch figures.

use crate::units::Cores;
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
    /// Measured in place: the workload was launched at these cores and re-budgeted to `cpus` while it
    /// ran, rather than launched at them (docs/profile-format.md, "The CPU sweep in one launch").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub launched_at_cpus: Option<Cores>,
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

/// A throughput estimate.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Estimate {
    /// Samples per second over the measured window.
    pub samples_per_s: f64,
    /// Half-width of the 95% confidence interval, samples per second.
    pub ci95_half_width: f64,
    /// Steps in the measured window.
    pub measured_steps: u64,
    /// Length of the measured window, seconds.
    pub measured_s: f64,
    /// Time excluded as warm-up, seconds from the first step.
    pub warmup_s: f64,
    /// Where the measured window starts, in the time base of the observations.
    pub window_start_s: f64,
    /// Whole epochs the window covers when it was asked to measure whole epochs (0: the window covers
    /// part of one, or epochs were not asked for).
    #[serde(default)]
    pub whole_epochs: u64,
}

impl Estimate {
    /// Half-width relative to the mean.
    pub fn rel_half_width(&self) -> f64 {
        if self.samples_per_s > 0.0 {
            self.ci95_half_width / self.samples_per_s
        } else {
            f64::INFINITY
        }
    }
}

/// Why a trial stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum StopReason {
    /// The confidence interval reached the requested precision.
    Converged,
    /// The longest allowed trial time passed.
    MaxDuration,
    /// The workload exited by itself.
    WorkloadExited,
    /// The workload stopped reporting progress.
    NoProgress,
    /// The user interrupted (SIGINT or SIGTERM).
    Interrupted,
    /// The first epoch ended (with `first_epoch_only`).
    EpochEnded,
    /// A real run's round ended: the window of an observation, not a trial (docs/run.md).
    RoundEnded,
}

impl std::fmt::Display for StopReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            StopReason::Converged => "converged",
            StopReason::MaxDuration => "reached --max-seconds",
            StopReason::WorkloadExited => "workload exited",
            StopReason::NoProgress => "no progress",
            StopReason::Interrupted => "interrupted",
            StopReason::EpochEnded => "first epoch ended",
            StopReason::RoundEnded => "the round ended",
        })
    }
}

/// What a trial used, summarised.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Telemetry {
    /// CPU time of every task in the domain over the whole trial, seconds.
    pub cpu_seconds: f64,
    /// Mean cores busy over the measured window.
    pub cpu_cores_used: Option<f64>,
    /// Bytes read from storage over the whole trial.
    pub storage_read_bytes: Option<u64>,
    /// Storage read rate over the measured window, bytes per second.
    pub storage_read_bytes_per_s: Option<f64>,
    /// Bytes read from storage per sample over the measured window: with the bytes a miss reads, this
    /// gives the cache's miss ratio.
    #[serde(default)]
    pub storage_read_bytes_per_sample: Option<f64>,
    /// Largest page cache charged to the domain during the trial.
    pub page_cache_peak_bytes: Option<u64>,
    /// Largest memory (resident plus cache) charged to the domain during the trial.
    pub memory_peak_bytes: Option<u64>,
    /// Largest memory charged to the domain besides its page cache, from one reading of both: what a
    /// memory limit cannot reclaim. Files the job itself reads first (PyTorch's libraries, about 1 GiB,
    /// charged to whichever trial loads them first) are page cache, not resident. Absent before schema
    /// 1.6.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resident_peak_bytes: Option<u64>,
    /// Application-cache hits and misses the workload reported after warm-up.
    pub app_cache: Option<AppCacheCounts>,
    /// GPU figures, when NVML found a GPU.
    pub gpu: Option<GpuTelemetry>,
}

/// Application-cache counts reported on the progress protocol.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct AppCacheCounts {
    /// Samples served from the cache.
    pub hits: u64,
    /// Samples read from storage.
    pub misses: u64,
}

impl AppCacheCounts {
    /// Hits over all lookups.
    pub fn hit_ratio(&self) -> f64 {
        let n = self.hits + self.misses;
        if n == 0 {
            0.0
        } else {
            self.hits as f64 / n as f64
        }
    }
}

/// GPU figures averaged over a trial's samples.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct GpuTelemetry {
    /// Device names.
    pub devices: Vec<String>,
    /// Mean GPU utilization, percent (mean over devices and samples).
    pub utilization_pct: f64,
    /// Largest memory used on any device, bytes.
    pub memory_used_peak_bytes: u64,
    /// Mean SM clock, MHz.
    pub sm_clock_mhz: f64,
    /// Samples taken.
    pub samples: u64,
}

/// Fractions of a window the host spent with some task stalled on each resource (PSI `some`).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Pressure {
    /// Waiting for a CPU.
    pub cpu: f64,
    /// Waiting for I/O.
    pub io: f64,
    /// Waiting for memory (reclaim, refaults).
    pub memory: f64,
}

/// What a trial got against what it was granted over its measured window, and the verdict.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Disturbance {
    /// The trial got clearly less CPU than granted while other work ran on its cores (or a cgroup above
    /// it was throttled), and its tasks were waiting to run: its throughput is not this allocation's. (A
    /// profile clears it on a trial that ran at the accelerator's rate, which no allocation exceeds.)
    pub disturbed: bool,
    /// Why, in words, when disturbed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Cores granted.
    pub granted_cores: f64,
    /// CPU time the domain used over wall time.
    pub got_cores: f64,
    /// CPU time other work used on the domain's cores (hypervisor steal included) over wall time.
    pub other_cores: f64,
    /// Of that, time stolen by the hypervisor.
    pub steal_cores: f64,
    /// Time the domain's threads were runnable but not running, over wall time; `None` where it cannot
    /// be read.
    pub waited_cores: Option<f64>,
    /// CFS periods the domain's own quota throttled it (expected with fractional cores).
    pub throttled_periods: Option<u64>,
    /// CFS periods a cgroup above the domain was throttled.
    pub enclosing_throttled_periods: Option<u64>,
    /// The host's pressure over the window.
    pub host_pressure: Option<Pressure>,
    /// The domain's own pressure over the window (cgroup v2): CPU, I/O and memory stalls of its tasks
    /// alone, which a memory or storage limit causes and another tenant does not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub domain_pressure: Option<Pressure>,
    /// The speed probe on the domain's first core: its mean over the window, operations per
    /// CPU-second of the calibration kernel (`measure::hostspeed`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub core_ops_per_cpu_s: Option<f64>,
    /// Its fastest reading during the trial.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub core_best_ops_per_cpu_s: Option<f64>,
    /// Length of the window, seconds.
    pub window_s: f64,
    /// Disturbed by its core's speed alone: the speed probe read the core slow against its fastest
    /// reading during the trial, and no other work showed on it (the machine under this one).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub slowed_alone: bool,
}

/// Which isolation backend enforces a budget.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum IsolationKind {
    /// cgroup v1 controllers (cpu, cpuacct, cpuset, memory, blkio, freezer).
    CgroupV1,
    /// The unified cgroup v2 hierarchy.
    CgroupV2,
    /// `sched_setaffinity` only: whole cores, no memory or storage limits.
    Affinity,
    /// Slurm's own (its task/cgroup plugin, on the node): what a run's jobs on the Slurm backend ran
    /// under. Synergy never makes such a domain itself, so it is no `--isolation` choice.
    #[value(skip)]
    Slurm,
}

impl std::fmt::Display for IsolationKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            IsolationKind::CgroupV1 => "cgroup-v1",
            IsolationKind::CgroupV2 => "cgroup-v2",
            IsolationKind::Affinity => "affinity",
            IsolationKind::Slurm => "slurm",
        })
    }
}

/// What a probe saw of the script it ran in: each `{"probe": {...}}` line it writes adds to this. Fields
/// it could not see stay absent.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ProbeReport {
    /// The probe's hook ran: the script imported PyTorch's data loading.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub torch: Option<bool>,
    /// Samples per batch of the first DataLoader the script iterated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batch_size: Option<u32>,
    /// Its loader worker processes (0: batches load in the training process).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workers: Option<u32>,
    /// The class of its dataset (under any `Subset`/`ConcatDataset` wrapper), e.g. `ImageFolder`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dataset_class: Option<String>,
    /// Samples in its dataset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dataset_items: Option<u64>,
    /// The directory its dataset's files are in, when the dataset names one on disk.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dataset_root: Option<PathBuf>,
    /// Where the model's parameters are (`cpu`, `cuda:0`), from the largest optimizer the script made.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device: Option<String>,
    /// Parameters that optimizer trains.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parameters: Option<u64>,
    /// In a synthetic trial: the batches kept and replayed instead of loading.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replay: Option<Replay>,
    /// The class of that DataLoader's sampler (`DistributedSampler` gives each rank its shard).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sampler: Option<String>,
    /// `OMP_NUM_THREADS` as the process saw it (a launcher such as `torchrun` sets it to 1 in every rank
    /// it starts when the user did not set it); absent where it was not set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub omp_num_threads: Option<String>,
    /// torch's intra-op threads in that process (`torch.get_num_threads()`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub threads: Option<u32>,
    /// Processes of the job that train (its ranks), when it is a distributed job.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub world_size: Option<u32>,
    /// On a line: the rank of the process that wrote it, when it is one of a distributed job's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rank: Option<u32>,
    /// On a line: the process that wrote it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pid: Option<u32>,
    /// A launcher the probe saw start the job's ranks (`torchrun`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub launcher: Option<LauncherReport>,
    /// A distributed job's ranks, each as its own probe saw it, with its own rate (a straggler shows
    /// here: the job runs at its slowest rank's pace).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ranks: Vec<RankReport>,
}

/// A launcher of a distributed job, as the probe saw it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LauncherReport {
    /// Which: `torchrun` (torch's elastic agent, which `python -m torch.distributed.run` also runs).
    pub kind: String,
    /// Ranks it started on its host, once its rendezvous was done; absent while it waits there.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub local_ranks: Option<u32>,
}

/// One rank of a distributed job: what the probe saw in it, and what it trained.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RankReport {
    /// Its rank.
    pub rank: u32,
    /// Its process.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pid: Option<u32>,
    /// Samples per batch of its first DataLoader.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batch_size: Option<u32>,
    /// Its loader worker processes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workers: Option<u32>,
    /// Its loader's sampler class.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sampler: Option<String>,
    /// Where its model's parameters are.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device: Option<String>,
    /// `OMP_NUM_THREADS` in its environment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub omp_num_threads: Option<String>,
    /// Its intra-op threads.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub threads: Option<u32>,
    /// Batches it reported over the whole trial.
    #[serde(default)]
    pub steps: u64,
    /// Its samples per second over the trial's measured window.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub samples_per_s: Option<f64>,
}

/// The batches a synthetic trial replayed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Replay {
    /// Batches kept from the loader's first iterator.
    pub batches: u64,
    /// Their tensors' bytes.
    #[serde(default)]
    pub bytes: u64,
    /// Where they were kept (`cpu`, or the model's device).
    pub device: String,
}

/// Which kinds of limit a backend enforces (or a plan needs).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Limits {
    /// Part of a core (a CFS quota); without it a fractional budget gets whole cores.
    pub fractional_cores: bool,
    /// A memory limit that bounds the page cache.
    pub memory: bool,
    /// A storage read-bandwidth limit.
    pub storage: bool,
}

/// The result of [`cpu_calibration`]: kernel operations per second on one thread.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct CpuCalibration {
    /// Operations per wall-clock second in the fastest repeat (the least disturbed by other tenants).
    pub ops_per_s: f64,
    /// Operations per second of the thread's own CPU time over all repeats, which other tenants lower
    /// only through shared caches, not by taking the core.
    pub ops_per_cpu_s: f64,
    /// Relative spread of the repeats' wall-clock rates, max/min - 1: near 0 on a quiet host.
    pub spread: f64,
    /// Timed repeats.
    pub repeats: u32,
    /// The core the thread was pinned to; `None` when none was asked for or pinning failed (a core
    /// outside this process's cpuset), and the thread ran wherever the scheduler put it.
    pub core: Option<usize>,
}

/// A trial that used under this fraction of the cores it was granted (an emulated accelerator's synthetic
/// trial) spent its time waiting, not computing: its cores' speed did not set its rate.
pub const IDLE_FRACTION: f64 = 0.10;

/// Whether a domain that used `got_cores` of `granted_cores` computed enough for its cores' speed to set
/// its rate ([`IDLE_FRACTION`]).
pub fn computed(got_cores: f64, granted_cores: f64) -> bool {
    got_cores >= IDLE_FRACTION * granted_cores
}

impl Disturbance {
    /// Whether the trial computed enough for its cores' speed to set its rate: a slow core disturbs
    /// only such a trial.
    pub fn computed(&self) -> bool {
        computed(self.got_cores, self.granted_cores)
    }
}

impl Limits {
    /// What `needed` asks that `self` does not enforce, in words.
    pub fn missing(&self, needed: &Limits) -> Vec<&'static str> {
        let mut m = Vec::new();
        if needed.fractional_cores && !self.fractional_cores {
            m.push("fractional cores");
        }
        if needed.memory && !self.memory {
            m.push("a memory limit");
        }
        if needed.storage && !self.storage {
            m.push("a storage limit");
        }
        m
    }
}

impl std::fmt::Display for Limits {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut on = vec!["whole cores"];
        if self.fractional_cores {
            on.push("fractional cores");
        }
        if self.memory {
            on.push("memory");
        }
        if self.storage {
            on.push("storage");
        }
        f.write_str(&on.join(", "))
    }
}

/// Keeps what a later line said, where it said something.
fn take<T>(a: &mut Option<T>, b: Option<T>) {
    if b.is_some() {
        *a = b;
    }
}

impl RankReport {
    /// Adds what a probe line from this rank said.
    pub fn merge(&mut self, line: &ProbeReport) {
        take(&mut self.pid, line.pid);
        take(&mut self.batch_size, line.batch_size);
        take(&mut self.workers, line.workers);
        take(&mut self.sampler, line.sampler.clone());
        take(&mut self.device, line.device.clone());
        take(&mut self.omp_num_threads, line.omp_num_threads.clone());
        take(&mut self.threads, line.threads);
    }
}

impl ProbeReport {
    /// Adds what a later line said (its fields win).
    pub fn merge(&mut self, later: ProbeReport) {
        take(&mut self.torch, later.torch);
        take(&mut self.batch_size, later.batch_size);
        take(&mut self.workers, later.workers);
        take(&mut self.dataset_class, later.dataset_class);
        take(&mut self.dataset_items, later.dataset_items);
        take(&mut self.dataset_root, later.dataset_root);
        take(&mut self.device, later.device);
        take(&mut self.parameters, later.parameters);
        take(&mut self.replay, later.replay);
        take(&mut self.sampler, later.sampler);
        take(&mut self.omp_num_threads, later.omp_num_threads);
        take(&mut self.threads, later.threads);
        take(&mut self.world_size, later.world_size);
        take(&mut self.rank, later.rank);
        take(&mut self.pid, later.pid);
        take(&mut self.launcher, later.launcher);
        if !later.ranks.is_empty() {
            self.ranks = later.ranks;
        }
    }

    /// Adds a line from one process of the job: a rank's goes to that rank's report (created when
    /// new) and, for rank 0, to the job's own facts as well, so the job reads as its first rank; a line
    /// without a rank (a single process, or a launcher) goes to the job's facts.
    pub fn add_line(&mut self, line: ProbeReport) {
        let Some(rank) = line.rank else {
            self.merge(ProbeReport { pid: None, ..line });
            return;
        };
        let i = match self.ranks.binary_search_by_key(&rank, |r| r.rank) {
            Ok(i) => i,
            Err(i) => {
                self.ranks.insert(
                    i,
                    RankReport {
                        rank,
                        ..RankReport::default()
                    },
                );
                i
            }
        };
        self.ranks[i].merge(&line);
        self.world_size = self.world_size.max(line.world_size);
        if rank == 0 || self.batch_size.is_none() {
            self.merge(ProbeReport {
                rank: None,
                pid: None,
                ranks: Vec::new(),
                ..line
            });
        }
    }

    /// One line for people: each rank's rate and batches, e.g. `0: 28.2 samples/s (66 batches), 1: ...`.
    pub fn describe_ranks(&self) -> String {
        self.ranks
            .iter()
            .map(|r| {
                let rate = r
                    .samples_per_s
                    .map_or("no rate".to_string(), |s| format!("{s:.1} samples/s"));
                format!("{}: {rate} ({} batches)", r.rank, r.steps)
            })
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// Samples in one step of the whole job: each rank's batch, added (the batch size the probe saw
    /// times the world size where some rank said nothing of its own).
    pub fn job_batch_size(&self) -> Option<u32> {
        let own = self.batch_size?;
        let world = self.world_size.unwrap_or(1).max(1);
        if self.ranks.len() as u32 == world && self.ranks.iter().all(|r| r.batch_size.is_some()) {
            return Some(self.ranks.iter().filter_map(|r| r.batch_size).sum());
        }
        Some(own * world)
    }

    /// One line for people: what the probe saw.
    pub fn describe(&self) -> String {
        let mut parts = Vec::new();
        let each = match self.world_size.filter(|&w| w > 1) {
            Some(w) => {
                parts.push(format!("{w} ranks"));
                " per rank"
            }
            None => "",
        };
        if let Some(b) = self.batch_size {
            parts.push(format!("batch {b}{each}"));
        }
        if let Some(w) = self.workers {
            parts.push(format!("{w} loader workers{each}"));
        }
        if let Some(s) = &self.sampler {
            parts.push(s.clone());
        }
        match (&self.omp_num_threads, self.threads) {
            (Some(o), Some(t)) => parts.push(format!("OMP_NUM_THREADS={o}, {t} torch threads")),
            (None, Some(t)) => parts.push(format!("{t} torch threads")),
            (Some(o), None) => parts.push(format!("OMP_NUM_THREADS={o}")),
            (None, None) => {}
        }
        if let Some(c) = &self.dataset_class {
            let items = self
                .dataset_items
                .map_or(String::new(), |n| format!(" of {n} samples"));
            let at = match &self.dataset_root {
                Some(r) => format!(" in {}", r.display()),
                None => " (no directory on disk)".into(),
            };
            parts.push(format!("{c}{items}{at}"));
        }
        if let Some(d) = &self.device {
            parts.push(format!("model on {d}"));
        }
        if let Some(p) = self.parameters {
            parts.push(format!("{:.2}M parameters", p as f64 / 1e6));
        }
        if let Some(r) = &self.replay {
            parts.push(format!(
                "synthetic: replayed {} kept batches from {}",
                r.batches, r.device
            ));
        }
        if parts.is_empty() {
            match self.torch {
                Some(true) => "PyTorch imported, no DataLoader batch seen".into(),
                _ => "nothing seen".into(),
            }
        } else {
            parts.join(", ")
        }
    }
}
