//! A client for a Slurm cluster over its command-line tools (`scontrol`, `sbatch`, `squeue`, `scancel`):
//! discovers nodes with their cores, memory and GPUs, submits one job per allocation (`--nodelist`,
//! `--cpus-per-task`, `--mem`, `--gres=gpu:N`; a task on each node for a job over several), reads back
//! its state and the resources Slurm gave it, and cancels it so that the workload sees SIGTERM (and can
//! save its progress) before it is killed.
//!
//! The CLI tools rather than the C API: they are what every Slurm installation ships, their `-o` (one line
//! per record) and `--parsable` outputs are stable across versions, and they need no linking.
//! `scripts/slurm-setup.sh` starts a real single-node cluster for tests.

mod parse;
mod script;

use parse::{fields, parse_job, parse_node};
use script::{batch_script, sbatch_args, spread_script};

use crate::units::Bytes;
use std::fmt;
use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// What to tell a user whose cluster is not there.
const SETUP_HINT: &str = "start a local one with `sudo scripts/slurm-setup.sh`, or point SLURM_CONF at your cluster's slurm.conf";

/// A Slurm failure, saying what to do about it.
#[derive(Debug, thiserror::Error)]
pub enum SlurmError {
    /// A Slurm command is not installed.
    #[error("`{tool}` not found: Slurm's client tools are not installed; {SETUP_HINT}")]
    NotInstalled {
        /// The missing program.
        tool: String,
    },
    /// slurmctld does not answer.
    #[error("slurmctld not reachable ({detail}): {SETUP_HINT}")]
    Unreachable {
        /// What the tool said.
        detail: String,
    },
    /// Munge could not authenticate the request.
    #[error("Slurm authentication failed ({detail}): munged is not running or its key differs from the controller's; run `sudo scripts/slurm-setup.sh`")]
    Auth {
        /// What the tool said.
        detail: String,
    },
    /// Slurm refused a submission (an impossible request, an unknown node, too many GPUs, ...).
    #[error("Slurm rejected job `{name}`: {message}")]
    Rejected {
        /// The job name.
        name: String,
        /// Slurm's reason.
        message: String,
    },
    /// A request the client will not send (it could not be expressed safely).
    #[error("invalid Slurm job request `{name}`: {message}")]
    InvalidRequest {
        /// The job name.
        name: String,
        /// What is wrong.
        message: String,
    },
    /// The controller does not know the job (never submitted, or forgotten `MinJobAge` seconds after it ended).
    #[error("Slurm job {0} is unknown to slurmctld (it never existed or ended longer ago than MinJobAge)")]
    NoSuchJob(JobId),
    /// A job did not reach the awaited state in time.
    #[error("Slurm job {id} still {state} after {waited:?}")]
    Timeout {
        /// The job.
        id: JobId,
        /// Its last state.
        state: SlurmJobState,
        /// How long we waited.
        waited: Duration,
    },
    /// A tool failed in a way not covered above.
    #[error("`{command}` failed ({status}): {stderr}")]
    Command {
        /// The command line.
        command: String,
        /// Its exit status.
        status: String,
        /// Its standard error.
        stderr: String,
    },
    /// A tool's output was not what this client understands.
    #[error("could not read the output of `{command}`: {detail}")]
    Parse {
        /// The command line.
        command: String,
        /// What was unexpected.
        detail: String,
    },
    /// Running a tool failed at the OS level.
    #[error("running `{command}`: {source}")]
    Io {
        /// The command line.
        command: String,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
}

/// A Slurm job id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct JobId(pub u64);

impl fmt::Display for JobId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// One compute node as slurmctld sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct Node {
    /// The node name (what `--nodelist` takes).
    pub name: String,
    /// Its address.
    pub addr: String,
    /// CPUs jobs can be given (`CPUEfctv`: `CPUTot` less the CPUs reserved by `CpuSpecList`/`CoreSpecCount`,
    /// which jobs never get; `CPUTot` where Slurm does not say; one per core here, or per thread with SMT).
    pub cpus: u32,
    /// CPUs allocated to jobs now.
    pub cpus_allocated: u32,
    /// Memory jobs can be given (`RealMemory`).
    pub memory: Bytes,
    /// Memory allocated to jobs now.
    pub memory_allocated: Bytes,
    /// GPUs configured as GRES (`gpu`, of any type).
    pub gpus: u32,
    /// Base state in lower case (`idle`, `mixed`, `allocated`, `down`, ...).
    pub state: String,
    /// State flags in lower case (`drain`, `not_responding`, ...).
    pub state_flags: Vec<String>,
}

