//! The executor's state file: which jobs are done (with their JCTs), what each live job holds and where
//! (cgroup, pid), so that `synergy run --resume` can clean up after a killed executor and continue.
//! Written atomically after every change of note and at least once a second while jobs run.

use crate::error::InputError;
use crate::units::{Bytes, Cores};
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
    /// Reads a state file, checking its schema and every value ([`RunState::check`]): `--resume` and a
    /// fresh run that finds one read it the same way.
    pub fn read(path: &Path) -> Result<RunState, InputError> {
        let origin = path.display().to_string();
        let text = crate::input::read_text_if_present(path, crate::input::RUN_STATE)
            .map_err(|e| e.into_input(&origin))?
            .ok_or_else(|| InputError::new(&origin, "no such file (is there a run to resume?)"))?;
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
            ));
        }
        st.check(&origin)?;
        Ok(st)
    }

    /// Refuses a state no executor writes: a time or an amount of work out of range, a job named twice
    /// or not at all (docs/architecture.md §7, "Ranges").
    pub fn check(&self, origin: &str) -> Result<(), InputError> {
        use crate::range::{is_seconds, MAX_WORK, SECONDS};
        let bad = |field: String, what: String| Err(InputError::field(origin, field, what));
        if !(is_seconds(self.round_s) && self.round_s > 0.0) {
            return bad(
                "round_s".into(),
                format!("must be more than 0 and {SECONDS}"),
            );
        }
        if !(self.started_unix_s.is_finite() && self.started_unix_s >= 0.0) {
            return bad(
                "started_unix_s".into(),
                "must be a Unix time, seconds".into(),
            );
        }
        let mut names = std::collections::HashSet::new();
        for (i, j) in self.jobs.iter().enumerate() {
            let at = |f: &str| format!("jobs[{i}].{f}");
            if j.name.is_empty() || !names.insert(j.name.as_str()) {
                return bad(at("name"), "must name one job of the list, once".into());
            }
            if j.samples_done > MAX_WORK {
                return bad(at("samples_done"), "must be at most 2^50".into());
            }
            for (field, value) in [("attained_s", Some(j.attained_s)), ("finish_s", j.finish_s)] {
                if value.is_some_and(|v| !is_seconds(v)) {
                    return bad(at(field), format!("must be {SECONDS}"));
                }
            }
        }
        Ok(())
    }

    /// Replaces the state file atomically.
    pub fn write(&self, path: &Path) -> std::io::Result<()> {
        let json = serde_json::to_vec_pretty(self).expect("the run state serializes");
        crate::fsutil::write_atomic(path, &json)
    }
}

/// An allocation as state files hold it: `{"parts": [...]}`, or one part's fields at the top level, as
/// files written before jobs could spread over servers have it.
#[derive(Deserialize)]
#[serde(
    untagged,
    expecting = "an allocation: `{\"parts\": [...]}`, or one server's `server`, `gpus`, `cpus`, `cores` and `memory`"
)]
enum AllocationRepr {
    Parts { parts: Vec<AllocPart> },
    OneServer(AllocPart),
}

impl Allocation {
    /// An allocation on one server.
    pub fn on_one(part: AllocPart) -> Allocation {
        Allocation { parts: vec![part] }
    }

    /// Whether the job runs on more than one server.
    pub fn is_spread(&self) -> bool {
        self.parts.len() > 1
    }

    /// GPUs over all its servers.
    pub fn gpu_count(&self) -> u32 {
        self.parts.iter().map(|p| p.gpus.len() as u32).sum()
    }

    /// Cores over all its servers.
    pub fn cpus(&self) -> Cores {
        Cores(self.parts.iter().map(|p| p.cpus.0).sum())
    }

    /// Memory over all its servers.
    pub fn memory(&self) -> Bytes {
        Bytes(self.parts.iter().map(|p| p.memory.0).sum())
    }

    /// Its part on server `server`, if it has one there.
    pub fn part_on(&self, server: usize) -> Option<&AllocPart> {
        self.parts.iter().find(|p| p.server == server)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_state_file_from_before_spread_jobs_reads_as_one_part_and_the_new_form_round_trips() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("jobs.state.json");
        // As `synergy run` wrote it when an allocation was one server's fields.
        let old = r#"{"schema": "synergy-run-state/1", "job_list": "jobs.toml", "backend": "slurm",
            "policy": "fifo", "mechanism": "tune", "round_s": 3.0, "started_unix_s": 1796182811.5,
            "executor_pid": 4242, "jobs": [{"name": "a", "status": "running", "samples_done": 960,
            "retries": 0, "restarts": 1, "rounds_run": 2, "attained_s": 6.0,
            "allocation": {"server": 0, "gpus": [1], "cpus": 2.0, "cores": [0, 1], "memory": 281018368},
            "handle": {"pid": null, "domain": "synergy-run-4242-a", "backend_id": "17"}},
            {"name": "b", "status": "waiting", "samples_done": 0, "retries": 0, "restarts": 0,
            "rounds_run": 0, "attained_s": 0.0}]}"#;
        std::fs::write(&path, old).unwrap();
        let st = RunState::read(&path).unwrap();
        let part = AllocPart {
            server: 0,
            gpus: vec![1],
            cpus: Cores(2.0),
            cores: vec![0, 1],
            memory: Bytes(281018368),
        };
        assert_eq!(
            st.jobs[0].allocation,
            Some(Allocation::on_one(part.clone()))
        );
        assert_eq!(st.jobs[1].allocation, None);
        // Written again, it has parts; a spread allocation keeps them all.
        let mut st = st;
        st.jobs[1].allocation = Some(Allocation {
            parts: vec![
                part.clone(),
                AllocPart {
                    server: 1,
                    gpus: vec![0],
                    ..part
                },
            ],
        });
        st.write(&path).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.contains("\"parts\""), "{text}");
        assert_eq!(RunState::read(&path).unwrap(), st);
    }
}

/// What one job holds this round: one part per server it runs on, in server order. Most jobs have one
/// part; a job the mechanism spreads over several servers (docs/run.md, "Jobs over several servers") has
/// one on each, and a backend that can run it starts one task per server.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(from = "AllocationRepr")]
pub struct Allocation {
    /// Its share of each server, in server order; never empty.
    pub parts: Vec<AllocPart>,
}

/// What one job holds on one server.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AllocPart {
    /// Index of the server in [`Backend::servers`].
    pub server: usize,
    /// GPU ids.
    pub gpus: Vec<u32>,
    /// CPU cores (fractional ones are held with a CFS quota on the local backend).
    pub cpus: Cores,
    /// Specific core ids (the cpuset); a backend that only counts cores uses `ceil(cpus)`.
    pub cores: Vec<usize>,
    /// Memory limit.
    pub memory: Bytes,
}

impl From<AllocationRepr> for Allocation {
    fn from(r: AllocationRepr) -> Allocation {
        match r {
            AllocationRepr::Parts { parts } => Allocation { parts },
            AllocationRepr::OneServer(p) => Allocation::on_one(p),
        }
    }
}

/// What the state file records of a live job so that a later executor can clean it up.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobHandle {
    /// Process id of the workload (its process-group leader).
    pub pid: Option<i32>,
    /// The isolation domain's name (a cgroup name on the local backend).
    pub domain: Option<String>,
    /// The backend's own job id (a Slurm job id).
    pub backend_id: Option<String>,
}
