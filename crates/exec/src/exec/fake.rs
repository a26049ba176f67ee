//! An in-process [`Backend`] and [`Clock`] for the executor's unit tests: no process, no cgroup, no root,
//! no real waiting. A running job progresses at a scripted rate on the fake clock, may be scripted to
//! crash on reaching given totals, and keeps its totals in its workload state file as the resume contract
//! asks (`docs/architecture.md` §3.1), so a restarted or resumed job continues from them. Every call the
//! executor makes is recorded with the fake time it was made at, for tests to check the exact sequence.

use super::executor::Clock;
use super::{
    Allocation, Backend, Change, ExecError, JobExit, JobHandle, JobLaunch, JobPoll, ServerInfo,
    Work,
};
use crate::cancel::Cancel;
use crate::format::resume::ResumeState;
use crate::units::Bytes;
use std::cell::Cell;
use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::rc::Rc;
use std::time::Duration;

/// Fake time in seconds, shared by a clock and the backends it drives (and by the runs of one test, so
/// that a resumed run goes on from where the first one stopped).
#[derive(Debug, Clone, Default)]
pub(crate) struct FakeTime(Rc<Cell<f64>>);

impl FakeTime {
    /// Seconds now.
    pub(crate) fn now(&self) -> f64 {
        self.0.get()
    }
}

/// A clock whose every wait moves [`FakeTime`] on by a fixed step.
pub(crate) struct FakeClock {
    time: FakeTime,
    /// What the fake time's zero is in Unix time.
    unix_origin: f64,
    step_s: f64,
    /// From this time on, the next wait raises the flag (SIGTERM).
    signal_at: Option<(f64, Cancel)>,
    /// From this time on, the next wait panics: the executor dies without cleaning up (`kill -9`).
    die_at: Option<f64>,
}

/// The signal [`FakeClock::signal_at`] raises.
pub(crate) const SIGTERM: i32 = 15;

/// What [`FakeClock::die_at`] panics with.
pub(crate) const DIED: &str = "the fake executor died";

impl FakeClock {
    /// A clock on `time` that moves by `step_s` per wait.
    pub(crate) fn new(time: &FakeTime, step_s: f64) -> FakeClock {
        FakeClock {
            time: time.clone(),
            unix_origin: 1.7e9,
            step_s,
            signal_at: None,
            die_at: None,
        }
    }

    /// Raises `cancel` at the first wait from `t` on.
    pub(crate) fn signal_at(mut self, t: f64, cancel: &Cancel) -> FakeClock {
        self.signal_at = Some((t, cancel.clone()));
        self
    }

    /// Panics at the first wait from `t` on.
    pub(crate) fn die_at(mut self, t: f64) -> FakeClock {
        self.die_at = Some(t);
        self
    }
}

impl Clock for FakeClock {
    fn unix_s(&self) -> f64 {
        self.unix_origin + self.time.now()
    }
    fn monotonic_s(&self) -> f64 {
        self.time.now()
    }
    fn sleep(&mut self, _d: Duration) {
        let t = self.time.now() + self.step_s;
        self.time.0.set(t);
        if let Some((at, cancel)) = &self.signal_at {
            if t >= *at {
                cancel.trigger(SIGTERM);
            }
        }
        if self.die_at.is_some_and(|at| t >= at) {
            panic!("{DIED}");
        }
    }
}

/// One call the executor made of the backend.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Call {
    /// `start`, with the GPUs given and the samples the job's state file held.
    Start { gpus: Vec<u32>, from: u64 },
    /// `reallocate` to these GPUs and cores, and how the backend applied it.
    Reallocate {
        gpus: Vec<u32>,
        cpus: f64,
        change: Change,
    },
    /// `pause`.
    Pause,
    /// `resume`.
    Resume,
    /// `restart` after a crash, from the samples the state file held.
    Restart { from: u64 },
    /// `stop`.
    Stop,
}

/// A job as the fake runs it.
struct FakeJob {
    state_file: PathBuf,
    batch: u64,
    /// Where the workload stops by itself (its `--max-samples`), in samples.
    target: u64,
    rate: f64,
    alloc: Allocation,
    /// Totals its state file held when this launch started.
    base: u64,
    /// Seconds this launch has run (not paused).
    run_s: f64,
    /// When progress was last counted.
    counted_at: f64,
    paused: bool,
    exit: Option<JobExit>,
    launches: u32,
}

impl FakeJob {
    fn samples(&self) -> u64 {
        (self.base + (self.rate * self.run_s).floor() as u64).min(self.target)
    }

