//! The cluster simulator (docs/architecture.md §5): traces (CSV or generated), the round loop driving a [`Policy`](crate::sched::Policy) and a
//! [`Mechanism`](crate::sched::Mechanism), metrics and their outputs, and parallel sweeps.

pub mod engine;
pub mod metrics;
pub mod output;
pub mod pyrandom;
pub mod semantics;
pub mod spool;
pub mod sweep;
pub mod table;
pub mod trace;

pub use engine::{
    check_round, run, run_watched, Recorder, SimConfig, TraceFile, TraceSource, Unwatched, Watch,
};
pub use metrics::{SimResult, Summary};
pub use semantics::SimSemantics;

/// Errors of the simulator.
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    /// Bad input (trace, cluster file, profile, flag); names the file or flag, line and field.
    #[error(transparent)]
    Input(#[from] crate::error::InputError),
    /// A profile file could not be read.
    #[error(transparent)]
    Profile(#[from] crate::format::profile::ProfileError),
    /// The window did not finish within [`engine::MAX_SIMULATED_S`]: jobs that can never run.
    #[error(
        "the measured jobs had not finished after {simulated_h:.0} simulated hours; giving up"
    )]
    NoProgress {
        /// Simulated time when it gave up, hours.
        simulated_h: f64,
    },
    /// The output directory is being written by another run, or could not be staged.
    #[error(transparent)]
    Output(#[from] crate::fsutil::StageError),
    /// Reading or writing failed.
    #[error("{context}")]
    Io {
        /// What, naming the path.
        context: String,
        /// The failure.
        #[source]
        source: std::io::Error,
    },
}

impl SimError {
    /// Whether the user fixes this by changing their input.
    pub fn is_input(&self) -> bool {
        matches!(
            self,
            SimError::Input(_)
                | SimError::Profile(crate::format::profile::ProfileError::Invalid(_))
        )
    }
}
