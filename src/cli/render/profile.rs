//! What `synergy profile`, `profile refine`, `profile replay` and `predict` print.

use super::*;

/// A profile for people: where it went, its model, the throughput matrix, demand and validation.
pub(in crate::cli) fn render_profile(p: &Profile, out: &Path) -> String {
    let mut o = String::new();
    let m = &p.matrix;
    let _ = writeln!(
        o,
        "{}: profile written to {} (and .csv)",
        p.workload.name,
        out.display()
    );
    if let Some(model) = &p.model {
        let s = &model.stall;
        let _ = writeln!(
            o,
            "  model        G = {:.1} samples/s; footprint {}; dataset {}; hit model {}; storage {}",
            s.accelerator_samples_per_s,
            Bytes(s.footprint_bytes),
            Bytes(s.dataset_bytes),
            s.hit_model,
            match (s.fetch.storage_bytes_per_s, s.fetch.storage_lower_bound) {
                (Some(b), false) => format!("{:.1} MB/s", b / 1e6),
                (Some(b), true) => format!("at least {:.1} MB/s (never held the cold trial up)", b / 1e6),
                (None, _) => "never limits".into(),
            }
        );
        if let Some(mc) = &s.miss_cost {
            let _ = writeln!(
                o,
                "  miss cost    {:.3} ms of CPU and {:.3} ms of a blocked loader per miss",
                1e3 * mc.cpu_s_per_miss,
                1e3 * mc.wait_s_per_miss
            );
        }
        if let Some(fit) = &model.hit_curve {
            let _ = writeln!(o, "  page cache   {}", fit.chosen_because);
        }
        if let Some(a) = &model.accelerator {
            let _ = writeln!(o, "  accelerator  {}", a.because);
        }
    }
    if let Some(why) = &p.workload.no_memory_axis {
        let _ = writeln!(o, "  memory axis  does not apply: {why}");
    }
    if let Some(probe) = &p.workload.probe {
        let _ = writeln!(o, "  probe        {}", probe.describe());
    }
    // A job of several GPUs: its cores are the whole job's; each row also says them per GPU.
    let gpus = p.workload.gpus.max(1);
    let row_label = |c: f64| {
        if gpus > 1 {
            format!("{c} ({}/GPU)", crate::units::Cores(c / gpus as f64))
        } else {
            c.to_string()
        }
    };
    let header = if gpus > 1 {
        format!("job cores ({gpus} GPUs) \\ GiB")
    } else {
        "cores \\ GiB".to_string()
    };
    let width = m
        .cpus
        .iter()
        .map(|c| row_label(*c).len())
        .chain([header.len() - 1])
        .max()
        .unwrap_or(10);
    let _ = write!(o, "  samples/s    {header:>w$}", w = width + 1);
    // Enough decimals that neighbouring columns read apart (a small dataset beside a large footprint).
    let decimals = (2..=4)
        .find(|&d| {
            let f = |g: &f64| format!("{g:.d$}");
            m.memory_gib.windows(2).all(|w| f(&w[0]) != f(&w[1]))
        })
        .unwrap_or(4);
    for g in &m.memory_gib {
        let _ = write!(o, " {g:>8.decimals$}");
    }
    let _ = writeln!(o);
    if let Some(abs) = &m.samples_per_s {
        for (c, row) in m.cpus.iter().zip(abs) {
            let _ = write!(o, "               {:>width$}", row_label(*c));
            for v in row {
                let _ = write!(o, " {v:>8.1}");
            }
            let _ = writeln!(o);
        }
    }
    let d = &p.demand;
    let _ = writeln!(
        o,
        "  proportional {} cores, {:.2} GiB = 1.0 ({:.1} samples/s)",
        m.proportional.cpus,
        m.proportional.memory_gib,
        m.proportional.samples_per_s.unwrap_or(0.0)
    );
    let _ = writeln!(
        o,
        "  demand       {} cores, {:.2} GiB: {:.2}x proportional (within {:.0}% of the best); per GPU {} cores, {:.2} GiB",
        d.job.cpus,
        d.job.memory_gib,
        d.job.normalized,
        100.0 * d.tolerance,
        d.per_gpu.cpus,
        d.per_gpu.memory_gib
    );
    let secs: f64 = p.trials.iter().map(|t| t.result.duration_s).sum();
    let _ = writeln!(
        o,
        "  trials       {} ({secs:.0} trial-seconds)",
        p.trials.len()
    );
    for s in &p.validation_summary {
        let _ = writeln!(
            o,
            "  validation   {}{} model{}: median error {:.1}%, mean {:.1}%, max {:.1}% over {} points{}",
            if s.ds_analyzer { "DS-Analyzer's " } else { "" },
            s.hit_model,
            if s.at_core_speed {
                " at each point's core speed"
            } else {
                ""
            },
            100.0 * s.median_error,
            100.0 * s.mean_error,
            100.0 * s.max_error,
            s.points,
            if s.ds_analyzer {
                " (LRU, misses cost bandwidth only)"
            } else if s.at_core_speed {
                " (the host's drift during the profile taken out)"
            } else if p
                .model
                .as_ref()
                .is_some_and(|m| m.stall.hit_model == s.hit_model)
            {
                " (the workload's model)"
            } else {
                ""
            }
        );
    }
    let ours: Vec<&ErrorSummary> = p
        .validation_summary
        .iter()
        .filter(|s| !s.ds_analyzer && !s.at_core_speed)
        .collect();
    if let (Some(model), [a, b]) = (&p.model, ours.as_slice()) {
        let (own, other) = if a.hit_model == model.stall.hit_model {
            (a, b)
        } else {
            (b, a)
        };
        if other.median_error + 0.01 < own.median_error {
            let _ = writeln!(
                o,
                "  note         the {} model fits the validation points better than the spec's {}; check `cache` in the spec",
                other.hit_model, own.hit_model
            );
        }
    }
    for w in &p.warnings {
        let _ = writeln!(o, "  warning      {w}");
    }
    o
}

