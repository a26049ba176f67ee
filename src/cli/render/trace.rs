//! What `synergy trace import` says of an import.

use super::*;

/// What an import kept, dropped and assumed, a few lines for stderr.
pub(in crate::cli) fn render_import(
    s: &crate::import::ImportSummary,
    out: Option<&Path>,
) -> String {
    let mut t = format!(
        "synergy: imported {} of {} jobs from {} {} file(s){}\n",
        s.kept,
        s.read,
        s.files.len(),
        serde_json::to_value(s.format)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default(),
        out.map(|o| format!(" into {}", o.display()))
            .unwrap_or_default()
    );
    for (why, n) in &s.dropped {
        t.push_str(&format!("  dropped {n}: {why}\n"));
    }
    let hist: Vec<String> = s
        .gpu_histogram
        .iter()
        .map(|(g, n)| format!("{g} GPU: {n}"))
        .collect();
    t.push_str(&format!(
        "  span {:.1} h of submissions; offered load {:.2} of the cluster at proportional share\n  GPUs per job: {}\n",
        s.span_s / 3600.0,
        s.offered_load,
        hist.join(", ")
    ));
    let models: Vec<String> = s.models.iter().map(|(m, n)| format!("{m} {n}")).collect();
    t.push_str(&format!("  models: {}\n", models.join(", ")));
    if let Some(r) = &s.requests {
        t.push_str(&format!(
            "  requests ({} jobs, medians per GPU): {:.1} cores asked, {:.1} profiled",
            r.jobs, r.requested_cpus_per_gpu, r.profiled_cpus_per_gpu
        ));
        if let (Some(a), Some(p)) = (r.requested_mem_gb_per_gpu, r.profiled_mem_gb_per_gpu) {
            t.push_str(&format!("; {a:.1} GB asked, {p:.1} GB profiled"));
        }
        t.push('\n');
    }
    t
}
