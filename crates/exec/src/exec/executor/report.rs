//! What a run reports: each job's real JCT beside the simulator's prediction, and the run's means.

use super::*;

/// One job's outcome, real beside predicted.
#[derive(Debug, Clone, Serialize)]
pub struct JobResult {
    /// Its name.
    pub name: String,
    /// Its workload's name.
    pub workload: String,
    /// GPUs.
    pub gpus: u32,
    /// Work in samples.
    pub samples: u64,
    /// Arrival, seconds.
    pub arrival_s: f64,
    /// Where it ended.
    pub status: JobStatus,
    /// Real JCT, seconds (done jobs).
    pub real_jct_s: Option<f64>,
    /// The simulator's JCT for it, seconds.
    pub predicted_jct_s: Option<f64>,
    /// (real - predicted) / predicted.
    pub difference: Option<f64>,
    /// The simulator's JCT for it with the profiles as this run refined them, seconds (docs/run.md,
    /// "Refinement"): how far the prediction converged.
    pub predicted_refined_jct_s: Option<f64>,
    /// (real - predicted from the refined profiles) / that prediction.
    pub difference_refined: Option<f64>,
    /// Times it crashed and was started again.
    pub retries: u32,
    /// Restarts to change GPUs.
    pub restarts: u32,
    /// Why it failed.
    pub error: Option<String>,
    /// Its observed throughput at each allocation it held, against its profile before and after
    /// refinement.
    pub fidelity: Vec<learn::FidelityPoint>,
}

/// A run's outcome.
#[derive(Debug, Clone, Serialize)]
pub struct RunReport {
    /// The job list.
    pub job_list: String,
    /// Backend name.
    pub backend: String,
    /// Policy name.
    pub policy: String,
    /// Mechanism name.
    pub mechanism: String,
    /// Round length, seconds.
    pub round_s: f64,
    /// The servers used.
    pub servers: Vec<ServerInfo>,
    /// Per job, in list order.
    pub jobs: Vec<JobResult>,
    /// Mean real JCT over jobs that finished, seconds.
    pub mean_real_jct_s: Option<f64>,
    /// Mean predicted JCT over the same jobs, seconds.
    pub mean_predicted_jct_s: Option<f64>,
    /// (mean real - mean predicted) / mean predicted.
    pub mean_difference: Option<f64>,
    /// Mean predicted JCT over the same jobs with the profiles as this run refined them, seconds.
    pub mean_predicted_refined_jct_s: Option<f64>,
    /// (mean real - mean refined prediction) / mean refined prediction.
    pub mean_difference_refined: Option<f64>,
    /// Rounds planned by this executor.
    pub rounds: u64,
    /// Seconds from the run's start to its end (across resumes).
    pub makespan_s: f64,
    /// The signal that interrupted the run, if one did.
    pub interrupted: Option<i32>,
    /// Whether profiles were refined between rounds (`--refine`).
    pub refine: bool,
    /// The run's observation log.
    pub observation_log: String,
    /// Observations in it (this run's, resumed ones included).
    pub observations: usize,
    /// Of those, disturbed by other work.
    pub disturbed_observations: usize,
    /// The refined profiles written (with `--refine`).
    pub refined_profiles: Vec<String>,
}

/// Mean real and mean predicted JCT over the jobs that have both; `None`s when none has.
pub(super) fn means(
    pairs: impl Iterator<Item = (Option<f64>, Option<f64>)>,
) -> (Option<f64>, Option<f64>) {
    let both: Vec<(f64, f64)> = pairs.filter_map(|(r, p)| r.zip(p)).collect();
    if both.is_empty() {
        return (None, None);
    }
    let n = both.len() as f64;
    (
        Some(both.iter().map(|b| b.0).sum::<f64>() / n),
        Some(both.iter().map(|b| b.1).sum::<f64>() / n),
    )
}
