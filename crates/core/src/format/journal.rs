//! The trial journal: every finished trial of a profile saved at once, one JSON line each (a
//! [`ProfileTrial`] of the profile's schema) beside the profile, so `--resume` continues an interrupted
//! profile without measuring anything twice (docs/architecture.md §7).

use super::profile::ProfileTrial;
use crate::error::InputError;
use std::io::Write;
use std::path::{Path, PathBuf};

/// Where the journal of the profile written to `out` lives: beside it.
pub fn journal_path(out: &Path) -> PathBuf {
    out.with_extension("trials.jsonl")
}

/// Whether the journal of the profile written to `out` holds a finished trial, for `--resume` to reuse.
pub fn has_journaled_trials(out: &Path) -> bool {
    std::fs::read_to_string(journal_path(out))
        .is_ok_and(|t| t.lines().any(|l| !l.trim().is_empty()))
}

/// The trials a journal holds, in the order they ran; none when there is no journal. A last line cut
/// short (the profiler killed while writing it) is dropped; any other line that is not a trial is
/// refused, naming it.
pub fn read(path: &Path) -> Result<Vec<ProfileTrial>, InputError> {
    let Ok(text) = std::fs::read_to_string(path) else {
        return Ok(Vec::new());
    };
    let lines = text.lines().count();
    let mut trials = Vec::new();
    for (i, line) in text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
    {
        let Ok(t) = serde_json::from_str::<ProfileTrial>(line) else {
            if i + 1 == lines {
                break;
            }
            return Err(InputError::new(
                path.display().to_string(),
                format!(
                    "line {} is not a trial; remove the file to start over",
                    i + 1
                ),
            ));
        };
        trials.push(t);
    }
    Ok(trials)
}

/// Appends one finished trial, synced before returning (the directory made where missing).
pub fn append(path: &Path, t: &ProfileTrial) -> std::io::Result<()> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)?;
    let line = serde_json::to_string(t).expect("trials serialize") + "\n";
    f.write_all(line.as_bytes())?;
    f.sync_data()
}
