//! The local backend: one shared server. Each job runs in its own cgroup (a cpuset of specific cores,
//! a CFS quota when fractional, a memory limit) with its GPUs in `CUDA_VISIBLE_DEVICES`; new allocations
//! are written into the cgroup in place, pausing freezes it, and progress arrives over the progress pipe.
//! GPUs come from NVML, or are emulated slots (`--gpus N`) on a host without GPUs.

use super::launch_env::{app_cache_bytes, domain_prefix, STDERR_TAIL};
use super::{
    AllocPart, Allocation, Backend, Change, ExecError, JobExit, JobHandle, JobLaunch, JobPoll,
    ServerInfo,
};
use crate::error::InputError;
use crate::error::Setting;
use crate::exec::observe::Steps;
use crate::format::resume::ResumeState;
use crate::isolate::cgroup::CgroupBackend;
use crate::isolate::ledger::{self, CoreLease};
use crate::isolate::{Budget, Domain, IsolateError, Isolation};
use crate::measure::contention::{self, HostReading, Reading};
use crate::measure::event::ProgressEvent;
use crate::measure::progress::{self, PipeProgress, ProgressSource};
use crate::measure::progress::{RegexMatcher, RegexProgress};
use crate::units::Bytes;
use crate::workload::env;
use crate::workload::launch::{self, LaunchConfig, ProgressStream, RankLayout, Running};
use crate::workload::spec::ProgressSpec;
use std::collections::BTreeMap;
use std::sync::mpsc::{channel, Receiver};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How long a stopped workload gets to save its progress before it is killed.
const STOP_GRACE: Duration = Duration::from_secs(5);
/// The steps a job made since its observation window opened, and the readings at its opening.
struct ObserveWindow {
    steps: Steps,
    at_open: Reading,
}

/// What the local server offers, from the host or capped by flags.
#[derive(Debug, Clone, Default)]
pub struct LocalOptions {
    /// Emulated GPU slots instead of NVML's GPUs.
    pub emulated_gpus: Option<u32>,
    /// Use only this many of the cores this process may use (which ones: those the host-wide core
    /// ledger has free, see [`LocalBackend::new`]).
    pub cpus: Option<usize>,
    /// Give jobs at most this much memory in all.
    pub memory: Option<Bytes>,
}

struct LocalJob {
    // Field order matters on drop: the domain kills what it holds before the workload is reaped, so no
    // process id it signals can have been reused.
    domain: Box<dyn Domain>,
    domain_name: String,
    running: Option<Running>,
    events: Option<Receiver<ProgressEvent>>,
    reader: Option<JoinHandle<()>>,
    base: ResumeState,
    samples: u64,
    steps: u64,
    frozen: bool,
    /// What it holds on the one server.
    alloc: AllocPart,
    exit: Option<JobExit>,
    window: Option<ObserveWindow>,
    /// Its domain's OOM kills when it was last launched: a rise at its exit means the OOM killer.
    oom_kills_at_launch: u64,
}

/// One server, jobs in cgroups under this process's own.
pub struct LocalBackend {
    // Only through the isolation trait: a dead executor's domains are reopened by name.
    iso: Box<dyn Isolation>,
    servers: Vec<ServerInfo>,
    prefix: String,
    jobs: BTreeMap<String, LocalJob>,
    /// The server's cores, held in the host-wide ledger for the whole run so that a `measure` or
    /// `profile` started beside it takes other cores (docs/run.md, "Sharing the host").
    _cores: CoreLease,
}

fn nvml_gpus() -> Result<u32, String> {
    let nvml = nvml_wrapper::Nvml::init().map_err(|e| e.to_string())?;
    nvml.device_count().map_err(|e| e.to_string())
}

