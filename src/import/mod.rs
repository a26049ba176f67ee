//! Importing a cluster's own history (docs/traces.md): the public GPU-cluster traces (Philly, Helios, PAI,
//! Acme), Slurm's accounting (`sacct`), and Gavel's and Tiresias's trace files become the simulator's trace
//! CSV (`id,model,arrival_s,iters,gpus`, plus the source's id, run time and requests).
//!
//! Each format's reader ([`formats`], [`philly`]) turns rows into [`RawJob`]s and hands them to a [`Sink`],
//! which applies the filters as rows stream by (state, time window, GPUs), so memory grows with what is
//! kept, not with the file. [`finish`] then places the kept jobs in time (arrivals from the first kept
//! submission, scaled by the load factor), gives each a model ([`assign`]) and its work in iterations
//! (run time at GPU-proportional share over the model's time per iteration), and counts everything it
//! did in an [`ImportSummary`].

pub mod assign;
mod formats;
pub mod machines;
mod philly;
pub mod time;

use crate::error::InputError;
use crate::error::Setting;
use crate::format::trace::ImportedJob;
use crate::format::trace::TraceJob;
use crate::sched::catalog::Catalog;
use assign::{Assigner, ModelRule};
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::PathBuf;

/// The trace formats read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Format {
    /// Microsoft Philly `cluster_job_log` (JSON).
    Philly,
    /// SenseTime Helios `cluster_log.csv`.
    Helios,
    /// Alibaba PAI 2020 `pai_job_table.csv` and `pai_task_table.csv` (both files).
    Pai,
    /// Shanghai AI Lab Acme (`job_id,user,node_num,gpu_num,...`, times with zones).
    Acme,
    /// Slurm `sacct --parsable2` output.
    Sacct,
    /// Gavel's trace file (tab-separated, no header).
    Gavel,
    /// Tiresias's trace CSV (`job_id,num_gpu,submit_time,iterations,model_name,duration,interval`).
    Tiresias,
}

/// How a job ended, in the words every format maps to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum JobOutcome {
    /// Finished on its own (Philly `Pass`, PAI `Terminated`, Slurm `COMPLETED`).
    Completed,
    /// Ended in an error (including node failures and out-of-memory).
    Failed,
    /// Killed or cancelled by a user or an administrator (including preemption).
    Cancelled,
    /// Stopped at its time limit.
    Timeout,
    /// Still running (or waiting) when the trace was taken.
    Running,
    /// Anything else.
    Other,
}

impl JobOutcome {
    /// The state a trace's word means (case-insensitive; Slurm's `CANCELLED by 0` is cancelled).
    pub fn from_word(word: &str) -> JobOutcome {
        let w = word.trim().to_ascii_lowercase();
        let first = w.split_whitespace().next().unwrap_or("");
        match first {
            "pass" | "completed" | "complete" | "terminated" | "succeeded" | "success" | "done"
            | "finished" => JobOutcome::Completed,
            "failed" | "fail" | "node_fail" | "out_of_memory" | "oom" | "boot_fail"
            | "deadline" => JobOutcome::Failed,
            "killed" | "cancelled" | "canceled" | "preempted" | "revoked" => JobOutcome::Cancelled,
            "timeout" => JobOutcome::Timeout,
            "running" | "pending" | "waiting" | "suspended" | "requeued" | "resizing" => {
                JobOutcome::Running
            }
            _ => JobOutcome::Other,
        }
    }
}

impl std::fmt::Display for JobOutcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            JobOutcome::Completed => "completed",
            JobOutcome::Failed => "failed",
            JobOutcome::Cancelled => "cancelled",
            JobOutcome::Timeout => "timeout",
            JobOutcome::Running => "running",
            JobOutcome::Other => "other",
        })
    }
}

