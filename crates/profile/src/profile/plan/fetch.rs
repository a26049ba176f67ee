//! Stage 3, the fetch: what a miss costs. An epoch that starts cold (every sample a miss) gives the
//! storage rate, the bytes a miss reads and the CPU it costs. A page-cache workload takes it from the
//! first epoch of its calibration trial (stage 4), which starts cold; an application cache runs a cold
//! trial of its own with no room. Beside it, a timed read of evicted files gives how long a miss blocks
//! a loader, and a read of the cached dataset gives the memory bandwidth of hits (F(h) and the miss
//! cost, docs/architecture.md §4).

use super::cpu::{cost_at, Sweep};
use super::runner::Runner;
use super::{base_request, cpu_s_per_sample, Plan, ProfileRunError, Recorded};
use crate::error::InputError;
use crate::format::profile::TrialRole;
use crate::format::profile::{CostPoint, FetchModel, MissCost};
use crate::format::trial::EpochStats;
use crate::format::trial::{CacheState, TrialResult};
use crate::isolate::pagecache;
use crate::measure::TrialError;
use crate::stall::CacheSim;
use crate::units::Bytes;
use crate::workload::dataset::{self, DatasetFiles};
use std::path::{Path, PathBuf};
use std::time::Instant;

/// Files read to time a miss's wait.
const PROBE_FILES: usize = 64;
/// A cold epoch this far below the cached pipeline's rate (misses' CPU included) was held up by storage.
const FETCH_BOUND: f64 = 0.95;
/// A cold epoch that read below this share of one stream's rate was not held up by bandwidth.
const STREAM_SHARE: f64 = 0.8;

/// The dataset's files and what the cache models need of them.
pub(super) struct Data {
    files: DatasetFiles,
    pub(super) bytes: u64,
    /// The cache simulations on the dataset's file sizes.
    pub(super) sim: CacheSim,
}

impl Data {
    /// The dataset the first CPU trial found, scanned; `None` when it found none. Where that directory
    /// is gone (a replay on another machine), `here` stands in for it if it holds as many files and bytes:
    /// a dataset generated again from the same spec, whose file sizes are the same.
    pub(super) fn of(
        first: &TrialResult,
        here: Option<&Path>,
    ) -> Result<Option<Data>, ProfileRunError> {
        let Some(d) = &first.dataset else {
            return Ok(None);
        };
        let same = |f: &DatasetFiles| f.files.len() as u64 == d.files && f.total_bytes() == d.bytes;
        let files = match dataset::scan(&d.path) {
            Ok(f) => f,
            Err(e) => match here.and_then(|h| dataset::scan(h).ok()).filter(same) {
                Some(f) => f,
                None => {
                    return Err(InputError::new(
                        d.path.display().to_string(),
                        format!(
                            "the dataset the trials read cannot be listed ({e}), nor is one of its \
                             {} files and {} bytes here; the cache model needs its file sizes",
                            d.files, d.bytes
                        ),
                    )
                    .into())
                }
            },
        };
        let bytes = files.total_bytes();
        let sizes = files.files.iter().map(|(_, b)| *b).collect();
        Ok(Some(Data {
            files,
            bytes,
            sim: CacheSim::new(sizes, 1),
        }))
    }

    fn paths(&self) -> Vec<PathBuf> {
        self.files.paths().map(Path::to_path_buf).collect()
    }

    /// Mean bytes per file: what a miss reads until a cold epoch measures it.
    fn mean_file_bytes(&self) -> f64 {
        self.bytes as f64 / self.files.files.len().max(1) as f64
    }
}

/// What the cold epoch and the read probes found.
pub(super) struct Fetch {
    pub(super) model: FetchModel,
    /// The cores the cold epoch ran at (the calibration's).
    pub(super) cores: f64,
    /// CPU-seconds per sample over the cold epoch (every sample a miss), at the sweep's reference speed
    /// ([`Sweep::at_reference_speed`]).
    pub(super) cold_cpu: Option<f64>,
    /// Seconds a loader waits per miss.
    pub(super) wait_s_per_miss: f64,
    /// The storage rate the cold epoch read at, bytes per second.
    pub(super) storage_seen: Option<f64>,
    /// The timed read of evicted files, if it ran.
    reads: Option<pagecache::ColdReads>,
    /// In a replay, the profile's fetch stage: its storage rate and its hits' bandwidth stand as
    /// recorded, since deciding them took reads outside the trials that the profile does not keep.
    recorded: Option<FetchModel>,
}