/// This host as one server: GPUs through NVML unless emulated, the cores this process may use, its
/// memory; each capped by the options.
pub fn discover(opts: &LocalOptions) -> Result<Vec<ServerInfo>, ExecError> {
    let gpus = match opts.emulated_gpus {
        Some(0) => {
            return Err(InputError::setting(Setting::EmulatedGpus, "must be at least 1").into())
        }
        Some(n) => n,
        None => match nvml_gpus() {
            Ok(n) if n > 0 => n,
            found => {
                let why = match found {
                    Err(e) => format!("no GPUs found through NVML ({e})"),
                    Ok(_) => "NVML reports no GPUs on this host".to_string(),
                };
                return Err(InputError::setting(
                    Setting::EmulatedGpus,
                    format!(
                        "{why}; {} to emulate N accelerators",
                        Setting::EmulatedGpus.to("N")
                    ),
                )
                .into());
            }
        },
    };
    let mut cores = crate::measure::trial::host_cores();
    if let Some(n) = opts.cpus {
        if n == 0 || n > cores.len() {
            return Err(InputError::setting(
                Setting::Cpus,
                format!(
                    "must be 1 to {} (the cores this process may use)",
                    cores.len()
                ),
            )
            .into());
        }
        cores.truncate(n);
    }
    let host_mem = crate::isolate::host_memory_bytes();
    let memory = match opts.memory {
        Some(m) if m.0 == 0 || m.0 > host_mem => {
            return Err(InputError::setting(
                Setting::Memory,
                format!(
                    "must be more than 0 and at most the host's {}",
                    Bytes(host_mem)
                ),
            )
            .into())
        }
        Some(m) => m,
        None => Bytes(host_mem),
    };
    let name = nix::unistd::gethostname()
        .ok()
        .and_then(|h| h.into_string().ok())
        .unwrap_or_else(|| "localhost".into());
    Ok(vec![ServerInfo {
        name,
        gpus: (0..gpus).collect(),
        cores,
        memory,
        whole_cores: false,
    }])
}

impl LocalBackend {
    /// Discovers this host (see [`discover`]) and checks that cgroups can be made here.
    /// Its cores are claimed in the host-wide core ledger: free ones where this process may use more
    /// than asked for, and a clear refusal naming the holder when too few are free.
    pub fn new(opts: &LocalOptions) -> Result<LocalBackend, ExecError> {
        let mut servers = discover(opts)?;
        let host = crate::measure::trial::host_cores();
        let lease = ledger::claim(servers[0].cores.len(), &host).map_err(IsolateError::from)?;
        servers[0].cores = lease.cores().to_vec();
        let iso = CgroupBackend::detect().map_err(|e| {
            ExecError::Other(format!(
                "the local backend needs cgroups (cpuset, cpu, memory, freezer): {e}"
            ))
        })?;
        Ok(LocalBackend {
            iso: Box::new(iso),
            servers,
            prefix: domain_prefix(std::process::id()),
            jobs: BTreeMap::new(),
            _cores: lease,
        })
    }

    fn job(&mut self, name: &str) -> Result<&mut LocalJob, ExecError> {
        self.jobs
            .get_mut(name)
            .ok_or_else(|| ExecError::Other(format!("job `{name}` is not running here")))
    }
}

fn budget_of(alloc: &AllocPart) -> Budget {
    Budget {
        cpus: alloc.cpus,
        cpu_list: Some(alloc.cores.clone()),
        mem_limit: Some(alloc.memory),
        read_limit: None,
        count_reads_on: None,
    }
}

fn exit_text(status: &std::process::ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(c), _) => format!("exit status {c}"),
        (None, Some(s)) => format!("killed by signal {s}"),
        _ => status.to_string(),
    }
}

/// Starts the job's workload in its domain, from the progress its state file holds.
fn launch_into(job: &JobLaunch, lj: &mut LocalJob) -> Result<(), ExecError> {
    lj.base = ResumeState::read(job.state_file)?;
    lj.samples = 0;
    lj.steps = 0;
    lj.exit = None;
    lj.oom_kills_at_launch = lj.domain.stats().oom_kills.unwrap_or(0);
    let gpus: Vec<String> = lj.alloc.gpus.iter().map(|g| g.to_string()).collect();
    let extra_env = vec![
        (
            env::STATE_FILE.to_string(),
            job.state_file.display().to_string(),
        ),
        ("CUDA_VISIBLE_DEVICES".to_string(), gpus.join(",")),
    ];
    let extra_args = job.work.stop_args();
    let cache_bytes = app_cache_bytes(job, &lj.alloc);
    let cfg = LaunchConfig {
        spec: job.spec,
        dataset: job.dataset,
        cpus: job.loader_cpus,
        cpu_list: &lj.alloc.cores,
        cache_bytes,
        synthetic: false,
        setup: lj.domain.child_setup(),
        extra_args: &extra_args,
        extra_env: &extra_env,
        ranks: job.spec.launcher.map(|_| RankLayout {
            local_ranks: lj.alloc.gpus.len() as u32,
            world_size: lj.alloc.gpus.len() as u32,
            rendezvous: None,
        }),
    };
    let mut running = launch::launch(&cfg)?;
    lj.domain.adopt(running.child.id() as i32);
    let (tx, rx) = channel();
    let source: Option<Box<dyn ProgressSource>> =
        match (running.progress.take(), &job.spec.progress) {
            (Some(ProgressStream::Pipe(f)), _) => Some(Box::new(PipeProgress::new(f))),
            (Some(ProgressStream::Output(r)), ProgressSpec::Regex { pattern, scale, .. }) => {
                let m = RegexMatcher::new(pattern, *scale).map_err(|e| {
                    InputError::field(&job.spec.origin, "progress.pattern", e.to_string())
                })?;
                Some(Box::new(RegexProgress::new(r, m)))
            }
            _ => None,
        };
    lj.reader = source.map(|s| progress::spawn(s, tx));
    lj.events = Some(rx);
    lj.running = Some(running);
    Ok(())
}

