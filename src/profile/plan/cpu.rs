//! Stage 1, the CPU axis: min(G, P(c)) measured with the dataset cached ("optimistic profiling",
//! docs/architecture.md §4), and the footprint each trial's peak memory gives beside its cache.

use super::runner::Runner;
use super::{base_request, cpu_s_per_sample, Plan, ProfileRunError};
use crate::measure::{CacheState, TrialResult};
use crate::profile::file::TrialRole;
use crate::stall::{CostPoint, CpuCurve, CpuPoint, FootprintPoint};

/// Added to a measured peak to make the footprint, bytes, or [`FOOTPRINT_SLACK_SHARE`] of the peak when
/// that is more. A peak is one run's: another run at other cores can need a little more (a few more
/// loader threads' stacks and buffers), and a limit at the bare peak then gets the workload OOM-killed
/// (seen: `text` needs 5.5 MiB at 1.25 cores, whose interpolated peak was 5.3 MB); a few MiB against
/// datasets of hundreds keeps the axis honest.
const FOOTPRINT_SLACK_BYTES: u64 = 8 << 20;
/// The slack of a large process, as a share of its peak: a Python training process of a gigabyte
/// varies by tens of MiB from run to run (its allocator, its loader workers' start-up).
const FOOTPRINT_SLACK_SHARE: f64 = 0.05;

/// A footprint from a measured peak, bytes (see [`FOOTPRINT_SLACK_BYTES`]).
fn footprint_of_peak(peak: u64) -> u64 {
    peak + FOOTPRINT_SLACK_BYTES.max((peak as f64 * FOOTPRINT_SLACK_SHARE) as u64)
}

/// The most memory a cached trial kept besides its page cache, bytes: with the dataset cached outside
/// its domain, any page cache charged to it is the job's own files (PyTorch's libraries, charged to the
/// first trial that loads them), which a memory limit reclaims like the dataset's. Trials journaled
/// before schema 1.6 have only their memory peak.
fn resident_peak(t: &TrialResult) -> Option<u64> {
    t.telemetry
        .resident_peak_bytes
        .or(t.telemetry.memory_peak_bytes)
}

/// What stays resident besides the cache at each core count, from the peaks `(cores, bytes)` in order of
/// cores: each peak, but never more than at more cores. A peak above the next core count's is a start-up
/// transient, not what a memory limit squeezes the cache around (seen: image peaked at 58 MiB at half a
/// core against 39 at one, and kept 40 resident at both under a limit; docs/profile-format.md).
fn resident_of_peaks(peaks: &[(f64, f64)]) -> Vec<FootprintPoint> {
    let mut out: Vec<FootprintPoint> = Vec::with_capacity(peaks.len());
    let mut least = f64::INFINITY;
    for &(cpus, bytes) in peaks.iter().rev() {
        least = least.min(bytes);
        out.push(FootprintPoint {
            cpus,
            bytes: least as u64,
        });
    }
    out.reverse();
    out
}

/// What the CPU sweep found.
pub(super) struct Sweep {
    /// Throughput at each measured core count.
    pub(super) curve: CpuCurve,
    /// CPU-seconds per sample at each measured core count.
    pub(super) cost: Vec<CostPoint>,
    /// The footprint at each measured core count, bytes (slack included).
    pub(super) footprint_points: Vec<FootprintPoint>,
    /// What stays resident besides the cache at each measured core count, bytes
    /// ([`resident_of_peaks`]).
    pub(super) resident_points: Vec<FootprintPoint>,
    /// The speed probe's mean on each trial's first core, operations per CPU-second, where read.
    pub(super) core_speed: Vec<(f64, f64)>,
    /// The first CPU trial, for the dataset it found.
    pub(super) first: TrialResult,
}

impl Sweep {
    /// The most memory any CPU trial used besides its cache, slack included, bytes.
    pub(super) fn footprint(&self) -> Option<u64> {
        self.footprint_points.iter().map(|p| p.bytes).max()
    }

    /// The footprint at `cpus` (interpolated between the swept core counts), bytes, never below the
    /// spec's `floor`.
    pub(super) fn footprint_at(&self, cpus: f64, floor: u64) -> u64 {
        let fallback = self.footprint().unwrap_or(floor);
        (crate::stall::footprint_at(&self.footprint_points, fallback, cpus) as u64).max(floor)
    }

