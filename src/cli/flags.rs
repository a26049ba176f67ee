//! The command line's names for the library's configuration settings: the library's errors speak of a
//! setting (`` setting `round_s` ``, `` set `profiles` to DIR ``), and everything the command line prints
//! from them passes through [`name_flags`], so users read the flag they typed (`--round`, `pass
//! --profiles DIR`); docs/architecture.md §7.

/// Each setting the library names in an error, and the flag (or flags) that set it.
const SETTING_FLAGS: &[(&str, &str)] = &[
    // A trial (`measure`): `TrialRequest` and its `EstimatorConfig`.
    ("cpus", "--cpus"),
    ("cpu_list", "--cpu-list"),
    ("mem_limit", "--mem"),
    ("cache_bytes", "--cache-bytes"),
    ("cache_state=warm", "--warm"),
    ("cache_state=cold", "--cold"),
    ("storage_limit", "--storage-bps"),
    ("isolation", "--isolation"),
    ("estimator.warmup_epochs", "--warmup-epochs"),
    ("estimator.max_total_s", "--max-seconds"),
    ("estimator.min_measure_s", "--min-seconds"),
    ("estimator.warmup_s", "--warmup-seconds"),
    ("estimator.rel_precision", "--precision"),
    // A profile (`ProfileRequest`; its `cpus` is the trial's flag too).
    ("memory_gib", "--mem"),
    ("gpus", "--gpus"),
    ("tolerance", "--tolerance"),
    // Running jobs (`ExecConfig`, `LocalOptions`, `SlurmOptions`).
    ("round_s", "--round"),
    ("emulated_gpus", "--gpus"),
    ("memory", "--mem"),
    ("nodes", "--node"),
    ("policy", "--policy"),
    ("resume", "--resume"),
    ("fresh", "--fresh"),
    ("mechanism", "--mechanism"),
    // A simulation (`SimConfig`, `TraceSource`, `GenConfig`, the catalog's directory).
    ("trace", "--trace"),
    ("window", "--window"),
    ("jobs", "--jobs"),
    ("gpu_mode=multi", "--multi-gpu"),
    ("load_jobs_per_h", "--load"),
    ("split", "--split"),
    ("profiles", "--profiles"),
    ("record_rounds", "--out or --plot"),
    ("semantics", "--semantics"),
    // Importing a trace (`import::ImportOptions`).
    ("load_scale", "--load-scale"),
    ("states", "--states"),
    ("time_window", "--from/--to"),
    ("trace_files", "the FILE arguments"),
    ("models", "--map or --model"),
    ("cluster", "--cluster or --server-gpus"),
    // Charts (`plot::Request`).
    ("kind", "--kind"),
    ("width", "--width"),
    ("height", "--height"),
    // Datasets and the built-in pipelines (`workload run`, `dataset gen`).
    ("gpu_rate", "--gpu-rate"),
    ("batch_size", "--batch-size"),
    ("prefetch", "--prefetch"),
    ("max_steps", "--max-steps"),
    ("max_samples", "--max-samples"),
    ("max_seconds", "--max-seconds"),
    ("seq_len", "--seq-len"),
    ("size", "--size"),
];

/// The flag that sets a setting, if the command line has one.
fn flag_of(setting: &str) -> Option<&'static str> {
    SETTING_FLAGS
        .iter()
        .find(|(s, _)| *s == setting)
        .map(|(_, flag)| *flag)
}

/// `text` with the library's settings named as flags: what users see of every library error.
pub(super) fn name_flags(text: &str) -> String {
    crate::error::name_settings(text, flag_of, |flag| format!("pass {flag}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::{InputError, Setting};

    #[test]
    fn settings_read_as_the_flags_that_set_them() {
        let e = InputError::setting("round_s", "must be a positive number of seconds");
        assert_eq!(
            name_flags(&e.to_string()),
            "--round: must be a positive number of seconds"
        );
        let advice = format!(
            "holds no profile files (*.json); {}",
            Setting("profiles").to("DIR")
        );
        assert_eq!(
            name_flags(&advice),
            "holds no profile files (*.json); pass --profiles DIR"
        );
        let nested = format!(
            "outer: {}",
            InputError::setting("cpu_list", "3 cores").in_field("x")
        );
        assert_eq!(name_flags(&nested), "outer: --cpu-list: field `x`: 3 cores");
    }

    /// Every setting the library's errors name has a flag here: a setting added without one would reach
    /// users in its neutral form.
    #[test]
    fn every_setting_the_library_names_has_a_flag() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        let mut files = vec![root.join("src"), root.join("crates")];
        let mut missing = Vec::new();
        while let Some(p) = files.pop() {
            if p.is_dir() {
                files.extend(std::fs::read_dir(&p).unwrap().map(|e| e.unwrap().path()));
                continue;
            }
            if p.extension().is_none_or(|e| e != "rs") || p.starts_with(src_cli()) {
                continue;
            }
            let text = std::fs::read_to_string(&p).unwrap();
            // Comments are not messages ("in dataset `dir`").
            let code: String = text
                .lines()
                .filter(|l| !l.trim_start().starts_with("//"))
                .collect::<Vec<_>>()
                .join("\n");
            for mark in ["InputError::setting(", "setting `", "set `", "Setting(\""] {
                for (i, _) in code.match_indices(mark) {
                    if code[..i]
                        .chars()
                        .next_back()
                        .is_some_and(|c| c.is_alphanumeric())
                    {
                        continue;
                    }
                    let rest = code[i + mark.len()..].trim_start();
                    let rest = rest.strip_prefix('"').unwrap_or(rest);
                    let end = rest.find(['"', '`']).unwrap_or(0);
                    let name = &rest[..end];
                    let plausible = !name.is_empty()
                        && name
                            .chars()
                            .all(|c| c.is_ascii_lowercase() || "_.=".contains(c));
                    if plausible
                        && flag_of(name).is_none()
                        && p.file_name() != Some("error.rs".as_ref())
                    {
                        missing.push(format!("{}: {name}", p.display()));
                    }
                }
            }
        }
        assert!(missing.is_empty(), "settings without a flag: {missing:?}");
    }

    fn src_cli() -> std::path::PathBuf {
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/cli")
    }
}
