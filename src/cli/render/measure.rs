//! What `synergy measure` prints: one trial.

use super::*;

/// A trial's result for people: allocation, throughput with its interval, and what was observed.
pub(in crate::cli) fn render_trial(r: &TrialResult) -> String {
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
