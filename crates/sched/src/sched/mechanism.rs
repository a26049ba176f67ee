//! The allocation mechanisms of docs/architecture.md §5.4 that need no solver: GPU-proportional, greedy best-case
//! demand, and Synergy-TUNE.

use super::place::{best_share, commit, fallback_share, find, place_with_demotion, speeds, Share};
use super::{Grant, Mechanism, MechanismStats, Request};
use crate::sched::catalog::Catalog;
use crate::sched::cluster::ClusterState;

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
        for (slot, req) in runnable.iter().enumerate() {
            // Every placed GPU holds exactly its share, so any free GPU has its share free too.
            let parts = find(state, req.gpus, Share::Proportional)
                .expect("GPU counts of the runnable set fit the cluster");
            commit(state, slot, &parts);
            grants[slot].parts = parts;
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
        for (slot, req) in runnable.iter().enumerate() {
            let share = if req.gpus > widest {
                Share::Proportional
            } else {
                best_share(catalog, state, req)
            };
            if let Some(parts) = find(state, req.gpus, share) {
                commit(state, slot, &parts);
                grants[slot].parts = parts;
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
    for (slot, req) in runnable.iter().enumerate() {
        let step1 = if req.gpus > widest {
            None
        } else {
            // A demand capped to fit one server can land below GPU-proportional on a roomier server;
            // tune never runs a job slower than GPU-proportional, so such a placement does not count.
            find(state, req.gpus, first(slot)).filter(|parts| {
                let (speed, prop) = speeds(catalog, state, req, parts);
                speed + 1e-9 >= prop
            })
        };
        let fallback = fallback_share(catalog, state, req);
        if let Some(parts) = step1.or_else(|| find(state, req.gpus, fallback)) {
            commit(state, slot, &parts);
            grants[slot].parts = parts;
            continue;
        }
        match place_with_demotion(catalog, state, runnable, grants, slot, fallback) {
            Some(d) => demotions += d,
            None => debug_assert!(false, "tune could not place a runnable job"),
        }
    }
    demotions
}
