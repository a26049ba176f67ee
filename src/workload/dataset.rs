//! Datasets on disk: listing a dataset's files, and generating the deterministic (seeded) datasets of the
//! built-in workloads: JPEG images with ImageNet-like sizes, 16 kHz WAV clips, and token shards.

use crate::units::Bytes;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

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

/// The data files of a dataset, sorted by path, with their sizes.
#[derive(Debug, Clone, Default)]
pub struct DatasetFiles {
    /// `(path, bytes)` for every regular file except the manifest.
    pub files: Vec<(PathBuf, u64)>,
}

impl DatasetFiles {
    /// Sum of all file sizes.
    pub fn total_bytes(&self) -> u64 {
        self.files.iter().map(|(_, b)| b).sum()
    }
    /// Paths only.
    pub fn paths(&self) -> impl Iterator<Item = &Path> {
        self.files.iter().map(|(p, _)| p.as_path())
    }
}

/// Lists every regular file under `dir` (recursively, sorted, manifest excluded).
pub fn scan(dir: &Path) -> std::io::Result<DatasetFiles> {
    let mut files = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d)? {
            let entry = entry?;
            let ft = entry.file_type()?;
            let path = entry.path();
            if ft.is_dir() {
                stack.push(path);
            } else if ft.is_file() && entry.file_name() != MANIFEST {
                files.push((path, entry.metadata()?.len()));
            }
        }
    }
    files.sort();
    Ok(DatasetFiles { files })
}

/// Reads the manifest of a generated dataset, if it has one.
pub fn read_manifest(dir: &Path) -> Option<DatasetManifest> {
    let text = std::fs::read_to_string(dir.join(MANIFEST)).ok()?;
    serde_json::from_str(&text).ok()
}

/// Generates a deterministic dataset of `kind` with about `size` bytes of data files in `dir`, plus its
/// manifest. Writes into a temporary sibling directory and renames it into place, so an interrupted run
/// leaves nothing half-made. `dir` must not exist yet.
pub fn generate(
    kind: DatasetKind,
    dir: &Path,
    size: Bytes,
    seed: u64,
) -> Result<DatasetManifest, super::WorkloadError> {
    let _ = (kind, dir, size, seed);
    Err(super::WorkloadError::Other("dataset generation: not yet written".into()))
}
