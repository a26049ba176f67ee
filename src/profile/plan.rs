//! Optimistic profiling (DS-Analyzer's differential measurement, improved): one synthetic trial for the
//! accelerator rate G, a CPU sweep with the dataset cached that bisects towards where throughput changes
//! and skips every point its measured neighbours already bound, and one cold trial for the fetch rate.
//! The memory axis comes from the model; `--validate` and `--exhaustive` measure grid points under their
//! real constraint to prove it. Every finished trial is journaled at once, so `--resume` continues an
//! interrupted profile without measuring anything twice.

use super::file::{
    DatasetInfo, ErrorSummary, FittedModel, HitRatioRow, HostInfo, Profile, ProfileError,
    ProfileTrial, ServerShape, TrialRole, ValidationPoint, WorkloadInfo, SCHEMA,
};
use super::matrix;
use crate::cancel::Cancel;
use crate::error::InputError;
use crate::isolate::{pagecache, IsolationKind};
use crate::measure::{self, CacheState, EstimatorConfig, TrialError, TrialRequest, TrialResult};
use crate::stall::{
    minio_hit_ratio, CpuCurve, CpuPoint, FetchModel, FootprintPoint, HitModel, LruSim, StallModel,
};
use crate::units::{Bytes, BytesPerSec, Cores};
use crate::workload::spec::CacheKind;
use crate::workload::{dataset, WorkloadSpec};
use indicatif::ProgressBar;
use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

const GIB: f64 = (1u64 << 30) as f64;
/// Confidence half-width, relative, at which a validation or exhaustive trial stops.
const VALIDATION_PRECISION: f64 = 0.04;
/// Longest first epoch a validation trial waits out before measuring, seconds.
const MAX_WARMUP_EPOCH_S: f64 = 60.0;

/// What to profile and how.
#[derive(Debug, Clone)]
pub struct ProfileRequest {
    /// The workload.
    pub spec: WorkloadSpec,
    /// Where the profile goes (the CSV and the trial journal sit beside it).
    pub out: PathBuf,
    /// CPU axis; `None`: [`matrix::auto_cpu_axis`] of this host.
    pub cpus: Option<Vec<f64>>,
    /// Memory axis in GiB; `None`: footprint plus 0-100% of the dataset.
    pub memory_gib: Option<Vec<f64>>,
    /// GPUs; `None`: the spec's.
    pub gpus: Option<u32>,
    /// Reference server shape; `None`: this host divided by the workload's GPUs.
    pub server: Option<ServerShape>,
    /// Held-out grid points to measure.
    pub validate: usize,
    /// Measure the whole grid as well.
    pub exhaustive: bool,
    /// Reuse trials journaled by an interrupted run.
    pub resume: bool,
    /// Storage read limit for every trial that reads the dataset.
    pub storage_limit: Option<BytesPerSec>,
    /// Isolation backend.
    pub isolation: Option<IsolationKind>,
    /// Fraction of the best throughput the demand vector may give up.
    pub tolerance: f64,
    /// The CPU sweep stops refining an interval whose ends differ by at most this fraction.
    pub refine_tolerance: f64,
}

