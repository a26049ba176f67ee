//! The workload spec (`workloads/*.toml`): how to launch a workload, where its dataset is and how to make
//! it, how its progress is read. The same spec drives `measure`, `profile` and `run`.

use crate::error::InputError;
use crate::units::{parse_bytes, Bytes};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::probe::ProbeKind;
use crate::format::dataset::DatasetKind;

/// The specs of the built-in workloads, embedded so the binary works without the repository.
pub const BUILTIN: [(&str, &str); 3] = [
    ("image", include_str!("../../../../workloads/image.toml")),
    ("audio", include_str!("../../../../workloads/audio.toml")),
    ("text", include_str!("../../../../workloads/text.toml")),
];

/// A parsed, validated workload spec.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkloadSpec {
    /// Short name, used for profile file names.
    pub name: String,
    /// One line for people.
    #[serde(default)]
    pub description: String,
    /// The command and its arguments, with `{placeholders}` (see [`Placeholders`]).
    pub command: Vec<String>,
    /// Samples per training step.
    pub batch_size: u32,
    /// GPUs the workload trains on.
    #[serde(default = "one")]
    pub gpus: u32,
    /// The least memory this workload can run in, e.g. `"1GiB"`: a floor that `measure --mem` may not go
    /// below. Optional; what a workload really uses besides its cache is measured (a profile's footprint).
    #[serde(
        default,
        with = "opt_bytes_str",
        skip_serializing_if = "Option::is_none"
    )]
    pub footprint: Option<Bytes>,
    /// Which cache serves the dataset: the OS page cache, or the workload's own (`SYNERGY_CACHE_BYTES`).
    #[serde(default)]
    pub cache: CacheKind,
    /// The dataset, when the workload reads one.
    #[serde(default)]
    pub dataset: Option<DatasetSpec>,
    /// How progress is read.
    #[serde(default)]
    pub progress: ProgressSpec,
    /// Extra environment for the command (values may use placeholders).
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// A zero-change probe to inject (`"pytorch"`): progress then comes from the probe on the pipe.
    #[serde(default)]
    pub probe: Option<ProbeKind>,
    /// A launcher that starts the command once per GPU as one distributed job (`"torchrun"`): the
    /// command is then one rank's (docs/workload-spec.md, "Distributed jobs").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub launcher: Option<LauncherKind>,
    /// Where the spec came from (a file path, or `builtin:NAME`); not part of the file.
    #[serde(skip)]
    pub origin: String,
    /// Directory that relative paths resolve against; not part of the file.
    #[serde(skip)]
    pub base_dir: PathBuf,
}

fn one() -> u32 {
    1
}

/// A launcher of a distributed job's ranks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum LauncherKind {
    /// PyTorch's `torchrun` (`python -m torch.distributed.run`, with `{python}`): one process per GPU on
    /// each node, the nodes of a job over several meeting at the first node's address.
    Torchrun,
}

/// Which cache holds the dataset between epochs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CacheKind {
    /// The kernel page cache (bounded by a cgroup memory limit).
    #[default]
    PageCache,
    /// An application-level cache that keeps a fixed subset and never evicts (MinIO).
    App,
}

/// Where the dataset lives and how to make it when it does not exist.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DatasetSpec {
    /// Directory of the dataset; placeholders allowed; relative to the spec's directory.
    pub path: String,
    /// How to generate it when absent.
    #[serde(default)]
    pub generate: Option<GenerateSpec>,
}

/// Arguments for `synergy dataset gen`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GenerateSpec {
    /// Kind of data.
    pub kind: DatasetKind,
    /// Total size, e.g. `"256MiB"`.
    #[serde(with = "bytes_str")]
    pub size: Bytes,
    /// Seed (datasets are deterministic).
    #[serde(default = "one_u64")]
    pub seed: u64,
}

fn one_u64() -> u64 {
    1
}

