//! Stage 6, validation: grid points the model derived rather than saw, measured under their real
//! constraint, and how far each model's predictions were from them (docs/architecture.md §4, §6).

use super::runner::Runner;
use super::{Plan, ProfileRunError};
use crate::format::profile::HitModel;
use crate::format::profile::{ErrorSummary, FittedModel, TrialRole, ValidationPoint};
use crate::measure::hostspeed::pipeline_speedup;
use crate::measure::{TrialError, TrialRequest};
use crate::units::{Bytes, GIB};
use std::time::Duration;

/// Stage 6: held-out grid points and, on request, the whole grid, under their real constraint (a memory
/// limit for the page cache, `SYNERGY_CACHE_BYTES` for an application cache), each after the cache is
/// steady, with every model's prediction beside the measurement. A held-out point that would take longer
/// than the budget leaves ([`ProfileRequest::budget_s`]) is not measured, and the profile says so.
///
/// [`ProfileRequest::budget_s`]: super::ProfileRequest::budget_s
pub(super) fn validate(
    run: &mut Runner,
    plan: &Plan,
    model: &FittedModel,
    memory_axis: &[f64],
    reference_speed: Option<f64>,
) -> Result<Vec<ValidationPoint>, ProfileRunError> {
    let picked = match &plan.req.held_out {
        Some(points) => points.clone(),
        None => held_out(&plan.cpu_axis, memory_axis, plan.req.validate),
    };
    let mut points: Vec<(TrialRole, f64, f64)> = picked
        .into_iter()
        .map(|(c, mg)| (TrialRole::Validation, c, mg))
        .collect();
    let held = points.len();
    let model_s = run.started.elapsed().as_secs_f64();
    // Per point not measured: cores, GiB, the seconds it would take and the seconds that were left.
    let mut left_out: Vec<(f64, f64, f64, f64)> = Vec::new();
    if plan.req.exhaustive {
        for &c in &plan.cpu_axis {
            for &mg in memory_axis {
                points.push((TrialRole::Exhaustive, c, mg));
            }
        }
    }
    // Each point's trial, and how long it should take (nothing where it is journaled).
    let trials: Vec<(TrialRole, f64, f64, TrialRequest, f64)> = points
        .into_iter()
        .map(|(role, c, mg)| {
            let mut r = plan.constrained(c);
            let mem = mg * GIB;
            match plan.hit_model {
                HitModel::Minio => {
                    r.cache_bytes = Some(Bytes(model.stall.cache_bytes(c, mem) as u64))
                }
                HitModel::PageCache => r.mem_limit = Some(Bytes(mem as u64)),
            }
            r.estimator.warmup_epochs = plan.warmup_epochs_at(model, c, mem);
            let need = if run.is_journaled(role, Some(mg), &r) {
                0.0
            } else {
                expected_trial_s(model, c, mem, &r) + run.overhead_s()
            };
            (role, c, mg, r, need)
        })
        .collect();
    let mut to_go: f64 = trials.iter().map(|t| t.4).sum();
    let mut validation = Vec::new();
    for (role, c, mg, r, need) in trials {
        let mem = mg * GIB;
        // What is left of this stage, from the model's rates rather than the plan's average trial
        // (a held-out trial runs four epochs where a cached one runs a few seconds).
        run.bar.set_prefix(format!(
            "(about {} to go)",
            humantime::format_duration(Duration::from_secs(to_go.round() as u64))
        ));
        to_go -= need;
        if let (TrialRole::Validation, Some(budget)) = (role, plan.req.budget_s) {
            let left = budget - run.started.elapsed().as_secs_f64();
            if need > left {
                left_out.push((c, mg, need, left.max(0.0)));
                continue;
            }
        }
        let t = match run.trial(role, Some(mg), r) {
            Ok(t) => t,
            // The point's cell is one the job cannot run in: said, and the rest still validated
            // rather than every trial so far lost.
            Err(ProfileRunError::Trial(TrialError::OutOfMemory { limit, .. })) => {
                run.warnings.push(format!(
                    "the held-out point at {c} cores and {mg} GiB was OOM-killed under {limit}: the \
                     workload needs more than the footprint the model holds there ({}), so the \
                     matrix's cells at {mg} GiB and less promise what it cannot run in; profile \
                     again with a memory axis above {limit} (--mem)",
                    Bytes(model.stall.footprint_at(c) as u64)
                ));
                continue;
            }
            Err(e) => return Err(e),
        };
        let predicted = |hm| model.predict(c, mem, Some(hm)).samples_per_s;
        let core_speed = t
            .disturbance
            .as_ref()
            .and_then(|d| d.core_ops_per_cpu_s)
            .zip(reference_speed)
            .filter(|(s, r)| *s > 0.0 && *r > 0.0)
            .map(|(s, r)| s / r);
        validation.push(ValidationPoint {
            cpus: c,
            memory_gib: mg,
            measured: t.throughput.samples_per_s,
            measured_ci95: t.throughput.ci95_half_width,
            predicted_minio: predicted(HitModel::Minio),
            predicted_page_cache: predicted(HitModel::PageCache),
            predicted_ds_analyzer: Some(model.predict_ds_analyzer(c, mem).samples_per_s),
            core_speed,
            predicted_at_core_speed: core_speed.map(|k| {
                model
                    .at_core_speed(pipeline_speedup(k))
                    .predict(c, mem, None)
                    .samples_per_s
            }),
            role,
        });
    }
    if let (Some(budget), Some(&(c, mg, need, left))) = (plan.req.budget_s, left_out.first()) {
        run.warnings.push(format!(
            "{} of the {held} held-out points were not measured, to keep this profile within its \
             budget of {} (--budget): the first, at {c} cores and {mg} GiB, would have taken about \
             {need:.0} s with {left:.0} s left, the model's trials having taken {model_s:.0} s; give \
             a longer --budget (or --budget none) to measure them",
            left_out.len(),
            humantime::format_duration(Duration::from_secs(budget.round() as u64)),
        ));
    }
    Ok(validation)
}

