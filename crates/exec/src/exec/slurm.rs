//! A client for a Slurm cluster over its command-line tools (`scontrol`, `sbatch`, `squeue`, `scancel`):
//! discovers nodes with their cores, memory and GPUs, submits one job per allocation (`--nodelist`,
//! `--cpus-per-task`, `--mem`, `--gres=gpu:N`; a task on each node for a job over several), reads back
//! its state and the resources Slurm gave it, and cancels it so that the workload sees SIGTERM (and can
//! save its progress) before it is killed.
//!
//! The CLI tools rather than the C API: they are what every Slurm installation ships, their `-o` (one line
//! per record) and `--parsable` outputs are stable across versions, and they need no linking.
//! `scripts/slurm-setup.sh` starts a real single-node cluster for tests.

use crate::gres::gpus_in_gres;
use crate::isolate::cpus::parse_list;
use crate::units::Bytes;
use std::collections::BTreeMap;
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

/// A job's state (`SlurmJobState` of `scontrol show job`).
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

/// The `sbatch` options for a job of `tasks`, one per node (the script itself goes to its standard
/// input): the name, files and comment of the first, and each node's resources (see
/// [`Slurm::submit_tasks`]).
fn sbatch_args(tasks: &[JobRequest]) -> Vec<String> {
    let Some(req) = tasks.first() else {
        return Vec::new();
    };
    let mut args = vec![
        "--parsable".to_string(),
        format!("--job-name={}", req.name),
        format!("--chdir={}", req.workdir.display()),
        format!("--output={}", escape_filename_pattern(&req.stdout)),
        format!("--error={}", escape_filename_pattern(&req.stderr)),
        // The executor decides when a job runs again (with a new allocation); Slurm must not requeue it.
        "--no-requeue".to_string(),
    ];
    if req.append_output {
        args.push("--open-mode=append".to_string());
    }
    if let Some(c) = &req.comment {
        args.push(format!("--comment={c}"));
    }
    let same = |t: &JobRequest| (t.cpus, t.memory, t.gpus) == (req.cpus, req.memory, req.gpus);
    if tasks.iter().all(same) {
        let nodes: Vec<&str> = tasks.iter().filter_map(|t| t.node.as_deref()).collect();
        if tasks.len() == 1 {
            args.extend(["--nodes=1".to_string(), "--ntasks=1".to_string()]);
        } else {
            args.extend([
                format!("--nodes={}", tasks.len()),
                "--ntasks-per-node=1".to_string(),
            ]);
        }
        args.extend(resource_args(
            req,
            &nodes.join(","),
            tasks.len() == nodes.len(),
        ));
    } else {
        // A heterogeneous job: one component per node, separated by `:`.
        for (k, t) in tasks.iter().enumerate() {
            if k > 0 {
                args.push(":".to_string());
            }
            args.extend(["--nodes=1".to_string(), "--ntasks=1".to_string()]);
            args.extend(resource_args(
                t,
                t.node.as_deref().unwrap_or(""),
                t.node.is_some(),
            ));
        }
    }
    args
}

/// One node's resources: `--cpus-per-task`, `--mem`, `--gres`, `--nodelist` (when `with_nodes`) and
/// `--partition`.
fn resource_args(req: &JobRequest, nodes: &str, with_nodes: bool) -> Vec<String> {
    let mut args = vec![
        format!("--cpus-per-task={}", req.cpus),
        format!("--mem={}M", req.memory.0.div_ceil(1 << 20)),
    ];
    if req.gpus > 0 {
        args.push(format!("--gres=gpu:{}", req.gpus));
    }
    if with_nodes && !nodes.is_empty() {
        args.push(format!("--nodelist={nodes}"));
    }
    if let Some(p) = &req.partition {
        args.push(format!("--partition={p}"));
    }
    args
}

/// sbatch expands `%j`, `%N`, ... in file names; a literal `%` is written `%%`.
fn escape_filename_pattern(p: &std::path::Path) -> String {
    p.display().to_string().replace('%', "%%")
}