    /// The workload saves its totals as it goes, so whatever stops it (crash, kill) loses nothing.
    fn save(&self, samples: u64) {
        let st = ResumeState {
            samples_done: samples,
            steps_done: samples / self.batch,
        };
        let json = serde_json::to_vec(&st).expect("plain numbers serialize");
        std::fs::write(&self.state_file, json).expect("the fake writes its state file");
    }

    /// A new launch from the totals in its state file.
    fn launch(&mut self, now: f64) -> u64 {
        self.base = ResumeState::read(&self.state_file)
            .expect("the fake reads its state file")
            .samples_done;
        self.run_s = 0.0;
        self.counted_at = now;
        self.paused = false;
        self.exit = None;
        self.launches += 1;
        self.base
    }
}

/// The GPU ids of every part of `alloc`, in order.
fn gpu_ids(alloc: &Allocation) -> Vec<u32> {
    alloc.parts.iter().flat_map(|p| p.gpus.clone()).collect()
}

/// The in-process backend.
pub(crate) struct FakeBackend {
    time: FakeTime,
    servers: Vec<ServerInfo>,
    /// Samples per second of every running job.
    rate: f64,
    /// Per job: the totals at which a launch crashes, each once, in order.
    crashes: HashMap<String, Vec<u64>>,
    jobs: BTreeMap<String, FakeJob>,
    /// Every call, with the fake time it was made at, per job.
    calls: Vec<(f64, String, Call)>,
    /// The dead executor and the domains of the handles each `clean_orphans` was given.
    pub(crate) orphan_calls: Vec<(u32, Vec<String>)>,
}

impl FakeBackend {
    /// One server of `gpus` GPUs, `cores` cores and `memory_gib` GiB; jobs run at `rate` samples/s.
    pub(crate) fn new(
        time: &FakeTime,
        gpus: u32,
        cores: usize,
        memory_gib: u64,
        rate: f64,
    ) -> FakeBackend {
        FakeBackend {
            time: time.clone(),
            servers: vec![ServerInfo {
                name: "fake".into(),
                gpus: (0..gpus).collect(),
                cores: (0..cores).collect(),
                memory: Bytes(memory_gib << 30),
                whole_cores: false,
            }],
            rate,
            crashes: HashMap::new(),
            jobs: BTreeMap::new(),
            calls: Vec::new(),
            orphan_calls: Vec::new(),
        }
    }

    /// `n` servers of the same shape instead of one, named `fake-0`, `fake-1`, ...
    pub(crate) fn servers(mut self, n: usize) -> FakeBackend {
        let one = self.servers[0].clone();
        self.servers = (0..n)
            .map(|k| ServerInfo {
                name: format!("fake-{k}"),
                ..one.clone()
            })
            .collect();
        self
    }

    /// Job `job`'s launches crash on reaching these totals, each once, in order.
    pub(crate) fn crash_at(mut self, job: &str, totals: &[u64]) -> FakeBackend {
        self.crashes.insert(job.into(), totals.to_vec());
        self
    }

    /// The calls made for `job`, in order.
    pub(crate) fn calls(&self, job: &str) -> Vec<Call> {
        self.calls
            .iter()
            .filter(|c| c.1 == job)
            .map(|c| c.2.clone())
            .collect()
    }

    /// Every call as (fake time, job, call), in the order made.
    pub(crate) fn sequence(&self) -> &[(f64, String, Call)] {
        &self.calls
    }

    /// When the calls for `job` were made, in order.
    pub(crate) fn times(&self, job: &str) -> Vec<f64> {
        self.calls
            .iter()
            .filter(|c| c.1 == job)
            .map(|c| c.0)
            .collect()
    }

    fn record(&mut self, job: &str, call: Call) {
        self.calls.push((self.time.now(), job.to_string(), call));
    }

    /// Counts a running job's progress up to now: it ends by itself at its target, or crashes at the
    /// next scripted total.
    fn advance(&mut self, job: &str) -> Result<&mut FakeJob, ExecError> {
        self.count(job)?;
        Ok(self.jobs.get_mut(job).expect("just counted"))
    }

