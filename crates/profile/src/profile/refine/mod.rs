//! Refinement: a profile learns from what real runs observed (docs/profile-format.md, "Refinement";
//! docs/architecture.md §4). Observations of a run ([`crate::format::observation`]) are pooled per allocation
//! and become trials of their own role (`observed`); the fitted model is then moved to them, never
//! re-fitted from nothing, and the matrix, per-GPU view and demand are rebuilt from it with
//! [`matrix::build`], as profiling builds them:
//!
//! - **the CPU curve** min(G, P(c)): where a job ran with memory to spare, what it observed at c cores
//!   is the curve's point at c; between and beyond observed core counts the measured points move by the
//!   ratio observed / profiled at the nearest observed ones (a host that is slower, or faster, than the
//!   one that made the profile), and the CPU-seconds a sample costs move inversely with it. G rises to
//!   an observed rate above it. Where the profile found the job accelerator-bound but the run saw it
//!   well below G using all its cores (the profile is another workload's), the curve above that core
//!   count scales with cores from the observation instead. At core counts where no observation ran
//!   with memory to spare, the memory-limited ones give the ratio (the miss cost taken as profiled);
//! - **the miss cost**: where both kinds were observed at one core count, the CPU-seconds a miss costs
//!   are searched (golden section) so that the model meets the memory-limited observations there, once
//!   the curve is moved;
//! - every column is kept non-decreasing in cores ([`matrix::make_monotone_in_cores`]).
//!
//! Each cell records where its number comes from ([`CellSource`]). Disturbed observations are left out.

use super::matrix;
use crate::error::InputError;
use crate::format::observation::Observation;
use crate::format::profile::{rel_error, MissCostRefit, RefinedPoint, Refinement, SpeedRatio};
use crate::format::profile::{CellSource, FittedModel, Profile, ProfileTrial, TrialRole, SCHEMA};
use crate::format::profile::{CpuCurve, CpuPoint};
use crate::format::trial::CacheState;
use crate::format::trial::Telemetry;
use crate::format::trial::{Estimate, StopReason};
use crate::format::trial::{IsolationReport, TrialAllocation, TrialResult, TRIAL_SCHEMA};
use crate::stall::LIMIT_SLACK;
use crate::units::{Cores, GIB};

/// Allocations whose cores differ by less than this are one.
const SAME_CORES: f64 = 0.01;
/// Memory-limited allocations whose memory differs by less than this fraction are one.
const SAME_MEMORY: f64 = 0.05;
/// A rate at or above this fraction of G is accelerator-bound; an observed one below it, of a job that
/// used its cores ([`USED_ITS_CORES`]), was CPU-bound.
const NEAR_G: f64 = 0.95;
/// A job that used at least this fraction of its granted cores was short of CPU.
const USED_ITS_CORES: f64 = 0.85;
/// Golden-section steps of the miss-cost search (the interval shrinks to 0.618^60 of its width).
const SEARCH_STEPS: usize = 60;

/// Observations pooled at one allocation.
#[derive(Debug, Clone)]
struct Pool {
    cpus: f64,
    memory_gib: f64,
    limited: bool,
    rate: f64,
    ci95: f64,
    measured_s: f64,
    steps: u64,
    wall_s: f64,
    /// Sum over observations with CPU readings of (cores used / cores granted) x measured seconds.
    busy_s: f64,
    /// The measured seconds of those observations.
    busy_weight_s: f64,
    n: usize,
    first: Option<Observation>,
}

/// What one observation (or an earlier observed trial) saw at one allocation.
#[derive(Debug, Clone, Copy)]
struct Seen {
    cpus: f64,
    memory_gib: f64,
    rate: f64,
    ci95: f64,
    measured_s: f64,
    steps: u64,
    wall_s: f64,
    /// Cores used over cores granted, where the run read its domain's CPU time.
    busy: Option<f64>,
}

impl Seen {
    fn of(o: &Observation) -> Seen {
        Seen {
            cpus: o.cpus,
            memory_gib: o.memory_gib,
            rate: o.throughput.samples_per_s,
            ci95: o.throughput.ci95_half_width,
            measured_s: o.throughput.measured_s,
            steps: o.throughput.measured_steps,
            wall_s: o.end_s - o.start_s,
            busy: o
                .disturbance
                .as_ref()
                .filter(|d| d.granted_cores > 0.0)
                .map(|d| d.got_cores / d.granted_cores),
        }
    }
}

