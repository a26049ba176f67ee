//! The job catalog the scheduler plans with: what a profile file tells the scheduler (per-GPU speed matrix, best-case
//! demand, iteration time, class), loaded by `workload.name` from a directory of profiles.

use crate::error::InputError;
use crate::error::Setting;
use crate::format::profile::{Profile, ProfileError};
use crate::predict::interpolate;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// A model as the scheduler sees it: speeds relative to GPU-proportional share, per GPU.
#[derive(Debug, Clone)]
pub struct JobModel {
    /// `workload.name` of its profile.
    pub name: String,
    /// Model class (image, language, speech; `other` when the profile has none).
    pub class: String,
    /// Seconds per iteration at the profile's GPU-proportional share.
    pub iter_time_s: f64,
    /// Row axis: cores per GPU.
    pub cpus_axis: Vec<f64>,
    /// Column axis: memory per GPU, GiB.
    pub memory_gib_axis: Vec<f64>,
    /// Normalized throughput, `[cpus][memory]`.
    pub normalized: Vec<Vec<f64>>,
    /// Best-case demand per GPU: cores.
    pub best_cpus_per_gpu: f64,
    /// Best-case demand per GPU: memory, GiB.
    pub best_memory_gib_per_gpu: f64,
    /// The least memory per GPU it runs in, GiB: its measured footprint (absent in published profiles,
    /// which state none).
    pub footprint_gib_per_gpu: Option<f64>,
    /// The profile file it came from.
    pub path: PathBuf,
}

impl JobModel {
    /// Normalized speed at an allocation of `cpus_per_gpu` cores and `memory_gib_per_gpu` GiB per GPU
    /// (bilinear in the matrix, clamped to its edges).
    pub fn speed(&self, cpus_per_gpu: f64, memory_gib_per_gpu: f64) -> f64 {
        interpolate(
            &self.cpus_axis,
            &self.memory_gib_axis,
            &self.normalized,
            cpus_per_gpu,
            memory_gib_per_gpu,
        )
    }

    /// Builds a model from a profile; `origin` names the file in errors.
    pub fn from_profile(p: &Profile, origin: &Path) -> Result<JobModel, InputError> {
        let o = origin.display().to_string();
        let iter_time_s = match p.workload.iter_time_s {
            Some(t) => t,
            // Measured profiles: one step of `batch_size` samples at the proportional rate.
            None => match p.matrix.proportional.samples_per_s {
                Some(r) if r > 0.0 => p.workload.batch_size as f64 / r,
                _ => {
                    return Err(InputError::field(
                        o,
                        "workload.iter_time_s",
                        "missing, and matrix.proportional.samples_per_s cannot stand in for it",
                    ))
                }
            },
        };
        if !(iter_time_s.is_finite() && iter_time_s > 0.0) {
            return Err(InputError::field(
                o,
                "workload.iter_time_s",
                "must be a positive number of seconds",
            ));
        }
        let d = &p.demand.per_gpu;
        if !(d.cpus.is_finite() && d.cpus > 0.0 && d.memory_gib.is_finite() && d.memory_gib > 0.0) {
            return Err(InputError::field(
                o,
                "demand.per_gpu",
                "cpus and memory_gib must be positive",
            ));
        }
        Ok(JobModel {
            name: p.workload.name.clone(),
            class: p
                .workload
                .class
                .clone()
                .unwrap_or_else(|| "other".to_string()),
            iter_time_s,
            cpus_axis: p.per_gpu.cpus.clone(),
            memory_gib_axis: p.per_gpu.memory_gib.clone(),
            normalized: p.per_gpu.normalized.clone(),
            best_cpus_per_gpu: d.cpus,
            best_memory_gib_per_gpu: d.memory_gib,
            footprint_gib_per_gpu: p.model.as_ref().map(|m| {
                m.stall.footprint_bytes as f64 / crate::units::GIB / p.workload.gpus.max(1) as f64
            }),
            path: origin.to_path_buf(),
        })
    }
}

/// Every model the simulator knows, by name.
#[derive(Debug, Clone, Default)]
pub struct Catalog {
    /// Models, in name order.
    pub models: Vec<JobModel>,
    by_name: HashMap<String, usize>,
}

