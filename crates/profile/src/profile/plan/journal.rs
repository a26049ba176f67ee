//! Which journaled trial a resumed plan's request is: trials are matched by what they measured
//! (docs/architecture.md §7). The file itself is [`crate::format::journal`].

use super::ProfileRunError;
use crate::error::InputError;
use crate::format::journal;
use crate::format::profile::{ProfileError, ProfileTrial, TrialRole};
use crate::format::trial::TrialResult;
use crate::measure::TrialRequest;
use std::collections::HashMap;
use std::path::PathBuf;

/// Finished trials, saved one JSON line each so an interrupted profile can resume.
pub(super) struct Journal {
    path: PathBuf,
    /// The journaled trials by [`key`], in the order they ran (a trial measured again has two), for a
    /// resumed plan to find.
    done: HashMap<String, Vec<ProfileTrial>>,
    /// The trials of this run, in the order the plan asked for them (journaled ones included).
    pub(super) order: Vec<ProfileTrial>,
}

impl Journal {
    /// Opens the journal at `path` of a profile of `workload`: with `resume`, the trials it holds, and a
    /// warning when its last line was cut short (left out, and cut away before the next append) or when
    /// another synergy measured some of them; else empty, any old one removed. A journal holding another
    /// workload's trials, or trials measured on another host, is refused by name: its trials would be
    /// taken for this one's.
    pub(super) fn open(
        path: PathBuf,
        resume: bool,
        workload: &str,
    ) -> Result<(Self, Option<String>), ProfileRunError> {
        if !resume {
            let _ = std::fs::remove_file(&path);
            return Ok((Self::replay(path, Vec::new()), None));
        }
        let read = journal::read(&path)?;
        let here = journal::MadeBy::here();
        let belongs_elsewhere = |i: usize, why: String| -> ProfileRunError {
            InputError::new(
                path.display().to_string(),
                format!(
                    "trial {} {why}: this journal belongs to another profile; write this one elsewhere \
                     (--out) or remove the journal to start over",
                    i + 1
                ),
            )
            .into()
        };
        let mut other_binaries: Vec<&str> = Vec::new();
        for (i, e) in read.entries.iter().enumerate() {
            let t = &e.trial.result;
            if t.workload != workload {
                return Err(belongs_elsewhere(
                    i,
                    format!(
                        "is of workload `{}` (spec {}), not `{workload}`",
                        t.workload, t.spec
                    ),
                ));
            }
            let Some(by) = &e.made_by else { continue };
            if by.host != here.host {
                // Another machine's rates are not this one's.
                return Err(belongs_elsewhere(
                    i,
                    format!(
                        "was measured on host `{}`, not this one (`{}`)",
                        by.host, here.host
                    ),
                ));
            }
            if by.binary != here.binary && !other_binaries.contains(&by.binary.as_str()) {
                other_binaries.push(&by.binary);
            }
        }
        let mut warnings: Vec<String> = Vec::new();
        if let Some(line) = read.cut_line {
            warnings.push(format!(
                "the trial journal {}'s line {line} was cut short (the profiler stopped while writing it): \
                 that trial is measured again",
                path.display()
            ));
        }
        if !other_binaries.is_empty() {
            // Kept, not refused: an upgrade mid-profile should not throw away what was measured.
            warnings.push(format!(
                "the trial journal {} holds trials measured by synergy {}, and this is synergy {}: they \
                 are kept; remove the journal to measure them all with this one",
                path.display(),
                other_binaries.join(", "),
                here.binary
            ));
        }
        let warning = (!warnings.is_empty()).then(|| warnings.join("\n"));
        let trials = read.entries.into_iter().map(|e| e.trial);
        Ok((Self::replay(path, trials), warning))
    }

    /// A journal that holds `trials`. [`Journal::open`] fills it from the file; a replay passes the
    /// profile's trials and never appends (it measures nothing), so `path` is then only named in messages.
    pub(super) fn replay(path: PathBuf, trials: impl IntoIterator<Item = ProfileTrial>) -> Self {
        let mut done: HashMap<String, Vec<ProfileTrial>> = HashMap::new();
        for t in trials {
            done.entry(key(t.role, t.memory_gib, &t.result))
                .or_default()
                .push(t);
        }
        Journal {
            path,
            done,
            order: Vec::new(),
        }
    }

    /// The journaled trial for the plan's next request with key `k` ([`key_of`]): the first for its first
    /// request, the second for a request of the same trial again (a trial measured again), and so on.
    pub(super) fn journaled(&self, k: &str) -> Option<&ProfileTrial> {
        let earlier = self
            .order
            .iter()
            .filter(|t| key(t.role, t.memory_gib, &t.result) == k)
            .count();
        self.done.get(k)?.get(earlier)
    }

