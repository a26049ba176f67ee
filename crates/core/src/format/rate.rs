//! The one-core rate file (`synergy-rate/1`) a dataset keeps at its top: each host's measured
//! preprocessing rate per pipeline, so a built-in workload's `--gpu-rate 1.3x` needs no measurement at
//! every start. Entries are keyed by host, boot and build; a file of another format stores nothing.

use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// The file in a dataset directory that keeps its one-core rates. Hidden, so `dataset::scan` (which
/// skips hidden entries) never counts it, nor its temporary files, as data.
pub const RATE_FILE: &str = ".synergy-rate.json";

/// The `format` of [`RATE_FILE`].
pub const RATE_FORMAT: &str = "synergy-rate/1";

/// What a stored one-core rate is valid for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RateKey {
    /// The pipeline.
    pub pipeline: Pipeline,
    /// Tokens per sequence (text only: the other pipelines' per-sample work has no parameter).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seq_len: Option<usize>,
    /// The host's name.
    pub hostname: String,
    /// The kernel's boot id: a new boot (another kernel, other frequency settings) measures again.
    pub boot_id: String,
    /// The synergy version and build profile (a debug build preprocesses several times slower).
    pub build: String,
}

impl RateKey {
    /// The key for `pipeline` on a given host and boot (`seq_len` counts for text only).
    pub fn new(pipeline: Pipeline, seq_len: usize, hostname: &str, boot_id: &str) -> Self {
        RateKey {
            pipeline,
            seq_len: (pipeline == Pipeline::Text).then_some(seq_len),
            hostname: hostname.to_string(),
            boot_id: boot_id.to_string(),
            build: build(),
        }
    }

    /// The key for `pipeline` on this host in this boot.
    pub fn here(pipeline: Pipeline, seq_len: usize) -> Self {
        let hostname = nix::unistd::gethostname()
            .map(|h| h.to_string_lossy().into_owned())
            .unwrap_or_default();
        // Without a boot id the key matches nothing stored, so the rate is measured every time.
        let boot_id = std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
            .map(|s| s.trim().to_string())
            .unwrap_or_default();
        RateKey::new(pipeline, seq_len, &hostname, &boot_id)
    }

    /// Whether `other` is a rate of the same work (pipeline, sequence length and build) on any host.
    pub fn same_work(&self, other: &RateKey) -> bool {
        self.pipeline == other.pipeline
            && self.seq_len == other.seq_len
            && self.build == other.build
    }
}

fn build() -> String {
    let profile = if cfg!(debug_assertions) {
        "debug"
    } else {
        "release"
    };
    format!("{} {profile}", env!("CARGO_PKG_VERSION"))
}

/// One measurement of a one-core rate.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct RateMeasurement {
    /// Samples per second of the measuring thread's CPU time.
    pub samples_per_cpu_s: f64,
    /// Samples preprocessed.
    pub samples: u64,
    /// Thread CPU time they took, seconds.
    pub cpu_s: f64,
    /// Wall-clock time they took, seconds (more than `cpu_s` on a busy host or under a CPU quota).
    pub wall_s: f64,
    /// When it was measured, seconds since the Unix epoch.
    pub measured_unix_s: u64,
}

/// One entry of [`RATE_FILE`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RateEntry {
    /// What the rate is valid for.
    #[serde(flatten)]
    pub key: RateKey,
    /// The measurement.
    #[serde(flatten)]
    pub measurement: RateMeasurement,
}

/// The contents of [`RATE_FILE`].
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct RateFile {
    /// [`RATE_FORMAT`].
    pub format: String,
    /// Every host's rates.
    pub rates: Vec<RateEntry>,
}

/// The rate stored for `key` in dataset `dir`, if any; an unreadable or malformed file stores nothing.
pub fn stored_rate(dir: &Path, key: &RateKey) -> Option<RateMeasurement> {
    if key.boot_id.is_empty() {
        return None;
    }
    read_rate_file(&dir.join(RATE_FILE))
        .rates
        .into_iter()
        .find(|e| e.key == *key && e.measurement.samples_per_cpu_s > 0.0)
        .map(|e| e.measurement)
}

/// The rate file at `path`; a missing, unreadable, malformed file or one of another format holds nothing
/// (the rates are measured again and the file replaced).
pub fn read_rate_file(path: &Path) -> RateFile {
    crate::input::read_text(path, crate::input::KEPT_STATE)
        .ok()
        .map(String::into_bytes)
        .and_then(|b| serde_json::from_slice::<RateFile>(&b).ok())
        .filter(|b| b.format == RATE_FORMAT)
        .unwrap_or_default()
}

/// Keeps `m` for `key` in dataset `dir`, replacing the entry of the same key and every entry of the same
/// host from another boot (stale); entries of other hosts sharing the dataset stay.
pub fn store_rate(dir: &Path, key: &RateKey, m: RateMeasurement) -> Result<PathBuf, String> {
    let path = dir.join(RATE_FILE);
    let mut body = read_rate_file(&path);
    body.format = RATE_FORMAT.to_string();
    body.rates.retain(|e| {
        e.key.hostname != key.hostname || (e.key.boot_id == key.boot_id && !e.key.same_work(key))
    });
    body.rates.push(RateEntry {
        key: key.clone(),
        measurement: m,
    });
    let mut json = serde_json::to_vec_pretty(&body).map_err(|e| e.to_string())?;
    json.push(b'\n');
    crate::fsutil::write_atomic(&path, &json).map_err(|e| e.to_string())?;
    Ok(path)
}

/// Which built-in pipeline to run (and a rate is for).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum Pipeline {
    /// JPEG decode, random-resized crop to 224x224, horizontal flip, normalize.
    Image,
    /// WAV decode and a log-mel spectrogram.
    Audio,
    /// Fixed-length token sequences cut from shards.
    Text,
}

impl std::fmt::Display for Pipeline {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Pipeline::Image => "image",
            Pipeline::Audio => "audio",
            Pipeline::Text => "text",
        })
    }
}
