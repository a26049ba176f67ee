//! Every result the command line prints, for people and as JSON, in one place: commands compute, this
//! module words. Each function returns the whole text, so a command writes it with one `out!`.

use crate::exec::executor::RunReport;
use crate::format::profile::ErrorSummary;
use crate::format::profile::Profile;
use crate::measure::TrialResult;
use crate::units::Bytes;
use std::fmt::Write as _;
use std::path::Path;

/// Any result as the `--json` flags print it: pretty, with a final newline.
pub(super) fn json<T: serde::Serialize + ?Sized>(v: &T) -> Result<String, serde_json::Error> {
    serde_json::to_string_pretty(v).map(|s| s + "\n")
}

/// A trial's result for people: allocation, throughput with its interval, and what was observed.
pub(super) fn render_trial(r: &TrialResult) -> String {
    let mut o = String::new();
    let a = &r.allocation;
    let cores: Vec<String> = a.cpu_list.iter().map(|c| c.to_string()).collect();
    let _ = writeln!(
        o,
        "{} ({}) at {} cores [cpuset {}]{}{}{}{}",
        r.workload,
        r.spec,
        a.cpus,
        cores.join(","),
        a.mem_limit_bytes
            .map(|b| format!(", memory {}", Bytes(b)))
            .unwrap_or_default(),
        a.cache_bytes
            .map(|b| format!(", app cache {}", Bytes(b)))
            .unwrap_or_default(),
        a.storage_limit_bytes_per_s
            .map(|b| format!(", storage {:.1} MB/s", b / 1e6))
            .unwrap_or_default(),
        if a.synthetic { ", synthetic input" } else { "" },
    );
    let t = &r.throughput;
    let _ = writeln!(
        o,
        "  throughput   {:.1} ± {:.1} samples/s (95% CI, ±{:.1}%)",
        t.samples_per_s,
        t.ci95_half_width,
        100.0 * t.rel_half_width()
    );
    let _ = writeln!(
        o,
        "  stopped      {} after {:.1} s ({} steps; warm-up {:.1} s, measured {:.1} s over {} steps)",
        r.stop_reason, r.duration_s, r.steps, t.warmup_s, t.measured_s, t.measured_steps
    );
    let tel = &r.telemetry;
    let _ = writeln!(
        o,
        "  cpu          {:.1} s total{}",
        tel.cpu_seconds,
        tel.cpu_cores_used
            .map(|c| format!(", {c:.2} cores busy while measured"))
            .unwrap_or_default()
    );
    if let Some(d) = &r.disturbance {
        let _ = writeln!(
            o,
            "  contention   got {:.2} of {} cores; other work used {:.2} cores of its cpuset{}{}",
            d.got_cores,
            d.granted_cores,
            d.other_cores,
            d.waited_cores
                .map(|w| format!("; its threads waited {w:.2} cores' worth"))
                .unwrap_or_default(),
            if d.disturbed { " (DISTURBED)" } else { "" }
        );
    }
    if let Some(b) = tel.storage_read_bytes {
        let _ = writeln!(
            o,
            "  storage      {} read{}",
            Bytes(b),
            tel.storage_read_bytes_per_s
                .map(|r| format!(", {:.1} MB/s while measured", r / 1e6))
                .unwrap_or_default()
        );
    }
    if let Some(c) = tel.page_cache_peak_bytes {
        let _ = writeln!(
            o,
            "  page cache   peak {}{}",
            Bytes(c),
            tel.memory_peak_bytes
                .map(|m| format!(
                    " (memory peak {}{})",
                    Bytes(m),
                    tel.resident_peak_bytes
                        .map(|r| format!(", {} besides page cache", Bytes(r)))
                        .unwrap_or_default()
                ))
                .unwrap_or_default()
        );
    }
    if let Some(c) = &tel.app_cache {
        let _ = writeln!(
            o,
            "  app cache    hit ratio {:.3} after warm-up ({} hits, {} misses)",
            c.hit_ratio(),
            c.hits,
            c.misses
        );
    }
    if let Some(g) = &tel.gpu {
        let _ = writeln!(
            o,
            "  gpu          {}: {:.0}% busy, {} peak memory, {:.0} MHz SM",
            g.devices.join(", "),
            g.utilization_pct,
            Bytes(g.memory_used_peak_bytes),
            g.sm_clock_mhz
        );
    }
    if let Some(d) = &r.dataset {
        let _ = writeln!(
            o,
            "  dataset      {} ({} files, {}, mean {:.1} KB; {:.0}% cached at start{})",
            d.path.display(),
            d.files,
            Bytes(d.bytes),
            d.mean_file_bytes / 1e3,
            100.0 * d.resident_fraction_at_start,
            if d.generated { "; generated now" } else { "" }
        );
    }
    if let Some(p) = &r.probe {
        // A spec whose ranks report by themselves has ranks but no probe.
        if p.torch.is_some() {
            let _ = writeln!(o, "  probe        {}", p.describe());
        }
        if !p.ranks.is_empty() {
            let _ = writeln!(o, "  ranks        {}", p.describe_ranks());
        }
    }
    let i = &r.isolation;
    let _ = writeln!(
        o,
        "  isolation    {}: setup {:.1} ms, teardown {:.1} ms",
        i.chosen_because, i.setup_ms, i.teardown_ms
    );
    if r.malformed_lines > 0 {
        let _ = writeln!(
            o,
            "  warning      {} progress lines did not follow the protocol",
            r.malformed_lines
        );
    }
    o
}