/// About how long a memory-limited trial at `cpus` cores and `memory_bytes` runs, seconds: the epochs
/// it waits out and the one it measures, at the rate the model predicts there, no longer than the
/// trial's own cap (`req`).
fn expected_trial_s(model: &FittedModel, cpus: f64, memory_bytes: f64, req: &TrialRequest) -> f64 {
    let cap = req.estimator.max_total_s;
    let stall = &model.stall;
    let rate = model.predict(cpus, memory_bytes, None).samples_per_s;
    if stall.fetch.mean_sample_bytes <= 0.0 || rate <= 0.0 {
        return cap;
    }
    let epoch_s = stall.dataset_bytes as f64 / stall.fetch.mean_sample_bytes / rate;
    ((req.estimator.warmup_epochs + 1) as f64 * epoch_s).min(cap)
}

/// `n` grid points spread over the grid, leaving out the column the CPU sweep measured (the last,
/// where the whole dataset is cached), so they test what the model derived rather than what it saw.
/// The picks step evenly through the core counts and, in a shuffled order, through the memory columns,
/// so each pick differs from the others in both axes; picking every k-th cell of the grid instead lands
/// on one or two rows whenever k is a multiple of the row count (seen: the shipped profiles' four
/// points all at 1 and 1.25 cores of 0.25-2).
pub fn held_out(cpus: &[f64], memory_gib: &[f64], n: usize) -> Vec<(f64, f64)> {
    let cols = if memory_gib.len() > 1 {
        &memory_gib[..memory_gib.len() - 1]
    } else {
        memory_gib
    };
    if n == 0 || cols.is_empty() || cpus.is_empty() {
        return Vec::new();
    }
    if n >= cpus.len() * cols.len() {
        return cols
            .iter()
            .flat_map(|&m| cpus.iter().map(move |&c| (c, m)))
            .collect();
    }
    // A stride near half of n and coprime with it walks the columns in an order unrelated to the rows'.
    let stride = (2..=n.min(n.div_ceil(2) + 1))
        .rev()
        .find(|&s| gcd(s, n) == 1)
        .unwrap_or(1);
    let at = |k: usize, len: usize| ((k as f64 + 0.5) * len as f64 / n as f64) as usize;
    let mut picked: Vec<(f64, f64)> = Vec::with_capacity(n);
    for k in 0..n {
        let cell = (
            cpus[at(k, cpus.len())],
            cols[at(k * stride % n, cols.len())],
        );
        if !picked.contains(&cell) {
            picked.push(cell);
        }
    }
    picked
}

