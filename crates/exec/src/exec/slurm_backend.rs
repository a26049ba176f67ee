//! The Slurm backend: every allocation the executor plans becomes one Slurm batch job on the planned node
//! (`--nodelist`, `--cpus-per-task`, `--mem`, `--gres=gpu:N`), or, for a job spread over several nodes,
//! one job with a task on each (docs/slurm.md, "Several nodes on one host"). Slurm cannot resize a
//! running job, so a changed allocation stops the job (SIGTERM: the workload saves its progress to
//! `SYNERGY_STATE_FILE`) and submits it again with the new resources; it continues from that progress.
//! Pausing stops it the same way and resuming submits it again, because a suspended Slurm job keeps its
//! GPUs and memory. Progress is read from the workload's state files (the progress pipe does not cross
//! `sbatch`): a spread job's tasks keep one each and share what is left in proportion to their GPUs.

use super::launch_env::{
    app_cache_bytes, domain_prefix, saved_progress, task_state_file, RUN_PREFIX, STDERR_TAIL,
};
use super::slurm::{JobId, JobInfo, JobRequest, Slurm, SlurmError, SlurmJobState};
use super::{
    AllocPart, Allocation, Backend, Change, ExecError, JobExit, JobHandle, JobLaunch, JobPoll,
    ServerInfo, Work,
};
use crate::error::InputError;
use crate::error::Setting;
use crate::exec::observe::{Steps, Window};
use crate::format::resume::ResumeState;
use crate::format::trial::IsolationKind;
use crate::isolate::ChildSetup;
use crate::units::{Bytes, Cores};
use crate::workload::env;
use crate::workload::launch::{self, LaunchConfig, RankLayout, Rendezvous};
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// How long a cancelled job may take to end: Slurm's `KillWait` (SIGKILL after SIGTERM) is 10 s by
/// default, and slurmd then removes its cgroups.
const STOP_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a job whose saved progress shows its work done may take to exit by itself before it is
/// cancelled: the workload exits right after its last save, and a job that ends on its own is
/// `COMPLETED` in Slurm's accounting, not `CANCELLED` (docs/traces.md, sacct).
const DONE_GRACE: Duration = Duration::from_secs(5);
/// How often one job's state is asked of slurmctld; the executor polls far more often.
const QUERY_EVERY: Duration = Duration::from_millis(500);

/// Which part of a Slurm cluster to use.
#[derive(Debug, Clone, Default)]
pub struct SlurmOptions {
    /// Only these nodes (all that accept jobs and have GPUs when empty).
    pub nodes: Vec<String>,
    /// Submit to this partition (the cluster's default when `None`).
    pub partition: Option<String>,
    /// Use at most this many cores of each node.
    pub cpus: Option<usize>,
    /// Use at most this much memory of each node.
    pub memory: Option<Bytes>,
}

/// What Slurm is asked for: the part of an allocation it can see.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Resources {
    cpus: u32,
    memory_mib: u64,
    gpus: u32,
}

impl Resources {
    fn of(alloc: &AllocPart) -> Resources {
        Resources {
            // Whole cores: the planner already rounds on Slurm nodes; this only guards the request.
            cpus: (alloc.cpus.0 - 1e-6).ceil().max(1.0) as u32,
            memory_mib: alloc.memory.0.div_ceil(1 << 20).max(1),
            gpus: alloc.gpus.len() as u32,
        }
    }
}

/// What Slurm sees of an allocation: each part's node and resources.
fn shape(alloc: &Allocation) -> Vec<(usize, Resources)> {
    alloc
        .parts
        .iter()
        .map(|p| (p.server, Resources::of(p)))
        .collect()
}

/// One node's task of a job.
struct Task {
    /// What is (or, while paused, will be) submitted for it, without its stop target (`--max-samples`,
    /// `--max-steps`), which is set from the saved progress at each submission.
    request: JobRequest,
    /// Its own `SYNERGY_STATE_FILE`.
    state_file: PathBuf,
    /// GPUs it has: its share of what is left is in proportion to them.
    gpus: u32,
    /// It runs its node's ranks of one distributed job, which stops where the whole job's work is
    /// done and keeps the job's own state file: the job's work is not shared out.
    whole_job: bool,
}