impl Node {
    /// Whether new jobs can start on this node (up, not draining or failing).
    pub fn accepts_jobs(&self) -> bool {
        matches!(
            self.state.as_str(),
            "idle" | "mixed" | "allocated" | "completing"
        ) && !self.state_flags.iter().any(|f| {
            matches!(
                f.as_str(),
                "drain" | "draining" | "drained" | "fail" | "not_responding" | "maint"
            )
        })
    }
}

/// What to run and with which resources on one node: a batch job of one task, or one node's task of a
/// job over several ([`Slurm::submit_tasks`]).
#[derive(Debug, Clone, PartialEq)]
pub struct JobRequest {
    /// The job name (`--job-name`), used to find the job again after the submitter restarts.
    pub name: String,
    /// Program and arguments. The program should be an absolute path: slurmd runs it on the node.
    pub command: Vec<String>,
    /// Variables added to the submitter's environment (which Slurm passes on, as usual).
    pub env: Vec<(String, String)>,
    /// Working directory on the node (`--chdir`).
    pub workdir: PathBuf,
    /// Standard output file (`--output`).
    pub stdout: PathBuf,
    /// Standard error file (`--error`).
    pub stderr: PathBuf,
    /// Append to the output files instead of truncating them: a resubmitted job keeps its earlier log.
    pub append_output: bool,
    /// The node to run on (`--nodelist`); any node when `None`.
    pub node: Option<String>,
    /// CPUs for the job's one task (`--cpus-per-task`).
    pub cpus: u32,
    /// Memory on the node (`--mem`, rounded up to whole MiB).
    pub memory: Bytes,
    /// GPUs (`--gres=gpu:N`); none when 0.
    pub gpus: u32,
    /// Partition (`--partition`); the cluster's default when `None`.
    pub partition: Option<String>,
    /// Comment (`--comment`), kept by the accounting database (`sacct -o Comment`).
    pub comment: Option<String>,
}

/// A job's state (`JobState` of `scontrol show job`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SlurmJobState {
    /// Waiting for resources or priority.
    Pending,
    /// Nodes are booting or being prepared.
    Configuring,
    /// Running.
    Running,
    /// Suspended by an administrator or preemption.
    Suspended,
    /// Ended; its processes are still being cleaned up.
    Completing,
    /// Ended with exit code 0.
    Completed,
    /// Ended with a non-zero exit code or a signal.
    Failed,
    /// Cancelled (`scancel`).
    Cancelled,
    /// Ran past its time limit.
    Timeout,
    /// Killed for exceeding its memory limit.
    OutOfMemory,
    /// Its node failed.
    NodeFail,
    /// Preempted.
    Preempted,
    /// Any other state, as Slurm names it.
    Other(String),
}

