//! The round loop of a real run: every round the planner decides from the jobs' real progress, and the
//! backend applies the changes (start, resize live, pause, resume); between rounds jobs are polled, a
//! finished job's JCT is recorded, a crashed one is retried a bounded number of times, and the state file
//! is kept current. The simulator's prediction of the same job list and the dry-run plan are in `preview`.
//!
//! The loop asks a backend only what [`Backend`] offers, and reads time from a `Clock`, so that its
//! unit tests drive it through an in-process fake backend on a fake clock, without root or real rounds.

use super::jobs::JobList;
use super::planner::{cluster_of_servers, Planner};
use super::{
    job_state_dir, Allocation, Backend, Change, ExecError, JobExit, JobLaunch, ServerInfo, Work,
};
use crate::cancel::Cancel;
use crate::clock::unix_now_s;
use crate::error::InputError;
use crate::format::run_state::{JobRecord, JobStatus, RunState, SCHEMA};
use crate::sched::{self, JobState};
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
    /// Start over even when the state file records an earlier run; without it (or `resume`), an
    /// existing state file is refused rather than overwritten.
    pub fresh: bool,
    /// Refine each job's profile from the run's observations between rounds, so the planner's next
    /// round uses the refined matrix (docs/run.md, "Refinement").
    pub refine: bool,
    /// Fold observations that other work disturbed into refinement too.
    pub include_disturbed: bool,
}

/// A policy and a mechanism, by name.
type Scheduler = (Box<dyn sched::Policy>, Box<dyn sched::Mechanism>);

fn policy_and_mechanism(cfg_policy: &str, cfg_mechanism: &str) -> Result<Scheduler, InputError> {
    let p = sched::policy_by_name(cfg_policy)?;
    let m = sched::mechanism_by_name(cfg_mechanism)?;
    Ok((p, m))
}

/// GPUs of all servers together: no job may ask for more. A job wider than one server is spread over
/// several, as the simulator spreads it (docs/run.md, "Jobs over several servers").
fn total_gpus(servers: &[ServerInfo]) -> u32 {
    servers.iter().map(|s| s.gpus.len() as u32).sum()
}

/// The list against the servers, before anything is planned or launched: every job fits the servers'
/// GPUs, and the roomiest server's memory share holds its footprint.
pub fn check_servers(list: &JobList, servers: &[ServerInfo]) -> Result<(), InputError> {
    list.check_fits(total_gpus(servers), "the servers have")?;
    let per_gpu = |s: &ServerInfo| s.memory.0 as f64 / s.gpus.len().max(1) as f64;
    match servers
        .iter()
        .max_by(|a, b| per_gpu(a).total_cmp(&per_gpu(b)))
    {
        Some(s) => list.check_memory(s.memory, s.gpus.len() as u32),
        None => Ok(()),
    }
}

/// The names of the servers `a` runs on, one per part.
fn server_names(a: &Allocation, servers: &[ServerInfo]) -> Vec<String> {
    a.parts
        .iter()
        .map(|p| {
            servers
                .get(p.server)
                .map_or_else(|| p.server.to_string(), |s| s.name.clone())
        })
        .collect()
}

/// An allocation for people: per part, its GPUs, cores and memory and the server (`names`, one per
/// part) they are on; the parts of a spread job joined by `+`.
fn fmt_alloc(a: &Allocation, names: &[String]) -> String {
    let parts: Vec<String> = a
        .parts
        .iter()
        .zip(names)
        .map(|(p, name)| {
            let gpus: Vec<String> = p.gpus.iter().map(|g| g.to_string()).collect();
            let cores: Vec<String> = p.cores.iter().map(|c| c.to_string()).collect();
            format!(
                "gpu {} cores {} ({:.2}) mem {} on {name}",
                gpus.join(","),
                cores.join(","),
                p.cpus.0,
                p.memory
            )
        })
        .collect();
    parts.join(" + ")
}

/// Job `i`'s scheduler state, its time per iteration from `catalog` (the list's, or the planner's
/// with refined models).
fn job_state(
    list: &JobList,
    catalog: &crate::sched::catalog::Catalog,
    i: usize,
    remaining_iters: u64,
    attained_s: f64,
) -> JobState {
    let j = &list.jobs[i];
    let mut state = JobState::arrived(
        i as u64,
        j.model,
        j.gpus,
        j.arrival_s,
        j.work_iters(),
        catalog,
    );
    state.remaining_iters = remaining_iters;
    state.attained_s = attained_s;
    state
}

