//! The profile file, schema `synergy-profile/1.12` (docs/architecture.md §3.4, docs/profile-format.md):
//! its types (the matrix in [`matrix`], the fitted model in [`model`], a refinement in [`refinement`]), a
//! reader that reads every older minor version and checks what it read ([`check`]), an atomic writer,
//! and the long-format CSV export. Predictions from a profile are `predict`'s.

mod check;
mod matrix;
mod model;
mod refinement;

pub use matrix::*;
pub use model::*;
pub use refinement::*;

use super::trial::{CpuCalibration, Limits, ProbeReport, TrialResult};
use crate::fsutil::write_atomic_all;
use serde::{Deserialize, Serialize};
use std::path::Path;

/// The schema name and version this build writes.
pub const SCHEMA: &str = "synergy-profile/1.12";
/// Every schema this build reads: each minor version only adds fields (1.1: the miss cost, the calibrated
/// hit curve, disturbed trials; 1.2: what a probe saw, how G was separated, a memory axis that does not
/// apply; 1.3: trials observed in real runs, where each matrix cell comes from, the refinement; 1.4:
/// each validation point's core speed and the prediction at it; 1.5: the two-list page-cache curve and
/// the memory each core count keeps resident; 1.6: each trial's peak besides its page cache; 1.7: the
/// core speed the CPU stage is at; 1.8: the seconds a trial's discarded runs took; 1.9: the page cache's
/// hits by part of the epoch and the loaders' queue; 1.10: the speed probe's band for a trial's shape;
/// 1.11: a distributed job's ranks, world size and launcher, a loader's sampler and threads, and trials
/// observed on Slurm; 1.12: the limits the isolation backend enforced), so an older file reads as one
/// without them.
pub const READABLE_SCHEMAS: [&str; 13] = [
    "synergy-profile/1",
    "synergy-profile/1.1",
    "synergy-profile/1.2",
    "synergy-profile/1.3",
    "synergy-profile/1.4",
    "synergy-profile/1.5",
    "synergy-profile/1.6",
    "synergy-profile/1.7",
    "synergy-profile/1.8",
    "synergy-profile/1.9",
    "synergy-profile/1.10",
    "synergy-profile/1.11",
    SCHEMA,
];

/// A workload's profile.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Profile {
    /// Always [`SCHEMA`].
    pub schema: String,
    /// Where the numbers come from: `measured by synergy VERSION`, or the publication for published ones.
    pub source: String,
    /// What was profiled.
    pub workload: WorkloadInfo,
    /// The host the trials ran on (absent for published profiles).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<HostInfo>,
    /// When the profile was made (RFC 3339, UTC).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created: Option<String>,
    /// Every trial, in the order run.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub trials: Vec<ProfileTrial>,
    /// The fitted data-stall model (absent for published profiles).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<FittedModel>,
    /// The reference server shape the matrix is normalized to.
    pub server: ServerShape,
    /// The sensitivity matrix.
    pub matrix: Matrix,
    /// The same matrix per GPU (axes divided by the GPU count), as the scheduler consumes it.
    pub per_gpu: PerGpuMatrix,
    /// The best-case demand.
    pub demand: Demand,
    /// Held-out points: predicted against measured.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub validation: Vec<ValidationPoint>,
    /// Error summaries of the validation points, per hit-ratio model.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub validation_summary: Vec<ErrorSummary>,
    /// What the reader should know about how far to trust this profile: trials that stayed disturbed,
    /// the host's speed drifting during the profile.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
    /// How observations of real runs moved the model (absent unless `synergy profile refine` or
    /// `synergy run --refine` made this file; 1.3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refinement: Option<Refinement>,
}

/// Identity of the profiled workload.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkloadInfo {
    /// Name (a model name for published profiles).
    pub name: String,
    /// The spec it came from, when measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spec: Option<String>,
    /// One line for people.
    #[serde(default)]
    pub description: String,
    /// Samples per step.
    pub batch_size: u32,
    /// GPUs it trains on.
    pub gpus: u32,
    /// Which hit-ratio model its cache follows.
    pub hit_model: HitModel,
    /// Time per iteration at GPU-proportional share, seconds (published profiles; derived otherwise).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iter_time_s: Option<f64>,
    /// Model class (image, language, speech), for the scheduler's workload mix.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub class: Option<String>,
    /// Dataset size and shape, when measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dataset: Option<DatasetInfo>,
    /// Why the memory axis does not apply, when it does not (a workload whose data are not files on
    /// disk): the matrix then has one memory column, the footprint.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub no_memory_axis: Option<String>,
    /// What the zero-change probe saw of the script (batch size, workers, dataset, device, parameters).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probe: Option<ProbeReport>,
}

