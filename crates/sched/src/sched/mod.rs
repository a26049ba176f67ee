//! The scheduling core, shared by the simulator ([`crate::sim`]) and the executor ([`crate::exec`]) and
//! importing neither: the cluster model, the job catalog, a job's scheduling state, and one [`Round`]
//! planner where a [`Policy`] orders jobs and a [`Mechanism`] gives the runnable ones GPUs, cores and memory
//! on servers (docs/architecture.md §5.1-5.4).

pub mod catalog;
pub mod cluster;
pub mod mechanism;
pub mod opt;
pub mod place;
pub mod policy;
pub mod room;
pub mod round;
pub mod semantics;
pub mod server;

use crate::error::Setting;
pub use catalog::{Catalog, JobModel};
pub use cluster::{ClusterConfig, ClusterState, Part, ServerSpec};
pub use mechanism::{Greedy, Proportional, Tune};
pub use opt::Opt;
pub use policy::{Fifo, Ftf, Las, Srtf};
pub use round::Round;
pub use semantics::Semantics;

/// A job that has arrived and not finished, as policies see it.
#[derive(Debug, Clone, PartialEq)]
pub struct JobState {
    /// Trace id.
    pub id: u64,
    /// Catalog index of its model.
    pub model: u32,
    /// GPUs.
    pub gpus: u32,
    /// Arrival, seconds.
    pub arrival_s: f64,
    /// Seconds per iteration at GPU-proportional share.
    pub iter_time_s: f64,
    /// Iterations in all.
    pub total_iters: u64,
    /// Iterations left.
    pub remaining_iters: u64,
    /// Seconds it has held GPUs.
    pub attained_s: f64,
    /// When it first ran.
    pub first_start_s: Option<f64>,
    /// When it last held GPUs (its arrival until it first runs): the starvation guard counts from here.
    pub last_run_s: f64,
    /// Set once it has waited longer than [`STARVATION_S`]; it keeps priority until it finishes.
    pub starved: bool,
    /// Rounds in which tune demoted it.
    pub demotions: u32,
    /// Whether its id is in the measurement window.
    pub in_window: bool,
}

impl JobState {
    /// A job as it arrives: none of its `iters` done, never run, in the measurement window. The one
    /// place a job's scheduling state is made, for the simulator and the executor alike.
    pub fn arrived(
        id: u64,
        model: u32,
        gpus: u32,
        arrival_s: f64,
        iters: u64,
        catalog: &Catalog,
    ) -> JobState {
        JobState {
            id,
            model,
            gpus,
            arrival_s,
            iter_time_s: catalog.get(model as usize).iter_time_s,
            total_iters: iters,
            remaining_iters: iters,
            attained_s: 0.0,
            first_start_s: None,
            last_run_s: arrival_s,
            starved: false,
            demotions: 0,
            in_window: true,
        }
    }

    /// Remaining time at GPU-proportional speed, seconds.
    pub fn remaining_s(&self) -> f64 {
        self.remaining_iters as f64 * self.iter_time_s
    }
    /// Duration alone on a GPU-proportional share, seconds (the finish-time-fairness denominator).
    pub fn isolated_s(&self) -> f64 {
        self.total_iters as f64 * self.iter_time_s
    }
}

/// Waiting longer than this (1000 h) since a job last ran (or arrived) puts it ahead under SRTF, LAS and
/// FTF (docs/architecture.md §5.3).
pub const STARVATION_S: f64 = 1000.0 * 3600.0;

/// Orders jobs: the runnable set is taken in this order while GPU counts fit.
pub trait Policy: Send + Sync {
    /// Its name on the command line.
    fn name(&self) -> &'static str;
    /// Sort key at round start `now_s`: lower runs first (ties break by arrival).
    fn key(&self, job: &JobState, now_s: f64) -> f64;
    /// Whether jobs that waited more than [`STARVATION_S`] go first.
    fn starvation_guard(&self) -> bool {
        true
    }
    /// Whether the order is arrival order, which the engine keeps without sorting.
    fn is_arrival_order(&self) -> bool {
        false
    }
}

/// One job the mechanism must serve this round, in policy order.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Request {
    /// Catalog index of its model.
    pub model: u32,
    /// GPUs.
    pub gpus: u32,
}

/// What a job got this round.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Grant {
    /// Its share of each server it runs on; empty when skipped.
    pub parts: Vec<Part>,
    /// Whether tune demoted it to GPU-proportional to make room for another job.
    pub demoted: bool,
}