impl SlurmJobState {
    /// Parses Slurm's upper-case state name.
    pub fn parse(s: &str) -> Self {
        match s {
            "PENDING" => SlurmJobState::Pending,
            "CONFIGURING" => SlurmJobState::Configuring,
            "RUNNING" => SlurmJobState::Running,
            "SUSPENDED" => SlurmJobState::Suspended,
            "COMPLETING" => SlurmJobState::Completing,
            "COMPLETED" => SlurmJobState::Completed,
            "FAILED" => SlurmJobState::Failed,
            "CANCELLED" => SlurmJobState::Cancelled,
            "TIMEOUT" => SlurmJobState::Timeout,
            "OUT_OF_MEMORY" => SlurmJobState::OutOfMemory,
            "NODE_FAIL" => SlurmJobState::NodeFail,
            "PREEMPTED" => SlurmJobState::Preempted,
            other => SlurmJobState::Other(other.to_string()),
        }
    }

    /// Whether the job has ended and none of its processes are left.
    pub fn is_finished(&self) -> bool {
        match self {
            SlurmJobState::Completed
            | SlurmJobState::Failed
            | SlurmJobState::Cancelled
            | SlurmJobState::Timeout
            | SlurmJobState::OutOfMemory
            | SlurmJobState::NodeFail
            | SlurmJobState::Preempted => true,
            // Rarer terminal states; anything else (REQUEUED, STOPPED, SIGNALING, ...) may still run.
            SlurmJobState::Other(s) => matches!(
                s.as_str(),
                "BOOT_FAIL" | "DEADLINE" | "REVOKED" | "SPECIAL_EXIT"
            ),
            _ => false,
        }
    }
}

impl fmt::Display for SlurmJobState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = match self {
            SlurmJobState::Pending => "PENDING",
            SlurmJobState::Configuring => "CONFIGURING",
            SlurmJobState::Running => "RUNNING",
            SlurmJobState::Suspended => "SUSPENDED",
            SlurmJobState::Completing => "COMPLETING",
            SlurmJobState::Completed => "COMPLETED",
            SlurmJobState::Failed => "FAILED",
            SlurmJobState::Cancelled => "CANCELLED",
            SlurmJobState::Timeout => "TIMEOUT",
            SlurmJobState::OutOfMemory => "OUT_OF_MEMORY",
            SlurmJobState::NodeFail => "NODE_FAIL",
            SlurmJobState::Preempted => "PREEMPTED",
            SlurmJobState::Other(s) => s,
        };
        f.write_str(s)
    }
}

/// A job as `scontrol show job -d` reports it: its state and the resources it was given.
#[derive(Debug, Clone, PartialEq)]
pub struct JobInfo {
    /// The job id.
    pub id: JobId,
    /// The job name.
    pub name: String,
    /// Its state.
    pub state: SlurmJobState,
    /// Why it is pending or how it ended (`None`, `Resources`, ...).
    pub reason: String,
    /// Exit code of the batch script (0 until it ends).
    pub exit_code: i32,
    /// The signal that ended it, or 0.
    pub exit_signal: i32,
    /// The node it runs on (`NodeList`); `None` while pending.
    pub node: Option<String>,
    /// CPUs allocated (`NumCPUs`; the request while pending).
    pub cpus: u32,
    /// Memory allocated on its node (`mem` of `TRES`, else `MinMemoryNode`).
    pub memory: Option<Bytes>,
    /// GPUs allocated (`JOB_GRES`, else the request in `TresPerNode`).
    pub gpus: u32,
    /// The core ids it holds on its node (`CPU_IDs`), once running.
    pub cpu_ids: Vec<usize>,
    /// The GPU indices it holds on its node (`GRES=gpu:N(IDX:...)`), once running.
    pub gpu_ids: Vec<usize>,
    /// Its working directory.
    pub workdir: Option<PathBuf>,
    /// Its standard output file.
    pub stdout: Option<PathBuf>,
    /// Its standard error file.
    pub stderr: Option<PathBuf>,
}

/// A job in the queue as `squeue` lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueuedJob {
    /// The job id.
    pub id: JobId,
    /// The job name.
    pub name: String,
    /// Its state.
    pub state: SlurmJobState,
}

