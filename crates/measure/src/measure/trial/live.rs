//! One launch of a workload in its isolation domain, measured at one budget or at several in turn. A job
//! re-budgeted in place keeps running while its domain is resized live, and each budget is measured from
//! the change on, once the steps queued under the budget before have drained (docs/profile-format.md,
//! "The CPU sweep in one launch").

use super::watch::{watch, Feed};
use super::{host_cores, prepare_dataset, unique_name, validate, TrialError, TrialRequest};
use crate::cancel::Cancel;
use crate::error::{InputError, Setting};
use crate::format::trial::{
    CacheState, DatasetReport, IsolationKind, IsolationReport, ProbeReport, TrialAllocation,
    TrialResult, TRIAL_SCHEMA,
};
use crate::isolate::ledger::CoreLease;
use crate::isolate::{self, pagecache, Budget, Domain, IsolateError, Isolation};
use crate::measure::estimate::EstimatorConfig;
use crate::measure::telemetry::Peaks;
use crate::units::{Bytes, Cores};
use crate::workload::launch::{self, LaunchConfig};
use crate::workload::WorkloadError;
use indicatif::ProgressBar;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// Seconds after a change of budget that never count: the batches the loader had ready were made under
/// the budget before, and a squeezed job delivers them at the old rate.
pub const IN_PLACE_SETTLE_S: f64 = 2.0;
/// Steps after a change of budget that never count, whatever the time, where the probe did not say how
/// many loader workers the job has: a loader's prefetch queue drains first.
pub const IN_PLACE_SETTLE_STEPS: u64 = 8;
/// Batches each loader worker keeps ready: PyTorch's default `prefetch_factor`. A job whose workers the
/// probe counted settles after that many steps per worker (two at least), since at half a core every
/// step more costs seconds.
const PREFETCHED_PER_WORKER: u64 = 2;

/// Steps a job of `workers` loader workers (`None`: not known) needs after a change of budget.
fn settle_steps(workers: Option<u32>) -> u64 {
    workers.map_or(IN_PLACE_SETTLE_STEPS, |w| {
        (PREFETCHED_PER_WORKER * u64::from(w)).max(2)
    })
}

/// A launched workload in its domain, on the cores leased for the largest budget it will be measured at.
/// Dropped without [`LiveTrial::finish`] (an error on the way), it still kills the workload and removes
/// its domain.
pub struct LiveTrial {
    /// The request it was launched with.
    req: TrialRequest,
    domain: Box<dyn Domain>,
    running: launch::Running,
    feed: Feed,
    /// The domain's budget now.
    budget: Budget,
    backend: IsolationKind,
    chosen_because: String,
    setup_ms: f64,
    /// The dataset's files, for the residency each measurement starts with.
    data: Option<(DatasetReport, Vec<PathBuf>)>,
    peaks: Peaks,
    probe: Option<ProbeReport>,
    measured: usize,
    ended: bool,
    /// Released after the domain is destroyed (fields drop in order).
    lease: CoreLease,
    /// Dropped last: a cgroup v2 backend puts back the host's cgroups it prepared when its last user
    /// goes, which must be after the domain under them is removed.
    _isolation: Box<dyn Isolation>,
}

