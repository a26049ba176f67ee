//! What a simulation measured: per-job and per-round records and the summary over the measurement window
//! (JCT mean, median, p99, p99.9, makespan, per-class JCT, utilization, finish-time fairness, demotions).

use crate::sched::catalog::Catalog;
use crate::sched::cluster::ClusterConfig;
use crate::sched::JobState;
use serde::Serialize;
use std::collections::BTreeMap;
use std::sync::Arc;

/// One finished job.
#[derive(Debug, Clone, PartialEq)]
pub struct FinishedJob {
    /// Trace id.
    pub id: u64,
    /// Model name (shared with every job of the model: a million records hold no copies).
    pub model: Arc<str>,
    /// Model class.
    pub class: Arc<str>,
    /// GPUs.
    pub gpus: u32,
    /// Arrival, seconds.
    pub arrival_s: f64,
    /// First round it ran, seconds.
    pub start_s: f64,
    /// Finish, seconds.
    pub finish_s: f64,
    /// Job completion time, seconds.
    pub jct_s: f64,
    /// Duration alone at GPU-proportional share, seconds.
    pub isolated_s: f64,
    /// Finish-time fairness: JCT over isolated duration.
    pub ftf: f64,
    /// Rounds in which tune demoted it.
    pub demotions: u32,
    /// Whether it counts in the statistics.
    pub in_window: bool,
}

impl FinishedJob {
    /// The record of `job`, finishing at `finish_s`.
    pub fn of(job: &JobState, finish_s: f64, names: &ModelNames) -> FinishedJob {
        let (model, class) = &names.0[job.model as usize];
        let jct_s = finish_s - job.arrival_s;
        FinishedJob {
            id: job.id,
            model: model.clone(),
            class: class.clone(),
            gpus: job.gpus,
            arrival_s: job.arrival_s,
            start_s: job.first_start_s.unwrap_or(finish_s),
            finish_s,
            jct_s,
            isolated_s: job.isolated_s(),
            ftf: jct_s / job.isolated_s().max(1e-9),
            demotions: job.demotions,
            in_window: job.in_window,
        }
    }
}

/// The name and class of each model of a catalog, made once per run for the records of its jobs.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelNames(Vec<(Arc<str>, Arc<str>)>);

impl ModelNames {
    /// The names of `catalog`'s models, by index.
    pub fn of(catalog: &Catalog) -> ModelNames {
        ModelNames(
            catalog
                .models
                .iter()
                .map(|m| (Arc::from(m.name.as_str()), Arc::from(m.class.as_str())))
                .collect(),
        )
    }
}

/// What the summary needs of the measured jobs, gathered as they finish: their JCTs (8 bytes a job, for
/// the median and the tail) and running sums taken in finish order, the order in which a list of every
/// finished job would be summed, so that a run keeps no per-job record unless its outputs ask for one.
#[derive(Debug, Clone, PartialEq)]
pub struct Measured {
    jct_s: Vec<f64>,
    first_arrival_s: f64,
    last_finish_s: f64,
    by_class: BTreeMap<Arc<str>, (f64, u64)>,
    ftf_sum: Option<f64>,
    ftf_max: f64,
    demoted: u64,
}

impl Default for Measured {
    fn default() -> Self {
        Measured {
            jct_s: Vec::new(),
            first_arrival_s: f64::INFINITY,
            last_finish_s: 0.0,
            by_class: BTreeMap::new(),
            ftf_sum: None,
            ftf_max: 0.0,
            demoted: 0,
        }
    }
}

impl Measured {
    /// Counts `j` if it is in the measurement window.
    pub fn add(&mut self, j: &FinishedJob) {
        if !j.in_window {
            return;
        }
        self.jct_s.push(j.jct_s);
        self.first_arrival_s = self.first_arrival_s.min(j.arrival_s);
        self.last_finish_s = self.last_finish_s.max(j.finish_s);
        let e = match self.by_class.get_mut(&j.class) {
            Some(e) => e,
            None => self.by_class.entry(j.class.clone()).or_default(),
        };
        e.0 += j.jct_s;
        e.1 += 1;
        self.ftf_sum = Some(self.ftf_sum.map_or(j.ftf, |s| s + j.ftf));
        self.ftf_max = self.ftf_max.max(j.ftf);
        self.demoted += u64::from(j.demotions > 0);
    }
}

