//! The round loop of a real run: every round the planner decides from the jobs' real progress, and the
//! backend applies the changes (start, resize live, pause, resume); between rounds jobs are polled, a
//! finished job's JCT is recorded, a crashed one is retried a bounded number of times, and the state file
//! is kept current. Also the simulator's prediction of the same job list, and the dry-run plan.
//!
//! The loop asks a backend only what [`Backend`] offers, and reads time from a `Clock`, so that its
//! unit tests drive it through an in-process fake backend on a fake clock, without root or real rounds.

use super::jobs::JobList;
use super::plan::{cluster_of, Planner};
use super::state::{unix_now_s, JobRecord, JobStatus, RunState, SCHEMA};
use super::{
    job_state_dir, Allocation, Backend, Change, ExecError, JobExit, JobLaunch, ServerInfo, Work,
};
use crate::cancel::Cancel;
use crate::error::InputError;
use crate::sched::ClusterConfig;
use crate::sched::{self, JobState};
use crate::sim::{self, SimConfig, TraceSource};
use crate::units::Cores;
use serde::Serialize;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// How often the loop polls jobs.
const TICK: Duration = Duration::from_millis(50);
/// How often the state file is rewritten while nothing else changes.
const SAVE_EVERY: Duration = Duration::from_secs(1);

/// How a run is scheduled and kept.
#[derive(Debug, Clone)]
pub struct ExecConfig {
    /// Policy name (fifo, srtf, las, ftf).
    pub policy: String,
    /// Mechanism name (proportional, greedy, tune, opt).
    pub mechanism: String,
    /// Round length, seconds.
    pub round_s: f64,
    /// Times a crashing job is started again before it counts as failed.
    pub max_retries: u32,
    /// The state file.
    pub state_path: PathBuf,
    /// Continue the run recorded in the state file.
    pub resume: bool,
}

/// One job's outcome, real beside predicted.
#[derive(Debug, Clone, Serialize)]
pub struct JobResult {
    /// Its name.
    pub name: String,
    /// Its workload's name.
    pub workload: String,
    /// GPUs.
    pub gpus: u32,
    /// Work in samples.
    pub samples: u64,
    /// Arrival, seconds.
    pub arrival_s: f64,
    /// Where it ended.
    pub status: JobStatus,
    /// Real JCT, seconds (done jobs).
    pub real_jct_s: Option<f64>,
    /// The simulator's JCT for it, seconds.
    pub predicted_jct_s: Option<f64>,
    /// (real - predicted) / predicted.
    pub difference: Option<f64>,
    /// Times it crashed and was started again.
    pub retries: u32,
    /// Restarts to change GPUs.
    pub restarts: u32,
    /// Why it failed.
    pub error: Option<String>,
}

/// A run's outcome.
#[derive(Debug, Clone, Serialize)]
pub struct RunReport {
    /// The job list.
    pub job_list: String,
    /// Backend name.
    pub backend: String,
    /// Policy name.
    pub policy: String,
    /// Mechanism name.
    pub mechanism: String,
    /// Round length, seconds.
    pub round_s: f64,
    /// The servers used.
    pub servers: Vec<ServerInfo>,
    /// Per job, in list order.
    pub jobs: Vec<JobResult>,
    /// Mean real JCT over jobs that finished, seconds.
    pub mean_real_jct_s: Option<f64>,
    /// Mean predicted JCT over the same jobs, seconds.
    pub mean_predicted_jct_s: Option<f64>,
    /// (mean real - mean predicted) / mean predicted.
    pub mean_difference: Option<f64>,
    /// Rounds planned by this executor.
    pub rounds: u64,
    /// Seconds from the run's start to its end (across resumes).
    pub makespan_s: f64,
    /// The signal that interrupted the run, if one did.
    pub interrupted: Option<i32>,
}

/// A policy and a mechanism, by name.
type Scheduler = (Box<dyn sched::Policy>, Box<dyn sched::Mechanism>);

fn policy_and_mechanism(cfg_policy: &str, cfg_mechanism: &str) -> Result<Scheduler, InputError> {
    let p = sched::policy_by_name(cfg_policy)?;
    let m = sched::mechanism_by_name(cfg_mechanism)?;
    Ok((p, m))
}

/// The simulator's JCT for every job of the list (list order) on `cluster`.
pub fn predict(
    list: &JobList,
    cluster: &ClusterConfig,
    round_s: f64,
    policy: &str,
    mechanism: &str,
) -> Result<Vec<Option<f64>>, ExecError> {
    let (p, mut m) = policy_and_mechanism(policy, mechanism)?;
    let cfg = SimConfig {
        cluster: cluster.clone(),
        round_s,
        window: None,
        record_rounds: false,
    };
    let r = sim::run(
        &list.catalog,
        &cfg,
        TraceSource::Jobs(list.trace()),
        p.as_ref(),
        m.as_mut(),
    )?;
    let mut out = vec![None; list.jobs.len()];
    for j in &r.jobs {
        out[j.id as usize] = Some(j.jct_s);
    }
    Ok(out)
}

fn fmt_alloc(a: &Allocation) -> String {
    let gpus: Vec<String> = a.gpus.iter().map(|g| g.to_string()).collect();
    let cores: Vec<String> = a.cores.iter().map(|c| c.to_string()).collect();
    format!(
        "gpu {} cores {} ({:.2}) mem {}",
        gpus.join(","),
        cores.join(","),
        a.cpus.0,
        a.memory
    )
}

fn job_state(list: &JobList, i: usize, remaining_iters: u64, attained_s: f64) -> JobState {
    let j = &list.jobs[i];
    let mut state = JobState::arrived(
        i as u64,
        j.model,
        j.gpus,
        j.arrival_s,
        j.work_iters(),
        &list.catalog,
    );
    state.remaining_iters = remaining_iters;
    state.attained_s = attained_s;
    state
}

/// One round of a dry run.
#[derive(Debug, Clone, Serialize)]
pub struct PlannedRound {
    /// Round number, from 1.
    pub round: u64,
    /// When it starts, seconds.
    pub start_s: f64,
    /// Every active job, in list order.
    pub jobs: Vec<PlannedJob>,
}