/// The numbers of an epoch in which every sample was a miss.
struct ColdEpoch {
    samples_per_s: f64,
    cpu_s_per_sample: Option<f64>,
    read_bytes_per_sample: Option<f64>,
}

impl ColdEpoch {
    /// The first complete epoch of a trial that started cold; a trial that never completed one was in
    /// its first epoch throughout, so its own window is that epoch.
    fn first_of(t: &TrialResult) -> ColdEpoch {
        match t.epochs.first() {
            Some(e) => ColdEpoch {
                samples_per_s: e.samples_per_s,
                cpu_s_per_sample: e.cpu_s_per_sample,
                read_bytes_per_sample: e.storage_read_bytes_per_sample,
            },
            None => ColdEpoch::window_of(t),
        }
    }

    /// The measured window of a trial that stopped where its first epoch ended.
    fn window_of(t: &TrialResult) -> ColdEpoch {
        ColdEpoch {
            samples_per_s: t.throughput.samples_per_s,
            cpu_s_per_sample: cpu_s_per_sample(t),
            read_bytes_per_sample: t.telemetry.storage_read_bytes_per_sample,
        }
    }
}

impl Fetch {
    /// Nothing measured yet (or nothing to measure: a workload without a dataset).
    pub(super) fn unmeasured(cores: f64, mean_sample_bytes: f64) -> Fetch {
        Fetch {
            model: FetchModel {
                mean_sample_bytes,
                storage_bytes_per_s: None,
                storage_lower_bound: false,
                memory_bytes_per_s: f64::INFINITY,
            },
            cores,
            cold_cpu: None,
            wait_s_per_miss: 0.0,
            storage_seen: None,
            reads: None,
            recorded: None,
        }
    }

    /// Before the cold epoch: a timed read of evicted files, spread over the dataset so one
    /// directory's layout on disk does not decide it. It says how long a miss blocks a loader and how
    /// fast one stream reads the device.
    /// A replay reads nothing: the wait per miss is the profile's.
    pub(super) fn probe(cores: f64, data: &Data, recorded: Option<&Recorded>) -> Fetch {
        let mut f = Fetch::unmeasured(cores, data.mean_file_bytes());
        if let Some(r) = recorded {
            f.wait_s_per_miss = r.wait_s_per_miss;
            f.recorded = Some(r.fetch);
            return f;
        }
        let paths = data.paths();
        let step = (paths.len() / PROBE_FILES).max(1);
        let probe: Vec<&PathBuf> = paths.iter().step_by(step).take(PROBE_FILES).collect();
        f.reads = pagecache::time_cold_reads(&probe).ok();
        f.wait_for_reads();
        f
    }

    /// A miss waits for the bytes it reads: one file when a sample is a file, a fraction of one when
    /// samples are cut from shards.
    fn wait_for_reads(&mut self) {
        if let Some(reads) = self.reads {
            self.wait_s_per_miss = reads.wait_s_per_byte() * self.model.mean_sample_bytes;
        }
    }

    /// No cold epoch could be measured (a whole epoch went by before a rate could be estimated, so
    /// storage is far faster than the pipeline): the read probe's rate is a lower bound, all that is
    /// known.
    pub(super) fn no_cold_epoch(&mut self) {
        self.model.storage_bytes_per_s = self.reads.map(|c| c.bytes_per_s());
        self.model.storage_lower_bound = true;
        self.storage_as_recorded();
    }

    /// In a replay, the storage rate the profile settled on.
    fn storage_as_recorded(&mut self) {
        if let Some(r) = &self.recorded {
            self.model.storage_bytes_per_s = r.storage_bytes_per_s;
            self.model.storage_lower_bound = r.storage_lower_bound;
        }
    }