impl LiveTrial {
    /// Prepares the dataset and its page cache as `req` says, claims its cores, creates its domain and
    /// launches the workload in it at `req.cpus`, the most it can be measured at.
    pub fn start(
        req: &TrialRequest,
        bar: &ProgressBar,
        cancel: &Cancel,
    ) -> Result<Self, TrialError> {
        validate(req)?;
        let spec = &req.spec;
        // A synthetic trial reads no data, but the dataset is still made when absent: a built-in
        // workload's ingestion rate may be relative to this host's one-core rate on it.
        let prepared = prepare_dataset(spec, bar, cancel)?;
        let data = if req.synthetic { None } else { prepared };
        if let Some(sig) = cancel.signal() {
            return Err(TrialError::Interrupted(sig));
        }

        let read_limit = match (req.storage_limit, &data) {
            (Some(bps), Some((dir, _, _))) => Some((isolate::block_device_of(dir)?, bps)),
            _ => None,
        };
        let paths: Vec<PathBuf> = data
            .as_ref()
            .map(|(_, files, _)| files.paths().map(|p| p.to_path_buf()).collect())
            .unwrap_or_default();
        if data.is_some() {
            let ctx = |what: &str| format!("{what} the dataset's page cache");
            match req.cache_state {
                CacheState::AsIs => {}
                CacheState::Cold => {
                    bar.set_message("evicting the dataset from the page cache");
                    pagecache::evict(&paths).map_err(|e| WorkloadError::io(ctx("evicting"), e))?;
                }
                CacheState::Warm => {
                    bar.set_message("reading the dataset into the page cache");
                    pagecache::prewarm(&paths)
                        .map_err(|e| WorkloadError::io(ctx("prewarming"), e))?;
                }
            }
        }
        let data_report = match &data {
            Some((dir, files, generated)) => {
                let resident = pagecache::residency(&paths).map_err(|e| {
                    WorkloadError::io("reading the dataset's page-cache residency", e)
                })?;
                let bytes = files.total_bytes();
                Some((
                    DatasetReport {
                        path: dir.clone(),
                        files: files.files.len() as u64,
                        bytes,
                        mean_file_bytes: bytes as f64 / files.files.len() as f64,
                        resident_fraction_at_start: resident.fraction(),
                        generated: *generated,
                    },
                    paths,
                ))
            }
            None => None,
        };

        let (backend, why) = isolate::detect(req.isolation)?;
        // Reads are counted even without a limit: a memory-limited trial's hit ratio comes from them.
        let count_reads_on = match (&read_limit, &data) {
            (None, Some((dir, _, _))) => isolate::block_device_of(dir).ok(),
            _ => None,
        };
        let budget = Budget {
            cpus: req.cpus,
            cpu_list: req.cpu_list.clone(),
            mem_limit: req.mem_limit,
            read_limit,
            count_reads_on,
        };
        isolate::require(
            &*backend,
            &why,
            req.isolation,
            &budget.limits(),
            "this trial",
        )?;
        // Cores come from the host-wide ledger, so two synergy processes never pin the same ones.
        let lease = match &budget.cpu_list {
            Some(list) => isolate::ledger::claim_exact(list),
            None => isolate::ledger::claim(req.cpus.threads(), &host_cores()),
        }
        .map_err(IsolateError::from)?;
        let budget = Budget {
            cpu_list: Some(lease.cores().to_vec()),
            ..budget
        };
        let chosen_because = match lease.unledgered() {
            Some(reason) => format!("{why}; {reason}"),
            None => why,
        };
        let t0 = Instant::now();
        let mut domain = backend.create(&unique_name(), &budget)?;
        let setup_ms = t0.elapsed().as_secs_f64() * 1e3;
        let cpu_list = domain.cpu_list().to_vec();

        // Synthetic runs do not read the dataset, but the command line still names it.
        let dataset_dir = match &data {
            Some((d, _, _)) => Some(d.clone()),
            None => spec.dataset_dir()?,
        };
        let launch_cfg = LaunchConfig {
            spec,
            dataset: dataset_dir.as_deref(),
            cpus: req.cpus,
            cpu_list: &cpu_list,
            cache_bytes: req.cache_bytes,
            synthetic: req.synthetic,
            setup: domain.child_setup(),
            extra_args: &[],
            extra_env: &[],
            ranks: None,
        };
        let mut running = match launch::launch(&launch_cfg) {
            Ok(r) => r,
            Err(e) => {
                // Nothing ran in the domain, but it must still go.
                let _ = domain.destroy();
                return Err(e.into());
            }
        };
        domain.adopt(running.child.id() as i32);
        let feed = match Feed::open(req, &mut running) {
            Ok(f) => f,
            Err(e) => {
                let _ = domain.destroy();
                running.stop(Duration::from_millis(500));
                return Err(e);
            }
        };
        Ok(LiveTrial {
            req: req.clone(),
            domain,
            running,
            feed,
            budget,
            backend: backend.kind(),
            chosen_because,
            setup_ms,
            data: data_report,
            peaks: Peaks::default(),
            probe: None,
            measured: 0,
            ended: false,
            lease,
            _isolation: backend,
        })
    }

    /// The cores it was launched at, the most it can be measured at.
    pub fn launched_at(&self) -> Cores {
        self.req.cpus
    }