/// One job's part of a planned round.
#[derive(Debug, Clone, Serialize)]
pub struct PlannedJob {
    /// Its name.
    pub name: String,
    /// What it gets; `None`: it waits (or stays paused).
    pub allocation: Option<Allocation>,
}

impl std::fmt::Display for PlannedRound {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(f, "round {} at {:.0} s:", self.round, self.start_s)?;
        for j in &self.jobs {
            match &j.allocation {
                Some(a) => writeln!(f, "  {:<16} {}", j.name, fmt_alloc(a))?,
                None => writeln!(f, "  {:<16} waits", j.name)?,
            }
        }
        Ok(())
    }
}

/// The plan of every round, from the simulator's progress model, without launching anything.
pub fn dry_run(
    list: &JobList,
    servers: &[ServerInfo],
    policy: &str,
    mechanism: &str,
    round_s: f64,
) -> Result<Vec<PlannedRound>, ExecError> {
    list.check_fits(
        servers
            .iter()
            .map(|s| s.gpus.len() as u32)
            .max()
            .unwrap_or(0),
    )?;
    let (p, m) = policy_and_mechanism(policy, mechanism)?;
    let mut planner = Planner::new(list.catalog.clone(), servers.to_vec(), p, m);
    let mut remaining: Vec<u64> = list.jobs.iter().map(|j| j.work_iters()).collect();
    let mut attained = vec![0.0; list.jobs.len()];
    let mut prev: Vec<Option<Allocation>> = vec![None; list.jobs.len()];
    let mut out = Vec::new();
    let mut now = 0.0f64;
    let mut round = 0u64;
    loop {
        let active: Vec<usize> = (0..list.jobs.len())
            .filter(|&i| remaining[i] > 0 && list.jobs[i].arrival_s <= now)
            .collect();
        if active.is_empty() {
            match list
                .jobs
                .iter()
                .enumerate()
                .filter(|(i, _)| remaining[*i] > 0)
                .map(|(_, j)| j.arrival_s)
                .min_by(f64::total_cmp)
            {
                None => break,
                Some(a) => {
                    now = (a / round_s).ceil() * round_s;
                    continue;
                }
            }
        }
        let mut states: Vec<JobState> = active
            .iter()
            .map(|&i| job_state(list, i, remaining[i], attained[i]))
            .collect();
        let previous: Vec<Option<Allocation>> = active.iter().map(|&i| prev[i].clone()).collect();
        let plan = planner.plan(&mut states, &previous, now);
        round += 1;
        let mut planned = PlannedRound {
            round,
            start_s: now,
            jobs: Vec::new(),
        };
        for (k, &i) in active.iter().enumerate() {
            let j = &list.jobs[i];
            if let (Some(_), Some(speed)) = (&plan.allocations[k], plan.speeds[k]) {
                // As the simulator advances a job: whole iterations at its speed this round.
                let rate = speed / list.catalog.get(j.model as usize).iter_time_s;
                let iters = (round_s * rate).floor() as u64;
                remaining[i] = remaining[i].saturating_sub(iters);
                attained[i] += round_s;
            }
            prev[i] = plan.allocations[k].clone();
            planned.jobs.push(PlannedJob {
                name: j.name.clone(),
                allocation: plan.allocations[k].clone(),
            });
        }
        out.push(planned);
        now += round_s;
    }
    Ok(out)
}

/// Per-job bookkeeping of a live run beyond the state file.
struct Live {
    allocation: Option<Allocation>,
    last_run_s: f64,
    starved: bool,
}

/// Where the round loop reads the time and how it waits between polls: the wall clock in a real run; in
/// the executor's unit tests a scripted one, so that rounds pass without being slept through.
pub(crate) trait Clock {
    /// Seconds since the Unix epoch: a run's start is recorded in it, so a resumed run keeps counting
    /// arrivals and JCTs from the first executor's start.
    fn unix_s(&self) -> f64;
    /// Seconds on a monotonic clock, from any origin: times within one executor are measured on it, so a
    /// wall-clock step does not move rounds.
    fn monotonic_s(&self) -> f64;
    /// Waits `d` before the loop polls again.
    fn sleep(&mut self, d: Duration);
}

/// The host's clocks.
struct WallClock {
    origin: Instant,
}

impl Clock for WallClock {
    fn unix_s(&self) -> f64 {
        unix_now_s()
    }
    fn monotonic_s(&self) -> f64 {
        self.origin.elapsed().as_secs_f64()
    }
    fn sleep(&mut self, d: Duration) {
        std::thread::sleep(d);
    }
}

/// Runs the job list on `backend` to the end (or until `cancel`), printing each round's changes
/// through `log`; returns the report with the simulator's predictions beside the real JCTs.
pub fn run(
    list: &JobList,
    backend: &mut dyn Backend,
    cfg: &ExecConfig,
    cancel: &Cancel,
    log: &mut dyn FnMut(&str),
) -> Result<RunReport, ExecError> {
    let mut clock = WallClock {
        origin: Instant::now(),
    };
    run_on(list, backend, cfg, cancel, log, &mut clock)
}

/// [`run`], with time read from and waited on `clock`.
pub(crate) fn run_on(
    list: &JobList,
    backend: &mut dyn Backend,
    cfg: &ExecConfig,
    cancel: &Cancel,
    log: &mut dyn FnMut(&str),
    clock: &mut dyn Clock,
) -> Result<RunReport, ExecError> {
    if !(cfg.round_s.is_finite() && cfg.round_s > 0.0) {
        return Err(InputError::setting("round_s", "must be a positive number of seconds").into());
    }
    let servers = backend.servers().to_vec();
    list.check_fits(
        servers
            .iter()
            .map(|s| s.gpus.len() as u32)
            .max()
            .unwrap_or(0),
    )?;
    let (policy, mechanism) = policy_and_mechanism(&cfg.policy, &cfg.mechanism)?;
    // The prediction first: it also validates the list against the cluster before anything starts.
    let predicted = predict(
        list,
        &cluster_of(&servers),
        cfg.round_s,
        &cfg.policy,
        &cfg.mechanism,
    )?;
    let planner = Planner::new(list.catalog.clone(), servers.clone(), policy, mechanism);
    let jobs_dir = job_state_dir(&cfg.state_path);
    let state = open_state(list, backend, cfg, &jobs_dir, &*clock, log)?;
    let launches = Launches::prepare(list, &*backend, &jobs_dir, cancel)?;

    let mut run = RoundLoop::new(list, cfg, backend, clock, log, planner, launches, state);
    let outcome = run.until_end(cancel);
    // Whatever ended the loop, nothing of this run is left running: progress is saved by the jobs
    // (SIGTERM) and in the state file.
    let makespan_s = run.elapsed();
    let saved = run.stop_all();
    let interrupted = outcome?;
    saved?;
    Ok(run.report(servers, &predicted, makespan_s, interrupted))
}

