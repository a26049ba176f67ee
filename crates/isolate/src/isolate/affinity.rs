//! The fallback backend: pins the workload to whole cores with `sched_setaffinity`.
//!
//! Used where cgroups cannot be (no root, no delegation). It bounds CPU only, and only to whole cores:
//! a fractional budget is rounded *up* (`Domain::cpu_list().len()` is what the workload really gets,
//! see [`AffinityBackend::granted_cores`]). It cannot bound page cache or storage bandwidth, and it
//! cannot enumerate its tasks by itself: the launcher tells it the workload's pid with
//! [`Domain::adopt`], and usage is then read from the process tree in `/proc`.

use super::cpus;
use super::*;
use std::cell::Cell;
use std::collections::HashMap;
use std::fs;

/// Pins workloads to cores; enforces no memory or storage limit.
pub struct AffinityBackend;

impl AffinityBackend {
    /// The backend (always available).
    pub fn new() -> Self {
        AffinityBackend
    }

    /// The cores a budget really gets here: `ceil(cpus)`, since affinity cannot grant part of a core.
    pub fn granted_cores(budget: &Budget) -> Cores {
        Cores(budget.cpus.0.ceil())
    }
}

impl Default for AffinityBackend {
    fn default() -> Self {
        Self::new()
    }
}

fn check_limits(budget: &Budget) -> Result<(), IsolateError> {
    if budget.mem_limit.is_some() || budget.read_limit.is_some() {
        return Err(IsolateError::Budget(format!(
            "this budget needs cgroups: affinity isolation cannot bound page cache or storage \
                 bandwidth; drop the memory and storage limits, or {}",
            cgroup::way_to_delegate()
        )));
    }
    Ok(())
}

impl Isolation for AffinityBackend {
    fn kind(&self) -> IsolationKind {
        IsolationKind::Affinity
    }
    fn enforces(&self) -> Limits {
        Limits::default()
    }
    fn create(&self, _name: &str, budget: &Budget) -> Result<Box<dyn Domain>, IsolateError> {
        check_limits(budget)?;
        let cores = cpus::choose(budget, &cpus::own_affinity()?)?;
        Ok(Box::new(AffinityDomain {
            cores,
            pid: None,
            last: Cell::new(DomainStats::default()),
            destroyed: false,
        }))
    }
    fn reopen(&self, name: &str) -> Result<Option<Box<dyn Domain>>, IsolateError> {
        Err(IsolateError::Unavailable {
            backend: IsolationKind::Affinity,
            reason: format!(
                "cannot reopen domain `{name}`: an affinity domain is only a core mask on its \
                 process, nothing another process could find by name (reopening needs cgroups)"
            ),
        })
    }
}

/// A workload pinned to cores. Holds no kernel object: only the adopted pid.
pub struct AffinityDomain {
    cores: Vec<usize>,
    pid: Option<i32>,
    /// The last usage read, kept for when the workload has been reaped and `/proc` forgets it.
    last: Cell<DomainStats>,
    destroyed: bool,
}

/// What `/proc/<pid>/stat` says that we use.
struct ProcStat {
    ppid: i32,
    zombie: bool,
    /// utime + stime, clock ticks.
    own_ticks: u64,
    /// cutime + cstime: reaped children, clock ticks.
    children_ticks: u64,
}

fn proc_stat(pid: i32) -> Option<ProcStat> {
    let text = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name may hold spaces and parentheses: fields start after the last ')'.
    let rest = &text[text.rfind(')')? + 1..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    // f[0] is field 3 (state) of proc(5).
    let num = |i: usize| f.get(i).and_then(|v| v.parse::<u64>().ok());
    Some(ProcStat {
        ppid: f.get(1)?.parse().ok()?,
        zombie: f.first() == Some(&"Z"),
        own_ticks: num(11)? + num(12)?,
        children_ticks: num(13)? + num(14)?,
    })
}

fn read_bytes(pid: i32) -> Option<u64> {
    let text = fs::read_to_string(format!("/proc/{pid}/io")).ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix("read_bytes:"))
        .and_then(|v| v.trim().parse().ok())
}

