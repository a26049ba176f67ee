//! A host-wide ledger of the cores synergy processes hold, so that two `measure` or `profile` runs on one
//! host do not both pin the lowest-numbered cores while others sit idle.
//!
//! Each core is one lock file, `<runtime dir>/cores/<N>.lock` (see [`runtime_dir`]), held with
//! `flock(LOCK_EX | LOCK_NB)`: the kernel drops the lock when its holder exits, even under `kill -9`, so no
//! stale entry ever needs cleaning. The holder writes its pid and command line into the file, so a refusal
//! can name it. The files are opened close-on-exec (Rust's default), so launched workloads do not inherit
//! the locks. Lock files are never removed: removing one while another process has it open would let two
//! processes lock two different files for one core.
//!
//! Within one process, claims are counted rather than locked again: a profile holds its cores for the whole
//! run, and each of its trials claims a subset of them again (claims prefer cores this process holds). The
//! ledger keeps processes apart, not the claims of one process.

use super::cpus::format_list;
use super::IsolateError;
use nix::errno::Errno;
use nix::fcntl::{Flock, FlockArg};
use std::collections::BTreeMap;
use std::fmt;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};

/// Cores claimed in the ledger; released when dropped (when the last claim of a core in this process goes).
#[derive(Debug)]
pub struct CoreLease {
    /// Sorted ascending.
    cores: Vec<usize>,
    /// The ledger's `cores` directory, or why the cores were taken without a ledger.
    ledger: Result<PathBuf, String>,
}

impl CoreLease {
    /// The cores held, sorted ascending.
    pub fn cores(&self) -> &[usize] {
        &self.cores
    }

    /// Why these cores are not in the host-wide ledger (it could not be used), for the trial's report;
    /// `None` when they are.
    pub fn unledgered(&self) -> Option<&str> {
        self.ledger.as_ref().err().map(String::as_str)
    }
}

impl Drop for CoreLease {
    fn drop(&mut self) {
        if let Ok(dir) = &self.ledger {
            if let Some(mine) = registry().get_mut(dir) {
                release(mine, &self.cores);
            }
        }
    }
}

/// A claim refused because other processes hold the cores it needs.
#[derive(Debug, thiserror::Error)]
#[error("cannot claim {asked}: {} (core ledger in {})", advice(.holders), .dir.display())]
pub struct LedgerError {
    /// What was asked for, in words (`2 of the 2 cores this process may use`, `cores 0,1`).
    pub asked: String,
    /// Who holds the cores that were wanted, one entry per holding process.
    pub holders: Vec<Holder>,
    /// The ledger's `cores` directory.
    pub dir: PathBuf,
}

impl From<LedgerError> for IsolateError {
    /// A refusal is the user's to resolve (wait, or choose other cores): a budget error, exit code 2.
    fn from(e: LedgerError) -> Self {
        IsolateError::Budget(e.to_string())
    }
}

/// A process holding cores, as its lock files name it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Holder {
    /// The cores it holds that were wanted.
    pub cores: Vec<usize>,
    /// Its pid; `None` when the file does not name one yet (it was locked a moment ago).
    pub pid: Option<i32>,
    /// Its command line, as it wrote it.
    pub command: String,
    /// Whether that pid still runs here. A lock whose named process is gone is held by something it forked,
    /// or by a process in another pid namespace.
    pub running: bool,
}

impl fmt::Display for Holder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (noun, verb) = if self.cores.len() == 1 {
            ("core", "is")
        } else {
            ("cores", "are")
        };
        write!(f, "{noun} {} {verb} held by ", format_list(&self.cores))?;
        match self.pid {
            None => f.write_str("a process that has not written its name yet"),
            Some(pid) => {
                write!(f, "pid {pid} (`{}`)", self.command)?;
                if !self.running {
                    f.write_str(
                        ", which is no longer running here (a process it forked may hold the lock)",
                    )?;
                }
                Ok(())
            }
        }
    }
}

fn advice(holders: &[Holder]) -> String {
    if holders.is_empty() {
        return "there are not that many".into();
    }
    let who: Vec<String> = holders.iter().map(Holder::to_string).collect();
    let them = if holders.len() == 1 { "it" } else { "them" };
    format!(
        "{}; wait for {them} to finish, or {}",
        who.join("; "),
        crate::error::Setting::CpuList.to("free cores")
    )
}