/// Per-job bookkeeping of a live run beyond the state file.
struct Live {
    allocation: Option<Allocation>,
    last_run_s: f64,
    starved: bool,
    /// When its current observation window opened, seconds since the run started.
    window_from_s: f64,
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
    crate::sim::check_round(cfg.round_s)?;
    let servers = backend.servers().to_vec();
    check_servers(list, &servers)?;
    let (policy, mechanism) = policy_and_mechanism(&cfg.policy, &cfg.mechanism)?;
    // The prediction first: it also validates the list against the cluster before anything starts.
    let predicted = predict(
        list,
        &cluster_of_servers(&servers),
        cfg.round_s,
        &cfg.policy,
        &cfg.mechanism,
    )?;
    let planner = Planner::new(list.catalog.clone(), servers.clone(), policy, mechanism);
    let jobs_dir = job_state_dir(&cfg.state_path);
    // Datasets are prepared before the run's clock starts (the state file's start time), so that a
    // first run's JCTs do not count generating them.
    let launches = Launches::prepare(list, &*backend, &jobs_dir, cancel)?;
    let state = open_state(list, backend, cfg, &jobs_dir, &*clock, log)?;
    let learner = learn::Learner::open(
        list,
        &cfg.state_path,
        cfg.resume,
        cfg.refine,
        cfg.include_disturbed,
        log,
    )?;

