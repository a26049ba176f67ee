//! The trial journal: every finished trial of a profile saved at once, one JSON line each (a
//! [`ProfileTrial`] of the profile's schema, with the host and the binary that measured it) beside the
//! profile, so `--resume` continues an interrupted profile without measuring anything twice
//! (docs/architecture.md §7).

use super::profile::ProfileTrial;
use crate::error::InputError;
use serde::{Deserialize, Serialize};
use std::io::Write;
use std::path::{Path, PathBuf};

/// Where the journal of the profile written to `out` lives: beside it.
pub fn journal_path(out: &Path) -> PathBuf {
    out.with_extension("trials.jsonl")
}

/// Whether the journal of the profile written to `out` holds a finished trial, for `--resume` to reuse.
pub fn has_journaled_trials(out: &Path) -> bool {
    read(&journal_path(out)).is_ok_and(|j| !j.entries.is_empty())
}

/// Where a journaled trial was measured and by what.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MadeBy {
    /// The host's name.
    pub host: String,
    /// The synergy that measured it ([`crate::BUILD`]).
    pub binary: String,
}

impl MadeBy {
    /// This host and this synergy.
    pub fn here() -> MadeBy {
        MadeBy {
            host: nix::unistd::gethostname()
                .map(|h| h.to_string_lossy().into_owned())
                .unwrap_or_default(),
            binary: crate::BUILD.to_string(),
        }
    }
}

/// One line of a journal.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Entry {
    /// Who measured it; absent in journals written before synergy said so.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub made_by: Option<MadeBy>,
    /// The trial.
    pub trial: ProfileTrial,
}

/// What a journal holds.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Journal {
    /// The trials, in the order they ran.
    pub entries: Vec<Entry>,
    /// The line cut short at its end (the profiler killed while writing it), which was left out.
    pub cut_line: Option<usize>,
}

impl Journal {
    /// The trials, in the order they ran.
    pub fn trials(&self) -> impl Iterator<Item = &ProfileTrial> {
        self.entries.iter().map(|e| &e.trial)
    }
}

/// The trials a journal holds, in the order they ran; none when there is no journal. A last line cut
/// short is left out and named in [`Journal::cut_line`]; any other line that is not a trial is refused,
/// naming it.
pub fn read(path: &Path) -> Result<Journal, InputError> {
    let origin = path.display().to_string();
    let Some(text) = crate::input::read_text_if_present(path, crate::input::JOURNAL)
        .map_err(|e| e.into_input(&origin))?
    else {
        return Ok(Journal::default());
    };
    let lines = text.lines().count();
    let mut journal = Journal::default();
    for (i, line) in text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
    {
        match parse_line(line) {
            Ok(e) => journal.entries.push(e),
            // Only an append cut short leaves a last line without its end.
            Err(_) if i + 1 == lines && !text.ends_with('\n') => journal.cut_line = Some(i + 1),
            Err(e) => {
                return Err(InputError::new(
                    origin,
                    format!(
                        "line {} is not a trial ({e}); remove the file to start over",
                        i + 1
                    ),
                ))
            }
        }
    }
    Ok(journal)
}

/// A line as this synergy writes it (an [`Entry`]), or a bare trial as journals held them before they
/// named who measured it.
fn parse_line(line: &str) -> Result<Entry, serde_json::Error> {
    let value: serde_json::Value = serde_json::from_str(line)?;
    if value.get("trial").is_some() {
        serde_json::from_value(value)
    } else {
        Ok(Entry {
            made_by: None,
            trial: serde_json::from_value(value)?,
        })
    }
}

/// Appends one finished trial, measured here by this synergy, synced before returning (the directory
/// made where missing). A line cut short at the journal's end is cut away first, so a trial is never
/// written onto it.
pub fn append(path: &Path, t: &ProfileTrial) -> std::io::Result<()> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .read(true)
        .append(true)
        .open(path)?;
    crate::fsutil::drop_cut_line(&mut f)?;
    let entry = Entry {
        made_by: Some(MadeBy::here()),
        trial: t.clone(),
    };
    let line = serde_json::to_string(&entry).expect("trials serialize") + "\n";
    f.write_all(line.as_bytes())?;
    f.sync_data()
}