/// Live descendants of `root` (not including it), from a scan of `/proc`.
fn descendants(root: i32) -> Vec<i32> {
    let mut children: HashMap<i32, Vec<i32>> = HashMap::new();
    if let Ok(entries) = fs::read_dir("/proc") {
        for e in entries.flatten() {
            let Some(pid) = e.file_name().to_str().and_then(|n| n.parse::<i32>().ok()) else {
                continue;
            };
            if let Some(st) = proc_stat(pid) {
                children.entry(st.ppid).or_default().push(pid);
            }
        }
    }
    let mut out = Vec::new();
    let mut stack = vec![root];
    while let Some(p) = stack.pop() {
        for &c in children.get(&p).map(Vec::as_slice).unwrap_or(&[]) {
            out.push(c);
            stack.push(c);
        }
    }
    out
}

fn clock_ticks() -> f64 {
    // SAFETY: sysconf has no preconditions.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 {
        t as f64
    } else {
        100.0
    }
}

impl AffinityDomain {
    /// The adopted pid and its live descendants.
    fn tree(&self) -> Vec<i32> {
        match self.pid {
            Some(pid) if proc_stat(pid).is_some() => {
                let mut v = vec![pid];
                v.extend(descendants(pid));
                v
            }
            _ => Vec::new(),
        }
    }
}

impl Domain for AffinityDomain {
    fn kind(&self) -> IsolationKind {
        IsolationKind::Affinity
    }

    fn cpu_list(&self) -> &[usize] {
        &self.cores
    }

    fn child_setup(&self) -> ChildSetup {
        ChildSetup {
            procs_fds: Vec::new(),
            affinity: Some(self.cores.clone()),
        }
    }

    fn adopt(&mut self, pid: i32) {
        self.pid = Some(pid);
    }

    /// CPU time of the adopted process, its reaped children and its live descendants; storage reads from
    /// `/proc/<pid>/io` (which also counts reaped children). Page cache and memory are unknown here.
    /// After the workload is reaped, the last values read are returned.
    fn stats(&self) -> DomainStats {
        let Some(root) = self.pid else {
            return self.last.get();
        };
        let Some(st) = proc_stat(root) else {
            return self.last.get();
        };
        let mut ticks = st.own_ticks + st.children_ticks;
        let mut read = read_bytes(root);
        for d in descendants(root) {
            if let Some(s) = proc_stat(d) {
                ticks += s.own_ticks + s.children_ticks;
            }
            if let (Some(r), Some(more)) = (read.as_mut(), read_bytes(d)) {
                *r += more;
            }
        }
        let s = DomainStats {
            cpu_seconds: ticks as f64 / clock_ticks(),
            storage_read_bytes: read,
            ..DomainStats::default()
        };
        self.last.set(s);
        s
    }

    fn pids(&self) -> Vec<i32> {
        self.tree()
            .into_iter()
            .filter(|&p| proc_stat(p).is_some_and(|s| !s.zombie))
            .collect()
    }

    fn update(&mut self, budget: &Budget) -> Result<(), IsolateError> {
        check_limits(budget)?;
        let cores = cpus::choose(budget, &cpus::own_affinity()?)?;
        for pid in self.tree() {
            cpus::set_affinity_of(pid, &cores)?;
        }
        self.cores = cores;
        Ok(())
    }

    /// SIGKILLs the adopted process group and any descendant that left it; reaping is the launcher's.
    fn destroy(&mut self) -> Result<(), IsolateError> {
        if self.destroyed {
            return Ok(());
        }
        if let Some(pid) = self.pid {
            let stray = descendants(pid);
            // ESRCH: the group is already gone, which is what we want.
            let _ = nix::sys::signal::killpg(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGKILL,
            );
            for p in stray {
                let _ = nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(p),
                    nix::sys::signal::Signal::SIGKILL,
                );
            }
        }
        self.destroyed = true;
        Ok(())
    }
}