/// The run's state to start from: a fresh one, or the state file's when resuming (after cleaning up what
/// its dead executor left); saved at once under this executor's pid.
fn open_state(
    list: &JobList,
    backend: &mut dyn Backend,
    cfg: &ExecConfig,
    jobs_dir: &Path,
    clock: &dyn Clock,
    log: &mut dyn FnMut(&str),
) -> Result<RunState, ExecError> {
    let mut state = if cfg.resume {
        resume_state(list, backend, cfg, log)?
    } else {
        fresh_state(list, &*backend, cfg, jobs_dir, clock)?
    };
    std::fs::create_dir_all(jobs_dir).map_err(|e| ExecError::Io {
        context: format!("creating {}", jobs_dir.display()),
        source: e,
    })?;
    state.executor_pid = std::process::id();
    state.write(&cfg.state_path)?;
    Ok(state)
}

/// What each job is launched with, the same all run long: its dataset, its workload state file, the
/// cores its loaders are sized for.
struct Launches {
    /// Per spec (by origin): its prepared dataset.
    datasets: HashMap<String, Option<PathBuf>>,
    state_files: Vec<PathBuf>,
    loader: Vec<Cores>,
}

impl Launches {
    /// Prepares every dataset (once per workload, before the clock matters) and sizes every job's loaders.
    fn prepare(
        list: &JobList,
        backend: &dyn Backend,
        jobs_dir: &Path,
        cancel: &Cancel,
    ) -> Result<Launches, ExecError> {
        let mut datasets: HashMap<String, Option<PathBuf>> = HashMap::new();
        let hidden = indicatif::ProgressBar::hidden();
        for j in &list.jobs {
            if !datasets.contains_key(&j.spec.origin) {
                let d = crate::measure::trial::prepare_dataset(&j.spec, &hidden, cancel)
                    .map_err(|e| {
                        if e.is_input() {
                            ExecError::Input(InputError::new(&j.spec.origin, e.to_string()))
                        } else {
                            ExecError::Other(format!(
                                "preparing the dataset of {}: {e}",
                                j.spec.origin
                            ))
                        }
                    })?
                    .map(|(dir, _, _)| dir);
                datasets.insert(j.spec.origin.clone(), d);
            }
        }
        let state_files = list
            .jobs
            .iter()
            .map(|j| jobs_dir.join(format!("{}.json", j.name)))
            .collect();
        let loader = list
            .jobs
            .iter()
            .map(|j| {
                let m = list.catalog.get(j.model as usize);
                backend.loader_cpus(m.best_cpus_per_gpu, j.gpus)
            })
            .collect();
        Ok(Launches {
            datasets,
            state_files,
            loader,
        })
    }

    /// Job `i` of `list`, as a backend starts it.
    fn of<'a>(&'a self, list: &'a JobList, i: usize) -> JobLaunch<'a> {
        let j = &list.jobs[i];
        JobLaunch {
            name: &j.name,
            spec: &j.spec,
            dataset: self.datasets.get(&j.spec.origin).and_then(|d| d.as_deref()),
            footprint_bytes: j.footprint_bytes,
            work: j.work,
            state_file: &self.state_files[i],
            loader_cpus: self.loader[i],
        }
    }
}

/// A run between its start and its end: the round loop and everything it reads and changes.
struct RoundLoop<'a, 'b> {
    list: &'a JobList,
    cfg: &'a ExecConfig,
    backend: &'b mut dyn Backend,
    clock: &'b mut dyn Clock,
    log: &'b mut dyn FnMut(&str),
    planner: Planner,
    launches: Launches,
    state: RunState,
    live: Vec<Live>,
    /// The run's start on the monotonic clock (before this executor's own when it resumes).
    t0: f64,
    next_round: f64,
    /// Rounds planned by this executor.
    rounds: u64,
    saved_at: f64,
}

impl<'a, 'b> RoundLoop<'a, 'b> {
    #[allow(clippy::too_many_arguments)]
    fn new(
        list: &'a JobList,
        cfg: &'a ExecConfig,
        backend: &'b mut dyn Backend,
        clock: &'b mut dyn Clock,
        log: &'b mut dyn FnMut(&str),
        planner: Planner,
        launches: Launches,
        state: RunState,
    ) -> Self {
        let elapsed_at_start = (clock.unix_s() - state.started_unix_s).max(0.0);
        let t0 = clock.monotonic_s() - elapsed_at_start;
        let live = list
            .jobs
            .iter()
            .map(|j| Live {
                allocation: None,
                last_run_s: j.arrival_s,
                starved: false,
            })
            .collect();
        let saved_at = clock.monotonic_s();
        RoundLoop {
            list,
            cfg,
            backend,
            clock,
            log,
            planner,
            launches,
            state,
            live,
            t0,
            next_round: elapsed_at_start,
            rounds: 0,
            saved_at,
        }
    }

    /// Seconds since the run started.
    fn elapsed(&self) -> f64 {
        self.clock.monotonic_s() - self.t0
    }