fn limited(model: &FittedModel, cpus: f64, memory_gib: f64) -> bool {
    let d = model.stall.dataset_bytes as f64;
    d > 0.0 && model.stall.cache_bytes(cpus, memory_gib * GIB) < LIMIT_SLACK * d
}

impl Pool {
    fn same(&self, cpus: f64, memory_gib: f64, limited: bool) -> bool {
        (self.cpus - cpus).abs() < SAME_CORES
            && self.limited == limited
            && (!limited || (self.memory_gib - memory_gib).abs() < SAME_MEMORY * memory_gib)
    }

    /// Adds what `seen` measured: the pool is total samples over total time.
    fn add(&mut self, seen: &Seen) {
        let t = self.measured_s + seen.measured_s;
        let w_old = self.measured_s / t;
        let w_new = seen.measured_s / t;
        self.rate = w_old * self.rate + w_new * seen.rate;
        self.ci95 = ((w_old * self.ci95).powi(2) + (w_new * seen.ci95).powi(2)).sqrt();
        self.measured_s = t;
        self.steps += seen.steps;
        self.wall_s += seen.wall_s;
        if let Some(b) = seen.busy {
            self.busy_s += b * seen.measured_s;
            self.busy_weight_s += seen.measured_s;
        }
        self.n += 1;
    }

    /// Whether the job used (nearly) all the cores it was granted here; `None` without CPU readings.
    fn used_its_cores(&self) -> Option<bool> {
        (self.busy_weight_s > 0.0).then(|| self.busy_s / self.busy_weight_s >= USED_ITS_CORES)
    }

    /// The pool as an `observed` trial of the profile.
    fn trial(&self) -> ProfileTrial {
        let o = self.first.as_ref();
        ProfileTrial {
            role: TrialRole::Observed,
            memory_gib: Some(self.memory_gib),
            attempts: self.n as u32,
            earlier_runs_s: 0.0,
            result: TrialResult {
                schema: TRIAL_SCHEMA.into(),
                workload: o.map(|o| o.workload.clone()).unwrap_or_default(),
                spec: o
                    .map(|o| format!("job `{}` of a run, profile {}", o.job, o.profile))
                    .unwrap_or_default(),
                allocation: TrialAllocation {
                    cpus: Cores(self.cpus),
                    cpu_list: o.map(|o| o.cores.clone()).unwrap_or_default(),
                    mem_limit_bytes: Some((self.memory_gib * GIB) as u64),
                    cache_bytes: None,
                    storage_limit_bytes_per_s: None,
                    cache_state: CacheState::AsIs,
                    synthetic: false,
                    launched_at_cpus: None,
                },
                throughput: Estimate {
                    samples_per_s: self.rate,
                    ci95_half_width: self.ci95,
                    measured_steps: self.steps,
                    measured_s: self.measured_s,
                    warmup_s: 0.0,
                    window_start_s: 0.0,
                    whole_epochs: 0,
                },
                stop_reason: StopReason::RoundEnded,
                steps: self.steps,
                samples: self.rate * self.measured_s,
                duration_s: self.wall_s,
                isolation: IsolationReport {
                    backend: o
                        .map(|o| o.isolation)
                        .unwrap_or(crate::format::trial::IsolationKind::CgroupV2),
                    chosen_because: "the run's own domain for the job".into(),
                    setup_ms: 0.0,
                    teardown_ms: 0.0,
                },
                dataset: None,
                telemetry: Telemetry::default(),
                disturbance: None,
                epochs: Vec::new(),
                malformed_lines: 0,
                probe: None,
            },
        }
    }
}

/// Pools what `seen` measured into `pools`.
fn pool_into(pools: &mut Vec<Pool>, model: &FittedModel, seen: &Seen, first: Option<&Observation>) {
    let (cpus, memory_gib) = (seen.cpus, seen.memory_gib);
    let lim = limited(model, cpus, memory_gib);
    match pools.iter_mut().find(|p| p.same(cpus, memory_gib, lim)) {
        Some(p) => {
            p.add(seen);
            // A pool with memory to spare stands for every memory above the cache's need: the largest.
            if !lim {
                p.memory_gib = p.memory_gib.max(memory_gib);
            }
        }
        None => {
            let mut p = Pool {
                cpus,
                memory_gib,
                limited: lim,
                rate: 0.0,
                ci95: 0.0,
                measured_s: 0.0,
                steps: 0,
                wall_s: 0.0,
                busy_s: 0.0,
                busy_weight_s: 0.0,
                n: 0,
                first: first.cloned(),
            };
            p.add(seen);
            pools.push(p);
        }
    }
}

