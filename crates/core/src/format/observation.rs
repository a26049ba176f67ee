//! The observation log (docs/run.md, "Observations"), schema [`SCHEMA`]: JSON lines beside a run's state
//! file, one per running job per round, with the throughput it made at the allocation it held and
//! whether other work took its CPU. `synergy run` appends to it; `synergy profile refine` and
//! `synergy run --refine` read it.

use super::trial::{Disturbance, Estimate, IsolationKind};
use crate::error::InputError;
use serde::{Deserialize, Serialize};
use std::io::Write;
use std::path::{Path, PathBuf};

/// The schema tag every line of an observation log carries.
pub const SCHEMA: &str = "synergy-observation/1";

/// The file name suffix of an observation log: `JOBS.state.json` has `JOBS.state.observations.jsonl`.
pub const LOG_SUFFIX: &str = ".observations.jsonl";

/// One line of the observation log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Observation {
    /// Always [`SCHEMA`].
    pub schema: String,
    /// The job's name in the job list.
    pub job: String,
    /// Its workload spec's name.
    pub workload: String,
    /// Its profile file, as the job list resolved it.
    pub profile: String,
    /// The profile's `workload.name`: what `profile refine` matches observations to a profile by.
    pub profile_workload: String,
    /// The round (of this executor) that ended the window.
    pub round: u64,
    /// Start of the window, seconds since the run started.
    pub start_s: f64,
    /// End of the window, seconds since the run started.
    pub end_s: f64,
    /// GPUs the job held.
    pub gpus: u32,
    /// Cores it held.
    pub cpus: f64,
    /// The specific cores.
    pub cores: Vec<usize>,
    /// Its memory limit, GiB.
    pub memory_gib: f64,
    /// Throughput over the window.
    pub throughput: Estimate,
    /// Whether other work took the CPU it was granted (such an observation is not this allocation's
    /// and refinement leaves it out).
    pub disturbed: bool,
    /// The readings behind that verdict, where they could be taken.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disturbance: Option<Disturbance>,
    /// The isolation backend.
    pub isolation: IsolationKind,
    /// What the planner's model of the job predicted at this allocation when the round was planned,
    /// samples per second.
    pub predicted_samples_per_s: f64,
}

impl Observation {
    /// Checks what serde cannot: the schema, and numbers that are numbers of their kind.
    fn check(&self, origin: &str) -> Result<(), InputError> {
        if self.schema != SCHEMA {
            return Err(InputError::field(
                origin,
                "schema",
                format!(
                    "`{}` is not an observation log's; this synergy reads `{SCHEMA}`",
                    self.schema
                ),
            ));
        }
        let positive = [
            ("cpus", self.cpus),
            ("memory_gib", self.memory_gib),
            ("throughput.measured_s", self.throughput.measured_s),
        ];
        for (field, v) in positive {
            if !(v.is_finite() && v > 0.0) {
                return Err(InputError::field(
                    origin,
                    field,
                    "must be a positive number",
                ));
            }
        }
        let non_negative = [
            ("throughput.samples_per_s", self.throughput.samples_per_s),
            (
                "throughput.ci95_half_width",
                self.throughput.ci95_half_width,
            ),
            ("predicted_samples_per_s", self.predicted_samples_per_s),
            ("start_s", self.start_s),
        ];
        for (field, v) in non_negative {
            if !(v.is_finite() && v >= 0.0) {
                return Err(InputError::field(
                    origin,
                    field,
                    "must be a non-negative number",
                ));
            }
        }
        let rates = [
            ("throughput.samples_per_s", self.throughput.samples_per_s),
            ("predicted_samples_per_s", self.predicted_samples_per_s),
        ];
        for (field, v) in rates {
            if v > crate::range::MAX_SAMPLES_PER_S {
                return Err(InputError::field(
                    origin,
                    field,
                    format!(
                        "{v} samples/s is more than any job makes (at most {:e})",
                        crate::range::MAX_SAMPLES_PER_S
                    ),
                ));
            }
        }
        if !(self.end_s.is_finite() && self.end_s >= self.start_s) {
            return Err(InputError::field(
                origin,
                "end_s",
                "must be a number no less than start_s",
            ));
        }
        if self.gpus == 0 {
            return Err(InputError::field(origin, "gpus", "must be at least 1"));
        }
        Ok(())
    }
}

/// The observation log of the run whose state file is `state_file`.
pub fn log_path(state_file: &Path) -> PathBuf {
    let stem = state_file
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let stem = stem.strip_suffix(".json").unwrap_or(&stem);
    state_file.with_file_name(format!("{stem}{LOG_SUFFIX}"))
}

/// Opening or appending to an observation log failed.
#[derive(Debug, thiserror::Error)]
#[error("{context}: {source}")]
pub struct LogError {
    /// What was being done.
    pub context: String,
    /// Why it failed.
    #[source]
    pub source: std::io::Error,
}

