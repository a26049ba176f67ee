//! Starting a workload command under the launch contract (docs/architecture.md §3.1), inside an isolation domain,
//! and stopping it again with everything it started.

use super::probe::ProbeDir;
use super::spec::{LauncherKind, Placeholders, ProgressSpec, Stream};
use super::{env, WorkloadError, WorkloadSpec};
use crate::isolate::ChildSetup;
use crate::units::{Bytes, Cores};
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The descriptor number the progress pipe has in the workload.
pub const PROGRESS_FD: i32 = 3;

/// The prefix of a workload's own temporary directory, followed by its maker's pid
/// (docs/architecture.md §3.1; [`crate::leftovers`] removes a dead maker's).
pub const WORKLOAD_TMP_PREFIX: &str = "synergy-tmp-";

/// What to launch, and with which budget.
#[derive(Debug, Clone)]
pub struct LaunchConfig<'a> {
    /// The workload.
    pub spec: &'a WorkloadSpec,
    /// Its dataset directory, when it has one.
    pub dataset: Option<&'a Path>,
    /// Cores granted.
    pub cpus: Cores,
    /// Core ids of the cpuset.
    pub cpu_list: &'a [usize],
    /// Application cache budget, when the workload has an application cache.
    pub cache_bytes: Option<Bytes>,
    /// Feed synthetic batches (accelerator rate only).
    pub synthetic: bool,
    /// What the child does before exec to enter its isolation domain.
    pub setup: ChildSetup,
    /// Arguments appended to the spec's command (the executor's `--max-samples N`).
    pub extra_args: &'a [String],
    /// Environment added after the contract's own (the executor's `SYNERGY_STATE_FILE`,
    /// `CUDA_VISIBLE_DEVICES`).
    pub extra_env: &'a [(String, String)],
    /// Where a launcher spec's ranks run; `None`: the spec's `gpus` ranks, all on this host.
    pub ranks: Option<RankLayout>,
}

/// Where the ranks of a spec with a `launcher` run: how many on this node, and, for a job over several
/// nodes, where they meet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RankLayout {
    /// Ranks started on this node (one per GPU it has of the job).
    pub local_ranks: u32,
    /// Ranks of the whole job (its GPUs): they share the spec's `batch_size`.
    pub world_size: u32,
    /// The nodes of a job spread over several; `None` for a job on one.
    pub rendezvous: Option<Rendezvous>,
}

/// How the launchers of one job on several nodes find each other: the first node hosts the rendezvous.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rendezvous {
    /// Nodes of the job.
    pub nodes: u32,
    /// This node's place among them (0 hosts the rendezvous).
    pub node_rank: u32,
    /// The first node's address.
    pub master_addr: String,
    /// The port the rendezvous listens on there.
    pub master_port: u16,
}

/// The command that starts `rank_argv` (one rank's command) as `layout`'s ranks through `launcher`.
pub fn launcher_argv(
    launcher: LauncherKind,
    layout: &RankLayout,
    rank_argv: Vec<String>,
) -> Vec<String> {
    match launcher {
        LauncherKind::Torchrun => {
            let mut argv = vec![
                super::spec::python(),
                "-m".into(),
                "torch.distributed.run".into(),
            ];
            match &layout.rendezvous {
                // One node: a rendezvous of its own on a free local port.
                None => argv.push("--standalone".into()),
                Some(r) => argv.extend([
                    format!("--nnodes={}", r.nodes),
                    format!("--node-rank={}", r.node_rank),
                    format!("--master-addr={}", r.master_addr),
                    format!("--master-port={}", r.master_port),
                ]),
            }
            argv.push(format!("--nproc-per-node={}", layout.local_ranks.max(1)));
            // The rank's command is run as it is: it names its own interpreter.
            argv.push("--no-python".into());
            argv.extend(rank_argv);
            argv
        }
    }
}

/// Where the workload's progress arrives.
pub enum ProgressStream {
    /// The read end of the progress pipe.
    Pipe(File),
    /// The workload's stdout or stderr, for a regular-expression reader.
    Output(Box<dyn Read + Send>),
}

