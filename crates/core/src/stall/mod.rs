//! The data-stall model (DS-Analyzer, with this project's refinements): throughput at an allocation is
//! the slowest of three overlapped stages, T(c, m) = min(G, P(c, h(m)), F(h(m))), where G is the
//! accelerator's ingestion rate, P(c, h) the preprocessing rate with c cores at cache hit ratio h, and
//! F(h) the fetch rate. A miss costs CPU on the job's own cores (the read path, page faults, reclaim) and
//! blocks a loader while the device reads, so P falls with the miss ratio where the job is CPU-bound,
//! whatever the storage bandwidth. The hit ratio comes from a fixed-subset application cache (MinIO), or
//! from the OS page cache: the kernel's active and inactive lists under per-epoch shuffling, simulated
//! for the dataset's real item sizes, with the active list's share calibrated by a memory-limited trial.
//! docs/profile-format.md ("The model behind the matrix") has the formulas.

use crate::format::profile::{
    CpuCurve, CpuPoint, FetchModel, FootprintPoint, LoaderQueue, MissCost, Stage, StallModel,
    EPOCH_PARTS,
};
mod cache;

pub use cache::{active_share, minio_hit_ratio, CacheSim, EpochHits};
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;

impl CpuCurve {
    /// Throughput at `cpus` cores with the dataset cached.
    pub fn at(&self, cpus: f64) -> f64 {
        let pts = self.points();
        let Some(first) = pts.first() else {
            return 0.0;
        };
        if cpus <= first.cpus {
            return first.samples_per_s * (cpus / first.cpus).max(0.0);
        }
        for w in pts.windows(2) {
            let (a, b) = (w[0], w[1]);
            if cpus <= b.cpus {
                let f = (cpus - a.cpus) / (b.cpus - a.cpus);
                return a.samples_per_s + f * (b.samples_per_s - a.samples_per_s);
            }
        }
        pts[pts.len() - 1].samples_per_s
    }
}

impl FetchModel {
    /// F(h): samples per second the fetch stage can deliver at hit ratio `h`.
    pub fn rate(&self, h: f64) -> f64 {
        let h = h.clamp(0.0, 1.0);
        let s = self.mean_sample_bytes;
        let miss = match self.storage_bytes_per_s {
            Some(b) => (1.0 - h) * s / b,
            None => 0.0,
        };
        let cost = miss + h * s / self.memory_bytes_per_s;
        if cost > 0.0 {
            1.0 / cost
        } else {
            f64::INFINITY
        }
    }
}

impl LoaderQueue {
    /// Batches ready or in the making ahead of the accelerator at `cpus` cores, at least one.
    fn batches_ahead(&self, cpus: f64) -> usize {
        (loaders(cpus) as usize * self.batches_per_loader as usize).max(1)
    }
}

/// Epochs the loader queue is simulated before the one counted: the queue starts empty.
const QUEUE_WARM_EPOCHS: usize = 2;
/// The most steps an epoch's pipeline is simulated in (batches, or groups of them).
const EPOCH_CHUNKS: usize = 2000;

/// Below this miss ratio a measured rate says too little about a miss's wait to bound it.
const MIN_MISS_TO_BOUND_WAIT: f64 = 0.2;

/// The loaders a grant of `cpus` cores runs (the launch contract: ceil(c), at least one).
fn loaders(cpus: f64) -> f64 {
    cpus.ceil().max(1.0)
}

/// A page cache this much larger than the dataset leaves its memory limit slack: reclaim stops.
pub const LIMIT_SLACK: f64 = 1.1;

/// Whether a measured rate is the accelerator's G rather than the cores': measured P already includes
/// G (min(G, P)), so a rate within 1% of G says only that the loaders keep up.
pub fn at_accelerator(samples_per_s: f64, accelerator_samples_per_s: f64) -> bool {
    samples_per_s >= 0.99 * accelerator_samples_per_s
}

