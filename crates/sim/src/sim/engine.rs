//! The round loop (docs/architecture.md §5.1): every 300 s the policy orders the active jobs, the runnable set takes
//! them in that order while their GPU counts fit, the mechanism allocates from scratch, and each running
//! job advances floor(300 / (iter_time / speed)) iterations. Per-round work is proportional to the active
//! jobs only: finished jobs leave the active list at once.

use super::metrics::{FinishedJob, Measured, ModelNames, RoundRecord, SimResult};
use super::semantics::{RoundEnd, SimSemantics};
use super::trace::{GenConfig, Generator, GpuMode};
use super::SimError;
use crate::error::InputError;
use crate::error::Setting;
use crate::format::trace::{CsvRecords, JobIds, TraceJob, TraceRows};
use crate::sched::catalog::Catalog;
use crate::sched::cluster::{ClusterConfig, ClusterState};
use crate::sched::place;
use crate::sched::{JobState, Mechanism, Policy, Round};
use std::time::Instant;

/// A run that has not finished its window after this much simulated time (100 years) is stopped rather
/// than left looping.
pub const MAX_SIMULATED_S: f64 = 100.0 * 365.0 * 24.0 * 3600.0;

/// Where jobs come from.
#[derive(Debug, Clone)]
pub enum TraceSource {
    /// A finite list (a CSV trace), in arrival order.
    Jobs(Vec<TraceJob>),
    /// A CSV trace file whose rows are in arrival order, read as the run goes.
    File(TraceFile),
    /// The Philly-derived generator.
    Generated(GenConfig),
}

/// A trace file checked whole ([`crate::format::trace::scan`]) and found in arrival order: each run
/// reads its rows as they arrive, so a run holds its active jobs and the trace's ids (a few bits each
/// where they are dense), never the trace (docs/simulate.md, "Inputs").
#[derive(Debug, Clone)]
pub struct TraceFile {
    /// The file.
    pub path: std::path::PathBuf,
    /// Its jobs' ids, from the check.
    pub ids: std::sync::Arc<JobIds>,
}

/// How a simulation runs.
#[derive(Debug, Clone)]
pub struct SimConfig {
    /// The servers.
    pub cluster: ClusterConfig,
    /// Round length, seconds (300 in the paper).
    pub round_s: f64,
    /// Job ids whose JCTs are measured, inclusive; the run ends when they have all finished. None: all
    /// jobs of a finite trace.
    pub window: Option<(u64, u64)>,
    /// Keep a record per round in the result (utilization over time); a [`Recorder`] gets them either way.
    pub record_rounds: bool,
    /// Keep a record per finished job in the result; without them a run holds only its active jobs and 8
    /// bytes per measured job (docs/architecture.md §5.1, "Cost of a round"), and a [`Recorder`] takes
    /// the records as they come.
    pub record_jobs: bool,
    /// This project's rules or the reference simulator's (docs/simulate.md, "Two semantics"), for a
    /// trace with multi-GPU jobs; a single-GPU trace always runs under this project's.
    pub semantics: SimSemantics,
}

impl SimConfig {
    /// The paper's setup: 16 x (8 GPUs, 24 cores, 500 GB), 300 s rounds, window 4000-4999.
    pub fn paper_default() -> SimConfig {
        SimConfig {
            cluster: ClusterConfig::paper_default(),
            round_s: 300.0,
            window: Some((4000, 4999)),
            record_rounds: true,
            record_jobs: true,
            semantics: SimSemantics::SYNERGY,
        }
    }
}

/// A round length's stated range, for the simulator and the executor alike: a positive time within
/// [`crate::range::MAX_SECONDS`].
pub fn check_round(round_s: f64) -> Result<(), InputError> {
    if crate::range::is_seconds(round_s) && round_s > 0.0 {
        Ok(())
    } else {
        Err(InputError::setting(
            Setting::RoundS,
            format!("must be more than 0 and {}", crate::range::SECONDS),
        ))
    }
}

/// The jobs of a run in arrival order, as they are needed; a trace file's row can still be found
/// unreadable (changed since it was checked).
type Arrivals<'a> = Box<dyn Iterator<Item = Result<TraceJob, InputError>> + 'a>;

