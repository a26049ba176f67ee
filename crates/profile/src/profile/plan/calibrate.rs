//! Stage 4, the calibration: where the cold epoch and the calibration trials run, and for a page-cache
//! workload the memory-limited trial that fits the kernel's two-list hit curve (the page cache is not
//! LRU, docs/architecture.md §4) and whose first epoch, started cold, is stage 3's cold epoch.

use super::cpu::{cost_at, cpu_bound, remeasure, Sweep, OOM_RETRIES};
use super::fetch::{Data, Fetch};
use super::runner::Runner;
use super::{cpu_s_per_sample, spec_floor, Plan, ProfileRunError};
use crate::format::profile::{CalibrationPoint, HitCurveFit, TrialRole};
use crate::format::trial::TrialResult;
use crate::measure::TrialError;
use crate::profile::matrix::axis_gib;
use crate::stall::{active_share, minio_hit_ratio};
use crate::units::Bytes;

/// The family of page-cache hit curves the calibration fits (docs/profile-format.md).
const HIT_CURVE_FAMILY: &str = "two-list";

/// Where the calibration trial puts the cache, as a fraction of the dataset: where LRU and a fixed subset
/// differ most (their gap peaks near 60% under per-epoch shuffling), so the active list's share shows
/// most. One trial fits the curve's one parameter; more would cost a second steady-state trial for
/// little (docs/profile-format.md).
pub(super) const CALIBRATION_FRACTIONS: [f64; 1] = [0.6];
/// What the calibration trials found: the fitted curve and, per trial, (hit ratio, CPU per sample).
pub(super) struct Calibration {
    /// The fitted curve; `None` for an application cache or without a dataset.
    pub(super) fit: Option<HitCurveFit>,
    /// Per trial that measured it, (hit ratio, CPU-seconds per sample).
    pub(super) cpu: Vec<(f64, f64)>,
    /// Every epoch of the trials, cold one included: each bounds how long a miss can block a loader
    /// ([`crate::format::profile::MissCost::wait_bound`]).
    pub(super) epochs: Vec<EpochSeen>,
}

/// One epoch of a calibration trial, as the fit reads it.
#[derive(Debug, Clone, Copy)]
pub(super) struct EpochSeen {
    /// Hit ratio, from the storage it read.
    pub(super) hit: f64,
    /// Samples per second.
    pub(super) samples_per_s: f64,
    /// Whether the cache was full from its start, so that every miss also reclaimed a page: every
    /// epoch but a trial's first, which starts cold with the cache empty.
    pub(super) cache_full: bool,
}

impl Calibration {
    /// Nothing calibrated: an application cache, or no dataset.
    pub(super) fn none() -> Calibration {
        Calibration {
            fit: None,
            cpu: Vec::new(),
            epochs: Vec::new(),
        }
    }
}

/// Where the cold epoch and the calibration trials run, so the CPU they see a miss cost is what slows a
/// CPU-bound job: the most swept whole cores at which the cached pipeline is CPU-bound (whole, so a
/// loader blocked on a miss idles its core and the wait shows, and no quota makes the epochs noisy),
/// else the most swept cores that are, else the most cores.
pub(super) fn calibration_cores(plan: &Plan, sweep: &Sweep, g: f64) -> f64 {
    let bound: Vec<f64> = sweep
        .curve
        .points()
        .iter()
        .filter(|p| cpu_bound(p.samples_per_s, g))
        .map(|p| p.cpus)
        .collect();
    bound
        .iter()
        .rev()
        .find(|c| c.fract() == 0.0)
        .or(bound.last())
        .copied()
        .unwrap_or(plan.c_max())
}

/// The cached trial at the calibration's cores measured again when its samples cost no less CPU than
/// the calibration trial's `t` (beyond [`CPU_COST_NOISE`]), most of which missed: a miss costs CPU, never
/// saves it, so the host slowed the cached trial (neighbours' memory traffic slows the workload several
/// times more than the speed probe's kernel shows). The sweep then keeps the faster of the two, and the profile says so.
/// Seen: image's cached trial at one core ran 394.8 samples/s at 2.51 ms a sample, the calibration 2.29
/// ms with 69% misses, and the same allocation measured 529.7 later (docs/profile-format.md).
fn recheck_cached(
    run: &mut Runner,
    plan: &Plan,
    sweep: &mut Sweep,
    t: &TrialResult,
    g: f64,
) -> Result<(), ProfileRunError> {
    let c = t.allocation.cpus.0;
    let (Some(cached), Some(limited)) = (cost_at(sweep, c), cpu_s_per_sample(t)) else {
        return Ok(());
    };
    let limited = sweep.at_reference_speed(t, limited);
    let before = sweep.curve.at(c);
    if !slowed_cached(before, g, cached, limited) {
        return Ok(());
    }
    remeasure(run, plan, sweep, c)?;
    run.warnings.push(format!(
        "the cached trial at {c} cores ran {before:.1} samples/s at {:.2} ms of CPU a sample, where \
         the calibration trial, most of its samples missing, spent {:.2} ms: the host slowed it, so it \
         was measured again, and the faster of the two ({:.1} samples/s) stands",
        1e3 * cached,
        1e3 * limited,
        sweep.curve.at(c)
    ));
    Ok(())
}

