//! The executor's state file: which jobs are done (with their JCTs), what each live job holds and where
//! (cgroup, pid), so that `synergy run --resume` can clean up after a killed executor and continue.
//! Written atomically after every change of note and at least once a second while jobs run.

use super::{Allocation, ExecError, JobHandle};
use crate::error::InputError;
use serde::{Deserialize, Serialize};
use std::path::Path;

/// The schema tag of the state file.
pub const SCHEMA: &str = "synergy-run-state/1";

/// Where a job stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum JobStatus {
    /// Not arrived, or not given GPUs yet.
    Waiting,
    /// Running this round.
    Running,
    /// Started, frozen this round.
    Paused,
    /// Its work is done.
    Done,
    /// It crashed more often than allowed.
    Failed,
}

/// One job's record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobRecord {
    /// Its name in the job list.
    pub name: String,
    /// Where it stands.
    pub status: JobStatus,
    /// Samples done in all (from its progress).
    pub samples_done: u64,
    /// When it finished, seconds after the run started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finish_s: Option<f64>,
    /// Times it crashed and was started again.
    pub retries: u32,
    /// Times it was stopped and started again to change its GPUs.
    pub restarts: u32,
    /// Rounds it held GPUs.
    pub rounds_run: u32,
    /// Seconds it held GPUs (the scheduler's attained service).
    pub attained_s: f64,
    /// What it holds now, while started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allocation: Option<Allocation>,
    /// Where it lives, while started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub handle: Option<JobHandle>,
    /// Why it failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// The whole state of a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunState {
    /// Always [`SCHEMA`].
    pub schema: String,
    /// The job list.
    pub job_list: String,
    /// Backend name.
    pub backend: String,
    /// Policy name.
    pub policy: String,
    /// Mechanism name.
    pub mechanism: String,
    /// Round length, seconds.
    pub round_s: f64,
    /// When the run started (Unix time, seconds); arrivals and JCTs count from here.
    pub started_unix_s: f64,
    /// Process id of the executor that last wrote the file.
    pub executor_pid: u32,
    /// Every job of the list, in list order.
    pub jobs: Vec<JobRecord>,
}

impl RunState {
    /// Reads a state file, checking its schema.
    pub fn read(path: &Path) -> Result<RunState, ExecError> {
        let origin = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| {
            InputError::new(
                &origin,
                format!("cannot read the state file (is there a run to resume?): {e}"),
            )
        })?;
        let st: RunState = serde_json::from_str(&text)
            .map_err(|e| InputError::new(&origin, format!("not a run state file: {e}")))?;
        if st.schema != SCHEMA {
            return Err(InputError::field(
                &origin,
                "schema",
                format!(
                    "`{}` is not supported; this synergy reads `{SCHEMA}`",
                    st.schema
                ),
            )
            .into());
        }
        Ok(st)
    }

    /// Replaces the state file atomically.
    pub fn write(&self, path: &Path) -> Result<(), ExecError> {
        let json = serde_json::to_vec_pretty(self).expect("the run state serializes");
        crate::fsutil::write_atomic(path, &json).map_err(|source| ExecError::Io {
            context: "saving the run state".to_string(),
            source,
        })
    }
}

/// Seconds since the Unix epoch, now.
pub fn unix_now_s() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}
