//! The domain's readings over a trial turned into what it reports: telemetry over the measured window and
//! each complete epoch's figures.

use super::EpochStats;
use crate::format::trial::Estimate;
use crate::format::trial::{AppCacheCounts, Telemetry};
use crate::measure::contention::Reading;
use crate::measure::telemetry::{GpuSampler, Peaks};

/// Each complete epoch's throughput, CPU and storage reads: from the last step of the epoch before (the
/// first step, for the first epoch) to its own last step, with the domain's readings closest to those
/// moments (a reading is taken as each epoch begins).
pub(super) fn epoch_stats(
    epochs: &[(u64, f64, f64, f64, f64)],
    readings: &[Reading],
) -> Vec<EpochStats> {
    let complete = epochs.len().saturating_sub(1);
    (0..complete)
        .filter_map(|i| {
            let (epoch, first, last, all, first_step) = epochs[i];
            // From the epoch before's last step the whole epoch counts; from its own first step, all
            // but that step.
            let (start, samples) = if i == 0 {
                (first, all - first_step)
            } else {
                (epochs[i - 1].2, all)
            };
            let seconds = last - start;
            let (a, b) = (closest(readings, start)?, closest(readings, last)?);
            (seconds > 0.0 && samples > 0.0).then(|| EpochStats {
                epoch,
                samples,
                seconds,
                samples_per_s: samples / seconds,
                cpu_s_per_sample: (b.t_s > a.t_s)
                    .then(|| (b.domain.cpu_seconds - a.domain.cpu_seconds) / samples),
                storage_read_bytes_per_sample: match (
                    a.domain.storage_read_bytes,
                    b.domain.storage_read_bytes,
                ) {
                    (Some(x), Some(y)) if b.t_s > a.t_s => {
                        Some(y.saturating_sub(x) as f64 / samples)
                    }
                    _ => None,
                },
            })
        })
        .collect()
}

/// The reading taken closest to `t_s`.
pub(super) fn closest(readings: &[Reading], t_s: f64) -> Option<&Reading> {
    readings
        .iter()
        .min_by(|a, b| (a.t_s - t_s).abs().total_cmp(&(b.t_s - t_s).abs()))
}

/// Telemetry over the measured window, between the readings closest to its ends.
pub(super) fn summarize(
    window: Option<(&Reading, &Reading)>,
    estimate: &Estimate,
    readings: &[Reading],
    peaks: &Peaks,
    cache_steps: &[(f64, u64, u64)],
    gpu: Option<&GpuSampler>,
) -> Telemetry {
    let last = readings.last().map(|r| r.domain).unwrap_or_default();
    let (cpu_cores_used, storage_rate) = match window {
        Some((a, b)) => {
            let dt = b.t_s - a.t_s;
            let cores = (b.domain.cpu_seconds - a.domain.cpu_seconds) / dt;
            let rate = match (b.domain.storage_read_bytes, a.domain.storage_read_bytes) {
                (Some(b1), Some(b0)) => Some(b1.saturating_sub(b0) as f64 / dt),
                _ => None,
            };
            (Some(cores), rate)
        }
        None => (None, None),
    };
    let window_start = estimate.window_start_s;
    let app_cache = cache_steps.iter().any(|(_, h, m)| h + m > 0).then(|| {
        cache_steps
            .iter()
            .filter(|(t, _, _)| *t > window_start)
            .fold(AppCacheCounts::default(), |acc, (_, h, m)| AppCacheCounts {
                hits: acc.hits + h,
                misses: acc.misses + m,
            })
    });
    Telemetry {
        cpu_seconds: last.cpu_seconds,
        cpu_cores_used,
        storage_read_bytes: last.storage_read_bytes,
        storage_read_bytes_per_s: storage_rate,
        storage_read_bytes_per_sample: storage_rate
            .filter(|_| estimate.samples_per_s > 0.0)
            .map(|r| r / estimate.samples_per_s),
        page_cache_peak_bytes: peaks.page_cache_bytes,
        memory_peak_bytes: peaks.memory_bytes,
        resident_peak_bytes: peaks.resident_bytes,
        app_cache,
        gpu: gpu.map(|g| g.summary()),
    }
}