/// Appends observations to a run's log, one JSON line each. A line is written whole with one `write`
/// on a file opened for appending, so a reader never sees half of one unless the writer died within it;
/// such a last line is left out by [`read_log`], and cut away when the log is opened again.
pub struct LogWriter {
    path: PathBuf,
    file: std::fs::File,
}

impl LogWriter {
    /// Opens the log for appending; `fresh` empties it first (a new run).
    pub fn open(path: &Path, fresh: bool) -> Result<LogWriter, LogError> {
        let io = |source| LogError {
            context: format!("opening the observation log {}", path.display()),
            source,
        };
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(!fresh)
            .write(true)
            .truncate(fresh)
            .read(true)
            .open(path)
            .map_err(io)?;
        let mut file = file;
        crate::fsutil::drop_cut_line(&mut file).map_err(io)?;
        Ok(LogWriter {
            path: path.to_path_buf(),
            file,
        })
    }

    /// Where it writes.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends one observation.
    pub fn append(&mut self, o: &Observation) -> Result<(), LogError> {
        let mut line = serde_json::to_string(o).expect("observations serialize");
        line.push('\n');
        self.file
            .write_all(line.as_bytes())
            .map_err(|source| LogError {
                context: format!("appending to {}", self.path.display()),
                source,
            })
    }
}

/// What an observation log holds.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Log {
    /// Its observations, each once, in the order they were written.
    pub observations: Vec<Observation>,
    /// The lines left out, each said in words: a last line cut short (the executor killed while writing
    /// it) and lines repeating an observation already read (the same job, round and window).
    pub skipped: Vec<String>,
}

/// Reads an observation log; a line that is not an observation of this schema is refused, naming the
/// file, the line and the field. Empty lines are skipped; so are a last line cut short and repeated
/// observations, each named in [`Log::skipped`].
pub fn read_log(path: &Path) -> Result<Log, InputError> {
    let origin = path.display().to_string();
    let text = crate::input::read_text(path, crate::input::OBSERVATION_LOG)
        .map_err(|e| e.into_input(&origin))?;
    let mut log = Log::default();
    let mut seen = std::collections::HashMap::new();
    let lines = text.lines().count();
    for (n, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let at = format!("{origin} line {}", n + 1);
        let value: serde_json::Value = match serde_json::from_str(line) {
            Ok(v) => v,
            // Only an append cut short leaves a last line without its end.
            Err(_) if n + 1 == lines && !text.ends_with('\n') => {
                log.skipped.push(format!("{at} was cut short (left out)"));
                break;
            }
            Err(e) => return Err(InputError::new(&at, format!("not JSON: {e}"))),
        };
        match value.get("schema").and_then(|s| s.as_str()) {
            Some(SCHEMA) => {}
            Some(other) => {
                return Err(InputError::field(
                    &at,
                    "schema",
                    format!("`{other}` is not an observation log's; this synergy reads `{SCHEMA}`"),
                ))
            }
            None => {
                return Err(InputError::field(
                    &at,
                    "schema",
                    format!("missing; every line of an observation log says `{SCHEMA}`"),
                ))
            }
        }
        let o: Observation = serde_path_to_error::deserialize(value).map_err(|e| {
            let field = e.path().to_string();
            let message = e.into_inner().to_string();
            if field == "." || field.is_empty() {
                InputError::new(&at, message)
            } else {
                InputError::field(&at, field, message)
            }
        })?;
        o.check(&at)?;
        let identity = (
            o.job.clone(),
            o.round,
            o.start_s.to_bits(),
            o.end_s.to_bits(),
        );
        if let Some(first) = seen.get(&identity) {
            log.skipped.push(format!(
                "{at} repeats line {first} (job `{}`, round {}): counted once",
                o.job, o.round
            ));
            continue;
        }
        seen.insert(identity, n + 1);
        log.observations.push(o);
    }
    Ok(log)
}

/// The observation logs a `--from` argument names: a log file itself, or every `*.observations.jsonl`
/// in a run's directory (in name order). A directory without one is refused.
pub fn logs_in(from: &Path) -> Result<Vec<PathBuf>, InputError> {
    let origin = from.display().to_string();
    // Anything there but a directory is a log to read, which refuses what is not one by name.
    if from.symlink_metadata().is_ok() && !from.is_dir() {
        return Ok(vec![from.to_path_buf()]);
    }
    if !from.is_dir() {
        return Err(InputError::new(
            origin,
            "does not exist; name a run's directory or its observation log",
        ));
    }
    let mut logs: Vec<PathBuf> = std::fs::read_dir(from)
        .map_err(|e| InputError::new(&origin, format!("cannot read the directory: {e}")))?
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.is_file()
                && p.file_name()
                    .is_some_and(|n| n.to_string_lossy().ends_with(LOG_SUFFIX))
        })
        .collect();
    logs.sort();
    if logs.is_empty() {
        return Err(InputError::new(
            origin,
            format!("holds no observation log (*{LOG_SUFFIX}); `synergy run` writes one beside its state file"),
        ));
    }
    Ok(logs)
}