/// Why profiling stopped early.
#[derive(Debug, thiserror::Error)]
pub enum ProfileRunError {
    /// A trial failed (or was interrupted).
    #[error(transparent)]
    Trial(#[from] TrialError),
    /// Bad input.
    #[error(transparent)]
    Input(#[from] InputError),
    /// The profile or its journal could not be written.
    #[error(transparent)]
    File(#[from] ProfileError),
}

/// Finished trials, saved one JSON line each so an interrupted profile can resume.
struct Journal {
    path: PathBuf,
    done: HashMap<String, ProfileTrial>,
    order: Vec<ProfileTrial>,
    reused: usize,
}

impl Journal {
    fn open(path: PathBuf, resume: bool) -> Result<Self, ProfileRunError> {
        let mut done = HashMap::new();
        if resume {
            if let Ok(text) = std::fs::read_to_string(&path) {
                for (i, line) in text
                    .lines()
                    .enumerate()
                    .filter(|(_, l)| !l.trim().is_empty())
                {
                    // A line cut short by a kill is the last one; anything else is corruption.
                    let Ok(t) = serde_json::from_str::<ProfileTrial>(line) else {
                        if i + 1 == text.lines().count() {
                            break;
                        }
                        return Err(InputError::new(
                            path.display().to_string(),
                            format!(
                                "line {} is not a trial; remove the file to start over",
                                i + 1
                            ),
                        )
                        .into());
                    };
                    done.insert(key(t.role, t.memory_gib, &t.result), t);
                }
            }
        } else {
            let _ = std::fs::remove_file(&path);
        }
        Ok(Journal {
            path,
            done,
            order: Vec::new(),
            reused: 0,
        })
    }

    fn append(&mut self, t: &ProfileTrial) -> Result<(), ProfileRunError> {
        let io = |e| ProfileError::Io {
            context: format!("writing the trial journal {}", self.path.display()),
            source: e,
        };
        if let Some(dir) = self.path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(io)?;
        }
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.path)
            .map_err(io)?;
        let line = serde_json::to_string(t).expect("trials serialize") + "\n";
        f.write_all(line.as_bytes()).map_err(io)?;
        f.sync_data().map_err(io)?;
        Ok(())
    }
}

/// Identifies a trial by what it measured, so a resumed plan finds it again.
fn key(role: TrialRole, memory_gib: Option<f64>, r: &TrialResult) -> String {
    let a = &r.allocation;
    format!(
        "{role:?}|{}|{:?}|{:?}|{:?}|{:?}|{:?}|{}",
        a.cpus,
        memory_gib,
        a.mem_limit_bytes,
        a.cache_bytes,
        a.cache_state,
        a.storage_limit_bytes_per_s,
        a.synthetic
    )
}

fn key_of(role: TrialRole, memory_gib: Option<f64>, req: &TrialRequest) -> String {
    format!(
        "{role:?}|{}|{:?}|{:?}|{:?}|{:?}|{:?}|{}",
        req.cpus,
        memory_gib,
        req.mem_limit.map(|b| b.0),
        req.cache_bytes.map(|b| b.0),
        req.cache_state,
        req.storage_limit.map(|b| b.0),
        req.synthetic
    )
}

/// Runs trials through the journal and keeps the progress bar moving.
struct Runner<'a> {
    journal: Journal,
    bar: &'a ProgressBar,
    cancel: &'a Cancel,
    isolation: Option<IsolationKind>,
}

impl Runner<'_> {
    fn trial(
        &mut self,
        role: TrialRole,
        memory_gib: Option<f64>,
        mut req: TrialRequest,
    ) -> Result<TrialResult, ProfileRunError> {
        req.isolation = self.isolation;
        let k = key_of(role, memory_gib, &req);
        if let Some(t) = self.journal.done.get(&k) {
            self.journal.reused += 1;
            self.journal.order.push(t.clone());
            self.bar.inc(1);
            return Ok(t.result.clone());
        }
        self.bar
            .set_message(format!("{role:?} trial at {} cores", req.cpus));
        let result = measure::run_trial(&req, self.bar, self.cancel)?;
        let t = ProfileTrial {
            role,
            memory_gib,
            result: result.clone(),
        };
        self.journal.append(&t)?;
        self.journal.order.push(t);
        self.bar.inc(1);
        Ok(result)
    }
}

fn base_request(spec: &WorkloadSpec, cpus: f64) -> TrialRequest {
    let mut r = TrialRequest::new(spec.clone(), Cores(cpus));
    r.estimator = EstimatorConfig {
        max_total_s: 45.0,
        ..EstimatorConfig::default()
    };
    r
}

