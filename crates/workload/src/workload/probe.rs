//! Zero-change probes: measuring a training script nobody changed for Synergy. The PyTorch probe is a
//! `sitecustomize.py` shipped inside this binary; at launch it is written to a temporary directory that is
//! put first on the workload's `PYTHONPATH`, where it counts the samples of every DataLoader batch and
//! writes the progress protocol (docs/architecture.md §3.2), says what it can see of the script ([`ProbeReport`]), and
//! in synthetic trials replays the script's first batches (docs/pytorch.md). The directory is removed
//! when the workload is stopped.

use super::WorkloadError;
use serde::{Deserialize, Serialize};
use std::path::Path;

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
    use crate::format::trial::ProbeReport;

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