/// Linear interpolation of `(x, y)` points sorted by x at `x`, flat outside.
fn interp(points: &[(f64, f64)], x: f64) -> f64 {
    match (points.first(), points.last()) {
        (Some(f), _) if x <= f.0 => f.1,
        (_, Some(l)) if x >= l.0 => l.1,
        (Some(_), Some(_)) => {
            let i = points.windows(2).position(|w| x <= w[1].0).unwrap_or(0);
            let (a, b) = (points[i], points[i + 1]);
            a.1 + (x - a.0) / (b.0 - a.0) * (b.1 - a.1)
        }
        _ => 1.0,
    }
}

/// The observations of a profile's workload that refine it, and how many were left out and why.
struct Picked<'a> {
    /// Observations of the workload, at its GPU count, undisturbed (unless disturbed ones are included),
    /// that made progress.
    usable: Vec<&'a Observation>,
    /// Observations of the workload in all.
    of_workload: usize,
    /// Of those, disturbed.
    disturbed: usize,
    /// Of those not left out as disturbed, at another GPU count.
    other_gpus: usize,
}

/// Picks the observations of `profile`'s workload that refine it; none is an error naming the logs.
fn pick<'a>(
    profile: &Profile,
    observations: &'a [Observation],
    from: &[String],
    include_disturbed: bool,
) -> Result<Picked<'a>, InputError> {
    let name = &profile.workload.name;
    let mine: Vec<&Observation> = observations
        .iter()
        .filter(|o| &o.profile_workload == name)
        .collect();
    let left_out = |o: &Observation| o.disturbed && !include_disturbed;
    let disturbed = mine.iter().filter(|o| o.disturbed).count();
    let other_gpus = mine
        .iter()
        .filter(|o| !left_out(o) && o.gpus != profile.workload.gpus)
        .count();
    let usable: Vec<&Observation> = mine
        .iter()
        .copied()
        .filter(|o| {
            !left_out(o) && o.gpus == profile.workload.gpus && o.throughput.samples_per_s > 0.0
        })
        .collect();
    if usable.is_empty() {
        return Err(InputError::new(
            from.join(", "),
            format!(
                "holds no undisturbed observation of `{name}` at its {} GPU(s) ({} observation(s) of it, {disturbed} disturbed, {other_gpus} at other GPU counts)",
                profile.workload.gpus,
                mine.len()
            ),
        ));
    }
    Ok(Picked {
        usable,
        of_workload: mine.len(),
        disturbed,
        other_gpus,
    })
}

/// The allocations a refinement fits to.
struct Pooled {
    /// The new observations, pooled per allocation.
    pools: Vec<Pool>,
    /// The profile's trials that stay: every measured one, and each observed one no new pool replaces.
    kept: Vec<ProfileTrial>,
    /// Every pool, earlier observed trials' and new, by cores then memory.
    all: Vec<Pool>,
}

/// Pools `usable` per allocation beside the profile's earlier observed trials: an earlier one is replaced
/// where a new observation lands on its allocation.
fn pooled(profile: &Profile, old_model: &FittedModel, usable: &[&Observation]) -> Pooled {
    let mut pools: Vec<Pool> = Vec::new();
    for o in usable {
        pool_into(&mut pools, old_model, &Seen::of(o), Some(o));
    }
    let mut kept: Vec<ProfileTrial> = Vec::new();
    let mut earlier: Vec<Pool> = Vec::new();
    for t in &profile.trials {
        if t.role != TrialRole::Observed {
            kept.push(t.clone());
            continue;
        }
        let c = t.result.allocation.cpus.0;
        let m = t
            .memory_gib
            .unwrap_or(t.result.allocation.mem_limit_bytes.unwrap_or(0) as f64 / GIB);
        let lim = limited(old_model, c, m);
        if pools.iter().any(|p| p.same(c, m, lim)) {
            continue;
        }
        let e = &t.result.throughput;
        let seen = Seen {
            cpus: c,
            memory_gib: m,
            rate: e.samples_per_s,
            ci95: e.ci95_half_width,
            measured_s: e.measured_s,
            steps: e.measured_steps,
            wall_s: t.result.duration_s,
            busy: None,
        };
        pool_into(&mut earlier, old_model, &seen, None);
        if let Some(p) = earlier.last_mut() {
            p.n = t.attempts as usize;
            p.first = None;
        }
        kept.push(t.clone());
    }
    let mut all: Vec<Pool> = earlier.into_iter().chain(pools.iter().cloned()).collect();
    all.sort_by(|a, b| {
        a.cpus
            .total_cmp(&b.cpus)
            .then(a.memory_gib.total_cmp(&b.memory_gib))
    });
    Pooled { pools, kept, all }
}