struct SlurmJob {
    /// The Slurm job name: the executor's prefix and the job's name.
    slurm_name: String,
    /// One per node of its allocation, in server order.
    tasks: Vec<Task>,
    alloc: Allocation,
    /// The job's own state file; a spread job's tasks keep theirs beside it.
    state_file: PathBuf,
    /// Its work, to tell a job that did it (and is exiting) from one to stop.
    work: Work,
    /// The current submission; `None` while paused.
    id: Option<JobId>,
    last_query: Option<Instant>,
    exit: Option<JobExit>,
    /// What the current submission did since its observation window opened, and the job's total
    /// samples when last polled: the total rises each time its state files are rewritten (at least
    /// once a second), each rise a step of the samples it added.
    window: Option<(Steps, u64)>,
}

/// Jobs as Slurm batch jobs, one per allocation.
pub struct SlurmBackend {
    slurm: Slurm,
    servers: Vec<ServerInfo>,
    partition: Option<String>,
    prefix: String,
    /// This executor's mark in every job's comment (`synergy-run:PID-UNIXSECONDS`): the accounting
    /// importer folds the submissions of one job by it and the job name (docs/traces.md, sacct).
    run_mark: String,
    jobs: BTreeMap<String, SlurmJob>,
    /// Each server's address (Slurm's `NodeAddr`), where a distributed job's first node hosts its
    /// ranks' rendezvous.
    addresses: Vec<String>,
}

/// The nodes of the cluster as servers: cores, memory and GPUs (GRES) as Slurm reports them, capped by
/// the options. Nodes without GPUs, or that take no jobs (down, draining), are left out.
pub fn discover(slurm: &Slurm, opts: &SlurmOptions) -> Result<Vec<ServerInfo>, ExecError> {
    slurm.ping()?;
    let nodes = slurm.nodes()?;
    for want in &opts.nodes {
        if !nodes.iter().any(|n| &n.name == want) {
            let known: Vec<&str> = nodes.iter().map(|n| n.name.as_str()).collect();
            return Err(InputError::setting(
                Setting::Nodes,
                format!("Slurm has no node `{want}` (it has {known:?})"),
            )
            .into());
        }
    }
    if opts.cpus == Some(0) || opts.memory.is_some_and(|m| m.0 < 1 << 20) {
        return Err(InputError::setting(
            if opts.cpus == Some(0) {
                Setting::Cpus
            } else {
                Setting::Memory
            },
            "must be at least 1 (core) or 1 MiB",
        )
        .into());
    }
    let servers: Vec<ServerInfo> = nodes
        .iter()
        .filter(|n| opts.nodes.is_empty() || opts.nodes.contains(&n.name))
        .filter(|n| n.accepts_jobs() && n.gpus > 0 && n.cpus > 0)
        .map(|n| {
            let cores = opts
                .cpus
                .map_or(n.cpus as usize, |c| c.min(n.cpus as usize));
            let memory = opts.memory.map_or(n.memory, |m| Bytes(m.0.min(n.memory.0)));
            ServerInfo {
                name: n.name.clone(),
                gpus: (0..n.gpus).collect(),
                cores: (0..cores).collect(),
                // Whole MiB, as `--mem` counts.
                memory: Bytes(memory.0 >> 20 << 20),
                whole_cores: true,
            }
        })
        .collect();
    if servers.is_empty() {
        let seen: Vec<String> = nodes
            .iter()
            .map(|n| format!("{} ({}, {} GPUs)", n.name, n.state, n.gpus))
            .collect();
        return Err(ExecError::Other(format!(
            "no Slurm node takes jobs and has GPUs (GRES gpu): {}",
            seen.join(", ")
        )));
    }
    Ok(servers)
}

impl SlurmBackend {
    /// Discovers the cluster's nodes (see [`discover`]).
    pub fn new(slurm: Slurm, opts: &SlurmOptions) -> Result<SlurmBackend, ExecError> {
        let servers = discover(&slurm, opts)?;
        let nodes = slurm.nodes()?;
        let addresses = servers
            .iter()
            .map(|s| {
                nodes
                    .iter()
                    .find(|n| n.name == s.name)
                    .map_or_else(|| s.name.clone(), |n| n.addr.clone())
            })
            .collect();
        Ok(SlurmBackend {
            slurm,
            servers,
            addresses,
            partition: opts.partition.clone(),
            prefix: domain_prefix(std::process::id()),
            run_mark: run_mark(std::process::id(), std::time::SystemTime::now()),
            jobs: BTreeMap::new(),
        })
    }