/// A client of one Slurm cluster.
#[derive(Debug, Clone, Default)]
pub struct Slurm {
    /// `SLURM_CONF` for every command, when not the tools' default.
    conf: Option<PathBuf>,
}

/// How often waits poll slurmctld.
const POLL: Duration = Duration::from_millis(200);

impl Slurm {
    /// The cluster the Slurm tools find by default (`SLURM_CONF` or `/etc/slurm/slurm.conf`).
    pub fn new() -> Self {
        Slurm::default()
    }

    /// The cluster described by the configuration file `conf`.
    pub fn with_conf(conf: impl Into<PathBuf>) -> Self {
        Slurm {
            conf: Some(conf.into()),
        }
    }

    /// Checks that slurmctld answers.
    pub fn ping(&self) -> Result<(), SlurmError> {
        // `scontrol ping` prints "... is DOWN" and fails when nothing answers.
        let out = match self.run("scontrol", &["ping"], None) {
            Err(SlurmError::Command { stderr, .. }) => {
                return Err(SlurmError::Unreachable {
                    detail: format!("`scontrol ping` says it is down {stderr}")
                        .trim()
                        .to_string(),
                })
            }
            other => other?,
        };
        if out.contains("is UP") {
            Ok(())
        } else {
            Err(SlurmError::Unreachable {
                detail: out.trim().replace('\n', " "),
            })
        }
    }

    /// Every node with its cores, memory and GPUs.
    pub fn nodes(&self) -> Result<Vec<Node>, SlurmError> {
        let out = self.run("scontrol", &["show", "node", "--oneliner"], None)?;
        out.lines()
            .filter(|l| l.starts_with("NodeName="))
            .map(|l| {
                parse_node(&fields(l))
                    .map_err(|detail| parse_error("scontrol show node --oneliner", detail))
            })
            .collect()
    }

    /// `sinfo -N -h -o FORMAT`: one line per node and partition, as the caller's format asks (the
    /// advisor reads it with the machine-list importer, docs/slurm.md).
    pub fn sinfo_nodes(&self, format: &str) -> Result<String, SlurmError> {
        self.run("sinfo", &["-N", "-h", "-o", format], None)
    }

    /// Submits `req` as a batch job and returns its id. The batch script `exec`s the command, so signals
    /// sent to the job reach the program itself.
    pub fn submit(&self, req: &JobRequest) -> Result<JobId, SlurmError> {
        self.submit_tasks(std::slice::from_ref(req))
    }

    /// Submits one job that runs a task on each node of `tasks` (one request per node, each with its
    /// own node, resources, command and environment; the name, files, partition and comment are the
    /// first's) and returns its id. One request is [`Slurm::submit`]'s job. With several, equal
    /// resources on every node are one job of `--nodes=N --ntasks-per-node=1`, and unequal ones a
    /// heterogeneous job of one component per node (`sbatch ... : ...`); either way the batch script
    /// `exec`s one `srun` that starts every node's task, and each task `exec`s its command (found by
    /// `SLURMD_NODENAME`), so a cancel's SIGTERM reaches every program.
    pub fn submit_tasks(&self, tasks: &[JobRequest]) -> Result<JobId, SlurmError> {
        let first = tasks.first().ok_or_else(|| SlurmError::InvalidRequest {
            name: String::new(),
            message: "a job needs at least one task".into(),
        })?;
        let script = if tasks.len() == 1 {
            batch_script(first)?
        } else {
            spread_script(tasks)?
        };
        let args = sbatch_args(tasks);
        let arg_refs: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = self
            .run("sbatch", &arg_refs, Some(script.as_bytes()))
            .map_err(|e| match e {
                SlurmError::Command { stderr, .. } => SlurmError::Rejected {
                    name: first.name.clone(),
                    message: stderr,
                },
                other => other,
            })?;
        // --parsable prints `ID` or `ID;CLUSTER`.
        let id = out.trim().split(';').next().unwrap_or_default();
        id.parse().map(JobId).map_err(|_| {
            parse_error(
                "sbatch --parsable",
                format!("expected a job id, got `{}`", out.trim()),
            )
        })
    }

