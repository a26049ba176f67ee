//! Zero-change probes: measuring a training script nobody changed for Synergy. The PyTorch probe is a
//! `sitecustomize.py` shipped inside this binary; at launch it is written to a temporary directory that is
//! put first on the workload's `PYTHONPATH`, where it counts the samples of every DataLoader batch and
//! writes the progress protocol (docs/architecture.md §3.2), says what it can see of the script ([`ProbeReport`]), and
//! in synthetic trials replays the script's first batches (docs/pytorch.md). The directory is removed
//! when the workload is stopped.

use super::WorkloadError;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// The PyTorch probe's source.
pub const PYTORCH_SITECUSTOMIZE: &str = include_str!("probe/sitecustomize.py");

/// Environment flag the probe reads: `1` sets every DataLoader's `num_workers` to ceil(`SYNERGY_CPUS`).
pub const SET_WORKERS_ENV: &str = "SYNERGY_PROBE_SET_WORKERS";

/// Which probe to inject into a workload.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum ProbeKind {
    /// Counts `torch.utils.data.DataLoader` batches through a `sitecustomize` on `PYTHONPATH`.
    Pytorch,
}

/// What a probe saw of the script it ran in: each `{"probe": {...}}` line it writes adds to this. Fields
/// it could not see stay absent.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ProbeReport {
    /// The probe's hook ran: the script imported PyTorch's data loading.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub torch: Option<bool>,
    /// Samples per batch of the first DataLoader the script iterated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batch_size: Option<u32>,
    /// Its loader worker processes (0: batches load in the training process).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workers: Option<u32>,
    /// The class of its dataset (under any `Subset`/`ConcatDataset` wrapper), e.g. `ImageFolder`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dataset_class: Option<String>,
    /// Samples in its dataset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dataset_items: Option<u64>,
    /// The directory its dataset's files are in, when the dataset names one on disk.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dataset_root: Option<PathBuf>,
    /// Where the model's parameters are (`cpu`, `cuda:0`), from the largest optimizer the script made.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device: Option<String>,
    /// Parameters that optimizer trains.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parameters: Option<u64>,
    /// In a synthetic trial: the batches kept and replayed instead of loading.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replay: Option<Replay>,
}

/// The batches a synthetic trial replayed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Replay {
    /// Batches kept from the loader's first iterator.
    pub batches: u64,
    /// Their tensors' bytes.
    #[serde(default)]
    pub bytes: u64,
    /// Where they were kept (`cpu`, or the model's device).
    pub device: String,
}

impl ProbeReport {
    /// Adds what a later line said (its fields win).
    pub fn merge(&mut self, later: ProbeReport) {
        fn take<T>(a: &mut Option<T>, b: Option<T>) {
            if b.is_some() {
                *a = b;
            }
        }
        take(&mut self.torch, later.torch);
        take(&mut self.batch_size, later.batch_size);
        take(&mut self.workers, later.workers);
        take(&mut self.dataset_class, later.dataset_class);
        take(&mut self.dataset_items, later.dataset_items);
        take(&mut self.dataset_root, later.dataset_root);
        take(&mut self.device, later.device);
        take(&mut self.parameters, later.parameters);
        take(&mut self.replay, later.replay);
    }

    /// One line for people: what the probe saw.
    pub fn describe(&self) -> String {
        let mut parts = Vec::new();
        if let Some(b) = self.batch_size {
            parts.push(format!("batch {b}"));
        }
        if let Some(w) = self.workers {
            parts.push(format!("{w} loader workers"));
        }
        if let Some(c) = &self.dataset_class {
            let items = self
                .dataset_items
                .map_or(String::new(), |n| format!(" of {n} samples"));
            let at = match &self.dataset_root {
                Some(r) => format!(" in {}", r.display()),
                None => " (no directory on disk)".into(),
            };
            parts.push(format!("{c}{items}{at}"));
        }
        if let Some(d) = &self.device {
            parts.push(format!("model on {d}"));
        }
        if let Some(p) = self.parameters {
            parts.push(format!("{:.2}M parameters", p as f64 / 1e6));
        }
        if let Some(r) = &self.replay {
            parts.push(format!(
                "synthetic: replayed {} kept batches from {}",
                r.batches, r.device
            ));
        }
        if parts.is_empty() {
            match self.torch {
                Some(true) => "PyTorch imported, no DataLoader batch seen".into(),
                _ => "nothing seen".into(),
            }
        } else {
            parts.join(", ")
        }
    }
}