/// One job as a trace describes it, before it is placed in time or given a model.
#[derive(Debug, Clone, PartialEq)]
pub struct RawJob {
    /// The trace's own id.
    pub source_id: String,
    /// Job name (or Gavel's job type, Acme's type), for mapping rules.
    pub name: Option<String>,
    /// Queue, virtual cluster or partition, for mapping rules.
    pub queue: Option<String>,
    /// User, for mapping rules.
    pub user: Option<String>,
    /// Submission, seconds since the Unix epoch (or since the trace's own zero).
    pub submit_s: f64,
    /// Run time, seconds.
    pub run_s: f64,
    /// GPUs.
    pub gpus: u32,
    /// How it ended.
    pub state: JobOutcome,
    /// Cores it asked for, where the trace says.
    pub req_cpus: Option<f64>,
    /// Memory it asked for, decimal GB, where the trace says.
    pub req_mem_gb: Option<f64>,
    /// A model the trace names (Gavel, Tiresias, a sacct comment `synergy:NAME`).
    pub model: Option<String>,
    /// Work the trace gives in iterations instead of a run time (Gavel).
    pub iters: Option<u64>,
}

impl RawJob {
    /// A job with only what every format has: nothing to map by, no requests, no model of its own.
    pub fn new(
        source_id: String,
        submit_s: f64,
        run_s: f64,
        gpus: u32,
        state: JobOutcome,
    ) -> RawJob {
        RawJob {
            source_id,
            name: None,
            queue: None,
            user: None,
            submit_s,
            run_s,
            gpus,
            state,
            req_cpus: None,
            req_mem_gb: None,
            model: None,
            iters: None,
        }
    }
}

/// What to do with a job wider than the cluster's widest server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum WideJobs {
    /// Give it the widest server's GPUs.
    Cap,
    /// Keep its width: the mechanism places it across servers.
    Spread,
    /// Leave it out.
    Drop,
}

/// What to keep and how to turn it into the simulator's jobs.
#[derive(Debug, Clone)]
pub struct ImportOptions {
    /// States kept.
    pub states: Vec<JobOutcome>,
    /// Keep jobs submitted at or after this instant (seconds since the epoch).
    pub from_s: Option<f64>,
    /// Keep jobs submitted before this instant.
    pub to_s: Option<f64>,
    /// Arrivals are compressed by this factor (2: twice the load).
    pub load_scale: f64,
    /// Jobs wider than the widest server.
    pub wide: WideJobs,
    /// GPUs of the cluster's widest server.
    pub widest_server_gpus: u32,
    /// GPUs of the whole cluster.
    pub cluster_gpus: u64,
    /// How jobs get models.
    pub models: ModelRule,
}

/// The filters, applied to each job as it is read; counts what it dropped and why.
#[derive(Debug)]
pub struct Sink<'a> {
    opts: &'a ImportOptions,
    kept: Vec<RawJob>,
    read: u64,
    dropped: BTreeMap<String, u64>,
}

