//! The command line's names for the library's configuration settings: the library's errors carry a
//! [`Setting`], and once these names are installed every one of them prints as the flag users typed
//! (`--round`, `pass --profiles DIR`); docs/architecture.md §7.

use crate::error::{FrontEndNames, Setting};

/// The flag (or flags) that set each setting the library names in an error. The match is exhaustive: a
/// setting added to the library does not build until the command line names it.
fn flag(setting: Setting) -> &'static str {
    match setting {
        // A trial (`measure`): `TrialRequest` and its `EstimatorConfig`.
        Setting::Cpus => "--cpus",
        Setting::CpuList => "--cpu-list",
        Setting::MemLimit => "--mem",
        Setting::CacheBytes => "--cache-bytes",
        Setting::CacheStateWarm => "--warm",
        Setting::CacheStateCold => "--cold",
        Setting::StorageLimit => "--storage-bps",
        Setting::Isolation => "--isolation",
        Setting::WarmupEpochs => "--warmup-epochs",
        Setting::MaxTotalS => "--max-seconds",
        Setting::MinMeasureS => "--min-seconds",
        Setting::WarmupS => "--warmup-seconds",
        Setting::RelPrecision => "--precision",
        // A profile (`ProfileRequest`; its `cpus` is the trial's flag too).
        Setting::MemoryGib => "--mem",
        Setting::Gpus => "--gpus",
        Setting::Tolerance => "--tolerance",
        // Running jobs (`ExecConfig`, `LocalOptions`, `SlurmOptions`).
        Setting::RoundS => "--round",
        Setting::EmulatedGpus => "--gpus",
        Setting::Memory => "--mem",
        Setting::Nodes => "--node",
        Setting::Policy => "--policy",
        Setting::Resume => "--resume",
        Setting::Fresh => "--fresh",
        Setting::Mechanism => "--mechanism",
        // A simulation (`SimConfig`, `TraceSource`, `GenConfig`, the catalog's directory).
        Setting::Trace => "--trace",
        Setting::Window => "--window",
        Setting::Jobs => "--jobs",
        Setting::GpuModeMulti => "--multi-gpu",
        Setting::LoadJobsPerH => "--load",
        Setting::Split => "--split",
        Setting::Profiles => "--profiles",
        Setting::RecordRounds => "--out or --plot",
        Setting::Semantics => "--semantics",
        // Importing a trace (`import::ImportOptions`).
        Setting::LoadScale => "--load-scale",
        Setting::States => "--states",
        Setting::TimeWindow => "--from/--to",
        Setting::TraceFiles => "the FILE arguments",
        Setting::Models => "--map or --model",
        Setting::Cluster => "--cluster or --server-gpus",
        // Charts (`plot::Request`).
        Setting::Kind => "--kind",
        Setting::Width => "--width",
        Setting::Height => "--height",
        // Datasets and the built-in pipelines (`workload run`, `dataset gen`).
        Setting::GpuRate => "--gpu-rate",
        Setting::BatchSize => "--batch-size",
        Setting::Prefetch => "--prefetch",
        Setting::MaxSteps => "--max-steps",
        Setting::MaxSamples => "--max-samples",
        Setting::MaxSeconds => "--max-seconds",
        Setting::SeqLen => "--seq-len",
        Setting::Size => "--size",
    }
}

/// Has every setting the library prints read as the flag that sets it (`--round`, `pass --profiles DIR`):
/// called once, before the command runs.
pub(super) fn name_settings_as_flags() {
    crate::error::use_front_end_names(FrontEndNames {
        name: flag,
        verb: "pass",
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::InputError;

    #[test]
    fn settings_read_as_the_flags_that_set_them() {
        name_settings_as_flags();
        let e = InputError::setting(Setting::RoundS, "must be a positive number of seconds");
        assert_eq!(
            e.to_string(),
            "--round: must be a positive number of seconds"
        );
        let advice = format!(
            "holds no profile files (*.json); {}",
            Setting::Profiles.to("DIR")
        );
        assert_eq!(
            advice,
            "holds no profile files (*.json); pass --profiles DIR"
        );
        let nested = format!(
            "outer: {}",
            InputError::setting(Setting::CpuList, "3 cores").in_field("x")
        );
        assert_eq!(nested, "outer: --cpu-list: field `x`: 3 cores");
    }

    /// Every flag named here is one the command line has: a renamed flag would leave advice pointing at
    /// nothing.
    #[test]
    fn every_flag_named_is_one_the_command_line_takes() {
        use clap::CommandFactory;
        let mut longs = std::collections::BTreeSet::new();
        let mut stack = vec![super::super::args::Cli::command()];
        while let Some(cmd) = stack.pop() {
            longs.extend(
                cmd.get_arguments()
                    .filter_map(|a| a.get_long().map(|l| format!("--{l}"))),
            );
            stack.extend(cmd.get_subcommands().cloned());
        }
        for &s in Setting::ALL {
            for word in flag(s).split([' ', '/']).filter(|w| w.starts_with("--")) {
                assert!(
                    longs.contains(word),
                    "{s:?} names {word}, which no command takes"
                );
            }
        }
    }
}
