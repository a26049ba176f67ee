//! What a run learns of its jobs (docs/run.md, "Observations" and "Refinement"): each round's observed
//! throughputs go to the observation log, and with `--refine` each profile is refined from them between
//! rounds ([`crate::profile::refine`]), so the planner's next round uses the refined matrix. At the end,
//! the report's fidelity table sets every job's observed throughput at each allocation beside what its
//! profile predicted before and after refinement.

use crate::exec::jobs::JobList;
use crate::exec::observe::Window;
use crate::exec::{Allocation, ExecError};
use crate::format::observation::{self as observe, LogWriter, Observation};
use crate::format::profile::rel_error;
use crate::format::profile::Profile;
use crate::profile::refine;
use crate::sched::catalog::{Catalog, JobModel};
use crate::units::GIB;
use serde::Serialize;
use std::path::PathBuf;

/// A job's observed throughput at one allocation against its profile, before and after refinement.
#[derive(Debug, Clone, Serialize)]
pub struct FidelityPoint {
    /// Cores.
    pub cpus: f64,
    /// Memory, GiB.
    pub memory_gib: f64,
    /// Rounds observed there (undisturbed).
    pub rounds: usize,
    /// Rounds observed there that other work disturbed and were left out.
    pub disturbed_rounds: usize,
    /// Observed samples per second, pooled.
    pub observed_samples_per_s: f64,
    /// Its 95% half-width.
    pub observed_ci95: f64,
    /// What the job's profile, as given, predicts there (the scheduler's matrix), samples per second.
    pub predicted_before: f64,
    /// (before - observed) / observed.
    pub error_before: f64,
    /// What the profile refined from this run's observations predicts there; absent when it could not be
    /// refined (a published profile, no undisturbed observation).
    pub predicted_after: Option<f64>,
    /// (after - observed) / observed.
    pub error_after: Option<f64>,
}

/// The run's observations and, per profile (the list's catalog index), the profile as given and as
/// refined.
pub(super) struct Learner {
    writer: LogWriter,
    refine_online: bool,
    include_disturbed: bool,
    profiles: Vec<Option<Profile>>,
    refined: Vec<Option<Profile>>,
    pub(super) observations: Vec<Observation>,
}

/// What `model` (the scheduler's view of a profile) predicts for a job of `batch` samples a step at
/// `cpus` cores and `memory_gib` GiB over `gpus` GPUs, samples per second.
pub(super) fn scheduler_rate(
    model: &JobModel,
    batch: u32,
    gpus: u32,
    cpus: f64,
    memory_gib: f64,
) -> f64 {
    let g = gpus.max(1) as f64;
    model.speed(cpus / g, memory_gib / g) * batch as f64 / model.iter_time_s
}

impl Learner {
    /// Opens the run's observation log (emptied for a new run; on `resume`, what it holds is read back,
    /// so refinement and the report count the whole run) and reads each profile of the list.
    pub(super) fn open(
        list: &JobList,
        state_path: &std::path::Path,
        resume: bool,
        refine_online: bool,
        include_disturbed: bool,
        log: &mut dyn FnMut(&str),
    ) -> Result<Learner, ExecError> {
        let path = observe::log_path(state_path);
        let observations = if resume && path.is_file() {
            let read = observe::read_log(&path)?;
            for s in &read.skipped {
                log(&format!("synergy: {s}"));
            }
            read.observations
        } else {
            Vec::new()
        };
        let writer = LogWriter::open(&path, !resume)?;
        let n = list.catalog.models.len();
        let mut profiles = vec![None; n];
        for j in &list.jobs {
            let k = j.model as usize;
            if profiles[k].is_none() {
                profiles[k] = Profile::read(&j.profile_path).ok();
            }
        }
        Ok(Learner {
            writer,
            refine_online,
            include_disturbed,
            profiles,
            refined: vec![None; n],
            observations,
        })
    }

    /// The log's path.
    pub(super) fn log_path(&self) -> PathBuf {
        self.writer.path().to_path_buf()
    }