/// What the observations moved: the model, the speed ratio at each observed core count, the miss cost's
/// search, and why, in words.
struct Moved {
    model: FittedModel,
    ratios: Vec<(f64, f64)>,
    miss_cost: Option<MissCostRefit>,
    because: Vec<String>,
}

/// The speed a run observed against the profile, by core count.
struct Ratios {
    /// (cores, observed / predicted), sorted by cores, one per core count.
    all: Vec<(f64, f64)>,
    /// (cores, ratio, memory) of the memory-limited pools that set the ratio at their cores, where no
    /// observation had memory to spare.
    limited: Vec<(f64, f64, f64)>,
}

/// The ratios of the pooled allocations `all` to `old_model`'s predictions. Where a job ran with memory
/// to spare, its rate against the cached curve is the host's speed there. At core counts where it only
/// ran memory-limited, the rate against the model's prediction at that memory is (the miss cost taken as
/// profiled): leaving those out would let a ratio observed at other cores stand for them, and a job seen
/// CPU-bound at a quarter of a core would be predicted there at what it did at one.
fn speed_ratios(old_model: &FittedModel, all: &[Pool]) -> Ratios {
    let cached_old = |c: f64| old_model.stall.cpu.at(c).max(1e-9);
    let has_unlimited_at = |c: f64| {
        all.iter()
            .any(|u| !u.limited && (u.cpus - c).abs() < SAME_CORES)
    };
    let mut ratios: Vec<(f64, f64)> = all
        .iter()
        .filter(|p| !p.limited)
        .map(|p| (p.cpus, p.rate / cached_old(p.cpus)))
        .collect();
    let mut limited: Vec<(f64, f64, f64)> = all
        .iter()
        .filter(|p| p.limited && !has_unlimited_at(p.cpus))
        .map(|p| {
            let before = old_model.predict(p.cpus, p.memory_gib * GIB, None);
            (
                p.cpus,
                p.rate / before.samples_per_s.max(1e-9),
                p.memory_gib,
            )
        })
        .collect();
    // At one core count, the pool with the most memory (the least miss cost taken on trust) speaks.
    limited.sort_by(|a, b| a.0.total_cmp(&b.0).then(b.2.total_cmp(&a.2)));
    limited.dedup_by(|later, earlier| (later.0 - earlier.0).abs() < SAME_CORES);
    ratios.extend(limited.iter().map(|&(c, r, _)| (c, r)));
    ratios.sort_by(|a, b| a.0.total_cmp(&b.0));
    ratios.dedup_by(|later, earlier| (later.0 - earlier.0).abs() < SAME_CORES);
    Ratios {
        all: ratios,
        limited,
    }
}