impl MissCost {
    /// CPU-seconds per sample, cached, at `cpus` (linear between measured core counts, flat outside).
    pub fn cached_cpu_s_per_sample(&self, cpus: f64) -> f64 {
        let pts = &self.cpu_s_per_sample;
        match (pts.first(), pts.last()) {
            (Some(f), _) if cpus <= f.cpus => f.cpu_s_per_sample,
            (_, Some(l)) if cpus >= l.cpus => l.cpu_s_per_sample,
            (Some(_), Some(_)) => {
                let i = pts.windows(2).position(|w| cpus <= w[1].cpus).unwrap_or(0);
                let (a, b) = (pts[i], pts[i + 1]);
                let f = (cpus - a.cpus) / (b.cpus - a.cpus);
                a.cpu_s_per_sample + f * (b.cpu_s_per_sample - a.cpu_s_per_sample)
            }
            _ => 0.0,
        }
    }

    /// P(c, h): the preprocessing rate at `cpus` cores and hit ratio `h`, no faster than `cached` (the
    /// measured rate with everything cached, no memory limit). The cores bound it at c / (cpu per sample,
    /// plus [`MissCost::limited_overhead`] when a memory limit binds, plus misses' CPU); the ceil(c)
    /// loaders, each blocked for the device on a miss, bound it at ceil(c) / (that + wait).
    ///
    /// The CPU per sample charged here is the lesser of its value at c and at ceil(c), the whole cores
    /// the grant spans: a fractional grant's loaders are throttled by the quota together, and what that
    /// costs with everything cached (image: 1.88 ms a sample at half a core against 1.60 at one) is time
    /// a loader waiting on a miss would spend idle anyway. Measured: at half a core under memory limits
    /// image and audio ran at or above their cached half-core rate, where charging misses on top of it
    /// predicted them up to 20% low (docs/profile-format.md, "The miss cost").
    pub fn preprocess_rate(&self, cpus: f64, h: f64, cached: f64, limited: bool) -> f64 {
        let miss = 1.0 - h.clamp(0.0, 1.0);
        let cpu = self.cpu_s_per_sample_at(cpus, h, limited);
        if cpu <= 0.0 {
            return cached;
        }
        let by_cores = cpus / cpu;
        let by_loaders = loaders(cpus) / (cpu + miss * self.wait_s_per_miss);
        cached.min(by_cores).min(by_loaders)
    }

    /// CPU-seconds per sample at `cpus` cores and hit ratio `h`, as [`MissCost::preprocess_rate`]
    /// charges them.
    fn cpu_s_per_sample_at(&self, cpus: f64, h: f64, limited: bool) -> f64 {
        let miss = 1.0 - h.clamp(0.0, 1.0);
        let overhead = if limited { self.limited_overhead } else { 0.0 };
        let per_sample = self
            .cached_cpu_s_per_sample(cpus)
            .min(self.cached_cpu_s_per_sample(cpus.ceil()));
        per_sample * (1.0 + overhead) + miss * self.cpu_s_per_miss
    }

    /// The longest wait per miss, seconds, that leaves the loaders' bound at or above `samples_per_s`,
    /// a rate measured under a memory limit at `cpus` cores and hit ratio `h`: a stage of the pipeline
    /// is never slower than the pipeline was. `None` where misses are too rare to bound it.
    pub fn wait_bound(&self, cpus: f64, h: f64, samples_per_s: f64) -> Option<f64> {
        let miss = 1.0 - h.clamp(0.0, 1.0);
        if miss < MIN_MISS_TO_BOUND_WAIT || samples_per_s <= 0.0 {
            return None;
        }
        let cpu = self.cpu_s_per_sample_at(cpus, h, true);
        Some(((loaders(cpus) / samples_per_s - cpu) / miss).max(0.0))
    }
}