/// The jobs of a run in arrival order, and how many of them fall in the measured window, once the round,
/// the catalog and the trace are checked against the configuration.
fn arrivals<'a>(
    catalog: &'a Catalog,
    cfg: &SimConfig,
    source: TraceSource,
) -> Result<(Arrivals<'a>, u64), SimError> {
    check_round(cfg.round_s)?;
    let total_gpus = cfg.cluster.total_gpus();
    for m in &catalog.models {
        if m.iter_time_s >= cfg.round_s {
            return Err(InputError::field(
                m.path.display().to_string(),
                "workload.iter_time_s",
                format!(
                    "{} s per iteration does not fit a {} s round",
                    m.iter_time_s, cfg.round_s
                ),
            )
            .into());
        }
    }
    let semantics = cfg.semantics;
    Ok(match source {
        TraceSource::Jobs(jobs) => {
            if jobs.is_empty() {
                return Err(InputError::setting(Setting::Trace, "the trace has no jobs").into());
            }
            if let Some(j) = jobs.iter().find(|j| j.gpus as u64 > total_gpus) {
                return Err(InputError::setting(
                    Setting::Trace,
                    format!(
                        "job {} asks for {} GPUs; the cluster has {total_gpus}",
                        j.id, j.gpus
                    ),
                )
                .in_field("gpus")
                .into());
            }
            let n = match cfg.window {
                Some((a, b)) => jobs.iter().filter(|j| j.id >= a && j.id <= b).count() as u64,
                None => jobs.len() as u64,
            };
            if n == 0 {
                return Err(InputError::setting(
                    Setting::Window,
                    "no job of the trace falls in it",
                )
                .into());
            }
            (Box::new(jobs.into_iter().map(Ok)), n)
        }
        TraceSource::File(file) => {
            let n = match cfg.window {
                Some((a, b)) => file.ids.count_in(a, b),
                None => file.ids.len(),
            };
            if n == 0 {
                return Err(InputError::setting(
                    Setting::Window,
                    "no job of the trace falls in it",
                )
                .into());
            }
            let origin = file.path.display().to_string();
            let f = crate::input::open(&file.path, crate::input::TRACE)
                .map_err(|e| e.into_input(&origin))?;
            let records = CsvRecords::new(std::io::BufReader::new(f), &origin);
            let rows = TraceRows::new(records, &origin, catalog, total_gpus)?;
            (Box::new(rows.map(|row| row.map(|(_, job)| job))), n)
        }
        TraceSource::Generated(g) => {
            if g.gpu_mode == GpuMode::Multi && total_gpus < 8 {
                return Err(InputError::setting(
                    Setting::GpuModeMulti,
                    format!("generated jobs take up to 8 GPUs; the cluster has {total_gpus}"),
                )
                .into());
            }
            if g.jobs == Some(0) {
                return Err(InputError::setting(Setting::Jobs, "must be at least 1").into());
            }
            let n = match (cfg.window, g.jobs) {
                (Some((a, b)), Some(n)) => (b + 1).min(n).saturating_sub(a),
                (Some((a, b)), None) => b + 1 - a,
                (None, Some(n)) => n,
                (None, None) => {
                    return Err(InputError::setting(
                        Setting::Window,
                        format!(
                            "an endless generated trace needs a window (or {})",
                            Setting::Jobs
                        ),
                    )
                    .into())
                }
            };
            if n == 0 {
                return Err(
                    InputError::setting(Setting::Window, "no generated job falls in it").into(),
                );
            }
            (
                Box::new(Generator::with_streams(g, catalog, semantics.streams)?.map(Ok)),
                n,
            )
        }
    })
}

/// What a run tells whoever watches it as it goes (a progress bar): called from the thread that runs it,
/// a few times a second at most.
pub trait Watch: Sync {
    /// A run starts that ends when `jobs` measured jobs have finished.
    fn started(&self, _jobs: u64) {}
    /// Since the last call, `jobs` more measured jobs finished and `rounds` more rounds ran; the run has
    /// reached simulated time `now_s`.
    fn advanced(&self, _jobs: u64, _rounds: u64, _now_s: f64) {}
}

/// Watches nothing.
#[derive(Debug, Clone, Copy, Default)]
pub struct Unwatched;

impl Watch for Unwatched {}

/// How often a run reports to its [`Watch`].
const WATCH_EVERY: std::time::Duration = std::time::Duration::from_millis(200);