impl Drop for AffinityDomain {
    fn drop(&mut self) {
        let _ = self.destroy();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::units::Bytes;
    use std::os::unix::process::{CommandExt, ExitStatusExt};
    use std::process::{Command, Stdio};
    use std::time::Duration;

    fn budget(cpus: f64) -> Budget {
        Budget {
            cpus: Cores(cpus),
            cpu_list: None,
            mem_limit: None,
            read_limit: None,
            count_reads_on: None,
        }
    }

    #[test]
    fn a_domain_cannot_be_reopened_by_name() {
        let err = match AffinityBackend::new().reopen("synergy-run-1-a") {
            Err(e) => e,
            Ok(_) => panic!("affinity reopened a domain"),
        };
        assert!(
            matches!(
                err,
                IsolateError::Unavailable {
                    backend: IsolationKind::Affinity,
                    ..
                }
            ),
            "{err}"
        );
        assert!(err.to_string().contains("`synergy-run-1-a`"), "{err}");
        assert_eq!(AffinityBackend::new().remove_stale("synergy-run-1-"), 0);
    }

    #[test]
    fn pins_a_child_tracks_it_and_kills_its_group() {
        let available = cpus::own_affinity().expect("affinity");
        let mut d = AffinityBackend::new()
            .create("synergy-test-aff", &budget(0.5))
            .expect("create");
        // Half a core still needs a whole one here.
        assert_eq!(d.cpu_list(), &available[..1]);
        let setup = d.child_setup();
        let mut cmd = Command::new("sh");
        cmd.args(["-c", "yes > /dev/null & exec sleep 30"])
            .stdout(Stdio::null())
            .process_group(0);
        // SAFETY: apply_in_child only makes async-signal-safe calls.
        unsafe {
            cmd.pre_exec(move || setup.apply_in_child());
        }
        let mut child = cmd.spawn().expect("spawn");
        d.adopt(child.id() as i32);
        assert_eq!(
            super::cpus::cpus_allowed(child.id()),
            available[0].to_string()
        );
        std::thread::sleep(Duration::from_millis(600));
        let pids = d.pids();
        assert!(
            pids.len() >= 2,
            "the shell and its spinning child: {pids:?}"
        );
        let s = d.stats();
        // Only that the spinning grandchild is counted: a busy host may leave it little CPU.
        assert!(s.cpu_seconds >= 0.02, "cpu of the tree: {}", s.cpu_seconds);
        assert!(s.page_cache_bytes.is_none());
        if available.len() >= 2 {
            let mut b = budget(1.0);
            b.cpu_list = Some(vec![available[1]]);
            d.update(&b).expect("update");
            assert_eq!(
                super::cpus::cpus_allowed(child.id()),
                available[1].to_string()
            );
        }
        d.destroy().expect("destroy");
        assert_eq!(child.wait().expect("wait").signal(), Some(libc::SIGKILL));
        assert!(
            d.stats().cpu_seconds > 0.1,
            "the last reading survives reaping"
        );
        d.destroy().expect("idempotent");
    }

    #[test]
    fn refuses_limits_it_cannot_enforce() {
        let mut b = budget(1.0);
        b.mem_limit = Some(Bytes(1 << 30));
        let err = AffinityBackend::new()
            .create("synergy-test-aff-mem", &b)
            .err()
            .expect("memory limit refused");
        assert!(matches!(err, IsolateError::Budget(_)));
        assert!(err.to_string().contains("needs cgroups"), "{err}");
        assert_eq!(AffinityBackend::granted_cores(&budget(1.25)), Cores(2.0));
        let n = cpus::own_affinity().expect("affinity").len();
        assert!(AffinityBackend::new()
            .create("synergy-test-aff-big", &budget(n as f64 + 1.0))
            .is_err());
    }
}
