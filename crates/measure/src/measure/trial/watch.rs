//! Watching a running workload: progress events tallied into the estimator, the domain and host read
//! every [`SAMPLE_EVERY`] (and as each epoch turns), until the estimate converges or a limit stops it.
//! A workload re-budgeted in place is watched again from the change on ([`Feed`] outlives each watch).

use super::summary::{closest, epoch_stats, summarize};
use super::{EpochStats, TrialError, TrialRequest};
use crate::cancel::Cancel;
use crate::error::InputError;
use crate::format::trial::Disturbance;
use crate::format::trial::ProbeReport;
use crate::format::trial::Telemetry;
use crate::format::trial::{Estimate, StopReason};
use crate::isolate;
use crate::measure::contention::{self, HostReading, Reading};
use crate::measure::estimate::Estimator;
use crate::measure::event::ProgressEvent;
use crate::measure::progress::{self, PipeProgress, ProgressSource, RegexMatcher, RegexProgress};
use crate::measure::ranks::RankTally;
use crate::measure::telemetry::{GpuSampler, Peaks};
use crate::workload::launch::{self, ProgressStream};
use crate::workload::spec::ProgressSpec;
use indicatif::ProgressBar;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The workload's progress stream, read by its own thread for as long as the workload runs: one launch
/// may be watched at several budgets in turn.
pub(super) struct Feed {
    rx: Receiver<ProgressEvent>,
    reader: Option<JoinHandle<()>>,
    open: bool,
}

impl Feed {
    /// Starts reading `running`'s progress as `req`'s spec says it comes.
    pub(super) fn open(
        req: &TrialRequest,
        running: &mut launch::Running,
    ) -> Result<Self, TrialError> {
        let (tx, rx) = mpsc::channel();
        let source: Option<Box<dyn ProgressSource>> =
            match (running.progress.take(), &req.spec.progress) {
                (Some(ProgressStream::Pipe(f)), _) => Some(Box::new(PipeProgress::new(f))),
                (Some(ProgressStream::Output(r)), ProgressSpec::Regex { pattern, scale, .. }) => {
                    let m = RegexMatcher::new(pattern, *scale).map_err(|e| {
                        InputError::field(&req.spec.origin, "progress.pattern", e.to_string())
                    })?;
                    Some(Box::new(RegexProgress::new(r, m)))
                }
                _ => None,
            };
        let reader = source.map(|s| progress::spawn(s, tx));
        let open = reader.is_some();
        Ok(Feed { rx, reader, open })
    }
}

/// Whether `ev` happened before `start`: a step the workload made under an earlier budget.
fn before(ev: &ProgressEvent, start: Instant) -> bool {
    match ev {
        ProgressEvent::Step { at, .. } | ProgressEvent::Rate { at, .. } => *at < start,
        ProgressEvent::RankStep(s) => s.at < start,
        ProgressEvent::Probe(_) | ProgressEvent::Malformed { .. } => false,
    }
}

/// What watching a running workload produced.
pub(super) struct Watched {
    pub(super) estimate: Estimate,
    pub(super) stop_reason: StopReason,
    pub(super) steps: u64,
    pub(super) samples: f64,
    pub(super) duration_s: f64,
    pub(super) telemetry: Telemetry,
    pub(super) disturbance: Option<Disturbance>,
    pub(super) epochs: Vec<EpochStats>,
    pub(super) malformed: u64,
    pub(super) probe: Option<ProbeReport>,
}

/// Progress received so far.
struct Tally {
    start: Instant,
    est: Estimator,
    steps: u64,
    malformed: u64,
    /// `(t, hits, misses)` per step that reported application-cache counts.
    cache_steps: Vec<(f64, u64, u64)>,
    /// The epoch of the latest step, and whether a new one began since the last reading: windows of
    /// whole epochs start and end there, so the domain is read right then.
    epoch: Option<u64>,
    epoch_turned: bool,
    /// Per epoch: (epoch, time of its first and last step, its samples, its first step's samples).
    epochs: Vec<(u64, f64, f64, f64, f64)>,
    probe: Option<ProbeReport>,
    /// A distributed job's ranks, each with its own steps.
    ranks: RankTally,
}