    /// What stays resident besides the cache at `cpus` (interpolated), bytes: the cache a memory limit
    /// leaves is the limit less this; the footprint where none was measured.
    pub(super) fn resident_at(&self, cpus: f64, floor: u64) -> u64 {
        if self.resident_points.is_empty() {
            return self.footprint_at(cpus, floor);
        }
        crate::stall::footprint_at(&self.resident_points, 0, cpus) as u64
    }

    /// The speed the model's CPU stage was measured at: the median of the sweep's trials' speed probe
    /// readings, operations per CPU-second; `None` where none was read.
    pub(super) fn reference_speed(&self) -> Option<f64> {
        let mut s: Vec<f64> = self.core_speed.iter().map(|(_, s)| *s).collect();
        s.sort_by(f64::total_cmp);
        let n = s.len();
        match n {
            0 => None,
            _ if n % 2 == 1 => Some(s[n / 2]),
            _ => Some((s[n / 2 - 1] + s[n / 2]) / 2.0),
        }
    }

    /// `cpu_s` CPU-seconds per sample that `trial` measured, as the sweep's trial at `cpus` would have
    /// spent them. The cores' speed moves between trials (the speed probe read 444 to 527 million
    /// operations per CPU-second within one profile of `audio`), and a miss's cost is the difference
    /// between trials' costs per sample: unscaled, a slow spell during one trial reads as a miss cost
    /// (docs/profile-format.md, "The model behind the matrix"). Unscaled where either speed is unknown.
    pub(super) fn at_sweep_speed(&self, cpus: f64, trial: &TrialResult, cpu_s: f64) -> f64 {
        let theirs = trial
            .disturbance
            .as_ref()
            .and_then(|d| d.core_ops_per_cpu_s);
        let ours = self
            .core_speed
            .iter()
            .find(|(c, _)| *c == cpus)
            .map(|(_, s)| *s);
        match (theirs, ours) {
            (Some(t), Some(o)) if t > 0.0 && o > 0.0 => cpu_s * t / o,
            _ => cpu_s,
        }
    }
}

/// One cached trial at `cpus` cores; its throughput, samples per second.
fn measure_cached(run: &mut Runner, plan: &Plan, cpus: f64) -> Result<f64, ProfileRunError> {
    let mut r = base_request(plan.spec, cpus);
    r.cache_state = CacheState::Warm;
    Ok(run.trial(TrialRole::Cpu, None, r)?.throughput.samples_per_s)
}

/// Stage 1: min(G, P(c)) with the dataset cached. It starts at the most cores and the fewest, then
/// bisects every interval whose ends differ by more than the tolerance: where the curve is flat (past
/// the knee, or between equal points) monotonicity bounds every point in between.
pub(super) fn cpu_sweep(run: &mut Runner, plan: &Plan) -> Result<Sweep, ProfileRunError> {
    let axis = &plan.cpu_axis;
    let last = axis.len() - 1;
    let t_hi = measure_cached(run, plan, axis[last])?;
    if last > 0 {
        let t_lo = measure_cached(run, plan, axis[0])?;
        let mut stack = vec![(0usize, t_lo, last, t_hi)];
        while let Some((a, ta, b, tb)) = stack.pop() {
            if b - a < 2 || (tb - ta).abs() <= plan.req.refine_tolerance * tb.max(ta) {
                continue;
            }
            let target = (axis[a] + axis[b]) / 2.0;
            let mid = (a + 1..b)
                .min_by(|&x, &y| {
                    (axis[x] - target)
                        .abs()
                        .total_cmp(&(axis[y] - target).abs())
                })
                .expect("an index lies between");
            let tm = measure_cached(run, plan, axis[mid])?;
            stack.push((a, ta, mid, tm));
            stack.push((mid, tm, b, tb));
        }
    }
    Ok(summarize(run))
}

/// The cached trial at `cpus` cores measured again (the host slowed the first, see
/// [`super::calibrate::calibrate`]); the sweep then keeps the faster of the two.
pub(super) fn remeasure(
    run: &mut Runner,
    plan: &Plan,
    cpus: f64,
) -> Result<Sweep, ProfileRunError> {
    measure_cached(run, plan, cpus)?;
    Ok(summarize(run))
}

