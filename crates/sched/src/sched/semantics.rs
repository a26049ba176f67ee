//! The rules the scheduling core follows where this project and the reference simulator
//! (msr-fiddle/synergy) disagree (docs/simulate.md, "Two semantics"). One value of [`Semantics`] travels
//! with the cluster state of a round ([`ClusterState::semantics`]), so placement, demotion, tune's
//! fallback and speed each ask it once instead of every caller branching on a flag.
//!
//! [`ClusterState::semantics`]: crate::sched::ClusterState::semantics

use crate::sched::catalog::JobModel;
use crate::sched::server::{ServerSpec, EPS};

/// How fast a job runs when its best-case demand (g x its per-GPU vector) does not fit one server and
/// was capped to the server's cores or memory (docs/architecture.md §5.4).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CappedSpeed {
    /// The matrix read at the capped per-GPU share, like any other allocation (ours: what the job's
    /// profile says it does with those cores and that memory).
    Matrix,
    /// The reference's approximation: the best-case speedup scaled linearly with the cores got between
    /// the proportional share (speed 1) and the best case; a memory cap does not slow it down.
    LinearInCpus,
}

/// Where a multi-GPU job's GPUs go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placement {
    /// One server that holds the whole job if there is one, else spread (ours: fewer servers to talk
    /// over, though the published profiles charge nothing for spreading).
    OneServerFirst,
    /// The reference's: GPU by GPU in server order, each on the first server with room for one GPU's
    /// share, whatever the spread.
    FirstFitPerGpu,
}

/// Which co-placed jobs tune may demote to make room for a job that fits nowhere at its share.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DemotionScope {
    /// Any server with free GPUs, the most over-provisioned job first, until the job fits (ours).
    EveryServer,
    /// The reference's: only the jobs placed this round on the one server it picks (the first with
    /// enough free GPUs for a multi-GPU job; else the servers with the fewest free GPUs), single-server
    /// jobs with the most cores per GPU first.
    OneServer,
}

/// What tune asks for when a job's best case does not fit anywhere.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fallback {
    /// The GPU-proportional share, whatever the best case (ours: one rule for every job).
    Proportional,
    /// The reference's: the proportional share when the best case exceeds it in cores or memory, else
    /// the job's own best case, smaller than its share; demotion then makes room for that and the job
    /// is placed at it. (The zoo's language models, 1 core and 20 GB a GPU, are such jobs.)
    OwnBelowShare,
}

/// The rules of one scheduling core; see docs/simulate.md, "Two semantics".
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Semantics {
    /// Speed of a job whose best case was capped to one server.
    pub capped_speed: CappedSpeed,
    /// Placement of a job's GPUs.
    pub placement: Placement,
    /// Reach of tune's demotions.
    pub demotion: DemotionScope,
    /// Tune's demand once the best case has not fitted.
    pub fallback: Fallback,
}

impl Semantics {
    /// This project's rules (the default).
    pub const SYNERGY: Semantics = Semantics {
        capped_speed: CappedSpeed::Matrix,
        placement: Placement::OneServerFirst,
        demotion: DemotionScope::EveryServer,
        fallback: Fallback::Proportional,
    };
    /// The reference simulator's rules.
    pub const REFERENCE: Semantics = Semantics {
        capped_speed: CappedSpeed::LinearInCpus,
        placement: Placement::FirstFitPerGpu,
        demotion: DemotionScope::OneServer,
        fallback: Fallback::OwnBelowShare,
    };

    /// Normalized speed of a `gpus`-GPU job of model `m` holding `cpus_per_gpu` cores and
    /// `memory_gib_per_gpu` GiB per GPU, on a cluster whose widest server is `widest`.
    pub fn speed(
        &self,
        m: &JobModel,
        gpus: u32,
        widest: &ServerSpec,
        cpus_per_gpu: f64,
        memory_gib_per_gpu: f64,
    ) -> f64 {
        if self.capped_speed == CappedSpeed::LinearInCpus {
            if let Some(c) = capped_demand(m, gpus, widest) {
                // The reference's speedup belongs to the job that got its (capped) demand; one demoted
                // or given less runs at what the matrix says, as it does there at the proportional share.
                if cpus_per_gpu + EPS >= c.cpus_per_gpu
                    && memory_gib_per_gpu + EPS >= c.memory_gib_per_gpu
                {
                    return c.linear_speed;
                }
            }
        }
        m.speed(cpus_per_gpu, memory_gib_per_gpu)
    }
}

impl Default for Semantics {
    fn default() -> Self {
        Semantics::SYNERGY
    }
}

/// A best-case demand that did not fit one server, capped to it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CappedDemand {
    /// Cores per GPU after the cap.
    pub cpus_per_gpu: f64,
    /// Memory per GPU after the cap, GiB.
    pub memory_gib_per_gpu: f64,
    /// The reference's speed at it: 1 + (S - 1) x (c - c_prop) / (c_best - c_prop) over the job's cores
    /// c, with S the matrix's speed at the best case; S itself when only memory was capped.
    pub linear_speed: f64,
}