/// The batch script: exports the request's variables and `exec`s its command, every word quoted.
fn batch_script(req: &JobRequest) -> Result<String, SlurmError> {
    let mut s = String::from("#!/bin/sh\n# Submitted by synergy.\n");
    s.push_str(&task_lines(req)?);
    Ok(s)
}

/// The batch script of a job spread over the nodes of `tasks`: one `srun` that starts a task on every
/// node (every component of a heterogeneous job), where each task runs its node's exports and command.
fn spread_script(tasks: &[JobRequest]) -> Result<String, SlurmError> {
    let first = &tasks[0];
    let invalid = |message: String| SlurmError::InvalidRequest {
        name: first.name.clone(),
        message,
    };
    let mut dispatch = String::from("case \"$SLURMD_NODENAME\" in\n");
    let mut seen = Vec::new();
    for t in tasks {
        let node = t.node.as_deref().ok_or_else(|| {
            invalid("every task of a job over several nodes names its node".into())
        })?;
        if seen.contains(&node) {
            return Err(invalid(format!("two tasks on node `{node}`")));
        }
        seen.push(node);
        dispatch.push_str(&format!("{})\n{};;\n", shell_quote(node), task_lines(t)?));
    }
    dispatch
        .push_str("*) echo \"synergy: no task for node $SLURMD_NODENAME\" >&2; exit 1;;\nesac\n");
    let same =
        |t: &JobRequest| (t.cpus, t.memory, t.gpus) == (first.cpus, first.memory, first.gpus);
    let groups = if tasks.iter().all(same) {
        String::new()
    } else {
        let all: Vec<String> = (0..tasks.len()).map(|k| k.to_string()).collect();
        format!(" --het-group={}", all.join(","))
    };
    Ok(format!(
        "#!/bin/sh\n# Submitted by synergy: a task on each of {} nodes.\nexec srun{groups} --kill-on-bad-exit=1 /bin/sh -c {}\n",
        tasks.len(),
        shell_quote(&dispatch)
    ))
}

/// What runs one task: its checks, its variables exported and its command `exec`ed, every word quoted.
fn task_lines(req: &JobRequest) -> Result<String, SlurmError> {
    let invalid = |message: String| SlurmError::InvalidRequest {
        name: req.name.clone(),
        message,
    };
    if req.command.is_empty() {
        return Err(invalid("the command is empty".into()));
    }
    if req.cpus == 0 {
        return Err(invalid("a job needs at least one CPU".into()));
    }
    if req.memory.0 == 0 {
        return Err(invalid(
            "a job needs some memory (--mem=0 would mean all of the node's)".into(),
        ));
    }
    if req.name.is_empty() || req.name.contains(['\n', '|']) {
        return Err(invalid(
            "the name must be non-empty, on one line and without `|`".into(),
        ));
    }
    if req.comment.as_deref().is_some_and(|c| c.contains('\n')) {
        return Err(invalid("the comment must be on one line".into()));
    }
    let mut s = String::new();
    for (k, v) in &req.env {
        let ok = !k.is_empty()
            && !k.starts_with(|c: char| c.is_ascii_digit())
            && k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        if !ok {
            return Err(invalid(format!(
                "`{k}` is not a valid environment variable name"
            )));
        }
        s.push_str(&format!("export {k}={}\n", shell_quote(v)));
    }
    s.push_str("exec");
    for word in &req.command {
        s.push(' ');
        s.push_str(&shell_quote(word));
    }
    s.push('\n');
    Ok(s)
}

/// Quotes `s` as one POSIX shell word.
fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// Splits a `--oneliner` record into its `Key=Value` fields. Values may hold `=` (`TRES=cpu=1,mem=300M`);
/// a word without `=` continues the previous value (a value with spaces).
fn fields(line: &str) -> BTreeMap<String, String> {
    let mut map = BTreeMap::new();
    let mut last: Option<String> = None;
    for word in line.split_whitespace() {
        match word.split_once('=') {
            Some((k, v)) if !k.is_empty() => {
                // `-d` repeats per-node keys (Nodes=, CPU_IDs=, Mem=, GRES=) once per node: keep the first.
                map.entry(k.to_string()).or_insert_with(|| v.to_string());
                last = Some(k.to_string());
            }
            _ => {
                if let Some(v) = last.as_ref().and_then(|k| map.get_mut(k)) {
                    v.push(' ');
                    v.push_str(word);
                }
            }
        }
    }
    map
}

