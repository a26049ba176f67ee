//! What dead synergy processes leave behind, found and removed by the next command that makes the same
//! kind of thing (docs/architecture.md §7).
//!
//! A process killed with `kill -9` runs no clean-up: its cgroups (`synergy-<pid>-<n>` for a trial,
//! `synergy-run-<pid>-<job>` for an executor's job, `synergy-supervisor-<pid>` for a v2 supervisor's leaf)
//! stay, and so do a probe's temporary directory (`synergy-probe-<pid>-*`) and a workload's own `TMPDIR`
//! (`synergy-tmp-<pid>-*`). Every such name carries its maker's pid, so a later command can tell a dead
//! maker's from a live one's: [`reap`] removes only those whose pid no longer runs, killing any task still
//! inside (a workload frozen when its maker died), and reports each. A live process's cgroups and
//! directories are never touched, even when empty.

use crate::fsutil::process_alive;
use crate::isolate::cgroup::{
    child_cgroup_names, release_root_home, stop_dead_scopes, CgroupBackend,
};
use crate::isolate::Domain as _;
use crate::workload::launch::WORKLOAD_TMP_PREFIX;
use crate::workload::probe::PROBE_DIR_PREFIX;
use std::path::{Path, PathBuf};

/// The prefix of every cgroup synergy makes.
const CGROUP_PREFIX: &str = "synergy-";
/// What may follow [`CGROUP_PREFIX`] before the maker's pid.
const CGROUP_ROLES: [&str; 4] = ["run-", "supervisor-", "test-", ""];

/// One thing a dead synergy process left, and what became of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Leftover {
    /// What it is.
    pub kind: LeftoverKind,
    /// The cgroup's name, or the directory's path.
    pub name: String,
    /// The dead process that made it.
    pub owner_pid: i32,
    /// `None` when it was removed; otherwise why it could not be.
    pub error: Option<String>,
}

/// The kinds of thing [`reap`] looks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LeftoverKind {
    /// A cgroup (in every hierarchy it exists in).
    Cgroup,
    /// A temporary directory.
    TempDir,
}

impl std::fmt::Display for Leftover {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let what = match self.kind {
            LeftoverKind::Cgroup => "cgroup",
            LeftoverKind::TempDir => "temporary directory",
        };
        write!(
            f,
            "{what} {} left by dead pid {}",
            self.name, self.owner_pid
        )
    }
}

/// The pid in a name synergy gave a cgroup or a temporary directory: the digits after `prefix` and one
/// of `roles`, ending the name or followed by `-`.
fn owner_pid(name: &str, prefix: &str, roles: &[&str]) -> Option<i32> {
    let rest = name.strip_prefix(prefix)?;
    roles.iter().find_map(|role| {
        let tail = rest.strip_prefix(role)?;
        let end = tail.find('-').unwrap_or(tail.len());
        let digits = &tail[..end];
        if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        digits.parse::<i32>().ok().filter(|&p| p > 0)
    })
}

/// Whether `pid` is gone, so what it made is nobody's. This process is never dead.
fn dead(pid: i32) -> bool {
    pid != std::process::id() as i32 && !process_alive(pid)
}

/// Removes every cgroup, probe directory and workload `TMPDIR` of a dead synergy process that this
/// process can see (the cgroups directly under its own, the system's temporary directory), and returns
/// what it found. Without cgroups (no root, no controllers) only directories are looked for.
pub fn reap() -> Vec<Leftover> {
    let mut found = reap_cgroups();
    found.extend(reap_temp_dirs(&std::env::temp_dir()));
    found
}

fn reap_cgroups() -> Vec<Leftover> {
    // Under systemd, a dead run's delegated scope goes whole: systemd stops it, killing what it holds.
    let scopes: Vec<Leftover> = stop_dead_scopes(&dead)
        .into_iter()
        .map(|(name, owner_pid, error)| Leftover {
            kind: LeftoverKind::Cgroup,
            name,
            owner_pid,
            error,
        })
        .collect();
    let names: Vec<(String, i32)> = child_cgroup_names(CGROUP_PREFIX)
        .into_iter()
        .filter_map(|n| {
            let pid = owner_pid(&n, CGROUP_PREFIX, &CGROUP_ROLES)?;
            dead(pid).then_some((n, pid))
        })
        .collect();
    if names.is_empty() {
        release_root_home();
        return scopes;
    }
    let Ok(backend) = CgroupBackend::detect() else {
        return scopes;
    };
    let found: Vec<Leftover> = names
        .into_iter()
        .map(|(name, owner_pid)| {
            // Destroying freezes, kills and thaws what is left inside, then removes every hierarchy's
            // directory: the same clean-up the dead process would have run.
            let error = match backend.open_domain(&name) {
                Ok(Some(mut d)) => d.destroy().err().map(|e| e.to_string()),
                Ok(None) => None,
                Err(e) => Some(e.to_string()),
            };
            Leftover {
                kind: LeftoverKind::Cgroup,
                name,
                owner_pid,
                error,
            }
        })
        .collect();
    // On cgroup v2, synergy's own cgroup under the root goes too once no run uses it, with the
    // controllers the dead run switched on at the root.
    release_root_home();
    scopes.into_iter().chain(found).collect()
}