impl<'a> Sink<'a> {
    fn new(opts: &'a ImportOptions) -> Sink<'a> {
        Sink {
            opts,
            kept: Vec::new(),
            read: 0,
            dropped: BTreeMap::new(),
        }
    }

    /// A row that describes no usable job (no attempt, no end time): counted under `reason`.
    pub fn skip(&mut self, reason: &str) {
        self.read += 1;
        *self.dropped.entry(reason.to_string()).or_default() += 1;
    }

    /// A job read whole: kept unless a filter drops it.
    pub fn offer(&mut self, mut job: RawJob) {
        let o = self.opts;
        let reason = if !o.states.contains(&job.state) {
            Some(format!("state {}", job.state))
        } else if job.gpus == 0 {
            Some("no GPU".to_string())
        } else if job.iters.is_none() && (job.run_s.is_nan() || job.run_s <= 0.0) {
            Some("no run time".to_string())
        } else if job.iters.is_some_and(|n| !crate::range::is_work(n))
            || (job.iters.is_none() && !crate::range::is_seconds(job.run_s))
        {
            Some("a run time or work out of range".to_string())
        } else if o.from_s.is_some_and(|f| job.submit_s < f)
            || o.to_s.is_some_and(|t| job.submit_s >= t)
        {
            Some("outside the time window".to_string())
        } else if job.gpus > o.widest_server_gpus {
            match o.wide {
                WideJobs::Cap => {
                    job.gpus = o.widest_server_gpus;
                    None
                }
                WideJobs::Spread if job.gpus as u64 <= o.cluster_gpus => None,
                WideJobs::Spread => Some("wider than the cluster".to_string()),
                WideJobs::Drop => Some("wider than a server".to_string()),
            }
        } else {
            None
        };
        match reason {
            Some(r) => self.skip(&r),
            None => {
                self.read += 1;
                // Only mapping rules read a job's words: without them, memory is what the output needs.
                if !matches!(o.models, ModelRule::Map(..)) {
                    (job.name, job.queue, job.user) = (None, None, None);
                }
                self.kept.push(job);
            }
        }
    }
}

/// Everything an import did, for stderr and `--json`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ImportSummary {
    /// Format read.
    pub format: Format,
    /// Files read.
    pub files: Vec<PathBuf>,
    /// Jobs (or rows that should have been jobs) read.
    pub read: u64,
    /// Jobs kept.
    pub kept: u64,
    /// Jobs dropped, by reason.
    pub dropped: BTreeMap<String, u64>,
    /// Seconds from the first kept submission to the last (before scaling).
    pub span_s: f64,
    /// Jobs by GPU count.
    pub gpu_histogram: BTreeMap<u32, u64>,
    /// Jobs by model.
    pub models: BTreeMap<String, u64>,
    /// GPU-seconds the kept jobs ran, over what the cluster offers in the (scaled) span: above 1 the
    /// cluster cannot keep up at proportional share.
    pub offered_load: f64,
    /// How far what jobs asked for was from what their profiles say they need, where the trace has
    /// requests.
    pub requests: Option<RequestsVsDemand>,
}

/// Requested against profiled CPU and memory per GPU, medians over the jobs that state requests.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RequestsVsDemand {
    /// Jobs with a CPU request.
    pub jobs: u64,
    /// Median requested cores per GPU.
    pub requested_cpus_per_gpu: f64,
    /// Median best-case cores per GPU of their profiles.
    pub profiled_cpus_per_gpu: f64,
    /// Median requested memory per GPU, GB, over jobs with a memory request.
    pub requested_mem_gb_per_gpu: Option<f64>,
    /// Median best-case memory per GPU of their profiles, GB.
    pub profiled_mem_gb_per_gpu: Option<f64>,
}

/// Reads `files` in `format`, filters and converts them. Errors name the file, the line (or JSON path)
/// and the field.
pub fn import(
    format: Format,
    files: &[PathBuf],
    opts: &ImportOptions,
    catalog: &Catalog,
) -> Result<(Vec<ImportedJob>, ImportSummary), InputError> {
    check(opts)?;
    let assigner = Assigner::new(&opts.models, catalog)?;
    if files.is_empty() {
        return Err(InputError::setting(
            Setting::TraceFiles,
            "name at least one trace file",
        ));
    }
    let mut sink = Sink::new(opts);
    match format {
        Format::Philly => {
            for f in files {
                philly::read(f, &mut sink)?;
            }
        }
        Format::Pai => formats::read_pai(files, &mut sink)?,
        _ => {
            for f in files {
                formats::read(format, f, &mut sink)?;
            }
        }
    }
    finish(format, files, sink, opts, assigner, catalog)
}

fn check(opts: &ImportOptions) -> Result<(), InputError> {
    if !(opts.load_scale.is_finite() && opts.load_scale > 0.0) {
        return Err(InputError::setting(
            Setting::LoadScale,
            "must be a positive factor (2 doubles the load)",
        ));
    }
    if opts.states.is_empty() {
        return Err(InputError::setting(
            Setting::States,
            "keeps no state; name at least one",
        ));
    }
    if let (Some(a), Some(b)) = (opts.from_s, opts.to_s) {
        if a >= b {
            return Err(InputError::setting(
                Setting::TimeWindow,
                "its start is not before its end",
            ));
        }
    }
    if opts.widest_server_gpus == 0 {
        return Err(InputError::setting(Setting::Cluster, "has no GPU"));
    }
    Ok(())
}