    /// The job's state and resources.
    pub fn job(&self, id: JobId) -> Result<JobInfo, SlurmError> {
        let ids = id.to_string();
        let out = self
            .run(
                "scontrol",
                &["show", "job", "--details", "--oneliner", &ids],
                None,
            )
            .map_err(|e| match e {
                SlurmError::Command { ref stderr, .. } if stderr.contains("Invalid job id") => {
                    SlurmError::NoSuchJob(id)
                }
                other => other,
            })?;
        let line = out
            .lines()
            .find(|l| l.starts_with("JobId="))
            .ok_or(SlurmError::NoSuchJob(id))?;
        parse_job(&fields(line))
            .map_err(|detail| parse_error("scontrol show job --details --oneliner", detail))
    }

    /// Jobs in the queue (pending, running or recently ended) whose name starts with `prefix`: how a
    /// restarted submitter finds the jobs it had started.
    pub fn jobs_named(&self, prefix: &str) -> Result<Vec<QueuedJob>, SlurmError> {
        // `%i|%T|%j`: the name last, so a `|` inside it cannot shift the other fields.
        let out = self.run(
            "squeue",
            &["--noheader", "--states=all", "--format=%i|%T|%j"],
            None,
        )?;
        let mut jobs = Vec::new();
        for line in out.lines().filter(|l| !l.trim().is_empty()) {
            let mut parts = line.trim().splitn(3, '|');
            let (Some(id), Some(state), Some(name)) = (parts.next(), parts.next(), parts.next())
            else {
                return Err(parse_error("squeue", format!("unexpected line `{line}`")));
            };
            if !name.starts_with(prefix) {
                continue;
            }
            // A heterogeneous job is listed once per component (`ID+0`, `ID+1`, ...): the first stands
            // for the job.
            let id = match id.split_once('+') {
                Some((_, offset)) if offset != "0" => continue,
                Some((leader, _)) => leader,
                None => id,
            };
            let id = id
                .parse()
                .map_err(|_| parse_error("squeue", format!("`{id}` is not a job id")))?;
            jobs.push(QueuedJob {
                id: JobId(id),
                name: name.to_string(),
                state: SlurmJobState::parse(state),
            });
        }
        Ok(jobs)
    }

    /// Cancels the job: slurmd sends SIGTERM to every process of it (the workload saves its progress and
    /// exits), then SIGKILL to whatever is left after the cluster's `KillWait`. Returns at once; see
    /// [`Slurm::stop`] to wait until it is gone. Cancelling a job that already ended is not an error.
    pub fn cancel(&self, id: JobId) -> Result<(), SlurmError> {
        let ids = id.to_string();
        match self.run("scancel", &[&ids], None) {
            Ok(_) => Ok(()),
            Err(SlurmError::Command { stderr, .. })
                if stderr.contains("already completing or completed")
                    || stderr.contains("Job/step already") =>
            {
                Ok(())
            }
            Err(SlurmError::Command { ref stderr, .. }) if stderr.contains("Invalid job id") => {
                Err(SlurmError::NoSuchJob(id))
            }
            Err(e) => Err(e),
        }
    }

    /// Sends `signal` (a name such as `USR1`, or a number) to every process of the job without ending it.
    pub fn signal(&self, id: JobId, signal: &str) -> Result<(), SlurmError> {
        let ids = id.to_string();
        let sig = format!("--signal={signal}");
        self.run("scancel", &["--full", &sig, &ids], None)
            .map(|_| ())
    }

    /// Suspends a running job: slurmd stops every process of it (SIGSTOP) and Slurm frees its cores for
    /// other jobs while it keeps its memory. Needs Slurm operator rights (root here).
    pub fn suspend(&self, id: JobId) -> Result<(), SlurmError> {
        let ids = id.to_string();
        self.run("scontrol", &["suspend", &ids], None).map(|_| ())
    }