fn reap_temp_dirs(tmp: &Path) -> Vec<Leftover> {
    let Ok(entries) = std::fs::read_dir(tmp) else {
        return Vec::new();
    };
    let mut found = Vec::new();
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(owner_pid) = [PROBE_DIR_PREFIX, WORKLOAD_TMP_PREFIX]
            .iter()
            .find_map(|prefix| owner_pid(&name, prefix, &[""]))
        else {
            continue;
        };
        // A symlink named like ours is not ours to follow.
        if !e.file_type().is_ok_and(|t| t.is_dir()) || !dead(owner_pid) {
            continue;
        }
        let path: PathBuf = e.path();
        let error = std::fs::remove_dir_all(&path).err().map(|e| e.to_string());
        found.push(Leftover {
            kind: LeftoverKind::TempDir,
            name: path.display().to_string(),
            owner_pid,
            error,
        });
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A pid that runs no process: one of a child that has been reaped.
    fn dead_pid() -> i32 {
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id() as i32;
        child.wait().unwrap();
        pid
    }

    #[test]
    fn the_owner_is_read_from_every_name_synergy_makes() {
        let roles = &CGROUP_ROLES;
        assert_eq!(owner_pid("synergy-123-0", "synergy-", roles), Some(123));
        assert_eq!(
            owner_pid("synergy-run-77-job_a", "synergy-", roles),
            Some(77)
        );
        assert_eq!(
            owner_pid("synergy-supervisor-9", "synergy-", roles),
            Some(9)
        );
        assert_eq!(
            owner_pid("synergy-test-5-stale-1", "synergy-", roles),
            Some(5)
        );
        assert_eq!(
            owner_pid("synergy-probe-42-x1Yz", "synergy-probe-", &[""]),
            Some(42)
        );
        for other in [
            "synergy-",
            "synergy-run-",
            "synergy-12a-0",
            "slurm",
            "synergy-0-1",
            "synergy--1",
        ] {
            assert_eq!(owner_pid(other, "synergy-", roles), None, "{other}");
        }
    }

    #[test]
    fn a_dead_processs_temporary_directories_go_and_a_live_ones_stay() {
        let tmp = tempfile::tempdir().unwrap();
        let gone = dead_pid();
        let dead_dir = tmp.path().join(format!("{PROBE_DIR_PREFIX}{gone}-abc"));
        std::fs::create_dir_all(dead_dir.join("sub")).unwrap();
        std::fs::write(dead_dir.join("sub/sitecustomize.py"), "x").unwrap();
        let live_dir = tmp
            .path()
            .join(format!("{PROBE_DIR_PREFIX}{}-def", std::process::id()));
        std::fs::create_dir(&live_dir).unwrap();
        let parent = std::os::unix::process::parent_id();
        let parents_dir = tmp.path().join(format!("{PROBE_DIR_PREFIX}{parent}-ghi"));
        std::fs::create_dir(&parents_dir).unwrap();
        let dead_tmp = tmp.path().join(format!("{WORKLOAD_TMP_PREFIX}{gone}-jkl"));
        std::fs::create_dir_all(dead_tmp.join("pymp-x1")).unwrap();

        let mut found = reap_temp_dirs(tmp.path());
        found.sort_by(|a, b| a.name.cmp(&b.name));
        let left = |dir: &Path| Leftover {
            kind: LeftoverKind::TempDir,
            name: dir.display().to_string(),
            owner_pid: gone,
            error: None,
        };
        let mut expected = vec![left(&dead_dir), left(&dead_tmp)];
        expected.sort_by(|a, b| a.name.cmp(&b.name));
        assert_eq!(found, expected);
        assert!(!dead_dir.exists() && !dead_tmp.exists());
        assert!(live_dir.exists() && parents_dir.exists());
        assert!(found[0]
            .to_string()
            .ends_with(&format!("left by dead pid {gone}")));
    }

    #[test]
    fn a_dead_processs_cgroup_goes_with_its_task_and_a_live_ones_stays() {
        use crate::isolate::Budget;
        use crate::units::Cores;
        let Some(backend) = crate::isolate::cgroup::testing::backend() else {
            return;
        };
        let budget = Budget {
            cpus: Cores(1.0),
            cpu_list: None,
            mem_limit: None,
            read_limit: None,
            count_reads_on: None,
        };
        let gone = dead_pid();
        let dead_name = format!("synergy-{gone}-0");
        let live_name = format!("synergy-{}-reap-test", std::process::id());
        let dead_domain = backend.create_domain(&dead_name, &budget).unwrap();
        let live_domain = backend.create_domain(&live_name, &budget).unwrap();
        // A task left inside, as a workload frozen when its maker died would be.
        let mut sleeper = std::process::Command::new("sleep")
            .arg("60")
            .spawn()
            .unwrap();
        for dir in dead_domain.paths() {
            std::fs::write(dir.join("cgroup.procs"), sleeper.id().to_string()).unwrap();
        }
        // Its maker "dies": the domain is never destroyed.
        std::mem::forget(dead_domain);

        let found = reap_cgroups();
        let mine: Vec<_> = found.iter().filter(|l| l.owner_pid == gone).collect();
        assert_eq!(mine.len(), 1, "{found:?}");
        assert_eq!(mine[0].name, dead_name);
        assert_eq!(mine[0].error, None);
        assert!(child_cgroup_names(&dead_name).is_empty());
        assert!(!child_cgroup_names(&live_name).is_empty());
        assert!(found.iter().all(|l| l.name != live_name));
        assert!(
            sleeper.wait().unwrap().code().is_none(),
            "the task inside was killed"
        );
        drop(live_domain);
    }
}