/// What tests of this and other crates build observations from. Compiled always, like the isolation
/// crate's `testing` (README, "Development").
#[doc(hidden)]
pub mod testing {
    use super::*;

    /// An observation of `job` at `cpus` cores and `memory_gib`, observed at `samples_per_s`.
    pub fn observation(
        profile_workload: &str,
        cpus: f64,
        memory_gib: f64,
        samples_per_s: f64,
    ) -> Observation {
        Observation {
            schema: SCHEMA.into(),
            job: "j".into(),
            workload: "image".into(),
            profile: "p.json".into(),
            profile_workload: profile_workload.into(),
            round: 1,
            start_s: 0.0,
            end_s: 10.0,
            gpus: 1,
            cpus,
            cores: vec![0],
            memory_gib,
            throughput: Estimate {
                samples_per_s,
                ci95_half_width: 0.02 * samples_per_s,
                measured_steps: 40,
                measured_s: 9.0,
                warmup_s: 1.0,
                window_start_s: 1.0,
                whole_epochs: 0,
            },
            disturbed: false,
            disturbance: None,
            isolation: IsolationKind::CgroupV1,
            predicted_samples_per_s: 400.0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::testing::observation;
    use super::*;

    #[test]
    fn the_log_sits_beside_the_state_file_and_round_trips() {
        assert_eq!(
            log_path(Path::new("/r/jobs.state.json")),
            Path::new("/r/jobs.state.observations.jsonl")
        );
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("x.observations.jsonl");
        let mut w = LogWriter::open(&p, true).unwrap();
        let o = observation("image", 1.0, 2.0, 300.0);
        let next = Observation {
            round: o.round + 1,
            ..o.clone()
        };
        w.append(&o).unwrap();
        w.append(&next).unwrap();
        assert_eq!(
            read_log(&p).unwrap().observations,
            vec![o.clone(), next.clone()]
        );
        // A fresh log starts empty; a continued one keeps what it had, and a repeated line counts once.
        LogWriter::open(&p, false).unwrap().append(&o).unwrap();
        let log = read_log(&p).unwrap();
        assert_eq!(log.observations.len(), 2);
        assert!(
            log.skipped[0].contains("line 3 repeats line 1"),
            "{:?}",
            log.skipped
        );
        LogWriter::open(&p, true).unwrap();
        assert!(read_log(&p).unwrap().observations.is_empty());
        assert_eq!(logs_in(d.path()).unwrap(), vec![p]);
    }

    #[test]
    fn a_last_line_cut_short_is_left_out_and_said() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("x.observations.jsonl");
        let good = serde_json::to_string(&observation("image", 1.0, 2.0, 300.0)).unwrap();
        std::fs::write(&p, format!("{good}\n{}", &good[..good.len() / 2])).unwrap();
        let log = read_log(&p).unwrap();
        assert_eq!(log.observations.len(), 1);
        assert!(
            log.skipped[0].contains("line 2 was cut short"),
            "{:?}",
            log.skipped
        );
        // The same text with its line end is a corrupt line, refused.
        std::fs::write(&p, format!("{good}\n{}\n", &good[..good.len() / 2])).unwrap();
        assert!(read_log(&p).is_err());
    }

    #[test]
    fn a_corrupt_or_foreign_line_is_refused_with_file_line_and_field() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("x.observations.jsonl");
        let good = serde_json::to_string(&observation("image", 1.0, 2.0, 300.0)).unwrap();
        let cases = [
            (
                format!("{good}\n{{\"schema\": \"synergy-trial/1\"}}\n"),
                "line 2",
                "schema",
            ),
            (format!("{good}\n{{not json\n"), "line 2", "not JSON"),
            (
                good.replace("\"cpus\":1.0", "\"cpus\":-1.0"),
                "line 1",
                "cpus",
            ),
            (
                good.replace("\"gpus\":1,", "\"gpus\":\"one\","),
                "line 1",
                "gpus",
            ),
            (good.replace("\"job\":\"j\",", ""), "line 1", "job"),
            ("{\"job\": \"x\"}\n".to_string(), "line 1", "schema"),
            (
                good.replace(
                    "\"predicted_samples_per_s\":400.0",
                    "\"predicted_samples_per_s\":1e300",
                ),
                "line 1",
                "predicted_samples_per_s",
            ),
        ];
        for (text, line, field) in cases {
            std::fs::write(&p, &text).unwrap();
            let e = read_log(&p).unwrap_err().to_string();
            assert!(
                e.contains("x.observations.jsonl") && e.contains(line) && e.contains(field),
                "{e}"
            );
        }
    }
}