    /// Records what job `i` did over the window that ended at `end_s` (opened at `start_s`) holding
    /// `a`, with the prediction `catalog` made for it.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn record(
        &mut self,
        list: &JobList,
        catalog: &Catalog,
        i: usize,
        a: &Allocation,
        w: Window,
        round: u64,
        start_s: f64,
        end_s: f64,
    ) -> Result<(), ExecError> {
        let j = &list.jobs[i];
        let model = catalog.get(j.model as usize);
        // A job spread over servers is observed as a whole: its cores and memory in all.
        let (cpus, memory_gib) = (a.cpus().0, a.memory().0 as f64 / GIB);
        let o = Observation {
            schema: observe::SCHEMA.into(),
            job: j.name.clone(),
            workload: j.spec.name.clone(),
            profile: j.profile_path.display().to_string(),
            profile_workload: model.name.clone(),
            round,
            start_s,
            end_s,
            gpus: j.gpus,
            cpus,
            cores: a.parts.iter().flat_map(|p| p.cores.clone()).collect(),
            memory_gib,
            disturbed: w.disturbance.as_ref().is_some_and(|d| d.disturbed),
            throughput: w.throughput,
            disturbance: w.disturbance,
            isolation: w.isolation,
            predicted_samples_per_s: scheduler_rate(model, j.batch_size, j.gpus, cpus, memory_gib),
        };
        self.writer.append(&o)?;
        self.observations.push(o);
        Ok(())
    }

    /// Refines profile `k` from every observation of the run so far; returns the refined profile, or why
    /// not.
    fn refine_one(&self, k: usize) -> Result<Profile, String> {
        let p = self.profiles[k]
            .as_ref()
            .ok_or_else(|| "its profile could not be read again".to_string())?;
        let from = [self.log_path().display().to_string()];
        refine::refine(
            p,
            &p.workload.name,
            &self.observations,
            &from,
            self.include_disturbed,
        )
        .map(|(r, _)| r)
        .map_err(|e| e.message)
    }

    /// With `--refine`: refines each profile that `new` observations are of, puts the refined model into
    /// `catalog` for the planner's next round, and returns the log's lines: per job of such a profile,
    /// how far its prediction at its allocation moved and why.
    pub(super) fn refine_round(
        &mut self,
        list: &JobList,
        catalog: &mut Catalog,
        new: usize,
    ) -> Vec<String> {
        if !self.refine_online || new == 0 {
            return Vec::new();
        }
        let fresh = &self.observations[self.observations.len() - new..];
        let mut ks: Vec<usize> = fresh
            .iter()
            .filter_map(|o| catalog.index(&o.profile_workload))
            .collect();
        ks.sort_unstable();
        ks.dedup();
        let mut lines = Vec::new();
        for k in ks {
            let name = catalog.get(k).name.clone();
            let refined = match self.refine_one(k) {
                Ok(r) => r,
                Err(why) => {
                    lines.push(format!("  refine: profile `{name}` unchanged: {why}"));
                    continue;
                }
            };
            let path = catalog.get(k).path.clone();
            let Ok(mut model) = JobModel::from_profile(&refined, &path) else {
                continue;
            };
            list.floor_memory(k, &mut model);
            let old = catalog.get(k).clone();
            for o in fresh
                .iter()
                .filter(|o| o.profile_workload == name)
                .filter(|o| list.jobs.iter().any(|j| j.name == o.job))
            {
                let Some(j) = list.jobs.iter().find(|j| j.name == o.job) else {
                    continue;
                };
                let before = scheduler_rate(&old, j.batch_size, j.gpus, o.cpus, o.memory_gib);
                let after = scheduler_rate(&model, j.batch_size, j.gpus, o.cpus, o.memory_gib);
                let why = refined
                    .refinement
                    .as_ref()
                    .and_then(|r| r.because.first().cloned())
                    .unwrap_or_default();
                lines.push(format!(
                    "  refine: {:<16} profile `{name}` at {:.2} cores, {:.2} GiB: predicted {before:.1} -> {after:.1} samples/s ({:+.1}%), observed {:.1} ± {:.1}{}; {why}",
                    o.job,
                    o.cpus,
                    o.memory_gib,
                    100.0 * rel_error(after, before),
                    o.throughput.samples_per_s,
                    o.throughput.ci95_half_width,
                    match (o.disturbed, self.include_disturbed) {
                        (true, false) => " (disturbed, left out)",
                        (true, true) => " (disturbed, folded in)",
                        _ => "",
                    },
                ));
            }
            catalog.replace(k, model);
            self.refined[k] = Some(refined);
        }
        lines
    }

    /// The refined profile of each profile the run observed (for the report, also without `--refine`),
    /// written to `dir/<name>.json` with `--refine`; returns the paths written.
    pub(super) fn finish(&mut self, catalog: &Catalog, dir: &std::path::Path) -> Vec<String> {
        let mut written = Vec::new();
        for k in 0..self.profiles.len() {
            if let Ok(r) = self.refine_one(k) {
                self.refined[k] = Some(r);
            }
            let Some(r) = &self.refined[k] else { continue };
            if !self.refine_online {
                continue;
            }
            if std::fs::create_dir_all(dir).is_err() {
                continue;
            }
            let path = dir.join(format!("{}.json", catalog.get(k).name));
            if r.write(&path).is_ok() {
                written.push(path.display().to_string());
            }
        }
        written
    }

    /// The list's catalog with every profile this run refined (after [`Learner::finish`]) in place of the
    /// one given: what the simulator would have predicted had the profiles known what the run saw. `None`
    /// when nothing was refined.
    pub(super) fn refined_catalog(&self, list: &JobList) -> Option<Catalog> {
        let mut catalog = list.catalog.clone();
        let mut any = false;
        for (k, refined) in self.refined.iter().enumerate() {
            let Some(p) = refined else { continue };
            let Some(j) = list.jobs.iter().find(|j| j.model as usize == k) else {
                continue;
            };
            if let Ok(m) = JobModel::from_profile(p, &j.profile_path) {
                catalog.replace(k, m);
                any = true;
            }
        }
        any.then_some(catalog)
    }

    /// Job `i`'s fidelity table: its observations pooled per allocation, against the profile as given
    /// (`given`, the list's catalog) and as refined.
    pub(super) fn fidelity(&self, list: &JobList, given: &Catalog, i: usize) -> Vec<FidelityPoint> {
        let j = &list.jobs[i];
        let k = j.model as usize;
        let after_model = self.refined[k]
            .as_ref()
            .and_then(|p| JobModel::from_profile(p, &j.profile_path).ok());
        let mut out: Vec<FidelityPoint> = Vec::new();
        for o in self.observations.iter().filter(|o| o.job == j.name) {
            let same = |p: &&mut FidelityPoint| {
                (p.cpus - o.cpus).abs() < 0.01
                    && (p.memory_gib - o.memory_gib).abs() < 0.05 * o.memory_gib
            };
            let p = match out.iter_mut().find(same) {
                Some(p) => p,
                None => {
                    out.push(FidelityPoint {
                        cpus: o.cpus,
                        memory_gib: o.memory_gib,
                        rounds: 0,
                        disturbed_rounds: 0,
                        observed_samples_per_s: 0.0,
                        observed_ci95: 0.0,
                        predicted_before: scheduler_rate(
                            given.get(k),
                            j.batch_size,
                            j.gpus,
                            o.cpus,
                            o.memory_gib,
                        ),
                        error_before: 0.0,
                        predicted_after: after_model
                            .as_ref()
                            .map(|m| scheduler_rate(m, j.batch_size, j.gpus, o.cpus, o.memory_gib)),
                        error_after: None,
                    });
                    out.last_mut().expect("just pushed")
                }
            };
            if o.disturbed && !self.include_disturbed {
                p.disturbed_rounds += 1;
            } else {
                p.rounds += 1;
            }
        }
        for p in out.iter_mut() {
            // Pooled as refinement pools: total samples over total time.
            let pool: Vec<&Observation> = self
                .observations
                .iter()
                .filter(|x| x.job == j.name && (!x.disturbed || self.include_disturbed))
                .filter(|x| (x.cpus - p.cpus).abs() < 0.01)
                .filter(|x| (x.memory_gib - p.memory_gib).abs() < 0.05 * x.memory_gib)
                .collect();
            let total_t: f64 = pool.iter().map(|x| x.throughput.measured_s).sum();
            if total_t > 0.0 {
                p.observed_samples_per_s = pool
                    .iter()
                    .map(|x| x.throughput.samples_per_s * x.throughput.measured_s)
                    .sum::<f64>()
                    / total_t;
                p.observed_ci95 = pool
                    .iter()
                    .map(|x| {
                        (x.throughput.ci95_half_width * x.throughput.measured_s / total_t).powi(2)
                    })
                    .sum::<f64>()
                    .sqrt();
            }
            p.error_before = rel_error(p.predicted_before, p.observed_samples_per_s);
            p.error_after = p
                .predicted_after
                .map(|a| rel_error(a, p.observed_samples_per_s));
        }
        // A point only disturbed rounds saw has no throughput to set beside the profile's.
        out.retain(|p| p.rounds > 0);
        out.sort_by(|a, b| {
            a.cpus
                .total_cmp(&b.cpus)
                .then(a.memory_gib.total_cmp(&b.memory_gib))
        });
        out
    }
}