    /// Polls, plans and saves until every job has ended (`None`) or a signal arrives (`Some`).
    fn until_end(&mut self, cancel: &Cancel) -> Result<Option<i32>, ExecError> {
        loop {
            if let Some(sig) = cancel.signal() {
                return Ok(Some(sig));
            }
            let now = self.elapsed();
            let mut changed = self.poll_jobs(now)?;
            if self
                .state
                .jobs
                .iter()
                .all(|r| matches!(r.status, JobStatus::Done | JobStatus::Failed))
            {
                return Ok(None);
            }
            if now >= self.next_round {
                self.rounds += 1;
                self.round(now)?;
                while self.next_round <= now {
                    self.next_round += self.cfg.round_s;
                }
                changed = true;
            }
            if changed || self.clock.monotonic_s() - self.saved_at >= SAVE_EVERY.as_secs_f64() {
                self.state.write(&self.cfg.state_path)?;
                self.saved_at = self.clock.monotonic_s();
            }
            self.clock.sleep(TICK);
        }
    }

    /// Reads every started job's progress; records those that finished and retries or fails those that
    /// crashed. Returns whether any job changed state.
    fn poll_jobs(&mut self, now: f64) -> Result<bool, ExecError> {
        let mut changed = false;
        for i in 0..self.state.jobs.len() {
            let rec = &mut self.state.jobs[i];
            if !matches!(rec.status, JobStatus::Running | JobStatus::Paused) {
                continue;
            }
            let p = self.backend.poll(&rec.name)?;
            rec.samples_done = p.samples_done;
            let work_done = match self.list.jobs[i].work {
                Work::Samples(n) => p.samples_done >= n,
                Work::Steps(n) => p.steps_done >= n,
            };
            match p.exit {
                Some(x) if !x.success => self.crashed(i, &x)?,
                Some(_) => self.finish(i, now)?,
                None if work_done => self.finish(i, now)?,
                None => continue,
            }
            changed = true;
        }
        Ok(changed)
    }

    /// Job `i` crashed: started again with the same allocation, or failed once out of retries.
    fn crashed(&mut self, i: usize, x: &JobExit) -> Result<(), ExecError> {
        let tail = if x.stderr_tail.is_empty() {
            String::new()
        } else {
            format!("; its stderr ends with:\n{}", x.stderr_tail)
        };
        let rec = &mut self.state.jobs[i];
        if rec.retries >= self.cfg.max_retries {
            let msg = format!(
                "job `{}` failed ({}) after {} retries{tail}",
                rec.name, x.status, rec.retries
            );
            (self.log)(&msg);
            rec.error = Some(msg);
            rec.status = JobStatus::Failed;
            self.backend.stop(&rec.name)?;
            rec.allocation = None;
            rec.handle = None;
            self.live[i].allocation = None;
        } else {
            rec.retries += 1;
            (self.log)(&format!(
                "job `{}` crashed ({}); retry {} of {}{tail}",
                rec.name, x.status, rec.retries, self.cfg.max_retries
            ));
            self.backend.restart(&self.launches.of(self.list, i))?;
            rec.handle = self.backend.handle(&rec.name);
        }
        Ok(())
    }

    /// Job `i` did its work: its JCT counts from `now`, and nothing of it is left.
    fn finish(&mut self, i: usize, now: f64) -> Result<(), ExecError> {
        let rec = &mut self.state.jobs[i];
        rec.status = JobStatus::Done;
        rec.finish_s = Some(now);
        self.backend.stop(&rec.name)?;
        rec.allocation = None;
        rec.handle = None;
        self.live[i].allocation = None;
        (self.log)(&format!("job `{}` done at {now:.1} s", rec.name));
        Ok(())
    }

    /// One round at `now`: plans the arrived, unfinished jobs and applies the plan, then logs it.
    fn round(&mut self, now: f64) -> Result<(), ExecError> {
        let active: Vec<usize> = (0..self.list.jobs.len())
            .filter(|&i| {
                self.list.jobs[i].arrival_s <= now
                    && matches!(
                        self.state.jobs[i].status,
                        JobStatus::Waiting | JobStatus::Running | JobStatus::Paused
                    )
            })
            .collect();
        if active.is_empty() {
            return Ok(());
        }
        let allocations = self.plan(&active, now);
        let mut lines = vec![format!("round {} at {now:.1} s:", self.rounds)];
        // Pauses first, so the cores they free are free before anyone grows into them.
        for (k, &i) in active.iter().enumerate() {
            if allocations[k].is_none() {
                lines.push(self.leave_out(i)?);
            }
        }
        // Then changes to running and paused jobs, then starts.
        for starts in [false, true] {
            for (k, &i) in active.iter().enumerate() {
                let Some(a) = &allocations[k] else {
                    continue;
                };
                if starts == (self.state.jobs[i].status == JobStatus::Waiting) {
                    lines.push(self.give(i, a, now)?);
                }
            }
        }
        (self.log)(&lines.join("\n"));
        Ok(())
    }

    /// What the planner gives each of the `active` jobs (same order) for the round at `now`.
    fn plan(&mut self, active: &[usize], now: f64) -> Vec<Option<Allocation>> {
        let mut states: Vec<JobState> = active
            .iter()
            .map(|&i| {
                let j = &self.list.jobs[i];
                let rec = &self.state.jobs[i];
                let left = j.work_samples().saturating_sub(rec.samples_done);
                let mut s = job_state(
                    self.list,
                    i,
                    left.div_ceil(j.batch_size as u64),
                    rec.attained_s,
                );
                s.last_run_s = self.live[i].last_run_s;
                s.starved = self.live[i].starved;
                s
            })
            .collect();
        let previous: Vec<Option<Allocation>> = active
            .iter()
            .map(|&i| self.live[i].allocation.clone())
            .collect();
        let plan = self.planner.plan(&mut states, &previous, now);
        for (k, &i) in active.iter().enumerate() {
            self.live[i].starved = states[k].starved;
        }
        plan.allocations
    }

    /// Job `i` gets nothing this round: paused if it runs, else it waits. Returns its line of the log.
    fn leave_out(&mut self, i: usize) -> Result<String, ExecError> {
        let rec = &mut self.state.jobs[i];
        if rec.status == JobStatus::Running {
            self.backend.pause(&rec.name)?;
            rec.status = JobStatus::Paused;
            Ok(format!("  {:<16} paused", rec.name))
        } else {
            Ok(format!("  {:<16} waits", rec.name))
        }
    }