impl Catalog {
    /// Refuses a cluster on which a model cannot run: its footprint per GPU above the memory per GPU of
    /// the roomiest server, where a simulated job would be given memory it cannot run in and its speed
    /// read from outside its matrix (docs/profile-format.md, "Honest edges").
    pub fn check_footprints(
        &self,
        cluster: &crate::sched::ClusterConfig,
    ) -> Result<(), InputError> {
        let roomiest = cluster
            .servers
            .iter()
            .map(|s| s.memory_gib_per_gpu())
            .fold(0.0, f64::max);
        match self.models.iter().find(|m| {
            m.footprint_gib_per_gpu
                .is_some_and(|f| f > roomiest + 1e-9)
        }) {
            Some(m) => Err(InputError::field(
                m.path.display().to_string(),
                "model.footprint_bytes",
                format!(
                    "`{}` needs {:.3} GiB of memory per GPU (its footprint), and the cluster's servers \
                     give at most {roomiest:.3} GiB per GPU: give the servers more memory, or leave this \
                     profile out of --profiles",
                    m.name,
                    m.footprint_gib_per_gpu.unwrap_or_default()
                ),
            )),
            None => Ok(()),
        }
    }

    /// A catalog of the given models (a later duplicate name is an error).
    pub fn new(models: Vec<JobModel>) -> Result<Catalog, InputError> {
        let mut c = Catalog::default();
        for m in models {
            if let Some(&i) = c.by_name.get(&m.name) {
                return Err(InputError::field(
                    m.path.display().to_string(),
                    "workload.name",
                    format!(
                        "`{}` is also the name of {}; profile names must be unique",
                        m.name,
                        c.models[i].path.display()
                    ),
                ));
            }
            c.by_name.insert(m.name.clone(), c.models.len());
            c.models.push(m);
        }
        Ok(c)
    }

    /// Loads every `*.json` profile under `dir`, recursively.
    pub fn load_dir(dir: &Path) -> Result<Catalog, ProfileError> {
        if !dir.is_dir() {
            return Err(InputError::new(
                dir.display().to_string(),
                format!(
                    "is not a directory of profile files ({}; the published zoo is in profiles/zoo)",
                    Setting::Profiles.to("DIR")
                ),
            )
            .into());
        }
        let mut files = Vec::new();
        collect_json(dir, &mut files).map_err(|e| ProfileError::Io {
            context: format!("reading the profile directory {}", dir.display()),
            source: e,
        })?;
        files.sort();
        let mut models = Vec::new();
        for f in files {
            let p = Profile::read(&f)?;
            models.push(JobModel::from_profile(&p, &f)?);
        }
        if models.is_empty() {
            return Err(InputError::new(
                dir.display().to_string(),
                format!(
                    "holds no profile files (*.json); {}",
                    Setting::Profiles.to("DIR")
                ),
            )
            .into());
        }
        models.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(Catalog::new(models)?)
    }

    /// Every model's name, comma-separated: what an error about an unknown one lists.
    pub fn names(&self) -> String {
        self.models
            .iter()
            .map(|m| m.name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// The index of a model by name.
    pub fn index(&self, name: &str) -> Option<usize> {
        self.by_name.get(name).copied()
    }

    /// The model at an index.
    pub fn get(&self, i: usize) -> &JobModel {
        &self.models[i]
    }

    /// Replaces the model at an index with another of the same name (a refined profile's,
    /// docs/run.md "Refinement"); its name keeps its index.
    pub fn replace(&mut self, i: usize, mut model: JobModel) {
        model.name = self.models[i].name.clone();
        self.models[i] = model;
    }
}

fn collect_json(dir: &Path, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
    for e in std::fs::read_dir(dir)? {
        let e = e?;
        let p = e.path();
        if e.file_type()?.is_dir() {
            collect_json(&p, out)?;
        } else if p.extension().is_some_and(|x| x == "json") {
            out.push(p);
        }
    }
    Ok(())
}

impl crate::format::trace::ModelNames for Catalog {
    fn index(&self, name: &str) -> Option<usize> {
        Catalog::index(self, name)
    }
    fn names(&self) -> String {
        Catalog::names(self)
    }
}
