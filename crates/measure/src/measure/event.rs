//! What a workload reports of its progress, as the progress sources hand it on: steps (a job's own, or
//! one rank's of a distributed job), rates, what a probe saw, and lines that broke the protocol.

use crate::format::trial::ProbeReport;
use std::time::Instant;

/// One thing a workload reported, timestamped on arrival.
#[derive(Debug, Clone, PartialEq)]
pub enum ProgressEvent {
    /// A finished step.
    Step {
        /// When the line arrived.
        at: Instant,
        /// Samples in the step.
        samples: f64,
        /// Epoch, when the workload says.
        epoch: Option<u64>,
        /// Application-cache hits among the step's samples, when the workload says.
        cache_hits: Option<u64>,
        /// Application-cache misses among the step's samples, when the workload says.
        cache_misses: Option<u64>,
    },
    /// One rank's step of a distributed job (a line with `rank`); the job's own [`ProgressEvent::Step`]
    /// follows once every rank has made that step ([`crate::measure::ranks`]).
    RankStep(RankedStep),
    /// A rate the workload computed itself, samples per second.
    Rate {
        /// When the line arrived.
        at: Instant,
        /// Samples per second.
        samples_per_s: f64,
    },
    /// What a zero-change probe saw of the script (`{"probe": {...}}`, docs/pytorch.md).
    Probe(Box<ProbeReport>),
    /// A line that did not follow the protocol (kept for the report, not fatal).
    Malformed {
        /// The line, shortened.
        line: String,
    },
}

/// One rank's step, as it reported it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RankedStep {
    /// The rank.
    pub rank: u32,
    /// Ranks in the job, as that rank says.
    pub world_size: u32,
    /// When the line arrived.
    pub at: Instant,
    /// Samples in the step.
    pub samples: f64,
    /// Its epoch, when it says.
    pub epoch: Option<u64>,
    /// Application-cache hits, when it says.
    pub cache_hits: Option<u64>,
    /// Application-cache misses, when it says.
    pub cache_misses: Option<u64>,
}
