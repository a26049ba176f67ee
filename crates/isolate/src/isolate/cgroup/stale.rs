//! Removing what a crashed run left behind: empty `<prefix>*` cgroups directly under ours, so no cgroup
//! outlives its run (docs/architecture.md §7).

use super::domain::remove_cgroup_dir;
use super::paths::{own_v2_path, v1_parent_dir, v1_relative_paths, ROOT_HOME};
use super::V2_ROOT;
use cgroups_rs::fs::hierarchies::{self, V1};
use cgroups_rs::fs::Hierarchy;
use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};

/// Removes leftover cgroups named `<prefix>*` directly under this process's cgroups (every v1 hierarchy,
/// or the v2 one) whose tasks are all gone, such as those of a crashed run. Cgroups that still hold tasks
/// are left alone: they may belong to a live run. Returns how many distinct cgroup names were removed
/// (in at least one hierarchy). An empty prefix removes nothing.
///
/// A live run's domain is also empty between its creation and its child's start, so pass a prefix that
/// only dead runs use: with names `synergy-<pid>-<n>`, `synergy-<pid>-` for a pid that no longer runs
/// (crash recovery), or this run's own `synergy-<pid>-` before it creates any domain. Typical use: at
/// start-up, for each `synergy-<pid>-*` cgroup whose pid is gone.
pub fn cleanup_stale(prefix: &str) -> usize {
    if prefix.is_empty() {
        return 0;
    }
    let own_leaf = format!("synergy-supervisor-{}", std::process::id());
    let mut removed = BTreeSet::new();
    for (name, path) in child_cgroups() {
        if !name.starts_with(prefix) || name == own_leaf {
            continue;
        }
        let busy = fs::read_to_string(path.join("cgroup.procs"))
            .map(|t| !t.trim().is_empty())
            .unwrap_or(true);
        if busy {
            continue;
        }
        // An empty cgroup may also be a live run's domain whose child has not started yet; telling
        // the two apart is the caller's job (see the prefix advice in the doc comment).
        if remove_cgroup_dir(&path).is_ok() {
            removed.insert(name);
        }
    }
    removed.len()
}

/// The names of the cgroups directly under this process's cgroups (in any hierarchy) that start with
/// `prefix`, each once: those a synergy run, live or dead, may have made.
pub fn child_cgroup_names(prefix: &str) -> BTreeSet<String> {
    child_cgroups()
        .into_iter()
        .map(|(name, _)| name)
        .filter(|n| n.starts_with(prefix))
        .collect()
}

/// Every cgroup directory directly under this process's cgroups (every v1 hierarchy, or the v2 one),
/// with its name.
fn child_cgroups() -> Vec<(String, PathBuf)> {
    let mut found = Vec::new();
    for parent in parent_dirs() {
        let Ok(entries) = fs::read_dir(&parent) else {
            continue;
        };
        for e in entries.flatten() {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                found.push((e.file_name().to_string_lossy().into_owned(), e.path()));
            }
        }
    }
    found
}

/// The directories our domains are made in (and those of other runs, live or dead).
fn parent_dirs() -> Vec<PathBuf> {
    let mut parents: Vec<PathBuf> = Vec::new();
    if hierarchies::is_cgroup2_unified_mode() {
        if let Ok(rel) = own_v2_path() {
            let dir = Path::new(V2_ROOT).join(&rel);
            // After the v2 supervisor move, domains are siblings of our leaf.
            if dir
                .file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("synergy-supervisor-"))
            {
                if let Some(p) = dir.parent() {
                    parents.push(p.to_path_buf());
                }
            }
            parents.push(dir);
        }
        // Synergy's own cgroup under the root, where runs started in a shared cgroup make domains.
        let home = Path::new(V2_ROOT).join(ROOT_HOME);
        if home.is_dir() && !parents.contains(&home) {
            parents.push(home);
        }
    } else {
        let v1 = V1::new();
        if let Ok(relative) = v1_relative_paths(&v1) {
            for s in v1.subsystems() {
                let dir = v1_parent_dir(s.to_controller(), &relative, &s.controller_name());
                if !parents.contains(&dir) {
                    parents.push(dir);
                }
            }
        }
    }
    parents
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::isolate::cgroup::testing::backend;
    use crate::isolate::cgroup::tests::{budget, unique};

    #[test]
    fn stale_cgroups_are_cleaned_up() {
        let Some(b) = backend() else { return };
        let name = unique("stale");
        let d = b.create_domain(&name, &budget(1.0)).expect("create");
        let paths = d.paths().to_vec();
        // Simulate a crash: the domain is never destroyed.
        std::mem::forget(d);
        assert_eq!(cleanup_stale(&name), 1);
        assert!(paths.iter().all(|p| !p.exists()));
        assert_eq!(cleanup_stale(""), 0);
    }
}