/// The CPU curve's points moved by the nearest observed ratios, with the observed points as they are,
/// and the (cores, observed cores, observed rate) where the curve now scales with cores from an
/// observation instead.
///
/// Where the profile found the job accelerator-bound (its point at G) above a core count at which the run
/// saw it CPU-bound (well below G, every granted core used), the profile says nothing of what the CPU
/// alone would do there, and the scaled point would keep the observed rate flat to every core count: a
/// job given a wrong, CPU-light profile would never be offered more cores. There the curve scales with
/// cores from that observation (the model's P = c / CPU-seconds per sample).
fn moved_points(
    old_model: &FittedModel,
    all: &[Pool],
    ratios: &Ratios,
    g_new: f64,
) -> (Vec<CpuPoint>, Vec<(f64, f64, f64)>) {
    let g_old = old_model.stall.accelerator_samples_per_s;
    let mut scaled_from = Vec::new();
    let mut points: Vec<CpuPoint> = old_model
        .stall
        .cpu
        .points()
        .iter()
        .map(|p| {
            let moved = p.samples_per_s * interp(&ratios.all, p.cpus);
            let below = all
                .iter()
                .filter(|o| o.cpus < p.cpus - SAME_CORES)
                .max_by(|a, b| a.cpus.total_cmp(&b.cpus).then(b.limited.cmp(&a.limited)));
            let samples_per_s = match below {
                // A job at G on a slower host is also below the profile's G, but leaves cores idle
                // (the accelerator's rate is a wait, not work): only one that used its cores was
                // short of them. A memory-limited pool counts too: its misses cost CPU as well, so
                // the curve from it is, if anything, low.
                Some(o)
                    if p.samples_per_s >= NEAR_G * g_old
                        && old_model
                            .predict(o.cpus, o.memory_gib * GIB, None)
                            .samples_per_s
                            >= NEAR_G * g_old
                        && o.rate < NEAR_G * g_new
                        && o.used_its_cores() == Some(true) =>
                {
                    let linear = o.rate * p.cpus / o.cpus;
                    if linear > moved {
                        scaled_from.push((p.cpus, o.cpus, o.rate));
                    }
                    moved.max(linear)
                }
                _ => moved,
            };
            CpuPoint {
                cpus: p.cpus,
                samples_per_s,
            }
        })
        .collect();
    points.extend(all.iter().filter(|p| !p.limited).map(|p| CpuPoint {
        cpus: p.cpus,
        samples_per_s: p.rate,
    }));
    // A memory-limited pool's cores get the cached curve its ratio implies, so the model meets it there.
    points.extend(ratios.limited.iter().map(|&(c, r, _)| CpuPoint {
        cpus: c,
        samples_per_s: old_model.stall.cpu.at(c).max(1e-9) * r,
    }));
    (points, scaled_from)
}

/// Moves `old_model` to the pooled allocations `all`: the CPU curve to the observed speed at each core
/// count (observed points as they are), G up to the fastest rate seen, and the miss cost searched again
/// where a core count was observed both memory-limited and not.
fn moved(old_model: &FittedModel, all: &[Pool]) -> Moved {
    let mut because = Vec::new();
    let mut model = old_model.clone();
    let ratios = speed_ratios(old_model, all);
    if !ratios.limited.is_empty() {
        let cores: Vec<String> = ratios
            .limited
            .iter()
            .map(|&(c, _, _)| format!("{c}"))
            .collect();
        because.push(format!(
            "at {} cores no observation had memory to spare: the memory-limited ones set the CPU curve's speed there, the miss cost taken as profiled",
            cores.join(", ")
        ));
    }
    // Nothing runs faster than its accelerator, memory-limited or not.
    let best_seen = all.iter().map(|p| p.rate).fold(0.0, f64::max);
    let g_new = old_model.stall.accelerator_samples_per_s.max(best_seen);
    let (points, scaled_from) = moved_points(old_model, all, &ratios, g_new);
    model.stall.cpu = CpuCurve::new(points);
    if best_seen > model.stall.accelerator_samples_per_s {
        because.push(format!(
            "G rose from {:.1} to {best_seen:.1} samples/s: a run observed more",
            model.stall.accelerator_samples_per_s
        ));
        model.stall.accelerator_samples_per_s = best_seen;
    }
    if let Some(mc) = model.stall.miss_cost.as_mut() {
        for p in &mut mc.cpu_s_per_sample {
            p.cpu_s_per_sample = match scaled_from
                .iter()
                .find(|s| (s.0 - p.cpus).abs() < SAME_CORES)
            {
                // What a sample cost where the run saw the job CPU-bound.
                Some(&(_, c, rate)) => c / rate.max(1e-9),
                None => p.cpu_s_per_sample / interp(&ratios.all, p.cpus).max(1e-9),
            };
        }
    }
    let mut extrapolated_from: Vec<(f64, f64)> =
        scaled_from.iter().map(|&(_, c, rate)| (c, rate)).collect();
    extrapolated_from.dedup_by(|later, earlier| (later.0 - earlier.0).abs() < SAME_CORES);
    // The first reason is the one a run's log shows: this one changes the job's allocation most.
    for (c, rate) in extrapolated_from.into_iter().rev() {
        because.insert(0, format!(
            "at {c} cores the run observed {rate:.1} samples/s, well below G ({g_new:.1}), where the profile found the job accelerator-bound: above {c} cores the curve now scales with cores from there"
        ));
    }
    for &(c, r) in &ratios.all {
        let limited_here = ratios.limited.iter().any(|l| (l.0 - c).abs() < SAME_CORES);
        because.push(format!(
            "at {c} cores the run observed {:.0}% of what the profile predicted {}: the CPU curve there, and by the nearest such ratio elsewhere, moved to it",
            100.0 * r,
            if limited_here { "at its memory" } else { "with memory to spare" }
        ));
    }
    // Only where a job ran both ways at one core count does the miss cost part from the CPU's speed.
    let beside_unlimited: Vec<&Pool> = all
        .iter()
        .filter(|p| {
            p.limited
                && all
                    .iter()
                    .any(|u| !u.limited && (u.cpus - p.cpus).abs() < SAME_CORES)
        })
        .collect();
    let miss_cost = if beside_unlimited.is_empty() {
        None
    } else {
        refit_miss_cost(&mut model, &beside_unlimited)
    };
    if let Some(m) = &miss_cost {
        because.push(format!(
            "the miss cost moved from {:.3} to {:.3} ms of CPU per miss, fitted to {} memory-limited allocation(s)",
            1e3 * m.cpu_s_per_miss_before,
            1e3 * m.cpu_s_per_miss_after,
            m.points
        ));
    }
    Moved {
        model,
        ratios: ratios.all,
        miss_cost,
        because,
    }
}

