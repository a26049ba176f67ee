//! The manifest a generated dataset carries at its top (`synergy-dataset.json`): what `synergy dataset
//! gen` made, so a second run with the same kind and seed reuses it and a profile can say what it read.

use crate::units::Bytes;
use serde::{Deserialize, Serialize};
use std::path::Path;

/// Name of the manifest file a generated dataset carries at its top.
pub const MANIFEST: &str = "synergy-dataset.json";

/// The kinds of dataset the generator makes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum DatasetKind {
    /// JPEG images, ImageNet-like sizes (mean around 110 KB).
    Image,
    /// Short 16 kHz mono 16-bit WAV clips.
    Audio,
    /// Token shards (little-endian u16 tokens).
    Text,
}

impl std::fmt::Display for DatasetKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            DatasetKind::Image => "image",
            DatasetKind::Audio => "audio",
            DatasetKind::Text => "text",
        })
    }
}

/// What a generated dataset holds; written as [`MANIFEST`] at its top.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DatasetManifest {
    /// Kind of data.
    pub kind: DatasetKind,
    /// Seed it was generated from.
    pub seed: u64,
    /// Number of data files.
    pub files: u64,
    /// Total bytes of data files.
    pub total_bytes: Bytes,
    /// Mean bytes per data file.
    pub mean_file_bytes: f64,
}

/// Reads the manifest of a generated dataset, if it has one.
pub fn read_manifest(dir: &Path) -> Option<DatasetManifest> {
    let text = crate::input::read_text(&dir.join(MANIFEST), crate::input::KEPT_STATE).ok()?;
    serde_json::from_str(&text).ok()
}