/// The dataset a profile was measured on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DatasetInfo {
    /// Directory.
    pub path: String,
    /// Data files (samples, for file-per-sample datasets).
    pub items: u64,
    /// Total bytes.
    pub bytes: u64,
    /// Mean bytes per item.
    pub mean_item_bytes: f64,
}

/// Facts about the host that measured the profile.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HostInfo {
    /// Host name.
    pub hostname: String,
    /// CPU cores available to synergy.
    pub cores: usize,
    /// Memory, bytes.
    pub memory_bytes: u64,
    /// GPU model from NVML, when present.
    #[serde(default)]
    pub gpu: Option<String>,
    /// Kernel release.
    pub kernel: String,
    /// Isolation backend the trials used.
    pub isolation: String,
    /// The limits that backend enforced (absent before 1.12): where it could not enforce part of a
    /// core, a fractional allocation ran on whole cores.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limits_enforced: Option<Limits>,
    /// Storage read limit imposed during the profile, bytes per second.
    #[serde(default)]
    pub storage_limit_bytes_per_s: Option<f64>,
    /// Storage read bandwidth seen by the cold trial, bytes per second.
    #[serde(default)]
    pub storage_read_bytes_per_s: Option<f64>,
    /// A fixed CPU calibration timed before and after the trials: a profile measured while the host's
    /// speed drifted mixes two machines (absent before 1.1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_speed: Option<SpeedCheck>,
}

/// The backend a profile's trials ran under and the limits it enforced, in words (for `predict` and the
/// charts): `cgroup-v1 (enforced: whole cores, fractional cores, memory, storage)`.
pub fn isolation_said(h: &HostInfo) -> String {
    match &h.limits_enforced {
        Some(l) => format!("{} (enforced: {l})", h.isolation),
        None => format!("{} (limits enforced not recorded)", h.isolation),
    }
}

/// The host's CPU speed before and after a profile.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SpeedCheck {
    /// Before the first trial.
    pub before: CpuCalibration,
    /// After the last.
    pub after: CpuCalibration,
    /// `after / before - 1` of the best wall-clock rates.
    pub drift: f64,
    /// The drift is larger than [`SpeedCheck::DRIFT_LIMIT`].
    pub drifted: bool,
}

impl SpeedCheck {
    /// Relative change beyond which the host counts as having changed speed during a profile (a best of
    /// seven repeats varies by a few percent on a quiet host).
    pub const DRIFT_LIMIT: f64 = 0.10;

    /// Compares two calibrations.
    pub fn new(before: CpuCalibration, after: CpuCalibration) -> Self {
        let drift = if before.ops_per_s > 0.0 {
            after.ops_per_s / before.ops_per_s - 1.0
        } else {
            0.0
        };
        SpeedCheck {
            before,
            after,
            drift,
            drifted: drift.abs() > Self::DRIFT_LIMIT,
        }
    }
}

/// What a trial was for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TrialRole {
    /// A probed script's first run, as it is, to find its dataset and batch size.
    Discovery,
    /// Synthetic input: the accelerator's rate G.
    Synthetic,
    /// Dataset cached, one CPU count: min(G, P(c)).
    Cpu,
    /// Cold cache at the most cores: the storage fetch rate.
    Fetch,
    /// A memory-limited trial that calibrates the page-cache hit curve (not counted as validation).
    Calibration,
    /// A held-out grid point under its real memory constraint.
    Validation,
    /// A grid point measured by `--exhaustive`.
    Exhaustive,
    /// Throughput a real run observed at an allocation the scheduler gave it (`synergy profile refine`,
    /// `synergy run --refine`; 1.3).
    Observed,
}