/// The capped demand of a `gpus`-GPU job of model `m`, or None when its best case fits `widest` (or the
/// job is wider than any server and runs at the proportional share anyway).
pub fn capped_demand(m: &JobModel, gpus: u32, widest: &ServerSpec) -> Option<CappedDemand> {
    if gpus > widest.gpus {
        return None;
    }
    let g = gpus as f64;
    let (best_c, best_m) = (g * m.best_cpus_per_gpu, g * m.best_memory_gib_per_gpu);
    if best_c <= widest.cpus + EPS && best_m <= widest.memory_gib + EPS {
        return None;
    }
    let c = best_c.min(widest.cpus);
    let fair_c = g * widest.cpus_per_gpu();
    let s = m.speed(m.best_cpus_per_gpu, m.best_memory_gib_per_gpu);
    // With the best case at the proportional share's cores there is no line to scale along; the
    // reference stops with an error there, and the best-case speed is kept.
    let linear_speed = if (best_c - fair_c).abs() <= EPS {
        s
    } else {
        1.0 + (s - 1.0) * (c - fair_c) / (best_c - fair_c)
    };
    Some(CappedDemand {
        cpus_per_gpu: c / g,
        memory_gib_per_gpu: best_m.min(widest.memory_gib) / g,
        linear_speed,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The zoo's m5 and alexnet as far as these rules read them: best cases (6 cores, 187.5 GB) and
    /// (12 cores, 125 GB) per GPU at speeds 2.5 and 2.94; the matrix gives m5 2.0 at 6 cores and 125 GB.
    fn model(name: &str, best_c: f64, best_m: f64, rows: Vec<Vec<f64>>) -> JobModel {
        JobModel {
            name: name.into(),
            class: "image".into(),
            iter_time_s: 1.0,
            cpus_axis: vec![3.0, 6.0, 12.0],
            memory_gib_axis: vec![62.5, 125.0, 187.5],
            normalized: rows,
            best_cpus_per_gpu: best_c,
            best_memory_gib_per_gpu: best_m,
            footprint_gib_per_gpu: None,
            path: "m.json".into(),
        }
    }

    #[test]
    fn a_capped_job_scales_linearly_with_cores_and_ignores_the_memory_cap() {
        // A server of 8 GPUs, 24 cores, 500 "GiB" (round numbers; the rule does not care about units).
        let widest = ServerSpec {
            gpus: 8,
            cpus: 24.0,
            memory_gib: 500.0,
        };
        let m5 = model(
            "m5",
            6.0,
            187.5,
            vec![
                vec![1.0, 1.0, 1.0],
                vec![1.5, 2.0, 2.5],
                vec![1.5, 2.0, 2.5],
            ],
        );
        // 4 GPUs: 24 cores fit, 750 of memory is capped to 500 (125 a GPU). Ours reads the matrix at
        // (6, 125): 2.0. The reference: c = c_best = 24, so 1 + 1.5 x (24 - 12) / (24 - 12) = 2.5.
        let c = capped_demand(&m5, 4, &widest).unwrap();
        assert_eq!((c.cpus_per_gpu, c.memory_gib_per_gpu), (6.0, 125.0));
        assert_eq!(Semantics::SYNERGY.speed(&m5, 4, &widest, 6.0, 125.0), 2.0);
        assert_eq!(Semantics::REFERENCE.speed(&m5, 4, &widest, 6.0, 125.0), 2.5);
        // Demoted to the proportional share (3, 62.5) it runs at 1.0 in both.
        assert_eq!(Semantics::REFERENCE.speed(&m5, 4, &widest, 3.0, 62.5), 1.0);
        // 2 GPUs fit whole (12 cores, 375): no cap, the matrix in both: 2.5.
        assert!(capped_demand(&m5, 2, &widest).is_none());
        assert_eq!(Semantics::REFERENCE.speed(&m5, 2, &widest, 6.0, 187.5), 2.5);

        let alexnet = model(
            "alexnet",
            12.0,
            125.0,
            vec![
                vec![1.0, 1.0, 1.0],
                vec![1.75, 1.75, 1.75],
                vec![2.94, 2.94, 2.94],
            ],
        );
        // 4 GPUs: 48 cores capped to 24 (6 a GPU). Ours: the matrix at 6 cores, 1.75. The reference:
        // 1 + 1.94 x (24 - 12) / (48 - 12) = 1 + 1.94 / 3 = 1.64667.
        let s = Semantics::REFERENCE.speed(&alexnet, 4, &widest, 6.0, 125.0);
        assert!((s - (1.0 + 1.94 / 3.0)).abs() < 1e-12, "{s}");
        assert_eq!(
            Semantics::SYNERGY.speed(&alexnet, 4, &widest, 6.0, 125.0),
            1.75
        );
        // 8 GPUs: c_best 96, c = 24 = the proportional share: 1 + 1.94 x 0 = 1.0 (the matrix says 1.0 too).
        assert_eq!(
            Semantics::REFERENCE.speed(&alexnet, 8, &widest, 3.0, 62.5),
            1.0
        );
    }
}