fn gcd(a: usize, b: usize) -> usize {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

/// Which predictions of the validation points an [`ErrorSummary`] is of.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Predictor {
    /// This project's model with hit model `m`.
    Ours(HitModel),
    /// The published DS-Analyzer model.
    DsAnalyzer,
    /// This project's model at each point's core speed.
    AtCoreSpeed,
}

/// The validation's error summaries: this project's model under either hit model, and DS-Analyzer's and
/// ours at each point's core speed under the workload's `model`.
pub(super) fn summaries(points: &[ValidationPoint], model: HitModel) -> Vec<ErrorSummary> {
    [HitModel::Minio, HitModel::PageCache]
        .into_iter()
        .filter_map(|hm| summarize(points, hm, Predictor::Ours(hm)))
        .chain(summarize(points, model, Predictor::DsAnalyzer))
        .chain(summarize(points, model, Predictor::AtCoreSpeed))
        .collect()
}

/// Errors of one predictor over the validation points; `model` is the workload's hit model.
fn summarize(
    points: &[ValidationPoint],
    model: HitModel,
    predictor: Predictor,
) -> Option<ErrorSummary> {
    let mut errs: Vec<f64> = points
        .iter()
        .filter_map(|p| match predictor {
            Predictor::Ours(m) => Some(p.error(m)),
            Predictor::DsAnalyzer => p.predicted_ds_analyzer.map(|v| p.error_of(v)),
            Predictor::AtCoreSpeed => p.predicted_at_core_speed.map(|v| p.error_of(v)),
        })
        .collect();
    let model = match predictor {
        Predictor::Ours(m) => m,
        _ => model,
    };
    if errs.is_empty() {
        return None;
    }
    errs.sort_by(f64::total_cmp);
    let n = errs.len();
    let median = if n % 2 == 1 {
        errs[n / 2]
    } else {
        (errs[n / 2 - 1] + errs[n / 2]) / 2.0
    };
    Some(ErrorSummary {
        hit_model: model,
        ds_analyzer: predictor == Predictor::DsAnalyzer,
        at_core_speed: predictor == Predictor::AtCoreSpeed,
        points: n,
        median_error: median,
        mean_error: errs.iter().sum::<f64>() / n as f64,
        max_error: errs[n - 1],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn held_out_points_avoid_the_swept_column_and_spread() {
        let cpus = [0.5, 1.0, 1.5, 2.0];
        let mem = [1.0, 2.0, 3.0];
        let pts = held_out(&cpus, &mem, 4);
        assert_eq!(pts.len(), 4);
        assert!(pts.iter().all(|(_, m)| *m < 3.0));
        let distinct_cpus: std::collections::BTreeSet<_> =
            pts.iter().map(|(c, _)| (c * 4.0) as i64).collect();
        assert!(distinct_cpus.len() >= 3, "{pts:?}");
        assert_eq!(held_out(&cpus, &mem, 100).len(), 8);
        assert!(held_out(&cpus, &mem, 0).is_empty());
    }

    #[test]
    fn held_out_points_cover_the_rows_when_the_grid_is_a_multiple_of_them() {
        // The shipped profiles' grid: 8 core counts, 4 held-out columns, 4 points.
        let cpus = [0.25, 0.5, 0.75, 1.0, 1.25, 1.5, 1.75, 2.0];
        let mem = [0.1, 0.2, 0.3, 0.4, 0.5];
        let pts = held_out(&cpus, &mem, 4);
        let rows: Vec<f64> = pts.iter().map(|p| p.0).collect();
        assert_eq!(rows, [0.5, 1.0, 1.5, 2.0], "{pts:?}");
        let cols: std::collections::BTreeSet<_> = pts.iter().map(|p| (p.1 * 10.0) as i64).collect();
        assert_eq!(cols.len(), 4, "{pts:?}");
        // The H200 profile's: 5 core counts, 4 columns, 2 and 4 points.
        let cpus = [1.0, 2.0, 4.0, 8.0, 16.0];
        let two = held_out(&cpus, &mem, 2);
        assert!(two[0].0 != two[1].0 && two[0].1 != two[1].1, "{two:?}");
        let four = held_out(&cpus, &mem, 4);
        let rows: std::collections::BTreeSet<_> = four.iter().map(|p| p.0 as i64).collect();
        assert_eq!((four.len(), rows.len()), (4, 4), "{four:?}");
    }
}