fn get<'a>(f: &'a BTreeMap<String, String>, key: &str) -> Result<&'a str, String> {
    f.get(key)
        .map(String::as_str)
        .ok_or_else(|| format!("no `{key}` field"))
}

fn num<T: std::str::FromStr>(f: &BTreeMap<String, String>, key: &str) -> Result<T, String> {
    let v = get(f, key)?;
    v.parse()
        .map_err(|_| format!("`{key}={v}` is not a number"))
}

/// A Slurm memory amount: a number with an optional K/M/G/T suffix, MiB when bare (`RealMemory=21695`).
fn parse_memory(v: &str) -> Option<Bytes> {
    let v = v.trim();
    let (digits, unit) = match v.find(|c: char| !(c.is_ascii_digit() || c == '.')) {
        Some(i) => (&v[..i], &v[i..]),
        None => (v, "M"),
    };
    let n: f64 = digits.parse().ok()?;
    let scale: u64 = match unit.to_ascii_uppercase().as_str() {
        "K" => 1 << 10,
        "M" => 1 << 20,
        "G" => 1 << 30,
        "T" => 1 << 40,
        _ => return None,
    };
    Some(Bytes((n * scale as f64).round() as u64))
}

/// The GPU indices in a per-node GRES record such as `gpu:2(IDX:0-1)` or `gpu:a100:1(IDX:3)`.
fn gpu_ids_in_gres(gres: &str) -> Vec<usize> {
    let Some(start) = gres.find("(IDX:") else {
        return Vec::new();
    };
    let rest = &gres[start + 5..];
    let list = rest.split(')').next().unwrap_or_default();
    parse_list(list).unwrap_or_default()
}

fn parse_node(f: &BTreeMap<String, String>) -> Result<Node, String> {
    let state_text = get(f, "State")?.to_ascii_lowercase();
    let mut parts = state_text.split('+');
    let state = parts
        .next()
        .unwrap_or_default()
        .trim_end_matches('*')
        .to_string();
    let memory =
        parse_memory(get(f, "RealMemory")?).ok_or("`RealMemory` is not an amount of memory")?;
    let memory_allocated = f
        .get("AllocMem")
        .and_then(|v| parse_memory(v))
        .unwrap_or(Bytes(0));
    Ok(Node {
        name: get(f, "NodeName")?.to_string(),
        addr: f.get("NodeAddr").cloned().unwrap_or_default(),
        cpus: match f.get("CPUEfctv") {
            Some(_) => num(f, "CPUEfctv")?,
            None => num(f, "CPUTot")?,
        },
        cpus_allocated: f.get("CPUAlloc").and_then(|v| v.parse().ok()).unwrap_or(0),
        memory,
        memory_allocated,
        gpus: f
            .get("Gres")
            .map_or(Ok(0), |g| gpus_in_gres(g))
            .map_err(|e| format!("Gres: {e}"))?,
        state,
        state_flags: parts.map(str::to_string).collect(),
    })
}