/// One round.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct RoundRecord {
    /// Round start, seconds.
    pub start_s: f64,
    /// Jobs arrived and not finished.
    pub active: u32,
    /// Jobs that got GPUs.
    pub running: u32,
    /// GPUs allocated.
    pub gpus_used: u64,
    /// Cores allocated.
    pub cpus_used: f64,
    /// Memory allocated, GiB.
    pub memory_gib_used: f64,
    /// Mean normalized speed of the running jobs (1.0 = GPU-proportional).
    pub mean_speed: f64,
    /// Jobs tune demoted.
    pub demotions: u32,
    /// Optimizer time, seconds.
    pub solve_s: f64,
}

/// Facts about a run that the engine hands to the summary.
#[derive(Debug, Clone, PartialEq)]
pub struct RunFacts {
    /// Policy name.
    pub policy: String,
    /// Mechanism name.
    pub mechanism: String,
    /// Semantics name.
    pub semantics: String,
    /// End of the last round, seconds.
    pub end_s: f64,
    /// Rounds simulated (idle stretches are skipped).
    pub rounds: u64,
    /// Job-rounds simulated (a job holding GPUs for one round is one).
    pub job_rounds: u64,
    /// Wall-clock seconds.
    pub wall_s: f64,
    /// Demotions in all.
    pub demotions: u64,
    /// GPUs, cores and GiB allocated, summed over rounds (for mean utilization without round records).
    pub used_sums: (f64, f64, f64),
    /// GPU-seconds of work, at GPU-proportional speed, of the jobs up to the window's last id.
    pub offered_gpu_s: f64,
    /// Arrival of the last of those jobs, seconds.
    pub offered_until_s: f64,
    /// Rounds the optimizer ran.
    pub solves: u64,
    /// Optimizer seconds in all.
    pub solve_s_total: f64,
    /// Slowest optimizer round, seconds.
    pub solve_s_max: f64,
}

/// JCT statistics of a group of jobs, hours.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct JctStats {
    /// Jobs.
    pub jobs: u64,
    /// Mean, hours.
    pub mean_h: f64,
    /// Median, hours.
    pub median_h: f64,
    /// 99th percentile, hours.
    pub p99_h: f64,
    /// 99.9th percentile, hours.
    pub p999_h: f64,
}

impl JctStats {
    fn of(mut jct_s: Vec<f64>) -> JctStats {
        jct_s.sort_by(f64::total_cmp);
        let n = jct_s.len();
        let h = |v: f64| v / 3600.0;
        JctStats {
            jobs: n as u64,
            mean_h: if n == 0 {
                0.0
            } else {
                h(jct_s.iter().sum::<f64>() / n as f64)
            },
            median_h: h(percentile(&jct_s, 0.5)),
            p99_h: h(percentile(&jct_s, 0.99)),
            p999_h: h(percentile(&jct_s, 0.999)),
        }
    }
}

/// Linear interpolation between closest ranks of sorted values.
pub fn percentile(sorted: &[f64], q: f64) -> f64 {
    match sorted.len() {
        0 => 0.0,
        1 => sorted[0],
        n => {
            let x = q * (n - 1) as f64;
            let (lo, hi) = (x.floor() as usize, x.ceil() as usize);
            sorted[lo] + (x - lo as f64) * (sorted[hi] - sorted[lo])
        }
    }
}

