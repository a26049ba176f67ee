//! What a real run observes of its jobs (docs/run.md, "Observations"): every round, each running job's
//! progress over the round becomes a throughput at the allocation it held, with its 95% interval (the
//! trials' estimator) and whether other work took the CPU it was granted (the trials' contention rule,
//! docs/profile-format.md "Disturbed trials"). Each becomes a line of the run's observation log
//! ([`crate::format::observation`]).

use crate::format::trial::{Disturbance, Estimate, IsolationKind};
use crate::measure::estimate::{Estimator, EstimatorConfig};
use std::time::Instant;

/// Warm-up left out of an observation window, seconds: after a start, a resize or a thaw the loaders
/// refill the pipeline (docs/run.md, "Observations"). The estimator's MSER truncation removes a longer
/// transient.
const OBSERVE_WARMUP_S: f64 = 1.0;

/// The steps a job made since its observation window opened, for the trials' estimator.
#[derive(Debug, Clone)]
pub(crate) struct Steps {
    /// When the window opened.
    pub(crate) opened: Instant,
    steps: Vec<(Instant, f64, Option<u64>)>,
}

impl Steps {
    /// A window opening now.
    pub(crate) fn open() -> Self {
        Steps {
            opened: Instant::now(),
            steps: Vec::new(),
        }
    }

    /// Adds a step of `samples` that ended `at` (one from before the window opened is not its).
    pub(crate) fn push(&mut self, at: Instant, samples: f64, epoch: Option<u64>) {
        if at >= self.opened {
            self.steps.push((at, samples, epoch));
        }
    }

    /// The throughput over the window past its warm-up, once enough steps arrived for an estimate.
    pub(crate) fn estimate(&self) -> Option<Estimate> {
        let mut est = Estimator::new(EstimatorConfig {
            warmup_s: OBSERVE_WARMUP_S,
            ..EstimatorConfig::default()
        });
        for (at, samples, epoch) in &self.steps {
            est.push_step(
                at.duration_since(self.opened).as_secs_f64(),
                *samples,
                *epoch,
            );
        }
        est.estimate()
    }
}

/// What a backend saw of one running job over one round (before the executor names the job and its
/// profile).
#[derive(Debug, Clone, PartialEq)]
pub struct Window {
    /// Throughput over the round, past the warm-up after a start, resize or resume.
    pub throughput: Estimate,
    /// Whether other work took the CPU the job was granted, and the readings behind the verdict.
    pub disturbance: Option<Disturbance>,
    /// The isolation backend that enforced the allocation.
    pub isolation: IsolationKind,
}