/// One trial of a profile.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProfileTrial {
    /// What it was for.
    pub role: TrialRole,
    /// Memory of the grid point it stands for, GiB (validation and exhaustive trials).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_gib: Option<f64>,
    /// Times it was run: more than 1 when earlier runs were disturbed by other work on the host.
    #[serde(default = "one", skip_serializing_if = "is_one")]
    pub attempts: u32,
    /// Seconds the runs before the kept one took (1.8; 0 when it ran once): what re-running disturbed
    /// trials cost the profile, which its own `duration_s` does not show.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub earlier_runs_s: f64,
    /// The full trial result.
    pub result: TrialResult,
}

fn one() -> u32 {
    1
}

fn is_one(n: &u32) -> bool {
    *n == 1
}

fn is_zero(s: &f64) -> bool {
    *s == 0.0
}

/// A held-out point: the model's predictions against a measurement under the real constraint.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ValidationPoint {
    /// Cores.
    pub cpus: f64,
    /// Memory, GiB.
    pub memory_gib: f64,
    /// Measured samples per second.
    pub measured: f64,
    /// Its 95% half-width.
    pub measured_ci95: f64,
    /// Predicted with the minio hit model.
    pub predicted_minio: f64,
    /// Predicted with the page-cache hit model.
    pub predicted_page_cache: f64,
    /// Predicted by the published DS-Analyzer model ([`FittedModel::predict_ds_analyzer`]); absent
    /// before 1.1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub predicted_ds_analyzer: Option<f64>,
    /// The speed probe's reading on the trial's core over the profile's reference (the median of the
    /// CPU sweep's trials): how much faster the host ran while this point was measured than while the
    /// model's CPU stage was (1.4; absent where a speed was not read).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub core_speed: Option<f64>,
    /// The workload's own hit model's prediction with its CPU stage at `core_speed`
    /// ([`FittedModel::at_core_speed`] of `measure::hostspeed::pipeline_speedup` of `core_speed`
    /// since 1.10, of `core_speed` raised to `measure::hostspeed::PIPELINE_SPEED_EXPONENT` since
    /// 1.7, of `core_speed` before): the model's error with the host's drift taken out (1.4).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub predicted_at_core_speed: Option<f64>,
    /// `validation` or `exhaustive`.
    pub role: TrialRole,
}

impl ValidationPoint {
    /// Relative error of a hit model's prediction.
    pub fn error(&self, model: HitModel) -> f64 {
        let p = match model {
            HitModel::Minio => self.predicted_minio,
            HitModel::PageCache => self.predicted_page_cache,
        };
        self.error_of(p)
    }

    /// Relative error of a prediction `p` of this point.
    pub fn error_of(&self, p: f64) -> f64 {
        (p - self.measured).abs() / self.measured.max(1e-9)
    }
}

/// Prediction errors of one hit model over validation points.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ErrorSummary {
    /// The model.
    pub hit_model: HitModel,
    /// The published DS-Analyzer model (LRU page cache, misses cost bandwidth only) rather than this
    /// project's, for comparison.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub ds_analyzer: bool,
    /// This project's model with each point's CPU stage at the core speed it was measured at
    /// (`predicted_at_core_speed`; 1.4).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub at_core_speed: bool,
    /// Points.
    pub points: usize,
    /// Median relative error.
    pub median_error: f64,
    /// Mean relative error.
    pub mean_error: f64,
    /// Largest relative error.
    pub max_error: f64,
}

/// Errors reading or writing profile files.
#[derive(Debug, thiserror::Error)]
pub enum ProfileError {
    /// The file is not a valid profile; names the file and field.
    #[error(transparent)]
    Invalid(#[from] crate::error::InputError),
    /// Reading or writing failed.
    #[error("{context}: {source}")]
    Io {
        /// What, naming the path.
        context: String,
        /// The failure.
        #[source]
        source: std::io::Error,
    },
}

impl ProfileError {
    /// A file that could not be read: the user's to fix ([`ProfileError::Invalid`]) or, the system's,
    /// failed while `context`.
    pub fn reading(e: crate::input::ReadError, context: &str) -> Self {
        match e {
            crate::input::ReadError::Input(i) => ProfileError::Invalid(i),
            crate::input::ReadError::Io(source) => ProfileError::Io {
                context: context.to_string(),
                source,
            },
        }
    }
}

impl Profile {
    /// Reads and validates a profile file.
    pub fn read(path: &Path) -> Result<Profile, ProfileError> {
        let origin = path.display().to_string();
        let text = crate::input::read_text(path, crate::input::PROFILE)
            .map_err(|e| ProfileError::reading(e, "reading a profile"))?;
        Self::parse(&text, &origin)
    }

