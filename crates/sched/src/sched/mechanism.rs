//! The allocation mechanisms of docs/architecture.md §5.4 that need no solver: GPU-proportional, greedy best-case
//! demand, and Synergy-TUNE.

use super::place::{
    best_share, commit, fallback_share, find_into, place_with_demotion, speeds, Share,
};
use super::{Grant, Mechanism, MechanismStats, Request};
use crate::sched::catalog::Catalog;
use crate::sched::cluster::ClusterState;
use crate::sched::cluster::Part;

/// Every GPU brings its server's per-GPU share of cores and memory.
#[derive(Debug, Clone, Copy, Default)]
pub struct Proportional;

impl Mechanism for Proportional {
    fn name(&self) -> &'static str {
        "proportional"
    }
    fn allocate(
        &mut self,
        _catalog: &Catalog,
        state: &mut ClusterState,
        runnable: &[Request],
        grants: &mut [Grant],
    ) -> MechanismStats {
        let mut parts = Vec::new();
        for (slot, req) in runnable.iter().enumerate() {
            // Every placed GPU holds exactly its share, so any free GPU has its share free too.
            let found = find_into(state, req.gpus, Share::Proportional, &mut parts);
            assert!(found, "GPU counts of the runnable set fit the cluster");
            place(state, grants, slot, &parts);
        }
        MechanismStats::default()
    }
}

/// Places each job's best-case demand, first fit; a job that does not fit waits for the next round.
#[derive(Debug, Clone, Copy, Default)]
pub struct Greedy;

impl Mechanism for Greedy {
    fn name(&self) -> &'static str {
        "greedy"
    }
    fn allocate(
        &mut self,
        catalog: &Catalog,
        state: &mut ClusterState,
        runnable: &[Request],
        grants: &mut [Grant],
    ) -> MechanismStats {
        let widest = state.widest_server().gpus;
        let mut parts = Vec::new();
        for (slot, req) in runnable.iter().enumerate() {
            let share = if req.gpus > widest {
                Share::Proportional
            } else {
                best_share(catalog, state, req)
            };
            if find_into(state, req.gpus, share, &mut parts) {
                place(state, grants, slot, &parts);
            }
        }
        MechanismStats::default()
    }
}

/// Synergy-TUNE: best-case demand where it fits, else GPU-proportional, else demote over-provisioned
/// neighbours back to GPU-proportional until it fits. No job runs below GPU-proportional speed and every
/// runnable job runs.
#[derive(Debug, Clone, Copy, Default)]
pub struct Tune;

impl Mechanism for Tune {
    fn name(&self) -> &'static str {
        "tune"
    }
    fn allocate(
        &mut self,
        catalog: &Catalog,
        state: &mut ClusterState,
        runnable: &[Request],
        grants: &mut [Grant],
    ) -> MechanismStats {
        let shares: Vec<Share> = runnable
            .iter()
            .map(|r| best_share(catalog, state, r))
            .collect();
        let demotions = tune_with(catalog, state, runnable, grants, |slot| shares[slot]);
        MechanismStats {
            demotions,
            ..Default::default()
        }
    }
}

/// Tune's three steps with a per-job first choice `first(slot)` (tune: best-case demand; opt: the
/// optimizer's choice); returns the number of demotions.
pub fn tune_with(
    catalog: &Catalog,
    state: &mut ClusterState,
    runnable: &[Request],
    grants: &mut [Grant],
    first: impl Fn(usize) -> Share,
) -> u32 {
    let widest = state.widest_server().gpus;
    let mut demotions = 0;
    let mut parts = Vec::new();
    for (slot, req) in runnable.iter().enumerate() {
        // A demand capped to fit one server can land below GPU-proportional on a roomier server; tune
        // never runs a job slower than GPU-proportional, so such a placement does not count.
        let step1 = req.gpus <= widest && find_into(state, req.gpus, first(slot), &mut parts) && {
            let (speed, prop) = speeds(catalog, state, req, &parts);
            speed + 1e-9 >= prop
        };
        let fallback = fallback_share(catalog, state, req);
        if step1 || find_into(state, req.gpus, fallback, &mut parts) {
            place(state, grants, slot, &parts);
            continue;
        }
        match place_with_demotion(catalog, state, runnable, grants, slot, fallback) {
            Some(d) => demotions += d,
            None => debug_assert!(false, "tune could not place a runnable job"),
        }
    }
    demotions
}

/// Takes `parts` for the job in `slot` and grants them, reusing the grant's vector.
fn place(state: &mut ClusterState, grants: &mut [Grant], slot: usize, parts: &[Part]) {
    commit(state, slot, parts);
    grants[slot].parts.clear();
    grants[slot].parts.extend_from_slice(parts);
}