impl Tally {
    /// Nothing received yet from a workload watched from `start`, which its probe described as `probe`
    /// before (a workload re-budgeted in place).
    fn new(start: Instant, est: Estimator, probe: Option<ProbeReport>) -> Self {
        Tally {
            start,
            est,
            steps: 0,
            malformed: 0,
            cache_steps: Vec::new(),
            epoch: None,
            epoch_turned: false,
            epochs: Vec::new(),
            probe,
            ranks: RankTally::default(),
        }
    }

    fn add(&mut self, ev: ProgressEvent) {
        if before(&ev, self.start) {
            return;
        }
        match ev {
            ProgressEvent::Step {
                at,
                samples,
                epoch,
                cache_hits,
                cache_misses,
            } => {
                let t = at.duration_since(self.start).as_secs_f64();
                // Epochs only move forward: a batch of the last epoch that a worker finished after
                // the next epoch's first (a loader that hands batches over as they are done, as the
                // built-in pipeline does) counts in the epoch now running, so each epoch is one span
                // of time and a whole-epoch window ends where the next epoch's first batch arrived.
                let epoch = epoch.map(|e| self.epoch.map_or(e, |now| e.max(now)));
                self.steps += 1;
                if epoch.is_some() && self.epoch.is_some() && epoch != self.epoch {
                    self.epoch_turned = true;
                }
                self.epoch = epoch.or(self.epoch);
                if let Some(e) = epoch {
                    match self.epochs.last_mut() {
                        Some(last) if last.0 == e => {
                            last.2 = t;
                            last.3 += samples;
                        }
                        _ => self.epochs.push((e, t, t, samples, samples)),
                    }
                }
                self.est.push_step(t, samples, epoch);
                if cache_hits.is_some() || cache_misses.is_some() {
                    self.cache_steps
                        .push((t, cache_hits.unwrap_or(0), cache_misses.unwrap_or(0)));
                }
            }
            ProgressEvent::Rate { at, samples_per_s } => {
                self.steps += 1;
                self.est
                    .push_rate(at.duration_since(self.start).as_secs_f64(), samples_per_s);
            }
            ProgressEvent::RankStep(s) => self.ranks.step(
                s.rank,
                s.world_size,
                s.at.duration_since(self.start).as_secs_f64(),
                s.samples,
            ),
            ProgressEvent::Probe(r) => {
                self.ranks.probe_line(&r);
                self.probe.get_or_insert_with(Default::default).add_line(*r);
            }
            ProgressEvent::Malformed { .. } => self.malformed += 1,
        }
    }
}

fn status_line(req: &TrialRequest, tally: &Tally, elapsed: f64) -> String {
    match tally.est.estimate() {
        Some(e) => format!(
            "{} @ {} cores: {:.1} ± {:.1} samples/s (±{:.1}%), {elapsed:.1} s",
            req.spec.name,
            req.cpus,
            e.samples_per_s,
            e.ci95_half_width,
            100.0 * e.rel_half_width()
        ),
        None => format!(
            "{} @ {} cores: warming up, {} steps, {elapsed:.1} s",
            req.spec.name, req.cpus, tally.steps
        ),
    }
}

/// How often domain statistics and NVML are read.
const SAMPLE_EVERY: Duration = Duration::from_millis(250);