impl LocalJob {
    fn drain(&mut self) {
        if let Some(rx) = &self.events {
            while let Ok(ev) = rx.try_recv() {
                if let ProgressEvent::Step {
                    samples, at, epoch, ..
                } = ev
                {
                    self.samples += samples.round() as u64;
                    self.steps += 1;
                    if let Some(w) = self.window.as_mut() {
                        w.steps.push(at, samples, epoch);
                    }
                }
            }
        }
    }

    /// Kills what is left in the domain once its workload's process group is gone: the ranks a
    /// launcher starts in sessions of their own. Each could hold the progress channel open, and its
    /// reader, which is joined next, would wait for them.
    fn kill_strays(&self) {
        for pid in self.domain.pids() {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
    }

    /// The domain's and the host's readings now, `t_s` seconds into a window.
    fn reading(&self, t_s: f64) -> Reading {
        Reading {
            t_s,
            domain: self.domain.stats(),
            host: HostReading::read(&self.alloc.cores, &self.domain.pids()),
        }
    }

    /// Opens a new observation window now (after what came before is drained into the old one).
    fn open_window(&mut self) {
        self.window = Some(ObserveWindow {
            steps: Steps::open(),
            at_open: self.reading(0.0),
        });
    }

    /// The current window's estimate and disturbance, opening the next window; while too few steps
    /// arrived for an estimate the window stays open, so the next round's observation covers both.
    fn close_window(&mut self) -> Option<crate::exec::observe::Window> {
        self.drain();
        let w = self.window.as_ref()?;
        let now = Instant::now();
        let throughput = w.steps.estimate()?;
        let kind = self.domain.kind();
        let end = self.reading(now.duration_since(w.steps.opened).as_secs_f64());
        let w = self.window.take()?;
        self.open_window();
        let disturbance = contention::assess(
            self.alloc.cpus.0,
            self.alloc.cores.len(),
            &w.at_open,
            &end,
            &[],
        );
        Some(crate::exec::observe::Window {
            throughput,
            disturbance: Some(disturbance),
            isolation: kind,
        })
    }

    /// Stops the current launch (thawing it first: a frozen process cannot act on SIGTERM) and collects
    /// its last progress.
    fn stop_launch(&mut self) {
        if self.frozen {
            let _ = self.domain.set_frozen(false);
            self.frozen = false;
        }
        if let Some(r) = self.running.as_mut() {
            r.stop(STOP_GRACE);
        }
        self.kill_strays();
        if let Some(h) = self.reader.take() {
            let _ = h.join();
        }
        self.drain();
        self.running = None;
    }
}

impl Backend for LocalBackend {
    fn name(&self) -> &'static str {
        "local"
    }

    fn servers(&self) -> &[ServerInfo] {
        &self.servers
    }

    fn start(&mut self, job: &JobLaunch, alloc: &Allocation) -> Result<(), ExecError> {
        if self.jobs.contains_key(job.name) {
            return Err(ExecError::already_started(job.name));
        }
        let alloc = super::one_server(alloc, self.name())?;
        let domain_name = format!("{}{}", self.prefix, job.name);
        let domain = self.iso.create(&domain_name, &budget_of(alloc))?;
        let mut lj = LocalJob {
            domain,
            domain_name,
            running: None,
            events: None,
            reader: None,
            base: ResumeState::default(),
            samples: 0,
            steps: 0,
            frozen: false,
            alloc: alloc.clone(),
            exit: None,
            window: None,
            oom_kills_at_launch: 0,
        };
        // On failure the domain is dropped, which removes it.
        launch_into(job, &mut lj)?;
        lj.open_window();
        self.jobs.insert(job.name.to_string(), lj);
        Ok(())
    }

