//! The running totals a workload keeps in `SYNERGY_STATE_FILE` (the resume contract, docs/workload-spec.md):
//! `{"samples_done": N, "steps_done": S}`, replaced atomically as it makes progress, so a restarted run
//! continues from them and its `--max-samples` / `--max-steps` count them in.

use crate::error::InputError;
use serde::{Deserialize, Serialize};
use std::path::Path;

/// A workload's running totals.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResumeState {
    /// Samples ingested by every run so far.
    pub samples_done: u64,
    /// Steps ingested by every run so far.
    pub steps_done: u64,
}

impl ResumeState {
    /// Reads the totals at `path`; a missing file is a fresh start.
    pub fn read(path: &Path) -> Result<ResumeState, InputError> {
        let origin = || path.display().to_string();
        match crate::input::read_text_if_present(path, crate::input::KEPT_STATE) {
            Ok(Some(text)) => serde_json::from_str(&text).map_err(|e| {
                InputError::new(
                    origin(),
                    format!("not a workload state file ({{\"samples_done\": N, \"steps_done\": S}}): {e}"),
                )
            }),
            Ok(None) => Ok(ResumeState::default()),
            Err(e) => Err(e.into_input(&origin())),
        }
    }

    /// Replaces the totals at `path` atomically (temporary file and rename).
    pub fn write(&self, path: &Path) -> std::io::Result<()> {
        let json = serde_json::to_vec(self).expect("plain numbers serialize");
        crate::fsutil::write_atomic(path, &json)
    }
}