    fn job(&mut self, name: &str) -> Result<&mut SlurmJob, ExecError> {
        self.jobs
            .get_mut(name)
            .ok_or_else(|| ExecError::Other(format!("job `{name}` is not running here")))
    }

    /// The tasks that run `job` with `alloc`, one per node: the spec's command and environment expanded
    /// as the local launcher does, with its node's cores and cache and its state file (the job's own
    /// when it runs on one node, else one per task).
    fn tasks(&self, job: &JobLaunch, alloc: &Allocation) -> Result<Vec<Task>, ExecError> {
        let workdir = std::env::current_dir().map_err(|e| ExecError::Io {
            context: "reading the current directory".into(),
            source: e,
        })?;
        let mut tasks = Vec::new();
        // A distributed job spread over nodes is one job of ranks: one launcher per node, meeting at
        // the first node's address; its ranks keep one state file (rank 0 writes it).
        let distributed = job.spec.launcher.is_some();
        let world: u32 = alloc.parts.iter().map(|p| p.gpus.len() as u32).sum();
        let rendezvous_port = match distributed && alloc.is_spread() {
            true => Some(free_port()?),
            false => None,
        };
        for (k, part) in alloc.parts.iter().enumerate() {
            let res = Resources::of(part);
            let state_file = if alloc.is_spread() && !distributed {
                task_state_file(job.state_file, k)
            } else {
                job.state_file.to_path_buf()
            };
            let ranks = job.spec.launcher.map(|_| RankLayout {
                local_ranks: res.gpus,
                world_size: world,
                rendezvous: rendezvous_port.map(|port| Rendezvous {
                    nodes: alloc.parts.len() as u32,
                    node_rank: k as u32,
                    master_addr: self.addresses[alloc.parts[0].server].clone(),
                    master_port: port,
                }),
            });
            let extra_env = vec![(
                env::STATE_FILE.to_string(),
                state_file.display().to_string(),
            )];
            let cfg = LaunchConfig {
                spec: job.spec,
                dataset: job.dataset,
                // Any change resubmits the job, so its loaders are sized for what it holds now.
                cpus: Cores(res.cpus as f64),
                cpu_list: &[],
                cache_bytes: app_cache_bytes(job, part),
                synthetic: false,
                setup: ChildSetup::default(),
                extra_args: &[],
                extra_env: &extra_env,
                ranks,
            };
            let (command, env) = launch::command_line(&cfg)?;
            // No progress pipe crosses sbatch, and Slurm picks the core ids (and sets
            // CUDA_VISIBLE_DEVICES from the GPUs it binds).
            let env = env
                .into_iter()
                .filter(|(k, _)| {
                    k != env::PROGRESS_FD && k != env::PROGRESS_PATH && k != env::CPU_LIST
                })
                .collect();
            let request = JobRequest {
                name: format!("{}{}", self.prefix, job.name),
                command,
                env,
                workdir: workdir.clone(),
                stdout: job.state_file.with_extension("out"),
                stderr: job.state_file.with_extension("err"),
                // A resubmitted job keeps its log; one starting from nothing starts a new one.
                append_output: job.state_file.exists() || state_file.exists(),
                node: Some(self.servers[part.server].name.clone()),
                cpus: res.cpus,
                memory: Bytes(res.memory_mib << 20),
                gpus: res.gpus,
                partition: self.partition.clone(),
                comment: Some(format!("synergy:{} {}", job.model, self.run_mark)),
            };
            tasks.push(Task {
                request,
                state_file,
                gpus: res.gpus,
                whole_job: distributed,
            });
        }
        Ok(tasks)
    }

    /// Submits the job's tasks, each told where to stop from the progress saved now.
    fn submit(slurm: &Slurm, sj: &mut SlurmJob) -> Result<(), ExecError> {
        let saved = saved_progress(&sj.state_file)?;
        let own = sj
            .tasks
            .iter()
            .map(|t| ResumeState::read(&t.state_file))
            .collect::<Result<Vec<_>, _>>()?;
        let gpus: Vec<u32> = sj.tasks.iter().map(|t| t.gpus).collect();
        let targets = if sj.tasks.iter().all(|t| t.whole_job) {
            vec![sj.work; sj.tasks.len()]
        } else {
            task_targets(sj.work, saved, &own, &gpus)
        };
        let requests: Vec<JobRequest> = sj
            .tasks
            .iter()
            .zip(targets)
            .map(|(t, target)| {
                let mut r = t.request.clone();
                r.command.extend(target.stop_args());
                r
            })
            .collect();
        sj.id = Some(slurm.submit_tasks(&requests)?);
        sj.exit = None;
        sj.last_query = None;
        sj.window = Some((Steps::open(), saved.samples_done));
        Ok(())
    }