/// A running workload.
pub struct Running {
    /// The child process (leader of its own process group).
    pub child: Child,
    /// Its progress stream; taken by the reader.
    pub progress: Option<ProgressStream>,
    stderr_file: Option<File>,
    /// The probe's files, removed when the workload is dropped.
    _probe: Option<ProbeDir>,
    /// The workload's own directory, removed when it is dropped (after its processes are stopped): its
    /// progress FIFO, and its `TMPDIR` unless its spec names one, so what it leaves there
    /// (multiprocessing's `pymp-*` directories of PyTorch loader workers killed with it) goes with it.
    _tmp: tempfile::TempDir,
    started: Instant,
    status: Option<std::process::ExitStatus>,
    /// A write end of the progress channel held while the workload runs, so that its reader sees the
    /// end of the stream only once the workload is over: a launcher may close its inherited end
    /// before the ranks it starts have opened the FIFO.
    progress_writer: Option<OwnedFd>,
}

impl Running {
    /// When the workload was started.
    pub fn started(&self) -> Instant {
        self.started
    }

    /// The last `max_bytes` the workload wrote to stderr (empty when stderr feeds a progress reader).
    pub fn stderr_tail(&mut self, max_bytes: u64) -> String {
        match self.stderr_file.as_mut() {
            Some(f) => file_tail(f, max_bytes),
            None => String::new(),
        }
    }

    /// The workload's exit status once it has exited; then also kills what is left of its process group.
    /// Checks without reaping first, so the group id cannot have been reused when it is signalled.
    pub fn poll_exit(&mut self) -> Option<std::process::ExitStatus> {
        if let Some(s) = self.status {
            return Some(s);
        }
        if !self.exited_unreaped() {
            return None;
        }
        kill_group(self.child.id(), libc::SIGKILL);
        self.status = self.child.wait().ok();
        self.progress_writer = None;
        self.status
    }

    fn exited_unreaped(&self) -> bool {
        // SAFETY: waitid with WNOWAIT only inspects our own child; siginfo is plain data.
        unsafe {
            let mut info: libc::siginfo_t = std::mem::zeroed();
            let r = libc::waitid(
                libc::P_PID,
                self.child.id() as libc::id_t,
                &mut info,
                libc::WEXITED | libc::WNOHANG | libc::WNOWAIT,
            );
            r == 0 && info.si_pid() != 0
        }
    }

    /// Stops the workload and every process in its group: SIGTERM, then SIGKILL after `grace`; reaps it.
    /// Returns its exit status.
    pub fn stop(&mut self, grace: Duration) -> Option<std::process::ExitStatus> {
        if self.status.is_some() {
            return self.status;
        }
        kill_group(self.child.id(), libc::SIGTERM);
        let deadline = Instant::now() + grace;
        while Instant::now() < deadline && !self.exited_unreaped() {
            std::thread::sleep(Duration::from_millis(10));
        }
        kill_group(self.child.id(), libc::SIGKILL);
        self.status = self.child.wait().ok();
        self.progress_writer = None;
        self.status
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.stop(Duration::from_millis(200));
    }
}

/// The last `max_bytes` of a log file, trimmed (empty when it cannot be read).
pub fn file_tail(f: &mut File, max_bytes: u64) -> String {
    let len = f.metadata().map(|m| m.len()).unwrap_or(0);
    let mut buf = Vec::new();
    if f.seek(SeekFrom::Start(len.saturating_sub(max_bytes)))
        .is_ok()
    {
        let _ = f.read_to_end(&mut buf);
    }
    String::from_utf8_lossy(&buf).trim().to_string()
}

fn kill_group(pid: u32, signal: i32) {
    // SAFETY: killpg with a process-group id we created; errors (group already gone) are harmless.
    unsafe {
        libc::killpg(pid as libc::pid_t, signal);
    }
}

/// A command's argv and its environment additions.
pub type CommandLine = (Vec<String>, Vec<(String, String)>);

