//! The job-list file (`docs/run.md`): per job a workload spec, its profile, GPUs, work and arrival; and
//! the same list as a simulator trace, so every real run has a prediction.

use super::{ExecError, Work};
use crate::error::InputError;
use crate::error::Setting;
use crate::format::profile::Profile;
use crate::format::trace::TraceJob;
use crate::sched::catalog::{Catalog, JobModel};
use crate::units::{Bytes, GIB};
use crate::workload::WorkloadSpec;
use serde::Deserialize;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ListFile {
    #[serde(default)]
    profiles: Option<String>,
    #[serde(default)]
    job: Vec<EntryFile>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct EntryFile {
    name: String,
    workload: String,
    #[serde(default)]
    profile: Option<String>,
    #[serde(default)]
    gpus: Option<u32>,
    #[serde(default)]
    samples: Option<u64>,
    #[serde(default)]
    steps: Option<u64>,
    #[serde(default)]
    arrival_s: f64,
}

/// One job of the list, resolved.
#[derive(Debug, Clone)]
pub struct Job {
    /// Unique name (letters, digits, `-`, `_`, `.`).
    pub name: String,
    /// Its workload spec.
    pub spec: WorkloadSpec,
    /// Its profile file.
    pub profile_path: PathBuf,
    /// Index of its model in [`JobList::catalog`].
    pub model: u32,
    /// GPUs.
    pub gpus: u32,
    /// Work.
    pub work: Work,
    /// Arrival, seconds after the run starts.
    pub arrival_s: f64,
    /// Samples per step (the spec's, equal to the profile's).
    pub batch_size: u32,
    /// Memory it needs besides an application cache, bytes: the most its profile measured, or the
    /// spec's floor if that is higher.
    pub footprint_bytes: u64,
}

impl Job {
    /// Work in samples (steps times the batch size).
    pub fn work_samples(&self) -> u64 {
        match self.work {
            Work::Samples(n) => n,
            Work::Steps(n) => n * self.batch_size as u64,
        }
    }

    /// Work in the simulator's iterations (steps), rounded up.
    pub fn work_iters(&self) -> u64 {
        match self.work {
            Work::Samples(n) => n.div_ceil(self.batch_size as u64),
            Work::Steps(n) => n,
        }
    }
}

/// A parsed job list with the scheduler's models of its jobs.
#[derive(Debug, Clone)]
pub struct JobList {
    /// The file it came from.
    pub path: PathBuf,
    /// Jobs in file order.
    pub jobs: Vec<Job>,
    /// One model per distinct profile.
    pub catalog: Catalog,
}

impl JobList {
    /// Reads and validates a job list; paths in it resolve against its directory.
    pub fn read(path: &Path) -> Result<JobList, ExecError> {
        let origin = path.display().to_string();
        let text = crate::input::read_text(path, crate::input::JOB_LIST)
            .map_err(|e| e.into_input(&origin))?;
        let base = path
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        Self::parse(&text, &origin, base, path)
    }

    pub fn parse(text: &str, origin: &str, base: &Path, path: &Path) -> Result<JobList, ExecError> {
        let file: ListFile =
            toml::from_str(text).map_err(|e| InputError::toml(origin, text, &e))?;
        if file.job.is_empty() {
            return Err(InputError::new(origin, "has no [[job]] tables").into());
        }
        let resolve = |p: &str| {
            let p = Path::new(p);
            if p.is_absolute() {
                p.to_path_buf()
            } else {
                base.join(p)
            }
        };
        let profiles_dir = file.profiles.as_deref().map(resolve);
        let mut models: Vec<JobModel> = Vec::new();
        // Per profile: its model index, batch size and measured footprint.
        let mut model_of: HashMap<PathBuf, (usize, u32, u64)> = HashMap::new();
        let mut jobs = Vec::new();
        for (i, e) in file.job.iter().enumerate() {
            let field = |f: &str| format!("job[{i}].{f}");
            if !crate::fsutil::is_safe_file_stem(&e.name) {
                return Err(InputError::field(
                    origin,
                    field("name"),
                    format!(
                        "`{}` is not a job name ({})",
                        e.name,
                        crate::fsutil::SAFE_FILE_STEM
                    ),
                )
                .into());
            }
            if jobs.iter().any(|j: &Job| j.name == e.name) {
                return Err(InputError::field(
                    origin,
                    field("name"),
                    format!("`{}` names two jobs; names must be unique", e.name),
                )
                .into());
            }
            // A spec file relative to the list, else a built-in workload name (docs/run.md); never a
            // file relative to the current directory, which the list's reader did not choose.
            let spec_path = resolve(&e.workload);
            let spec = if spec_path.is_dir() {
                return Err(InputError::field(
                    origin,
                    field("workload"),
                    format!(
                        "{} is a directory, not a workload spec",
                        spec_path.display()
                    ),
                )
                .into());
            } else if spec_path.exists() {
                WorkloadSpec::load(&spec_path.display().to_string())?
            } else {
                WorkloadSpec::builtin(&e.workload).unwrap_or_else(|| {
                    Err(InputError::field(
                        origin,
                        field("workload"),
                        format!(
                            "`{}` is no spec file (paths are relative to the job list) and no built-in \
                             workload ({})",
                            e.workload,
                            WorkloadSpec::builtin_names()
                        ),
                    ))
                })?
            };
            let profile_path =
                match (&e.profile, &profiles_dir) {
                    (Some(p), _) => resolve(p),
                    (None, Some(dir)) => dir.join(format!("{}.json", spec.name)),
                    (None, None) => return Err(InputError::field(
                        origin,
                        field("profile"),
                        "missing; name the job's profile file, or set `profiles = DIR` at the top",
                    )
                    .into()),
                };
            if !profile_path.is_file() {
                return Err(InputError::field(
                    origin,
                    field("profile"),
                    format!("{} does not exist", profile_path.display()),
                )
                .into());
            }
            let canonical = profile_path
                .canonicalize()
                .unwrap_or_else(|_| profile_path.clone());
            let (model, batch, measured_footprint) = match model_of.get(&canonical) {
                Some(&m) => m,
                None => {
                    let p = Profile::read(&profile_path).map_err(|err| match err {
                        crate::format::profile::ProfileError::Invalid(i) => ExecError::Input(i),
                        other => ExecError::Other(other.to_string()),
                    })?;
                    let m = JobModel::from_profile(&p, &profile_path)?;
                    models.push(m);
                    let footprint = p.model.as_ref().map_or(0, |m| m.stall.footprint_bytes);
                    let v = (models.len() - 1, p.workload.batch_size, footprint);
                    model_of.insert(canonical, v);
                    v
                }
            };
            if batch != spec.batch_size {
                return Err(InputError::field(
                    origin,
                    field("profile"),
                    format!(
                        "{} was measured at batch size {batch}, but {} uses {}",
                        profile_path.display(),
                        spec.origin,
                        spec.batch_size
                    ),
                )
                .into());
            }
            let work = match (e.samples, e.steps) {
                (Some(n), None) if crate::range::is_work(n) => Work::Samples(n),
                (None, Some(n)) if crate::range::is_work(n) => Work::Steps(n),
                (Some(_), Some(_)) => {
                    return Err(InputError::field(
                        origin,
                        field("samples"),
                        "give `samples` or `steps`, not both",
                    )
                    .into())
                }
                (None, None) => {
                    return Err(InputError::field(
                        origin,
                        field("samples"),
                        "missing; give the job's work as `samples = N` or `steps = N`",
                    )
                    .into())
                }
                _ => {
                    return Err(InputError::field(
                        origin,
                        field(if e.samples.is_some() {
                            "samples"
                        } else {
                            "steps"
                        }),
                        format!("must be {}", crate::range::WORK),
                    )
                    .into())
                }
            };
            // Work is counted in samples as well as steps (progress, the trace): both must fit.
            if let Work::Steps(n) = work {
                if n.checked_mul(spec.batch_size as u64).is_none() {
                    return Err(InputError::field(
                        origin,
                        field("steps"),
                        format!(
                            "{n} steps of {} samples are more samples than can be counted",
                            spec.batch_size
                        ),
                    )
                    .into());
                }
            }
            let gpus = e.gpus.unwrap_or(spec.gpus);
            if gpus == 0 {
                return Err(InputError::field(origin, field("gpus"), "must be at least 1").into());
            }
            spec.check_ranks(gpus).map_err(|m| {
                InputError::field(
                    origin,
                    field("gpus"),
                    format!("{m} (field `batch_size` of {})", spec.origin),
                )
            })?;
            if !crate::range::is_seconds(e.arrival_s) {
                return Err(InputError::field(
                    origin,
                    field("arrival_s"),
                    format!("must be {}", crate::range::SECONDS),
                )
                .into());
            }
            jobs.push(Job {
                name: e.name.clone(),
                batch_size: spec.batch_size,
                footprint_bytes: measured_footprint.max(spec.footprint.map_or(0, |b| b.0)),
                spec,
                profile_path,
                model: model as u32,
                gpus,
                work,
                arrival_s: e.arrival_s,
            });
        }
        for (k, m) in models.iter_mut().enumerate() {
            floor_memory(&jobs, k, m);
        }
        // The catalog sorts nothing here: model indices stay those assigned above.
        let catalog = Catalog::new(models)?;
        Ok(JobList {
            path: path.to_path_buf(),
            jobs,
            catalog,
        })
    }

    /// Raises `model` (the list's model `k`, or a refinement of it) to the memory its jobs need.
    pub fn floor_memory(&self, k: usize, model: &mut JobModel) {
        floor_memory(&self.jobs, k, model);
    }

    /// The list as a simulator trace: ids are positions in the list, work in iterations.
    pub fn trace(&self) -> Vec<TraceJob> {
        let mut t: Vec<TraceJob> = self
            .jobs
            .iter()
            .enumerate()
            .map(|(i, j)| TraceJob {
                id: i as u64,
                model: j.model,
                arrival_s: j.arrival_s,
                iters: j.work_iters(),
                gpus: j.gpus,
            })
            .collect();
        t.sort_by(|a, b| a.arrival_s.total_cmp(&b.arrival_s).then(a.id.cmp(&b.id)));
        t
    }

    /// Rejects jobs of more than `max_gpus` GPUs, naming the job; `limit` says where the limit comes from
    /// (`the cluster has`, `the servers have`).
    pub fn check_fits(&self, max_gpus: u32, limit: &str) -> Result<(), InputError> {
        match self
            .jobs
            .iter()
            .enumerate()
            .find(|(_, j)| j.gpus > max_gpus)
        {
            Some((i, j)) => Err(InputError::field(
                self.path.display().to_string(),
                format!("job[{i}].gpus"),
                format!(
                    "job `{}` asks for {} GPUs; {limit} {max_gpus}",
                    j.name, j.gpus
                ),
            )),
            None => Ok(()),
        }
    }

    /// Rejects jobs whose footprint a server's proportional share of memory (`memory` over `gpus`, per
    /// GPU of the job) cannot hold: the job could not start there, or a cgroup could not be shrunk to
    /// its allocation while the job runs (docs/run.md).
    pub fn check_memory(&self, memory: Bytes, gpus: u32) -> Result<(), InputError> {
        let share = |j: &Job| memory.0 as f64 * j.gpus as f64 / gpus.max(1) as f64;
        match self
            .jobs
            .iter()
            .find(|j| share(j) < j.footprint_bytes as f64)
        {
            Some(j) => {
                let least = (j.footprint_bytes as f64 * gpus.max(1) as f64 / j.gpus as f64).ceil();
                Err(InputError::setting(
                    Setting::Memory,
                    format!(
                        "{memory} gives job `{}` {} of memory ({} of {gpus} GPUs), below its footprint, {} (measured in {}, or field `footprint` of {}); give at least {}",
                        j.name,
                        Bytes(share(j) as u64),
                        j.gpus,
                        Bytes(j.footprint_bytes),
                        j.profile_path.display(),
                        j.spec.origin,
                        Bytes(least as u64)
                    ),
                ))
            }
            None => Ok(()),
        }
    }
}

/// A job never gets less memory than its footprint (the least it runs in), whatever its profile's demand
/// says: a profile of another workload (or one measured with fewer loader threads) may ask less, and
/// the job would be killed by the kernel's OOM killer every time it started. The planner asks each job's
/// best case per GPU, so `model`'s (model `k` of `jobs`) rises to its jobs' largest footprint per GPU.
fn floor_memory(jobs: &[Job], k: usize, model: &mut JobModel) {
    let floor_gib = jobs
        .iter()
        .filter(|j| j.model as usize == k)
        .map(|j| j.footprint_bytes as f64 / GIB / j.gpus.max(1) as f64)
        .fold(0.0, f64::max);
    model.best_memory_gib_per_gpu = model.best_memory_gib_per_gpu.max(floor_gib);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(text: &str) -> Result<JobList, ExecError> {
        let root = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."));
        JobList::parse(text, "jobs.toml", root, Path::new("jobs.toml"))
    }

    #[test]
    fn a_list_resolves_specs_profiles_and_work() {
        let l = list(
            r#"
profiles = "profiles"
[[job]]
name = "a"
workload = "workloads/image.toml"
samples = 1000
[[job]]
name = "b"
workload = "text"
steps = 10
arrival_s = 5
"#,
        )
        .unwrap();
        assert_eq!(l.jobs.len(), 2);
        assert_eq!(l.jobs[0].work_iters(), 32); // ceil(1000 / 32)
        assert_eq!(l.jobs[1].work_samples(), 320);
        assert_eq!(l.catalog.models.len(), 2);
        let t = l.trace();
        assert_eq!((t[1].id, t[1].arrival_s, t[1].iters), (1, 5.0, 10));
    }

    #[test]
    fn a_job_is_never_planned_below_its_footprint_whatever_its_profile_asks() {
        let d = tempfile::tempdir().unwrap();
        let root = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."));
        let spec = std::fs::read_to_string(root.join("workloads/image.toml"))
            .unwrap()
            .replace("gpus = 1\n", "gpus = 1\nfootprint = \"160MiB\"\n");
        std::fs::write(d.path().join("image.toml"), spec).unwrap();
        let text = format!(
            "[[job]]\nname = \"a\"\nworkload = \"image.toml\"\nprofile = \"{}\"\nsamples = 5\n",
            root.join("profiles/text.json").display()
        );
        let l = JobList::parse(&text, "jobs.toml", d.path(), &d.path().join("jobs.toml")).unwrap();
        // The text profile asks 13.5 MiB; the image spec says it cannot run in less than 160 MiB.
        let m = l.catalog.get(0);
        assert!(
            (m.best_memory_gib_per_gpu - 160.0 / 1024.0).abs() < 1e-9,
            "{m:?}"
        );
        // A refinement of the model keeps the floor.
        let mut again = m.clone();
        again.best_memory_gib_per_gpu = 0.01;
        l.floor_memory(0, &mut again);
        assert_eq!(again.best_memory_gib_per_gpu, m.best_memory_gib_per_gpu);
    }

    /// docs/run.md: a spec path is relative to the list, else a built-in name. The tests run in this
    /// crate's directory, where `src/lib.rs` exists: a list elsewhere must not find it there.
    #[test]
    fn a_workload_path_is_relative_to_the_list_not_the_current_directory() {
        let d = tempfile::tempdir().unwrap();
        assert!(Path::new("src/lib.rs").exists());
        let text = "[[job]]\nname = \"a\"\nworkload = \"src/lib.rs\"\nsamples = 5\n";
        let e =
            JobList::parse(text, "jobs.toml", d.path(), &d.path().join("jobs.toml")).unwrap_err();
        let ExecError::Input(e) = e else {
            panic!("not an input error: {e}")
        };
        assert_eq!(e.field.as_deref(), Some("job[0].workload"), "{e}");
        assert!(e.message.contains("relative to the job list"), "{e}");
    }

    #[test]
    fn bad_entries_name_the_field() {
        let cases = [
            ("[[job]]\nname = \"a\"\nworkload = \"image\"\nsamples = 5", "profile"),
            (
                "profiles = \"profiles\"\n[[job]]\nname = \"a b\"\nworkload = \"image\"\nsamples = 5",
                "job[0].name",
            ),
            (
                "profiles = \"profiles\"\n[[job]]\nname = \"a\"\nworkload = \"image\"",
                "job[0].samples",
            ),
            (
                "profiles = \"profiles\"\n[[job]]\nname = \"a\"\nworkload = \"image\"\nsamples = 5\ngpus = 0",
                "job[0].gpus",
            ),
            (
                "profiles = \"profiles\"\n[[job]]\nname = \"a\"\nworkload = \"nope\"\nsamples = 5",
                "job[0].workload",
            ),
            ("profiles = \"profiles\"\n[[job]]\nname = \"a\"\nworkload = \"image\"\nsamples = 5\ncolour = 1", "line"),
        ];
        for (text, want) in cases {
            let e = list(text).unwrap_err();
            assert!(e.is_input(), "{e}");
            assert!(e.to_string().contains(want), "{want}: {e}");
        }
    }
}
