//! Stage 5, the fit: the data-stall model from what the stages measured, with its hit-ratio tables
//! (docs/architecture.md §4); the matrix is built from it.

use super::calibrate::{Calibration, EpochSeen};
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

/// Seconds a miss blocks a loader. Where storage kept well ahead of the calibration's epochs with the
/// cache full ([`LOADER_PACED`]), the loaders set their pace, and each such epoch shows the wait with which
/// the model gives its rate; the least of them stands. That wait holds what a miss costs where it binds (reclaim in the loader's own
/// thread, the read of an evicted file), which the probe's timed read of 64 files and the cold epoch
/// (which fills an empty cache, reclaiming nothing) both missed. Seen with no storage limit: audio at one
/// core read 0.097 ms by the probe where its steady epochs showed 0.123-0.142, and its held-out points at
/// one core were all predicted 2-4% high (docs/profile-format.md, "The miss cost").
/// Elsewhere it is the read probe's, but never so long that the loaders' bound falls below a rate an
/// epoch of the calibration measured (the probe times 64 files once, and on a noisy disk read 1.9 ms a
/// miss where another run read 0.3 and the epochs allowed at most 0.8).
fn miss_wait(cost: &MissCost, fetch: &Fetch, calibration: &Calibration) -> f64 {
    let bound = |e: &EpochSeen| cost.wait_bound(fetch.cores, e.hit, e.samples_per_s);
    let loader_paced = calibration
        .epochs
        .iter()
        .filter(|e| e.cache_full && fetch.model.rate(e.hit) >= LOADER_PACED * e.samples_per_s)
        .filter_map(bound)
        .reduce(f64::min);
    loader_paced.unwrap_or_else(|| {
        calibration
            .epochs
            .iter()
            .filter_map(bound)
            .fold(fetch.wait_s_per_miss, f64::min)
    })
}

/// How far above an epoch's rate the fetch stage must be for the loaders, not storage, to have paced
/// it. The shipped image and audio profiles, under a 40 MB/s limit, ran their calibration's epochs at
/// 0.88-1.02 of what storage delivers; with no limit, storage could have delivered 7.6-17 times as much.
const LOADER_PACED: f64 = 1.5;

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

#[cfg(test)]
mod tests {
    use super::*;

    /// Audio's no-limit calibration at one core (2026-12-07): 1.315 ms a sample cached, 0.113 ms of CPU a
    /// miss, the probe's wait 0.097 ms.
    fn audio_at_one_core(storage_bytes_per_s: f64) -> (MissCost, Fetch) {
        let cost = MissCost {
            cpu_s_per_sample: vec![CostPoint {
                cpus: 1.0,
                cpu_s_per_sample: 1.315e-3,
            }],
            cpu_s_per_miss: 0.113e-3,
            wait_s_per_miss: 0.097e-3,
            limited_overhead: 0.0,
        };
        let mut fetch = Fetch::unmeasured(1.0, 131_580.0);
        fetch.model.storage_bytes_per_s = Some(storage_bytes_per_s);
        fetch.model.memory_bytes_per_s = 9.3e9;
        fetch.wait_s_per_miss = 0.097e-3;
        (cost, fetch)
    }

    fn calibration(epochs: &[(f64, f64)]) -> Calibration {
        let mut c = Calibration::none();
        c.epochs = epochs
            .iter()
            .enumerate()
            .map(|(i, &(hit, samples_per_s))| EpochSeen {
                hit,
                samples_per_s,
                cache_full: i > 0,
            })
            .collect();
        c
    }

    #[test]
    fn the_wait_is_what_the_loader_paced_epochs_show_with_the_cache_full() {
        // The epochs as measured: the cold one, then three with the cache full.
        let epochs = [(0.0, 656.2), (0.274, 666.5), (0.304, 675.7), (0.314, 674.1)];
        let (cost, fetch) = audio_at_one_core(654e6);
        let w = miss_wait(&cost, &fetch, &calibration(&epochs));
        // The least any full-cache epoch shows, not the probe's or the cold epoch's (0.096 ms).
        let least = epochs[1..]
            .iter()
            .filter_map(|&(h, r)| cost.wait_bound(1.0, h, r))
            .fold(f64::INFINITY, f64::min);
        assert_eq!(w, least);
        assert!((w - 0.124e-3).abs() < 0.001e-3, "{w}");
        // Under a storage limit storage paced those epochs: the least of the probe and every epoch's
        // bound stands, as before.
        let (cost, fetch) = audio_at_one_core(40e6);
        let slow = [(0.0, 300.0), (0.274, 400.0), (0.304, 410.0), (0.314, 412.0)];
        let w = miss_wait(&cost, &fetch, &calibration(&slow));
        let least = slow
            .iter()
            .filter_map(|&(h, r)| cost.wait_bound(1.0, h, r))
            .fold(0.097e-3, f64::min);
        assert_eq!(w, least);
        assert!(w <= 0.097e-3);
    }
}