/// The footprint at `cpus` cores from the points measured per core count (monotone, linear between,
/// flat outside), or `fallback` bytes where there are none.
pub fn footprint_at(points: &[FootprintPoint], fallback: u64, cpus: f64) -> f64 {
    let curve = CpuCurve::new(
        points
            .iter()
            .map(|p| CpuPoint {
                cpus: p.cpus,
                samples_per_s: p.bytes as f64,
            })
            .collect(),
    );
    match (curve.points().first(), curve.points().last()) {
        (Some(first), _) if cpus <= first.cpus => first.samples_per_s,
        (Some(_), Some(last)) if cpus >= last.cpus => last.samples_per_s,
        (Some(_), Some(_)) => curve.at(cpus),
        _ => fallback as f64,
    }
}

/// A prediction at one allocation.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Prediction {
    /// Samples per second.
    pub samples_per_s: f64,
    /// The stage that sets it.
    pub limited_by: Stage,
    /// Cache hit ratio at this memory.
    pub hit_ratio: f64,
}

impl StallModel {
    /// The footprint at `cpus` cores, bytes.
    pub fn footprint_at(&self, cpus: f64) -> f64 {
        footprint_at(&self.footprint_points, self.footprint_bytes, cpus)
    }

    /// What the workload keeps resident besides its cache at `cpus` cores, bytes: interpolated in
    /// `resident_points`, or the footprint where there are none.
    pub fn resident_at(&self, cpus: f64) -> f64 {
        if self.resident_points.is_empty() {
            self.footprint_at(cpus)
        } else {
            footprint_at(&self.resident_points, self.footprint_bytes, cpus)
        }
    }

    /// Cache bytes left at `memory_bytes` of total memory once what the workload keeps resident at
    /// `cpus` cores is paid.
    pub fn cache_bytes(&self, cpus: f64, memory_bytes: f64) -> f64 {
        (memory_bytes - self.resident_at(cpus)).max(0.0)
    }

    /// T(c, m) and its limiting stage, with `hit` giving the hit ratios (over the epoch and by part of
    /// it) for a cache size in bytes.
    pub fn predict_with(
        &self,
        cpus: f64,
        memory_bytes: f64,
        hit: &mut dyn FnMut(f64) -> EpochHits,
    ) -> Prediction {
        self.predict_using(cpus, memory_bytes, hit, self.miss_cost.as_ref())
    }

    /// T(c, m) as if misses cost storage bandwidth only (the published DS-Analyzer model).
    pub fn predict_without_miss_cost(
        &self,
        cpus: f64,
        memory_bytes: f64,
        hit: &mut dyn FnMut(f64) -> f64,
    ) -> Prediction {
        self.predict_using(cpus, memory_bytes, &mut |c| EpochHits::flat(hit(c)), None)
    }

    fn predict_using(
        &self,
        cpus: f64,
        memory_bytes: f64,
        hit: &mut dyn FnMut(f64) -> EpochHits,
        miss_cost: Option<&MissCost>,
    ) -> Prediction {
        let cache = self.cache_bytes(cpus, memory_bytes);
        let hits = hit(cache);
        let h = hits.mean;
        let g = self.accelerator_samples_per_s;
        let cached = self.cpu.at(cpus);
        let limited = cache < LIMIT_SLACK * self.dataset_bytes as f64;
        let p = match miss_cost {
            Some(mc) => mc.preprocess_rate(cpus, h, cached, limited),
            None => cached,
        };
        let f = self.fetch.rate(h);
        let (mut t, mut stage) = if at_accelerator(p, g) {
            (g, Stage::Accelerator)
        } else {
            (p, Stage::Preprocess)
        };
        if f < t {
            t = f;
            stage = Stage::Fetch;
        }
        if let Some((rate, slowest)) =
            miss_cost.and_then(|mc| self.epoch_rate(cpus, &hits, limited, mc))
        {
            if rate < t {
                (t, stage) = (rate, slowest);
            }
        }
        Prediction {
            samples_per_s: t,
            limited_by: stage,
            hit_ratio: h,
        }
    }