    /// Resumes a suspended job (SIGCONT to its processes).
    pub fn resume(&self, id: JobId) -> Result<(), SlurmError> {
        let ids = id.to_string();
        self.run("scontrol", &["resume", &ids], None).map(|_| ())
    }

    /// Cancels the job and waits until it has ended and its processes are gone.
    pub fn stop(&self, id: JobId, timeout: Duration) -> Result<JobInfo, SlurmError> {
        self.cancel(id)?;
        self.wait(id, timeout)
    }

    /// Waits until the job has ended (any final state) and returns what Slurm reports about it.
    pub fn wait(&self, id: JobId, timeout: Duration) -> Result<JobInfo, SlurmError> {
        self.wait_for(id, timeout, |j| j.state.is_finished())
    }

    /// Waits until `done` holds for the job, polling slurmctld.
    pub fn wait_for(
        &self,
        id: JobId,
        timeout: Duration,
        done: impl Fn(&JobInfo) -> bool,
    ) -> Result<JobInfo, SlurmError> {
        let start = Instant::now();
        loop {
            let job = self.job(id)?;
            if done(&job) {
                return Ok(job);
            }
            if start.elapsed() >= timeout {
                return Err(SlurmError::Timeout {
                    id,
                    state: job.state,
                    waited: start.elapsed(),
                });
            }
            std::thread::sleep(POLL);
        }
    }

    /// Runs one Slurm tool, returning its standard output, and turns its failures into [`SlurmError`]s.
    fn run(&self, tool: &str, args: &[&str], stdin: Option<&[u8]>) -> Result<String, SlurmError> {
        let command_line = format!("{tool} {}", args.join(" "));
        let mut cmd = Command::new(tool);
        cmd.args(args)
            .stdin(if stdin.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        if let Some(conf) = &self.conf {
            cmd.env("SLURM_CONF", conf);
        }
        let mut child = cmd.spawn().map_err(|source| {
            if source.kind() == std::io::ErrorKind::NotFound {
                SlurmError::NotInstalled {
                    tool: tool.to_string(),
                }
            } else {
                SlurmError::Io {
                    command: command_line.clone(),
                    source,
                }
            }
        })?;
        if let Some(input) = stdin {
            let mut pipe = child.stdin.take().expect("stdin was piped");
            // A tool that exits early closes the pipe; its exit status then says why.
            let _ = pipe.write_all(input);
        }
        let out = child.wait_with_output().map_err(|source| SlurmError::Io {
            command: command_line.clone(),
            source,
        })?;
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        let stderr = String::from_utf8_lossy(&out.stderr).trim().to_string();
        if out.status.success() {
            return Ok(stdout);
        }
        Err(classify_failure(
            command_line,
            out.status.to_string(),
            stderr,
        ))
    }
}

/// Turns a failed tool's standard error into the error a user can act on.
fn classify_failure(command: String, status: String, stderr: String) -> SlurmError {
    let detail = stderr.lines().last().unwrap_or_default().to_string();
    let lower = stderr.to_ascii_lowercase();
    if lower.contains("unable to contact slurm controller")
        || lower.contains("connection refused")
        || lower.contains("socket timed out")
        || lower.contains("zero bytes were transmitted")
        || lower.contains("unable to establish controller")
        || lower.contains("could not establish a configuration source")
    {
        SlurmError::Unreachable { detail }
    } else if lower.contains("munge") || lower.contains("authentication") {
        SlurmError::Auth { detail }
    } else {
        SlurmError::Command {
            command,
            status,
            stderr,
        }
    }
}

fn parse_error(command: &str, detail: impl Into<String>) -> SlurmError {
    SlurmError::Parse {
        command: command.to_string(),
        detail: detail.into(),
    }
}

#[cfg(test)]
mod tests;