/// Profiles a workload: runs the plan, fits the model, builds the matrix, validates, and writes the file.
pub fn run_profile(
    req: &ProfileRequest,
    bar: &ProgressBar,
    cancel: &Cancel,
) -> Result<Profile, ProfileRunError> {
    let spec = &req.spec;
    let host_cores = measure::trial::host_cores().len() as f64;
    let cpu_axis = match &req.cpus {
        Some(v) => v.clone(),
        None => matrix::auto_cpu_axis(host_cores),
    };
    check_axis("--cpus", &cpu_axis)?;
    if let Some(c) = cpu_axis.iter().find(|c| **c > host_cores) {
        return Err(InputError::new(
            "--cpus",
            format!("{c} cores asked for, but this host has {host_cores}"),
        )
        .into());
    }
    if let Some(m) = &req.memory_gib {
        check_axis("--mem", m)?;
    }
    let journal_path = req.out.with_extension("trials.jsonl");
    let mut run = Runner {
        journal: Journal::open(journal_path.clone(), req.resume)?,
        bar,
        cancel,
        isolation: req.isolation,
    };
    let n_grid = cpu_axis.len() * req.memory_gib.as_ref().map_or(5, Vec::len);
    bar.set_length(
        (3 + cpu_axis.len() / 2 + req.validate + if req.exhaustive { n_grid } else { 0 }) as u64,
    );
    let started = Instant::now();

    // 1. The CPU sweep with the dataset cached: min(G, P(c)).
    let c_max = *cpu_axis.last().expect("checked non-empty");
    let mut sweep: Vec<(usize, f64)> = Vec::new();
    let mut measure_cpu = |run: &mut Runner, i: usize| -> Result<f64, ProfileRunError> {
        let mut r = base_request(spec, cpu_axis[i]);
        r.cache_state = CacheState::Warm;
        let t = run.trial(TrialRole::Cpu, None, r)?.throughput.samples_per_s;
        sweep.push((i, t));
        Ok(t)
    };
    let last = cpu_axis.len() - 1;
    let t_hi = measure_cpu(&mut run, last)?;

    // 2. The accelerator alone.
    let mut synth = base_request(spec, c_max);
    synth.synthetic = true;
    let g = run
        .trial(TrialRole::Synthetic, None, synth)?
        .throughput
        .samples_per_s;

    if last > 0 {
        let t_lo = measure_cpu(&mut run, 0)?;
        // Bisect every interval whose ends differ by more than the tolerance: where the curve is flat
        // (past the knee, or between equal points) monotonicity bounds every point in between.
        let mut stack = vec![(0usize, t_lo, last, t_hi)];
        while let Some((a, ta, b, tb)) = stack.pop() {
            if b - a < 2 || (tb - ta).abs() <= req.refine_tolerance * tb.max(ta) {
                continue;
            }
            let target = (cpu_axis[a] + cpu_axis[b]) / 2.0;
            let mid = (a + 1..b)
                .min_by(|&x, &y| {
                    (cpu_axis[x] - target)
                        .abs()
                        .total_cmp(&(cpu_axis[y] - target).abs())
                })
                .expect("an index lies between");
            let tm = measure_cpu(&mut run, mid)?;
            stack.push((a, ta, mid, tm));
            stack.push((mid, tm, b, tb));
        }
    }
    let cpu_trials: Vec<&ProfileTrial> = run
        .journal
        .order
        .iter()
        .filter(|t| t.role == TrialRole::Cpu)
        .collect();
    let first = cpu_trials
        .first()
        .expect("at least one CPU trial")
        .result
        .clone();
    let ds = first.dataset.clone();
    // The model charges the cache with what is left beside the memory the workload was seen to use; the
    // memory axis starts no lower than the spec's footprint, which trials refuse to go below.
    let measured_footprint = cpu_trials
        .iter()
        .filter_map(|t| t.result.telemetry.memory_peak_bytes)
        .max();
    let footprint = measured_footprint.unwrap_or(spec.footprint.map_or(0, |b| b.0));
    let mut footprint_points: Vec<FootprintPoint> = cpu_trials
        .iter()
        .filter_map(|t| {
            Some(FootprintPoint {
                cpus: t.result.allocation.cpus.0,
                bytes: t.result.telemetry.memory_peak_bytes?,
            })
        })
        .collect();
    footprint_points.sort_by(|a, b| a.cpus.total_cmp(&b.cpus));
    footprint_points.dedup_by(|a, b| a.cpus == b.cpus);
    let axis_base = footprint.max(spec.footprint.map_or(0, |b| b.0));
    let curve = CpuCurve::new(
        sweep
            .iter()
            .map(|&(i, t)| CpuPoint {
                cpus: cpu_axis[i],
                samples_per_s: t,
            })
            .collect(),
    );

    // 3. One cold trial at the most cores for the fetch rate, kept cold for its whole length: an
    // application cache of zero bytes, or a page cache squeezed by a memory limit near the footprint.
    let (files, dataset_bytes) = match &ds {
        Some(d) => {
            let files = dataset::scan(&d.path)
                .map_err(|e| InputError::new(d.path.display().to_string(), e.to_string()))?;
            let bytes = files.total_bytes();
            (Some(files), bytes)
        }
        None => (None, 0),
    };
    let hit_model = match spec.cache {
        CacheKind::App => HitModel::Minio,
        CacheKind::PageCache => HitModel::PageCache,
    };
    let mut fetch = FetchModel {
        mean_sample_bytes: ds.as_ref().map_or(0.0, |d| d.mean_file_bytes),
        storage_bytes_per_s: None,
        memory_bytes_per_s: f64::INFINITY,
    };
    let mut storage_seen = None;
    if let Some(files) = &files {
        // Cold for its whole length: only the first epoch counts, and an application cache gets no room.
        let mut cold = base_request(spec, c_max);
        cold.cache_state = CacheState::Cold;
        cold.storage_limit = req.storage_limit;
        cold.estimator.first_epoch_only = true;
        cold.estimator.warmup_s = 1.0;
        cold.estimator.min_measure_s = 2.0;
        if hit_model == HitModel::Minio {
            cold.cache_bytes = Some(Bytes(0));
        }
        match run.trial(TrialRole::Fetch, None, cold) {
            Ok(r) => {
                let t_cold = r.throughput.samples_per_s;
                storage_seen = r.telemetry.storage_read_bytes_per_s;
                // Bytes per sample as the workload really reads them (readahead and all).
                if let Some(read) = r.telemetry.storage_read_bytes.filter(|b| *b > 0) {
                    fetch.mean_sample_bytes = read as f64 / r.samples.max(1.0);
                }
                if t_cold < 0.95 * curve.at(c_max) {
                    fetch.storage_bytes_per_s =
                        Some(storage_seen.unwrap_or(t_cold * fetch.mean_sample_bytes));
                }
            }
            // A whole epoch went by before a rate could be estimated: storage is far faster than the
            // pipeline, so fetch never limits.
            Err(ProfileRunError::Trial(TrialError::NoEstimate(_))) => {}
            Err(e) => return Err(e),
        }
        // Memory bandwidth for hits: read the cached dataset once more.
        let paths: Vec<_> = files.paths().map(Path::to_path_buf).collect();
        let _ = pagecache::prewarm(&paths);
        let t0 = Instant::now();
        if let Ok(bytes) = pagecache::prewarm(&paths) {
            let secs = t0.elapsed().as_secs_f64();
            if secs > 0.0 && bytes > 0 {
                fetch.memory_bytes_per_s = bytes as f64 / secs;
            }
        }
    }

    // 4. The model and its hit-ratio tables.
    let sizes: Vec<u64> = files
        .as_ref()
        .map(|f| f.files.iter().map(|(_, b)| *b).collect())
        .unwrap_or_default();
    let mut lru = LruSim::new(sizes, 1);
    let hit_ratios: Vec<HitRatioRow> = (0..=40)
        .map(|k| {
            let c = dataset_bytes * k / 40;
            HitRatioRow {
                cache_bytes: c,
                minio: minio_hit_ratio(c as f64, dataset_bytes as f64),
                page_cache: lru.hit_ratio(c),
            }
        })
        .collect();
    let model = FittedModel {
        stall: StallModel {
            accelerator_samples_per_s: g,
            cpu: curve,
            fetch,
            footprint_bytes: footprint,
            footprint_points,
            dataset_bytes,
            hit_model,
        },
        hit_ratios,
    };
    let memory_axis = req
        .memory_gib
        .clone()
        .unwrap_or_else(|| matrix::auto_memory_axis(axis_base, dataset_bytes));
    let gpus = req.gpus.unwrap_or(spec.gpus).max(1);
    let host_mem = host_memory_bytes();
    let server = req.server.unwrap_or(ServerShape {
        gpus,
        cpus: host_cores,
        memory_gib: host_mem as f64 / GIB,
    });
    let (m, per_gpu, demand) = matrix::build(
        &model,
        &cpu_axis,
        &memory_axis,
        gpus,
        &server,
        req.tolerance,
    );
    let optimistic_s = started.elapsed().as_secs_f64();
    let _ = optimistic_s;

    // 5. Proof: held-out points and, on request, the whole grid, under the real constraint.
    let mut validation = Vec::new();
    let constrained = |c: f64, mem_gib: f64| -> TrialRequest {
        let mut r = base_request(spec, c);
        r.cache_state = CacheState::Cold;
        r.storage_limit = req.storage_limit;
        // The model describes the steady state after the first epoch has filled the cache. Where an
        // epoch takes longer than a trial should, its first minutes stand in for it.
        r.estimator.warmup_epochs = 1;
        r.estimator.warmup_epochs_max_s = MAX_WARMUP_EPOCH_S;
        r.estimator.max_total_s = MAX_WARMUP_EPOCH_S + 60.0;
        // Cache hits make step times noisier; these points check the model, so ±4% is precise enough.
        r.estimator.rel_precision = VALIDATION_PRECISION;
        let mem = (mem_gib * GIB) as u64;
        match hit_model {
            HitModel::Minio => {
                r.cache_bytes = Some(Bytes(model.stall.cache_bytes(c, mem as f64) as u64))
            }
            HitModel::PageCache => r.mem_limit = Some(Bytes(mem)),
        }
        r
    };
    if files.is_some() {
        let mut points: Vec<(TrialRole, f64, f64)> =
            held_out(&cpu_axis, &memory_axis, req.validate)
                .into_iter()
                .map(|(c, mg)| (TrialRole::Validation, c, mg))
                .collect();
        if req.exhaustive {
            for &c in &cpu_axis {
                for &mg in &memory_axis {
                    points.push((TrialRole::Exhaustive, c, mg));
                }
            }
        }
        for (role, c, mg) in points {
            let r = run.trial(role, Some(mg), constrained(c, mg))?;
            let predicted = |hm| model.predict(c, mg * GIB, Some(hm)).samples_per_s;
            validation.push(ValidationPoint {
                cpus: c,
                memory_gib: mg,
                measured: r.throughput.samples_per_s,
                measured_ci95: r.throughput.ci95_half_width,
                predicted_minio: predicted(HitModel::Minio),
                predicted_page_cache: predicted(HitModel::PageCache),
                role,
            });
        }
    }
    let validation_summary = [HitModel::Minio, HitModel::PageCache]
        .into_iter()
        .filter_map(|hm| summarize(&validation, hm))
        .collect();

    let isolation = first.isolation.backend.to_string();
    let profile = Profile {
        schema: SCHEMA.into(),
        source: format!("measured by synergy {}", env!("CARGO_PKG_VERSION")),
        workload: WorkloadInfo {
            name: spec.name.clone(),
            spec: Some(spec.origin.clone()),
            description: spec.description.clone(),
            batch_size: spec.batch_size,
            gpus,
            hit_model,
            iter_time_s: m
                .proportional
                .samples_per_s
                .filter(|t| *t > 0.0)
                .map(|t| spec.batch_size as f64 / t),
            class: None,
            dataset: ds.as_ref().map(|d| DatasetInfo {
                path: d.path.display().to_string(),
                items: d.files,
                bytes: d.bytes,
                mean_item_bytes: d.mean_file_bytes,
            }),
        },
        host: Some(HostInfo {
            hostname: nix::unistd::gethostname()
                .map(|h| h.to_string_lossy().into_owned())
                .unwrap_or_default(),
            cores: host_cores as usize,
            memory_bytes: host_mem,
            gpu: crate::measure::telemetry::GpuSampler::new(None)
                .and_then(|g| g.summary().devices.first().cloned()),
            kernel: nix::sys::utsname::uname()
                .map(|u| u.release().to_string_lossy().into_owned())
                .unwrap_or_default(),
            isolation,
            storage_limit_bytes_per_s: req.storage_limit.map(|b| b.0),
            storage_read_bytes_per_s: storage_seen,
        }),
        created: Some(now_rfc3339()),
        trials: run.journal.order.clone(),
        model: Some(model),
        server,
        matrix: m,
        per_gpu,
        demand,
        validation,
        validation_summary,
    };
    profile.write(&req.out)?;
    let _ = std::fs::remove_file(&journal_path);
    Ok(profile)
}

