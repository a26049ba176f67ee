//! Stage 5, the fit: the data-stall model from what the stages measured, with its hit-ratio tables
//! (docs/architecture.md §4); the matrix is built from it.

use super::calibrate::Calibration;
use super::cpu::cpu_bound;
use super::cpu::{cost_at, Sweep};
use super::fetch::{Data, Fetch};
use super::{spec_floor, Plan};
use crate::format::profile::{CoreSpeedReference, FittedModel, HitRatioRow};
use crate::format::profile::{CostPoint, HitModel, LoaderQueue, MissCost, StallModel};
use crate::measure::hostspeed::{PIPELINE_SPEED_EXPONENT, PROBE_SHAPE_BAND};
use crate::stall::minio_hit_ratio;
use crate::workload::builtin::DEFAULT_PREFETCH_BATCHES;

/// CPU-seconds per sample as the miss model charges them. Where the cached pipeline already waits on
/// the accelerator (not [`cpu_bound`]) its loaders idle between batches, and the CPU time per
/// sample counts their wake-ups as well as work: there a sample costs what it cost at the most cores
/// that were still CPU-bound, or less if measured so (docs/profile-format.md). Seen: image at 1.5 cores
/// measured 2.84 ms against 2.38 at 1 core, which made a memory limit look binding at 1.5 cores where
/// the grid measured the accelerator's rate.
fn work_cost(sweep: &Sweep, g: f64) -> Vec<CostPoint> {
    let bound_at = |cpus: f64| cpu_bound(sweep.curve.at(cpus), g);
    let busiest = sweep.cost.iter().rev().find(|p| bound_at(p.cpus)).copied();
    sweep
        .cost
        .iter()
        .map(|p| match busiest {
            Some(b) if !bound_at(p.cpus) => CostPoint {
                cpus: p.cpus,
                cpu_s_per_sample: p.cpu_s_per_sample.min(b.cpu_s_per_sample),
            },
            _ => *p,
        })
        .collect()
}

/// Seconds a miss blocks a loader: the read probe's, but never so long that the loaders' bound falls
/// below a rate an epoch of the calibration measured (the probe times 64 files once, and on a noisy
/// disk read 1.9 ms a miss where another run read 0.3 and the epochs allowed at most 0.8).
fn miss_wait(cost: &MissCost, fetch: &Fetch, calibration: &Calibration) -> f64 {
    calibration
        .epochs
        .iter()
        .filter_map(|&(h, rate)| cost.wait_bound(fetch.cores, h, rate))
        .fold(fetch.wait_s_per_miss, f64::min)
}

/// Stage 5: the model. At the calibration's cores, what a miss costs is the least-squares slope of
/// CPU-seconds per sample against the miss ratio over the cold epoch and the calibration trials (each
/// at the reference speed), from the sweep's cached trial there.
pub(super) fn fit(
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
        let points: Vec<(f64, f64)> = fetch
            .cold_cpu
            .map(|cpu| (0.0, cpu))
            .into_iter()
            .chain(calibration.cpu.iter().copied())
            .map(|(h, cpu)| (1.0 - h, cpu - warm))
            .collect();
        let (num, den) = points
            .iter()
            .fold((0.0, 0.0), |(n, d), (m, y)| (n + m * y, d + m * m));
        let mut cost = MissCost {
            cpu_s_per_sample: work_cost(sweep, g),
            cpu_s_per_miss: if den > 1e-9 {
                (num / den).max(0.0)
            } else {
                0.0
            },
            wait_s_per_miss: fetch.wait_s_per_miss,
            // Not charged: see `MissCost::limited_overhead`.
            limited_overhead: 0.0,
        };
        cost.wait_s_per_miss = miss_wait(&cost, fetch, calibration);
        cost
    });
    let (dataset_bytes, hit_ratios) = match data {
        Some(d) => {
            let scale = calibration
                .fit
                .as_ref()
                .and_then(|f| f.active_list_scale)
                .unwrap_or(1.0);
            let rows = (0..=40)
                .map(|k| {
                    let c = d.bytes * k / 40;
                    let minio = minio_hit_ratio(c as f64, d.bytes as f64);
                    let lru = d.sim.lru(c);
                    let page_cache = d.sim.two_lists_by_part(c, scale);
                    HitRatioRow {
                        cache_bytes: c,
                        minio,
                        page_cache: page_cache.mean,
                        lru: Some(lru),
                        page_cache_by_part: match plan.hit_model {
                            HitModel::PageCache => page_cache.by_part,
                            HitModel::Minio => Vec::new(),
                        },
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
            cpu: sweep.curve_at_reference_speed(g),
            fetch: fetch.model,
            footprint_bytes: sweep.footprint().unwrap_or(floor).max(floor),
            footprint_points: sweep.footprint_points.clone(),
            resident_points: sweep.resident_points.clone(),
            dataset_bytes,
            hit_model: plan.hit_model,
            miss_cost,
            loader_queue: Some(LoaderQueue {
                batch_samples: plan.spec.batch_size,
                batches_per_loader: DEFAULT_PREFETCH_BATCHES as u32 + 1,
            }),
        },
        hit_ratios,
        hit_curve: calibration.fit.clone(),
        accelerator: None,
        core_speed: sweep
            .reference_speed()
            .map(|reference_ops_per_cpu_s| CoreSpeedReference {
                reference_ops_per_cpu_s,
                pipeline_exponent: PIPELINE_SPEED_EXPONENT,
                shape_band: Some(PROBE_SHAPE_BAND),
            }),
    }
}