    /// Whether any run of a trial with key `k` is journaled.
    pub(super) fn journaled_any(&self, k: &str) -> bool {
        self.done.contains_key(k)
    }

    /// Saves a finished trial, synced before the plan goes on.
    pub(super) fn append(&mut self, t: &ProfileTrial) -> Result<(), ProfileRunError> {
        journal::append(&self.path, t).map_err(|source| ProfileError::Io {
            context: format!("writing the trial journal {}", self.path.display()),
            source,
        })?;
        Ok(())
    }
}

/// Identifies a trial by what it measured, so a resumed plan finds it again.
fn key(role: TrialRole, memory_gib: Option<f64>, r: &TrialResult) -> String {
    let a = &r.allocation;
    format!(
        "{role:?}|{}|{:?}|{:?}|{:?}|{:?}|{:?}|{}",
        a.cpus,
        memory_gib,
        a.mem_limit_bytes,
        a.cache_bytes,
        a.cache_state,
        a.storage_limit_bytes_per_s,
        a.synthetic
    )
}

/// The [`key`] a trial about to run will have once it has run.
pub(super) fn key_of(role: TrialRole, memory_gib: Option<f64>, req: &TrialRequest) -> String {
    format!(
        "{role:?}|{}|{:?}|{:?}|{:?}|{:?}|{:?}|{}",
        req.cpus,
        memory_gib,
        req.mem_limit.map(|b| b.0),
        req.cache_bytes.map(|b| b.0),
        req.cache_state,
        req.storage_limit.map(|b| b.0),
        req.synthetic
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_trial_measured_again_is_found_again_in_its_turn() {
        let shipped: serde_json::Value =
            serde_json::from_str(include_str!("../../../../../profiles/image.json")).unwrap();
        let first: ProfileTrial = serde_json::from_value(shipped["trials"][0].clone()).unwrap();
        let mut again = first.clone();
        again.result.throughput.samples_per_s += 1.0;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("p.trials.jsonl");
        let lines: Vec<String> = [&first, &again]
            .iter()
            .map(|t| serde_json::to_string(t).unwrap())
            .collect();
        std::fs::write(&path, lines.join("\n") + "\n").unwrap();
        let (mut j, warning) = Journal::open(path.clone(), true, &first.result.workload).unwrap();
        assert_eq!(warning, None);
        let k = key(first.role, first.memory_gib, &first.result);
        assert_eq!(j.journaled(&k), Some(&first));
        j.order.push(first.clone());
        assert_eq!(
            j.journaled(&k),
            Some(&again),
            "the second request gets the second run"
        );
        j.order.push(again);
        assert_eq!(j.journaled(&k), None, "a third is measured");
        match Journal::open(path, true, "text") {
            Err(ProfileRunError::Input(e)) => {
                assert!(e.message.contains("not `text`"), "{e}")
            }
            other => panic!("another workload's journal was taken: {:?}", other.err()),
        }
    }

    #[test]
    fn another_hosts_trials_are_refused_and_another_binarys_kept_with_a_warning() {
        let shipped: serde_json::Value =
            serde_json::from_str(include_str!("../../../../../profiles/image.json")).unwrap();
        let trial: ProfileTrial = serde_json::from_value(shipped["trials"][0].clone()).unwrap();
        let workload = trial.result.workload.clone();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("p.trials.jsonl");
        let here = journal::MadeBy::here();
        let write = |made_by: Option<journal::MadeBy>| {
            let e = journal::Entry {
                made_by,
                trial: trial.clone(),
            };
            std::fs::write(&path, serde_json::to_string(&e).unwrap() + "\n").unwrap();
        };

        write(Some(journal::MadeBy {
            host: format!("{}-elsewhere", here.host),
            ..here.clone()
        }));
        match Journal::open(path.clone(), true, &workload) {
            Err(ProfileRunError::Input(e)) => {
                assert!(e.message.contains("-elsewhere`, not this one"), "{e}")
            }
            other => panic!("another host's journal was taken: {:?}", other.err()),
        }

        write(Some(journal::MadeBy {
            binary: "0.0.1 (commit 000000000000)".into(),
            ..here.clone()
        }));
        let (j, warning) = Journal::open(path.clone(), true, &workload).unwrap();
        assert!(
            warning.as_deref().is_some_and(|w| w.contains("0.0.1")),
            "{warning:?}"
        );
        assert!(j.journaled_any(&key(trial.role, trial.memory_gib, &trial.result)));

        write(Some(here));
        assert_eq!(
            Journal::open(path.clone(), true, &workload).unwrap().1,
            None
        );
        write(None);
        assert_eq!(
            Journal::open(path, true, &workload).unwrap().1,
            None,
            "a journal from before trials named their host is read as it was"
        );
    }
}