/// How the workload reports progress.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(tag = "source", rename_all = "kebab-case", deny_unknown_fields)]
pub enum ProgressSpec {
    /// JSON lines on the pipe named by `SYNERGY_PROGRESS_FD` (docs/architecture.md §3.2).
    #[default]
    Pipe,
    /// A regular expression over the workload's output. It must have one named group: `samples` (samples
    /// in this step), `total` (samples so far) or `rate` (samples per second, or steps per second times
    /// `per_match`).
    Regex {
        /// The expression.
        pattern: String,
        /// Which stream to read.
        #[serde(default)]
        stream: Stream,
        /// Multiplier for the captured number (e.g. the batch size when the number counts steps).
        #[serde(default = "one_f64")]
        scale: f64,
    },
}

fn one_f64() -> f64 {
    1.0
}

/// An output stream of the workload.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Stream {
    /// Standard output.
    #[default]
    Stdout,
    /// Standard error.
    Stderr,
}

/// Values substituted for `{name}` in the command, environment and dataset path.
#[derive(Debug, Clone, Default)]
pub struct Placeholders {
    /// Pairs of placeholder name and value.
    pub values: BTreeMap<&'static str, String>,
}

impl Placeholders {
    /// The placeholders every spec may use before a trial's budget is known.
    pub fn base(spec: &WorkloadSpec) -> Self {
        let mut values = BTreeMap::new();
        let exe = std::env::current_exe()
            .map(|p| p.display().to_string())
            .unwrap_or_else(|_| "synergy".into());
        values.insert("synergy", exe);
        values.insert("python", python());
        values.insert("data_dir", data_dir().display().to_string());
        values.insert("spec_dir", spec.base_dir.display().to_string());
        values.insert("batch_size", spec.batch_size.to_string());
        values.insert("gpus", spec.gpus.to_string());
        values.insert(
            "rank_batch_size",
            spec.rank_batch_size(spec.gpus).to_string(),
        );
        Placeholders { values }
    }

    /// Substitutes every `{name}` in `text`; `field` names where the text came from, for errors.
    ///
    /// Only `{identifier}` is a placeholder, so JSON and shell braces pass through (`{"samples": 1}`,
    /// `${HOME}`);
    /// `{{` and `}}` write a literal brace where an identifier would otherwise be taken for one.
    pub fn expand(&self, text: &str, origin: &str, field: &str) -> Result<String, InputError> {
        let mut out = String::with_capacity(text.len());
        let mut rest = text;
        while let Some(open) = rest.find(['{', '}']) {
            out.push_str(&rest[..open]);
            let tail = &rest[open..];
            if tail.starts_with("{{") || tail.starts_with("}}") {
                out.push_str(&tail[..1]);
                rest = &tail[2..];
                continue;
            }
            if let Some(after) = tail.strip_prefix('}') {
                out.push('}');
                rest = after;
                continue;
            }
            let name_len = tail[1..]
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .unwrap_or(tail.len() - 1);
            let name = &tail[1..1 + name_len];
            let shell_variable = out.ends_with('$');
            if shell_variable || name.is_empty() || !tail[1 + name_len..].starts_with('}') {
                out.push('{');
                rest = &tail[1..];
                continue;
            }
            let value = self.values.get(name).ok_or_else(|| {
                let known: Vec<_> = self.values.keys().map(|k| format!("{{{k}}}")).collect();
                InputError::field(
                    origin,
                    field,
                    format!(
                        "unknown placeholder `{{{name}}}`; known: {} (write `{{{{` for a literal brace)",
                        known.join(", ")
                    ),
                )
            })?;
            out.push_str(value);
            rest = &tail[name_len + 2..];
        }
        out.push_str(rest);
        Ok(out)
    }
}

/// The Python interpreter for `{python}`: `$SYNERGY_PYTHON`, else `python3`.
pub fn python() -> String {
    std::env::var("SYNERGY_PYTHON")
        .ok()
        .filter(|p| !p.trim().is_empty())
        .unwrap_or_else(|| "python3".into())
}

/// Where datasets of specs that use `{data_dir}` live: `$SYNERGY_DATA_DIR`, else the user's cache directory.
pub fn data_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("SYNERGY_DATA_DIR") {
        return PathBuf::from(d);
    }
    let cache = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .unwrap_or_else(std::env::temp_dir);
    cache.join("synergy").join("datasets")
}