/// Watches `running` from `start` (its launch, or the change of its budget) until its throughput at
/// `req`'s budget is known. `peaks` carries on from earlier watches of the same launch: what the job
/// kept resident while starting is part of its footprint whatever its budget is now. `probe` is what
/// its probe said before `start`.
#[allow(clippy::too_many_arguments)]
pub(super) fn watch(
    req: &TrialRequest,
    feed: &mut Feed,
    running: &mut launch::Running,
    domain: &mut dyn isolate::Domain,
    start: Instant,
    peaks: &mut Peaks,
    probe: Option<ProbeReport>,
    bar: &ProgressBar,
    cancel: &Cancel,
) -> Result<Watched, TrialError> {
    let mut tally = Tally::new(start, Estimator::new(req.estimator.clone()), probe);
    let cores = domain.cpu_list().to_vec();
    let read = |domain: &dyn isolate::Domain, t_s: f64| Reading {
        t_s,
        domain: domain.stats(),
        host: HostReading::read(&cores, &domain.pids()),
    };
    let mut readings: Vec<Reading> = Vec::new();
    let probe = cores
        .first()
        .and_then(|&c| crate::measure::hostspeed::SpeedProbe::start(c, SAMPLE_EVERY));
    let visible: Option<Vec<u32>> = std::env::var("CUDA_VISIBLE_DEVICES")
        .ok()
        .map(|v| v.split(',').filter_map(|x| x.trim().parse().ok()).collect());
    let mut gpu = GpuSampler::new(visible.as_deref());
    let mut last_sample = Instant::now() - SAMPLE_EVERY;
    let mut last_event = Instant::now();

    let stop_reason = loop {
        if feed.open {
            match feed.rx.recv_timeout(Duration::from_millis(50)) {
                Ok(ev) => {
                    last_event = Instant::now();
                    tally.add(ev);
                    // Take the whole burst before deciding anything.
                    while let Ok(ev) = feed.rx.try_recv() {
                        tally.add(ev);
                    }
                }
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => feed.open = false,
            }
        } else {
            std::thread::sleep(Duration::from_millis(50));
        }
        let now = Instant::now();
        let elapsed = now.duration_since(start).as_secs_f64();
        if now.duration_since(last_sample) >= SAMPLE_EVERY || tally.epoch_turned {
            last_sample = now;
            tally.epoch_turned = false;
            let r = read(&*domain, elapsed);
            peaks.observe(&r.domain);
            readings.push(r);
            if let Some(g) = gpu.as_mut() {
                g.sample();
            }
            bar.set_message(status_line(req, &tally, elapsed));
            bar.tick();
        }
        if let Some(sig) = cancel.signal() {
            return Err(TrialError::Interrupted(sig));
        }
        if tally.est.converged().is_some() {
            break StopReason::Converged;
        }
        if tally.est.epoch_ended() {
            break StopReason::EpochEnded;
        }
        if let Some(status) = running.poll_exit() {
            // The reader finishes once the pipe's last writer is gone; take everything it read.
            if let Some(handle) = feed.reader.as_ref() {
                let deadline = Instant::now() + Duration::from_millis(500);
                while !handle.is_finished() && Instant::now() < deadline {
                    std::thread::sleep(Duration::from_millis(5));
                }
            }
            while let Ok(ev) = feed.rx.try_recv() {
                tally.add(ev);
            }
            if !status.success() || tally.est.estimate().is_none() {
                return Err(TrialError::WorkloadExited {
                    status: status.to_string(),
                    steps: tally.steps,
                    // A script that failed says why on its stderr; one that finished without a
                    // step is what the probe can explain.
                    tail: probe_hint(req, &tally)
                        .filter(|_| status.success())
                        .unwrap_or_default(),
                });
            }
            break StopReason::WorkloadExited;
        }
        if elapsed >= req.estimator.max_total_s {
            break StopReason::MaxDuration;
        }
        if now.duration_since(last_event) >= req.no_progress_timeout {
            break StopReason::NoProgress;
        }
    };
    let hint = probe_hint(req, &tally);
    let launcher_waited = tally.ranks.launcher_started_no_rank();
    // Some rank reported: the job as a whole made no step.
    let what = if tally.ranks.is_distributed() {
        "no step of the whole job"
    } else {
        "no progress from the workload"
    };
    let Tally {
        est,
        steps,
        malformed,
        cache_steps,
        epochs,
        probe: mut probe_report,
        ranks,
        ..
    } = tally;
    let duration_s = start.elapsed().as_secs_f64();
    let last = read(&*domain, duration_s);
    peaks.observe(&last.domain);
    readings.push(last);

    let estimate = est.estimate().ok_or_else(|| match (stop_reason, hint) {
        // No step at all: what the probe saw, or the lines that did not follow the protocol, say why
        // better than the time it waited.
        (StopReason::NoProgress | StopReason::MaxDuration, Some(hint)) => {
            let message = format!("{what} in {duration_s:.0} s{hint}");
            match launcher_waited {
                true => TrialError::NoRanks(message),
                false => TrialError::NoEstimate(message),
            }
        }
        (StopReason::NoProgress | StopReason::MaxDuration, None) if steps == 0 && malformed > 0 => {
            TrialError::NoEstimate(format!(
                "none of the workload's {malformed} progress lines followed the protocol (one JSON object per line with `samples`, or the spec's `progress` pattern); check its `progress` settings in {}",
                req.spec.origin
            ))
        }
        (StopReason::NoProgress, None) if steps == 0 => TrialError::NoEstimate(format!(
            "no progress from the workload in the first {:.0} s at {} cores: either it did not get through its start-up on this budget (a job of several processes, each importing its framework, starts slowly on a fraction of a core: measure it on more cores), or it reports no progress (check its `progress` settings in {})",
            req.no_progress_timeout.as_secs_f64(),
            req.cpus,
            req.spec.origin
        )),
        (StopReason::NoProgress, None) => TrialError::NoEstimate(format!(
            "no progress from the workload for {:.0} s after {steps} steps; check its `progress` settings in {}",
            req.no_progress_timeout.as_secs_f64(),
            req.spec.origin
        )),
        (StopReason::MaxDuration, None) => TrialError::TooFewSteps { steps, duration_s },
        (stop_reason, _) => TrialError::NoEstimate(format!(
            "only {steps} steps in {duration_s:.1} s ({stop_reason}), too few to estimate throughput"
        )),
    })?;
    if ranks.is_distributed() {
        ranks.fill(
            probe_report.get_or_insert_with(ProbeReport::default),
            estimate.window_start_s,
            estimate.window_start_s + estimate.measured_s,
        );
    }
    let speed: Vec<(f64, f64)> = probe
        .map(|p| p.finish())
        .unwrap_or_default()
        .into_iter()
        .map(|(at, v)| (at.saturating_duration_since(start).as_secs_f64(), v))
        .collect();
    let window = closest(&readings, estimate.window_start_s)
        .zip(closest(
            &readings,
            estimate.window_start_s + estimate.measured_s,
        ))
        .filter(|(a, b)| b.t_s - a.t_s > 0.5);
    let telemetry = summarize(
        window,
        &estimate,
        &readings,
        peaks,
        &cache_steps,
        gpu.as_ref(),
    );
    let disturbance =
        window.map(|(a, b)| contention::assess(req.cpus.0, cores.len().max(1), a, b, &speed));
    let epochs = epoch_stats(&epochs, &readings);
    Ok(Watched {
        estimate,
        stop_reason,
        steps,
        samples: est.total_samples(),
        duration_s,
        telemetry,
        disturbance,
        epochs,
        malformed,
        probe: probe_report,
    })
}