    /// Cancels the current submission and waits until it has ended (the workload saved its progress).
    fn cancel(slurm: &Slurm, sj: &mut SlurmJob) -> Result<(), ExecError> {
        sj.window = None;
        if let Some(id) = sj.id.take() {
            match slurm.stop(id, STOP_TIMEOUT) {
                Ok(_) | Err(SlurmError::NoSuchJob(_)) => {}
                Err(e) => return Err(e.into()),
            }
        }
        Ok(())
    }
}

/// A TCP port free on this host now, for a distributed job's rendezvous on its first node: on a cluster
/// whose first node is this host (the test cluster) it is free there; elsewhere a port from the
/// ephemeral range is taken there only by chance.
fn free_port() -> Result<u16, ExecError> {
    std::net::TcpListener::bind(("0.0.0.0", 0))
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(|e| ExecError::Io {
            context: "finding a free port for a distributed job's rendezvous".into(),
            source: e,
        })
}

/// The comment word that marks one executor's submissions: its pid, which is in the job names, and the
/// second it started, which tells apart two executors that had the same pid.
fn run_mark(pid: u32, now: std::time::SystemTime) -> String {
    let s = now
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    format!("synergy-run:{pid}-{s}")
}

/// Where each task of a submission stops, as its `--max-samples`/`--max-steps` count (its own file's
/// totals included): what the job has left after `saved` (all its progress, earlier layouts' tasks
/// included) is split in proportion to the tasks' `gpus` (the first tasks take what does not divide),
/// on top of what each task's own file holds (`own`). Every task file only ever counts its own task's
/// work, so a new layout neither loses nor counts twice what an earlier one did. One task on one node
/// gets the job's whole work, as before jobs could spread.
fn task_targets(work: Work, saved: ResumeState, own: &[ResumeState], gpus: &[u32]) -> Vec<Work> {
    let (total, done, own_done): (u64, u64, Vec<u64>) = match work {
        Work::Samples(n) => (
            n,
            saved.samples_done,
            own.iter().map(|o| o.samples_done).collect(),
        ),
        Work::Steps(n) => (
            n,
            saved.steps_done,
            own.iter().map(|o| o.steps_done).collect(),
        ),
    };
    let left = total.saturating_sub(done);
    let all: u64 = gpus.iter().map(|&g| g as u64).sum::<u64>().max(1);
    let mut shares: Vec<u64> = gpus.iter().map(|&g| left * g as u64 / all).collect();
    let mut rest = left - shares.iter().sum::<u64>();
    for s in shares.iter_mut() {
        if rest == 0 {
            break;
        }
        *s += 1;
        rest -= 1;
    }
    own_done
        .iter()
        .zip(shares)
        .map(|(d, s)| match work {
            Work::Samples(_) => Work::Samples(d + s),
            Work::Steps(_) => Work::Steps(d + s),
        })
        .collect()
}

/// How an ended Slurm job is reported to the executor.
fn exit_of(info: &JobInfo, stderr: &std::path::Path) -> JobExit {
    let success = info.state == SlurmJobState::Completed && info.exit_code == 0;
    let status = if info.exit_signal != 0 {
        format!("{}, killed by signal {}", info.state, info.exit_signal)
    } else {
        format!("{}, exit status {}", info.state, info.exit_code)
    };
    let stderr_tail = if success {
        String::new()
    } else {
        std::fs::File::open(stderr)
            .map(|mut f| launch::file_tail(&mut f, STDERR_TAIL))
            .unwrap_or_default()
    };
    JobExit {
        success,
        status,
        stderr_tail,
        oom_killed: info.state == SlurmJobState::OutOfMemory,
    }
}

