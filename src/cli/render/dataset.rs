//! What `synergy dataset` prints: a dataset's manifest and its one-core rate.

use super::*;

/// A generated dataset on one line.
pub(in crate::cli) fn render_manifest(
    dir: &Path,
    m: &crate::format::dataset::DatasetManifest,
) -> String {
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
pub(in crate::cli) fn render_rate(
    dir: &Path,
    pipeline: crate::format::rate::Pipeline,
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
