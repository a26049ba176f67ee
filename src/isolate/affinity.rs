//! The fallback backend: pins the workload to whole cores with `sched_setaffinity`.

use super::*;

/// Pins workloads to cores; enforces no memory or storage limit.
pub struct AffinityBackend;

impl AffinityBackend {
    /// The backend (always available).
    pub fn new() -> Self {
        AffinityBackend
    }
}

impl Default for AffinityBackend {
    fn default() -> Self {
        Self::new()
    }
}

impl Isolation for AffinityBackend {
    fn kind(&self) -> IsolationKind {
        IsolationKind::Affinity
    }
    fn create(&self, _name: &str, _budget: &Budget) -> Result<Box<dyn Domain>, IsolateError> {
        unimplemented!()
    }
}