/// A profile for people: where it went, its model, the throughput matrix, demand and validation.
pub(super) fn render_profile(p: &Profile, out: &Path) -> String {
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

/// A run's report for people: one row per job, real JCT beside the predicted one.
pub(super) fn render_run(r: &RunReport) -> String {
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

/// What `profile refine` did: per allocation, observed against predicted before and after, and why.
pub(super) fn render_refinement(r: &crate::profile::refine::Refinement, out: &Path) -> String {
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

/// What `plot` wrote, on one line.
pub(super) fn render_written(w: &crate::plot::Written) -> String {
    format!(
        "{}: {} chart, {}x{} pixels, {} series ({})\n",
        w.path.display(),
        w.kind.name(),
        w.width,
        w.height,
        w.series.len(),
        w.series.join("; ")
    )
}

/// `predict`'s answer on one line: throughput, its ratio to proportional, and what limits it.
pub(super) fn render_prediction(
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

/// What an import kept, dropped and assumed, a few lines for stderr.
pub(super) fn render_import(s: &crate::import::ImportSummary, out: Option<&Path>) -> String {
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

/// A generated dataset on one line.
pub(super) fn render_manifest(dir: &Path, m: &crate::workload::dataset::DatasetManifest) -> String {
    format!(
        "{}: {} {} files, {} (mean {:.1} KB)\n",
        dir.display(),
        m.files,
        m.kind,
        m.total_bytes,
        m.mean_file_bytes / 1000.0
    )
}

/// A dataset's one-core rate: the rate, how it was measured, and where it is kept.
pub(super) fn render_rate(
    dir: &Path,
    pipeline: crate::workload::builtin::Pipeline,
    r: &crate::workload::builtin::rate::OneCoreRate,
) -> String {
    let m = &r.measurement;
    let when = if r.measured_now {
        "measured now".to_string()
    } else {
        format!("stored, measured at unix time {}", m.measured_unix_s)
    };
    let work = match r.key.seq_len {
        Some(n) => format!("{pipeline} pipeline, {n}-token sequences"),
        None => format!("{pipeline} pipeline"),
    };
    let mut o = format!(
        "{}: {:.1} samples per CPU-second on one core ({work}; {} samples in {:.3} CPU-s, {when})\n",
        dir.display(),
        m.samples_per_cpu_s,
        m.samples,
        m.cpu_s
    );
    match &r.not_kept {
        None => {
            let _ = writeln!(o, "  kept in {}", r.rate_file.display());
        }
        Some(why) => {
            let _ = writeln!(o, "  not kept: {why}");
        }
    }
    o
}

/// `simulate --jobs-list`'s predictions as JSON values, one per policy and mechanism: the shape both its
/// `--json` output and its table are read from.
pub(super) fn job_list_predictions(
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
pub(super) fn render_job_list(predictions: &[serde_json::Value], round_s: f64) -> String {
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

/// One value, or a list of several, as JSON: a single configuration prints as an object.
pub(super) fn json_one_or_many(mut values: Vec<serde_json::Value>) -> serde_json::Result<String> {
    if values.len() == 1 {
        json(&values.remove(0))
    } else {
        json(&values)
    }
}

/// One simulation of a sweep, as `simulate` reports it: the sweep point a run stands for, when the trace
/// was generated (a trace file has no load or seed).
pub(super) struct SimRun<'a> {
    /// The point it ran.
    pub(super) point: &'a crate::sim::sweep::Point,
    /// Its result.
    pub(super) result: &'a crate::sim::SimResult,
    /// The job-list seed the point used, for a generated trace.
    pub(super) job_list_seed: Option<u64>,
}

/// `simulate`'s summaries: as JSON (the sweep point beside each summary of a generated trace), one
/// summary's report, or a sweep's table.
pub(super) fn render_simulation(runs: &[SimRun<'_>], as_json: bool) -> serde_json::Result<String> {
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

/// `run --dry-run`'s plan for people: each round as the executor would start it.
pub(super) fn render_plan(rounds: &[crate::exec::executor::PlannedRound]) -> String {
    rounds.iter().map(|r| r.to_string()).collect()
}

/// `synergy slurm advisor --json`: the files written and the table in them.
#[derive(serde::Serialize)]
pub(super) struct AdvisorWritten<'a> {
    /// The script and the table, in that order.
    pub(super) written: &'a [std::path::PathBuf; 2],
    /// What the table holds.
    pub(super) table: &'a crate::advisor::Table,
}

/// `synergy slurm advisor --check --json`: the table checked and its problems.
#[derive(serde::Serialize)]
pub(super) struct AdvisorCheck<'a> {
    /// The table file.
    pub(super) table: &'a Path,
    /// No problems.
    pub(super) ok: bool,
    /// Each with its line and field.
    pub(super) problems: &'a [crate::advisor::Problem],
}

/// The advisor's table for people: the files, then what a one-GPU job of each profile gets per partition.
pub(super) fn render_advisor(
    t: &crate::advisor::Table,
    written: &[std::path::PathBuf; 2],
) -> String {
    let mut o = format!(
        "synergy: wrote {} and {} ({} profiles, {} partitions, {} sizes); install both beside slurm.conf (docs/slurm.md)\n",
        written[0].display(),
        written[1].display(),
        t.profiles.len(),
        t.partitions.len(),
        t.sizes.len()
    );
    o.push_str("profile       partition     1 GPU: cores        memory (MB)\n");
    for z in t.sizes.iter().filter(|z| z.gpus == 1) {
        o.push_str(&format!(
            "{:<13} {:<13} {:>5} {:<8}  {:>9} ({})\n",
            z.profile,
            z.partition,
            z.cpus,
            format!("({})", z.cpus_by.word()),
            z.memory_mb,
            z.memory_by.word()
        ));
    }
    o
}

/// A table that passed the check.
pub(super) fn render_advisor_check(table: &Path, text: &str) -> String {
    let sizes = text.lines().filter(|l| l.starts_with("size\t")).count();
    format!(
        "synergy: {} is good: {sizes} sizes, matching the cluster's partitions and the profiles\n",
        table.display()
    )
}
