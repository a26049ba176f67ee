//! Zero-change probes: measuring a training script nobody changed for Synergy. The PyTorch probe is a
//! `sitecustomize.py` shipped inside this binary; at launch it is written to a temporary directory that is
//! put first on the workload's `PYTHONPATH`, where it counts the samples of every DataLoader batch and
//! writes the progress protocol (docs/architecture.md §3.2), says what it can see of the script ([`ProbeReport`]), and
//! in synthetic trials replays the script's first batches (docs/pytorch.md). The directory is removed
//! when the workload is stopped.

use super::WorkloadError;
pub use crate::format::trial::{LauncherReport, ProbeReport, RankReport, Replay};
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

/// Keeps what a later line said, where it said something.
fn take<T>(a: &mut Option<T>, b: Option<T>) {
    if b.is_some() {
        *a = b;
    }
}

impl RankReport {
    /// Adds what a probe line from this rank said.
    fn merge(&mut self, line: &ProbeReport) {
        take(&mut self.pid, line.pid);
        take(&mut self.batch_size, line.batch_size);
        take(&mut self.workers, line.workers);
        take(&mut self.sampler, line.sampler.clone());
        take(&mut self.device, line.device.clone());
        take(&mut self.omp_num_threads, line.omp_num_threads.clone());
        take(&mut self.threads, line.threads);
    }
}

impl ProbeReport {
    /// Adds what a later line said (its fields win).
    pub fn merge(&mut self, later: ProbeReport) {
        take(&mut self.torch, later.torch);
        take(&mut self.batch_size, later.batch_size);
        take(&mut self.workers, later.workers);
        take(&mut self.dataset_class, later.dataset_class);
        take(&mut self.dataset_items, later.dataset_items);
        take(&mut self.dataset_root, later.dataset_root);
        take(&mut self.device, later.device);
        take(&mut self.parameters, later.parameters);
        take(&mut self.replay, later.replay);
        take(&mut self.sampler, later.sampler);
        take(&mut self.omp_num_threads, later.omp_num_threads);
        take(&mut self.threads, later.threads);
        take(&mut self.world_size, later.world_size);
        take(&mut self.rank, later.rank);
        take(&mut self.pid, later.pid);
        take(&mut self.launcher, later.launcher);
        if !later.ranks.is_empty() {
            self.ranks = later.ranks;
        }
    }

    /// Adds a line from one process of the job: a rank's goes to that rank's report (created when
    /// new) and, for rank 0, to the job's own facts as well, so the job reads as its first rank; a line
    /// without a rank (a single process, or a launcher) goes to the job's facts.
    pub fn add_line(&mut self, line: ProbeReport) {
        let Some(rank) = line.rank else {
            self.merge(ProbeReport { pid: None, ..line });
            return;
        };
        let i = match self.ranks.binary_search_by_key(&rank, |r| r.rank) {
            Ok(i) => i,
            Err(i) => {
                self.ranks.insert(
                    i,
                    RankReport {
                        rank,
                        ..RankReport::default()
                    },
                );
                i
            }
        };
        self.ranks[i].merge(&line);
        self.world_size = self.world_size.max(line.world_size);
        if rank == 0 || self.batch_size.is_none() {
            self.merge(ProbeReport {
                rank: None,
                pid: None,
                ranks: Vec::new(),
                ..line
            });
        }
    }

    /// One line for people: each rank's rate and batches, e.g. `0: 28.2 samples/s (66 batches), 1: ...`.
    pub fn describe_ranks(&self) -> String {
        self.ranks
            .iter()
            .map(|r| {
                let rate = r
                    .samples_per_s
                    .map_or("no rate".to_string(), |s| format!("{s:.1} samples/s"));
                format!("{}: {rate} ({} batches)", r.rank, r.steps)
            })
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// Samples in one step of the whole job: each rank's batch, added (the batch size the probe saw
    /// times the world size where some rank said nothing of its own).
    pub fn job_batch_size(&self) -> Option<u32> {
        let own = self.batch_size?;
        let world = self.world_size.unwrap_or(1).max(1);
        if self.ranks.len() as u32 == world && self.ranks.iter().all(|r| r.batch_size.is_some()) {
            return Some(self.ranks.iter().filter_map(|r| r.batch_size).sum());
        }
        Some(own * world)
    }

    /// One line for people: what the probe saw.
    pub fn describe(&self) -> String {
        let mut parts = Vec::new();
        let each = match self.world_size.filter(|&w| w > 1) {
            Some(w) => {
                parts.push(format!("{w} ranks"));
                " per rank"
            }
            None => "",
        };
        if let Some(b) = self.batch_size {
            parts.push(format!("batch {b}{each}"));
        }
        if let Some(w) = self.workers {
            parts.push(format!("{w} loader workers{each}"));
        }
        if let Some(s) = &self.sampler {
            parts.push(s.clone());
        }
        match (&self.omp_num_threads, self.threads) {
            (Some(o), Some(t)) => parts.push(format!("OMP_NUM_THREADS={o}, {t} torch threads")),
            (None, Some(t)) => parts.push(format!("{t} torch threads")),
            (Some(o), None) => parts.push(format!("OMP_NUM_THREADS={o}")),
            (None, None) => {}
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
