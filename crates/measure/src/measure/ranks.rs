//! A job of several processes: the ranks of a distributed job that `torchrun`, `torch.multiprocessing.spawn`
//! and the launchers built on them start, each with its own DataLoader. Each rank reports its own steps,
//! tagged with its rank and the world size (docs/architecture.md §3.2). [`JobSteps`] makes the job's steps
//! of them: the job's k-th step is done once every rank has done its k-th, and holds all their samples, as
//! synchronous data-parallel training advances (no rank runs ahead of the slowest by more than its
//! prefetched batches). [`RankTally`] keeps each rank's own steps, for each rank's rate over a trial's
//! window, and says which ranks and processes were heard from when a job gives no estimate.

use super::event::{ProgressEvent, RankedStep};
use crate::format::trial::{LauncherReport, ProbeReport};
use std::collections::{BTreeMap, BTreeSet, VecDeque};

/// Most steps one rank is kept ahead of the slowest: a job whose ranks drift this far apart is not
/// synchronous, and what it keeps must stay bounded while a silent rank holds every job step back.
const MAX_AHEAD: usize = 10_000;

/// Merges ranks' steps into the job's.
#[derive(Debug, Default)]
pub struct JobSteps {
    world: u32,
    pending: BTreeMap<u32, VecDeque<RankedStep>>,
}

impl JobSteps {
    /// Takes one rank's step; returns the job's steps it completes, in order (none until every rank of
    /// the world has made its step). A rank outside the world it names widens it.
    pub fn push(&mut self, step: RankedStep) -> Vec<ProgressEvent> {
        self.world = self.world.max(step.world_size).max(step.rank + 1);
        let queue = self.pending.entry(step.rank).or_default();
        if queue.len() < MAX_AHEAD {
            queue.push_back(step);
        }
        let mut done = Vec::new();
        while (0..self.world).all(|r| self.pending.get(&r).is_some_and(|q| !q.is_empty())) {
            let steps: Vec<RankedStep> = (0..self.world)
                .filter_map(|r| self.pending.get_mut(&r).and_then(VecDeque::pop_front))
                .collect();
            let sum = |f: fn(&RankedStep) -> Option<u64>| -> Option<u64> {
                steps.iter().map(f).reduce(|a, b| match (a, b) {
                    (None, None) => None,
                    (a, b) => Some(a.unwrap_or(0) + b.unwrap_or(0)),
                })?
            };
            done.push(ProgressEvent::Step {
                at: steps
                    .iter()
                    .map(|s| s.at)
                    .max()
                    .expect("a world of one rank at least"),
                samples: steps.iter().map(|s| s.samples).sum(),
                epoch: steps.iter().filter_map(|s| s.epoch).max(),
                cache_hits: sum(|s| s.cache_hits),
                cache_misses: sum(|s| s.cache_misses),
            });
        }
        done
    }
}

/// Each rank's own steps over a trial, and the processes the probe heard from.
#[derive(Debug, Default)]
pub struct RankTally {
    /// Per rank: (seconds since the start, samples) of each step.
    steps: BTreeMap<u32, Vec<(f64, f64)>>,
    /// The largest world a rank named.
    world: u32,
    /// Every process a probe line came from, with its rank once one of its lines said it.
    processes: BTreeMap<u32, Option<u32>>,
    /// A launcher the probe saw: its process and what it said last.
    launcher: Option<(Option<u32>, LauncherReport)>,
}

impl RankTally {
    /// Records a rank's step `t_s` seconds into the trial.
    pub fn step(&mut self, rank: u32, world_size: u32, t_s: f64, samples: f64) {
        self.world = self.world.max(world_size).max(rank + 1);
        self.steps.entry(rank).or_default().push((t_s, samples));
    }

    /// Records which process a probe line came from, and its rank when the line says.
    pub fn probe_line(&mut self, line: &ProbeReport) {
        if let Some(w) = line.world_size {
            self.world = self.world.max(w);
        }
        if let Some(pid) = line.pid {
            let rank = self.processes.entry(pid).or_default();
            *rank = line.rank.or(*rank);
        }
        if let Some(l) = &line.launcher {
            self.launcher = Some((line.pid, l.clone()));
        }
    }

    /// Whether any step carried a rank: the job is distributed.
    pub fn is_distributed(&self) -> bool {
        !self.steps.is_empty()
    }

    /// Each rank's steps over the whole trial and its samples per second over `(from_s, to_s]`.
    pub fn rates(&self, from_s: f64, to_s: f64) -> BTreeMap<u32, (u64, Option<f64>)> {
        self.steps
            .iter()
            .map(|(&rank, steps)| {
                let samples: f64 = steps
                    .iter()
                    .filter(|(t, _)| *t > from_s && *t <= to_s)
                    .map(|(_, s)| s)
                    .sum();
                let rate = (to_s > from_s).then(|| samples / (to_s - from_s));
                (rank, (steps.len() as u64, rate))
            })
            .collect()
    }

