//! What `synergy run` prints: the report of a run, its fidelity, and the plan of a dry run.

use super::*;

/// A run's report for people: one row per job, real JCT beside the predicted one.
pub(in crate::cli) fn render_run(r: &RunReport) -> String {
    let secs = |v: Option<f64>| v.map_or_else(|| "-".to_string(), |x| format!("{x:.1}"));
    let pct = |v: Option<f64>| v.map_or_else(|| "-".to_string(), |x| format!("{:+.1}%", x * 100.0));
    let mut out = format!(
        "{} / {} on {} ({} rounds of {} s, makespan {:.1} s)\n",
        r.policy, r.mechanism, r.backend, r.rounds, r.round_s, r.makespan_s
    );
    out.push_str(&format!(
        "{:<16} {:<8} {:>4} {:>9} {:>8} {:>10} {:>10} {:>8}  {}\n",
        "job", "workload", "gpus", "samples", "arrive", "real JCT", "predicted", "diff", "status"
    ));
    for j in &r.jobs {
        out.push_str(&format!(
            "{:<16} {:<8} {:>4} {:>9} {:>8.1} {:>10} {:>10} {:>8}  {:?}{}\n",
            j.name,
            j.workload,
            j.gpus,
            j.samples,
            j.arrival_s,
            secs(j.real_jct_s),
            secs(j.predicted_jct_s),
            pct(j.difference),
            j.status,
            if j.retries > 0 {
                format!(" ({} retries)", j.retries)
            } else {
                String::new()
            }
        ));
    }
    out.push_str(&format!(
        "{:<16} {:<8} {:>4} {:>9} {:>8} {:>10} {:>10} {:>8}\n",
        "mean",
        "",
        "",
        "",
        "",
        secs(r.mean_real_jct_s),
        secs(r.mean_predicted_jct_s),
        pct(r.mean_difference)
    ));
    if r.mean_predicted_refined_jct_s.is_some() {
        out.push_str(&format!(
            "{:<16} {:<8} {:>4} {:>9} {:>8} {:>10} {:>10} {:>8}  (predicted again from the profiles as this run refined them)\n",
            "mean, refined",
            "",
            "",
            "",
            "",
            secs(r.mean_real_jct_s),
            secs(r.mean_predicted_refined_jct_s),
            pct(r.mean_difference_refined)
        ));
    }
    out.push_str(&render_fidelity(r));
    out
}

/// The fidelity table of a run: per job and allocation, observed throughput against the profile's
/// prediction before and after refinement.
fn render_fidelity(r: &RunReport) -> String {
    let mut out = format!(
        "\nthroughput at each allocation, observed against the profile ({} observations, {} disturbed, in {}{}):\n",
        r.observations,
        r.disturbed_observations,
        r.observation_log,
        if r.refine { "; refined between rounds" } else { "" }
    );
    out.push_str(&format!(
        "{:<16} {:>6} {:>8} {:>6} {:>17} {:>10} {:>8} {:>10} {:>8}\n",
        "job", "cores", "mem GiB", "rounds", "observed/s", "profile", "error", "refined", "error"
    ));
    let mut any = false;
    for j in &r.jobs {
        for f in &j.fidelity {
            any = true;
            out.push_str(&format!(
                "{:<16} {:>6.2} {:>8.2} {:>6} {:>17} {:>10.1} {:>+7.1}% {:>10} {:>8}\n",
                j.name,
                f.cpus,
                f.memory_gib,
                f.rounds,
                format!("{:.1} ± {:.1}", f.observed_samples_per_s, f.observed_ci95),
                f.predicted_before,
                100.0 * f.error_before,
                f.predicted_after
                    .map_or_else(|| "-".to_string(), |v| format!("{v:.1}")),
                f.error_after
                    .map_or_else(|| "-".to_string(), |e| format!("{:+.1}%", 100.0 * e)),
            ));
        }
    }
    if !any {
        out.push_str("  (no round was long enough to observe a throughput)\n");
    }
    for p in &r.refined_profiles {
        out.push_str(&format!("refined profile: {p}\n"));
    }
    out
}

/// `simulate --jobs-list`'s predictions as JSON values, one per policy and mechanism: the shape both its
/// `--json` output and its table are read from.
pub(in crate::cli) fn job_list_predictions(
    list: &crate::exec::jobs::JobList,
    policy: &str,
    mechanism: &str,
    round_s: f64,
    jcts: &[Option<f64>],
) -> serde_json::Value {
    let done: Vec<f64> = jcts.iter().flatten().copied().collect();
    let mean = done.iter().sum::<f64>() / done.len().max(1) as f64;
    serde_json::json!({
        "policy": policy,
        "mechanism": mechanism,
        "round_s": round_s,
        "jobs": list.jobs.iter().zip(jcts).map(|(j, t)| serde_json::json!({
            "name": j.name, "workload": j.spec.name, "gpus": j.gpus,
            "arrival_s": j.arrival_s, "predicted_jct_s": t,
        })).collect::<Vec<_>>(),
        "mean_predicted_jct_s": mean,
    })
}

/// `simulate --jobs-list`'s predictions for people: a mean per configuration, then each job.
pub(in crate::cli) fn render_job_list(predictions: &[serde_json::Value], round_s: f64) -> String {
    let mut o = String::new();
    for v in predictions {
        let _ = writeln!(
            o,
            "{} / {} (rounds of {} s): mean predicted JCT {:.1} s",
            v["policy"].as_str().unwrap_or_default(),
            v["mechanism"].as_str().unwrap_or_default(),
            round_s,
            v["mean_predicted_jct_s"].as_f64().unwrap_or(0.0)
        );
        for j in v["jobs"].as_array().into_iter().flatten() {
            let _ = writeln!(
                o,
                "  {:<16} {:<8} arrives {:>6.1} s  JCT {:>8.1} s",
                j["name"].as_str().unwrap_or_default(),
                j["workload"].as_str().unwrap_or_default(),
                j["arrival_s"].as_f64().unwrap_or(0.0),
                j["predicted_jct_s"].as_f64().unwrap_or(f64::NAN)
            );
        }
    }
    o
}

/// `run --dry-run`'s plan for people: each round as the executor would start it.
pub(in crate::cli) fn render_plan(rounds: &[crate::exec::executor::PlannedRound]) -> String {
    rounds.iter().map(|r| r.to_string()).collect()
}