impl WorkloadSpec {
    /// Parses and validates spec text; `origin` names it in errors.
    pub fn parse(text: &str, origin: &str, base_dir: &Path) -> Result<Self, InputError> {
        let mut spec: WorkloadSpec =
            toml::from_str(text).map_err(|e| InputError::toml(origin, text, &e))?;
        spec.origin = origin.to_string();
        spec.base_dir = base_dir.to_path_buf();
        spec.validate()?;
        Ok(spec)
    }

    /// Loads a spec from a file, or a built-in one by name (`image`, `audio`, `text`) when no such file
    /// exists.
    pub fn load(arg: &str) -> Result<Self, InputError> {
        let path = Path::new(arg);
        // Anything at the path (a link too, even one that leads nowhere) is the user's file, refused by
        // the reader when it is not a spec.
        if path.symlink_metadata().is_ok() {
            let text = crate::input::read_text(path, crate::input::SPEC).map_err(|e| match e {
                crate::input::ReadError::Input(i) => i,
                crate::input::ReadError::Io(e) => {
                    InputError::new(arg, format!("cannot read the spec: {e}"))
                }
            })?;
            let base = path
                .parent()
                .filter(|p| !p.as_os_str().is_empty())
                .map(Path::to_path_buf)
                .unwrap_or_else(|| PathBuf::from("."));
            return Self::parse(&text, arg, &base);
        }
        Self::builtin(arg).unwrap_or_else(|| {
            Err(InputError::new(
                arg,
                format!(
                    "no such spec file, and not a built-in workload ({})",
                    Self::builtin_names()
                ),
            ))
        })
    }

    /// The built-in spec named `name` (`image`, or `builtin:image`), if there is one; its relative paths
    /// resolve against the current directory.
    pub fn builtin(name: &str) -> Option<Result<Self, InputError>> {
        let name = name.strip_prefix("builtin:").unwrap_or(name);
        let (_, text) = BUILTIN.iter().find(|(n, _)| *n == name)?;
        let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
        Some(Self::parse(text, &format!("builtin:{name}"), &cwd))
    }

    /// The built-in workloads' names, for messages: `image, audio, text`.
    pub fn builtin_names() -> String {
        BUILTIN.map(|(n, _)| n).join(", ")
    }

    /// Each rank's samples per step when the job runs on `gpus` GPUs: a spec with a `launcher` divides
    /// its `batch_size` (the job's step) among its ranks, one per GPU; any other spec is one process.
    pub fn rank_batch_size(&self, gpus: u32) -> u32 {
        match self.launcher {
            Some(_) => self.batch_size / gpus.max(1),
            None => self.batch_size,
        }
    }

    /// Whether the job can run on `gpus` GPUs: a spec with a `launcher` needs a `batch_size` that its
    /// ranks share evenly. Says why not.
    pub fn check_ranks(&self, gpus: u32) -> Result<(), String> {
        if self.launcher.is_some() && (gpus == 0 || self.batch_size % gpus != 0) {
            return Err(format!(
                "{} samples per step do not divide among {gpus} ranks (one per GPU) of a `launcher` job: make it a multiple of {gpus}",
                self.batch_size
            ));
        }
        Ok(())
    }

    /// A spec for a bare command (`synergy measure --probe pytorch -- python train.py ...`): named after
    /// its script, no dataset, progress on the pipe. Its batch size is unknown, so it is recorded as 1;
    /// samples are still counted per batch by the workload or its probe.
    pub fn from_command(argv: &[String], probe: Option<ProbeKind>) -> Result<Self, InputError> {
        let origin = "command line";
        let script = argv
            .iter()
            .find(|a| a.ends_with(".py"))
            .or_else(|| argv.first())
            .ok_or_else(|| InputError::new(origin, "no command after `--`"))?;
        let name = Path::new(script)
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .filter(|s| !s.is_empty())
            .unwrap_or_else(|| "command".into());
        // Braces in a user's arguments are theirs, not placeholders.
        let command = argv
            .iter()
            .map(|a| a.replace('{', "{{").replace('}', "}}"))
            .collect();
        let spec = WorkloadSpec {
            name,
            description: format!("the command `{}`", argv.join(" ")),
            command,
            batch_size: 1,
            gpus: 1,
            footprint: None,
            cache: CacheKind::PageCache,
            dataset: None,
            progress: ProgressSpec::Pipe,
            env: BTreeMap::new(),
            probe,
            launcher: None,
            origin: origin.into(),
            base_dir: std::env::current_dir().unwrap_or_else(|_| PathBuf::from(".")),
        };
        spec.validate()?;
        Ok(spec)
    }