/// Refines `profile` (read from `origin`) with `observations` read from the logs `from`; disturbed ones
/// are left out unless `include_disturbed` (on a host that stays busy, what the job got under contention
/// is what the scheduler will see). Observations of other profiles' workloads are ignored; a profile
/// without a fitted model (a published one), or no usable observation of it, is refused.
pub fn refine(
    profile: &Profile,
    origin: &str,
    observations: &[Observation],
    from: &[String],
    include_disturbed: bool,
) -> Result<(Profile, Refinement), InputError> {
    let Some(old_model) = profile.model.as_ref() else {
        return Err(InputError::field(
            origin,
            "model",
            "absent (a published profile): refinement moves a measured profile's fitted model; measure one with `synergy profile`",
        ));
    };
    let picked = pick(profile, observations, from, include_disturbed)?;
    let Pooled { pools, kept, all } = pooled(profile, old_model, &picked.usable);

    let Moved {
        model,
        ratios,
        miss_cost,
        mut because,
    } = moved(old_model, &all);

    let gpus = profile.workload.gpus;
    let (mut m, mut per_gpu, mut demand) = matrix::build(
        &model,
        &profile.matrix.cpus,
        &profile.matrix.memory_gib,
        gpus,
        &profile.server,
        profile.demand.tolerance,
    );
    let raised =
        matrix::make_monotone_in_cores(&mut m, &mut per_gpu, &mut demand, gpus, &profile.server);
    if raised > 0 {
        because.push(format!(
            "{raised} cell(s) raised to their neighbour with fewer cores: more cores never predict less"
        ));
    }
    let new_trials: Vec<ProfileTrial> = pools.iter().map(Pool::trial).collect();
    let mut trials = kept;
    trials.extend(new_trials);
    m.source = Some(cell_sources(&model, &m.cpus, &m.memory_gib, &trials));

    let points_out: Vec<RefinedPoint> = all
        .iter()
        .map(|p| RefinedPoint {
            cpus: p.cpus,
            memory_gib: p.memory_gib,
            memory_limited: p.limited,
            observed_samples_per_s: p.rate,
            observed_ci95: p.ci95,
            observations: p.n,
            predicted_before: old_model
                .predict(p.cpus, p.memory_gib * GIB, None)
                .samples_per_s,
            predicted_after: model
                .predict(p.cpus, p.memory_gib * GIB, None)
                .samples_per_s,
        })
        .collect();
    let refinement = Refinement {
        from: from.to_vec(),
        observations: picked.of_workload,
        disturbed: picked.disturbed,
        included_disturbed: include_disturbed,
        other_gpus: picked.other_gpus,
        points: points_out,
        cpu_speed: ratios
            .iter()
            .map(|&(cpus, ratio)| SpeedRatio { cpus, ratio })
            .collect(),
        miss_cost,
        raised_cells: raised,
        because,
    };
    let mut out = profile.clone();
    out.schema = SCHEMA.into();
    out.workload.iter_time_s = m
        .proportional
        .samples_per_s
        .filter(|t| *t > 0.0)
        .map(|t| out.workload.batch_size as f64 / t)
        .or(out.workload.iter_time_s);
    out.trials = trials;
    out.model = Some(model);
    out.matrix = m;
    out.per_gpu = per_gpu;
    out.demand = demand;
    out.refinement = Some(refinement.clone());
    Ok((out, refinement))
}