fn check_axis(flag: &str, v: &[f64]) -> Result<(), InputError> {
    if v.is_empty() || v.iter().any(|x| !(x.is_finite() && *x > 0.0)) {
        return Err(InputError::new(flag, "values must be positive numbers"));
    }
    if v.windows(2).any(|w| w[0] >= w[1]) {
        return Err(InputError::new(flag, "values must be strictly increasing"));
    }
    Ok(())
}

/// `n` grid points spread over the grid, leaving out the column the CPU sweep measured (the last,
/// where the whole dataset is cached), so they test what the model derived rather than what it saw.
pub fn held_out(cpus: &[f64], memory_gib: &[f64], n: usize) -> Vec<(f64, f64)> {
    let cols = if memory_gib.len() > 1 {
        &memory_gib[..memory_gib.len() - 1]
    } else {
        memory_gib
    };
    // Column-major order alternating rows, so consecutive picks differ in both axes.
    let mut cells = Vec::new();
    for (j, &m) in cols.iter().enumerate() {
        for k in 0..cpus.len() {
            let i = if j % 2 == 0 { k } else { cpus.len() - 1 - k };
            cells.push((cpus[i], m));
        }
    }
    if n == 0 || cells.is_empty() {
        return Vec::new();
    }
    if n >= cells.len() {
        return cells;
    }
    let mut picked: Vec<(f64, f64)> = (0..n)
        .map(|k| cells[((k as f64 + 0.5) * cells.len() as f64 / n as f64) as usize])
        .collect();
    picked.dedup();
    picked
}