    fn validate(&self) -> Result<(), InputError> {
        let o = self.origin.as_str();
        if self.name.trim().is_empty() {
            return Err(InputError::field(o, "name", "must not be empty"));
        }
        if self.command.is_empty() || self.command[0].trim().is_empty() {
            return Err(InputError::field(
                o,
                "command",
                "must name a program, e.g. [\"python\", \"train.py\"]",
            ));
        }
        if self.batch_size == 0 {
            return Err(InputError::field(o, "batch_size", "must be at least 1"));
        }
        if self.gpus == 0 {
            return Err(InputError::field(o, "gpus", "must be at least 1"));
        }
        self.check_ranks(self.gpus)
            .map_err(|m| InputError::field(o, "batch_size", m))?;
        if let Some(g) = self.dataset.as_ref().and_then(|d| d.generate.as_ref()) {
            if g.size.0 == 0 {
                return Err(InputError::field(
                    o,
                    "dataset.generate.size",
                    "must be more than 0 bytes",
                ));
            }
        }
        if self.probe.is_some() && !matches!(self.progress, ProgressSpec::Pipe) {
            return Err(InputError::field(
                o,
                "probe",
                "a probe reports progress on the pipe; remove `[progress]` or set `source = \"pipe\"`",
            ));
        }
        if let ProgressSpec::Regex { pattern, scale, .. } = &self.progress {
            let re = regex::Regex::new(pattern).map_err(|e| {
                InputError::field(
                    o,
                    "progress.pattern",
                    format!("not a regular expression: {e}"),
                )
            })?;
            let groups: Vec<_> = re.capture_names().flatten().collect();
            if !groups
                .iter()
                .any(|g| matches!(*g, "samples" | "total" | "rate"))
            {
                return Err(InputError::field(
                    o,
                    "progress.pattern",
                    "needs a named group `samples`, `total` or `rate`, e.g. (?P<rate>[0-9.]+)it/s",
                ));
            }
            if !(scale.is_finite() && *scale > 0.0) {
                return Err(InputError::field(o, "progress.scale", "must be positive"));
            }
        }
        // Catch unknown placeholders now rather than at launch.
        let mut ph = Placeholders::base(self);
        ph.values.insert("dataset", String::new());
        ph.values.insert("cpus", String::new());
        ph.values.insert("threads", String::new());
        ph.values.insert("cache_bytes", String::new());
        for (i, arg) in self.command.iter().enumerate() {
            ph.expand(arg, o, &format!("command[{i}]"))?;
        }
        for (k, v) in &self.env {
            ph.expand(v, o, &format!("env.{k}"))?;
        }
        if let Some(ds) = &self.dataset {
            Placeholders::base(self).expand(&ds.path, o, "dataset.path")?;
        }
        Ok(())
    }

    /// Makes `dir` (an existing directory, of files) this workload's dataset, replacing the spec's own:
    /// a dataset found by a probe, or named on the command line. Returns why not, in words.
    pub fn set_dataset_dir(&mut self, dir: &Path) -> Result<(), String> {
        let abs = if dir.is_absolute() {
            dir.to_path_buf()
        } else {
            self.base_dir.join(dir)
        };
        if !abs.is_dir() {
            return Err(format!("`{}` is not a directory", abs.display()));
        }
        // Braces in a path are the path's, not placeholders.
        let path = abs
            .display()
            .to_string()
            .replace('{', "{{")
            .replace('}', "}}");
        self.dataset = Some(DatasetSpec {
            path,
            generate: None,
        });
        Ok(())
    }