    /// Writes each rank's steps and rate over the window into the probe's report of its ranks (a rank
    /// the probe said nothing of gets a report of its own).
    pub fn fill(&self, probe: &mut ProbeReport, from_s: f64, to_s: f64) {
        for (rank, (steps, rate)) in self.rates(from_s, to_s) {
            probe.add_line(ProbeReport {
                rank: Some(rank),
                world_size: Some(self.world),
                ..ProbeReport::default()
            });
            if let Some(r) = probe.ranks.iter_mut().find(|r| r.rank == rank) {
                r.steps = steps;
                r.samples_per_s = rate;
            }
        }
    }

    /// What was and was not heard from a job that gave no estimate, for an error message (starting
    /// with `; `): the ranks that reported steps and how many, the ranks that did not, and processes
    /// the probe saw load PyTorch without being a rank (a launcher). `None` when no line named a rank
    /// and at most one process spoke, where nothing here says more than the probe's own hint.
    pub fn describe(&self) -> Option<String> {
        let ranked: BTreeSet<u32> = self.processes.values().flatten().copied().collect();
        let launcher_pid = self.launcher.as_ref().and_then(|(pid, _)| *pid);
        let rankless: Vec<u32> = self
            .processes
            .iter()
            .filter(|(p, r)| r.is_none() && Some(**p) != launcher_pid)
            .map(|(p, _)| *p)
            .collect();
        if self.world == 0 && self.processes.len() <= 1 && self.launcher.is_none() {
            return None;
        }
        let mut parts = Vec::new();
        if let Some((pid, l)) = &self.launcher {
            let who = match pid {
                Some(p) => format!("the launcher ({}, pid {p})", l.kind),
                None => format!("the launcher ({})", l.kind),
            };
            parts.push(match l.local_ranks {
                Some(n) => format!("{who} started {n} ranks here after its rendezvous"),
                None => format!(
                    "{who} started no rank: its rendezvous never completed (a job over several nodes waits there until every node's launcher has joined: check --nnodes and the master's address)"
                ),
            });
        }
        if self.world > 0 {
            let mut seen = Vec::new();
            let mut silent = Vec::new();
            let mut idle = Vec::new();
            for r in 0..self.world {
                match self.steps.get(&r) {
                    Some(s) => seen.push(format!("rank {r} reported {} batches", s.len())),
                    None if ranked.contains(&r) => idle.push(r.to_string()),
                    None => silent.push(r.to_string()),
                }
            }
            parts.push(format!("the job has {} ranks", self.world));
            parts.extend(seen);
            if !idle.is_empty() {
                parts.push(format!(
                    "{} loaded PyTorch but iterated no DataLoader",
                    ranks_named(&idle)
                ));
            }
            if !silent.is_empty() {
                parts.push(format!("{} never reported a batch", ranks_named(&silent)));
            }
            parts.push(
                "a job's step counts once every rank has made it, as in synchronous data-parallel training"
                    .into(),
            );
        } else if self
            .launcher
            .as_ref()
            .is_some_and(|(_, l)| l.local_ranks.is_some())
        {
            parts.push(
                "no rank was heard from: each either never imported PyTorch's data loading or runs a Python that ignores PYTHONPATH (`-S`, `-I`)"
                    .into(),
            );
        } else if self.launcher.is_none() {
            parts.push(format!(
                "the probe heard from {} processes, none of which said it was a rank of a distributed job or iterated a DataLoader",
                self.processes.len()
            ));
        }
        if self.world > 0 && !rankless.is_empty() {
            let pids: Vec<String> = rankless.iter().map(|p| p.to_string()).collect();
            parts.push(format!(
                "{} without a rank loaded PyTorch: pid {}",
                if rankless.len() == 1 {
                    "one process"
                } else {
                    "processes"
                },
                pids.join(", ")
            ));
        }
        Some(format!("; {}", parts.join("; ")))
    }

    /// Whether a launcher was seen that never got past its rendezvous, and no rank spoke.
    pub fn launcher_started_no_rank(&self) -> bool {
        self.world == 0
            && self
                .launcher
                .as_ref()
                .is_some_and(|(_, l)| l.local_ranks.is_none())
    }
}