impl Backend for SlurmBackend {
    fn name(&self) -> &'static str {
        "slurm"
    }

    fn servers(&self) -> &[ServerInfo] {
        &self.servers
    }

    fn start(&mut self, job: &JobLaunch, alloc: &Allocation) -> Result<(), ExecError> {
        if self.jobs.contains_key(job.name) {
            return Err(ExecError::already_started(job.name));
        }
        let tasks = self.tasks(job, alloc)?;
        let mut sj = SlurmJob {
            slurm_name: format!("{}{}", self.prefix, job.name),
            tasks,
            alloc: alloc.clone(),
            state_file: job.state_file.to_path_buf(),
            work: job.work,
            id: None,
            last_query: None,
            exit: None,
            window: None,
        };
        Self::submit(&self.slurm, &mut sj)?;
        self.jobs.insert(job.name.to_string(), sj);
        Ok(())
    }

    fn reallocate(&mut self, job: &JobLaunch, alloc: &Allocation) -> Result<Change, ExecError> {
        let tasks = self.tasks(job, alloc)?;
        let slurm = self.slurm.clone();
        let sj = self.job(job.name)?;
        let same = shape(&sj.alloc) == shape(alloc);
        sj.alloc = alloc.clone();
        sj.tasks = tasks;
        if same || sj.id.is_none() || sj.exit.is_some() {
            // Paused: it is submitted with the new allocation when it resumes.
            return Ok(Change::Same);
        }
        // Slurm cannot resize a running job: stop it (it saves its progress) and submit it again.
        Self::cancel(&slurm, sj)?;
        Self::submit(&slurm, sj)?;
        Ok(Change::Restarted)
    }

    fn pause(&mut self, job: &str) -> Result<(), ExecError> {
        let slurm = self.slurm.clone();
        let sj = self.job(job)?;
        Self::cancel(&slurm, sj)
    }

    fn resume(&mut self, job: &str) -> Result<(), ExecError> {
        let slurm = self.slurm.clone();
        let sj = self.job(job)?;
        if sj.id.is_none() && sj.exit.is_none() {
            Self::submit(&slurm, sj)?;
        }
        Ok(())
    }

    fn poll(&mut self, job: &str) -> Result<JobPoll, ExecError> {
        let slurm = self.slurm.clone();
        let sj = self.job(job)?;
        if let (Some(id), None) = (sj.id, &sj.exit) {
            if sj.last_query.is_none_or(|t| t.elapsed() >= QUERY_EVERY) {
                sj.last_query = Some(Instant::now());
                match slurm.job(id) {
                    Ok(info) if info.state.is_finished() => {
                        sj.exit = Some(exit_of(&info, &sj.tasks[0].request.stderr));
                    }
                    Ok(_) => {}
                    Err(SlurmError::NoSuchJob(_)) => {
                        sj.exit = Some(JobExit {
                            success: false,
                            status: format!("Slurm job {id} vanished from the controller"),
                            stderr_tail: String::new(),
                            oom_killed: false,
                        })
                    }
                    Err(e) => return Err(e.into()),
                }
            }
        }
        // Read after the state: a job that has ended wrote its last totals before it did.
        let totals = saved_progress(&sj.state_file)?;
        if let Some((steps, last)) = sj.window.as_mut() {
            if totals.samples_done > *last {
                steps.push(Instant::now(), (totals.samples_done - *last) as f64, None);
                *last = totals.samples_done;
            }
        }
        Ok(JobPoll {
            samples_done: totals.samples_done,
            steps_done: totals.steps_done,
            exit: sj.exit.clone(),
        })
    }

    fn restart(&mut self, job: &JobLaunch) -> Result<(), ExecError> {
        let alloc = self.job(job.name)?.alloc.clone();
        let tasks = self.tasks(job, &alloc)?;
        let slurm = self.slurm.clone();
        let sj = self.job(job.name)?;
        Self::cancel(&slurm, sj)?;
        sj.tasks = tasks;
        Self::submit(&slurm, sj)
    }

    fn stop(&mut self, job: &str) -> Result<(), ExecError> {
        let Some(mut sj) = self.jobs.remove(job) else {
            return Ok(());
        };
        if let (Some(id), None) = (sj.id, &sj.exit) {
            let totals = saved_progress(&sj.state_file)?;
            let done = match sj.work {
                Work::Samples(n) => totals.samples_done >= n,
                Work::Steps(n) => totals.steps_done >= n,
            };
            if done && self.slurm.wait(id, DONE_GRACE).is_ok() {
                return Ok(());
            }
        }
        Self::cancel(&self.slurm, &mut sj)
    }

    /// The job's throughput from its saved progress since the window opened (its submission, or the
    /// last observation): each rise of its total between polls is a step. Slurm's cgroups hold its
    /// allocation on nodes this process cannot read, so whether other work disturbed it is not known.
    fn observe(&mut self, job: &str) -> Option<Window> {
        let sj = self.jobs.get_mut(job)?;
        let (steps, last) = sj.window.as_ref()?;
        let throughput = steps.estimate()?;
        sj.window = Some((Steps::open(), *last));
        Some(Window {
            throughput,
            disturbance: None,
            isolation: IsolationKind::Slurm,
        })
    }

    fn handle(&self, job: &str) -> Option<JobHandle> {
        let sj = self.jobs.get(job)?;
        Some(JobHandle {
            pid: None,
            domain: Some(sj.slurm_name.clone()),
            backend_id: sj.id.map(|id| id.to_string()),
        })
    }

    fn clean_orphans(
        &mut self,
        _executor_pid: u32,
        handles: &[JobHandle],
    ) -> Result<usize, ExecError> {
        // By name as well as by id: a job resubmitted just before its executor died has a newer id
        // than the state file recorded. Every name of a run carries its executor's pid, so the names the
        // handles give are all of that executor's jobs.
        let names: BTreeSet<&str> = handles.iter().filter_map(|h| h.domain.as_deref()).collect();
        let ids: BTreeSet<JobId> = handles
            .iter()
            .filter_map(|h| h.backend_id.as_deref()?.parse().ok().map(JobId))
            .collect();
        let ours: BTreeSet<JobId> = self.jobs.values().filter_map(|j| j.id).collect();
        let mut removed = 0;
        for q in self.slurm.jobs_named(RUN_PREFIX)? {
            let orphan = names.contains(q.name.as_str()) || ids.contains(&q.id);
            if orphan && !ours.contains(&q.id) && !q.state.is_finished() {
                match self.slurm.stop(q.id, STOP_TIMEOUT) {
                    Ok(_) | Err(SlurmError::NoSuchJob(_)) => removed += 1,
                    Err(e) => return Err(e.into()),
                }
            }
        }
        Ok(removed)
    }
}