/// Searches the CPU-seconds a miss costs so that the model meets the memory-limited pools (least
/// squares of relative errors); `None` when the model has no miss cost or the pools do not depend on it
/// (fetch-bound, or accelerator-bound).
fn refit_miss_cost(model: &mut FittedModel, pools: &[&Pool]) -> Option<MissCostRefit> {
    let before = model.stall.miss_cost.as_ref()?.cpu_s_per_miss;
    let cost = |model: &mut FittedModel, x: f64| -> f64 {
        if let Some(mc) = model.stall.miss_cost.as_mut() {
            mc.cpu_s_per_miss = x;
        }
        pools
            .iter()
            .map(|p| {
                rel_error(
                    model
                        .predict(p.cpus, p.memory_gib * GIB, None)
                        .samples_per_s,
                    p.rate,
                )
                .powi(2)
            })
            .sum()
    };
    let hi = (4.0 * before).max(0.05);
    let sensitive = pools.iter().any(|p| {
        let at = |model: &mut FittedModel, x: f64| {
            if let Some(mc) = model.stall.miss_cost.as_mut() {
                mc.cpu_s_per_miss = x;
            }
            model
                .predict(p.cpus, p.memory_gib * GIB, None)
                .samples_per_s
        };
        let (a, b) = (at(model, 0.0), at(model, hi));
        (a - b).abs() > 0.01 * a.max(1e-9)
    });
    if !sensitive {
        if let Some(mc) = model.stall.miss_cost.as_mut() {
            mc.cpu_s_per_miss = before;
        }
        return None;
    }
    let phi = (5f64.sqrt() - 1.0) / 2.0;
    let (mut a, mut b) = (0.0, hi);
    for _ in 0..SEARCH_STEPS {
        let x1 = b - phi * (b - a);
        let x2 = a + phi * (b - a);
        if cost(model, x1) <= cost(model, x2) {
            b = x2;
        } else {
            a = x1;
        }
    }
    let after = (a + b) / 2.0;
    cost(model, after);
    Some(MissCostRefit {
        cpu_s_per_miss_before: before,
        cpu_s_per_miss_after: after,
        points: pools.len(),
    })
}

/// Where each cell of the grid comes from: observed where an `observed` trial ran at its cores in the
/// same cache regime (memory to spare, or memory within 5%), measured where a profiling trial did (a
/// cached CPU trial at its cores stands for every column with memory to spare), else modelled.
pub fn cell_sources(
    model: &FittedModel,
    cpus: &[f64],
    memory_gib: &[f64],
    trials: &[ProfileTrial],
) -> Vec<Vec<CellSource>> {
    let at = |t: &ProfileTrial, c: f64, m: f64, lim: bool| {
        let tc = t.result.allocation.cpus.0;
        let tm = t
            .memory_gib
            .or(t.result.allocation.mem_limit_bytes.map(|b| b as f64 / GIB));
        if (tc - c).abs() >= SAME_CORES {
            return false;
        }
        match (t.role, tm) {
            (TrialRole::Cpu, _) => !lim,
            (TrialRole::Observed, Some(tm)) => {
                let t_lim = limited(model, tc, tm);
                t_lim == lim && (!lim || (tm - m).abs() < SAME_MEMORY * m)
            }
            (TrialRole::Validation | TrialRole::Exhaustive | TrialRole::Calibration, Some(tm)) => {
                (tm - m).abs() < SAME_MEMORY * m
            }
            _ => false,
        }
    };
    cpus.iter()
        .map(|&c| {
            memory_gib
                .iter()
                .map(|&m| {
                    let lim = limited(model, c, m);
                    let from = |role: fn(TrialRole) -> bool| {
                        trials.iter().any(|t| role(t.role) && at(t, c, m, lim))
                    };
                    if from(|r| r == TrialRole::Observed) {
                        CellSource::Observed
                    } else if from(|r| r != TrialRole::Observed) {
                        CellSource::Measured
                    } else {
                        CellSource::Modelled
                    }
                })
                .collect()
        })
        .collect()
}

#[cfg(test)]
mod tests;