    /// Job `i` holds `a` for the round at `now`: started, resized, resumed or left as it runs. Returns
    /// its line of the log.
    fn give(&mut self, i: usize, a: &Allocation, now: f64) -> Result<String, ExecError> {
        let launch = self.launches.of(self.list, i);
        let rec = &mut self.state.jobs[i];
        let what = if rec.status == JobStatus::Waiting {
            self.backend.start(&launch, a)?;
            match self.backend.poll(&rec.name)?.samples_done {
                0 => "started".to_string(),
                n => format!("started from {n} samples"),
            }
        } else {
            let mut what = "runs";
            if self.live[i].allocation.as_ref() != Some(a) {
                what = match self.backend.reallocate(&launch, a)? {
                    Change::Live => "resized live",
                    Change::Restarted => {
                        rec.restarts += 1;
                        "restarted from its saved progress"
                    }
                    Change::Same => "runs",
                };
            }
            if rec.status == JobStatus::Paused {
                self.backend.resume(&rec.name)?;
                what = if what == "runs" { "resumed" } else { what };
            }
            what.to_string()
        };
        let round_s = self.cfg.round_s;
        rec.status = JobStatus::Running;
        rec.rounds_run += 1;
        rec.attained_s += round_s;
        rec.allocation = Some(a.clone());
        rec.handle = self.backend.handle(&rec.name);
        self.live[i].allocation = Some(a.clone());
        self.live[i].last_run_s = now + round_s;
        Ok(format!("  {:<16} {} ({what})", rec.name, fmt_alloc(a)))
    }

    /// Stops every job still started, keeping its progress (it continues on `--resume`), and saves the
    /// state file.
    fn stop_all(&mut self) -> Result<(), ExecError> {
        for (i, rec) in self.state.jobs.iter_mut().enumerate() {
            if matches!(rec.status, JobStatus::Running | JobStatus::Paused) {
                if let Ok(p) = self.backend.poll(&rec.name) {
                    rec.samples_done = p.samples_done;
                }
                let _ = self.backend.stop(&rec.name);
                rec.status = JobStatus::Waiting;
                rec.allocation = None;
                rec.handle = None;
                self.live[i].allocation = None;
            }
        }
        self.state.write(&self.cfg.state_path)
    }

    /// The run's report: every job's real JCT beside its `predicted` one.
    fn report(
        &self,
        servers: Vec<ServerInfo>,
        predicted: &[Option<f64>],
        makespan_s: f64,
        interrupted: Option<i32>,
    ) -> RunReport {
        let (list, cfg) = (self.list, self.cfg);
        let mut results = Vec::new();
        for (i, (j, rec)) in list.jobs.iter().zip(&self.state.jobs).enumerate() {
            let real = rec.finish_s.map(|f| f - j.arrival_s);
            let pred = predicted[i];
            results.push(JobResult {
                name: j.name.clone(),
                workload: j.spec.name.clone(),
                gpus: j.gpus,
                samples: j.work_samples(),
                arrival_s: j.arrival_s,
                status: rec.status,
                real_jct_s: real,
                predicted_jct_s: pred,
                difference: real.zip(pred).map(|(r, p)| (r - p) / p),
                retries: rec.retries,
                restarts: rec.restarts,
                error: rec.error.clone(),
            });
        }
        let both: Vec<(f64, f64)> = results
            .iter()
            .filter_map(|r| r.real_jct_s.zip(r.predicted_jct_s))
            .collect();
        let (mean_real, mean_pred) = if both.is_empty() {
            (None, None)
        } else {
            let n = both.len() as f64;
            (
                Some(both.iter().map(|b| b.0).sum::<f64>() / n),
                Some(both.iter().map(|b| b.1).sum::<f64>() / n),
            )
        };
        RunReport {
            job_list: list.path.display().to_string(),
            backend: self.backend.name().to_string(),
            policy: cfg.policy.clone(),
            mechanism: cfg.mechanism.clone(),
            round_s: cfg.round_s,
            servers,
            jobs: results,
            mean_real_jct_s: mean_real,
            mean_predicted_jct_s: mean_pred,
            mean_difference: mean_real.zip(mean_pred).map(|(r, p)| (r - p) / p),
            rounds: self.rounds,
            makespan_s,
            interrupted,
        }
    }
}

fn fresh_state(
    list: &JobList,
    backend: &dyn Backend,
    cfg: &ExecConfig,
    jobs_dir: &Path,
    clock: &dyn Clock,
) -> Result<RunState, ExecError> {
    // A new run starts every job from zero: earlier progress files of these jobs go.
    for j in &list.jobs {
        let p = jobs_dir.join(format!("{}.json", j.name));
        match std::fs::remove_file(&p) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => {
                return Err(ExecError::Io {
                    context: format!("removing {}", p.display()),
                    source: e,
                })
            }
        }
    }
    Ok(RunState {
        schema: SCHEMA.to_string(),
        job_list: list.path.display().to_string(),
        backend: backend.name().to_string(),
        policy: cfg.policy.clone(),
        mechanism: cfg.mechanism.clone(),
        round_s: cfg.round_s,
        started_unix_s: clock.unix_s(),
        executor_pid: std::process::id(),
        jobs: list
            .jobs
            .iter()
            .map(|j| JobRecord {
                name: j.name.clone(),
                status: JobStatus::Waiting,
                samples_done: 0,
                finish_s: None,
                retries: 0,
                restarts: 0,
                rounds_run: 0,
                attained_s: 0.0,
                allocation: None,
                handle: None,
                error: None,
            })
            .collect(),
    })
}

fn pid_alive(pid: u32) -> bool {
    pid != std::process::id() && Path::new(&format!("/proc/{pid}")).exists()
}