/// Where the ledger lives: `$SYNERGY_RUNTIME_DIR`; else `/run/synergy` for root or when it is writable
/// (an administrator may make it shared by every user); else `$XDG_RUNTIME_DIR/synergy`; else
/// `/tmp/synergy-<uid>`.
pub fn runtime_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("SYNERGY_RUNTIME_DIR").filter(|d| !d.is_empty()) {
        return dir.into();
    }
    let run = Path::new("/run/synergy");
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    if root || nix::unistd::access(run, nix::unistd::AccessFlags::W_OK).is_ok() {
        return run.into();
    }
    if let Some(dir) = std::env::var_os("XDG_RUNTIME_DIR").filter(|d| !d.is_empty()) {
        return Path::new(&dir).join("synergy");
    }
    // SAFETY: getuid has no preconditions.
    PathBuf::from(format!("/tmp/synergy-{}", unsafe { libc::getuid() }))
}

/// Claims the `n` lowest-numbered free cores among `within` (the cores this process may use, e.g.
/// [`host_cores`](crate::measure::trial::host_cores) or a parent cpuset), taking cores this process already
/// holds first. Refused, naming the holders, when fewer than `n` are free. When the ledger cannot be used
/// at all, the `n` lowest of `within` are returned unledgered (see [`CoreLease::unledgered`]).
pub fn claim(n: usize, within: &[usize]) -> Result<CoreLease, LedgerError> {
    claim_in(&runtime_dir(), n, within)
}

/// Claims exactly `cores` (an explicit `--cpu-list`); refused, naming the holders, when any is held by
/// another process. When the ledger cannot be used at all, `cores` are returned unledgered.
pub fn claim_exact(cores: &[usize]) -> Result<CoreLease, LedgerError> {
    claim_exact_in(&runtime_dir(), cores)
}

fn claim_in(runtime: &Path, n: usize, within: &[usize]) -> Result<CoreLease, LedgerError> {
    let mut candidates = within.to_vec();
    candidates.sort_unstable();
    candidates.dedup();
    let asked = format!(
        "{n} of the {} cores this process may use ({})",
        candidates.len(),
        format_list(&candidates)
    );
    let fallback = candidates.iter().copied().take(n).collect();
    claim_from(runtime, candidates, n, asked, fallback)
}

fn claim_exact_in(runtime: &Path, cores: &[usize]) -> Result<CoreLease, LedgerError> {
    let asked = format!("cores {}", format_list(cores));
    claim_from(runtime, cores.to_vec(), cores.len(), asked, cores.to_vec())
}

/// What this process holds: per ledger directory, per core, the locked file and how many leases share it.
static HELD: Mutex<BTreeMap<PathBuf, BTreeMap<usize, Held>>> = Mutex::new(BTreeMap::new());

struct Held {
    lock: Flock<File>,
    count: usize,
}

fn registry() -> MutexGuard<'static, BTreeMap<PathBuf, BTreeMap<usize, Held>>> {
    HELD.lock().unwrap_or_else(|e| e.into_inner())
}

/// Drops one claim of each of `cores` from `mine`, unlocking those no lease holds any more.
fn release(mine: &mut BTreeMap<usize, Held>, cores: &[usize]) {
    for core in cores {
        if let Some(h) = mine.get_mut(core) {
            h.count -= 1;
            if h.count == 0 {
                // Cleared so that a refusal racing the next holder's write does not name this process.
                let _ = h.lock.set_len(0);
                mine.remove(core);
            }
        }
    }
}