    fn reallocate(&mut self, job: &JobLaunch, alloc: &Allocation) -> Result<Change, ExecError> {
        let alloc = super::one_server(alloc, self.name())?;
        let lj = self.job(job.name)?;
        let same_gpus = lj.alloc.gpus == alloc.gpus;
        lj.drain();
        lj.domain.update(&budget_of(alloc))?;
        lj.alloc = alloc.clone();
        if same_gpus || lj.running.is_none() || lj.exit.is_some() {
            // What came before was another allocation's: the window starts again at this one.
            if !lj.frozen {
                lj.open_window();
            }
            return Ok(Change::Live);
        }
        // A process cannot change its GPUs: stop it (it saves its progress) and start it again.
        lj.stop_launch();
        launch_into(job, lj)?;
        lj.open_window();
        Ok(Change::Restarted)
    }

    fn pause(&mut self, job: &str) -> Result<(), ExecError> {
        let lj = self.job(job)?;
        if !lj.frozen {
            lj.domain.set_frozen(true)?;
            lj.frozen = true;
        }
        lj.window = None;
        Ok(())
    }

    fn resume(&mut self, job: &str) -> Result<(), ExecError> {
        let lj = self.job(job)?;
        if lj.frozen {
            lj.domain.set_frozen(false)?;
            lj.frozen = false;
            lj.drain();
            lj.open_window();
        }
        Ok(())
    }

    fn poll(&mut self, job: &str) -> Result<JobPoll, ExecError> {
        let lj = self.job(job)?;
        lj.drain();
        if lj.exit.is_none() {
            if let Some(status) = lj.running.as_mut().and_then(|r| r.poll_exit()) {
                // The channel closes with the last of its processes: the reader ends after its last
                // line.
                lj.kill_strays();
                if let Some(h) = lj.reader.take() {
                    let _ = h.join();
                }
                lj.drain();
                let tail = lj
                    .running
                    .as_mut()
                    .map(|r| r.stderr_tail(STDERR_TAIL))
                    .unwrap_or_default();
                let oom_kills = lj.domain.stats().oom_kills.unwrap_or(0);
                lj.exit = Some(JobExit {
                    success: status.success(),
                    status: exit_text(&status),
                    stderr_tail: tail,
                    oom_killed: !status.success() && oom_kills > lj.oom_kills_at_launch,
                });
            }
        }
        Ok(JobPoll {
            samples_done: lj.base.samples_done + lj.samples,
            steps_done: lj.base.steps_done + lj.steps,
            exit: lj.exit.clone(),
        })
    }

    fn restart(&mut self, job: &JobLaunch) -> Result<(), ExecError> {
        let lj = self.job(job.name)?;
        lj.stop_launch();
        launch_into(job, lj)?;
        lj.open_window();
        Ok(())
    }

    fn stop(&mut self, job: &str) -> Result<(), ExecError> {
        let Some(mut lj) = self.jobs.remove(job) else {
            return Ok(());
        };
        lj.stop_launch();
        lj.domain.destroy()?;
        Ok(())
    }

    fn observe(&mut self, job: &str) -> Option<crate::exec::observe::Window> {
        let lj = self.jobs.get_mut(job)?;
        if lj.frozen || lj.exit.is_some() {
            return None;
        }
        lj.close_window()
    }

    fn handle(&self, job: &str) -> Option<JobHandle> {
        let lj = self.jobs.get(job)?;
        Some(JobHandle {
            pid: lj.running.as_ref().map(|r| r.child.id() as i32),
            domain: Some(lj.domain_name.clone()),
            backend_id: None,
        })
    }

    fn clean_orphans(
        &mut self,
        executor_pid: u32,
        handles: &[JobHandle],
    ) -> Result<usize, ExecError> {
        let mut removed = 0;
        for h in handles {
            let Some(name) = &h.domain else { continue };
            if self.jobs.values().any(|j| &j.domain_name == name) {
                continue;
            }
            // Destroying the cgroup freezes, kills and thaws whatever is left in it (a workload frozen
            // when its executor died outlives the parent-death signal until it is thawed).
            if let Some(mut d) = self.iso.reopen(name)? {
                d.destroy()?;
                removed += 1;
            }
        }
        // Then the empty ones no handle named (a domain made after its executor last saved its state).
        // The larger count is reported: at least that many jobs were left behind.
        let stale = self.iso.remove_stale(&domain_prefix(executor_pid));
        Ok(removed.max(stale))
    }
}

impl Drop for LocalBackend {
    fn drop(&mut self) {
        let names: Vec<String> = self.jobs.keys().cloned().collect();
        for n in names {
            let _ = self.stop(&n);
        }
    }
}
