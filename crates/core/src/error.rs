//! The error a user fixes by changing their input: it names the file, or the configuration setting, and
//! the field at fault.
//!
//! The library names settings by their configuration field (`round_s`), never by a command-line flag: an
//! error carries the [`Setting`] itself, and a front end that has its own names for them installs those
//! once ([`use_front_end_names`]) so that every setting prints in them (docs/architecture.md §7).

use std::fmt;
use std::sync::OnceLock;

/// Declares [`Setting`] with each variant's configuration field name, in one list.
macro_rules! settings {
    ($($(#[$doc:meta])* $variant:ident = $field:literal,)*) => {
        /// A setting of a configuration the library takes (`round_s`, `cpu_list`, `estimator.max_total_s`);
        /// a value in the name (`cache_state=warm`) when one choice of it is at fault.
        ///
        /// In a message it reads `` setting `round_s` ``, and advice to change it ([`Setting::to`]) reads
        /// `` set `profiles` to DIR ``, unless a front end installed its own names.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum Setting {
            $($(#[$doc])* $variant,)*
        }

        impl Setting {
            /// Every setting, in declaration order.
            pub const ALL: &'static [Setting] = &[$(Setting::$variant,)*];

            /// The setting's name, as configurations spell it.
            pub fn name(self) -> &'static str {
                match self {
                    $(Setting::$variant => $field,)*
                }
            }
        }
    };
}

settings! {
    /// A trial's or a profile's cores.
    Cpus = "cpus",
    /// The cores a trial is pinned to.
    CpuList = "cpu_list",
    /// A trial's memory limit.
    MemLimit = "mem_limit",
    /// The dataset bytes a trial keeps in the page cache.
    CacheBytes = "cache_bytes",
    /// A trial that starts with its dataset cached.
    CacheStateWarm = "cache_state=warm",
    /// A trial that starts with its dataset out of the page cache.
    CacheStateCold = "cache_state=cold",
    /// A trial's storage bandwidth limit.
    StorageLimit = "storage_limit",
    /// The isolation backend.
    Isolation = "isolation",
    /// The epochs a trial runs before it measures.
    WarmupEpochs = "estimator.warmup_epochs",
    /// The most seconds a trial runs.
    MaxTotalS = "estimator.max_total_s",
    /// The fewest seconds a trial measures.
    MinMeasureS = "estimator.min_measure_s",
    /// The seconds a trial runs before it measures.
    WarmupS = "estimator.warmup_s",
    /// The relative precision a trial measures to.
    RelPrecision = "estimator.rel_precision",
    /// A profile's memory axis.
    MemoryGib = "memory_gib",
    /// A job's GPUs.
    Gpus = "gpus",
    /// The refinement's tolerance.
    Tolerance = "tolerance",
    /// The scheduling round's length.
    RoundS = "round_s",
    /// The GPUs a host without them emulates.
    EmulatedGpus = "emulated_gpus",
    /// The memory a host lends to jobs.
    Memory = "memory",
    /// The nodes a Slurm run uses.
    Nodes = "nodes",
    /// The scheduling policy.
    Policy = "policy",
    /// Resuming a run from its state file.
    Resume = "resume",
    /// Starting a run over its state file.
    Fresh = "fresh",
    /// The allocation mechanism.
    Mechanism = "mechanism",
    /// A trace file.
    Trace = "trace",
    /// The window of a trace that is simulated.
    Window = "window",
    /// The number of generated jobs.
    Jobs = "jobs",
    /// Multi-GPU jobs.
    GpuModeMulti = "gpu_mode=multi",
    /// A generated trace's load.
    LoadJobsPerH = "load_jobs_per_h",
    /// A generated trace's workload split.
    Split = "split",
    /// The directory of profile files.
    Profiles = "profiles",
    /// Keeping every round's allocations.
    RecordRounds = "record_rounds",
    /// The round semantics.
    Semantics = "semantics",
    /// An imported trace's load scale.
    LoadScale = "load_scale",
    /// The job states an import keeps.
    States = "states",
    /// The time window an import keeps.
    TimeWindow = "time_window",
    /// The files an import reads.
    TraceFiles = "trace_files",
    /// The models an import assigns to jobs.
    Models = "models",
    /// The cluster an imported trace runs on.
    Cluster = "cluster",
    /// A chart's kind.
    Kind = "kind",
    /// A chart's width.
    Width = "width",
    /// A chart's height.
    Height = "height",
    /// A built-in pipeline's GPU rate.
    GpuRate = "gpu_rate",
    /// A built-in pipeline's batch size.
    BatchSize = "batch_size",
    /// A built-in pipeline's batches in flight per worker.
    Prefetch = "prefetch",
    /// A built-in pipeline's most steps.
    MaxSteps = "max_steps",
    /// A built-in pipeline's most samples.
    MaxSamples = "max_samples",
    /// A built-in pipeline's most seconds.
    MaxSeconds = "max_seconds",
    /// A text pipeline's sequence length.
    SeqLen = "seq_len",
    /// A generated dataset's size.
    Size = "size",
}

/// How a front end names the settings it takes, installed once with [`use_front_end_names`].
#[derive(Debug, Clone, Copy)]
pub struct FrontEndNames {
    /// The front end's name for each setting (`--round`).
    pub name: fn(Setting) -> &'static str,
    /// The word that asks for a value (`pass`), printed before the name and the value.
    pub verb: &'static str,
}

static FRONT_END_NAMES: OnceLock<FrontEndNames> = OnceLock::new();

/// Has every [`Setting`] print in `names` from now on, in every thread: a front end calls it once, before it
/// calls the library. A second call is ignored (the first front end's names stay).
pub fn use_front_end_names(names: FrontEndNames) {
    let _ = FRONT_END_NAMES.set(names);
}

impl Setting {
    /// Advice to give the setting a value: `` set `profiles` to DIR ``.
    pub fn to(self, value: &'static str) -> SetTo {
        SetTo {
            setting: self,
            value,
        }
    }
}

impl fmt::Display for Setting {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match FRONT_END_NAMES.get() {
            Some(names) => f.write_str((names.name)(*self)),
            None => write!(f, "setting `{}`", self.name()),
        }
    }
}

/// Advice to give a setting a value (what to type in its place), from [`Setting::to`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SetTo {
    /// The setting.
    pub setting: Setting,
    /// A placeholder for the value (`DIR`, `N`).
    pub value: &'static str,
}