    /// Measures the running workload at `cpus` cores (at most those it was launched at) until
    /// `estimator` stops it; the workload keeps running. The domain is resized to `cpus` on the first of
    /// the leased cores when it holds another budget. The first measurement counts from the launch; a
    /// later one counts from now, with [`IN_PLACE_SETTLE_S`] and a drained prefetch queue at least of
    /// warm-up ([`IN_PLACE_SETTLE_STEPS`] where the loader's workers are not known). An error ends the
    /// launch (the workload is stopped and its domain removed), except [`TrialError::TooFewSteps`]:
    /// the workload runs on, to be measured for longer.
    pub fn measure(
        &mut self,
        cpus: Cores,
        estimator: &EstimatorConfig,
        bar: &ProgressBar,
        cancel: &Cancel,
    ) -> Result<TrialResult, TrialError> {
        if self.ended {
            return Err(TrialError::NoEstimate(
                "the workload's launch has ended: launch it again".into(),
            ));
        }
        if !(cpus.0 > 0.0 && cpus.0 <= self.req.cpus.0) {
            return Err(InputError::setting(
                Setting::Cpus,
                format!(
                    "{cpus} cores cannot be measured in place in a launch at {} cores",
                    self.req.cpus
                ),
            )
            .into());
        }
        let mut step = TrialRequest {
            cpus,
            estimator: estimator.clone(),
            ..self.req.clone()
        };
        let first = self.measured == 0;
        let mut setup_ms = if first { self.setup_ms } else { 0.0 };
        if cpus != self.budget.cpus {
            let budget = Budget {
                cpus,
                cpu_list: Some(self.lease.cores()[..cpus.threads()].to_vec()),
                ..self.budget.clone()
            };
            let t0 = Instant::now();
            if let Err(e) = self.domain.update(&budget) {
                return Err(self.end_with(e.into(), &step));
            }
            self.budget = budget;
            setup_ms += t0.elapsed().as_secs_f64() * 1e3;
        }
        // The first measurement's warm-up counts from the launch, as a fresh trial's does.
        let start = if first {
            self.running.started()
        } else {
            step.estimator.warmup_s = step.estimator.warmup_s.max(IN_PLACE_SETTLE_S);
            let workers = self.probe.as_ref().and_then(|p| p.workers);
            step.estimator.warmup_steps = step.estimator.warmup_steps.max(settle_steps(workers));
            Instant::now()
        };
        let dataset = match &self.data {
            Some((report, _)) if first => Some(report.clone()),
            Some((report, paths)) => {
                let resident = match pagecache::residency(paths) {
                    Ok(r) => r,
                    Err(e) => {
                        let e = WorkloadError::io("reading the dataset's page-cache residency", e);
                        return Err(self.end_with(e.into(), &step));
                    }
                };
                Some(DatasetReport {
                    resident_fraction_at_start: resident.fraction(),
                    ..report.clone()
                })
            }
            None => None,
        };
        let watched = watch(
            &step,
            &mut self.feed,
            &mut self.running,
            self.domain.as_mut(),
            start,
            &mut self.peaks,
            self.probe.clone(),
            bar,
            cancel,
        );
        let obs = match watched {
            Ok(obs) => obs,
            // Too slow for this trial's length, but running: it may be measured again for longer.
            Err(e @ TrialError::TooFewSteps { .. }) => return Err(e),
            Err(e) => return Err(self.end_with(e, &step)),
        };
        self.measured += 1;
        self.probe = obs.probe.clone();
        Ok(TrialResult {
            schema: TRIAL_SCHEMA.into(),
            workload: step.spec.name.clone(),
            spec: step.spec.origin.clone(),
            allocation: TrialAllocation {
                cpus,
                cpu_list: self.domain.cpu_list().to_vec(),
                mem_limit_bytes: step.mem_limit.map(|b| b.0),
                cache_bytes: step.cache_bytes.map(|b| b.0),
                storage_limit_bytes_per_s: step.storage_limit.map(|b| b.0),
                cache_state: step.cache_state,
                synthetic: step.synthetic,
                launched_at_cpus: (cpus != self.req.cpus || !first).then_some(self.req.cpus),
            },
            throughput: obs.estimate,
            stop_reason: obs.stop_reason,
            steps: obs.steps,
            samples: obs.samples,
            duration_s: obs.duration_s,
            isolation: IsolationReport {
                backend: self.backend,
                chosen_because: self.chosen_because.clone(),
                setup_ms,
                teardown_ms: 0.0,
            },
            dataset,
            telemetry: obs.telemetry,
            disturbance: obs.disturbance,
            epochs: obs.epochs,
            malformed_lines: obs.malformed,
            probe: obs.probe,
        })
    }

    /// Stops the workload and removes its domain; the milliseconds the removal took.
    pub fn finish(mut self) -> Result<f64, TrialError> {
        let t0 = Instant::now();
        let destroyed = self.end();
        destroyed?;
        Ok(t0.elapsed().as_secs_f64() * 1e3)
    }

    /// Removes the domain (which kills what it holds before the workload is reaped, so no process id it
    /// signals can have been reused), then stops and reaps the workload.
    fn end(&mut self) -> Result<(), IsolateError> {
        self.ended = true;
        let destroyed = self.domain.destroy();
        self.running.stop(Duration::from_millis(500));
        destroyed
    }

    /// Ends the launch after `e` stopped the measurement of `step`, and says why in the user's terms: an
    /// exit under a memory limit that the kernel's OOM killer caused, or the end of the workload's
    /// stderr.
    fn end_with(&mut self, e: TrialError, step: &TrialRequest) -> TrialError {
        let oom = self.domain.stats().oom_kills.unwrap_or(0);
        let _ = self.end();
        match e {
            TrialError::WorkloadExited { .. } if oom > 0 => TrialError::OutOfMemory {
                limit: step.mem_limit.unwrap_or(Bytes(0)),
                cpus: step.cpus,
                kills: oom,
            },
            TrialError::WorkloadExited {
                status,
                steps,
                tail: hint,
            } => {
                let tail = self.running.stderr_tail(2000);
                let tail = if tail.is_empty() {
                    hint
                } else {
                    format!("{hint}; its stderr ends with:\n{tail}")
                };
                TrialError::WorkloadExited {
                    status,
                    steps,
                    tail,
                }
            }
            e => e,
        }
    }
}

impl Drop for LiveTrial {
    fn drop(&mut self) {
        if !self.ended {
            let _ = self.end();
        }
    }
}