/// The name of a probe's temporary directory, before its maker's pid: a later command removes the
/// directory of a killed maker by it (`crate::leftovers`).
pub const PROBE_DIR_PREFIX: &str = "synergy-probe-";

/// A probe written out for one launch; its directory goes when this is dropped.
#[derive(Debug)]
pub struct ProbeDir {
    dir: tempfile::TempDir,
}

impl ProbeDir {
    /// Writes the probe's files to a new temporary directory.
    pub fn write(kind: ProbeKind) -> Result<Self, WorkloadError> {
        let dir = tempfile::Builder::new()
            .prefix(&format!("{PROBE_DIR_PREFIX}{}-", std::process::id()))
            .tempdir()
            .map_err(|e| WorkloadError::io("creating the probe's temporary directory", e))?;
        let (name, text) = match kind {
            ProbeKind::Pytorch => ("sitecustomize.py", PYTORCH_SITECUSTOMIZE),
        };
        let path = dir.path().join(name);
        std::fs::write(&path, text)
            .map_err(|e| WorkloadError::io(format!("writing {}", path.display()), e))?;
        Ok(ProbeDir { dir })
    }

    /// The directory holding the probe.
    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// `PYTHONPATH` with the probe first, ahead of `existing` (the workload's own, if any).
    pub fn python_path(&self, existing: Option<&str>) -> String {
        match existing.filter(|p| !p.is_empty()) {
            Some(rest) => format!("{}:{rest}", self.path().display()),
            None => self.path().display().to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_probe_is_written_and_removed() {
        let probe = ProbeDir::write(ProbeKind::Pytorch).unwrap();
        let dir = probe.path().to_path_buf();
        let text = std::fs::read_to_string(dir.join("sitecustomize.py")).unwrap();
        assert!(text.contains("SYNERGY_PROGRESS_FD"));
        assert_eq!(
            probe.python_path(Some("/a:/b")),
            format!("{}:/a:/b", dir.display())
        );
        assert_eq!(probe.python_path(Some("")), dir.display().to_string());
        drop(probe);
        assert!(!dir.exists());
    }

    #[test]
    fn later_reports_add_to_earlier_ones() {
        let mut r: ProbeReport = serde_json::from_str(r#"{"torch": true}"#).unwrap();
        r.merge(
            serde_json::from_str(
                r#"{"batch_size": 8, "workers": 2, "dataset_class": "ImageFolder", "dataset_items": 28,
                    "dataset_root": "/d", "device": "cpu", "parameters": 11181642, "extra": 1}"#,
            )
            .unwrap(),
        );
        r.merge(
            serde_json::from_str(r#"{"replay": {"batches": 8, "bytes": 100, "device": "cpu"}}"#)
                .unwrap(),
        );
        assert_eq!(r.torch, Some(true));
        assert_eq!(r.batch_size, Some(8));
        assert_eq!(r.dataset_root.as_deref(), Some(Path::new("/d")));
        assert_eq!(r.replay.as_ref().map(|x| x.batches), Some(8));
        assert_eq!(
            r.describe(),
            "batch 8, 2 loader workers, ImageFolder of 28 samples in /d, model on cpu, 11.18M parameters, synthetic: replayed 8 kept batches from cpu"
        );
        assert_eq!(
            ProbeReport {
                torch: Some(true),
                ..ProbeReport::default()
            }
            .describe(),
            "PyTorch imported, no DataLoader batch seen"
        );
    }
}