/// What the CPU trials so far found, from the fastest trial at each core count: on a shared host a
/// trial is slowed, never sped up, by what else runs.
fn summarize(run: &Runner) -> Sweep {
    let all: Vec<&TrialResult> = run.trials(TrialRole::Cpu).map(|t| &t.result).collect();
    let trials = fastest_per_core(
        &all,
        |t| t.allocation.cpus.0,
        |t| t.throughput.samples_per_s,
    );
    let by_cores = |f: &dyn Fn(&TrialResult) -> Option<f64>| -> Vec<(f64, f64)> {
        trials
            .iter()
            .filter_map(|t| Some((t.allocation.cpus.0, f(t)?)))
            .collect()
    };
    let peaks = by_cores(&|t| resident_peak(t).map(|b| b as f64));
    Sweep {
        curve: CpuCurve::new(
            by_cores(&|t| Some(t.throughput.samples_per_s))
                .into_iter()
                .map(|(cpus, samples_per_s)| CpuPoint {
                    cpus,
                    samples_per_s,
                })
                .collect(),
        ),
        cost: by_cores(&cpu_s_per_sample)
            .into_iter()
            .map(|(cpus, cpu_s_per_sample)| CostPoint {
                cpus,
                cpu_s_per_sample,
            })
            .collect(),
        footprint_points: peaks
            .iter()
            .map(|&(cpus, b)| FootprintPoint {
                cpus,
                bytes: footprint_of_peak(b as u64),
            })
            .collect(),
        resident_points: resident_of_peaks(&peaks),
        core_speed: by_cores(&|t| t.disturbance.as_ref()?.core_ops_per_cpu_s),
        first: all
            .first()
            .map(|t| (*t).clone())
            .expect("at least one CPU trial"),
    }
}

/// Of `items` measured at `cores` with throughput `rate`, the fastest at each core count, in order of
/// cores (the first of equals).
fn fastest_per_core<T: Copy>(
    items: &[T],
    cores: impl Fn(T) -> f64,
    rate: impl Fn(T) -> f64,
) -> Vec<T> {
    let mut out: Vec<T> = Vec::new();
    for &t in items {
        match out.iter_mut().find(|u| cores(**u) == cores(t)) {
            Some(u) if rate(*u) < rate(t) => *u = t,
            Some(_) => {}
            None => out.push(t),
        }
    }
    out.sort_by(|a, b| cores(*a).total_cmp(&cores(*b)));
    out
}

/// CPU-seconds per sample the sweep measured at exactly `cpus`.
pub(super) fn cost_at(sweep: &Sweep, cpus: f64) -> Option<f64> {
    sweep
        .cost
        .iter()
        .find(|p| p.cpus == cpus)
        .map(|p| p.cpu_s_per_sample)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_stays_resident_never_exceeds_what_more_cores_keep() {
        let r = resident_of_peaks(&[(0.5, 58.0), (1.0, 39.0), (1.5, 133.0), (2.0, 130.0)]);
        let bytes: Vec<u64> = r.iter().map(|p| p.bytes).collect();
        assert_eq!(bytes, [39, 39, 130, 130]);
        assert_eq!(r[2].cpus, 1.5);
    }

    #[test]
    fn a_core_count_measured_twice_keeps_its_faster_trial() {
        // (cores, samples/s): one core measured slow, then again.
        let trials = [
            (2.0, 641.6),
            (0.5, 229.5),
            (1.0, 394.8),
            (1.5, 636.0),
            (1.0, 529.7),
        ];
        let kept = fastest_per_core(&trials, |t| t.0, |t| t.1);
        assert_eq!(
            kept,
            [(0.5, 229.5), (1.0, 529.7), (1.5, 636.0), (2.0, 641.6)]
        );
        // A slower second run leaves the first standing.
        let kept = fastest_per_core(&[(1.0, 529.7), (1.0, 394.8)], |t| t.0, |t| t.1);
        assert_eq!(kept, [(1.0, 529.7)]);
    }

    #[test]
    fn the_footprint_slack_grows_with_a_large_process() {
        assert_eq!(footprint_of_peak(40 << 20), 48 << 20);
        let gib = 1u64 << 30;
        assert_eq!(footprint_of_peak(gib), gib + gib / 20);
    }
}
