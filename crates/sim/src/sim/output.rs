//! Presenting results: the summary table for people, and the output directory (per-job and per-round
//! tables in CSV and Parquet, summary JSON), written as the run goes into a directory that appears whole.

use super::engine::Recorder;
use super::metrics::{FinishedJob, RoundRecord, SimResult, Summary};
use super::spool::{SortedSpool, TableSpool};
use super::table::{Cell, Kind, Schema};
use super::SimError;
use crate::error::InputError;
use crate::fsutil::{write_atomic, StagedDir};
use crate::sched::cluster::ClusterConfig;
use serde::Serialize;
use std::fmt::Write;
use std::path::{Path, PathBuf};

/// The summary of one run as a few aligned lines.
pub fn render_summary(s: &Summary) -> String {
    let mut o = String::new();
    let j = &s.jct;
    let _ = writeln!(
        o,
        "{} / {}: {} jobs measured",
        s.policy, s.mechanism, j.jobs
    );
    let _ = writeln!(
        o,
        "  JCT          mean {:.2} h, median {:.2} h, p99 {:.1} h, p99.9 {:.1} h",
        j.mean_h, j.median_h, j.p99_h, j.p999_h
    );
    let classes: Vec<String> = s
        .class_mean_jct_h
        .iter()
        .map(|(c, h)| format!("{c} {h:.2} h"))
        .collect();
    let _ = writeln!(o, "  per class    {}", classes.join(", "));
    let _ = writeln!(o, "  makespan     {:.1} h", s.makespan_h);
    let _ = writeln!(
        o,
        "  fairness     JCT / isolated duration: mean {:.2}, worst {:.1}",
        s.ftf_mean, s.ftf_max
    );
    let _ = writeln!(
        o,
        "  offered load {:.3}x the cluster's GPUs at GPU-proportional speed (arrivals up to the window's end)",
        s.offered_load
    );
    let _ = writeln!(
        o,
        "  utilization  GPU {:.1}%, CPU {:.1}%, memory {:.1}% (mean over rounds)",
        100.0 * s.gpu_util,
        100.0 * s.cpu_util,
        100.0 * s.memory_util
    );
    if s.demotions > 0 || s.mechanism == "tune" || s.mechanism == "opt" {
        let _ = writeln!(
            o,
            "  demotions    {} in all; {} measured jobs demoted at least once",
            s.demotions, s.jobs_demoted
        );
    }
    if let (Some(mean), Some(max)) = (s.solve_s_mean, s.solve_s_max) {
        let _ = writeln!(
            o,
            "  solver       {:.2} ms per round (max {:.1} ms)",
            1e3 * mean,
            1e3 * max
        );
    }
    let _ = writeln!(
        o,
        "  simulated    {:.0} h in {} rounds, {} job-rounds in {:.3} s ({:.0} job-rounds/s)",
        s.simulated_h, s.rounds, s.job_rounds, s.wall_s, s.job_rounds_per_s
    );
    o
}

/// One line per configuration of a sweep; load and seed are None for a trace file.
pub fn render_sweep(rows: &[(Option<f64>, Option<u64>, Summary)]) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "{:<6} {:<13} {:>6} {:>5} {:>10} {:>10} {:>10} {:>10} {:>8} {:>7} {:>8}",
        "policy",
        "mechanism",
        "load/h",
        "seed",
        "mean JCT h",
        "median h",
        "p99 h",
        "makespan h",
        "ftf mean",
        "GPU %",
        "wall s"
    );
    for (load, seed, s) in rows {
        let _ = writeln!(
            o,
            "{:<6} {:<13} {:>6} {:>5} {:>10.2} {:>10.2} {:>10.1} {:>10.1} {:>8.2} {:>7.1} {:>8.3}",
            s.policy,
            s.mechanism,
            load.map_or("-".to_string(), |l| l.to_string()),
            seed.map_or("-".to_string(), |x| x.to_string()),
            s.jct.mean_h,
            s.jct.median_h,
            s.jct.p99_h,
            s.makespan_h,
            s.ftf_mean,
            100.0 * s.gpu_util,
            s.wall_s
        );
    }
    o
}