    fn count(&mut self, job: &str) -> Result<(), ExecError> {
        let now = self.time.now();
        let crash = self.crashes.get(job).and_then(|c| c.first().copied());
        let fj = self
            .jobs
            .get_mut(job)
            .ok_or_else(|| ExecError::Other(format!("job `{job}` is not running here")))?;
        if fj.paused || fj.exit.is_some() {
            fj.counted_at = now;
            return Ok(());
        }
        fj.run_s += now - fj.counted_at;
        fj.counted_at = now;
        let samples = fj.samples();
        match crash {
            Some(c) if fj.base < c && samples >= c => {
                fj.save(c);
                fj.base = c;
                fj.run_s = 0.0;
                fj.exit = Some(JobExit {
                    success: false,
                    status: "exit status 3".into(),
                    stderr_tail: format!("boom at {c}"),
                    oom_killed: false,
                });
                if let Some(left) = self.crashes.get_mut(job) {
                    left.remove(0);
                }
            }
            _ => {
                fj.save(samples);
                if samples >= fj.target {
                    fj.exit = Some(JobExit {
                        success: true,
                        status: "exit status 0".into(),
                        stderr_tail: String::new(),
                        oom_killed: false,
                    });
                }
            }
        }
        Ok(())
    }
}

impl Backend for FakeBackend {
    fn name(&self) -> &'static str {
        "fake"
    }

    fn servers(&self) -> &[ServerInfo] {
        &self.servers
    }

    fn start(&mut self, job: &JobLaunch, alloc: &Allocation) -> Result<(), ExecError> {
        if self.jobs.contains_key(job.name) {
            return Err(ExecError::already_started(job.name));
        }
        let batch = job.spec.batch_size as u64;
        let mut fj = FakeJob {
            state_file: job.state_file.to_path_buf(),
            batch,
            target: match job.work {
                Work::Samples(n) => n,
                Work::Steps(n) => n * batch,
            },
            rate: self.rate,
            alloc: alloc.clone(),
            base: 0,
            run_s: 0.0,
            counted_at: 0.0,
            paused: false,
            exit: None,
            launches: 0,
        };
        let from = fj.launch(self.time.now());
        self.jobs.insert(job.name.to_string(), fj);
        self.record(
            job.name,
            Call::Start {
                gpus: gpu_ids(alloc),
                from,
            },
        );
        Ok(())
    }

    fn reallocate(&mut self, job: &JobLaunch, alloc: &Allocation) -> Result<Change, ExecError> {
        let now = self.time.now();
        let fj = self.advance(job.name)?;
        let change = if gpu_ids(&fj.alloc) == gpu_ids(alloc) || fj.exit.is_some() {
            Change::Live
        } else {
            // As on the local backend: a process cannot change its GPUs, so it starts again.
            fj.launch(now);
            Change::Restarted
        };
        fj.alloc = alloc.clone();
        self.record(
            job.name,
            Call::Reallocate {
                gpus: gpu_ids(alloc),
                cpus: alloc.cpus().0,
                change,
            },
        );
        Ok(change)
    }

    fn pause(&mut self, job: &str) -> Result<(), ExecError> {
        self.advance(job)?.paused = true;
        self.record(job, Call::Pause);
        Ok(())
    }

    fn resume(&mut self, job: &str) -> Result<(), ExecError> {
        let now = self.time.now();
        let fj = self.advance(job)?;
        fj.paused = false;
        fj.counted_at = now;
        self.record(job, Call::Resume);
        Ok(())
    }

    fn poll(&mut self, job: &str) -> Result<JobPoll, ExecError> {
        let fj = self.advance(job)?;
        let samples = fj.samples();
        Ok(JobPoll {
            samples_done: samples,
            steps_done: samples / fj.batch,
            exit: fj.exit.clone(),
        })
    }

    fn restart(&mut self, job: &JobLaunch) -> Result<(), ExecError> {
        let now = self.time.now();
        let from = self.advance(job.name)?.launch(now);
        self.record(job.name, Call::Restart { from });
        Ok(())
    }

    fn stop(&mut self, job: &str) -> Result<(), ExecError> {
        if self.jobs.contains_key(job) {
            self.advance(job)?;
            self.jobs.remove(job);
            self.record(job, Call::Stop);
        }
        Ok(())
    }

    fn handle(&self, job: &str) -> Option<JobHandle> {
        let fj = self.jobs.get(job)?;
        Some(JobHandle {
            pid: None,
            domain: Some(format!("fake-{job}")),
            backend_id: Some(fj.launches.to_string()),
        })
    }

    fn clean_orphans(
        &mut self,
        executor_pid: u32,
        handles: &[JobHandle],
    ) -> Result<usize, ExecError> {
        let domains: Vec<String> = handles.iter().filter_map(|h| h.domain.clone()).collect();
        let removed = domains.len();
        self.orphan_calls.push((executor_pid, domains));
        Ok(removed)
    }
}