/// Places the kept jobs in time, gives them models and iterations, and sums up.
fn finish(
    format: Format,
    files: &[PathBuf],
    sink: Sink,
    opts: &ImportOptions,
    mut assigner: Assigner,
    catalog: &Catalog,
) -> Result<(Vec<ImportedJob>, ImportSummary), InputError> {
    let Sink {
        mut kept,
        read,
        dropped,
        ..
    } = sink;
    if kept.is_empty() {
        let why = if dropped.is_empty() {
            "holds no job".to_string()
        } else {
            format!(
                "keeps no job ({})",
                dropped
                    .iter()
                    .map(|(r, n)| format!("{n} dropped: {r}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        };
        return Err(InputError::new(
            files[0].display().to_string(),
            format!("the trace {why}"),
        ));
    }
    // Arrival order, ties by the source's order (a stable sort).
    kept.sort_by(|a, b| a.submit_s.total_cmp(&b.submit_s));
    let first = kept[0].submit_s;
    let span_s = kept.last().map_or(0.0, |j| j.submit_s - first);
    let mut jobs = Vec::with_capacity(kept.len());
    let mut gpu_histogram = BTreeMap::new();
    let mut models = BTreeMap::new();
    let mut gpu_s = 0.0;
    let mut cpu_req = Vec::new();
    let mut mem_req = Vec::new();
    for (id, raw) in kept.into_iter().enumerate() {
        let model = assigner.model_for(&raw);
        let m = catalog.get(model);
        let (iters, duration_s) = match raw.iters {
            Some(n) => (n.max(1), n.max(1) as f64 * m.iter_time_s),
            None => (
                ((raw.run_s / m.iter_time_s).trunc() as u64).max(1),
                raw.run_s,
            ),
        };
        gpu_s += duration_s * raw.gpus as f64;
        *gpu_histogram.entry(raw.gpus).or_default() += 1;
        *models.entry(m.name.clone()).or_default() += 1;
        let per_gpu = |x: f64| x / raw.gpus as f64;
        if let Some(c) = raw.req_cpus {
            cpu_req.push((per_gpu(c), m.best_cpus_per_gpu));
        }
        if let Some(g) = raw.req_mem_gb {
            mem_req.push((
                per_gpu(g),
                m.best_memory_gib_per_gpu * crate::units::GIB / 1e9,
            ));
        }
        jobs.push(ImportedJob {
            id: id as u64,
            model: m.name.clone(),
            arrival_s: (raw.submit_s - first) / opts.load_scale,
            iters,
            gpus: raw.gpus,
            source_id: raw.source_id,
            duration_s,
            req_cpus: raw.req_cpus,
            req_mem_gb: raw.req_mem_gb,
        });
    }
    let scaled_span = (span_s / opts.load_scale).max(1.0);
    let requests = (!cpu_req.is_empty()).then(|| RequestsVsDemand {
        jobs: cpu_req.len() as u64,
        requested_cpus_per_gpu: median(cpu_req.iter().map(|p| p.0)),
        profiled_cpus_per_gpu: median(cpu_req.iter().map(|p| p.1)),
        requested_mem_gb_per_gpu: (!mem_req.is_empty())
            .then(|| median(mem_req.iter().map(|p| p.0))),
        profiled_mem_gb_per_gpu: (!mem_req.is_empty()).then(|| median(mem_req.iter().map(|p| p.1))),
    });
    let summary = ImportSummary {
        format,
        files: files.to_vec(),
        read,
        kept: jobs.len() as u64,
        dropped,
        span_s,
        gpu_histogram,
        models,
        offered_load: gpu_s / (opts.cluster_gpus as f64 * scaled_span),
        requests,
    };
    Ok((jobs, summary))
}

fn median(xs: impl Iterator<Item = f64>) -> f64 {
    let mut v: Vec<f64> = xs.collect();
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

/// The simulator's jobs for imported ones.
pub fn trace_jobs(jobs: &[ImportedJob], catalog: &Catalog) -> Vec<TraceJob> {
    jobs.iter()
        .map(|j| TraceJob {
            id: j.id,
            model: catalog
                .index(&j.model)
                .expect("imported models come from the catalog") as u32,
            arrival_s: j.arrival_s,
            iters: j.iters,
            gpus: j.gpus,
        })
        .collect()
}
