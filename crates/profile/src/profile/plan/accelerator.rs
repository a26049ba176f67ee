//! Stage 2, the accelerator: its rate G from one synthetic trial, told apart from the cached CPU curve or
//! said not to be (docs/architecture.md §4).

use super::cpu::Sweep;
use super::runner::Runner;
use super::{base_request, Plan, ProfileRunError};
use crate::format::profile::CpuPoint;
use crate::format::profile::{AcceleratorFit, TrialRole};
use crate::format::trial::Estimate;

/// Stage 2: the accelerator alone, fed synthetic batches (a probed script's first batches replayed),
/// against the cached CPU sweep: the G the model uses, and whether the trial told it apart.
pub(super) fn accelerator(
    run: &mut Runner,
    plan: &Plan,
    sweep: &Sweep,
) -> Result<AcceleratorFit, ProfileRunError> {
    let mut synth = base_request(plan.spec, plan.c_max());
    synth.synthetic = true;
    let t = run.trial(TrialRole::Synthetic, None, synth)?;
    let replayed = t.probe.as_ref().is_some_and(|p| p.replay.is_some());
    let cached: Vec<&Estimate> = run
        .trials(TrialRole::Cpu)
        .map(|t| &t.result.throughput)
        .collect();
    let at_max = run
        .trials(TrialRole::Cpu)
        .filter(|t| t.result.allocation.cpus.0 == plan.c_max())
        .map(|t| t.result.throughput)
        .last()
        .expect("the sweep measures the most cores");
    let best = cached.iter().map(|e| e.samples_per_s).fold(0.0, f64::max);
    Ok(separate_accelerator(
        &t.throughput,
        &at_max,
        plan.c_max(),
        sweep.curve.points(),
        best,
        plan.req.refine_tolerance,
        replayed,
    ))
}

/// Whether a synthetic trial's rate is G: clearly above the cached rate at the most cores (their 95%
/// intervals apart), or level with it where the cached curve has already flattened (its point below the
/// most cores within `flat` of it). Otherwise the synthetic input may not have replaced loading, and G
/// is only known to be at least the best cached rate: the model then uses that, so the matrix is never
/// capped below a measured point.
fn separate_accelerator(
    synth: &Estimate,
    at_max: &Estimate,
    c_max: f64,
    curve: &[CpuPoint],
    best_cached: f64,
    flat: f64,
    replayed: bool,
) -> AcceleratorFit {
    let g = synth.samples_per_s;
    let t = at_max.samples_per_s;
    let apart = g - synth.ci95_half_width > t + at_max.ci95_half_width;
    let below = curve.iter().rev().find(|p| p.cpus < c_max);
    let level = (g - t).abs() <= synth.ci95_half_width + at_max.ci95_half_width + flat * t;
    let flattened = below.filter(|p| (t - p.samples_per_s).abs() <= flat * t);
    let how = if replayed {
        " (the probe replayed the script's first batches)"
    } else {
        ""
    };
    let (separated, because) = if apart {
        (
            true,
            format!(
                "the synthetic trial{how}, {g:.1} ± {:.1} samples/s, is clearly above the cached {t:.1} ± {:.1} at {c_max} cores",
                synth.ci95_half_width, at_max.ci95_half_width
            ),
        )
    } else if let (true, Some(p)) = (level, flattened) {
        (
            true,
            format!(
                "the synthetic trial{how}, {g:.1} samples/s, is level with the cached {t:.1} at {c_max} cores, where the CPU curve has flattened ({:.1} at {} cores): the pipeline already waits on the accelerator there",
                p.samples_per_s, p.cpus
            ),
        )
    } else {
        (
            false,
            format!(
                "G could not be separated: the synthetic trial{how}, {g:.1} ± {:.1} samples/s, is not clearly above the cached {t:.1} ± {:.1} at {c_max} cores while the CPU curve has not flattened there, so its input may not have replaced loading (a script that ignores SYNERGY_SYNTHETIC, run without the probe); G is taken as at least the best cached rate, {best_cached:.1}",
                synth.ci95_half_width, at_max.ci95_half_width
            ),
        )
    };
    AcceleratorFit {
        synthetic_samples_per_s: g,
        cached_best_samples_per_s: best_cached,
        separated,
        because,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn est(samples_per_s: f64, ci95_half_width: f64) -> Estimate {
        Estimate {
            samples_per_s,
            ci95_half_width,
            measured_steps: 100,
            measured_s: 10.0,
            warmup_s: 1.0,
            window_start_s: 1.0,
            whole_epochs: 0,
        }
    }

    fn curve(points: &[(f64, f64)]) -> Vec<CpuPoint> {
        points
            .iter()
            .map(|&(cpus, samples_per_s)| CpuPoint {
                cpus,
                samples_per_s,
            })
            .collect()
    }

    #[test]
    fn g_is_told_apart_only_when_the_synthetic_trial_shows_it() {
        // Clearly faster than the cached trial at the most cores.
        let rising = curve(&[(1.0, 50.0), (2.0, 80.0)]);
        let a = separate_accelerator(
            &est(100.0, 2.0),
            &est(80.0, 2.0),
            2.0,
            &rising,
            80.0,
            0.04,
            true,
        );
        assert!(a.separated, "{}", a.because);
        assert!(a.because.contains("replayed"), "{}", a.because);
        // Level with it where the curve has flattened: the pipeline waits on the accelerator.
        let flat = curve(&[(1.0, 400.0), (1.5, 474.0), (2.0, 474.2)]);
        let a = separate_accelerator(
            &est(474.2, 3.0),
            &est(474.2, 3.0),
            2.0,
            &flat,
            474.8,
            0.04,
            false,
        );
        assert!(a.separated, "{}", a.because);
        assert!(a.because.contains("flattened"), "{}", a.because);
        // Below it while the curve still rises: a synthetic mode the script ignored.
        let a = separate_accelerator(
            &est(13.8, 0.3),
            &est(16.0, 0.3),
            2.0,
            &rising,
            16.0,
            0.04,
            false,
        );
        assert!(!a.separated);
        assert!(
            a.because.contains("could not be separated"),
            "{}",
            a.because
        );
        assert_eq!(a.cached_best_samples_per_s, 16.0);
        // One swept point says nothing about flattening.
        let one = curve(&[(2.0, 80.0)]);
        let a = separate_accelerator(
            &est(81.0, 2.0),
            &est(80.0, 2.0),
            2.0,
            &one,
            80.0,
            0.04,
            true,
        );
        assert!(!a.separated, "{}", a.because);
    }
}