/// Expands the spec's command and environment for this launch.
pub fn command_line(cfg: &LaunchConfig) -> Result<CommandLine, WorkloadError> {
    let spec = cfg.spec;
    let mut ph = Placeholders::base(spec);
    ph.values.insert(
        "dataset",
        cfg.dataset
            .map(|d| d.display().to_string())
            .unwrap_or_default(),
    );
    ph.values.insert("cpus", cfg.cpus.to_string());
    ph.values.insert("threads", cfg.cpus.whole().to_string());
    if let Some(layout) = &cfg.ranks {
        ph.values.insert(
            "rank_batch_size",
            spec.rank_batch_size(layout.world_size).to_string(),
        );
    }
    ph.values.insert(
        "cache_bytes",
        cfg.cache_bytes.map(|b| b.0.to_string()).unwrap_or_default(),
    );
    let mut argv = spec
        .command
        .iter()
        .enumerate()
        .map(|(i, a)| ph.expand(a, &spec.origin, &format!("command[{i}]")))
        .collect::<Result<Vec<_>, _>>()?;
    argv.extend(cfg.extra_args.iter().cloned());
    if let Some(launcher) = spec.launcher {
        let layout = cfg.ranks.clone().unwrap_or(RankLayout {
            local_ranks: spec.gpus,
            world_size: spec.gpus,
            rendezvous: None,
        });
        argv = launcher_argv(launcher, &layout, argv);
    }
    let mut envs: Vec<(String, String)> = spec
        .env
        .iter()
        .map(|(k, v)| Ok((k.clone(), ph.expand(v, &spec.origin, &format!("env.{k}"))?)))
        .collect::<Result<_, WorkloadError>>()?;
    envs.push((env::CPUS.into(), cfg.cpus.to_string()));
    let list: Vec<String> = cfg.cpu_list.iter().map(|c| c.to_string()).collect();
    envs.push((env::CPU_LIST.into(), list.join(",")));
    if let Some(b) = cfg.cache_bytes {
        envs.push((env::CACHE_BYTES.into(), b.0.to_string()));
    }
    if cfg.synthetic {
        envs.push((env::SYNTHETIC.into(), "1".into()));
    }
    if matches!(spec.progress, ProgressSpec::Pipe) {
        envs.push((env::PROGRESS_FD.into(), PROGRESS_FD.to_string()));
    }
    envs.extend(cfg.extra_env.iter().cloned());
    Ok((argv, envs))
}

/// The file name of the progress FIFO in the workload's own temporary directory.
const PROGRESS_FIFO: &str = "synergy-progress";

/// The progress channel: a FIFO in `dir`, whose read end is returned and whose write end the child
/// inherits as [`PROGRESS_FD`]. Every process of the workload may open the FIFO by its path too
/// ([`env::PROGRESS_PATH`]); the launcher keeps a write end of its own until the workload has exited
/// ([`Running::poll_exit`], [`Running::stop`]), so the read end sees end of stream only once the
/// workload is over and every writer has closed it.
fn progress_fifo(dir: &Path) -> Result<(File, OwnedFd, std::path::PathBuf), WorkloadError> {
    use nix::fcntl::{open, OFlag};
    use nix::sys::stat::Mode;
    let path = dir.join(PROGRESS_FIFO);
    let ctx = |what: &str| format!("{what} the progress FIFO {}", path.display());
    let err = |what: &str, e: nix::Error| WorkloadError::io(ctx(what), e.into());
    nix::unistd::mkfifo(&path, Mode::S_IRUSR | Mode::S_IWUSR).map_err(|e| err("creating", e))?;
    // Opening the read end without waiting for a writer, then the write end (a reader now exists),
    // and only then making reads block.
    let read = open(
        &path,
        OFlag::O_RDONLY | OFlag::O_NONBLOCK | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| err("opening", e))?;
    // SAFETY: `open` returned a descriptor nobody else owns.
    let read = unsafe { OwnedFd::from_raw_fd(read) };
    let write = open(&path, OFlag::O_WRONLY | OFlag::O_CLOEXEC, Mode::empty())
        .map_err(|e| err("opening", e))?;
    // SAFETY: as above.
    let write = unsafe { OwnedFd::from_raw_fd(write) };
    let flags = nix::fcntl::fcntl(read.as_raw_fd(), nix::fcntl::F_GETFL)
        .map_err(|e| err("reading the flags of", e))?;
    let blocking = OFlag::from_bits_truncate(flags) - OFlag::O_NONBLOCK;
    nix::fcntl::fcntl(read.as_raw_fd(), nix::fcntl::F_SETFL(blocking))
        .map_err(|e| err("setting the flags of", e))?;
    Ok((File::from(read), write, path))
}