/// The summary of one run over its measured jobs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Summary {
    /// Policy.
    pub policy: String,
    /// Mechanism.
    pub mechanism: String,
    /// The scheduling rules, `synergy` or `reference` (docs/simulate.md, "Two semantics").
    pub semantics: String,
    /// JCT over measured jobs.
    pub jct: JctStats,
    /// First arrival to last finish of the measured jobs, hours.
    pub makespan_h: f64,
    /// Mean JCT per model class, hours.
    pub class_mean_jct_h: BTreeMap<String, f64>,
    /// Mean finish-time fairness (JCT over isolated duration) of measured jobs.
    pub ftf_mean: f64,
    /// Worst finish-time fairness.
    pub ftf_max: f64,
    /// Mean GPU, core and memory utilization over the rounds (fractions of the cluster).
    pub gpu_util: f64,
    /// Mean core utilization.
    pub cpu_util: f64,
    /// Mean memory utilization.
    pub memory_util: f64,
    /// Work offered by the trace up to the window's end, at GPU-proportional speed, as a multiple of the
    /// cluster's GPUs: above 1 the queue grows whatever the mechanism does for speed 1.0 jobs.
    pub offered_load: f64,
    /// Demotions by tune (or opt's placement) in all rounds.
    pub demotions: u64,
    /// Measured jobs demoted at least once.
    pub jobs_demoted: u64,
    /// Rounds simulated.
    pub rounds: u64,
    /// Simulated time, hours.
    pub simulated_h: f64,
    /// Job-rounds simulated.
    pub job_rounds: u64,
    /// Wall-clock seconds of the run.
    pub wall_s: f64,
    /// Job-rounds per wall-clock second.
    pub job_rounds_per_s: f64,
    /// Mean optimizer seconds per round (opt).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub solve_s_mean: Option<f64>,
    /// Slowest optimizer round, seconds (opt).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub solve_s_max: Option<f64>,
}

/// Everything one run produced.
#[derive(Debug, Clone, PartialEq)]
pub struct SimResult {
    /// Finished jobs, in finish order.
    pub jobs: Vec<FinishedJob>,
    /// Rounds (empty unless recorded).
    pub rounds: Vec<RoundRecord>,
    /// The summary.
    pub summary: Summary,
}

impl SimResult {
    /// Summarizes a run: `jobs` are the records kept (all finished jobs, or none when the outputs need
    /// none), `measured` what the measured jobs added up to.
    pub fn new(
        jobs: Vec<FinishedJob>,
        measured: Measured,
        rounds: Vec<RoundRecord>,
        cluster: &ClusterConfig,
        f: RunFacts,
    ) -> SimResult {
        let count = measured.jct_s.len();
        let jct = JctStats::of(measured.jct_s);
        let (first, last) = (measured.first_arrival_s, measured.last_finish_s);
        let by_class = measured.by_class;
        let n = count.max(1) as f64;
        let nr = f.rounds.max(1) as f64;
        let (tg, tc, tm) = (
            cluster.total_gpus() as f64,
            cluster.total_cpus(),
            cluster.total_memory_gib(),
        );
        let summary = Summary {
            policy: f.policy,
            mechanism: f.mechanism,
            semantics: f.semantics,
            jct,
            makespan_h: if count == 0 {
                0.0
            } else {
                (last - first) / 3600.0
            },
            class_mean_jct_h: by_class
                .into_iter()
                .map(|(k, (s, c))| (k.to_string(), s / c as f64 / 3600.0))
                .collect(),
            // An empty sum is what summing no value gives, as for a list of jobs.
            ftf_mean: measured
                .ftf_sum
                .unwrap_or_else(|| std::iter::empty::<f64>().sum())
                / n,
            ftf_max: measured.ftf_max,
            gpu_util: f.used_sums.0 / tg / nr,
            cpu_util: f.used_sums.1 / tc / nr,
            memory_util: f.used_sums.2 / tm / nr,
            offered_load: if f.offered_until_s > 0.0 {
                f.offered_gpu_s / f.offered_until_s / tg
            } else {
                0.0
            },
            demotions: f.demotions,
            jobs_demoted: measured.demoted,
            rounds: f.rounds,
            simulated_h: f.end_s / 3600.0,
            job_rounds: f.job_rounds,
            wall_s: f.wall_s,
            job_rounds_per_s: f.job_rounds as f64 / f.wall_s.max(1e-9),
            solve_s_mean: (f.solves > 0).then(|| f.solve_s_total / f.solves as f64),
            solve_s_max: (f.solves > 0).then_some(f.solve_s_max),
        };
        SimResult {
            jobs,
            rounds,
            summary,
        }
    }
}
