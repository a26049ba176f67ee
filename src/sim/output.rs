//! Presenting results: the summary table for people, and the output directory (per-job and per-round CSV,
//! summary JSON), each file written atomically.

use super::cluster::ClusterConfig;
use super::metrics::{SimResult, Summary};
use super::SimError;
use crate::profile::file::write_atomic;
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

/// Per-job CSV.
pub fn jobs_csv(r: &SimResult) -> String {
    let mut o = String::from(
        "id,model,class,gpus,arrival_s,start_s,finish_s,jct_s,isolated_s,ftf,demotions,in_window\n",
    );
    let mut jobs: Vec<_> = r.jobs.iter().collect();
    jobs.sort_by_key(|j| j.id);
    for j in jobs {
        let _ = writeln!(
            o,
            "{},{},{},{},{:.3},{:.3},{:.3},{:.3},{:.3},{:.4},{},{}",
            j.id,
            j.model,
            j.class,
            j.gpus,
            j.arrival_s,
            j.start_s,
            j.finish_s,
            j.jct_s,
            j.isolated_s,
            j.ftf,
            j.demotions,
            j.in_window
        );
    }
    o
}

/// Per-round CSV (utilization over time).
pub fn rounds_csv(r: &SimResult) -> String {
    let mut o = String::from(
        "start_s,active,running,gpus_used,cpus_used,memory_gib_used,mean_speed,demotions,solve_s\n",
    );
    for x in &r.rounds {
        let _ = writeln!(
            o,
            "{},{},{},{},{:.3},{:.3},{:.4},{},{:.6}",
            x.start_s,
            x.active,
            x.running,
            x.gpus_used,
            x.cpus_used,
            x.memory_gib_used,
            x.mean_speed,
            x.demotions,
            x.solve_s
        );
    }
    o
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
    /// Seed of the generated trace (None for a trace file).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
    /// The cluster's size.
    pub cluster: ClusterSize,
}

/// Writes `jobs.csv`, `rounds.csv` and `summary.json` (the summary and `labels`) into `dir`; returns the
/// paths.
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
    let files = [
        ("jobs.csv", jobs_csv(r)),
        ("rounds.csv", rounds_csv(r)),
        (
            "summary.json",
            serde_json::to_string_pretty(&summary).expect("summaries serialize") + "\n",
        ),
    ];
    let mut out = Vec::new();
    for (name, text) in files {
        let p = dir.join(name);
        write_atomic(&p, text.as_bytes()).map_err(|e| match e {
            crate::profile::ProfileError::Io { context, source } => {
                SimError::Io { context, source }
            }
            other => SimError::Profile(other),
        })?;
        out.push(p);
    }
    Ok(out)
}