/// Whether a cached trial that ran `cached_rate` samples/s at `cached` CPU-seconds a sample was slowed
/// by the host, given a memory-limited trial at the same cores that spent `limited`. Only a CPU-bound
/// cached trial can be: one at the accelerator's rate `g` could not have run faster, and its loaders'
/// CPU per sample then varies with how they idle, not with what a sample costs (seen: text, at G
/// everywhere, re-measured on a busy host).
fn slowed_cached(cached_rate: f64, g: f64, cached: f64, limited: f64) -> bool {
    cpu_bound(cached_rate, g) && limited <= cached * (1.0 - CPU_COST_NOISE)
}

/// How far apart two trials' CPU per sample may lie by noise alone. Where a miss costs next to no CPU (no
/// storage limit), the calibration trial's cost ties the cached trial's, and a tie re-measured the cached
/// trial for nothing: image at half a core, 1.80 against 1.80 ms, 277.2 then 282.5 samples/s, which cost
/// its plan the 8x bound (docs/profile-format.md, "How the trials run").
const CPU_COST_NOISE: f64 = 0.03;

/// Stages 3 and 4 for a page-cache workload (the accelerator at `g` samples/s): memory-limited trials at
/// the calibration's cores `c` with the cache at [`CALIBRATION_FRACTIONS`] of the dataset, started cold and
/// measured over whole epochs once the cache is steady. The first trial's first epoch reads every sample
/// for the first time, so it is the cold epoch stage 3 needs (the storage rate, the bytes and CPU of a
/// miss), and no cold trial of its own is run (how closely the two agree: docs/architecture.md §4). The
/// steady epochs' hit ratios (from the storage they read) place the kernel's curve between LRU and a fixed
/// subset, and their CPU per sample shows what a miss costs under the limit (reclaim included).
pub(super) fn calibrate(
    run: &mut Runner,
    plan: &Plan,
    sweep: &mut Sweep,
    c: f64,
    g: f64,
    data: &mut Data,
) -> Result<(Fetch, Calibration), ProfileRunError> {
    let mut out = Calibration::none();
    if data.bytes == 0 {
        return Ok((Fetch::unmeasured(c, 0.0), out));
    }
    let mut fetch = Fetch::probe(c, data, plan.req.recorded.as_ref());
    let mut points = Vec::new();
    let mut ooms = 0;
    'fraction: for x in CALIBRATION_FRACTIONS {
        let (t, mem, cache) = loop {
            // The limit leaves at least this cache (the footprint is the safe bound for the limit);
            // the cache it really leaves is the limit less what stays resident, as the model
            // predicts it.
            let mem = sweep.footprint_at(c, spec_floor(plan.spec)) + (x * data.bytes as f64) as u64;
            let cache = mem.saturating_sub(sweep.resident_at(c, spec_floor(plan.spec)));
            let mut r = plan.constrained(c);
            r.mem_limit = Some(Bytes(mem));
            match run.trial(TrialRole::Calibration, Some(axis_gib(mem as f64)), r) {
                Ok(t) => break (t, mem, cache),
                // A whole epoch went by before a rate could be estimated: storage is far faster
                // than the pipeline.
                Err(ProfileRunError::Trial(TrialError::NoEstimate(_))) => continue 'fraction,
                Err(ProfileRunError::Trial(TrialError::OutOfMemory { limit, .. }))
                    if ooms < OOM_RETRIES =>
                {
                    ooms += 1;
                    sweep.learn_oom(limit.0);
                    run.warnings.push(format!(
                        "the workload was OOM-killed at {c} cores under {limit}, more than the cached \
                         trials' peaks said it needs: its footprint is now taken as {}, and the \
                         calibration trial ran again",
                        Bytes(sweep.footprint_at(c, spec_floor(plan.spec)))
                    ));
                }
                Err(e) => return Err(e),
            }
        };
        let mem_gib = axis_gib(mem as f64);
        // The first trial that ran gives the cold epoch (learning it records what storage it saw).
        if fetch.storage_seen.is_none() {
            recheck_cached(run, plan, sweep, &t, g)?;
            fetch.learn_first_epoch(plan, sweep, &t);
        }
        let hit = |read: f64| (1.0 - read / fetch.model.mean_sample_bytes).clamp(0.0, 1.0);
        out.epochs.extend(t.epochs.iter().filter_map(|e| {
            Some(EpochSeen {
                hit: hit(e.storage_read_bytes_per_sample?),
                samples_per_s: e.samples_per_s,
                cache_full: e.epoch > 0,
            })
        }));
        // Only whole epochs with the cache steady say what the cache keeps; a trial cut off by its
        // longest duration first (an epoch longer than that) measured the cold fill.
        if t.throughput.whole_epochs == 0 {
            continue;
        }
        let Some(read) = t.telemetry.storage_read_bytes_per_sample else {
            continue;
        };
        let h = hit(read);
        if let Some(cpu) = cpu_s_per_sample(&t) {
            out.cpu.push((h, sweep.at_reference_speed(&t, cpu)));
        }
        points.push(CalibrationPoint {
            cpus: c,
            memory_gib: mem_gib,
            cache_bytes: cache,
            measured: h,
            lru: data.sim.lru(cache),
            fixed_subset: minio_hit_ratio(cache as f64, data.bytes as f64),
            fitted: 0.0,
        });
    }
    if fetch.storage_seen.is_none() {
        fetch.no_cold_epoch();
    }
    fetch.time_hits(data);
    if points.is_empty() {
        out.fit = Some(HitCurveFit {
            family: HIT_CURVE_FAMILY.into(),
            active_list_scale: Some(1.0),
            fixed_subset_share: None,
            chosen_because: "the kernel's own active list: no calibration trial completed a whole \
                             epoch with the cache steady within its longest duration, so none measured \
                             what the cache keeps"
                .into(),
            points,
        });
        return Ok((fetch, out));
    }
    let scale = data.sim.fit_scale(
        &points
            .iter()
            .map(|p| (p.cache_bytes, p.measured))
            .collect::<Vec<_>>(),
    );
    for p in &mut points {
        p.fitted = data.sim.two_lists(p.cache_bytes, scale);
    }
    // Root-mean-square error of one candidate curve's hit ratios, point by point, against the measured.
    let rms = |predicted: &[f64]| {
        (points
            .iter()
            .zip(predicted)
            .map(|(p, h)| (h - p.measured).powi(2))
            .sum::<f64>()
            / points.len() as f64)
            .sqrt()
    };
    let of = |f: fn(&CalibrationPoint) -> f64| points.iter().map(f).collect::<Vec<_>>();
    let kernel: Vec<f64> = points
        .iter()
        .map(|p| data.sim.two_lists(p.cache_bytes, 1.0))
        .collect();
    let measured: Vec<String> = points
        .iter()
        .map(|p| {
            format!(
                "{:.3} at {:.0}% of the dataset (LRU {:.3}, fixed subset {:.3})",
                p.measured,
                100.0 * p.cache_bytes as f64 / data.bytes as f64,
                p.lru,
                p.fixed_subset
            )
        })
        .collect();
    let share = active_share(points[0].cache_bytes, scale);
    out.fit = Some(HitCurveFit {
        family: HIT_CURVE_FAMILY.into(),
        active_list_scale: Some(scale),
        fixed_subset_share: None,
        chosen_because: format!(
            "hit ratio measured by {} calibration trial(s): {}; the kernel's two lists with the active \
             list at {:.0}% of the cache ({:.2}x the kernel's ratio) fit with rms error {:.3}, against \
             {:.3} at the kernel's own ratio, {:.3} for LRU and {:.3} for a fixed subset",
            points.len(),
            measured.join("; "),
            100.0 * share,
            scale,
            rms(&of(|p| p.fitted)),
            rms(&kernel),
            rms(&of(|p| p.lru)),
            rms(&of(|p| p.fixed_subset)),
        ),
        points,
    });
    Ok((fetch, out))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_cpu_bound_cached_trial_is_measured_again() {
        // Image at one core: 394.8 samples/s against G 641.6, 2.51 ms a sample cached, 2.29 ms with most
        // samples missing.
        assert!(slowed_cached(394.8, 641.6, 2.51e-3, 2.29e-3));
        assert!(!slowed_cached(394.8, 641.6, 2.51e-3, 2.60e-3));
        // Text at the accelerator's rate: its loaders' CPU per sample is noise, nothing to re-measure.
        assert!(!slowed_cached(4260.7, 4260.8, 0.20e-3, 0.18e-3));
        // A miss that costs no CPU (no storage limit): a tie, or a difference within noise, is no sign.
        assert!(!slowed_cached(277.2, 406.8, 1.80e-3, 1.80e-3));
        assert!(!slowed_cached(277.2, 406.8, 1.80e-3, 1.76e-3));
    }
}