/// The per-job table (`jobs.csv`, `jobs.parquet`), by job id.
pub const JOBS: Schema = Schema {
    name: "jobs",
    columns: &[
        ("id", Kind::Int),
        ("model", Kind::Text),
        ("class", Kind::Text),
        ("gpus", Kind::Int),
        ("arrival_s", Kind::Float(3)),
        ("start_s", Kind::Float(3)),
        ("finish_s", Kind::Float(3)),
        ("jct_s", Kind::Float(3)),
        ("isolated_s", Kind::Float(3)),
        ("ftf", Kind::Float(4)),
        ("demotions", Kind::Int),
        ("in_window", Kind::Bool),
    ],
};

/// A job's row of [`JOBS`].
fn job_row(j: &FinishedJob) -> [Cell<'_>; 12] {
    [
        Cell::Int(j.id as i64),
        Cell::Text(&j.model),
        Cell::Text(&j.class),
        Cell::Int(j.gpus.into()),
        Cell::Float(j.arrival_s),
        Cell::Float(j.start_s),
        Cell::Float(j.finish_s),
        Cell::Float(j.jct_s),
        Cell::Float(j.isolated_s),
        Cell::Float(j.ftf),
        Cell::Int(j.demotions.into()),
        Cell::Bool(j.in_window),
    ]
}

/// The per-round table (`rounds.csv`, `rounds.parquet`: utilization over time), in order.
pub const ROUNDS: Schema = Schema {
    name: "rounds",
    columns: &[
        ("start_s", Kind::Float(0)),
        ("active", Kind::Int),
        ("running", Kind::Int),
        ("gpus_used", Kind::Int),
        ("cpus_used", Kind::Float(3)),
        ("memory_gib_used", Kind::Float(3)),
        ("mean_speed", Kind::Float(4)),
        ("demotions", Kind::Int),
        ("solve_s", Kind::Float(6)),
    ],
};

/// A round's row of [`ROUNDS`].
fn round_row(x: &RoundRecord) -> [Cell<'static>; 9] {
    [
        Cell::Float(x.start_s),
        Cell::Int(x.active.into()),
        Cell::Int(x.running.into()),
        Cell::Int(x.gpus_used as i64),
        Cell::Float(x.cpus_used),
        Cell::Float(x.memory_gib_used),
        Cell::Float(x.mean_speed),
        Cell::Int(x.demotions.into()),
        Cell::Float(x.solve_s),
    ]
}

/// The cluster's size, written in `summary.json` so readers can turn `rounds.csv` into utilization.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct ClusterSize {
    /// GPUs.
    pub gpus: u64,
    /// Cores.
    pub cpus: f64,
    /// Memory, GiB.
    pub memory_gib: f64,
}

impl ClusterSize {
    /// The totals of `cluster`.
    pub fn of(cluster: &ClusterConfig) -> ClusterSize {
        ClusterSize {
            gpus: cluster.total_gpus(),
            cpus: cluster.total_cpus(),
            memory_gib: cluster.total_memory_gib(),
        }
    }
}

/// What `summary.json` says about a run beyond its [`Summary`]: the configuration it ran.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct RunLabels {
    /// Generated load, jobs per hour (None for a trace file).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub load_jobs_per_h: Option<f64>,
    /// Seed of the generated trace's arrivals (None for a trace file).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
    /// Seed of the generated trace's job list (None for a trace file).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub job_list_seed: Option<u64>,
    /// The cluster's size.
    pub cluster: ClusterSize,
}

/// Starts writing a run's (or a sweep's) output directory `dir`: the files are written into the returned
/// [`StagedDir`] and appear in `dir` together when it is committed. Refused when another run is writing
/// `dir`, and when `dir` holds anything but an earlier simulation's output (it is replaced whole).
pub fn begin_out_dir(dir: &Path) -> Result<StagedDir, SimError> {
    if dir.exists() && !holds_only_outputs(dir) {
        return Err(InputError::new(
            dir.display().to_string(),
            "holds files that are not a simulation's output, and the output replaces the whole \
             directory; choose a new or empty directory",
        )
        .into());
    }
    Ok(StagedDir::begin(dir)?)
}