impl Drop for SlurmBackend {
    fn drop(&mut self) {
        let names: Vec<String> = self.jobs.keys().cloned().collect();
        for n in names {
            let _ = self.stop(&n);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slurm_sees_whole_cores_whole_mib_and_a_gpu_count() {
        let a = AllocPart {
            server: 0,
            gpus: vec![1],
            cpus: Cores(2.0),
            cores: vec![0, 1],
            memory: Bytes((10 << 30) + 1),
        };
        assert_eq!(
            Resources::of(&a),
            Resources {
                cpus: 2,
                memory_mib: 10 * 1024 + 1,
                gpus: 1
            }
        );
        // Other GPU ids and core ids of the same counts are the same request to Slurm.
        let b = AllocPart {
            gpus: vec![0],
            cores: vec![2, 3],
            ..a.clone()
        };
        assert_eq!(Resources::of(&a), Resources::of(&b));
        let c = AllocPart {
            cpus: Cores(0.25),
            ..a
        };
        assert_eq!(Resources::of(&c).cpus, 1);
    }

    #[test]
    fn a_spread_job_s_tasks_share_what_is_left_by_gpus_and_never_redo_or_lose_work() {
        let st = |n: u64| ResumeState {
            samples_done: n,
            steps_done: n / 32,
        };
        // One task on one node: the whole work, as before jobs could spread.
        assert_eq!(
            task_targets(Work::Samples(1000), st(300), &[st(300)], &[2]),
            vec![Work::Samples(1000)]
        );
        // 2 + 1 GPUs from nothing: two thirds and one third; what does not divide goes to the first.
        assert_eq!(
            task_targets(Work::Samples(1000), st(0), &[st(0), st(0)], &[2, 1]),
            vec![Work::Samples(667), Work::Samples(333)]
        );
        // Resubmitted in the same layout after 400 and 100: each continues from its own file and
        // they share the 500 left.
        assert_eq!(
            task_targets(Work::Samples(1000), st(500), &[st(400), st(100)], &[1, 1]),
            vec![Work::Samples(650), Work::Samples(350)]
        );
        // Back on one node after the tasks did 600 (its own file holds 200 from before): its file's
        // target leaves exactly the 200 still to do.
        assert_eq!(
            task_targets(Work::Samples(1000), st(800), &[st(200)], &[4]),
            vec![Work::Samples(400)]
        );
        // Steps count the same way; a job already past its work gives every task nothing more.
        assert_eq!(
            task_targets(Work::Steps(10), st(32 * 12), &[st(32 * 3), st(0)], &[1, 1]),
            vec![Work::Steps(3), Work::Steps(0)]
        );
    }
}