/// Where a run hands its records as they happen (the output directory, the charts' data), so that it
/// keeps none itself: the engine knows no file format, and a run's memory stays bounded by its active jobs
/// (docs/architecture.md §5.1, "Cost of a round").
pub trait Recorder {
    /// A job finished; jobs come in the order they finish.
    fn job(&mut self, _job: &FinishedJob) -> Result<(), SimError> {
        Ok(())
    }
    /// A round ran; rounds come in order.
    fn round(&mut self, _round: &RoundRecord) -> Result<(), SimError> {
        Ok(())
    }
    /// The run ended with `result`, after its last job and round.
    fn finish(&mut self, _result: &SimResult) -> Result<(), SimError> {
        Ok(())
    }
}

/// Records nothing.
impl Recorder for () {}

/// Records when there is a recorder.
impl<R: Recorder> Recorder for Option<R> {
    fn job(&mut self, job: &FinishedJob) -> Result<(), SimError> {
        self.as_mut().map_or(Ok(()), |r| r.job(job))
    }
    fn round(&mut self, round: &RoundRecord) -> Result<(), SimError> {
        self.as_mut().map_or(Ok(()), |r| r.round(round))
    }
    fn finish(&mut self, result: &SimResult) -> Result<(), SimError> {
        self.as_mut().map_or(Ok(()), |r| r.finish(result))
    }
}

/// Records with both.
impl<A: Recorder, B: Recorder> Recorder for (A, B) {
    fn job(&mut self, job: &FinishedJob) -> Result<(), SimError> {
        self.0.job(job)?;
        self.1.job(job)
    }
    fn round(&mut self, round: &RoundRecord) -> Result<(), SimError> {
        self.0.round(round)?;
        self.1.round(round)
    }
    fn finish(&mut self, result: &SimResult) -> Result<(), SimError> {
        self.0.finish(result)?;
        self.1.finish(result)
    }
}

/// Runs one simulation to the end of its window (or of its finite trace).
pub fn run(
    catalog: &Catalog,
    cfg: &SimConfig,
    source: TraceSource,
    policy: &dyn Policy,
    mechanism: &mut dyn Mechanism,
) -> Result<SimResult, SimError> {
    run_watched(catalog, cfg, source, policy, mechanism, &Unwatched, &mut ())
}

