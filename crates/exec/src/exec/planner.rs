//! One round's plan: the policy orders the active jobs, the runnable set takes them while GPUs fit, the
//! mechanism gives each GPUs, cores and memory on one server or spread over several (all as in the
//! simulator), and the counts become specific GPU ids and cores, server by server: a per-core ledger
//! keeps jobs on cores of their own unless an allocation is fractional, and jobs keep the GPUs and cores
//! they had where they can. On whole-core servers (Slurm nodes) each server's shares are first rounded
//! to whole cores and whole MiB; a spread job runs only when every part of it keeps a core.

use super::{AllocPart, Allocation, ServerInfo};
use crate::sched::catalog::Catalog;
use crate::sched::cluster::{ClusterConfig, ClusterState, ServerSpec};
use crate::sched::{self, JobState, Mechanism, MechanismStats, Policy, Round};
use crate::units::{Bytes, Cores};

/// Below this, an amount of a core is rounding noise.
const CORE_EPS: f64 = 1e-6;

/// Plans rounds for the servers of one backend.
pub struct Planner {
    catalog: Catalog,
    servers: Vec<ServerInfo>,
    cluster: ClusterConfig,
    policy: Box<dyn Policy>,
    mechanism: Box<dyn Mechanism>,
}

/// A round's plan.
#[derive(Debug, Clone, Default)]
pub struct RoundPlan {
    /// Per job (same order as the planner's input): its allocation, or `None` when it does not run.
    pub allocations: Vec<Option<Allocation>>,
    /// The mechanism's per-round facts.
    pub stats: MechanismStats,
    /// Per job: its speed at this allocation relative to the profile's reference share (as the simulator
    /// advances it), `None` when it does not run.
    pub speeds: Vec<Option<f64>>,
}

/// The scheduler's view of a set of servers.
pub fn cluster_of_servers(servers: &[ServerInfo]) -> ClusterConfig {
    ClusterConfig {
        servers: servers
            .iter()
            .map(|s| ServerSpec {
                gpus: s.gpus.len() as u32,
                cpus: s.cores.len() as f64,
                memory_gib: s.memory.gib(),
            })
            .collect(),
    }
}

impl Planner {
    /// A planner over `servers` (each with at least one GPU and one core).
    pub fn new(
        catalog: Catalog,
        servers: Vec<ServerInfo>,
        policy: Box<dyn Policy>,
        mechanism: Box<dyn Mechanism>,
    ) -> Planner {
        let cluster = cluster_of_servers(&servers);
        Planner {
            catalog,
            servers,
            cluster,
            policy,
            mechanism,
        }
    }

    /// The servers planned for.
    pub fn servers(&self) -> &[ServerInfo] {
        &self.servers
    }

    /// The scheduler's models.
    pub fn catalog(&self) -> &Catalog {
        &self.catalog
    }

    /// The scheduler's models, to replace one with its refinement between rounds.
    pub fn catalog_mut(&mut self) -> &mut Catalog {
        &mut self.catalog
    }