    /// Whether the workload's processes and loader pool are the same at any cores it is given, so one
    /// launch re-budgeted in place measures what a launch at each budget would (docs/profile-format.md,
    /// "The CPU sweep in one launch"). True for a probed script that sizes nothing from its budget: the
    /// probe is not told to set the loader's workers, no `{cpus}` or `{threads}` reaches its command or
    /// environment, and no launcher starts ranks that share the cores. A script that reads
    /// `SYNERGY_CPUS` itself cannot be told apart; `profile --fresh-trials` is for it.
    pub fn pool_is_fixed(&self) -> bool {
        let sized = |text: &str| text.contains("{cpus}") || text.contains("{threads}");
        self.probe.is_some()
            && self.launcher.is_none()
            && self
                .env
                .get(super::probe::SET_WORKERS_ENV)
                .map(String::as_str)
                != Some("1")
            && !self.command.iter().any(|a| sized(a))
            && !self.env.values().any(|v| sized(v))
    }

    /// The dataset directory with placeholders expanded and relative paths resolved.
    pub fn dataset_dir(&self) -> Result<Option<PathBuf>, InputError> {
        let Some(ds) = &self.dataset else {
            return Ok(None);
        };
        let expanded = Placeholders::base(self).expand(&ds.path, &self.origin, "dataset.path")?;
        let p = PathBuf::from(expanded);
        Ok(Some(if p.is_absolute() {
            p
        } else {
            self.base_dir.join(p)
        }))
    }
}

/// Serde helpers for sizes written as strings (`"256MiB"`) or plain integers.
mod bytes_str {
    use super::*;
    use serde::Deserializer;

    pub fn serialize<S: serde::Serializer>(b: &Bytes, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&format!("{}B", b.0))
    }

    /// A visitor rather than an untagged enum: a value of neither form is then refused with what a size
    /// looks like, not serde's "did not match any variant of untagged enum".
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Bytes, D::Error> {
        struct Size;
        impl serde::de::Visitor<'_> for Size {
            type Value = Bytes;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a size such as \"256MiB\" or a whole number of bytes")
            }
            fn visit_u64<E: serde::de::Error>(self, n: u64) -> Result<Bytes, E> {
                Ok(Bytes(n))
            }
            fn visit_i64<E: serde::de::Error>(self, n: i64) -> Result<Bytes, E> {
                u64::try_from(n)
                    .map(Bytes)
                    .map_err(|_| E::custom(format!("{n} bytes: a size cannot be negative")))
            }
            fn visit_str<E: serde::de::Error>(self, t: &str) -> Result<Bytes, E> {
                parse_bytes(t).map(Bytes).map_err(E::custom)
            }
        }
        d.deserialize_any(Size)
    }
}

/// [`bytes_str`] for an optional size.
mod opt_bytes_str {
    use super::*;
    use serde::Deserializer;