fn summarize(points: &[ValidationPoint], model: HitModel) -> Option<ErrorSummary> {
    if points.is_empty() {
        return None;
    }
    let mut errs: Vec<f64> = points.iter().map(|p| p.error(model)).collect();
    errs.sort_by(f64::total_cmp);
    let n = errs.len();
    let median = if n % 2 == 1 {
        errs[n / 2]
    } else {
        (errs[n / 2 - 1] + errs[n / 2]) / 2.0
    };
    Some(ErrorSummary {
        hit_model: model,
        points: n,
        median_error: median,
        mean_error: errs.iter().sum::<f64>() / n as f64,
        max_error: errs[n - 1],
    })
}

pub(crate) fn host_memory_bytes() -> u64 {
    std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|t| {
            t.lines()
                .find(|l| l.starts_with("MemTotal:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|kb| kb.parse::<u64>().ok())
        })
        .map_or(0, |kb| kb * 1024)
}

/// Now as RFC 3339 UTC, from the system clock (no time-zone database needed).
fn now_rfc3339() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64);
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Civil-from-days (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn held_out_points_avoid_the_swept_column_and_spread() {
        let cpus = [0.5, 1.0, 1.5, 2.0];
        let mem = [1.0, 2.0, 3.0];
        let pts = held_out(&cpus, &mem, 4);
        assert_eq!(pts.len(), 4);
        assert!(pts.iter().all(|(_, m)| *m < 3.0));
        let distinct_cpus: std::collections::BTreeSet<_> =
            pts.iter().map(|(c, _)| (c * 4.0) as i64).collect();
        assert!(distinct_cpus.len() >= 3, "{pts:?}");
        assert_eq!(held_out(&cpus, &mem, 100).len(), 8);
        assert!(held_out(&cpus, &mem, 0).is_empty());
    }

    #[test]
    fn timestamps_are_rfc3339() {
        let t = now_rfc3339();
        assert_eq!(t.len(), 20);
        assert!(t.starts_with("20") && t.ends_with('Z'));
    }
}