impl Grant {
    /// GPUs, cores and memory (GiB) in all.
    pub fn totals(&self) -> (u32, f64, f64) {
        self.parts.iter().fold((0, 0.0, 0.0), |(g, c, m), p| {
            (g + p.gpus, c + p.cpus, m + p.memory_gib)
        })
    }
}

/// Per-round facts a mechanism reports.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct MechanismStats {
    /// Jobs demoted to GPU-proportional to make room.
    pub demotions: u32,
    /// Seconds spent in the optimizer (opt only).
    pub solve_s: f64,
    /// The optimizer's bound on total normalized throughput (opt only).
    pub bound: Option<f64>,
}

/// Allocates GPUs, cores and memory to the runnable jobs on an empty cluster.
pub trait Mechanism: Send {
    /// Its name on the command line.
    fn name(&self) -> &'static str;
    /// Fills `grants[i]` for `runnable[i]` (all GPU counts fit the cluster together); `state` starts free.
    fn allocate(
        &mut self,
        catalog: &Catalog,
        state: &mut ClusterState,
        runnable: &[Request],
        grants: &mut [Grant],
    ) -> MechanismStats;
}

/// Orders `jobs` for a round starting at `now_s`: jobs that have waited past [`STARVATION_S`] first
/// (when the policy guards against starvation; the flag is sticky and set here), then by the policy's
/// key, arrival and id. Returns indices into `jobs`.
pub fn policy_order(policy: &dyn Policy, jobs: &mut [JobState], now_s: f64) -> Vec<usize> {
    if policy.is_arrival_order() {
        let mut order: Vec<usize> = (0..jobs.len()).collect();
        order.sort_by(|&a, &b| {
            jobs[a]
                .arrival_s
                .total_cmp(&jobs[b].arrival_s)
                .then(jobs[a].id.cmp(&jobs[b].id))
        });
        return order;
    }
    let guard = policy.starvation_guard();
    let mut keyed: Vec<(bool, f64, f64, u64, usize)> = jobs
        .iter_mut()
        .enumerate()
        .map(|(i, j)| {
            j.starved |= guard && now_s - j.last_run_s > STARVATION_S;
            (!j.starved, policy.key(j, now_s), j.arrival_s, j.id, i)
        })
        .collect();
    keyed.sort_unstable_by(|a, b| {
        a.0.cmp(&b.0)
            .then(a.1.total_cmp(&b.1))
            .then(a.2.total_cmp(&b.2))
            .then(a.3.cmp(&b.3))
    });
    keyed.into_iter().map(|k| k.4).collect()
}

/// The runnable set (docs/architecture.md §5.3): jobs taken in `order` while their GPU counts fit `total_gpus`.
pub fn runnable_set(jobs: &[JobState], order: &[usize], total_gpus: u64) -> Vec<usize> {
    let mut free = total_gpus;
    let mut out = Vec::new();
    for &i in order {
        if free == 0 {
            break;
        }
        let g = jobs[i].gpus as u64;
        if g <= free {
            free -= g;
            out.push(i);
        }
    }
    out
}

/// A policy by name; an unknown name is an error of the `policy` setting that lists the choices.
pub fn policy_by_name(name: &str) -> Result<Box<dyn Policy>, crate::error::InputError> {
    Ok(match name {
        "fifo" => Box::new(Fifo),
        "srtf" => Box::new(Srtf),
        "las" => Box::new(Las),
        "ftf" => Box::new(Ftf),
        _ => return Err(unknown(Setting::Policy, name, &POLICIES)),
    })
}

/// A mechanism by name; an unknown name is an error of the `mechanism` setting that lists the choices.
pub fn mechanism_by_name(name: &str) -> Result<Box<dyn Mechanism>, crate::error::InputError> {
    Ok(match name {
        "proportional" => Box::new(Proportional),
        "greedy" => Box::new(Greedy),
        "tune" => Box::new(Tune),
        "opt" => Box::new(Opt::default()),
        _ => return Err(unknown(Setting::Mechanism, name, &MECHANISMS)),
    })
}

fn unknown(what: Setting, name: &str, choices: &[&str]) -> crate::error::InputError {
    crate::error::InputError::setting(
        what,
        format!(
            "unknown {} `{name}` (choose from {})",
            what.name(),
            choices.join(", ")
        ),
    )
}

/// Policy names, in table order.
pub const POLICIES: [&str; 4] = ["fifo", "srtf", "las", "ftf"];
/// Mechanism names, in table order.
pub const MECHANISMS: [&str; 4] = ["proportional", "greedy", "tune", "opt"];