    /// Plans the round starting at `now_s` for the active `jobs`; `previous[i]` is what job `i` held
    /// last round (kept where possible).
    pub fn plan(
        &mut self,
        jobs: &mut [JobState],
        previous: &[Option<Allocation>],
        now_s: f64,
    ) -> RoundPlan {
        let mut state = ClusterState::new(&self.cluster);
        let mut round = Round::default();
        round.plan(
            self.policy.as_ref(),
            self.mechanism.as_mut(),
            &self.catalog,
            &mut state,
            jobs,
            now_s,
        );
        let Round {
            runnable,
            requests,
            grants,
            stats,
        } = round;
        let mut plan = RoundPlan {
            allocations: vec![None; jobs.len()],
            stats,
            speeds: vec![None; jobs.len()],
        };
        // Per server, the parts of jobs placed there: (job index, gpus, cores, memory GiB). A job
        // spread over servers has a part on each.
        let mut granted: Vec<Vec<Placed>> = vec![Vec::new(); self.servers.len()];
        let mut slot_of = vec![None; jobs.len()];
        for (slot, &i) in runnable.iter().enumerate() {
            let g = &grants[slot];
            if g.parts.is_empty() {
                continue;
            }
            slot_of[i] = Some(slot);
            for part in &g.parts {
                granted[part.server as usize].push((i, part.gpus, part.cpus, part.memory_gib));
            }
        }
        // A spread job runs on all its servers or not at all: one whose part on some server got no
        // core waits, and the servers' shares are rounded again without it, so what it would have
        // held goes to the others there.
        let per_server = loop {
            let mut rounded = granted.clone();
            for (s, placed) in rounded.iter_mut().enumerate() {
                if self.servers[s].whole_cores {
                    round_to_whole_units(placed, self.servers[s].cores.len());
                }
            }
            let short: Vec<usize> = (0..jobs.len())
                .filter(|&i| {
                    let Some(slot) = slot_of[i] else { return false };
                    let kept = rounded
                        .iter()
                        .filter(|p| p.iter().any(|x| x.0 == i))
                        .count();
                    kept < grants[slot].parts.len()
                })
                .collect();
            if short.is_empty() {
                break rounded;
            }
            for &i in &short {
                slot_of[i] = None;
                for placed in granted.iter_mut() {
                    placed.retain(|x| x.0 != i);
                }
            }
        };
        // Speeds at what the jobs really get (the rounded shares on a whole-core server).
        for (i, slot) in slot_of.iter().enumerate() {
            let Some(slot) = *slot else { continue };
            let parts: Vec<_> = grants[slot]
                .parts
                .iter()
                .map(|p| {
                    let &(_, _, cpus, memory_gib) = per_server[p.server as usize]
                        .iter()
                        .find(|x| x.0 == i)
                        .expect("a kept job has its part on every server of its grant");
                    sched::cluster::Part {
                        cpus,
                        memory_gib,
                        ..*p
                    }
                })
                .collect();
            plan.speeds[i] =
                Some(sched::place::speeds(&self.catalog, &state, &requests[slot], &parts).0);
        }
        let mut parts_of: Vec<Vec<AllocPart>> = vec![Vec::new(); jobs.len()];
        for (s, placed) in per_server.iter().enumerate() {
            let server = &self.servers[s];
            let gpus = assign_gpus(server, s, placed, previous);
            let cores = assign_cores(server, s, placed, previous);
            for (k, &(i, _, cpus, mem_gib)) in placed.iter().enumerate() {
                parts_of[i].push(AllocPart {
                    server: s,
                    gpus: gpus[k].clone(),
                    cpus: Cores(cpus),
                    cores: cores[k].clone(),
                    memory: Bytes::from_gib(mem_gib),
                });
            }
        }
        for (i, parts) in parts_of.into_iter().enumerate() {
            if !parts.is_empty() {
                plan.allocations[i] = Some(Allocation { parts });
            }
        }
        plan
    }
}

/// One job's part on a server while a round is planned: (job index, GPUs, cores, memory GiB).
type Placed = (usize, u32, f64, f64);

/// What job `i` held on server `server` last round.
fn previous_on(previous: &[Option<Allocation>], i: usize, server: usize) -> Option<&AllocPart> {
    previous.get(i)?.as_ref()?.part_on(server)
}