    /// What the cold epoch of `trial` (run at [`Fetch::cores`]) says: the bytes a miss really reads
    /// (readahead and all), the CPU it costs, and the storage rate, measured where storage held the
    /// epoch up and a lower bound, marked so, where it did not.
    fn learn(&mut self, plan: &Plan, sweep: &Sweep, trial: &TrialResult, cold: ColdEpoch) {
        let cores = self.cores;
        self.cold_cpu = cold
            .cpu_s_per_sample
            .map(|c| sweep.at_reference_speed(trial, c));
        if let Some(b) = cold.read_bytes_per_sample.filter(|b| *b > 0.0) {
            self.model.mean_sample_bytes = b;
            self.wait_for_reads();
        }
        let seen = cold.samples_per_s * self.model.mean_sample_bytes;
        self.storage_seen = Some(seen);
        // What the pipeline could do with every sample a miss, were storage infinitely fast.
        let cpu_bound = match (self.cold_cpu, cost_at(sweep, cores)) {
            (Some(cold), Some(warm)) => MissCost {
                cpu_s_per_sample: vec![CostPoint {
                    cpus: cores,
                    cpu_s_per_sample: warm,
                }],
                cpu_s_per_miss: (cold - warm).max(0.0),
                wait_s_per_miss: self.wait_s_per_miss,
                limited_overhead: 0.0,
            }
            .preprocess_rate(cores, 0.0, sweep.curve.at(cores), false),
            _ => sweep.curve.at(cores),
        };
        let (rate, lower_bound) = storage_rate(
            seen,
            cold.samples_per_s < FETCH_BOUND * cpu_bound,
            fastest_read(seen, &trial.epochs),
            self.reads.map(|c| c.bytes_per_s()),
            plan.req.storage_limit.map(|l| l.0),
        );
        self.model.storage_bytes_per_s = Some(rate);
        self.model.storage_lower_bound = lower_bound;
        self.storage_as_recorded();
    }

    /// What the first epoch of a trial that started cold says (see [`Fetch::learn`]).
    pub(super) fn learn_first_epoch(&mut self, plan: &Plan, sweep: &Sweep, trial: &TrialResult) {
        self.learn(plan, sweep, trial, ColdEpoch::first_of(trial));
    }

    /// The memory bandwidth of hits: the cached dataset read once more.
    pub(super) fn time_hits(&mut self, data: &Data) {
        if let Some(r) = &self.recorded {
            self.model.memory_bytes_per_s = r.memory_bytes_per_s;
            return;
        }
        let paths = data.paths();
        let _ = pagecache::prewarm(&paths);
        let t0 = Instant::now();
        if let Ok(bytes) = pagecache::prewarm(&paths) {
            let secs = t0.elapsed().as_secs_f64();
            if secs > 0.0 && bytes > 0 {
                self.model.memory_bytes_per_s = bytes as f64 / secs;
            }
        }
    }
}

/// The storage rate, bytes per second, and whether it is only a lower bound, from what the cold epoch
/// read (`seen`), whether it ran clearly below what its cores allow (`held_up`), the fastest any epoch of
/// its trial read, one stream of reads outside any limit (`stream`) and the limit imposed (`limit`).
/// - A limit that one stream reads faster than is the device the trials see: that is the rate.
/// - An epoch held up by storage read at the device's rate, so the rate is measured: the fastest any
///   epoch of the trial read (other I/O on the host once held a cold epoch to 15.8 MB/s under a 40 MB/s
///   limit while every other trial of that bench read at 40). Unless it read well below one stream:
///   then bandwidth is not what held it (on a fast disk image's cold epoch at one core ran from 319 to
///   429 samples/s in six trials of one bench, and at 319 it looked held up at 36 MB/s against a
///   stream of several hundred).
/// - Otherwise the device is no faster than the limit, or at least as fast as the epoch and the stream
///   read (a lower bound).
fn storage_rate(
    seen: f64,
    held_up: bool,
    fastest: f64,
    stream: Option<f64>,
    limit: Option<f64>,
) -> (f64, bool) {
    match (limit, stream) {
        (Some(l), Some(s)) if s >= l => return (l, false),
        _ => {}
    }
    let below_stream = stream.is_some_and(|s| seen < STREAM_SHARE * s);
    if held_up && !below_stream {
        (fastest, false)
    } else if let Some(l) = limit {
        (l, false)
    } else {
        (seen.max(stream.unwrap_or(0.0)), true)
    }
}

/// The fastest any of `epochs` read storage at, bytes per second, and at least `seen`.
fn fastest_read(seen: f64, epochs: &[EpochStats]) -> f64 {
    epochs
        .iter()
        .filter_map(|e| Some(e.samples_per_s * e.storage_read_bytes_per_sample?))
        .fold(seen, f64::max)
}