/// Whether `dir` is a directory holding only what [`OutDir`] and the charts write, directly or in
/// one subdirectory per sweep point.
fn holds_only_outputs(dir: &Path) -> bool {
    const FILES: [&str; 5] = [
        "jobs.csv",
        "jobs.parquet",
        "rounds.csv",
        "rounds.parquet",
        "summary.json",
    ];
    let Ok(entries) = std::fs::read_dir(dir) else {
        return false;
    };
    entries.into_iter().all(|e| {
        let Ok(e) = e else { return false };
        let p = e.path();
        let name = e.file_name().to_string_lossy().into_owned();
        if p.is_dir() {
            holds_only_outputs(&p)
        } else {
            FILES.contains(&name.as_str()) || name.ends_with(".svg") || name.ends_with(".png")
        }
    })
}

/// A run's output directory, written as the run goes ([`Recorder`]): `rounds.csv` round by round and
/// the per-job table through a [`SortedSpool`], so memory holds a chunk of rows rather than the run's
/// (docs/architecture.md §5.1, "Cost of a round"); at the run's end `jobs.csv`, `jobs.parquet`,
/// `rounds.parquet` and `summary.json` (the summary and the labels). The directory is meant to be inside
/// a [`StagedDir`], which makes the files appear together.
pub struct OutDir {
    dir: PathBuf,
    labels: RunLabels,
    jobs: Option<SortedSpool>,
    rounds: Option<TableSpool>,
}

impl OutDir {
    /// Starts writing into `dir`, which exists: it is never made here, so a staging directory that a
    /// signal's clean-up removed is not made again by a run still starting.
    pub fn begin(dir: &Path, labels: RunLabels) -> Result<OutDir, SimError> {
        Ok(OutDir {
            dir: dir.to_path_buf(),
            labels,
            jobs: Some(SortedSpool::new(dir, JOBS)),
            rounds: Some(TableSpool::create(dir, ROUNDS).map_err(|e| output_error(dir, e))?),
        })
    }

    fn error(&self, source: std::io::Error) -> SimError {
        output_error(&self.dir, source)
    }
}

fn output_error(dir: &Path, source: std::io::Error) -> SimError {
    SimError::Io {
        context: format!("writing the simulation's output in {}", dir.display()),
        source,
    }
}

impl Recorder for OutDir {
    fn job(&mut self, job: &FinishedJob) -> Result<(), SimError> {
        let jobs = self
            .jobs
            .as_mut()
            .expect("a run records jobs before it ends");
        jobs.push(&job_row(job))
            .map_err(|e| output_error(&self.dir, e))
    }

    fn round(&mut self, round: &RoundRecord) -> Result<(), SimError> {
        let rounds = self
            .rounds
            .as_mut()
            .expect("a run records rounds before it ends");
        rounds
            .push(&round_row(round))
            .map_err(|e| output_error(&self.dir, e))
    }

    fn finish(&mut self, result: &SimResult) -> Result<(), SimError> {
        #[derive(Serialize)]
        struct SummaryFile<'a> {
            #[serde(flatten)]
            summary: &'a Summary,
            #[serde(flatten)]
            labels: &'a RunLabels,
        }
        let (Some(jobs), Some(rounds)) = (self.jobs.take(), self.rounds.take()) else {
            unreachable!("a run ends once");
        };
        let mut table = TableSpool::create(&self.dir, JOBS).map_err(|e| self.error(e))?;
        jobs.finish(&mut table).map_err(|e| self.error(e))?;
        table.finish().map_err(|e| self.error(e))?;
        rounds.finish().map_err(|e| self.error(e))?;
        let summary = SummaryFile {
            summary: &result.summary,
            labels: &self.labels,
        };
        let text = serde_json::to_string_pretty(&summary).expect("summaries serialize") + "\n";
        write_atomic(&self.dir.join("summary.json"), text.as_bytes()).map_err(|e| self.error(e))
    }
}
