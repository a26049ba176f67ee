//! What a job list will do before it runs: the simulator's JCT for each job, and the planner's rounds
//! without launching anything (`synergy run --dry-run`).

use super::{check_servers, fmt_alloc, job_state, policy_and_mechanism, server_names};
use crate::exec::jobs::JobList;
use crate::exec::planner::Planner;
use crate::exec::{Allocation, ExecError, ServerInfo};
use crate::sched::catalog::Catalog;
use crate::sched::{ClusterConfig, JobState};
use crate::sim::{self, SimConfig, TraceSource};
use serde::Serialize;

/// The simulator's JCT for every job of the list (list order) on `cluster`.
pub fn predict(
    list: &JobList,
    cluster: &ClusterConfig,
    round_s: f64,
    policy: &str,
    mechanism: &str,
) -> Result<Vec<Option<f64>>, ExecError> {
    predict_with(&list.catalog, list, cluster, round_s, policy, mechanism)
}

/// [`predict`] with the jobs' models taken from `catalog` (the list's, or the profiles as a run refined
/// them) instead of the list's own.
pub(super) fn predict_with(
    catalog: &Catalog,
    list: &JobList,
    cluster: &ClusterConfig,
    round_s: f64,
    policy: &str,
    mechanism: &str,
) -> Result<Vec<Option<f64>>, ExecError> {
    let (p, mut m) = policy_and_mechanism(policy, mechanism)?;
    let cfg = SimConfig {
        cluster: cluster.clone(),
        round_s,
        window: None,
        record_rounds: false,
        record_jobs: true,
        // The executor plans by this project's rules, so its preview does too.
        semantics: sim::SimSemantics::SYNERGY,
    };
    let r = sim::run(
        catalog,
        &cfg,
        TraceSource::Jobs(list.trace()),
        p.as_ref(),
        m.as_mut(),
    )?;
    let mut out = vec![None; list.jobs.len()];
    for j in &r.jobs {
        out[j.id as usize] = Some(j.jct_s);
    }
    Ok(out)
}

/// One round of a dry run.
#[derive(Debug, Clone, Serialize)]
pub struct PlannedRound {
    /// Round number, from 1.
    pub round: u64,
    /// When it starts, seconds.
    pub start_s: f64,
    /// Every active job, in list order.
    pub jobs: Vec<PlannedJob>,
}

/// One job's part of a planned round.
#[derive(Debug, Clone, Serialize)]
pub struct PlannedJob {
    /// Its name.
    pub name: String,
    /// What it gets; `None`: it waits (or stays paused).
    pub allocation: Option<Allocation>,
    /// The names of the servers it runs on, one per part of its allocation (several when it is spread).
    pub servers: Vec<String>,
}

impl std::fmt::Display for PlannedRound {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(f, "round {} at {:.0} s:", self.round, self.start_s)?;
        for j in &self.jobs {
            match &j.allocation {
                Some(a) => writeln!(f, "  {:<16} {}", j.name, fmt_alloc(a, &j.servers))?,
                None => writeln!(f, "  {:<16} waits", j.name)?,
            }
        }
        Ok(())
    }
}

/// The plan of every round, from the simulator's progress model, without launching anything.
pub fn dry_run(
    list: &JobList,
    servers: &[ServerInfo],
    policy: &str,
    mechanism: &str,
    round_s: f64,
) -> Result<Vec<PlannedRound>, ExecError> {
    sim::check_round(round_s)?;
    check_servers(list, servers)?;
    let (p, m) = policy_and_mechanism(policy, mechanism)?;
    let mut planner = Planner::new(list.catalog.clone(), servers.to_vec(), p, m);
    let mut remaining: Vec<u64> = list.jobs.iter().map(|j| j.work_iters()).collect();
    let mut attained = vec![0.0; list.jobs.len()];
    let mut prev: Vec<Option<Allocation>> = vec![None; list.jobs.len()];
    let mut out = Vec::new();
    let mut now = 0.0f64;
    let mut round = 0u64;
    loop {
        let active: Vec<usize> = (0..list.jobs.len())
            .filter(|&i| remaining[i] > 0 && list.jobs[i].arrival_s <= now)
            .collect();
        if active.is_empty() {
            match list
                .jobs
                .iter()
                .enumerate()
                .filter(|(i, _)| remaining[*i] > 0)
                .map(|(_, j)| j.arrival_s)
                .min_by(f64::total_cmp)
            {
                None => break,
                Some(a) => {
                    now = (a / round_s).ceil() * round_s;
                    continue;
                }
            }
        }
        let mut states: Vec<JobState> = active
            .iter()
            .map(|&i| job_state(list, &list.catalog, i, remaining[i], attained[i]))
            .collect();
        let previous: Vec<Option<Allocation>> = active.iter().map(|&i| prev[i].clone()).collect();
        let plan = planner.plan(&mut states, &previous, now);
        round += 1;
        let mut planned = PlannedRound {
            round,
            start_s: now,
            jobs: Vec::new(),
        };
        for (k, &i) in active.iter().enumerate() {
            let j = &list.jobs[i];
            if let (Some(_), Some(speed)) = (&plan.allocations[k], plan.speeds[k]) {
                // As the simulator advances a job: whole iterations at its speed this round.
                let rate = speed / list.catalog.get(j.model as usize).iter_time_s;
                let iters = (round_s * rate).floor() as u64;
                remaining[i] = remaining[i].saturating_sub(iters);
                attained[i] += round_s;
            }
            prev[i] = plan.allocations[k].clone();
            planned.jobs.push(PlannedJob {
                name: j.name.clone(),
                servers: plan.allocations[k]
                    .as_ref()
                    .map_or_else(Vec::new, |a| server_names(a, servers)),
                allocation: plan.allocations[k].clone(),
            });
        }
        out.push(planned);
        now += round_s;
    }
    Ok(out)
}
