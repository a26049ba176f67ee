//! Workloads: the spec that describes how to launch one, its dataset, the launcher that starts it under
//! the launch contract, zero-change probes for scripts that cannot be edited, and the built-in reference
//! workloads (image, audio, text) that stand in for real training on hosts without a GPU.

pub mod builtin;
pub mod dataset;
pub mod launch;
pub mod probe;
pub mod spec;

pub use spec::WorkloadSpec;

/// Environment variables of the launch contract (docs/architecture.md §3.1).
pub mod env {
    /// CPU cores granted (may be fractional).
    pub const CPUS: &str = "SYNERGY_CPUS";
    /// Core ids of the cpuset, comma-separated.
    pub const CPU_LIST: &str = "SYNERGY_CPU_LIST";
    /// Application-level dataset cache budget in bytes.
    pub const CACHE_BYTES: &str = "SYNERGY_CACHE_BYTES";
    /// `1`: synthetic in-memory batches, no loading or preprocessing.
    pub const SYNTHETIC: &str = "SYNERGY_SYNTHETIC";
    /// File descriptor of the progress pipe.
    pub const PROGRESS_FD: &str = "SYNERGY_PROGRESS_FD";
    /// Path of the same progress channel (a FIFO): what a process opens that did not inherit the
    /// descriptor, as the ranks a launcher such as `torchrun` starts with their descriptors closed.
    pub const PROGRESS_PATH: &str = "SYNERGY_PROGRESS_PATH";
    /// JSON file of the run's totals (`samples_done`, `steps_done`): read at start, rewritten while running.
    pub const STATE_FILE: &str = "SYNERGY_STATE_FILE";
}

use crate::error::InputError;

/// Errors from generating datasets, running built-in workloads and launching commands.
#[derive(Debug, thiserror::Error)]
pub enum WorkloadError {
    /// Bad input (names the file or flag).
    #[error(transparent)]
    Input(#[from] InputError),
    /// A file or system call failed.
    #[error("{context}: {source}")]
    Io {
        /// What was being done, naming the path.
        context: String,
        /// The underlying failure.
        #[source]
        source: std::io::Error,
    },
    /// SIGINT or SIGTERM arrived; what was half-made has been removed.
    #[error("interrupted by signal {0}")]
    Interrupted(i32),
    /// Anything else, described.
    #[error("{0}")]
    Other(String),
}

impl WorkloadError {
    /// Wraps an I/O error with what was being done.
    pub fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        WorkloadError::Io {
            context: context.into(),
            source,
        }
    }
}