/// Why a job gave no steps, when the trial can tell: which of a distributed job's ranks reported and which
/// did not ([`RankTally::describe`]); for a probed script, that the probe never saw PyTorch, or saw PyTorch
/// but no DataLoader batch (it counts only those).
fn probe_hint(req: &TrialRequest, tally: &Tally) -> Option<String> {
    if tally.steps > 0 {
        return None;
    }
    if let Some(ranks) = tally.ranks.describe() {
        return Some(ranks);
    }
    req.spec.probe?;
    Some(match &tally.probe {
        Some(p) if p.torch == Some(true) => "; the PyTorch probe saw the script load torch's data loading but iterate no `torch.utils.data.DataLoader`, and it counts only DataLoader batches: measure such a script through a spec whose `progress` pattern reads its own log (docs/workload-spec.md)".to_string(),
        _ => "; the PyTorch probe saw no import of `torch.utils.data`: either the script uses no PyTorch DataLoader (the probe counts only DataLoader batches: measure it through a spec whose `progress` pattern reads its own log, docs/workload-spec.md), or its Python does not read a `sitecustomize` from PYTHONPATH (`python -S` and `-I` do not)".to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::estimate::EstimatorConfig;

    #[test]
    fn a_batch_of_the_last_epoch_that_arrives_late_counts_in_the_current_one() {
        let start = Instant::now();
        let mut tally = Tally::new(start, Estimator::new(EstimatorConfig::default()), None);
        for (k, e) in [0, 0, 1, 0, 1, 1, 2].into_iter().enumerate() {
            tally.add(ProgressEvent::Step {
                at: start + Duration::from_millis(100 * (k as u64 + 1)),
                samples: 32.0,
                epoch: Some(e),
                cache_hits: None,
                cache_misses: None,
            });
        }
        let epochs: Vec<(u64, f64)> = tally.epochs.iter().map(|e| (e.0, e.3)).collect();
        assert_eq!(epochs, [(0, 64.0), (1, 128.0), (2, 32.0)]);
    }
}
