//! Presenting results: the summary table for people, and the output directory (per-job and per-round
//! tables in CSV and Parquet, summary JSON), each file written atomically.

use super::metrics::{FinishedJob, RoundRecord, SimResult, Summary};
use super::table::{Table, Values};
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

/// The per-job table, by job id.
pub fn jobs_table(r: &SimResult) -> Table {
    let mut jobs: Vec<_> = r.jobs.iter().collect();
    jobs.sort_by_key(|j| j.id);
    let int = |f: &dyn Fn(&FinishedJob) -> i64| Values::Int(jobs.iter().map(|j| f(j)).collect());
    let float = |f: &dyn Fn(&FinishedJob) -> f64, decimals| {
        Values::Float(jobs.iter().map(|j| f(j)).collect(), decimals)
    };
    let text =
        |f: &dyn Fn(&FinishedJob) -> String| Values::Text(jobs.iter().map(|j| f(j)).collect());
    Table {
        name: "jobs",
        columns: vec![
            ("id", int(&|j| j.id as i64)),
            ("model", text(&|j| j.model.to_string())),
            ("class", text(&|j| j.class.to_string())),
            ("gpus", int(&|j| j.gpus.into())),
            ("arrival_s", float(&|j| j.arrival_s, 3)),
            ("start_s", float(&|j| j.start_s, 3)),
            ("finish_s", float(&|j| j.finish_s, 3)),
            ("jct_s", float(&|j| j.jct_s, 3)),
            ("isolated_s", float(&|j| j.isolated_s, 3)),
            ("ftf", float(&|j| j.ftf, 4)),
            ("demotions", int(&|j| j.demotions.into())),
            (
                "in_window",
                Values::Bool(jobs.iter().map(|j| j.in_window).collect()),
            ),
        ],
    }
}

/// The per-round table (utilization over time).
pub fn rounds_table(r: &SimResult) -> Table {
    let rounds = &r.rounds;
    let int = |f: &dyn Fn(&RoundRecord) -> i64| Values::Int(rounds.iter().map(f).collect());
    let float = |f: &dyn Fn(&RoundRecord) -> f64, decimals| {
        Values::Float(rounds.iter().map(f).collect(), decimals)
    };
    Table {
        name: "rounds",
        columns: vec![
            ("start_s", float(&|x| x.start_s, 0)),
            ("active", int(&|x| x.active.into())),
            ("running", int(&|x| x.running.into())),
            ("gpus_used", int(&|x| x.gpus_used as i64)),
            ("cpus_used", float(&|x| x.cpus_used, 3)),
            ("memory_gib_used", float(&|x| x.memory_gib_used, 3)),
            ("mean_speed", float(&|x| x.mean_speed, 4)),
            ("demotions", int(&|x| x.demotions.into())),
            ("solve_s", float(&|x| x.solve_s, 6)),
        ],
    }
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

/// Whether `dir` is a directory holding only what [`write_dir`] and the charts write, directly or in
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

/// Writes `jobs.csv`, `jobs.parquet`, `rounds.csv`, `rounds.parquet` and `summary.json` (the summary and
/// `labels`) into `dir`; returns the paths.
pub fn write_dir(r: &SimResult, dir: &Path, labels: &RunLabels) -> Result<Vec<PathBuf>, SimError> {
    #[derive(Serialize)]
    struct SummaryFile<'a> {
        #[serde(flatten)]
        summary: &'a Summary,
        #[serde(flatten)]
        labels: &'a RunLabels,
    }
    let summary = SummaryFile {
        summary: &r.summary,
        labels,
    };
    let mut files = Vec::new();
    for table in [jobs_table(r), rounds_table(r)] {
        let parquet = table.to_parquet().map_err(|e| SimError::Io {
            context: format!("encoding {}.parquet", table.name),
            source: std::io::Error::other(e),
        })?;
        files.push((format!("{}.csv", table.name), table.to_csv().into_bytes()));
        files.push((format!("{}.parquet", table.name), parquet));
    }
    files.push((
        "summary.json".to_string(),
        (serde_json::to_string_pretty(&summary).expect("summaries serialize") + "\n").into_bytes(),
    ));
    let mut out = Vec::new();
    for (name, bytes) in files {
        let p = dir.join(name);
        write_atomic(&p, &bytes).map_err(|source| SimError::Io {
            context: "writing the simulation's output".to_string(),
            source,
        })?;
        out.push(p);
    }
    Ok(out)
}