fn resume_state(
    list: &JobList,
    backend: &mut dyn Backend,
    cfg: &ExecConfig,
    log: &mut dyn FnMut(&str),
) -> Result<RunState, ExecError> {
    let origin = cfg.state_path.display().to_string();
    let mut st = RunState::read(&cfg.state_path)?;
    let names: Vec<&str> = st.jobs.iter().map(|j| j.name.as_str()).collect();
    let want: Vec<&str> = list.jobs.iter().map(|j| j.name.as_str()).collect();
    if names != want {
        return Err(InputError::field(
            &origin,
            "jobs",
            format!(
                "records jobs {names:?}, but {} lists {want:?}; resume with the same job list",
                list.path.display()
            ),
        )
        .into());
    }
    if st.backend != backend.name() {
        return Err(InputError::field(
            &origin,
            "backend",
            format!(
                "the run used the {} backend, not {}",
                st.backend,
                backend.name()
            ),
        )
        .into());
    }
    if pid_alive(st.executor_pid)
        && std::fs::read_to_string(format!("/proc/{}/cmdline", st.executor_pid))
            .is_ok_and(|c| c.contains("synergy"))
    {
        return Err(InputError::new(
            &origin,
            format!(
                "executor {} is still running this job list; stop it first",
                st.executor_pid
            ),
        )
        .into());
    }
    let handles: Vec<super::JobHandle> = st.jobs.iter().filter_map(|j| j.handle.clone()).collect();
    let removed = backend.clean_orphans(st.executor_pid, &handles)?;
    if removed > 0 {
        log(&format!(
            "resume: removed {removed} job(s) left by executor {}",
            st.executor_pid
        ));
    }
    for j in st.jobs.iter_mut() {
        if matches!(j.status, JobStatus::Running | JobStatus::Paused) {
            // Relaunched from its own saved progress at the next round.
            j.status = JobStatus::Waiting;
        }
        j.allocation = None;
        j.handle = None;
    }
    st.policy = cfg.policy.clone();
    st.mechanism = cfg.mechanism.clone();
    st.round_s = cfg.round_s;
    Ok(st)
}

#[cfg(test)]
mod tests {
    //! The round loop through the fake backend on a fake clock (0.25 s per poll): every test checks the
    //! exact calls the executor made, when, and what it reported.

    use super::*;
    use crate::exec::fake::{Call, FakeBackend, FakeClock, FakeTime, DIED, SIGTERM};
    use crate::exec::state::JobStatus;

    const STEP_S: f64 = 0.25;

    /// A job list in `dir` of (name, profile, samples, arrival_s); each profile's spec launches nothing
    /// and reads no dataset, so nothing is prepared.
    fn job_list(dir: &Path, jobs: &[(&str, &str, u64, f64)]) -> JobList {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let mut text = String::new();
        for (name, profile, samples, arrival) in jobs {
            let spec = dir.join(format!("{profile}.toml"));
            std::fs::write(
                &spec,
                format!("name = \"{profile}\"\ncommand = [\"true\"]\nbatch_size = 32\n"),
            )
            .unwrap();
            text.push_str(&format!(
                "[[job]]\nname = \"{name}\"\nworkload = \"{}\"\nprofile = \"{}\"\nsamples = {samples}\narrival_s = {arrival}\n\n",
                spec.display(),
                root.join("profiles").join(format!("{profile}.json")).display()
            ));
        }
        let path = dir.join("jobs.toml");
        std::fs::write(&path, text).unwrap();
        JobList::read(&path).unwrap()
    }

    fn config(dir: &Path, policy: &str, mechanism: &str, max_retries: u32) -> ExecConfig {
        ExecConfig {
            policy: policy.into(),
            mechanism: mechanism.into(),
            round_s: 2.0,
            max_retries,
            state_path: dir.join("jobs.state.json"),
            resume: false,
        }
    }

    /// Runs `list` on `backend` with `clock`; the report and the lines logged.
    fn go(
        list: &JobList,
        backend: &mut FakeBackend,
        cfg: &ExecConfig,
        cancel: &Cancel,
        clock: &mut FakeClock,
    ) -> (RunReport, String) {
        let mut lines = Vec::new();
        let report = run_on(
            list,
            backend,
            cfg,
            cancel,
            &mut |l: &str| lines.push(l.to_string()),
            clock,
        )
        .unwrap();
        (report, lines.join("\n"))
    }