/// What `profile refine` did: per allocation, observed against predicted before and after, and why.
pub(in crate::cli) fn render_refinement(
    r: &crate::format::profile::Refinement,
    out: &Path,
) -> String {
    let mut s = format!(
        "{}: refined from {} observation(s) ({} disturbed, {}; {} at other GPU counts, left out) in {}\n",
        out.display(),
        r.observations,
        r.disturbed,
        if r.included_disturbed { "folded in" } else { "left out" },
        r.other_gpus,
        r.from.join(", ")
    );
    s.push_str(&format!(
        "{:>6} {:>8} {:>7} {:>6} {:>17} {:>10} {:>8} {:>10} {:>8}\n",
        "cores", "mem GiB", "limited", "obs", "observed/s", "before", "error", "after", "error"
    ));
    for p in &r.points {
        s.push_str(&format!(
            "{:>6.2} {:>8.2} {:>7} {:>6} {:>17} {:>10.1} {:>+7.1}% {:>10.1} {:>+7.1}%\n",
            p.cpus,
            p.memory_gib,
            if p.memory_limited { "yes" } else { "no" },
            p.observations,
            format!("{:.1} ± {:.1}", p.observed_samples_per_s, p.observed_ci95),
            p.predicted_before,
            100.0 * p.error_before(),
            p.predicted_after,
            100.0 * p.error_after(),
        ));
    }
    for b in &r.because {
        s.push_str(&format!("- {b}\n"));
    }
    s
}

/// `predict`'s answer on one line: throughput, its ratio to proportional, and what limits it.
pub(in crate::cli) fn render_prediction(
    p: &Profile,
    cpus: f64,
    mem_gib: f64,
    v: &crate::predict::ProfilePrediction,
) -> String {
    format!(
        "{} at {} cores, {} GiB: {}{:.2}x proportional{}\n{}",
        p.workload.name,
        cpus,
        mem_gib,
        v.samples_per_s
            .map(|t| format!("{t:.1} samples/s, "))
            .unwrap_or_default(),
        v.normalized,
        v.limited_by
            .map(|s| format!(", limited by {s}"))
            .unwrap_or_default(),
        p.host
            .as_ref()
            .map(|h| format!(
                "  profiled under {}\n",
                crate::format::profile::isolation_said(h)
            ))
            .unwrap_or_default()
    )
}