    /// Parses and validates profile JSON; `origin` names it in errors.
    pub fn parse(text: &str, origin: &str) -> Result<Profile, ProfileError> {
        use crate::error::InputError;
        let value: serde_json::Value = serde_json::from_str(text).map_err(|e| {
            InputError::new(
                origin,
                format!("not JSON (line {}, column {}): {e}", e.line(), e.column()),
            )
        })?;
        match value.get("schema").and_then(|s| s.as_str()) {
            Some(s) if READABLE_SCHEMAS.contains(&s) => {}
            Some(other) => {
                return Err(InputError::field(
                    origin,
                    "schema",
                    format!(
                        "`{other}` is not supported; this synergy reads {}",
                        READABLE_SCHEMAS.map(|s| format!("`{s}`")).join(" and ")
                    ),
                )
                .into())
            }
            None => {
                return Err(InputError::field(
                    origin,
                    "schema",
                    format!("missing; expected `{SCHEMA}`"),
                )
                .into())
            }
        }
        let profile: Profile = serde_path_to_error::deserialize(value).map_err(|e| {
            let path = e.path().to_string();
            let message = e.into_inner().to_string();
            // At the top level the path is `.` (or, for an unknown key that is empty, nothing): serde's
            // message names the field itself (``missing field `server` ``), so the error names no field
            // of its own.
            if path == "." || path.is_empty() {
                InputError::new(origin, message)
            } else {
                InputError::field(origin, path, message)
            }
        })?;
        profile.validate(origin)?;
        Ok(profile)
    }

    /// Writes the profile as pretty JSON, atomically (temporary file and rename), and its CSV beside it.
    pub fn write(&self, path: &Path) -> Result<(), ProfileError> {
        let json = self.to_json();
        let csv = self.to_csv();
        // The JSON last: it is what synergy reads, so a CSV is never older than the JSON beside it.
        write_atomic_all(&[
            (&path.with_extension("csv"), csv.as_bytes()),
            (path, json.as_bytes()),
        ])
        .map_err(|source| ProfileError::Io {
            context: "saving the profile".to_string(),
            source,
        })
    }

    /// The profile file's text: pretty JSON, with a final line end.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("profiles serialize") + "\n"
    }