    fn result<'r>(r: &'r RunReport, name: &str) -> &'r JobResult {
        r.jobs.iter().find(|j| j.name == name).unwrap()
    }

    fn start(from: u64, gpus: &[u32]) -> Call {
        Call::Start {
            gpus: gpus.to_vec(),
            from,
        }
    }

    #[test]
    fn jobs_start_at_the_first_round_after_they_arrive_and_queue_for_free_gpus() {
        let dir = tempfile::tempdir().unwrap();
        // Two GPUs: b and c arrive together at 3 s, b takes the free GPU at the round at 4 s and c waits
        // until b's GPU is free again.
        let list = job_list(
            dir.path(),
            &[
                ("a", "text", 8000, 0.0),
                ("b", "text", 2000, 3.0),
                ("c", "text", 2000, 3.0),
            ],
        );
        let time = FakeTime::default();
        let mut backend = FakeBackend::new(&time, 2, 8, 64, 1000.0);
        let cfg = config(dir.path(), "fifo", "proportional", 0);
        let (report, log) = go(
            &list,
            &mut backend,
            &cfg,
            &Cancel::new(),
            &mut FakeClock::new(&time, STEP_S),
        );
        let gpus = |job: &str| match &backend.calls(job)[0] {
            Call::Start { gpus, .. } => gpus.clone(),
            other => panic!("{job} began with {other:?}"),
        };
        let (a, b) = (gpus("a"), gpus("b"));
        assert!(a.len() == 1 && b.len() == 1 && a != b, "{a:?} {b:?}");
        assert_eq!(gpus("c"), b);
        for (job, times) in [("a", [0.0, 8.0]), ("b", [4.0, 6.0]), ("c", [6.0, 8.0])] {
            assert_eq!(
                backend.calls(job),
                [start(0, &gpus(job)), Call::Stop],
                "{job}"
            );
            assert_eq!(backend.times(job), times, "{job}");
        }
        assert!(
            log.contains("round 3 at 4.0 s:\n  c                waits\n"),
            "{log}"
        );
        assert!(log.contains("job `b` done at 6.0 s"), "{log}");
        let jcts: Vec<Option<f64>> = ["a", "b", "c"]
            .iter()
            .map(|j| result(&report, j).real_jct_s)
            .collect();
        assert_eq!(jcts, [Some(8.0), Some(3.0), Some(5.0)]);
        assert!(report
            .jobs
            .iter()
            .all(|j| j.status == JobStatus::Done && j.predicted_jct_s.is_some()));
        // Rounds at 0, 2, 4 and 6 s; at 8 s every job is done before a fifth.
        assert_eq!((report.rounds, report.makespan_s), (4, 8.0));
        assert_eq!(report.interrupted, None);
        // The state file says the same.
        let st = RunState::read(&cfg.state_path).unwrap();
        assert!(st
            .jobs
            .iter()
            .all(|j| j.status == JobStatus::Done && j.handle.is_none() && j.allocation.is_none()));
        assert_eq!(st.jobs[1].finish_s, Some(6.0));
    }

    /// Two equal jobs on one GPU under LAS: they take turns, round by round.
    fn taking_turns(dir: &Path) -> (JobList, ExecConfig) {
        let list = job_list(dir, &[("a", "text", 6400, 0.0), ("b", "text", 6400, 0.0)]);
        (list, config(dir, "las", "proportional", 0))
    }

    #[test]
    fn a_job_that_loses_its_gpu_is_paused_and_resumed_where_it_stood() {
        let dir = tempfile::tempdir().unwrap();
        let (list, cfg) = taking_turns(dir.path());
        let time = FakeTime::default();
        let mut backend = FakeBackend::new(&time, 1, 4, 64, 1600.0);
        let (report, log) = go(
            &list,
            &mut backend,
            &cfg,
            &Cancel::new(),
            &mut FakeClock::new(&time, STEP_S),
        );
        let turns = [start(0, &[0]), Call::Pause, Call::Resume, Call::Stop];
        assert_eq!(backend.calls("a"), turns);
        assert_eq!(backend.times("a"), [0.0, 2.0, 4.0, 6.0]);
        assert_eq!(backend.calls("b"), turns);
        assert_eq!(backend.times("b"), [2.0, 4.0, 6.0, 8.0]);
        // Pauses go first, so the GPU is free before b takes it.
        let seq: Vec<(&str, &Call)> = backend
            .sequence()
            .iter()
            .filter(|c| c.0 == 2.0)
            .map(|c| (c.1.as_str(), &c.2))
            .collect();
        assert_eq!(seq, [("a", &Call::Pause), ("b", &start(0, &[0]))]);
        assert!(
            log.contains("  a                paused\n  b                gpu 0"),
            "{log}"
        );
        assert!(log.contains("(resumed)"), "{log}");
        // Paused, a made no progress: two rounds of work each, done one after the other.
        assert_eq!(result(&report, "a").real_jct_s, Some(6.0));
        assert_eq!(result(&report, "b").real_jct_s, Some(8.0));
        assert_eq!(result(&report, "a").restarts, 0);
    }

    #[test]
    fn tune_resizes_a_running_job_live_when_another_arrives_and_when_it_leaves() {
        let dir = tempfile::tempdir().unwrap();
        // Two GPUs, two cores: alone, `first` gets its best case (the image profile's 1.25 cores per
        // GPU); with `second` beside it, each gets its proportional core.
        let list = job_list(
            dir.path(),
            &[
                ("first", "image", 6000, 0.0),
                ("second", "image", 1000, 3.0),
            ],
        );
        let best = list
            .catalog
            .get(list.jobs[0].model as usize)
            .best_cpus_per_gpu;
        assert!(best > 1.0 && best < 2.0, "{best}");
        let time = FakeTime::default();
        let mut backend = FakeBackend::new(&time, 2, 2, 64, 500.0);
        let cfg = config(dir.path(), "fifo", "tune", 0);
        let (report, log) = go(
            &list,
            &mut backend,
            &cfg,
            &Cancel::new(),
            &mut FakeClock::new(&time, STEP_S),
        );
        let calls = backend.calls("first");
        let Call::Start { gpus, .. } = &calls[0] else {
            panic!("{calls:?}");
        };
        let resize = |cpus: f64| Call::Reallocate {
            gpus: gpus.clone(),
            cpus,
            change: Change::Live,
        };
        assert_eq!(
            calls,
            [start(0, gpus), resize(1.0), resize(best), Call::Stop],
            "{log}"
        );
        assert_eq!(backend.times("first"), [0.0, 4.0, 6.0, 12.0]);
        // Shrunk before the newcomer starts, in the same round.
        let at4: Vec<&str> = backend
            .sequence()
            .iter()
            .filter(|c| c.0 == 4.0)
            .map(|c| c.1.as_str())
            .collect();
        assert_eq!(at4, ["first", "second"]);
        assert!(log.contains("(resized live)"), "{log}");
        assert_eq!(result(&report, "first").restarts, 0);
        assert_eq!(result(&report, "second").real_jct_s, Some(3.0));
    }

    #[test]
    fn a_crashed_job_is_restarted_from_its_progress_and_one_that_keeps_crashing_fails() {
        let dir = tempfile::tempdir().unwrap();
        let list = job_list(
            dir.path(),
            &[("flaky", "text", 3000, 0.0), ("broken", "text", 3000, 0.0)],
        );
        let time = FakeTime::default();
        let mut backend = FakeBackend::new(&time, 2, 4, 64, 1000.0)
            .crash_at("flaky", &[1000])
            .crash_at("broken", &[500, 1000, 1500]);
        let cfg = config(dir.path(), "fifo", "proportional", 2);
        let (report, log) = go(
            &list,
            &mut backend,
            &cfg,
            &Cancel::new(),
            &mut FakeClock::new(&time, STEP_S),
        );
        let gpus = |job: &str| match &backend.calls(job)[0] {
            Call::Start { gpus, .. } => gpus.clone(),
            other => panic!("{job} began with {other:?}"),
        };
        assert_eq!(
            backend.calls("flaky"),
            [
                start(0, &gpus("flaky")),
                Call::Restart { from: 1000 },
                Call::Stop
            ]
        );
        assert_eq!(backend.times("flaky"), [0.0, 1.0, 3.0]);
        assert_eq!(
            backend.calls("broken"),
            [
                start(0, &gpus("broken")),
                Call::Restart { from: 500 },
                Call::Restart { from: 1000 },
                Call::Stop
            ]
        );
        assert_eq!(backend.times("broken"), [0.0, 0.5, 1.0, 1.5]);
        let flaky = result(&report, "flaky");
        assert_eq!(
            (flaky.status, flaky.retries, flaky.real_jct_s),
            (JobStatus::Done, 1, Some(3.0))
        );
        let broken = result(&report, "broken");
        assert_eq!((broken.status, broken.retries), (JobStatus::Failed, 2));
        assert_eq!(
            broken.error.as_deref(),
            Some("job `broken` failed (exit status 3) after 2 retries; its stderr ends with:\nboom at 1500")
        );
        assert!(
            log.contains("job `broken` crashed (exit status 3); retry 1 of 2; its stderr ends with:\nboom at 500"),
            "{log}"
        );
        let st = RunState::read(&cfg.state_path).unwrap();
        assert_eq!(st.jobs[1].samples_done, 1500);
    }

    #[test]
    fn an_interrupted_run_stops_every_job_and_resumes_from_their_progress() {
        let dir = tempfile::tempdir().unwrap();
        let (list, mut cfg) = taking_turns(dir.path());
        let time = FakeTime::default();
        let cancel = Cancel::new();
        let mut first = FakeBackend::new(&time, 1, 4, 64, 1600.0);
        let (report, _) = go(
            &list,
            &mut first,
            &cfg,
            &cancel,
            &mut FakeClock::new(&time, STEP_S).signal_at(3.0, &cancel),
        );
        assert_eq!(report.interrupted, Some(SIGTERM));
        assert_eq!(report.makespan_s, 3.0);
        // Every job stopped, a while paused and b while running, each with its progress saved.
        assert_eq!(first.calls("a"), [start(0, &[0]), Call::Pause, Call::Stop]);
        assert_eq!(first.calls("b"), [start(0, &[0]), Call::Stop]);
        let st = RunState::read(&cfg.state_path).unwrap();
        let saved: Vec<(JobStatus, u64, bool)> = st
            .jobs
            .iter()
            .map(|j| (j.status, j.samples_done, j.handle.is_none()))
            .collect();
        assert_eq!(
            saved,
            [
                (JobStatus::Waiting, 3200, true),
                (JobStatus::Waiting, 1600, true)
            ]
        );

        cfg.resume = true;
        let mut second = FakeBackend::new(&time, 1, 4, 64, 1600.0);
        let (report, log) = go(
            &list,
            &mut second,
            &cfg,
            &Cancel::new(),
            &mut FakeClock::new(&time, STEP_S),
        );
        // Nothing was left to clean up, and each job went on from its own saved progress.
        assert_eq!(second.orphan_calls, [(std::process::id(), vec![])]);
        assert!(!log.contains("resume: removed"), "{log}");
        assert_eq!(second.calls("a"), [start(3200, &[0]), Call::Stop]);
        assert_eq!(second.times("a"), [3.0, 5.0]);
        assert_eq!(second.calls("b"), [start(1600, &[0]), Call::Stop]);
        assert_eq!(second.times("b"), [5.0, 8.0]);
        assert!(log.contains("(started from 3200 samples)"), "{log}");
        // JCTs count from the first executor's start.
        assert_eq!(result(&report, "a").real_jct_s, Some(5.0));
        assert_eq!(result(&report, "b").real_jct_s, Some(8.0));
        // Rounds at 3, 5 and 7 s by this executor.
        assert_eq!((report.rounds, report.interrupted), (3, None));
    }

    #[test]
    fn a_killed_executor_s_jobs_are_cleaned_up_on_resume_and_continue() {
        let dir = tempfile::tempdir().unwrap();
        let (list, mut cfg) = taking_turns(dir.path());
        let time = FakeTime::default();
        let mut first = FakeBackend::new(&time, 1, 4, 64, 1600.0);
        let died = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            go(
                &list,
                &mut first,
                &cfg,
                &Cancel::new(),
                &mut FakeClock::new(&time, STEP_S).die_at(3.0),
            )
        }))
        .expect_err("the executor died");
        assert_eq!(
            died.downcast_ref::<String>().map(String::as_str),
            Some(DIED)
        );
        // Nothing was stopped: the state file still names both jobs' domains, as of the round at 2 s.
        assert!(
            first.calls("b") == [start(0, &[0])],
            "{:?}",
            first.calls("b")
        );
        let st = RunState::read(&cfg.state_path).unwrap();
        let left: Vec<(JobStatus, Option<String>)> = st
            .jobs
            .iter()
            .map(|j| (j.status, j.handle.clone().and_then(|h| h.domain)))
            .collect();
        assert_eq!(
            left,
            [
                (JobStatus::Paused, Some("fake-a".into())),
                (JobStatus::Running, Some("fake-b".into()))
            ]
        );

        cfg.resume = true;
        let mut second = FakeBackend::new(&time, 1, 4, 64, 1600.0);
        let (report, log) = go(
            &list,
            &mut second,
            &cfg,
            &Cancel::new(),
            &mut FakeClock::new(&time, STEP_S),
        );
        let pid = std::process::id();
        assert_eq!(
            second.orphan_calls,
            [(pid, vec!["fake-a".to_string(), "fake-b".to_string()])]
        );
        assert!(
            log.starts_with(&format!(
                "resume: removed 2 job(s) left by executor {pid}\n"
            )),
            "{log}"
        );
        // b's workload saved 0.75 s of work (1200 samples) before its executor died.
        assert_eq!(second.calls("a"), [start(3200, &[0]), Call::Stop]);
        assert_eq!(second.calls("b"), [start(1200, &[0]), Call::Stop]);
        assert_eq!(result(&report, "b").real_jct_s, Some(8.25));
        assert!(report.jobs.iter().all(|j| j.status == JobStatus::Done));
    }
}