/// Rounds the shares of the jobs placed on a whole-core server (a Slurm node, which allocates whole
/// CPUs and `--mem` in MiB): each job gets the whole cores of its share and at least one; the cores left
/// go to the largest fractional remainders (a share is never rounded above its ceiling), so the total
/// stays within the server's `cores`. Memory is cut to whole MiB, so the sum stays within the server's.
/// When there are more jobs than cores, the smallest shares get none and do not run this round.
fn round_to_whole_units(placed: &mut Vec<Placed>, cores: usize) {
    let n = placed.len();
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by(|&a, &b| placed[b].2.total_cmp(&placed[a].2).then(a.cmp(&b)));
    let mut given = vec![0usize; n];
    let mut left = cores;
    for &k in &order {
        if left == 0 {
            break;
        }
        let whole = ((placed[k].2 + CORE_EPS).floor() as usize).clamp(1, left);
        given[k] = whole;
        left -= whole;
    }
    let remainder = |k: usize| placed[k].2 - given[k] as f64;
    let mut short: Vec<usize> = order
        .iter()
        .copied()
        .filter(|&k| given[k] > 0 && remainder(k) > CORE_EPS)
        .collect();
    short.sort_by(|&a, &b| remainder(b).total_cmp(&remainder(a)).then(a.cmp(&b)));
    for k in short.into_iter().take(left) {
        given[k] += 1;
    }
    let mut k = 0;
    placed.retain_mut(|p| {
        let keep = given[k] > 0;
        p.2 = given[k] as f64;
        p.3 = (p.3 * 1024.0 + CORE_EPS).floor() / 1024.0;
        k += 1;
        keep
    });
}

/// GPU ids for the jobs placed on a server: a job keeps its previous GPUs when they are all free, the
/// others take the lowest free ids.
fn assign_gpus(
    server: &ServerInfo,
    s: usize,
    placed: &[Placed],
    previous: &[Option<Allocation>],
) -> Vec<Vec<u32>> {
    let mut free: Vec<u32> = server.gpus.clone();
    let mut out: Vec<Option<Vec<u32>>> = vec![None; placed.len()];
    for (k, &(i, gpus, _, _)) in placed.iter().enumerate() {
        if let Some(prev) = previous_on(previous, i, s) {
            if prev.gpus.len() == gpus as usize && prev.gpus.iter().all(|g| free.contains(g)) {
                free.retain(|g| !prev.gpus.contains(g));
                out[k] = Some(prev.gpus.clone());
            }
        }
    }
    for (k, &(_, gpus, _, _)) in placed.iter().enumerate() {
        if out[k].is_none() {
            let take: Vec<u32> = free.iter().take(gpus as usize).copied().collect();
            free.retain(|g| !take.contains(g));
            out[k] = Some(take);
        }
    }
    out.into_iter().map(Option::unwrap_or_default).collect()
}