    let mut run = RoundLoop::new(
        list, cfg, backend, clock, log, planner, launches, state, learner,
    );
    let outcome = run.until_end(cancel);
    // Whatever ended the loop, nothing of this run is left running: progress is saved by the jobs
    // (SIGTERM) and in the state file.
    let makespan_s = run.elapsed();
    let saved = run.stop_all();
    let interrupted = outcome?;
    saved?;
    Ok(run.report(servers, &predicted, makespan_s, interrupted))
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
            model: &list.catalog.get(j.model as usize).name,
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
    learner: learn::Learner,
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
        learner: learn::Learner,
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
                window_from_s: 0.0,
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
            learner,
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
                save_state(&self.state, &self.cfg.state_path)?;
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
        let (status, mut tail) = if x.oom_killed {
            self.oom_advice(i, &x.status)
        } else {
            (x.status.clone(), String::new())
        };
        if !x.stderr_tail.is_empty() {
            tail.push_str(&format!("; its stderr ends with:\n{}", x.stderr_tail));
        }
        let rec = &mut self.state.jobs[i];
        if rec.retries >= self.cfg.max_retries {
            let msg = format!(
                "job `{}` failed ({}) after {} retries{tail}",
                rec.name, status, rec.retries
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
                rec.name, status, rec.retries, self.cfg.max_retries
            ));
            self.backend.restart(&self.launches.of(self.list, i))?;
            rec.handle = self.backend.handle(&rec.name);
        }
        Ok(())
    }

    /// Job `i`, killed by the kernel's OOM killer with exit `status`, ran in less memory than it needs,
    /// which its profile's demand (and footprint) did not say: the status with that, and what to do.
    fn oom_advice(&self, i: usize, status: &str) -> (String, String) {
        let j = &self.list.jobs[i];
        let held = self.state.jobs[i]
            .allocation
            .as_ref()
            .map(|a| format!(", at {} of memory", a.memory()))
            .unwrap_or_default();
        (
            format!("{status}: the kernel's OOM killer{held}"),
            format!(
                "; it needs more memory than its profile {} asks: declare `footprint` in {} (the least it runs in, which the planner never goes below; docs/workload-spec.md) or give it a profile of its own workload",
                j.profile_path.display(),
                j.spec.origin
            ),
        )
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
        let learned = self.observe(now)?;
        let allocations = self.plan(&active, now);
        let mut lines = vec![format!("round {} at {now:.1} s:", self.rounds)];
        lines.extend(learned);
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

    /// Each running job's throughput over the round that ends at `now`, into the observation log; with
    /// `--refine`, the profiles refined from it for the round about to be planned. Returns the log's
    /// lines about refinement.
    fn observe(&mut self, now: f64) -> Result<Vec<String>, ExecError> {
        let mut new = 0;
        for i in 0..self.list.jobs.len() {
            if self.state.jobs[i].status != JobStatus::Running {
                continue;
            }
            let Some(a) = self.live[i].allocation.clone() else {
                continue;
            };
            let from = self.live[i].window_from_s;
            let Some(w) = self.backend.observe(&self.list.jobs[i].name) else {
                continue;
            };
            self.live[i].window_from_s = now;
            self.learner.record(
                self.list,
                self.planner.catalog(),
                i,
                &a,
                w,
                self.rounds,
                from,
                now,
            )?;
            new += 1;
        }
        Ok(self
            .learner
            .refine_round(self.list, self.planner.catalog_mut(), new))
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
                    self.planner.catalog(),
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
        if what != "runs" {
            self.live[i].window_from_s = now;
        }
        let round_s = self.cfg.round_s;
        rec.status = JobStatus::Running;
        rec.rounds_run += 1;
        rec.attained_s += round_s;
        rec.allocation = Some(a.clone());
        rec.handle = self.backend.handle(&rec.name);
        self.live[i].allocation = Some(a.clone());
        self.live[i].last_run_s = now + round_s;
        let names = server_names(a, self.planner.servers());
        Ok(format!(
            "  {:<16} {} ({what})",
            rec.name,
            fmt_alloc(a, &names)
        ))
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
        save_state(&self.state, &self.cfg.state_path)
    }

    /// The run's report: every job's real JCT beside its `predicted` one.
    fn report(
        &mut self,
        servers: Vec<ServerInfo>,
        predicted: &[Option<f64>],
        makespan_s: f64,
        interrupted: Option<i32>,
    ) -> RunReport {
        let (list, cfg) = (self.list, self.cfg);
        let mut refined_dir = cfg.state_path.as_os_str().to_owned();
        refined_dir.push(".refined");
        let refined_profiles = self
            .learner
            .finish(self.planner.catalog(), Path::new(&refined_dir));
        // The same queue predicted again from the refined profiles; a failure here only leaves it out.
        let refined_pred = self
            .learner
            .refined_catalog(list)
            .and_then(|c| {
                preview::predict_with(
                    &c,
                    list,
                    &cluster_of_servers(&servers),
                    cfg.round_s,
                    &cfg.policy,
                    &cfg.mechanism,
                )
                .ok()
            })
            .unwrap_or_else(|| vec![None; list.jobs.len()]);
        let mut results = Vec::new();
        for (i, (j, rec)) in list.jobs.iter().zip(&self.state.jobs).enumerate() {
            let real = rec.finish_s.map(|f| f - j.arrival_s);
            let pred = predicted[i];
            let pred_refined = refined_pred[i];
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
                predicted_refined_jct_s: pred_refined,
                difference_refined: real.zip(pred_refined).map(|(r, p)| (r - p) / p),
                retries: rec.retries,
                restarts: rec.restarts,
                error: rec.error.clone(),
                fidelity: self.learner.fidelity(list, &list.catalog, i),
            });
        }
        let (mean_real, mean_pred) =
            means(results.iter().map(|r| (r.real_jct_s, r.predicted_jct_s)));
        let (mean_real_r, mean_pred_r) = means(
            results
                .iter()
                .map(|r| (r.real_jct_s, r.predicted_refined_jct_s)),
        );
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
            mean_predicted_refined_jct_s: mean_pred_r,
            mean_difference_refined: mean_real_r.zip(mean_pred_r).map(|(r, p)| (r - p) / p),
            rounds: self.rounds,
            makespan_s,
            interrupted,
            refine: cfg.refine,
            observation_log: self.learner.log_path().display().to_string(),
            observations: self.learner.observations.len(),
            disturbed_observations: self
                .learner
                .observations
                .iter()
                .filter(|o| o.disturbed)
                .count(),
            refined_profiles,
        }
    }
}

mod learn;
mod preview;
mod report;
mod resume;

#[cfg(test)]
mod tests;

pub use learn::FidelityPoint;
use report::means;
pub use report::{JobResult, RunReport};
use resume::{open_state, save_state};

pub use preview::{dry_run, predict, PlannedJob, PlannedRound};