/// Stage 3 for an application cache: one cold trial at the calibration's cores (a CPU-bound count, so
/// what a miss costs shows), under the storage limit if any, with no room in the cache, stopping where
/// its first epoch ends: every sample of it a miss. A page-cache workload has no trial of its own here:
/// its calibration trial's first epoch is that cold epoch ([`super::calibrate::calibrate`]).
pub(super) fn cold_fetch(
    run: &mut Runner,
    plan: &Plan,
    sweep: &Sweep,
    cores: f64,
    data: &Data,
) -> Result<Fetch, ProfileRunError> {
    let mut f = Fetch::probe(cores, data, plan.req.recorded.as_ref());
    let mut r = base_request(plan.spec, cores);
    r.cache_state = CacheState::Cold;
    r.storage_limit = plan.req.storage_limit;
    r.cache_bytes = Some(Bytes(0));
    r.estimator.first_epoch_only = true;
    // To the grid's precision, like the sweep's cached trials: at ±2% the trial ran out its epoch
    // (image-app at 1 core: 7.0 s, ±2.9% at the epoch's end).
    super::to_column_precision(&mut r);
    match run.trial(TrialRole::Fetch, None, r) {
        Ok(t) => f.learn(plan, sweep, &t, ColdEpoch::window_of(&t)),
        Err(ProfileRunError::Trial(TrialError::NoEstimate(_))) => f.no_cold_epoch(),
        Err(e) => return Err(e),
    }
    f.time_hits(data);
    Ok(f)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn epoch(epoch: u64, samples_per_s: f64, read: Option<f64>) -> EpochStats {
        EpochStats {
            epoch,
            samples: 1000.0,
            seconds: 1000.0 / samples_per_s,
            samples_per_s,
            cpu_s_per_sample: Some(0.002),
            storage_read_bytes_per_sample: read,
        }
    }

    #[test]
    fn a_slow_cold_epoch_does_not_set_the_storage_rate_when_a_later_one_read_faster() {
        // The cold epoch read 140 samples/s of 112 kB; the steady ones read less per sample, faster.
        let epochs = [
            epoch(0, 140.0, Some(112_000.0)),
            epoch(1, 380.0, Some(83_000.0)),
            epoch(2, 387.0, None),
        ];
        let seen = 140.0 * 112_000.0;
        assert_eq!(fastest_read(seen, &epochs), 380.0 * 83_000.0);
        // Held up throughout: the cold epoch's own rate stands.
        let held = [
            epoch(0, 360.0, Some(112_000.0)),
            epoch(1, 380.0, Some(83_000.0)),
        ];
        assert_eq!(fastest_read(360.0 * 112_000.0, &held), 360.0 * 112_000.0);
        assert_eq!(fastest_read(seen, &[]), seen);
    }

    #[test]
    fn the_storage_rate_is_measured_only_where_bandwidth_held_the_cold_epoch_up() {
        const MB: f64 = 1e6;
        // Under a 40 MB/s limit on a device one stream reads at 460 MB/s: the limit, whatever the epoch.
        assert_eq!(
            storage_rate(
                15.8 * MB,
                true,
                15.8 * MB,
                Some(460.0 * MB),
                Some(40.0 * MB)
            ),
            (40.0 * MB, false)
        );
        // No limit, and the epoch read far below one stream: not held up by bandwidth, a lower bound.
        assert_eq!(
            storage_rate(35.8 * MB, true, 35.8 * MB, Some(460.0 * MB), None),
            (460.0 * MB, true)
        );
        // A slow device (one stream at 20 MB/s) held the epoch up: its fastest epoch is the rate.
        assert_eq!(
            storage_rate(19.0 * MB, true, 21.0 * MB, Some(20.0 * MB), None),
            (21.0 * MB, false)
        );
        // Nothing timed the device: a held-up epoch is believed; one that was not is a lower bound.
        assert_eq!(
            storage_rate(30.0 * MB, true, 30.0 * MB, None, None),
            (30.0 * MB, false)
        );
        assert_eq!(
            storage_rate(30.0 * MB, false, 30.0 * MB, None, None),
            (30.0 * MB, true)
        );
        // A limit above what the device streams, not held up: the device is no faster than the limit.
        assert_eq!(
            storage_rate(
                10.0 * MB,
                false,
                10.0 * MB,
                Some(20.0 * MB),
                Some(40.0 * MB)
            ),
            (40.0 * MB, false)
        );
    }
}