/// Specific cores for the jobs placed on a server. Whole cores go to one job each; a fractional part
/// shares a core with other fractional parts (each held to its share by a CFS quota). Larger
/// allocations choose first; each prefers the cores it had.
fn assign_cores(
    server: &ServerInfo,
    s: usize,
    placed: &[Placed],
    previous: &[Option<Allocation>],
) -> Vec<Vec<usize>> {
    let mut free: Vec<(usize, f64)> = server.cores.iter().map(|&c| (c, 1.0)).collect();
    let mut by_size: Vec<usize> = (0..placed.len()).collect();
    by_size.sort_by(|&a, &b| placed[b].2.total_cmp(&placed[a].2).then(a.cmp(&b)));
    let mut out = vec![Vec::new(); placed.len()];
    for k in by_size {
        let (i, _, cpus, _) = placed[k];
        let prev: &[usize] = previous_on(previous, i, s).map_or(&[], |p| &p.cores);
        let mut chosen: Vec<usize> = Vec::new();
        let mut left = cpus;
        // Whole cores: free ones, previous first, then lowest id.
        let whole = (cpus + CORE_EPS).floor() as usize;
        let mut candidates: Vec<usize> = (0..free.len())
            .filter(|&f| free[f].1 >= 1.0 - CORE_EPS)
            .collect();
        // Among its previous cores, those no other job had come first: a job that shared a core for
        // its fraction keeps its whole core, and the sharers keep theirs.
        let others = |core: usize| {
            placed
                .iter()
                .filter(|p| p.0 != i)
                .filter_map(|p| previous_on(previous, p.0, s))
                .filter(|a| a.cores.contains(&core))
                .count()
        };
        candidates.sort_by_key(|&f| (!prev.contains(&free[f].0), others(free[f].0), free[f].0));
        for &f in candidates.iter().take(whole) {
            free[f].1 = 0.0;
            chosen.push(free[f].0);
            left -= 1.0;
        }
        // The fraction: on one core that has room, previous first, then the fullest (best fit).
        if left > CORE_EPS {
            let mut part: Vec<usize> = (0..free.len())
                .filter(|&f| !chosen.contains(&free[f].0) && free[f].1 + CORE_EPS >= left)
                .collect();
            part.sort_by(|&a, &b| {
                (!prev.contains(&free[a].0))
                    .cmp(&!prev.contains(&free[b].0))
                    .then(free[a].1.total_cmp(&free[b].1))
                    .then(free[a].0.cmp(&free[b].0))
            });
            if let Some(&f) = part.first() {
                free[f].1 = (free[f].1 - left).max(0.0);
                chosen.push(free[f].0);
                left = 0.0;
            }
        }
        // Fragmented: spread what is left over any cores with room.
        if left > CORE_EPS {
            for (core, room) in free.iter_mut() {
                if left <= CORE_EPS {
                    break;
                }
                if *room > CORE_EPS && !chosen.contains(core) {
                    let take = room.min(left);
                    *room -= take;
                    left -= take;
                    chosen.push(*core);
                }
            }
        }
        chosen.sort_unstable();
        out[k] = chosen;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sched::ServerSpec;

    fn server(cores: usize, gpus: u32) -> ServerInfo {
        ServerInfo {
            name: "s".into(),
            gpus: (0..gpus).collect(),
            cores: (0..cores).collect(),
            memory: Bytes(8 << 30),
            whole_cores: false,
        }
    }

    #[test]
    fn whole_core_servers_get_whole_cores_within_the_total_and_whole_mib() {
        // Tune's shares on two cores: an image job's 1.5 and a text job's 0.25.
        let mut placed = vec![(0, 1, 1.5, 10.0 + 0.3 / 1024.0), (1, 1, 0.25, 1.0)];
        round_to_whole_units(&mut placed, 2);
        assert_eq!(placed, vec![(0, 1, 1.0, 10.0), (1, 1, 1.0, 1.0)]);
        // A lone job rounds up where cores are free; never above its share's ceiling.
        let mut placed = vec![(0, 1, 1.5, 2.0)];
        round_to_whole_units(&mut placed, 4);
        assert_eq!(placed[0].2, 2.0);
        // The largest remainder gets the last core.
        let mut placed = vec![(0, 1, 1.2, 1.0), (1, 1, 1.7, 1.0), (2, 1, 1.1, 1.0)];
        round_to_whole_units(&mut placed, 4);
        let cpus: Vec<f64> = placed.iter().map(|p| p.2).collect();
        assert_eq!(cpus, vec![1.0, 2.0, 1.0]);
        // More jobs than cores: the smallest share waits.
        let mut placed = vec![(0, 1, 0.5, 1.0), (1, 1, 0.9, 1.0), (2, 1, 0.6, 1.0)];
        round_to_whole_units(&mut placed, 2);
        let jobs: Vec<usize> = placed.iter().map(|p| p.0).collect();
        assert_eq!(jobs, vec![1, 2]);
    }

    #[test]
    fn whole_cores_are_not_shared_and_fractions_share_one_core() {
        let s = server(2, 2);
        let placed = [(0, 1, 1.5, 1.0), (1, 1, 0.25, 1.0)];
        let cores = assign_cores(&s, 0, &placed, &[None, None]);
        assert_eq!(cores[0], vec![0, 1]);
        assert_eq!(cores[1], vec![1]);
        let placed = [(0, 1, 1.0, 1.0), (1, 1, 1.0, 1.0)];
        let cores = assign_cores(&s, 0, &placed, &[None, None]);
        assert_eq!((cores[0].clone(), cores[1].clone()), (vec![0], vec![1]));
    }

    #[test]
    fn jobs_keep_their_previous_cores_and_gpus() {
        let s = server(4, 2);
        let prev = |gpus: Vec<u32>, cores: Vec<usize>| {
            Some(Allocation::on_one(AllocPart {
                server: 0,
                gpus,
                cpus: Cores(cores.len() as f64),
                cores,
                memory: Bytes(1),
            }))
        };
        let previous = [prev(vec![1], vec![2, 3]), prev(vec![0], vec![0, 1])];
        let placed = [(0, 1, 2.0, 1.0), (1, 1, 2.0, 1.0)];
        assert_eq!(
            assign_cores(&s, 0, &placed, &previous),
            vec![vec![2, 3], vec![0, 1]]
        );
        assert_eq!(
            assign_gpus(&s, 0, &placed, &previous),
            vec![vec![1], vec![0]]
        );
        // A newcomer takes what is free.
        let placed = [(0, 1, 2.0, 1.0), (2, 1, 1.0, 1.0)];
        let previous = [prev(vec![1], vec![2, 3]), None, None];
        assert_eq!(
            assign_gpus(&s, 0, &placed, &previous),
            vec![vec![1], vec![0]]
        );
        assert_eq!(
            assign_cores(&s, 0, &placed, &previous),
            vec![vec![2, 3], vec![0]]
        );
    }

    /// A model whose best case (6 cores, 8 GiB a GPU) is more than any server's per-GPU share.
    fn catalog() -> Catalog {
        Catalog::new(vec![crate::sched::JobModel {
            name: "m".into(),
            class: "image".into(),
            iter_time_s: 1.0,
            cpus_axis: vec![1.0, 4.0, 8.0],
            memory_gib_axis: vec![4.0, 32.0],
            normalized: vec![vec![0.5, 0.5], vec![1.0, 1.0], vec![1.5, 1.5]],
            best_cpus_per_gpu: 6.0,
            best_memory_gib_per_gpu: 8.0,
            footprint_gib_per_gpu: None,
            path: "m.json".into(),
        }])
        .unwrap()
    }

    fn planner(servers: Vec<ServerInfo>, mechanism: &str) -> Planner {
        Planner::new(
            catalog(),
            servers,
            sched::policy_by_name("fifo").unwrap(),
            sched::mechanism_by_name(mechanism).unwrap(),
        )
    }

    fn job(id: u64, gpus: u32) -> JobState {
        JobState::arrived(id, 0, gpus, 0.0, 1000, &catalog())
    }

    #[test]
    fn the_planner_spreads_a_job_as_the_simulator_does() {
        // Two servers of one GPU each, of different shapes: a 2-GPU job must spread, one GPU on each,
        // with each server's own per-GPU share.
        let cluster = ClusterConfig {
            servers: vec![
                ServerSpec {
                    gpus: 1,
                    cpus: 4.0,
                    memory_gib: 16.0,
                },
                ServerSpec {
                    gpus: 1,
                    cpus: 8.0,
                    memory_gib: 32.0,
                },
            ],
        };
        let servers: Vec<ServerInfo> = cluster
            .servers
            .iter()
            .enumerate()
            .map(|(k, s)| ServerInfo {
                name: format!("n{k}"),
                gpus: (0..s.gpus).collect(),
                cores: (0..s.cpus as usize).collect(),
                memory: Bytes::from_gib(s.memory_gib),
                whole_cores: false,
            })
            .collect();
        assert_eq!(cluster_of_servers(&servers), cluster);
        for mechanism in ["proportional", "greedy", "tune"] {
            // The simulator's round: its cluster state under this project's rules, the same round.
            let sim_semantics = crate::sim::SimSemantics::SYNERGY;
            let mut state = ClusterState::with_semantics(&cluster, sim_semantics.core);
            let mut round = Round::default();
            let mut m = sched::mechanism_by_name(mechanism).unwrap();
            let p = sched::policy_by_name("fifo").unwrap();
            round.plan(
                p.as_ref(),
                m.as_mut(),
                &catalog(),
                &mut state,
                &mut [job(0, 2)],
                0.0,
            );
            let sim_parts: Vec<(usize, usize, f64, f64)> = round.grants[0]
                .parts
                .iter()
                .map(|p| (p.server as usize, p.gpus as usize, p.cpus, p.memory_gib))
                .collect();
            assert_eq!(sim_parts.len(), 2, "{mechanism}: spread over both servers");

            let plan = planner(servers.clone(), mechanism).plan(&mut [job(0, 2)], &[None], 0.0);
            let a = plan.allocations[0].as_ref().expect("the job runs");
            let parts: Vec<(usize, usize, f64, f64)> = a
                .parts
                .iter()
                .map(|p| (p.server, p.gpus.len(), p.cpus.0, p.memory.gib()))
                .collect();
            assert_eq!(parts, sim_parts, "{mechanism}");
            assert_eq!(a.parts[0].cores, vec![0, 1, 2, 3]);
            assert_eq!(a.parts[1].cores, (0..8).collect::<Vec<_>>());

            // And the simulator's engine holds the same totals in its first round.
            let cfg = crate::sim::SimConfig {
                cluster: cluster.clone(),
                round_s: 60.0,
                window: None,
                record_rounds: true,
                record_jobs: true,
                semantics: sim_semantics,
            };
            let trace = vec![crate::format::trace::TraceJob {
                id: 0,
                model: 0,
                arrival_s: 0.0,
                iters: 1000,
                gpus: 2,
            }];
            let mut m = sched::mechanism_by_name(mechanism).unwrap();
            let r = crate::sim::run(
                &catalog(),
                &cfg,
                crate::sim::TraceSource::Jobs(trace),
                p.as_ref(),
                m.as_mut(),
            )
            .unwrap();
            let first = &r.rounds[0];
            assert_eq!(first.gpus_used, a.gpu_count() as u64, "{mechanism}");
            assert!((first.cpus_used - a.cpus().0).abs() < 1e-9, "{mechanism}");
            assert!(
                (first.memory_gib_used - a.memory().gib()).abs() < 1e-6,
                "{mechanism}"
            );
            assert!((plan.speeds[0].unwrap() - first.mean_speed).abs() < 1e-9);
        }
    }

    #[test]
    fn a_spread_job_on_whole_core_servers_gets_whole_cores_on_each_or_waits() {
        let node = |name: &str, gpus: u32| ServerInfo {
            name: name.into(),
            gpus: (0..gpus).collect(),
            cores: vec![0],
            memory: Bytes(8 << 30),
            whole_cores: true,
        };
        // Two one-core nodes of two GPUs: a 3-GPU job is spread 2 + 1 and gets the core of each, and
        // memory in proportion to its GPUs there, in whole MiB.
        let servers = vec![node("n1", 2), node("n2", 2)];
        let plan = planner(servers.clone(), "tune").plan(&mut [job(0, 3)], &[None], 0.0);
        let a = plan.allocations[0].as_ref().unwrap();
        let part = |server, gpus: Vec<u32>, memory| AllocPart {
            server,
            gpus,
            cpus: Cores(1.0),
            cores: vec![0],
            memory: Bytes(memory),
        };
        assert_eq!(
            a.parts,
            vec![part(0, vec![0, 1], 8 << 30), part(1, vec![0], 4 << 30)]
        );
        // The second round keeps the GPUs and cores it had.
        let prev = [plan.allocations[0].clone()];
        let again = planner(servers.clone(), "tune").plan(&mut [job(0, 3)], &prev, 0.0);
        assert_eq!(again.allocations[0], plan.allocations[0]);
        // A 1-GPU job on the first node takes its only core (it comes first), so the 3-GPU job's part
        // there gets none, and the whole job waits: a spread job runs on all its nodes or not at all.
        let plan = planner(servers, "tune").plan(&mut [job(0, 1), job(1, 3)], &[None, None], 0.0);
        assert!(plan.allocations[0].is_some());
        assert_eq!(plan.allocations[1], None);
        assert_eq!(plan.speeds[1], None);
    }
}
