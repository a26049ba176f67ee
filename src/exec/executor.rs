//! The round loop of a real run: every round the planner decides from the jobs' real progress, and the
//! backend applies the changes (start, resize live, pause, resume); between rounds jobs are polled, a
//! finished job's JCT is recorded, a crashed one is retried a bounded number of times, and the state file
//! is kept current. Also the simulator's prediction of the same job list, and the dry-run plan.

use super::jobs::JobList;
use super::local::loader_cores;
use super::plan::{cluster_of, Planner};
use super::state::{unix_now_s, JobRecord, JobStatus, RunState, SCHEMA};
use super::{job_state_dir, Allocation, Backend, Change, ExecError, JobLaunch, ServerInfo, Work};
use crate::cancel::Cancel;
use crate::error::InputError;
use crate::sched::ClusterConfig;
use crate::sched::{self, JobState};
use crate::sim::{self, SimConfig, TraceSource};
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

/// Runs the job list on `backend` to the end (or until `cancel`), printing each round's changes
/// through `log`; returns the report with the simulator's predictions beside the real JCTs.
pub fn run(
    list: &JobList,
    backend: &mut dyn Backend,
    cfg: &ExecConfig,
    cancel: &Cancel,
    log: &mut dyn FnMut(&str),
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
    let mut planner = Planner::new(list.catalog.clone(), servers.clone(), policy, mechanism);

    let jobs_dir = job_state_dir(&cfg.state_path);
    let mut state = if cfg.resume {
        resume_state(list, backend, cfg, log)?
    } else {
        fresh_state(list, backend, cfg, &jobs_dir)?
    };
    std::fs::create_dir_all(&jobs_dir).map_err(|e| ExecError::Io {
        context: format!("creating {}", jobs_dir.display()),
        source: e,
    })?;
    state.executor_pid = std::process::id();
    state.write(&cfg.state_path)?;

    // Datasets once per workload, before the clock matters.
    let mut datasets: HashMap<String, Option<PathBuf>> = HashMap::new();
    let hidden = indicatif::ProgressBar::hidden();
    for j in &list.jobs {
        if !datasets.contains_key(&j.spec.origin) {
            let d = crate::measure::trial::prepare_dataset(&j.spec, &hidden, cancel)
                .map_err(|e| {
                    if e.is_input() {
                        ExecError::Input(InputError::new(&j.spec.origin, e.to_string()))
                    } else {
                        ExecError::Other(format!("preparing the dataset of {}: {e}", j.spec.origin))
                    }
                })?
                .map(|(dir, _, _)| dir);
            datasets.insert(j.spec.origin.clone(), d);
        }
    }
    let state_files: Vec<PathBuf> = list
        .jobs
        .iter()
        .map(|j| jobs_dir.join(format!("{}.json", j.name)))
        .collect();
    let loader: Vec<crate::units::Cores> = list
        .jobs
        .iter()
        .map(|j| {
            let m = list.catalog.get(j.model as usize);
            let widest = servers
                .iter()
                .max_by_key(|s| s.gpus.len())
                .expect("a backend has a server");
            loader_cores(m.best_cpus_per_gpu, j.gpus, widest)
        })
        .collect();
    let launch = |i: usize| JobLaunch {
        name: &list.jobs[i].name,
        spec: &list.jobs[i].spec,
        dataset: datasets
            .get(&list.jobs[i].spec.origin)
            .and_then(|d| d.as_deref()),
        footprint_bytes: list.jobs[i].footprint_bytes,
        work: list.jobs[i].work,
        state_file: &state_files[i],
        loader_cpus: loader[i],
    };

    let elapsed_at_start = (unix_now_s() - state.started_unix_s).max(0.0);
    let t0 = Instant::now() - Duration::from_secs_f64(elapsed_at_start);
    let elapsed = || t0.elapsed().as_secs_f64();
    let mut live: Vec<Live> = list
        .jobs
        .iter()
        .map(|j| Live {
            allocation: None,
            last_run_s: j.arrival_s,
            starved: false,
        })
        .collect();
    let mut next_round = elapsed();
    let mut rounds = 0u64;
    let mut saved_at = Instant::now();
    let mut interrupted = None;

    let outcome: Result<(), ExecError> = (|| loop {
        if let Some(sig) = cancel.signal() {
            interrupted = Some(sig);
            return Ok(());
        }
        let now = elapsed();
        let mut changed = false;
        for (i, rec) in state.jobs.iter_mut().enumerate() {
            if !matches!(rec.status, JobStatus::Running | JobStatus::Paused) {
                continue;
            }
            let p = backend.poll(&rec.name)?;
            rec.samples_done = p.samples_done;
            let work_done = match list.jobs[i].work {
                Work::Samples(n) => p.samples_done >= n,
                Work::Steps(n) => p.steps_done >= n,
            };
            match p.exit {
                Some(x) if !x.success => {
                    let tail = if x.stderr_tail.is_empty() {
                        String::new()
                    } else {
                        format!("; its stderr ends with:\n{}", x.stderr_tail)
                    };
                    if rec.retries >= cfg.max_retries {
                        let msg = format!(
                            "job `{}` failed ({}) after {} retries{tail}",
                            rec.name, x.status, rec.retries
                        );
                        log(&msg);
                        rec.error = Some(msg);
                        rec.status = JobStatus::Failed;
                        backend.stop(&rec.name)?;
                        rec.allocation = None;
                        rec.handle = None;
                        live[i].allocation = None;
                    } else {
                        rec.retries += 1;
                        log(&format!(
                            "job `{}` crashed ({}); retry {} of {}{tail}",
                            rec.name, x.status, rec.retries, cfg.max_retries
                        ));
                        backend.restart(&launch(i))?;
                        rec.handle = backend.handle(&rec.name);
                    }
                    changed = true;
                }
                Some(_) => {
                    finish(rec, backend, &mut live[i], now, log)?;
                    changed = true;
                }
                None if work_done => {
                    finish(rec, backend, &mut live[i], now, log)?;
                    changed = true;
                }
                None => {}
            }
        }
        if state
            .jobs
            .iter()
            .all(|r| matches!(r.status, JobStatus::Done | JobStatus::Failed))
        {
            return Ok(());
        }
        if now >= next_round {
            rounds += 1;
            round(
                list,
                &mut planner,
                backend,
                &mut state,
                &mut live,
                &launch,
                now,
                cfg.round_s,
                rounds,
                log,
            )?;
            while next_round <= now {
                next_round += cfg.round_s;
            }
            changed = true;
        }
        if changed || saved_at.elapsed() >= SAVE_EVERY {
            state.write(&cfg.state_path)?;
            saved_at = Instant::now();
        }
        std::thread::sleep(TICK);
    })();

    // Whatever ended the loop, nothing of this run is left running: progress is saved by the jobs
    // (SIGTERM) and in the state file.
    let makespan_s = elapsed();
    for (i, rec) in state.jobs.iter_mut().enumerate() {
        if matches!(rec.status, JobStatus::Running | JobStatus::Paused) {
            if let Ok(p) = backend.poll(&rec.name) {
                rec.samples_done = p.samples_done;
            }
            let _ = backend.stop(&rec.name);
            rec.status = JobStatus::Waiting;
            rec.allocation = None;
            rec.handle = None;
            live[i].allocation = None;
        }
    }
    let saved = state.write(&cfg.state_path);
    outcome?;
    saved?;

    let mut results = Vec::new();
    for (i, (j, rec)) in list.jobs.iter().zip(&state.jobs).enumerate() {
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
    Ok(RunReport {
        job_list: list.path.display().to_string(),
        backend: backend.name().to_string(),
        policy: cfg.policy.clone(),
        mechanism: cfg.mechanism.clone(),
        round_s: cfg.round_s,
        servers,
        jobs: results,
        mean_real_jct_s: mean_real,
        mean_predicted_jct_s: mean_pred,
        mean_difference: mean_real.zip(mean_pred).map(|(r, p)| (r - p) / p),
        rounds,
        makespan_s,
        interrupted,
    })
}

fn finish(
    rec: &mut JobRecord,
    backend: &mut dyn Backend,
    live: &mut Live,
    now: f64,
    log: &mut dyn FnMut(&str),
) -> Result<(), ExecError> {
    rec.status = JobStatus::Done;
    rec.finish_s = Some(now);
    backend.stop(&rec.name)?;
    rec.allocation = None;
    rec.handle = None;
    live.allocation = None;
    log(&format!("job `{}` done at {now:.1} s", rec.name));
    Ok(())
}

#[allow(clippy::too_many_arguments)]
fn round<'a>(
    list: &'a JobList,
    planner: &mut Planner,
    backend: &mut dyn Backend,
    state: &mut RunState,
    live: &mut [Live],
    launch: &dyn Fn(usize) -> JobLaunch<'a>,
    now: f64,
    round_s: f64,
    number: u64,
    log: &mut dyn FnMut(&str),
) -> Result<(), ExecError> {
    let active: Vec<usize> = (0..list.jobs.len())
        .filter(|&i| {
            list.jobs[i].arrival_s <= now
                && matches!(
                    state.jobs[i].status,
                    JobStatus::Waiting | JobStatus::Running | JobStatus::Paused
                )
        })
        .collect();
    if active.is_empty() {
        return Ok(());
    }
    let mut states: Vec<JobState> = active
        .iter()
        .map(|&i| {
            let j = &list.jobs[i];
            let left = j.work_samples().saturating_sub(state.jobs[i].samples_done);
            let mut s = job_state(
                list,
                i,
                left.div_ceil(j.batch_size as u64),
                state.jobs[i].attained_s,
            );
            s.last_run_s = live[i].last_run_s;
            s.starved = live[i].starved;
            s
        })
        .collect();
    let previous: Vec<Option<Allocation>> =
        active.iter().map(|&i| live[i].allocation.clone()).collect();
    let plan = planner.plan(&mut states, &previous, now);
    for (k, &i) in active.iter().enumerate() {
        live[i].starved = states[k].starved;
    }
    let mut lines = vec![format!("round {number} at {now:.1} s:")];
    // Pauses first, so the cores they free are free before anyone grows into them.
    for (k, &i) in active.iter().enumerate() {
        let rec = &mut state.jobs[i];
        if plan.allocations[k].is_none() && rec.status == JobStatus::Running {
            backend.pause(&rec.name)?;
            rec.status = JobStatus::Paused;
            lines.push(format!("  {:<16} paused", rec.name));
        } else if plan.allocations[k].is_none() {
            lines.push(format!("  {:<16} waits", rec.name));
        }
    }
    // Then changes to running and paused jobs, then starts.
    for pass in 0..2 {
        for (k, &i) in active.iter().enumerate() {
            let Some(a) = &plan.allocations[k] else {
                continue;
            };
            let rec = &mut state.jobs[i];
            let started = rec.status != JobStatus::Waiting;
            if (pass == 0) != started {
                continue;
            }
            let what = if !started {
                backend.start(&launch(i), a)?;
                match backend.poll(&rec.name)?.samples_done {
                    0 => "started".to_string(),
                    n => format!("started from {n} samples"),
                }
            } else {
                let mut what = "runs";
                if live[i].allocation.as_ref() != Some(a) {
                    what = match backend.reallocate(&launch(i), a)? {
                        Change::Live => "resized live",
                        Change::Restarted => {
                            rec.restarts += 1;
                            "restarted from its saved progress"
                        }
                        Change::Same => "runs",
                    };
                }
                if rec.status == JobStatus::Paused {
                    backend.resume(&rec.name)?;
                    what = if what == "runs" { "resumed" } else { what };
                }
                what.to_string()
            };
            rec.status = JobStatus::Running;
            rec.rounds_run += 1;
            rec.attained_s += round_s;
            rec.allocation = Some(a.clone());
            rec.handle = backend.handle(&rec.name);
            live[i].allocation = Some(a.clone());
            live[i].last_run_s = now + round_s;
            lines.push(format!("  {:<16} {} ({what})", rec.name, fmt_alloc(a)));
        }
    }
    log(&lines.join("\n"));
    Ok(())
}

fn fresh_state(
    list: &JobList,
    backend: &dyn Backend,
    cfg: &ExecConfig,
    jobs_dir: &Path,
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
        started_unix_s: unix_now_s(),
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
    let removed = backend.clean_orphans(&handles)?;
    let stale =
        crate::isolate::cgroup::cleanup_stale(&super::local::domain_prefix(st.executor_pid));
    if removed + stale > 0 {
        log(&format!(
            "resume: removed {} job(s) left by executor {}",
            removed.max(stale),
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