/// [`run`], reporting its progress to `watch` and handing its records to `recorder`.
pub fn run_watched(
    catalog: &Catalog,
    cfg: &SimConfig,
    source: TraceSource,
    policy: &dyn Policy,
    mechanism: &mut dyn Mechanism,
    watch: &dyn Watch,
    recorder: &mut dyn Recorder,
) -> Result<SimResult, SimError> {
    let started = Instant::now();
    let (mut pending, window_total) = arrivals(catalog, cfg, source)?;
    watch.started(window_total);
    let (mut reported_at, mut reported_jobs, mut reported_rounds) = (started, 0u64, 0u64);
    let names = ModelNames::of(catalog);
    let mut measured = Measured::default();
    let semantics = cfg.semantics;
    let in_window = |id: u64| cfg.window.is_none_or(|(a, b)| id >= a && id <= b);

    let mut state = ClusterState::with_semantics(&cfg.cluster, semantics.core);
    let mut active: Vec<JobState> = Vec::new();
    let mut next = pending.next().transpose()?;
    let mut records: Vec<FinishedJob> = Vec::new();
    let mut rounds: Vec<RoundRecord> = Vec::new();
    let mut window_done = 0u64;
    let mut job_rounds = 0u64;
    let mut now = 0.0f64;
    let mut round = Round::default();
    let mut finished: Vec<bool> = Vec::new();
    let mut solve_s_total = 0.0;
    let mut solve_s_max = 0.0f64;
    let mut solves = 0u64;
    let mut demotions_total = 0u64;
    let mut rounds_run = 0u64;
    let mut used_sums = (0.0, 0.0, 0.0);
    let (mut offered_gpu_s, mut offered_until_s) = (0.0, 0.0f64);

    loop {
        while let Some(j) = next.filter(|j| j.arrival_s <= now) {
            let m = catalog.get(j.model as usize);
            if cfg.window.is_none_or(|(_, last)| j.id <= last) {
                offered_gpu_s += j.iters as f64 * m.iter_time_s * j.gpus as f64;
                offered_until_s = offered_until_s.max(j.arrival_s);
            }
            let mut job = JobState::arrived(j.id, j.model, j.gpus, j.arrival_s, j.iters, catalog);
            job.in_window = in_window(j.id);
            active.push(job);
            next = pending.next().transpose()?;
        }
        if active.is_empty() {
            match next {
                None => break,
                Some(j) => {
                    now = (j.arrival_s / cfg.round_s).ceil() * cfg.round_s;
                    continue;
                }
            }
        }

        round.plan(policy, mechanism, catalog, &mut state, &mut active, now);
        rounds_run += 1;
        let stats = round.stats;
        if stats.solve_s > 0.0 || stats.bound.is_some() {
            solves += 1;
            solve_s_total += stats.solve_s;
            solve_s_max = solve_s_max.max(stats.solve_s);
        }
        demotions_total += stats.demotions as u64;

        finished.clear();
        finished.resize(active.len(), false);
        let (mut gpus_used, mut cpus_used, mut mem_used) = (0u64, 0.0, 0.0);
        let mut running = 0u32;
        let mut speed_sum = 0.0;
        for (slot, &i) in round.runnable.iter().enumerate() {
            let grant = &round.grants[slot];
            if grant.parts.is_empty() {
                continue;
            }
            let (g, c, m) = grant.totals();
            gpus_used += g as u64;
            cpus_used += c;
            mem_used += m;
            running += 1;
            job_rounds += 1;
            let speed = place::speed(catalog, &state, &round.requests[slot], &grant.parts);
            speed_sum += speed;
            let job = &mut active[i];
            let rate = speed / job.iter_time_s;
            let iters = (cfg.round_s * rate).floor() as u64;
            job.first_start_s.get_or_insert(now);
            job.last_run_s = now + cfg.round_s;
            if grant.demoted {
                job.demotions += 1;
            }
            if job.remaining_iters <= iters {
                let finish_s = match semantics.round_end {
                    RoundEnd::MidRound => now + job.remaining_iters as f64 / rate,
                    RoundEnd::Boundary => now + cfg.round_s,
                };
                job.attained_s += finish_s - now;
                job.remaining_iters = 0;
                finished[i] = true;
                if job.in_window {
                    window_done += 1;
                }
                let record = FinishedJob::of(job, finish_s, &names);
                measured.add(&record);
                recorder.job(&record)?;
                if cfg.record_jobs {
                    records.push(record);
                }
            } else {
                job.remaining_iters -= iters;
                job.attained_s += cfg.round_s;
            }
        }
        used_sums.0 += gpus_used as f64;
        used_sums.1 += cpus_used;
        used_sums.2 += mem_used;
        let record = RoundRecord {
            start_s: now,
            active: active.len() as u32,
            running,
            gpus_used,
            cpus_used,
            memory_gib_used: mem_used,
            mean_speed: speed_sum / running.max(1) as f64,
            demotions: stats.demotions,
            solve_s: stats.solve_s,
        };
        recorder.round(&record)?;
        if cfg.record_rounds {
            rounds.push(record);
        }
        if finished.iter().any(|f| *f) {
            let mut k = 0;
            active.retain(|_| {
                let keep = !finished[k];
                k += 1;
                keep
            });
        }
        if window_done >= window_total {
            break;
        }
        if reported_at.elapsed() >= WATCH_EVERY {
            watch.advanced(
                window_done - reported_jobs,
                rounds_run - reported_rounds,
                now + cfg.round_s,
            );
            (reported_at, reported_jobs, reported_rounds) =
                (Instant::now(), window_done, rounds_run);
        }
        now += cfg.round_s;
        if now > MAX_SIMULATED_S {
            return Err(SimError::NoProgress {
                simulated_h: now / 3600.0,
            });
        }
    }

    watch.advanced(
        window_done - reported_jobs,
        rounds_run - reported_rounds,
        now + cfg.round_s,
    );
    let result = SimResult::new(
        records,
        measured,
        rounds,
        &cfg.cluster,
        super::metrics::RunFacts {
            policy: policy.name().to_string(),
            mechanism: mechanism.name().to_string(),
            semantics: semantics.name().to_string(),
            end_s: now + cfg.round_s,
            rounds: rounds_run,
            job_rounds,
            wall_s: started.elapsed().as_secs_f64(),
            demotions: demotions_total,
            used_sums,
            offered_gpu_s,
            offered_until_s,
            solves,
            solve_s_total,
            solve_s_max,
        },
    );
    recorder.finish(&result)?;
    Ok(result)
}

#[cfg(test)]
mod semantics_tests;