fn parse_job(f: &BTreeMap<String, String>) -> Result<JobInfo, String> {
    let (exit_code, exit_signal) = {
        let v = get(f, "ExitCode")?;
        let (c, s) = v.split_once(':').unwrap_or((v, "0"));
        (
            c.parse().map_err(|_| format!("`ExitCode={v}`"))?,
            s.parse().map_err(|_| format!("`ExitCode={v}`"))?,
        )
    };
    let memory = f
        .get("TRES")
        .and_then(|t| t.split(',').find_map(|kv| kv.strip_prefix("mem=")))
        .and_then(parse_memory)
        .or_else(|| f.get("MinMemoryNode").and_then(|v| parse_memory(v)));
    let gpus = f
        .get("JOB_GRES")
        .filter(|g| g.as_str() != "(null)")
        .or_else(|| f.get("TresPerNode"))
        .map_or(Ok(0), |g| gpus_in_gres(g))
        .map_err(|e| format!("JOB_GRES: {e}"))?;
    let path = |key: &str| {
        f.get(key)
            .filter(|v| !v.is_empty() && *v != "(null)")
            .map(PathBuf::from)
    };
    let node = f
        .get("NodeList")
        .filter(|v| !v.is_empty() && *v != "(null)")
        .cloned();
    Ok(JobInfo {
        id: JobId(num(f, "JobId")?),
        name: f.get("JobName").cloned().unwrap_or_default(),
        state: SlurmJobState::parse(get(f, "SlurmJobState")?),
        reason: f.get("Reason").cloned().unwrap_or_default(),
        exit_code,
        exit_signal,
        node,
        cpus: num(f, "NumCPUs")?,
        memory,
        gpus,
        cpu_ids: f
            .get("CPU_IDs")
            .and_then(|v| parse_list(v))
            .unwrap_or_default(),
        gpu_ids: f
            .get("GRES")
            .map(|g| gpu_ids_in_gres(g))
            .unwrap_or_default(),
        workdir: path("WorkDir"),
        stdout: path("StdOut"),
        stderr: path("StdErr"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const NODE: &str = "NodeName=vm Arch=x86_64 CoresPerSocket=2  CPUAlloc=1 CPUEfctv=2 CPUTot=2 CPULoad=0.72 AvailableFeatures=(null) ActiveFeatures=(null) Gres=gpu:2 NodeAddr=127.0.0.1 NodeHostName=vm Version=22.05.8 OS=Linux 6.18.44-fc-v657 #1 SMP PREEMPT_DYNAMIC @0  RealMemory=21695 AllocMem=300 FreeMem=16204 Sockets=1 Boards=1 State=MIXED+DRAIN ThreadsPerCore=1 TmpDisk=0 Weight=1 CfgTRES=cpu=2,mem=21695M,billing=2 AllocTRES= CapWatts=n/a";

    const JOB: &str = "JobId=2 JobName=synergy-a UserId=root(0) GroupId=root(0) SlurmJobState=RUNNING Reason=None Dependency=(null) Requeue=0 ExitCode=0:15 NodeList=vm BatchHost=vm NumNodes=1 NumCPUs=1 NumTasks=1 CPUs/Task=1 ReqB:S:C:T=0:0:*:* TRES=cpu=1,mem=300M,node=1,billing=1 Socks/Node=* NtasksPerN:B:S:C=0:0:*:* CoreSpec=* JOB_GRES=gpu:1   Nodes=vm CPU_IDs=0-1 Mem=300 GRES=gpu:1(IDX:1) MinCPUsNode=1 MinMemoryNode=300M Command=/tmp/a b WorkDir=/tmp/w StdErr=/tmp/e StdIn=/dev/null StdOut=/tmp/o Power= TresPerNode=gres:gpu:1";

    #[test]
    fn a_node_record_gives_cores_memory_gpus_and_state() {
        let n = parse_node(&fields(NODE)).unwrap();
        assert_eq!(n.name, "vm");
        assert_eq!(n.addr, "127.0.0.1");
        assert_eq!((n.cpus, n.cpus_allocated, n.gpus), (2, 1, 2));
        assert_eq!(n.memory, Bytes(21695 << 20));
        assert_eq!(n.memory_allocated, Bytes(300 << 20));
        assert_eq!(n.state, "mixed");
        assert_eq!(n.state_flags, vec!["drain"]);
        assert!(!n.accepts_jobs(), "a draining node takes no new jobs");
    }

    #[test]
    fn cores_reserved_by_cpu_spec_list_are_not_offered_to_jobs() {
        let spec = NODE.replace("CPUEfctv=2", "CPUEfctv=1 CPUSpecList=1");
        assert_eq!(parse_node(&fields(&spec)).unwrap().cpus, 1);
        let old = NODE.replace("CPUEfctv=2 ", "");
        assert_eq!(
            parse_node(&fields(&old)).unwrap().cpus,
            2,
            "CPUTot without CPUEfctv"
        );
    }

    #[test]
    fn a_job_record_gives_state_and_resources() {
        let j = parse_job(&fields(JOB)).unwrap();
        assert_eq!(j.id, JobId(2));
        assert_eq!(j.state, SlurmJobState::Running);
        assert_eq!((j.exit_code, j.exit_signal), (0, 15));
        assert_eq!(j.node.as_deref(), Some("vm"));
        assert_eq!((j.cpus, j.gpus), (1, 1));
        assert_eq!(j.memory, Some(Bytes(300 << 20)));
        assert_eq!(j.cpu_ids, vec![0, 1]);
        assert_eq!(j.gpu_ids, vec![1]);
        assert_eq!(j.workdir, Some(PathBuf::from("/tmp/w")));
        assert_eq!(j.stdout, Some(PathBuf::from("/tmp/o")));
    }

    #[test]
    fn gres_counts_and_memory_units() {
        assert_eq!(gpu_ids_in_gres("gpu:a100:3(IDX:0,2-3)"), vec![0, 2, 3]);
        assert_eq!(parse_memory("300M"), Some(Bytes(300 << 20)));
        assert_eq!(parse_memory("1.5G"), Some(Bytes(3 << 29)));
        assert_eq!(parse_memory("512"), Some(Bytes(512 << 20)));
        assert_eq!(parse_memory("lots"), None);
    }

    #[test]
    fn the_batch_script_quotes_every_word_and_refuses_bad_names() {
        let mut req = JobRequest {
            name: "synergy-j1".into(),
            command: vec!["/bin/echo".into(), "it's $HOME".into()],
            env: vec![("SYNERGY_STATE_FILE".into(), "/tmp/a b".into())],
            workdir: "/tmp".into(),
            stdout: "/tmp/100%.out".into(),
            stderr: "/tmp/e".into(),
            append_output: true,
            node: Some("vm".into()),
            cpus: 2,
            memory: Bytes(300 << 20),
            gpus: 1,
            partition: None,
            comment: Some("synergy:image synergy-run:7".into()),
        };
        let s = batch_script(&req).unwrap();
        assert!(s.contains("export SYNERGY_STATE_FILE='/tmp/a b'\n"), "{s}");
        assert!(s.ends_with("exec '/bin/echo' 'it'\\''s $HOME'\n"), "{s}");
        let args = sbatch_args(std::slice::from_ref(&req));
        for a in [
            "--cpus-per-task=2",
            "--mem=300M",
            "--gres=gpu:1",
            "--nodelist=vm",
            "--output=/tmp/100%%.out",
            "--open-mode=append",
            "--no-requeue",
            "--comment=synergy:image synergy-run:7",
        ] {
            assert!(args.iter().any(|x| x == a), "{a} not in {args:?}");
        }
        let mut bad = req.clone();
        bad.comment = Some("two\nlines".into());
        assert!(matches!(
            batch_script(&bad),
            Err(SlurmError::InvalidRequest { .. })
        ));
        req.env.push(("BAD NAME".into(), "x".into()));
        assert!(matches!(
            batch_script(&req),
            Err(SlurmError::InvalidRequest { .. })
        ));
    }

    #[test]
    fn tool_failures_become_actionable_errors() {
        let e = classify_failure(
            "sinfo".into(),
            "exit status: 1".into(),
            "sinfo: error: Unable to contact slurm controller (connect failure)".into(),
        );
        assert!(matches!(e, SlurmError::Unreachable { .. }));
        assert!(e.to_string().contains("scripts/slurm-setup.sh"), "{e}");
        let e = classify_failure(
            "sbatch".into(),
            "exit status: 1".into(),
            "sbatch: error: Munge encode failed: Failed to access \"/run/munge/munge.socket.2\""
                .into(),
        );
        assert!(matches!(e, SlurmError::Auth { .. }));
    }

    #[test]
    fn a_job_over_several_nodes_is_one_job_or_a_heterogeneous_one() {
        let task = |node: &str, cpus: u32, mib: u64, gpus: u32| JobRequest {
            name: "synergy-run-1-wide".into(),
            command: vec!["/bin/work".into(), node.into()],
            env: vec![("SYNERGY_STATE_FILE".into(), format!("/s/{node}"))],
            workdir: "/tmp".into(),
            stdout: "/tmp/o".into(),
            stderr: "/tmp/e".into(),
            append_output: false,
            node: Some(node.into()),
            cpus,
            memory: Bytes(mib << 20),
            gpus,
            partition: Some("main".into()),
            comment: Some("synergy:image synergy-run:1-2".into()),
        };
        // Equal shares: `--nodes=2 --ntasks-per-node=1` with the per-node resources, both nodes listed.
        let equal = [task("n1", 1, 256, 1), task("n2", 1, 256, 1)];
        let args = sbatch_args(&equal);
        for a in [
            "--nodes=2",
            "--ntasks-per-node=1",
            "--cpus-per-task=1",
            "--mem=256M",
            "--gres=gpu:1",
            "--nodelist=n1,n2",
            "--job-name=synergy-run-1-wide",
        ] {
            assert_eq!(
                args.iter().filter(|x| *x == a).count(),
                1,
                "{a} in {args:?}"
            );
        }
        assert!(!args.iter().any(|x| x == ":"), "{args:?}");
        let script = spread_script(&equal).unwrap();
        assert!(
            script.contains("exec srun --kill-on-bad-exit=1 /bin/sh -c "),
            "{script}"
        );
        // Unequal shares: one component per node, in order, each with its own resources.
        let unequal = [task("n1", 1, 512, 2), task("n2", 2, 256, 1)];
        let args = sbatch_args(&unequal);
        let colon = args.iter().position(|x| x == ":").expect("two components");
        let (first, second) = (&args[..colon], &args[colon + 1..]);
        for (part, want) in [
            (
                first,
                [
                    "--nodelist=n1",
                    "--cpus-per-task=1",
                    "--mem=512M",
                    "--gres=gpu:2",
                ],
            ),
            (
                second,
                [
                    "--nodelist=n2",
                    "--cpus-per-task=2",
                    "--mem=256M",
                    "--gres=gpu:1",
                ],
            ),
        ] {
            for a in want {
                assert!(part.iter().any(|x| x == a), "{a} in {part:?}");
            }
            assert!(part.iter().any(|x| x == "--partition=main"), "{part:?}");
        }
        assert!(first.iter().any(|x| x == "--job-name=synergy-run-1-wide"));
        let script = spread_script(&unequal).unwrap();
        assert!(
            script.contains("exec srun --het-group=0,1 --kill-on-bad-exit=1"),
            "{script}"
        );
        // Each node runs its own exports and command, found by the node's name: the script run with
        // an `srun` that only runs its command, as on each node.
        let dir = tempfile::tempdir().unwrap();
        let srun = dir.path().join("srun");
        std::fs::write(
            &srun,
            "#!/bin/sh\nwhile [ \"${1#--}\" != \"$1\" ]; do shift; done\nexec \"$@\"\n",
        )
        .unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&srun, std::fs::Permissions::from_mode(0o755)).unwrap();
        let mut tasks = unequal.clone();
        for t in tasks.iter_mut() {
            t.command = vec![
                "/bin/sh".into(),
                "-c".into(),
                "echo \"$0 it's $SYNERGY_STATE_FILE\"".into(),
                t.node.clone().unwrap(),
            ];
        }
        let script = spread_script(&tasks).unwrap();
        let path = format!(
            "{}:{}",
            dir.path().display(),
            std::env::var("PATH").unwrap_or_default()
        );
        for node in ["n1", "n2", "n3"] {
            let out = std::process::Command::new("/bin/sh")
                .args(["-c", &script])
                .env("PATH", &path)
                .env("SLURMD_NODENAME", node)
                .output()
                .unwrap();
            let said = String::from_utf8_lossy(&out.stdout);
            if node == "n3" {
                assert!(!out.status.success(), "no task for {node}: {said}");
            } else {
                assert_eq!(said, format!("{node} it's /s/{node}\n"), "{script}");
            }
        }
        // Two tasks on one node, or a task without a node, are refused.
        let twice = [task("n1", 1, 256, 1), task("n1", 1, 256, 1)];
        assert!(matches!(
            spread_script(&twice),
            Err(SlurmError::InvalidRequest { .. })
        ));
        let mut nameless = unequal.clone();
        nameless[1].node = None;
        assert!(matches!(
            spread_script(&nameless),
            Err(SlurmError::InvalidRequest { .. })
        ));
    }
}