/// Takes `n` of `candidates` (cores this process holds first, then in the given order) in the ledger under
/// `runtime`. `asked` describes the request for a refusal; `fallback` is what to hand out when the ledger
/// cannot be used.
fn claim_from(
    runtime: &Path,
    mut candidates: Vec<usize>,
    n: usize,
    asked: String,
    fallback: Vec<usize>,
) -> Result<CoreLease, LedgerError> {
    let unledgered = |what: String, e: &dyn fmt::Display| {
        let mut cores = fallback.clone();
        cores.sort_unstable();
        CoreLease {
            cores,
            ledger: Err(format!(
                "cores chosen without the host-wide ledger ({what}: {e}), so another synergy process may use them too"
            )),
        }
    };
    let dir = runtime.join("cores");
    let dir = match std::fs::create_dir_all(&dir).and_then(|()| dir.canonicalize()) {
        Ok(d) => d,
        Err(e) => return Ok(unledgered(format!("creating {}", dir.display()), &e)),
    };
    let mut held = registry();
    let mine = held.entry(dir.clone()).or_default();
    candidates.sort_by_key(|c| !mine.contains_key(c));
    let mut taken = Vec::new();
    let mut busy = Vec::new();
    for core in candidates {
        if taken.len() == n {
            break;
        }
        if let Some(h) = mine.get_mut(&core) {
            h.count += 1;
            taken.push(core);
            continue;
        }
        let path = dir.join(format!("{core}.lock"));
        let locked = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            // Truncating before the lock is ours would erase the holder's name.
            .truncate(false)
            .open(&path)
            .map_err(|e| Errno::from_raw(e.raw_os_error().unwrap_or(libc::EIO)))
            .and_then(|f| Flock::lock(f, FlockArg::LockExclusiveNonblock).map_err(|(_, e)| e));
        match locked {
            Ok(mut lock) => {
                // The lock is what keeps others off; the name only helps their refusal, so a failed write
                // does not fail the claim.
                let _ = lock
                    .set_len(0)
                    .and_then(|()| write!(lock, "{}\n{}\n", std::process::id(), own_command()));
                mine.insert(core, Held { lock, count: 1 });
                taken.push(core);
            }
            Err(Errno::EWOULDBLOCK) => busy.push(core),
            Err(e) => {
                release(mine, &taken);
                return Ok(unledgered(format!("locking {}", path.display()), &e));
            }
        }
    }
    if taken.len() < n {
        release(mine, &taken);
        return Err(LedgerError {
            asked,
            holders: holders(&dir, &busy),
            dir,
        });
    }
    taken.sort_unstable();
    Ok(CoreLease {
        cores: taken,
        ledger: Ok(dir),
    })
}

/// This process's command line, with the program's directory left out.
fn own_command() -> String {
    let mut args = std::env::args_os().map(|a| a.to_string_lossy().into_owned());
    let program = args.next().unwrap_or_default();
    let program = Path::new(&program)
        .file_name()
        .map_or(program.clone(), |n| n.to_string_lossy().into_owned());
    std::iter::once(program)
        .chain(args)
        .collect::<Vec<_>>()
        .join(" ")
}

