//! What `synergy simulate` prints: one run or a sweep.

use super::*;

/// One simulation of a sweep, as `simulate` reports it: the sweep point a run stands for, when the trace
/// was generated (a trace file has no load or seed).
pub(in crate::cli) struct SimRun<'a> {
    /// The point it ran.
    pub(in crate::cli) point: &'a crate::sim::sweep::Point,
    /// Its result.
    pub(in crate::cli) result: &'a crate::sim::SimResult,
    /// The job-list seed the point used, for a generated trace.
    pub(in crate::cli) job_list_seed: Option<u64>,
}

/// `simulate`'s summaries: as JSON (the sweep point beside each summary of a generated trace), one
/// summary's report, or a sweep's table.
pub(in crate::cli) fn render_simulation(
    runs: &[SimRun<'_>],
    as_json: bool,
) -> serde_json::Result<String> {
    if as_json {
        let summaries: Vec<serde_json::Value> = runs
            .iter()
            .map(|r| {
                let mut v = serde_json::to_value(&r.result.summary).expect("summaries serialize");
                if let Some(list_seed) = r.job_list_seed {
                    v["load_jobs_per_h"] = r.point.load_jobs_per_h.into();
                    v["seed"] = r.point.seed.into();
                    v["job_list_seed"] = list_seed.into();
                }
                v
            })
            .collect();
        return json_one_or_many(summaries);
    }
    if let [one] = runs {
        return Ok(crate::sim::output::render_summary(&one.result.summary));
    }
    let generated = |r: &SimRun<'_>| r.job_list_seed.is_some();
    let rows: Vec<(Option<f64>, Option<u64>, crate::sim::Summary)> = runs
        .iter()
        .map(|r| {
            (
                generated(r).then_some(r.point.load_jobs_per_h),
                generated(r).then_some(r.point.seed),
                r.result.summary.clone(),
            )
        })
        .collect();
    Ok(crate::sim::output::render_sweep(&rows))
}