    /// The long-format CSV: one row per matrix cell, then one per validation point. The workload's name
    /// is any text a spec gave, so it goes through the csv crate's writer, which quotes it when it holds a
    /// comma or a quote (and leaves every other cell as it is).
    pub fn to_csv(&self) -> String {
        let mut w = csv::Writer::from_writer(Vec::new());
        let mut row =
            |cells: [String; 7]| w.write_record(&cells).expect("CSV into memory cannot fail");
        row([
            "workload",
            "kind",
            "cpus",
            "memory_gib",
            "samples_per_s",
            "normalized",
            "limited_by",
        ]
        .map(String::from));
        let name = &self.workload.name;
        let m = &self.matrix;
        for (i, c) in m.cpus.iter().enumerate() {
            for (j, g) in m.memory_gib.iter().enumerate() {
                let abs = m
                    .samples_per_s
                    .as_ref()
                    .map(|s| format!("{:.3}", s[i][j]))
                    .unwrap_or_default();
                let lim = m
                    .limited_by
                    .as_ref()
                    .map(|s| s[i][j].to_string())
                    .unwrap_or_default();
                row([
                    name.clone(),
                    "predicted".into(),
                    c.to_string(),
                    format!("{g:.4}"),
                    abs,
                    format!("{:.5}", m.normalized[i][j]),
                    lim,
                ]);
            }
        }
        let t_prop = m.proportional.samples_per_s.unwrap_or(0.0);
        for v in &self.validation {
            let norm = if t_prop > 0.0 {
                v.measured / t_prop
            } else {
                0.0
            };
            row([
                name.clone(),
                "measured".into(),
                v.cpus.to_string(),
                format!("{:.4}", v.memory_gib),
                format!("{:.3}", v.measured),
                format!("{norm:.5}"),
                String::new(),
            ]);
        }
        let bytes = w.into_inner().expect("CSV into memory cannot fail");
        String::from_utf8(bytes).expect("CSV of strings is UTF-8")
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    #[test]
    fn server_shapes_parse() {
        let s: ServerShape = "8gpu,24cpu,500gb".parse().unwrap();
        assert_eq!((s.gpus, s.cpus, s.memory_gib), (8, 24.0, 500.0));
        assert_eq!(s.cpus_per_gpu(), 3.0);
        assert_eq!(s.memory_gib_per_gpu(), 62.5);
        assert!("8gpu,24cpu".parse::<ServerShape>().is_err());
        assert!("8gpu,24cpu,500parsecs".parse::<ServerShape>().is_err());
    }

    /// A small valid profile, without a model, for tests that corrupt or round-trip it.
    pub(crate) fn tiny() -> Profile {
        let a = RatedAllocation {
            cpus: 1.0,
            memory_gib: 1.0,
            samples_per_s: None,
            normalized: 1.0,
        };
        Profile {
            schema: SCHEMA.into(),
            source: "test".into(),
            workload: WorkloadInfo {
                name: "m".into(),
                spec: None,
                description: String::new(),
                batch_size: 1,
                gpus: 1,
                hit_model: HitModel::Minio,
                iter_time_s: Some(0.5),
                class: Some("image".into()),
                dataset: None,
                no_memory_axis: None,
                probe: None,
            },
            host: None,
            created: None,
            trials: Vec::new(),
            model: None,
            server: ServerShape {
                gpus: 8,
                cpus: 24.0,
                memory_gib: 500.0,
            },
            matrix: Matrix {
                cpus: vec![1.0, 2.0],
                memory_gib: vec![1.0, 2.0],
                samples_per_s: None,
                normalized: vec![vec![0.5, 0.6], vec![0.9, 1.0]],
                limited_by: None,
                proportional: a,
                source: None,
            },
            per_gpu: PerGpuMatrix {
                cpus: vec![1.0, 2.0],
                memory_gib: vec![1.0, 2.0],
                normalized: vec![vec![0.5, 0.6], vec![0.9, 1.0]],
            },
            demand: Demand {
                job: a,
                per_gpu: a,
                tolerance: 0.05,
            },
            validation: Vec::new(),
            validation_summary: Vec::new(),
            warnings: Vec::new(),
            refinement: None,
        }
    }

    #[test]
    fn profiles_round_trip_through_the_file() {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("m.json");
        let p = tiny();
        p.write(&path).unwrap();
        assert_eq!(Profile::read(&path).unwrap(), p);
        let csv = std::fs::read_to_string(path.with_extension("csv")).unwrap();
        assert_eq!(csv.lines().count(), 1 + 4);
    }

    #[test]
    fn the_csv_is_what_the_shipped_profiles_carry_and_quotes_a_comma() {
        // The shipped profiles' CSVs were written before the csv crate's writer: the same bytes.
        let mut n = 0;
        let shipped = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../../profiles"));
        for dir in [
            shipped.to_path_buf(),
            shipped.join("h200"),
            shipped.join("zoo"),
        ] {
            for e in std::fs::read_dir(dir).unwrap() {
                let path = e.unwrap().path();
                if path.extension().is_some_and(|x| x == "json") {
                    let shipped = std::fs::read_to_string(path.with_extension("csv")).unwrap();
                    assert_eq!(
                        Profile::read(&path).unwrap().to_csv(),
                        shipped,
                        "{}",
                        path.display()
                    );
                    n += 1;
                }
            }
        }
        assert!(n > 5, "{n} profiles");
        let mut p = tiny();
        p.workload.name = "resnet,18".into();
        assert!(p
            .to_csv()
            .lines()
            .nth(1)
            .unwrap()
            .starts_with("\"resnet,18\",predicted,1,"));
    }

    #[test]
    fn an_unknown_field_is_named_with_its_path() {
        let mut v = serde_json::to_value(tiny()).unwrap();
        v["matrix"]["colour"] = serde_json::json!("blue");
        let err = Profile::parse(&v.to_string(), "p.json")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("p.json") && err.contains("matrix") && err.contains("colour"),
            "{err}"
        );
    }
}