/// Starts the workload. The child is placed in its domain, made leader of a new process group, and set
/// to die with this process, all before its first instruction.
pub fn launch(cfg: &LaunchConfig) -> Result<Running, WorkloadError> {
    let (argv, mut envs) = command_line(cfg)?;
    let probe = match cfg.spec.probe {
        Some(kind) => {
            let dir = ProbeDir::write(kind)?;
            let existing = envs
                .iter()
                .rev()
                .find(|(k, _)| k == "PYTHONPATH")
                .map(|(_, v)| v.clone())
                .or_else(|| std::env::var("PYTHONPATH").ok());
            envs.push(("PYTHONPATH".into(), dir.python_path(existing.as_deref())));
            Some(dir)
        }
        None => None,
    };
    // The workload's own directory holds its progress FIFO, and is its TMPDIR unless its spec names
    // one.
    let tmp = tempfile::Builder::new()
        .prefix(&format!("{WORKLOAD_TMP_PREFIX}{}-", std::process::id()))
        .tempdir()
        .map_err(|e| WorkloadError::io("creating the workload's temporary directory", e))?;
    if !envs.iter().any(|(k, _)| k == "TMPDIR") {
        envs.push(("TMPDIR".into(), tmp.path().display().to_string()));
    }
    let mut cmd = Command::new(&argv[0]);
    cmd.args(&argv[1..]).envs(envs).stdin(Stdio::null());
    // Do not leak the parent's own contract variables into a workload that does not use them.
    if !matches!(cfg.spec.progress, ProgressSpec::Pipe) {
        cmd.env_remove(env::PROGRESS_FD);
    }
    if !cfg.synthetic {
        cmd.env_remove(env::SYNTHETIC);
    }
    if cfg.cache_bytes.is_none() {
        cmd.env_remove(env::CACHE_BYTES);
    }
    if !cfg.extra_env.iter().any(|(k, _)| k == env::STATE_FILE) {
        cmd.env_remove(env::STATE_FILE);
    }
    let regex_stream = match &cfg.spec.progress {
        ProgressSpec::Regex { stream, .. } => Some(*stream),
        ProgressSpec::Pipe => None,
    };
    cmd.stdout(if regex_stream == Some(Stream::Stdout) {
        Stdio::piped()
    } else {
        Stdio::null()
    });
    let stderr_file = if regex_stream == Some(Stream::Stderr) {
        cmd.stderr(Stdio::piped());
        None
    } else {
        let f = tempfile::tempfile()
            .map_err(|e| WorkloadError::io("creating a file for the workload's stderr", e))?;
        let dup = f
            .try_clone()
            .map_err(|e| WorkloadError::io("duplicating the stderr file", e))?;
        cmd.stderr(Stdio::from(dup));
        Some(f)
    };
    let pipe = if regex_stream.is_none() {
        let (r, w, path) = progress_fifo(tmp.path())?;
        cmd.env(env::PROGRESS_PATH, path);
        Some((r, w))
    } else {
        cmd.env_remove(env::PROGRESS_PATH);
        None
    };
    let write_fd = pipe.as_ref().map(|(_, w)| w.as_raw_fd());
    let setup = cfg.setup.clone();
    cmd.process_group(0);
    // SAFETY: the hook only makes async-signal-safe calls (write, sched_setaffinity, prctl, dup2, fcntl).
    unsafe {
        cmd.pre_exec(move || {
            setup.apply_in_child()?;
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            if let Some(w) = write_fd {
                let r = if w == PROGRESS_FD {
                    libc::fcntl(w, libc::F_SETFD, 0)
                } else {
                    libc::dup2(w, PROGRESS_FD)
                };
                if r < 0 {
                    return Err(std::io::Error::last_os_error());
                }
            }
            Ok(())
        });
    }
    let mut child = cmd.spawn().map_err(|e| {
        WorkloadError::Input(crate::error::InputError::field(
            &cfg.spec.origin,
            "command[0]",
            format!("cannot start `{}`: {e}", argv[0]),
        ))
    })?;
    let mut progress_writer = None;
    let progress = match (pipe, regex_stream) {
        (Some((r, w)), _) => {
            progress_writer = Some(w);
            Some(ProgressStream::Pipe(r))
        }
        (None, Some(Stream::Stdout)) => child
            .stdout
            .take()
            .map(|s| ProgressStream::Output(Box::new(s))),
        (None, Some(Stream::Stderr)) => child
            .stderr
            .take()
            .map(|s| ProgressStream::Output(Box::new(s))),
        (None, None) => None,
    };
    Ok(Running {
        child,
        progress,
        stderr_file,
        _probe: probe,
        _tmp: tmp,
        started: Instant::now(),
        status: None,
        progress_writer,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ddp_spec() -> WorkloadSpec {
        WorkloadSpec::parse(
            r#"name = "ddp"
command = ["python3", "train.py", "--batch-size", "{rank_batch_size}"]
launcher = "torchrun"
batch_size = 24
gpus = 2
"#,
            "ddp.toml",
            Path::new("."),
        )
        .unwrap()
    }

    fn config<'a>(spec: &'a WorkloadSpec, ranks: Option<RankLayout>) -> LaunchConfig<'a> {
        LaunchConfig {
            spec,
            dataset: None,
            cpus: Cores(2.0),
            cpu_list: &[0, 1],
            cache_bytes: None,
            synthetic: false,
            setup: ChildSetup::default(),
            extra_args: &[],
            extra_env: &[],
            ranks,
        }
    }

    #[test]
    fn a_launcher_spec_runs_its_gpus_ranks_through_torchrun_each_with_its_share_of_the_batch() {
        let spec = ddp_spec();
        let (argv, _) = command_line(&config(&spec, None)).unwrap();
        let at = argv.iter().position(|a| a == "--no-python").unwrap();
        assert_eq!(argv[1..3], ["-m", "torch.distributed.run"]);
        assert!(argv.contains(&"--standalone".to_string()), "{argv:?}");
        assert!(argv.contains(&"--nproc-per-node=2".to_string()), "{argv:?}");
        assert_eq!(
            argv[at + 1..],
            ["python3", "train.py", "--batch-size", "12"]
        );
    }

    #[test]
    fn a_job_over_several_nodes_meets_at_the_first_nodes_address() {
        let spec = ddp_spec();
        let layout = RankLayout {
            local_ranks: 1,
            world_size: 3,
            rendezvous: Some(Rendezvous {
                nodes: 2,
                node_rank: 1,
                master_addr: "10.0.0.1".into(),
                master_port: 29400,
            }),
        };
        let (argv, _) = command_line(&config(&spec, Some(layout))).unwrap();
        for want in [
            "--nnodes=2",
            "--node-rank=1",
            "--master-addr=10.0.0.1",
            "--master-port=29400",
            "--nproc-per-node=1",
        ] {
            assert!(argv.contains(&want.to_string()), "{want} in {argv:?}");
        }
        assert!(!argv.contains(&"--standalone".to_string()));
        // Three ranks share the job's 24 samples.
        assert_eq!(argv.last().unwrap(), "8");
    }

    #[test]
    fn a_launcher_batch_that_its_ranks_cannot_share_is_refused() {
        let text = "name = \"ddp\"\ncommand = [\"x\"]\nlauncher = \"torchrun\"\nbatch_size = 5\ngpus = 2\n";
        let e = WorkloadSpec::parse(text, "ddp.toml", Path::new(".")).unwrap_err();
        assert!(e.to_string().contains("batch_size"), "{e}");
        assert!(ddp_spec().check_ranks(3).is_ok());
        assert!(ddp_spec().check_ranks(5).is_err());
    }
}