    /// Samples per second over an epoch whose hit ratio moves from part to part, and the stage that
    /// holds the slowest part back: the loaders make each part's batches at that part's P(c, h) or F(h),
    /// whichever is slower, the accelerator takes them at G, and the loaders run ahead of it by their
    /// queue ([`LoaderQueue`]; one batch without one). At one hit ratio throughout this is T at that ratio;
    /// where hits come early and misses late, a pipeline that is CPU-bound early and storage-bound late
    /// runs slower than T at the epoch's mean (docs/profile-format.md, "The model behind the matrix").
    /// `None` where the hit ratio does not move within the epoch.
    fn epoch_rate(
        &self,
        cpus: f64,
        hits: &EpochHits,
        limited: bool,
        mc: &MissCost,
    ) -> Option<(f64, Stage)> {
        let flat = hits.by_part.iter().all(|h| (h - hits.mean).abs() < 1e-9);
        if hits.by_part.is_empty() || flat || self.fetch.mean_sample_bytes <= 0.0 {
            return None;
        }
        let g = self.accelerator_samples_per_s;
        let cached = self.cpu.at(cpus);
        // A cached rate at G says only that the loaders keep up with the accelerator: they may run faster.
        let cap = if at_accelerator(cached, g) {
            f64::INFINITY
        } else {
            cached
        };
        let parts: Vec<(f64, Stage)> = hits
            .by_part
            .iter()
            .map(|&h| {
                let (p, f) = (
                    mc.preprocess_rate(cpus, h, cap, limited),
                    self.fetch.rate(h),
                );
                if f < p {
                    (f, Stage::Fetch)
                } else {
                    (p, Stage::Preprocess)
                }
            })
            .collect();
        if parts.iter().any(|(r, _)| r.is_nan() || *r <= 0.0) || g <= 0.0 {
            return None;
        }
        // Simulated in chunks of at least a batch, at most EPOCH_CHUNKS an epoch; the queue is
        // counted in samples.
        let samples = (self.dataset_bytes as f64 / self.fetch.mean_sample_bytes).max(1.0);
        let batch = self
            .loader_queue
            .map_or(1.0, |q| f64::from(q.batch_samples.max(1)));
        let queued = self
            .loader_queue
            .map_or(1.0, |q| (q.batches_ahead(cpus) as f64) * batch);
        let chunks = ((samples / batch).ceil() as usize).clamp(hits.by_part.len(), EPOCH_CHUNKS);
        let chunk = samples / chunks as f64;
        let ahead = ((queued / chunk).round() as usize).clamp(1, chunks);
        // When each chunk is made and taken by the accelerator: the loaders start a chunk once the one
        // `ahead` chunks before it was taken (its place in the queue is free).
        let mut taken_at: VecDeque<f64> = VecDeque::with_capacity(ahead + 1);
        let (mut made, mut taken, mut done, mut epoch_start) = (0.0f64, 0.0f64, 0.0f64, 0.0f64);
        for i in 0..chunks * (QUEUE_WARM_EPOCHS + 1) {
            if i == chunks * QUEUE_WARM_EPOCHS {
                epoch_start = taken;
            }
            let (rate, _) = parts[(i % chunks) * parts.len() / chunks];
            let room = if taken_at.len() == ahead {
                taken_at.pop_front().unwrap_or(0.0)
            } else {
                0.0
            };
            made = made.max(room) + chunk / rate;
            taken = done.max(made);
            done = taken + chunk / g;
            taken_at.push_back(taken);
        }
        let epoch_s = taken - epoch_start;
        let slowest = parts
            .iter()
            .min_by(|a, b| a.0.total_cmp(&b.0))
            .map_or(Stage::Preprocess, |p| p.1);
        (epoch_s > 0.0).then(|| (samples / epoch_s, slowest))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::profile::{CostPoint, HitModel};

    #[test]
    fn cpu_curve_is_monotone_and_interpolates() {
        let c = CpuCurve::new(vec![
            CpuPoint {
                cpus: 2.0,
                samples_per_s: 900.0,
            },
            CpuPoint {
                cpus: 0.5,
                samples_per_s: 350.0,
            },
            CpuPoint {
                cpus: 1.0,
                samples_per_s: 700.0,
            },
            CpuPoint {
                cpus: 1.5,
                samples_per_s: 690.0,
            },
        ]);
        assert_eq!(c.at(0.25), 175.0);
        assert_eq!(c.at(0.75), 525.0);
        assert_eq!(c.at(1.5), 700.0);
        assert_eq!(c.at(4.0), 900.0);
        let mut last = 0.0;
        for i in 1..=40 {
            let v = c.at(i as f64 * 0.1);
            assert!(v >= last);
            last = v;
        }
    }

    #[test]
    fn fetch_rate_rises_with_hits() {
        let f = FetchModel {
            mean_sample_bytes: 100e3,
            storage_bytes_per_s: Some(20e6),
            storage_lower_bound: false,
            memory_bytes_per_s: 5e9,
        };
        assert!((f.rate(0.0) - 200.0).abs() < 1e-9);
        assert!(f.rate(0.5) > 398.0 && f.rate(0.5) < 400.0);
        assert!(f.rate(1.0) > 40_000.0);
        let unbounded = FetchModel {
            storage_bytes_per_s: None,
            ..f
        };
        assert!(unbounded.rate(0.0).is_infinite());
    }

    #[test]
    fn the_footprint_follows_the_cores() {
        let m = StallModel {
            accelerator_samples_per_s: 1.0,
            cpu: CpuCurve::new(vec![]),
            fetch: FetchModel {
                mean_sample_bytes: 1.0,
                storage_bytes_per_s: None,
                storage_lower_bound: false,
                memory_bytes_per_s: 1.0,
            },
            footprint_bytes: 300,
            footprint_points: vec![
                FootprintPoint {
                    cpus: 2.0,
                    bytes: 300,
                },
                FootprintPoint {
                    cpus: 1.0,
                    bytes: 100,
                },
            ],
            resident_points: Vec::new(),
            dataset_bytes: 1,
            hit_model: HitModel::Minio,
            miss_cost: None,
            loader_queue: None,
        };
        assert_eq!(m.footprint_at(0.5), 100.0);
        assert_eq!(m.footprint_at(1.5), 200.0);
        assert_eq!(m.footprint_at(4.0), 300.0);
        assert_eq!(m.cache_bytes(1.5, 250.0), 50.0);
        assert_eq!(m.cache_bytes(2.0, 250.0), 0.0);
    }

    #[test]
    fn the_slowest_stage_sets_the_pace() {
        let m = StallModel {
            accelerator_samples_per_s: 900.0,
            cpu: CpuCurve::new(vec![
                CpuPoint {
                    cpus: 0.5,
                    samples_per_s: 350.0,
                },
                CpuPoint {
                    cpus: 2.0,
                    samples_per_s: 900.0,
                },
            ]),
            fetch: FetchModel {
                mean_sample_bytes: 100e3,
                storage_bytes_per_s: Some(20e6),
                storage_lower_bound: false,
                memory_bytes_per_s: 5e9,
            },
            footprint_bytes: 100 << 20,
            footprint_points: Vec::new(),
            resident_points: Vec::new(),
            dataset_bytes: 200 << 20,
            hit_model: HitModel::Minio,
            miss_cost: None,
            loader_queue: None,
        };
        let d = m.dataset_bytes as f64;
        let mut minio = |c: f64| EpochHits::flat(minio_hit_ratio(c, d));
        let full = m.footprint_bytes as f64 + d;
        let p = m.predict_with(2.0, full, &mut minio);
        assert_eq!(p.limited_by, Stage::Accelerator);
        let p = m.predict_with(0.5, full, &mut minio);
        assert_eq!((p.limited_by, p.samples_per_s), (Stage::Preprocess, 350.0));
        let p = m.predict_with(2.0, m.footprint_bytes as f64, &mut minio);
        assert_eq!(p.limited_by, Stage::Fetch);
        assert!((p.samples_per_s - 200.0).abs() < 1e-6);
    }

    /// One core preprocessing at most 400 samples/s (2.5 ms of CPU a sample, misses cost no CPU) before an
    /// accelerator at `g`, reading 100 kB a sample at 20 MB/s from storage, 2,000 samples an epoch,
    /// with a cache that hits `early` in the first half of each epoch and `late` in the second.
    fn split_epoch(g: f64, early: f64, late: f64, queue: Option<LoaderQueue>) -> f64 {
        let m = StallModel {
            accelerator_samples_per_s: g,
            cpu: CpuCurve::new(vec![CpuPoint {
                cpus: 1.0,
                samples_per_s: g.min(400.0),
            }]),
            fetch: FetchModel {
                mean_sample_bytes: 100e3,
                storage_bytes_per_s: Some(20e6),
                storage_lower_bound: false,
                memory_bytes_per_s: 1e12,
            },
            footprint_bytes: 0,
            footprint_points: Vec::new(),
            resident_points: Vec::new(),
            dataset_bytes: 200_000_000,
            hit_model: HitModel::PageCache,
            miss_cost: Some(MissCost {
                cpu_s_per_sample: vec![CostPoint {
                    cpus: 1.0,
                    cpu_s_per_sample: 2.5e-3,
                }],
                cpu_s_per_miss: 0.0,
                wait_s_per_miss: 0.0,
                limited_overhead: 0.0,
            }),
            loader_queue: queue,
        };
        let hits = EpochHits {
            mean: (early + late) / 2.0,
            by_part: (0..EPOCH_PARTS)
                .map(|k| if k < EPOCH_PARTS / 2 { early } else { late })
                .collect(),
        };
        m.predict_with(1.0, 100e6, &mut |_| hits.clone())
            .samples_per_s
    }

    #[test]
    fn a_job_that_turns_storage_bound_late_in_each_epoch_runs_below_its_mean() {
        // At 0.5 throughout: 400/s by the cores, 20e6 / (0.5 * 100e3) = 400/s by storage.
        let flat = split_epoch(900.0, 0.5, 0.5, None);
        assert!((flat - 400.0).abs() < 0.1, "{flat}");
        // All hits in the first half (the cores' 400/s), none in the second (storage's 200/s): the
        // epoch takes 1000 / 400 + 1000 / 200 s.
        let split = split_epoch(900.0, 1.0, 0.0, None);
        let want = 2000.0 / (1000.0 / 400.0 + 1000.0 / 200.0);
        assert!((split - want).abs() < 2.0, "{split} against {want}");
        // Where both halves leave storage faster than the cores, nothing changes.
        let cores = split_epoch(900.0, 0.8, 0.5, None);
        assert!((cores - 400.0).abs() < 0.1, "{cores}");
    }

    #[test]
    fn loaders_that_outrun_the_accelerator_carry_it_into_the_misses() {
        // The accelerator at 300/s, the loaders 400/s while hits last and 200/s after.
        let alone = split_epoch(300.0, 1.0, 0.0, None);
        let want = 2000.0 / (1000.0 / 300.0 + 1000.0 / 200.0);
        assert!((alone - want).abs() < 2.0, "{alone} against {want}");
        let queue = LoaderQueue {
            batch_samples: 10,
            batches_per_loader: 20,
        };
        let ahead = split_epoch(300.0, 1.0, 0.0, Some(queue));
        // 200 samples ahead when the misses start, drained at 300/s while 200/s come in.
        assert!(
            ahead > alone + 5.0 && ahead < 300.0,
            "{ahead} against {alone}"
        );
    }

    fn miss_cost() -> MissCost {
        MissCost {
            cpu_s_per_sample: vec![
                CostPoint {
                    cpus: 0.5,
                    cpu_s_per_sample: 2.5e-3,
                },
                CostPoint {
                    cpus: 2.0,
                    cpu_s_per_sample: 2.3e-3,
                },
            ],
            cpu_s_per_miss: 0.2e-3,
            wait_s_per_miss: 0.1e-3,
            limited_overhead: 0.1,
        }
    }

    #[test]
    fn misses_slow_a_cpu_bound_job_and_not_one_with_cpu_to_spare() {
        let mc = miss_cost();
        assert!((mc.cached_cpu_s_per_sample(1.25) - 2.4e-3).abs() < 1e-12);
        assert_eq!(mc.cached_cpu_s_per_sample(8.0), 2.3e-3);
        // One core, CPU-bound at 400/s cached: every miss adds 0.2 ms of CPU and 0.1 ms of a blocked
        // loader.
        let cached = 400.0;
        assert_eq!(mc.preprocess_rate(1.0, 1.0, cached, false), 400.0);
        let cold = mc.preprocess_rate(1.0, 0.0, cached, false);
        let cpu_1 = mc.cached_cpu_s_per_sample(1.0);
        assert!((cold - 1.0 / (cpu_1 + 0.3e-3)).abs() < 1e-9, "{cold}");
        // Half a core with one loader: the loader's waits fit in the time the quota leaves idle, and
        // misses are charged on a whole core's CPU per sample, not on the quota-throttled 2.5 ms.
        let half = mc.preprocess_rate(0.5, 0.0, 200.0, false);
        assert!((half - 0.5 / (cpu_1 + 0.2e-3)).abs() < 1e-9, "{half}");
        assert!(half > 0.5 / (2.5e-3 + 0.2e-3));
        // Everything cached, it stays at the measured half-core rate.
        assert_eq!(mc.preprocess_rate(0.5, 1.0, 200.0, false), 200.0);
        // Two cores capped by the accelerator at 600/s need 1.4 cores: misses are free.
        assert_eq!(mc.preprocess_rate(2.0, 0.0, 600.0, true), 600.0);
        // More hits, never slower.
        let mut last = 0.0;
        for k in 0..=10 {
            let p = mc.preprocess_rate(1.5, k as f64 / 10.0, 620.0, true);
            assert!(p >= last);
            last = p;
        }
        // A binding memory limit costs every sample its overhead, hits too.
        let limited = mc.preprocess_rate(1.0, 1.0, cached, true);
        assert!((limited - 1.0 / (cpu_1 * 1.1)).abs() < 1e-9, "{limited}");
    }

    #[test]
    fn a_measured_rate_bounds_how_long_a_miss_can_block_a_loader() {
        let mut mc = miss_cost();
        mc.limited_overhead = 0.0;
        let cpu_1 = mc.cached_cpu_s_per_sample(1.0);
        // One core ran 300/s with every sample a miss: its loader spent 1/300 s a sample, of which
        // cpu_1 + 0.2 ms was CPU, so it waited at most the rest.
        let w = mc.wait_bound(1.0, 0.0, 300.0).unwrap();
        assert!((w - (1.0 / 300.0 - cpu_1 - 0.2e-3)).abs() < 1e-12, "{w}");
        // With that wait, the loaders' bound is exactly the measured rate, and a longer one falls below.
        mc.wait_s_per_miss = w;
        assert!((mc.preprocess_rate(1.0, 0.0, 420.0, true) - 300.0).abs() < 1e-9);
        // Two loaders at 1.5 cores halve the time each may spend per sample; half the samples missing
        // doubles the wait each miss may take (CPU charged at the two whole cores' cost).
        let two = mc.wait_bound(1.5, 0.5, 500.0).unwrap();
        let cpu_2 = mc.cached_cpu_s_per_sample(2.0);
        assert!(
            (two - (2.0 / 500.0 - cpu_2 - 0.1e-3) / 0.5).abs() < 1e-12,
            "{two}"
        );
        // A rate faster than the CPU alone allows bounds the wait at zero, not below.
        assert_eq!(mc.wait_bound(1.0, 0.0, 1e4), Some(0.0));
        // Mostly hits, or nothing measured: no bound.
        assert_eq!(mc.wait_bound(1.0, 0.9, 400.0), None);
        assert_eq!(mc.wait_bound(1.0, 0.0, 0.0), None);
    }
}
