//! One scheduling round, planned the same way for the simulator and the executor
//! (docs/architecture.md §5.1-5.4): the policy orders the active jobs, the runnable set takes them in that
//! order while their GPU counts fit, and the mechanism allocates the cluster from empty.

use super::{policy_order, runnable_set, Catalog, ClusterState, Grant, JobState};
use super::{Mechanism, MechanismStats, Policy, Request};

/// The decisions of one round. Its vectors are reused from round to round, so a simulator planning
/// millions of rounds allocates them once.
#[derive(Debug, Clone, Default)]
pub struct Round {
    /// The runnable set: indices into the active jobs, in policy order.
    pub runnable: Vec<usize>,
    /// What the mechanism was asked for, one per runnable job.
    pub requests: Vec<Request>,
    /// What each runnable job got (`grants[k]` for `runnable[k]`); empty parts when skipped.
    pub grants: Vec<Grant>,
    /// What the mechanism reported.
    pub stats: MechanismStats,
}

impl Round {
    /// Plans the round starting at `now_s` for the active `jobs` (the policy may mark some as starved):
    /// `state` is emptied and left holding the allocation.
    pub fn plan(
        &mut self,
        policy: &dyn Policy,
        mechanism: &mut dyn Mechanism,
        catalog: &Catalog,
        state: &mut ClusterState,
        jobs: &mut [JobState],
        now_s: f64,
    ) {
        state.reset();
        let order = policy_order(policy, jobs, now_s);
        self.runnable = runnable_set(jobs, &order, state.free_gpus_total);
        self.requests.clear();
        self.requests.extend(self.runnable.iter().map(|&i| Request {
            model: jobs[i].model,
            gpus: jobs[i].gpus,
        }));
        // Emptied in place: their vectors are reused round after round.
        self.grants.truncate(self.requests.len());
        for g in &mut self.grants {
            g.parts.clear();
            g.demoted = false;
        }
        self.grants.resize(self.requests.len(), Grant::default());
        self.stats = mechanism.allocate(catalog, state, &self.requests, &mut self.grants);
        debug_assert!(state.consistent(), "a server is over-allocated");
    }
}