impl fmt::Display for SetTo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match FRONT_END_NAMES.get() {
            Some(names) => write!(
                f,
                "{} {} {}",
                names.verb,
                (names.name)(self.setting),
                self.value
            ),
            None => write!(f, "set `{}` to {}", self.setting.name(), self.value),
        }
    }
}

/// What an [`InputError`] is about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    /// A file or directory by its path, or another input by its name (`workloads/image.toml`, `image`).
    Input(String),
    /// A setting of a configuration the library was given.
    Setting(Setting),
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Origin::Input(s) => f.write_str(s),
            Origin::Setting(s) => s.fmt(f),
        }
    }
}

impl PartialEq<&str> for Origin {
    fn eq(&self, other: &&str) -> bool {
        matches!(self, Origin::Input(s) if s == other)
    }
}

/// Bad input: a malformed or impossible spec, setting, dataset or budget. The CLI exits with code 2 for
/// these.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InputError {
    /// The file path or input (`workloads/image.toml`), or the setting (`cpus`), the problem is in.
    pub origin: Origin,
    /// The field inside the file, when there is one (`dataset.path`).
    pub field: Option<String>,
    /// What is wrong and what to do about it.
    pub message: String,
}

impl InputError {
    /// A problem with a whole file or other named input.
    pub fn new(origin: impl Into<String>, message: impl Into<String>) -> Self {
        InputError {
            origin: Origin::Input(origin.into()),
            field: None,
            message: message.into(),
        }
    }

    /// A problem with one field of a file.
    pub fn field(
        origin: impl Into<String>,
        field: impl Into<String>,
        message: impl Into<String>,
    ) -> Self {
        InputError {
            field: Some(field.into()),
            ..InputError::new(origin, message)
        }
    }

    /// A problem with the value of a configuration setting, by its field name (`round_s`).
    pub fn setting(setting: Setting, message: impl Into<String>) -> Self {
        InputError {
            origin: Origin::Setting(setting),
            field: None,
            message: message.into(),
        }
    }

    /// The same problem, narrowed to one field of what the origin holds (a trace's `gpus` column).
    pub fn in_field(self, field: impl Into<String>) -> Self {
        InputError {
            field: Some(field.into()),
            ..self
        }
    }
}

impl InputError {
    /// A TOML file that does not parse (or does not match its schema), with the line the parser points at.
    pub fn toml(origin: impl Into<String>, text: &str, e: &toml::de::Error) -> Self {
        let msg = e.message();
        match e.span() {
            Some(span) => {
                let line = text[..span.start.min(text.len())].matches('\n').count() + 1;
                InputError::new(origin, format!("line {line}: {msg}"))
            }
            None => InputError::new(origin, msg),
        }
    }
}

impl fmt::Display for InputError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.field {
            Some(field) => write!(f, "{}: field `{}`: {}", self.origin, field, self.message),
            None => write!(f, "{}: {}", self.origin, self.message),
        }
    }
}

impl std::error::Error for InputError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn toml_errors_name_the_line() {
        let text = "a = 1\nb = = 2\n";
        let e = toml::from_str::<toml::Table>(text).unwrap_err();
        let err = InputError::toml("f.toml", text, &e);
        assert_eq!(err.origin, "f.toml");
        assert!(err.message.starts_with("line 2: "), "{}", err.message);
    }

    #[test]
    fn settings_read_neutrally_without_a_front_end() {
        let err = InputError::setting(
            Setting::RoundS,
            format!(
                "{} is unset; {}",
                Setting::Jobs,
                Setting::Profiles.to("DIR")
            ),
        );
        assert_eq!(
            err.to_string(),
            "setting `round_s`: setting `jobs` is unset; set `profiles` to DIR"
        );
        assert_eq!(err.origin, Origin::Setting(Setting::RoundS));
    }

    #[test]
    fn every_setting_has_its_own_name() {
        let mut names: Vec<_> = Setting::ALL.iter().map(|s| s.name()).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), Setting::ALL.len());
    }
}