/// Who holds `cores`, from their lock files, grouped by process.
fn holders(dir: &Path, cores: &[usize]) -> Vec<Holder> {
    let mut by_process: BTreeMap<(Option<i32>, String), Vec<usize>> = BTreeMap::new();
    for &core in cores {
        let text = std::fs::read_to_string(dir.join(format!("{core}.lock"))).unwrap_or_default();
        let mut lines = text.lines();
        let pid = lines.next().and_then(|l| l.trim().parse().ok());
        let command = lines.next().unwrap_or_default().to_string();
        let entry = by_process.entry((pid, command)).or_default();
        if !entry.contains(&core) {
            entry.push(core);
        }
    }
    by_process
        .into_iter()
        .map(|((pid, command), cores)| Holder {
            cores,
            pid,
            command,
            running: pid.is_some_and(crate::fsutil::process_alive),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{BufRead, BufReader};
    use std::process::{Child, Command, Stdio};

    const HOLD_DIR: &str = "SYNERGY_LEDGER_TEST_HOLD_DIR";
    const HOLD_CORES: &str = "SYNERGY_LEDGER_TEST_HOLD_CORES";

    /// Not a test: the other process of the tests below. It claims the cores it is told to, says so on
    /// stdout, and holds them until its stdin closes or it is killed.
    #[test]
    #[ignore = "run by other tests in a child process"]
    fn hold_cores_in_a_child() {
        let (Some(dir), Some(cores)) = (std::env::var_os(HOLD_DIR), std::env::var(HOLD_CORES).ok())
        else {
            return;
        };
        let cores: Vec<usize> = cores.split(',').map(|c| c.parse().unwrap()).collect();
        let lease = claim_exact_in(Path::new(&dir), &cores).unwrap();
        assert!(lease.unledgered().is_none());
        println!("holding {:?}", lease.cores());
        let _ = std::io::stdin().lines().count();
    }

    /// Another process holding `cores` in the ledger under `runtime`, once this returns.
    fn holder(runtime: &Path, cores: &str) -> Child {
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "isolate::ledger::tests::hold_cores_in_a_child",
                "--ignored",
                "--nocapture",
            ])
            .env(HOLD_DIR, runtime)
            .env(HOLD_CORES, cores)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let out = BufReader::new(child.stdout.take().unwrap());
        // Not the line's start: run serially (one CPU, as under a CFS quota of one core) the test
        // harness writes `test NAME ... ` before the test's own output, on the same line.
        for line in out.lines() {
            if line.unwrap().contains("holding [") {
                return child;
            }
        }
        panic!("the holding child exited: {:?}", child.wait());
    }

    fn killed(mut child: Child) {
        child.kill().unwrap();
        child.wait().unwrap();
    }

    #[test]
    fn another_process_gets_the_next_free_core() {
        let runtime = tempfile::tempdir().unwrap();
        let child = holder(runtime.path(), "0");
        let lease = claim_in(runtime.path(), 1, &[0, 1, 2]).unwrap();
        assert_eq!(lease.cores(), &[1]);
        let two = claim_in(runtime.path(), 2, &[2, 0, 1, 3]).unwrap();
        assert_eq!(
            two.cores(),
            &[1, 2],
            "held cores first, then the lowest free"
        );
        killed(child);
    }

    #[test]
    fn cores_held_by_another_process_are_refused_naming_it_until_it_dies() {
        let runtime = tempfile::tempdir().unwrap();
        let child = holder(runtime.path(), "0,1");
        let pid = child.id() as i32;
        let err = claim_exact_in(runtime.path(), &[1, 2]).unwrap_err();
        assert_eq!(err.holders.len(), 1);
        assert_eq!(err.holders[0].pid, Some(pid));
        assert_eq!(err.holders[0].cores, vec![1]);
        assert!(err.holders[0].running);
        let msg = err.to_string();
        assert!(
            msg.contains(&format!("core 1 is held by pid {pid} (`")),
            "{msg}"
        );
        assert!(msg.contains("hold_cores_in_a_child"), "{msg}");
        assert!(
            msg.contains("wait for it to finish, or set `cpu_list` to free cores"),
            "{msg}"
        );
        let msg = claim_in(runtime.path(), 2, &[0, 1])
            .unwrap_err()
            .to_string();
        assert!(
            msg.contains(&format!("cores 0,1 are held by pid {pid}")),
            "{msg}"
        );
        assert!(matches!(
            IsolateError::from(claim_in(runtime.path(), 3, &[0, 1, 2]).unwrap_err()),
            IsolateError::Budget(_)
        ));
        let msg = claim_in(runtime.path(), 4, &[0, 1, 2])
            .unwrap_err()
            .to_string();
        assert!(msg.contains("held by pid"), "{msg}");
        let msg = claim_in(runtime.path(), 2, &[2]).unwrap_err().to_string();
        assert!(
            msg.contains(
                "cannot claim 2 of the 1 cores this process may use (2): there are not that many"
            ),
            "{msg}"
        );
        // The refusals took nothing: core 2 is still free.
        assert_eq!(
            claim_in(runtime.path(), 1, &[0, 1, 2]).unwrap().cores(),
            &[2]
        );

        // kill -9: the kernel drops its locks.
        killed(child);
        let lease = claim_exact_in(runtime.path(), &[0, 1]).unwrap();
        assert_eq!(lease.cores(), &[0, 1]);
    }

    /// Whether another open file description can lock `core` now (flock conflicts between descriptions
    /// even within one process).
    fn lockable(runtime: &Path, core: usize) -> bool {
        let f = File::open(runtime.join(format!("cores/{core}.lock"))).unwrap();
        Flock::lock(f, FlockArg::LockExclusiveNonblock).is_ok()
    }

    #[test]
    fn claims_within_one_process_are_counted() {
        let runtime = tempfile::tempdir().unwrap();
        let whole_run = claim_exact_in(runtime.path(), &[3]).unwrap();
        let trial = claim_in(runtime.path(), 1, &[0, 1, 2, 3]).unwrap();
        assert_eq!(
            trial.cores(),
            &[3],
            "a claim lands on cores this process holds"
        );
        let text = std::fs::read_to_string(runtime.path().join("cores/3.lock")).unwrap();
        assert_eq!(
            text.lines().next(),
            Some(std::process::id().to_string().as_str())
        );
        drop(whole_run);
        assert!(!lockable(runtime.path(), 3), "still held by the trial");
        drop(trial);
        assert!(lockable(runtime.path(), 3), "released with the last lease");
    }

    #[test]
    fn an_unusable_ledger_hands_out_cores_unledgered() {
        let runtime = tempfile::NamedTempFile::new().unwrap();
        let lease = claim_in(runtime.path(), 2, &[3, 1, 2]).unwrap();
        assert_eq!(lease.cores(), &[1, 2]);
        let why = lease.unledgered().unwrap();
        assert!(why.contains("without the host-wide ledger"), "{why}");
        let exact = claim_exact_in(runtime.path(), &[2]).unwrap();
        assert_eq!(exact.cores(), &[2]);
        assert!(exact.unledgered().is_some());
    }
}