fn ranks_named(ranks: &[String]) -> String {
    match ranks {
        [one] => format!("rank {one}"),
        many => format!("ranks {}", many.join(", ")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    fn step(rank: u32, at: Instant, samples: f64, epoch: u64) -> RankedStep {
        RankedStep {
            rank,
            world_size: 2,
            at,
            samples,
            epoch: Some(epoch),
            cache_hits: None,
            cache_misses: None,
        }
    }

    #[test]
    fn the_jobs_step_waits_for_every_rank_and_holds_all_their_samples() {
        let t0 = Instant::now();
        let later = t0 + Duration::from_millis(30);
        let mut job = JobSteps::default();
        assert!(job.push(step(0, t0, 8.0, 0)).is_empty());
        assert!(job.push(step(0, t0, 8.0, 0)).is_empty());
        let done = job.push(step(1, later, 8.0, 0));
        assert_eq!(
            done,
            vec![ProgressEvent::Step {
                at: later,
                samples: 16.0,
                epoch: Some(0),
                cache_hits: None,
                cache_misses: None,
            }]
        );
        // Rank 0's second step waited; rank 1's second completes it, in a later epoch.
        let done = job.push(step(1, later, 6.0, 1));
        assert!(matches!(
            done[..],
            [ProgressEvent::Step { samples, epoch: Some(1), .. }] if samples == 14.0
        ));
    }

    #[test]
    fn a_silent_rank_holds_every_job_step_back_and_is_named() {
        let t0 = Instant::now();
        let mut job = JobSteps::default();
        let mut tally = RankTally::default();
        for k in 0..5 {
            assert!(job.push(step(0, t0, 8.0, 0)).is_empty());
            tally.step(0, 2, k as f64, 8.0);
        }
        tally.probe_line(&ProbeReport {
            pid: Some(100),
            ..ProbeReport::default()
        });
        tally.probe_line(&ProbeReport {
            pid: Some(101),
            rank: Some(0),
            world_size: Some(2),
            ..ProbeReport::default()
        });
        let said = tally.describe().unwrap();
        assert!(said.contains("the job has 2 ranks"), "{said}");
        assert!(said.contains("rank 0 reported 5 batches"), "{said}");
        assert!(said.contains("rank 1 never reported a batch"), "{said}");
        assert!(said.contains("pid 100"), "{said}");
        // A rank that said hello but iterated nothing is told apart.
        tally.probe_line(&ProbeReport {
            pid: Some(102),
            rank: Some(1),
            ..ProbeReport::default()
        });
        let said = tally.describe().unwrap();
        assert!(
            said.contains("rank 1 loaded PyTorch but iterated no DataLoader"),
            "{said}"
        );
    }

    #[test]
    fn a_launcher_that_started_no_rank_says_it_waits_at_its_rendezvous() {
        let mut tally = RankTally::default();
        tally.probe_line(&ProbeReport {
            pid: Some(5),
            launcher: Some(LauncherReport {
                kind: "torchrun".into(),
                local_ranks: None,
            }),
            ..ProbeReport::default()
        });
        let said = tally.describe().unwrap();
        assert!(
            said.contains("the launcher (torchrun, pid 5) started no rank"),
            "{said}"
        );
        tally.probe_line(&ProbeReport {
            pid: Some(5),
            launcher: Some(LauncherReport {
                kind: "torchrun".into(),
                local_ranks: Some(2),
            }),
            ..ProbeReport::default()
        });
        let said = tally.describe().unwrap();
        assert!(said.contains("started 2 ranks here"), "{said}");
        assert!(said.contains("no rank was heard from"), "{said}");
    }

    #[test]
    fn one_process_alone_adds_nothing_to_the_probes_hint() {
        let mut tally = RankTally::default();
        tally.probe_line(&ProbeReport {
            pid: Some(7),
            torch: Some(true),
            ..ProbeReport::default()
        });
        assert_eq!(tally.describe(), None);
        tally.probe_line(&ProbeReport {
            pid: Some(8),
            ..ProbeReport::default()
        });
        assert!(tally.describe().unwrap().contains("2 processes"));
    }

    #[test]
    fn each_ranks_rate_is_its_own_samples_over_the_window() {
        let mut tally = RankTally::default();
        for k in 0..10 {
            tally.step(0, 2, k as f64, 8.0);
            tally.step(1, 2, k as f64 * 2.0, 8.0);
        }
        let rates = tally.rates(1.0, 9.0);
        assert_eq!(rates[&0], (10, Some(8.0 * 8.0 / 8.0)));
        assert_eq!(rates[&1], (10, Some(8.0 * 4.0 / 8.0)));
        let mut probe = ProbeReport::default();
        tally.fill(&mut probe, 1.0, 9.0);
        assert_eq!(probe.world_size, Some(2));
        assert_eq!(probe.ranks.len(), 2);
        assert_eq!(probe.ranks[1].samples_per_s, Some(4.0));
    }
}