    pub fn serialize<S: serde::Serializer>(b: &Option<Bytes>, s: S) -> Result<S::Ok, S::Error> {
        match b {
            Some(b) => bytes_str::serialize(b, s),
            None => s.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Bytes>, D::Error> {
        bytes_str::deserialize(d).map(Some)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_specs_parse() {
        for (name, _) in BUILTIN {
            let spec = WorkloadSpec::load(name).unwrap();
            assert_eq!(spec.name, name);
        }
    }

    #[test]
    fn only_a_probed_script_that_sizes_nothing_from_its_cores_keeps_its_pool_in_place() {
        let argv: Vec<String> = ["python3", "train.py", "-j", "2", "/data"]
            .map(String::from)
            .to_vec();
        let probed = WorkloadSpec::from_command(&argv, Some(ProbeKind::Pytorch)).unwrap();
        assert!(probed.pool_is_fixed());
        assert!(!WorkloadSpec::from_command(&argv, None)
            .unwrap()
            .pool_is_fixed());
        let mut told = probed.clone();
        told.env
            .insert(crate::workload::probe::SET_WORKERS_ENV.into(), "1".into());
        assert!(!told.pool_is_fixed(), "the probe sets the workers");
        let mut sized = probed.clone();
        sized.command.push("--workers={threads}".into());
        assert!(!sized.pool_is_fixed(), "{{threads}} in the command");
        let mut ranks = probed;
        ranks.launcher = Some(LauncherKind::Torchrun);
        assert!(!ranks.pool_is_fixed(), "a launcher's ranks share the cores");
        for (name, _) in BUILTIN {
            assert!(!WorkloadSpec::load(name).unwrap().pool_is_fixed(), "{name}");
        }
    }

    #[test]
    fn the_footprint_is_an_optional_floor() {
        for (name, _) in BUILTIN {
            assert_eq!(WorkloadSpec::load(name).unwrap().footprint, None, "{name}");
        }
        let text = "name='x'\ncommand=['true']\nbatch_size=1\nfootprint='1MiB'\n";
        let spec = WorkloadSpec::parse(text, "x.toml", Path::new(".")).unwrap();
        assert_eq!(spec.footprint, Some(Bytes(1 << 20)));
        let bad = text.replace("'1MiB'", "'lots'");
        assert!(WorkloadSpec::parse(&bad, "x.toml", Path::new(".")).is_err());
    }

    #[test]
    fn unknown_field_is_named() {
        let text = "name='x'\ncommand=['true']\nbatch_size=1\nfootprint='1MiB'\nbogus=3\n";
        let err = WorkloadSpec::parse(text, "x.toml", Path::new(".")).unwrap_err();
        assert_eq!(err.origin, "x.toml");
        assert!(err.message.contains("bogus"), "{err}");
        assert!(err.message.contains("line 5"), "{err}");
    }

    #[test]
    fn unknown_placeholder_is_named() {
        let text = "name='x'\ncommand=['run', '{nope}']\nbatch_size=1\nfootprint='1MiB'\n";
        let err = WorkloadSpec::parse(text, "x.toml", Path::new(".")).unwrap_err();
        assert_eq!(err.field.as_deref(), Some("command[1]"));
    }

    #[test]
    fn only_identifiers_in_braces_are_placeholders() {
        let mut ph = Placeholders::default();
        ph.values.insert("cpus", "2".into());
        let e = |t: &str| ph.expand(t, "o", "f");
        assert_eq!(e("n={cpus}").unwrap(), "n=2");
        assert_eq!(
            e(r#"echo '{"samples": 1}'"#).unwrap(),
            r#"echo '{"samples": 1}'"#
        );
        assert_eq!(e("{{cpus}} {cpus}").unwrap(), "{cpus} 2");
        assert_eq!(e("${HOME} {").unwrap(), "${HOME} {");
        assert!(e("{cpu}").is_err());
    }

    #[test]
    fn a_bare_command_becomes_a_spec() {
        let argv: Vec<String> = ["python3", "/x/train.py", "--cfg", "{\"a\": 1}"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let spec = WorkloadSpec::from_command(&argv, Some(ProbeKind::Pytorch)).unwrap();
        assert_eq!(spec.name, "train");
        let ph = Placeholders::base(&spec);
        let expanded: Vec<String> = spec
            .command
            .iter()
            .map(|a| ph.expand(a, "o", "f").unwrap())
            .collect();
        assert_eq!(expanded, argv);
        assert!(WorkloadSpec::from_command(&[], None).is_err());
    }

    #[test]
    fn a_probe_needs_the_pipe() {
        let ok = "name='x'\ncommand=['{python}', 't.py']\nbatch_size=1\nfootprint='1MiB'\nprobe='pytorch'\n";
        let spec = WorkloadSpec::parse(ok, "x.toml", Path::new(".")).unwrap();
        assert_eq!(spec.probe, Some(ProbeKind::Pytorch));
        let bad = format!("{ok}[progress]\nsource='regex'\npattern='(?P<rate>[0-9.]+)it/s'\n");
        let err = WorkloadSpec::parse(&bad, "x.toml", Path::new(".")).unwrap_err();
        assert_eq!(err.field.as_deref(), Some("probe"));
        let unknown = ok.replace("'pytorch'", "'jax'");
        let err = WorkloadSpec::parse(&unknown, "x.toml", Path::new(".")).unwrap_err();
        assert!(err.message.contains("jax"), "{err}");
    }

    #[test]
    fn regex_progress_needs_a_named_group() {
        let text = "name='x'\ncommand=['t']\nbatch_size=1\nfootprint='1MiB'\n[progress]\nsource='regex'\npattern='([0-9]+)it/s'\n";
        let err = WorkloadSpec::parse(text, "x.toml", Path::new(".")).unwrap_err();
        assert_eq!(err.field.as_deref(), Some("progress.pattern"));
    }
}
