//! Stage 3, the fetch: what a miss costs. One cold trial gives the storage rate, the bytes a miss reads
//! and the CPU it costs; a timed read of evicted files gives how long a miss blocks a loader; a read of
//! the cached dataset gives the memory bandwidth of hits (F(h) and the miss cost, docs/architecture.md §4).

use super::cpu::{cost_at, Sweep};
use super::runner::Runner;
use super::{
    base_request, cpu_s_per_sample, spec_floor, Plan, ProfileRunError, CONSTRAINED_PRECISION,
};
use crate::error::InputError;
use crate::isolate::pagecache;
use crate::measure::{CacheState, TrialError, TrialResult};
use crate::profile::file::TrialRole;
use crate::stall::{CacheSim, CostPoint, FetchModel, HitModel, MissCost};
use crate::units::Bytes;
use crate::workload::dataset::{self, DatasetFiles};
use std::path::{Path, PathBuf};
use std::time::Instant;

/// Files read to time a miss's wait.
const PROBE_FILES: usize = 64;
/// A cold trial this far below the cached pipeline's rate (misses' CPU included) was held up by storage.
const FETCH_BOUND: f64 = 0.95;

/// The dataset's files and what the cache models need of them.
pub(super) struct Data {
    files: DatasetFiles,
    pub(super) bytes: u64,
    /// The cache simulations on the dataset's file sizes.
    pub(super) sim: CacheSim,
}

impl Data {
    /// The dataset the first CPU trial found, scanned; `None` when it found none.
    pub(super) fn of(first: &TrialResult) -> Result<Option<Data>, ProfileRunError> {
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
            sim: CacheSim::new(sizes, 1),
        }))
    }

    fn paths(&self) -> Vec<PathBuf> {
        self.files.paths().map(Path::to_path_buf).collect()
    }
}

/// What the cold trial and the read probe found.
pub(super) struct Fetch {
    pub(super) model: FetchModel,
    /// The cores the cold trial ran at (the calibration's).
    pub(super) cores: f64,
    /// CPU-seconds per sample over the cold trial's first epoch (every sample a miss), at the speed
    /// of the sweep's trial at the same cores ([`Sweep::at_sweep_speed`]).
    pub(super) cold_cpu: Option<f64>,
    /// Seconds a loader waits per miss.
    pub(super) wait_s_per_miss: f64,
    /// The storage rate the cold epoch read at, bytes per second.
    pub(super) storage_seen: Option<f64>,
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
        }
    }
}

/// Stage 3: one cold trial at the calibration's cores (a CPU-bound count, so what a miss costs shows),
/// under the storage limit if any. Its first epoch is all misses: the storage rate, the bytes a miss
/// reads and the CPU it costs. A page-cache workload runs it under a memory limit that just holds the
/// dataset; an application cache gets no room and stops after the first epoch. Beside it, a timed read of evicted
/// files says how long a miss blocks a loader (and how fast one stream reads the device), and a read of
/// the cached dataset gives the memory bandwidth of hits.
pub(super) fn cold_fetch(
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
        // Later epochs, every read a hit, keep the trial going where the first is too short to measure.
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
    f.cold_cpu = f.cold_cpu.map(|c| sweep.at_sweep_speed(cores, &result, c));
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
